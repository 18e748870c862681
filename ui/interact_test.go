package ui_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/storage"
	"github.com/stemflow/stem/stores/memstore"
	"github.com/stemflow/stem/ui"
)

// errNegative is a declared error the tally workflow replies with.
var errNegative = errors.New("negative amount")

func init() { runtime.DeclareError("ui.negative", errNegative) }

// registerInteract registers the updates and "tally", which takes "add"
// updates (an int each, no validator): it appends the total after a
// positive one to its stream "totals" and replies it, replies errNegative
// to a negative one, and replies the total to 0 and ends. It never takes
// "rename" (whose validator refuses an empty name) or "never".
func registerInteract(t *testing.T, e *runtime.Engine) {
	t.Helper()
	must(t, runtime.RegisterUpdate[int, int](e, "add", nil))
	must(t, runtime.RegisterUpdate[int, int](e, "never", nil))
	must(t, runtime.RegisterUpdate[string, string](e, "rename", func(s string) error {
		if s == "" {
			return errors.New("a name is needed")
		}
		return nil
	}))
	must(t, runtime.Register(e, "tally", func(c *runtime.WorkflowContext, total int) (int, error) {
		for {
			u, err := runtime.AwaitUpdate[int, int](c, "add", "add")
			if err != nil {
				return 0, err
			}
			switch {
			case u.Request < 0:
				if err := u.Fail(c, fmt.Errorf("add %d: %w", u.Request, errNegative)); err != nil {
					return 0, err
				}
				continue
			case u.Request == 0:
				return total, u.Reply(c, total)
			}
			total += u.Request
			if err := runtime.Append(c, "totals", total); err != nil {
				return 0, err
			}
			if err := u.Reply(c, total); err != nil {
				return 0, err
			}
		}
	}))
}

// newInteractDash is a dashboard over st, as stem ui serves one: its
// engine has no workflows or updates registered, and another engine on
// the store works the test workflows and tally. It is ready once the
// catalog records the updates.
func newInteractDash(t *testing.T, st storage.Store) *dash {
	t.Helper()
	d := &dash{t: t, store: st, access: ui.AccessOperate}
	t.Cleanup(func() { d.store.Close() })
	worker, err := runtime.New(runtime.Config{Store: d.store, PollInterval: 5 * time.Millisecond, HeartbeatInterval: 50 * time.Millisecond})
	must(t, err)
	t.Cleanup(func() { worker.Close() })
	register(t, worker)
	registerInteract(t, worker)
	runEngine(t, worker)
	d.e, err = runtime.New(runtime.Config{Store: d.store, PollInterval: 5 * time.Millisecond})
	must(t, err)
	t.Cleanup(func() { d.e.Close() })
	d.h = ui.New(d.e, ui.Options{Authorize: d.authorize, AllowedHosts: testHosts})
	eventually(t, "the catalog records the updates", func() bool {
		cat, err := d.e.Catalog(context.Background())
		return err == nil && strings.Contains(fmt.Sprint(cat.Events), storage.UpdateTopic("add"))
	})
	return d
}

var updateRows = regexp.MustCompile(`<tr data-update-id="([^"]*)" data-state="([^"]*)">`)

// updatesOf lists the updates a run page shows, as ID=state.
func updatesOf(res *response) []string {
	var out []string
	for _, m := range updateRows.FindAllStringSubmatch(res.body, -1) {
		out = append(out, m[1]+"="+m[2])
	}
	return out
}

// A run's page lists its updates and streams, live, and sends it an
// update: checked as JSON and against the recorded schema, an update with
// a validator only when "send unvalidated" is ticked, the reply quoted
// when it comes in time and pending otherwise; a finished run offers no
// update, and a read-only page none. On the memstore and on SQLite.
func TestRunPageUpdatesAndStreams(t *testing.T) {
	t.Parallel()
	for name, open := range map[string]func(*testing.T) storage.Store{
		"memstore": func(*testing.T) storage.Store { return memstore.New(memstore.Options{}) },
		"sqlite":   func(t *testing.T) storage.Store { return newSQLiteDash(t, false, nil).store },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			updatesAndStreams(t, newInteractDash(t, open(t)))
		})
	}
}

func updatesAndStreams(t *testing.T, d *dash) {
	d.start("tally", "t-1", `100`)
	d.waitStatus("t-1", "waiting")
	page := d.get("/"+runPath("t-1")).want(t, http.StatusOK)
	page.contains(t, `<button type="button" data-action="update" data-dialog="dlg-update">Send update</button>`,
		`<form method="post" action="../runs/t-1/update" id="update-form">`,
		`<select name="update" required><option value="add">add</option><option value="never">never</option><option value="rename" data-validator="true">rename (has a validator)</option></select>`,
		`<textarea name="request" rows="8" required spellcheck="false" class="mono" placeholder="{&quot;amount&quot;: 5}" data-json="request" data-error="request-error"></textarea>`,
		`<input type="checkbox" name="unvalidated" value="1"> Send unvalidated`, `<p id="request-error" class="error" role="alert" hidden></p>`,
		`<body data-refresh="2000">`, `<h2>Waiting for an update</h2>`, `Update: <code class="update">add</code>.`).
		lacks(t, `id="updates"`, `id="streams"`, `stem.update/`)

	d.actThenRead("t-1", "update", url.Values{"update": {"add"}, "request": {" 5 "}}, "ok", "Update add (u-", ") replied: 105")

	// Refused, nothing written: what is not JSON, what the schema refuses,
	// an update no worker records, and one with a validator, unticked.
	for _, bad := range []struct{ update, request, words string }{
		{"add", `{`, "its request is not JSON"},
		{"add", ``, "its request is empty"},
		{"", `1`, "choose which update to send"},
		{"add", `"five"`, "document does not match schema: $: want integer, got string"},
		{"ad", `1`, `no engine that shares this store records update &#34;ad&#34; (known: add, never, rename)`},
		{"rename", `"Ada"`, `update &#34;rename&#34; has a validator, which only the application that handles it can run`},
	} {
		d.actThenRead("t-1", "update", url.Values{"update": {bad.update}, "request": {bad.request}}, "error", "Could not send the update: ", bad.words)
	}
	if us, err := d.e.Updates(context.Background(), "t-1", 0, 0); err != nil || len(us) != 1 {
		t.Fatalf("refused updates were written: %v %v", us, err)
	}

	// The workflow's error reply is an error; a reply that does not come
	// in the wait is pending.
	d.actThenRead("t-1", "update", url.Values{"update": {"add"}, "request": {"-3"}}, "error", ") replied with an error: add -3: negative amount")
	quick := d.h
	d.h = ui.New(d.e, ui.Options{Authorize: d.authorize, AllowedHosts: testHosts, UpdateWait: 50 * time.Millisecond})
	d.actThenRead("t-1", "update", url.Values{"update": {"rename"}, "request": {`"Ada"`}, "unvalidated": {"1"}}, "ok", "Update rename sent as u-", "No reply within 50ms: it is pending")
	d.h = quick
	for _, n := range []string{"1", "2", "3", "4", "5"} {
		d.actThenRead("t-1", "update", url.Values{"update": {"add"}, "request": {n}}, "ok", "replied: ")
	}

	page = d.get("/"+runPath("t-1")).want(t, http.StatusOK)
	got := updatesOf(page)
	if len(got) != 8 || !strings.HasSuffix(got[0], "=replied") || !strings.HasSuffix(got[1], "=failed") || !strings.HasSuffix(got[2], "=pending") {
		t.Fatalf("the updates listed: %v", got)
	}
	page.contains(t, `<section id="updates">`, `<pre class="out">5</pre></td>`, `<pre class="out">105</pre></td>`,
		`<pre class="first">add -3: negative amount</pre></div><code class="error-name">ui.negative</code>`, `<span class="sub">waiting for the run</span>`,
		`<section id="streams">`, `<div class="stream" data-stream="totals" data-length="6" data-closed="false">`, "6 values, open, last written <time",
		`<p class="note">The last 5, from offset 1.</p>`, `<li data-offset="1"><span class="n">1</span> <pre class="out">106</pre></li>`,
		`<li data-offset="5"><span class="n">5</span> <pre class="out">120</pre></li>`).
		lacks(t, `<li data-offset="0">`)

	// Read-only: no update to send, and a post is refused.
	r := httpGet("/" + runPath("t-1"))
	r.Header.Set("X-Test-Access", "read")
	d.do(r).want(t, http.StatusOK).lacks(t, `data-action="update"`, `id="dlg-update"`).contains(t, `<section id="updates">`)
	cookie, token := d.session("/" + runPath("t-1"))
	post := postRequest("/"+runPath("t-1")+"/update", url.Values{"csrf": {token}, "update": {"add"}, "request": {"1"}}, cookie)
	post.Header.Set("X-Test-Access", "read")
	d.do(post).want(t, http.StatusForbidden)
	d.post("/"+runPath("t-1")+"/update", url.Values{"update": {"add"}, "request": {"1"}}, cookie).want(t, http.StatusForbidden)
	if us, _ := d.e.Updates(context.Background(), "t-1", 0, 0); len(us) != 8 {
		t.Fatalf("refused posts sent updates: %d updates", len(us))
	}

	// The run ends: the update it never took is unhandled, and the page
	// offers no update; one posted all the same is refused.
	d.actThenRead("t-1", "update", url.Values{"update": {"add"}, "request": {"0"}}, "ok", "replied: 120")
	d.waitStatus("t-1", "complete")
	page = d.get("/"+runPath("t-1")).want(t, http.StatusOK)
	page.contains(t, `data-state="unhandled"`, "never: the run ended without replying").lacks(t, `data-action="update"`, "data-refresh")
	d.actThenRead("t-1", "update", url.Values{"update": {"add"}, "request": {"1"}}, "error", "Could not send the update: ", "the run has ended")
}
