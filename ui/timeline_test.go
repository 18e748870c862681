package ui

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/stores/memstore"
)

// t0 is when the test executions start.
var t0 = time.Date(2026, 3, 4, 12, 3, 4, 120_000_000, time.UTC)

// ms is t0 plus n milliseconds.
func ms(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }

func msPtr(n int) *time.Time { t := ms(n); return &t }

// wakeAt is a sleep's output: its wake time.
func wakeAt(t time.Time) json.RawMessage {
	b, _ := json.Marshal(t)
	return b
}

// attempt is an attempt of key from a to b (ms), failed with errText
// when not "", retried at retry (ms) when above 0.
func attempt(key string, n, a, b int, errText string, retry int) runtime.Attempt {
	at := runtime.Attempt{Key: key, Number: n, Started: ms(a), Ended: ms(b), Error: errText}
	if retry > 0 {
		at.RetryAt = msPtr(retry)
	}
	return at
}

// oneExecution is a timeline input of one execution from t0, ended at
// end (ms) unless live.
func oneExecution(live bool, end int, now int, steps ...runtime.StepInfo) timelineIn {
	x := runtime.ExecutionInfo{Number: 1, StartedAt: t0, Status: runtime.StatusComplete}
	if !live {
		x.EndedAt = msPtr(end)
	} else {
		x.Status = runtime.StatusWaiting
	}
	return timelineIn{RunID: "r-1", Base: "../", Href: "../runs/r-1", Shown: 1, Execs: []runtime.ExecutionInfo{x}, Live: live, Steps: steps, Now: ms(now)}
}

// drawn returns the timeline's bar for key, failing the test without one.
func drawn(t *testing.T, v *timelineView, key string) tlItem {
	t.Helper()
	for _, it := range v.Items {
		if it.Key == key {
			return it
		}
	}
	t.Fatalf("no bar for %s among %d", key, len(v.Items))
	return tlItem{}
}

// Steps that overlap in time (futures) get lanes side by side; a step
// after them takes the first lane free again.
func TestTimelineLanesForOverlappingSteps(t *testing.T) {
	v, times := timeline(oneExecution(false, 1000, 2000,
		runtime.StepInfo{Key: "a@v1", Kind: runtime.KindStep, Status: runtime.StepComplete, Seq: 1, CreatedAt: ms(400), Attempts: []runtime.Attempt{attempt("a@v1", 1, 10, 400, "", 0)}},
		runtime.StepInfo{Key: "b@v1", Kind: runtime.KindStep, Status: runtime.StepComplete, Seq: 2, CreatedAt: ms(600), Attempts: []runtime.Attempt{attempt("b@v1", 1, 12, 600, "", 0)}},
		runtime.StepInfo{Key: "c@v1", Kind: runtime.KindStep, Status: runtime.StepComplete, Seq: 3, CreatedAt: ms(300), Attempts: []runtime.Attempt{attempt("c@v1", 1, 200, 300, "", 0)}},
		runtime.StepInfo{Key: "d@v1", Kind: runtime.KindStep, Status: runtime.StepComplete, Seq: 4, CreatedAt: ms(1000), Attempts: []runtime.Attempt{attempt("d@v1", 1, 600, 1000, "", 0)}},
	))
	lanes := map[string]int{}
	for _, k := range []string{"a@v1", "b@v1", "c@v1", "d@v1"} {
		lanes[k] = drawn(t, v, k).Lane
	}
	if lanes["a@v1"] == lanes["b@v1"] || lanes["c@v1"] == lanes["a@v1"] || lanes["c@v1"] == lanes["b@v1"] {
		t.Errorf("overlapping steps share a lane: %v", lanes)
	}
	if v.Lanes != 3 || lanes["d@v1"] != 1 {
		t.Errorf("lanes %v of %d; want 3 lanes, d@v1 (after a@v1 ended) back in lane 1", lanes, v.Lanes)
	}
	if it := drawn(t, v, "a@v1"); it.X != "1.00%" || it.W != "39.00%" || it.Caption != "390ms" {
		t.Errorf("a@v1 is drawn at %s, %s wide, took %q; want 1.00%%, 39.00%%, 390ms", it.X, it.W, it.Caption)
	}
	if v.Start.Text != "12:03:04.120" || v.End.Text != "12:03:05.120" || v.Span != "1s" {
		t.Errorf("the axis runs %s to %s (%s), want 12:03:04.120 to 12:03:05.120 (1s)", v.Start.Text, v.End.Text, v.Span)
	}
	if w := times[1]; w.Start.Text != "12:03:04.132" || w.End.Text != "12:03:04.720" || w.Took != "588ms" {
		t.Errorf("b@v1 is listed %s → %s (%s)", w.Start.Text, w.End.Text, w.Took)
	}

	// Steps one after another share a lane, however narrow: their bars,
	// widened to be seen, overlap, and that is no concurrency.
	var seq []runtime.StepInfo
	for i := range 100 {
		key := "s" + string(rune('a'+i%26)) + "@v1#" + strconv.Itoa(i)
		seq = append(seq, runtime.StepInfo{Key: key, Kind: runtime.KindStep, Status: runtime.StepComplete, Seq: int64(i + 1), CreatedAt: ms(i*1000 + 2),
			Attempts: []runtime.Attempt{attempt(key, 1, i*1000, i*1000+2, "", 0)}})
	}
	v, _ = timeline(oneExecution(false, 100_000, 100_000, seq...))
	if v.Lanes != 1 || len(v.Items) != 100 {
		t.Errorf("100 steps one after another: %d bars in %d lanes, want 100 in 1", len(v.Items), v.Lanes)
	}
}

// A step's bar holds its attempts, the failed ones marked, and the
// backoff before each retry; a retrying step goes on to its retry's due
// time, and a running one to now.
func TestTimelineAttempts(t *testing.T) {
	v, _ := timeline(oneExecution(true, 0, 1000,
		runtime.StepInfo{Key: "pay@v1", Kind: runtime.KindStep, Status: runtime.StepComplete, Seq: 1, CreatedAt: ms(400), Attempts: []runtime.Attempt{
			attempt("pay@v1", 1, 0, 50, "declined", 100), attempt("pay@v1", 2, 100, 150, "declined", 300), attempt("pay@v1", 3, 300, 400, "", 0)}},
		runtime.StepInfo{Key: "ship@v1", Kind: runtime.KindStep, Status: runtime.StepRetrying, NextAttemptAt: msPtr(1500), Attempts: []runtime.Attempt{
			attempt("ship@v1", 1, 500, 600, "busy", 1500)}},
		runtime.StepInfo{Key: "mail@v1", Kind: runtime.KindStep, Status: runtime.StepRunning, Attempt: 2, Started: ms(900), Attempts: []runtime.Attempt{
			attempt("mail@v1", 1, 700, 800, "later", 900)}},
	))
	pay := drawn(t, v, "pay@v1")
	var classes []string
	for _, s := range pay.Segs {
		classes = append(classes, s.Class)
	}
	if got := strings.Join(classes, ","); got != "tl-attempt failed,tl-backoff,tl-attempt failed,tl-backoff,tl-attempt" {
		t.Errorf("pay@v1's bar: %s", got)
	}
	if pay.Attempts != 3 || pay.Failed != 2 || pay.State != "complete" || pay.Open {
		t.Errorf("pay@v1: %d attempts, %d failed, %s, open %v", pay.Attempts, pay.Failed, pay.State, pay.Open)
	}
	if s := pay.Segs[1]; s.X != "12.50%" || s.W != "12.50%" || !strings.Contains(s.Title, "attempt 2 due at 12:03:04.220") {
		t.Errorf("pay@v1's first backoff: at %s, %s wide, %q", s.X, s.W, s.Title)
	}
	ship := drawn(t, v, "ship@v1")
	if !ship.Open || ship.State != "retrying" || len(ship.Segs) != 2 || ship.Segs[1].Class != "tl-backoff" {
		t.Errorf("the retrying step: open %v, %s, %+v", ship.Open, ship.State, ship.Segs)
	}
	mail := drawn(t, v, "mail@v1")
	if !mail.Open || mail.Attempts != 2 || mail.Segs[len(mail.Segs)-1].Class != "tl-attempt running" || mail.W != percent(30) {
		t.Errorf("the running step: open %v, %d attempts, %+v, %s wide", mail.Open, mail.Attempts, mail.Segs, mail.W)
	}
}

// A timer whose wake time has not come is pending while its execution
// goes on, complete once it has come, and cancelled (never fired) when
// the execution ended first.
func TestTimelineTimers(t *testing.T) {
	nap := func(wake int) runtime.StepInfo {
		return runtime.StepInfo{Key: "nap", Kind: runtime.KindSleep, Status: runtime.StepComplete, Seq: 1, CreatedAt: ms(100), Output: wakeAt(ms(wake))}
	}
	v, times := timeline(oneExecution(true, 0, 500, nap(3_600_000)))
	if it := drawn(t, v, "nap"); it.State != "pending" || !it.Open || it.W != "80.00%" {
		t.Errorf("a timer not yet due: %s, open %v, %s wide; want pending, open to the axis's end", it.State, it.Open, it.W)
	}
	if w := times[0]; w.State != "pending" || w.Took != "1h" || !strings.Contains(w.Note, "wakes at 13:03:04.120") {
		t.Errorf("a timer not yet due is listed %+v", w)
	}
	v, _ = timeline(oneExecution(true, 0, 500, nap(300)))
	if it := drawn(t, v, "nap"); it.State != "complete" || it.Open {
		t.Errorf("a timer past due: %s, open %v; want complete", it.State, it.Open)
	}
	v, times = timeline(oneExecution(false, 400, 5000, nap(3_600_000)))
	if it := drawn(t, v, "nap"); it.State != "cancelled" || it.Open || it.Caption != "300ms" {
		t.Errorf("a timer its execution outlived: %s, open %v, took %s; want cancelled after 300ms", it.State, it.Open, it.Caption)
	}
	if !strings.Contains(times[0].Note, "never fired") {
		t.Errorf("a cancelled timer's note: %q", times[0].Note)
	}
}

// A timer that a select decided before it fired lost it: the first select
// after it, when the select recorded no cases, or one that names it among
// its cases; a select whose cases leave it out does not count. A select's
// mark names its winner.
func TestTimelineLostTimer(t *testing.T) {
	steps := func(selInput string) []runtime.StepInfo {
		return []runtime.StepInfo{
			{Key: "give-up#0", Kind: runtime.KindSleep, Status: runtime.StepComplete, Seq: 1, CreatedAt: ms(100), Output: wakeAt(ms(3_600_000))},
			{Key: "ok#0", Kind: runtime.KindEvent, Status: runtime.StepComplete, Seq: 2, CreatedAt: ms(400), Output: json.RawMessage(`"yes"`)},
			{Key: "pick#0", Kind: runtime.KindSelect, Status: runtime.StepComplete, Seq: 3, CreatedAt: ms(401), Output: json.RawMessage(`0`), Input: json.RawMessage(selInput)},
		}
	}
	v, times := timeline(oneExecution(true, 0, 1000, steps("")...))
	timer := drawn(t, v, "give-up#0")
	if timer.State != "lost" || timer.Open || timer.Caption != "301ms" {
		t.Errorf("the timer that lost: %s, open %v, took %s; want lost, ended at the select", timer.State, timer.Open, timer.Caption)
	}
	if !strings.Contains(times[0].Note, "lost select pick#0") {
		t.Errorf("the lost timer's note: %q", times[0].Note)
	}
	if len(v.Marks) != 1 || v.Marks[0].Won != "case 1" || v.Marks[0].Label != "pick#0 → case 1" {
		t.Errorf("the select's marks: %+v", v.Marks)
	}
	if ev := drawn(t, v, "ok#0"); ev.Caption != "300ms" || ev.X != "10.00%" {
		t.Errorf("the event wait (from the timer's call to its delivery): at %s, took %s", ev.X, ev.Caption)
	}

	v, _ = timeline(oneExecution(true, 0, 1000, steps(`["ok#0","give-up#0"]`)...))
	if timer := drawn(t, v, "give-up#0"); timer.State != "lost" {
		t.Errorf("a timer among a select's recorded cases that lost: %s", timer.State)
	}
	if v.Marks[0].Won != "ok#0" {
		t.Errorf("the select with its cases recorded names its winner %q, want ok#0", v.Marks[0].Won)
	}
	v, _ = timeline(oneExecution(true, 0, 1000, steps(`["ok#0","other#0"]`)...))
	if timer := drawn(t, v, "give-up#0"); timer.State != "pending" {
		t.Errorf("a timer not among the select's cases: %s, want pending", timer.State)
	}
}

// A child's bar spans the child run's own start to end (or now), and
// links to its page; without the child's record it spans as a wait would.
func TestTimelineChildDurations(t *testing.T) {
	in := oneExecution(true, 0, 2000,
		runtime.StepInfo{Key: "prep@v1", Kind: runtime.KindStep, Status: runtime.StepComplete, Seq: 1, CreatedAt: ms(100), Attempts: []runtime.Attempt{attempt("prep@v1", 1, 0, 100, "", 0)}},
		runtime.StepInfo{Key: "visa", Kind: runtime.KindChild, Status: runtime.StepComplete, Seq: 2, CreatedAt: ms(900)},
		runtime.StepInfo{Key: "later", Kind: runtime.KindChild, Status: runtime.StepComplete, Seq: 3, CreatedAt: ms(1500)},
		runtime.StepInfo{Key: "now", Kind: runtime.KindChild, Status: runtime.StepWaiting},
	)
	in.Children = map[string]childTimes{
		"r-1/visa": {Start: ms(150), End: msPtr(850), Status: "complete"},
		"r-1/now":  {Start: ms(1600), Status: "running"},
	}
	v, times := timeline(in)
	visa := drawn(t, v, "visa")
	if visa.Caption != "700ms" || visa.X != "7.50%" || visa.Href != "../runs/r-1%2Fvisa" || visa.ChildID != "r-1/visa" {
		t.Errorf("the child: at %s, took %s, links %s", visa.X, visa.Caption, visa.Href)
	}
	if times[1].Took != "700ms" || !strings.Contains(times[1].Note, "child run complete") {
		t.Errorf("the child is listed %+v", times[1])
	}
	if later := drawn(t, v, "later"); later.Caption != "650ms" {
		t.Errorf("a child without its record spans from the call before (the child visa, ended at 850ms) to its outcome: took %s, want 650ms", later.Caption)
	}
	if now := drawn(t, v, "now"); !now.Open || now.Caption != "400ms" || !strings.HasSuffix(now.Label, "400ms so far") {
		t.Errorf("a running child: open %v, took %s, label %q", now.Open, now.Caption, now.Label)
	}
}

// An event wait begins where the call before it ended (a sleep's wake
// time, when it held the run that long), or at the execution's start;
// one not yet delivered goes on to now. Carried-over steps are listed,
// not drawn.
func TestTimelineWaits(t *testing.T) {
	in := oneExecution(true, 0, 3000,
		runtime.StepInfo{Key: "old@v1", Kind: runtime.KindStep, Status: runtime.StepComplete, Seq: 1, ForkedFrom: 1, CreatedAt: t0.Add(-time.Hour),
			Attempts: []runtime.Attempt{{Key: "old@v1", Number: 1, Started: t0.Add(-time.Hour), Ended: t0.Add(-time.Hour)}}},
		runtime.StepInfo{Key: "first", Kind: runtime.KindEvent, Status: runtime.StepComplete, Seq: 2, CreatedAt: ms(500)},
		runtime.StepInfo{Key: "nap", Kind: runtime.KindSleep, Status: runtime.StepComplete, Seq: 3, CreatedAt: ms(600), Output: wakeAt(ms(1000))},
		runtime.StepInfo{Key: "second", Kind: runtime.KindEvent, Status: runtime.StepFailed, Seq: 4, CreatedAt: ms(1800), Err: runtime.ErrEventTimeout},
		runtime.StepInfo{Key: "third", Kind: runtime.KindEvent, Status: runtime.StepWaiting},
	)
	v, times := timeline(in)
	if v.Carried != 1 || times[0].Start == nil {
		t.Errorf("carried over: %d drawn aside, listed %+v", v.Carried, times[0])
	}
	if first := drawn(t, v, "first"); first.X != "0.00%" || first.Caption != "500ms" {
		t.Errorf("the first wait: at %s, took %s; want from the execution's start", first.X, first.Caption)
	}
	if second := drawn(t, v, "second"); second.Caption != "800ms" || second.State != "timed_out" {
		t.Errorf("the wait after a sleep: took %s, %s; want 800ms from its wake, timed out", second.Caption, second.State)
	}
	if third := drawn(t, v, "third"); !third.Open || third.Caption != "1.2s" || third.State != "waiting" {
		t.Errorf("the wait going on: open %v, took %s, %s", third.Open, third.Caption, third.State)
	}
}

// Several executions share the run's axis, each linking to its own
// timeline; the one shown is marked.
func TestTimelineExecutionsStrip(t *testing.T) {
	in := timelineIn{RunID: "r-1", Base: "../", Href: "../runs/r-1", Shown: 1, Now: ms(10_000), Execs: []runtime.ExecutionInfo{
		{Number: 1, StartedAt: t0, EndedAt: msPtr(2000), Status: runtime.StatusErrored},
		{Number: 2, StartedAt: ms(6000), Status: runtime.StatusRunning, ForkedFrom: 1, FromStep: "pay@v1"},
	}}
	v, _ := timeline(in)
	if len(v.Strip) != 2 {
		t.Fatalf("strip: %+v", v.Strip)
	}
	one, two := v.Strip[0], v.Strip[1]
	if !one.Shown || one.X != "0.00%" || one.W != "20.00%" || one.Href != "../runs/r-1?execution=1" || one.Duration != "2s" {
		t.Errorf("execution 1 on the strip: %+v", one)
	}
	if two.Shown || !two.Open || two.X != "60.00%" || two.W != "40.00%" || !strings.Contains(two.Title, "restarted from step pay@v1 of execution 1") {
		t.Errorf("execution 2 on the strip: %+v", two)
	}
	if v.Live || v.End.Text != "12:03:06.120" {
		t.Errorf("execution 1's axis ends at %s (live %v), want its end", v.End.Text, v.Live)
	}
	if none, _ := timeline(oneExecution(false, 10, 10)); none != nil {
		t.Errorf("a run of one execution and no steps has a timeline")
	}
	single, _ := timeline(oneExecution(false, 10, 10, runtime.StepInfo{Key: "a@v1", Kind: runtime.KindStep, Status: runtime.StepComplete, Seq: 1, CreatedAt: ms(5),
		Attempts: []runtime.Attempt{attempt("a@v1", 1, 1, 5, "", 0)}}))
	if single == nil || single.Strip != nil || single.StripDrawing != "" {
		t.Errorf("a run of one execution: %+v, want a timeline without a strip", single)
	}
}

// Times are written in UTC to the millisecond, with the date when not
// the axis's.
func TestAtMilli(t *testing.T) {
	if got := atMilli(ms(447), t0).Text; got != "12:03:04.567" {
		t.Errorf("atMilli: %s", got)
	}
	if got := atMilli(t0.Add(24*time.Hour), t0).Text; got != "2026-03-05 12:03:04.120" {
		t.Errorf("atMilli on another day: %s", got)
	}
	if atMilli(time.Time{}, t0) != nil {
		t.Errorf("atMilli of the zero time is not nil")
	}
}

// The run page draws the timeline and lists each step's recorded input,
// escaped, on demand; an input not recorded says why.
func TestRunPageShowsTimelineAndInputs(t *testing.T) {
	t.Parallel()
	st := memstore.New(memstore.Options{})
	t.Cleanup(func() { st.Close() })
	e, err := runtime.New(runtime.Config{Store: st, PollInterval: 5 * time.Millisecond, MaxPayloadBytes: 512})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	if err := runtime.Register(e, "inputs", func(c *runtime.WorkflowContext, in string) (string, error) {
		a := runtime.StepAsync(c, "a@v1", runtime.StepOptions{Input: in}, func(runtime.StepContext) (int, error) { return 1, nil })
		b := runtime.StepAsync(c, "b@v1", runtime.StepOptions{Input: strings.Repeat("x", 600)}, func(runtime.StepContext) (int, error) { return 2, nil })
		if err := runtime.All(c, a, b); err != nil {
			return "", err
		}
		return "", c.Sleep("nap", time.Hour)
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); e.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	if _, err := runtime.Start[string, string](ctx, e, "inputs", "<script>alert(1)</script>", runtime.WithID("in-1")); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		info, err := e.Get(ctx, "in-1")
		if err == nil && info.Status == runtime.StatusWaiting {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the run is %s (%v), want waiting", info.Status, err)
		}
		time.Sleep(5 * time.Millisecond)
	}

	w := httptest.NewRecorder()
	New(e, Options{}).ServeHTTP(w, httptest.NewRequest(http.MethodGet, "http://localhost/runs/in-1", nil))
	body := w.Body.String()
	for _, want := range []string{
		`<section id="timeline" data-execution="1"`, `<svg class="tl-lanes"`, `data-call="a@v1" data-kind="step" data-state="complete"`,
		`data-call="nap" data-kind="sleep" data-state="pending"`, `<li class="step" data-key="nap" data-status="pending">`,
		`<details class="in"><summary>input, 47 bytes</summary><pre>&#34;\u003cscript\u003ealert(1)\u003c/script\u003e&#34;</pre></details>`,
		`<p class="note">Input not recorded: payload too large: input of step b@v1 is 602 bytes, limit 512.</p>`,
		`<p class="wake">Wakes at <time`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the run page lacks %s", want)
		}
	}
	if strings.Contains(body, "<script>alert") || strings.Contains(body, ` style="`) {
		t.Errorf("the run page holds an unescaped input or a style attribute")
	}
	if t.Failed() {
		t.Logf("the page:\n%s", body)
	}
}

// The drawing, written without the template, escapes what it is given:
// a key a store holds from before the rules on names is text, never
// markup.
func TestTimelineDrawingEscapes(t *testing.T) {
	evil := `x"><script>alert(1)</script>`
	v, times := timeline(oneExecution(false, 1000, 1000,
		runtime.StepInfo{Key: evil, Kind: runtime.KindStep, Status: runtime.StepFailed, Seq: 1, CreatedAt: ms(100), Attempts: []runtime.Attempt{attempt(evil, 1, 0, 100, "<b>no</b>", 0)}},
		runtime.StepInfo{Key: evil + "#0", Kind: runtime.KindSelect, Status: runtime.StepComplete, Seq: 2, CreatedAt: ms(200), Output: json.RawMessage(`0`), Input: json.RawMessage(`["<i>"]`)},
	))
	out := string(v.Drawing) + string(times[0].html())
	for _, bad := range []string{"<script>", "<b>", "<i>", ` style=`} {
		if strings.Contains(out, bad) {
			t.Errorf("the drawing holds %s:\n%s", bad, out)
		}
	}
	for _, want := range []string{`data-call="x&#34;&gt;&lt;script&gt;alert(1)&lt;/script&gt;"`, `failed: &lt;b&gt;no&lt;/b&gt;`, `data-won="&lt;i&gt;"`} {
		if !strings.Contains(out, want) {
			t.Errorf("the drawing lacks %s:\n%s", want, out)
		}
	}
}
