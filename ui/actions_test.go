package ui_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stemflow/stem/storage"
)

// actThenRead posts an action and reads the page it redirects to, failing
// unless the flash is of kind and holds every part of want.
func (d *dash) actThenRead(id, action string, form url.Values, kind string, want ...string) *response {
	d.t.Helper()
	res := d.act(id, action, form)
	page := d.follow("/"+runPath(id)+"/"+action, res).want(d.t, http.StatusOK)
	gotKind, msg := flashOf(page.body)
	if gotKind != kind {
		d.t.Fatalf("%s %s: flash %q %q, want kind %q", action, id, gotKind, msg, kind)
	}
	for _, w := range want {
		if !strings.Contains(msg, w) {
			d.t.Errorf("%s %s: flash %q lacks %q", action, id, msg, w)
		}
	}
	return page
}

// Each action does what it says and says so after the redirect; a refusal
// is an error flash in the engine's words, and changes nothing: on the
// memstore and on SQLite, the default store.
func TestActionsAndTheirOutcomes(t *testing.T) {
	t.Parallel()
	for name, open := range map[string]func(*testing.T, bool, storage.Clock) *dash{"memstore": newDash, "sqlite": newSQLiteDash} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			actionsAndOutcomes(t, open(t, true, nil))
		})
	}
}

func actionsAndOutcomes(t *testing.T, d *dash) {
	d.start("approval", "order-1", `{"note":"rush"}`)
	d.waitStatus("order-1", "waiting")

	d.actThenRead("order-1", "pause", nil, "ok", "Paused")
	d.waitStatus("order-1", "paused")
	page := d.get("/"+runPath("order-1")).want(t, http.StatusOK)
	page.contains(t, `data-action="resume"`, `<section id="wait" class="callout">`, "Paused while waiting for an event").lacks(t, `data-action="pause"`)
	d.actThenRead("order-1", "resume", nil, "ok", "Resumed")
	d.waitStatus("order-1", "waiting")
	d.actThenRead("order-1", "resume", nil, "error", "Could not resume the run")

	// An event is checked as JSON, then against the topic's type.
	for _, bad := range []struct{ topic, payload, words string }{
		{"order.approved", `{"by": `, "not JSON"},
		{"order.approved", ``, "payload is empty"},
		{"", `{}`, "needs a topic"},
		{"order.approved", `{"by": 7}`, "Could not send the event"},
		{"no.such.topic", `{}`, "no.such.topic"},
	} {
		d.actThenRead("order-1", "event", url.Values{"topic": {bad.topic}, "payload": {bad.payload}}, "error", bad.words)
		if st := d.status("order-1"); st != "waiting" {
			t.Fatalf("after a refused event (%q %q): run is %s, want waiting", bad.topic, bad.payload, st)
		}
	}
	d.actThenRead("order-1", "event", url.Values{"topic": {"order.approved"}, "payload": {` {"by": "Ada"} `}}, "ok", "order.approved")
	info := d.waitStatus("order-1", "complete")
	if string(info.Output) != `"approved by Ada"` {
		t.Errorf("output %s, want the approver", info.Output)
	}

	// A finished run cannot be paused, terminated or sent an event; it can
	// be restarted.
	page = d.actThenRead("order-1", "terminate", url.Values{"reason": {"too late"}}, "error", "Could not terminate the run", "complete")
	page.lacks(t, `data-action="terminate"`, `data-action="pause"`, `data-action="event"`).contains(t, `data-action="restart"`)
	d.actThenRead("order-1", "event", url.Values{"topic": {"order.approved"}, "payload": {`{"by":"Bo"}`}}, "error", "Could not send the event")
	d.actThenRead("order-1", "restart", url.Values{"step": {"nope@v1"}}, "error", "Could not restart the run", "nope@v1")
	d.actThenRead("order-1", "restart", url.Values{"step": {"approved"}}, "ok", "approved")
	d.waitStatus("order-1", "waiting")
	page = d.get("/"+runPath("order-1")).want(t, http.StatusOK)
	page.contains(t, `data-execution="2"`, `<li class="step" data-key="check@v1" data-status="complete">`, `Carried over from execution 1`)

	d.actThenRead("order-1", "terminate", url.Values{"reason": {"customer cancelled"}}, "ok", "customer cancelled")
	d.waitStatus("order-1", "terminated")
	d.get("/"+runPath("order-1")).contains(t, `id="error">stem: run terminated: customer cancelled</pre>`)
	d.actThenRead("order-1", "restart", url.Values{"step": {""}}, "ok", "from the top")
	d.waitStatus("order-1", "waiting")
	d.get("/"+runPath("order-1")).contains(t, `data-execution="3"`, `data-action="cancel"`)

	// Cancel: a hostile reason is refused with nothing changed; then the
	// workflow sees the cancellation and ends with it.
	d.actThenRead("order-1", "cancel", url.Values{"reason": {"bad\x00reason"}}, "error", "Could not cancel the run", "control character")
	if st := d.status("order-1"); st != "waiting" {
		t.Fatalf("after a refused cancel: run is %s, want waiting", st)
	}
	d.actThenRead("order-1", "cancel", url.Values{"reason": {"no longer wanted"}}, "ok", "Cancellation requested")
	d.waitStatus("order-1", "errored")
	d.get("/"+runPath("order-1")).contains(t, "no longer wanted", "stem: canceled").lacks(t, `data-action="cancel"`)
}

// An unknown action or run is a 404 in words; a flash that the dashboard
// did not sign, or signed for another run, is not shown.
func TestActionsOnWhatIsNotThere(t *testing.T) {
	t.Parallel()
	d := newDash(t, true, nil)
	d.start("approval", "order-1", `{}`)
	d.start("approval", "order-2", `{}`)
	d.waitStatus("order-1", "waiting")

	d.act("order-1", "explode", nil).want(t, http.StatusNotFound).contains(t, `&#34;explode&#34; is not an action`)
	page := "/" + runPath("order-1")
	cookie, token := d.session(page)
	d.post("/"+runPath("order-9")+"/pause", url.Values{"csrf": {token}}, cookie).want(t, http.StatusNotFound).contains(t, "There is no run &#34;order-9&#34;")

	res := d.act("order-1", "pause", nil)
	loc := res.Header.Get("Location")
	if !strings.Contains(loc, "flash=") {
		t.Fatalf("Location %q has no flash", loc)
	}
	flash := loc[strings.Index(loc, "flash=")+len("flash="):]
	d.get(page+"?flash="+flash).contains(t, `id="flash"`)
	d.get("/"+runPath("order-2")+"?flash="+flash).want(t, http.StatusOK).lacks(t, `id="flash"`)
	forged := "b2sKQWxsIHdlbGw.AAAAAAAAAAAAAAAAAAAAAA"
	d.get(page+"?flash="+forged).want(t, http.StatusOK).lacks(t, `id="flash"`)
	d.get(page+"?flash=garbage").want(t, http.StatusOK).lacks(t, `id="flash"`)
	if _, err := d.e.Get(context.Background(), "order-1"); err != nil {
		t.Fatal(err)
	}
}

// A running step shows as running; a pause while it runs is requested,
// shown, and can be taken back; it takes effect at the step's end.
func TestPauseWhileAStepRuns(t *testing.T) {
	t.Parallel()
	d := newDash(t, true, nil)
	gate := make(chan struct{})
	gates.Store("gated-1", gate)
	d.start("gated", "gated-1", `0`)
	eventually(t, "the step shows as running", func() bool {
		return strings.Contains(d.get("/"+runPath("gated-1")).body, `<li class="step" data-key="hold@v1" data-status="running">`)
	})
	d.get("/"+runPath("gated-1")).contains(t, `data-status="running"`, "Attempt 1 running since <time")

	d.actThenRead("gated-1", "pause", nil, "ok", "Pause requested")
	page := d.get("/"+runPath("gated-1")).want(t, http.StatusOK)
	page.contains(t, "A pause is requested", `data-action="resume"`).lacks(t, `data-action="pause"`)
	d.actThenRead("gated-1", "resume", nil, "ok", "Resumed")
	d.actThenRead("gated-1", "pause", nil, "ok", "Pause requested")
	close(gate)
	d.waitStatus("gated-1", "paused")
	page = d.get("/"+runPath("gated-1")).want(t, http.StatusOK)
	sameIDs(t, "steps of the paused run", stepsOf(page), []string{"hold@v1=complete"})
	d.actThenRead("gated-1", "resume", nil, "ok", "Resumed")
	info := d.waitStatus("gated-1", "complete")
	if string(info.Output) != `"released"` {
		t.Fatalf("output %s", info.Output)
	}
}
