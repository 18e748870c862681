package ui_test

// The dashboard in a real browser: headless Chromium (see
// e2etest_helpers_test.go) against a SQLite store worked by a running
// engine, the dashboard mounted under a prefix. The scenarios select by the
// DOM contract the handler keeps (ids, data- attributes).

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/ui"
)

// The browser suite: the runs page and a run's page, then the actions.
func TestDashboardInBrowser(t *testing.T) {
	browser := e2eBrowser(t)
	t.Run("Runs", func(t *testing.T) { testBrowserRuns(t, browser) })
	t.Run("PauseResumeEvent", func(t *testing.T) { testBrowserPauseResumeEvent(t, browser) })
	t.Run("TerminateRestart", func(t *testing.T) { testBrowserTerminateRestart(t, browser) })
	t.Run("Update", func(t *testing.T) { testBrowserUpdate(t, browser) })
}

// seedEveryStatus starts runs that end up in every status, a parent with a
// child among them, and returns each run's status and the child's ID.
func seedEveryStatus(f *e2eFixture) (want map[string]runtime.RunStatus, child string) {
	f.t.Helper()
	f.start("greet", "greet-1", "ada")
	f.start("greet", "later-1", "bob", runtime.WithDelay(time.Hour))
	f.start("hold", "hold-1", 1)
	f.start("charge", "charge-1", 1250)
	f.start("parent", "parent-1", "cy")
	for _, id := range []string{"order-1001", "order-1002", "order-1003"} {
		f.start("order", id, "book")
	}
	for _, id := range []string{"order-1001", "order-1002", "order-1003"} {
		f.waitStatus(id, runtime.StatusWaiting)
	}
	if err := f.e.Pause(f.ctx, "order-1002"); err != nil {
		f.t.Fatal(err)
	}
	if err := f.e.Terminate(f.ctx, "order-1003", "customer cancelled"); err != nil {
		f.t.Fatal(err)
	}
	want = map[string]runtime.RunStatus{
		"greet-1": runtime.StatusComplete, "later-1": runtime.StatusQueued, "hold-1": runtime.StatusRunning,
		"charge-1": runtime.StatusErrored, "parent-1": runtime.StatusComplete, "order-1001": runtime.StatusWaiting,
		"order-1002": runtime.StatusPaused, "order-1003": runtime.StatusTerminated,
	}
	for id, s := range want {
		f.waitStatus(id, s)
	}
	children, _, err := f.e.ListRuns(f.ctx, runtime.ListRunsQuery{ParentID: "parent-1"})
	if err != nil || len(children) != 1 {
		f.t.Fatalf("parent-1's children: %v %v", children, err)
	}
	child = children[0].ID
	f.waitStatus(child, runtime.StatusComplete)
	want[child] = runtime.StatusComplete
	return want, child
}

// rowsSelector selects the runs table's rows.
const rowsSelector = "#runs tr[data-run-id]"

// rows lists the run IDs of the runs table, in order.
func (p *e2ePage) rows() []string {
	p.t.Helper()
	return p.attrs(rowsSelector, "data-run-id")
}

// wantRows waits until the runs table lists exactly ids (in any order).
func (p *e2ePage) wantRows(what string, ids ...string) {
	p.t.Helper()
	quoted := make([]string, len(ids))
	for i, id := range ids {
		quoted[i] = jsString(id)
	}
	p.until(what+": the runs "+strings.Join(ids, ", "), fmt.Sprintf(
		"(() => { const got = Array.from(document.querySelectorAll(%s), r => r.dataset.runId).sort(); const want = [%s].sort(); "+
			"return got.length === want.length && got.every((id, i) => id === want[i]); })()",
		jsString(rowsSelector), strings.Join(quoted, ", ")))
}

// List the runs of every status with their counts, children under their
// parents when asked for; filter by status, by workflow and by ID prefix,
// the filter kept across the page's refreshes; open a run, its child and
// back to the parent.
func testBrowserRuns(t *testing.T, browser context.Context) {
	ops := newE2EOps(t, ui.Options{})
	f := ops.e2eFixture
	want, child := seedEveryStatus(f)
	// Runs with search attributes, shown in their column.
	ops.shop("basket-1", "C-7", 120, true)
	ops.shop("basket-2", "C-8", 155.5, false)
	for _, id := range []string{"basket-1", "basket-2"} {
		f.waitStatus(id, runtime.StatusComplete)
		want[id] = runtime.StatusComplete
	}
	p := e2eTab(t, browser, f)

	// The mount point leads to the runs, under the prefix.
	p.open("")
	p.until("the runs page", "document.querySelector('table#runs') !== null")
	if loc := p.str("location.pathname"); loc != e2ePrefix+"/runs" {
		t.Fatalf("the dashboard's root leads to %s, want %s/runs", loc, e2ePrefix)
	}
	if n := p.count("nav#nav a"); n < 4 {
		t.Fatalf("nav#nav has %d links, want runs, queues, schedules and workers", n)
	}

	// Every top-level run, with its status, and the counts per status.
	ids := make([]string, 0, len(want))
	for id := range want {
		if id != child {
			ids = append(ids, id)
		}
	}
	p.wantRows("every top-level run", ids...)
	for id, s := range want {
		if id == child {
			continue
		}
		if got := p.str(fmt.Sprintf("document.querySelector('#runs tr[data-run-id=%s]').dataset.status", jsString(id))); got != string(s) {
			t.Errorf("run %s is listed %q, want %q", id, got, s)
		}
		if got := p.text(fmt.Sprintf("#runs tr[data-run-id=%s] a.run-link", jsString(id))); got != id {
			t.Errorf("run %s's link reads %q", id, got)
		}
	}
	counts := map[string]int{"": len(want), "queued": 1, "running": 1, "paused": 1, "waiting": 1, "complete": 5, "errored": 1, "terminated": 1}
	for s, n := range counts {
		if got := p.text(fmt.Sprintf("#counts a[data-status=%s] .count", jsString(s))); got != fmt.Sprint(n) {
			t.Errorf("the count of status %q reads %q, want %d", s, got, n)
		}
	}
	if n := p.count("a#next"); n != 0 {
		t.Errorf("one page of runs has a#next")
	}
	if got := p.text(`#runs tr[data-run-id="basket-1"] a.attr[data-attr="customer"]`); got != "customer=C-7" {
		t.Errorf("basket-1's customer reads %q", got)
	}
	p.screenshot("dashboard-runs.png")

	// With children: the child right under its parent, set in.
	p.click("#filters #children")
	p.click("#filters button#apply")
	p.wantRows("every run with children", append(ids, child)...)
	if got := p.rows(); slices.Index(got, child) != slices.Index(got, "parent-1")+1 {
		t.Errorf("the child is not listed right under its parent: %v", got)
	}
	if d := p.str(fmt.Sprintf("document.querySelector('#runs tr[data-run-id=%s]').dataset.depth", jsString(child))); d != "1" {
		t.Errorf("the child's row is set in %q, want 1", d)
	}

	// Filter by status: the URL keeps it, and the page's refreshes keep
	// it while they show a run that started since.
	p.set("#filters select[name=status]", "waiting")
	p.click("#filters button#apply")
	p.wantRows("status waiting", "order-1001")
	if q := p.str("location.search"); !strings.Contains(q, "status=waiting") {
		t.Fatalf("the filtered page's URL %q does not keep status=waiting", q)
	}
	f.start("order", "order-1004", "pen")
	p.wantRows("status waiting, refreshed", "order-1001", "order-1004")
	if q := p.str("location.search"); !strings.Contains(q, "status=waiting") {
		t.Fatalf("after a refresh, the URL %q lost status=waiting", q)
	}
	if v := p.str("document.querySelector('#filters select[name=status]').value"); v != "waiting" {
		t.Fatalf("after a refresh, the status filter reads %q, want waiting", v)
	}

	// Filter by workflow; the counts are the workflow's.
	p.open("runs")
	p.set("#filters select[name=workflow]", "greet")
	p.click("#filters button#apply")
	p.wantRows("workflow greet", "greet-1", "later-1")
	p.click("#filters #children")
	p.click("#filters button#apply")
	p.wantRows("workflow greet with children", "greet-1", "later-1", child)
	if got := p.text(fmt.Sprintf("#runs tr[data-run-id=%s] .of-parent a", jsString(child))); got != "parent-1" {
		t.Errorf("the child listed without its parent names %q, want parent-1", got)
	}
	if q := p.str("location.search"); !strings.Contains(q, "workflow=greet") {
		t.Fatalf("the filtered page's URL %q does not keep workflow=greet", q)
	}
	if got := p.text(`#counts a[data-status=""] .count`); got != "3" {
		t.Errorf("with workflow greet, the count of all runs reads %q, want 3", got)
	}

	// Filter by ID prefix.
	p.open("runs")
	p.set("#filters input[name=prefix]", "order-")
	p.click("#filters button#apply")
	p.wantRows("prefix order-", "order-1001", "order-1002", "order-1003", "order-1004")
	if q := p.str("location.search"); !strings.Contains(q, "prefix=order-") {
		t.Fatalf("the filtered page's URL %q does not keep prefix=order-", q)
	}
	p.open("runs?prefix=nothing-")
	p.until("no runs", "document.querySelector('p#no-runs') !== null")

	// Open a run from the list, its child, and back to the parent.
	p.open("runs")
	p.clickNow(`#runs tr[data-run-id="parent-1"] a.run-link`)
	p.until("parent-1's page", `document.querySelector('main#run[data-run-id="parent-1"]') !== null`)
	if s := p.text("#status"); s != "complete" {
		t.Fatalf("parent-1's #status reads %q", s)
	}
	if out := p.text("#output"); !strings.Contains(out, "hello cy") {
		t.Fatalf("parent-1's #output reads %q", out)
	}
	if got := p.text("#children a.run-link"); got != child {
		t.Fatalf("parent-1's #children link reads %q, want %s", got, child)
	}
	p.clickNow("#children a.run-link")
	p.until("the child's page", fmt.Sprintf("document.querySelector('main#run[data-run-id=%s]') !== null", jsString(child)))
	if got := p.text("#parent a.run-link"); got != "parent-1" {
		t.Fatalf("the child's #parent link reads %q", got)
	}
	p.clickNow("#parent a.run-link")
	p.until("back on parent-1's page", `document.querySelector('main#run[data-run-id="parent-1"]') !== null`)

	// The errored run: its error, its failed step and both attempts.
	p.open("runs/charge-1")
	p.until("charge-1's page", `document.querySelector('main#run[data-status="errored"]') !== null`)
	if e := p.text("#error"); !strings.Contains(e, "card declined: insufficient funds") {
		t.Fatalf("charge-1's #error reads %q", e)
	}
	if keys := p.attrs("#steps li.step", "data-key"); !slices.Equal(keys, []string{"reserve@v1", "charge@v1"}) {
		t.Fatalf("charge-1's steps are %v, want reserve@v1, charge@v1", keys)
	}
	if s := p.str(`document.querySelector('#steps li.step[data-key="charge@v1"]').dataset.status`); s != "failed" {
		t.Fatalf("charge-1's charge step is %q, want failed", s)
	}
	if n := p.count(`#steps li.step[data-key="charge@v1"] li.attempt`); n != 2 {
		t.Fatalf("charge-1's charge step shows %d attempts, want 2", n)
	}
	// The running run shows its running step.
	p.open("runs/hold-1")
	p.until("hold-1's running step", `document.querySelector('#steps li.step[data-key="work@v1"][data-status="running"]') !== null`)
	close(f.release)
}

// Pause a waiting run and resume it, each after a confirmation; send the
// event it waits for, refused in the browser while the payload is not
// JSON, and watch the page follow the run to its end without a reload.
func testBrowserPauseResumeEvent(t *testing.T, browser context.Context) {
	f := newE2EFixture(t, ui.Options{})
	f.start("order", "order-2001", "lamp")
	f.waitStatus("order-2001", runtime.StatusWaiting)
	p := e2eTab(t, browser, f)

	p.open("runs/order-2001")
	p.until("the waiting run's page", `document.querySelector('main#run[data-run-id="order-2001"]') !== null`)
	if s := p.text("#status"); s != "waiting" {
		t.Fatalf("#status reads %q, want waiting", s)
	}
	if w := p.text("#wait"); !strings.Contains(w, "shipment") {
		t.Fatalf("#wait reads %q, want the topic shipment", w)
	}
	if keys := p.attrs("#steps li.step", "data-key"); len(keys) == 0 || keys[0] != "reserve@v1" {
		t.Fatalf("the steps are %v, want reserve@v1 first", keys)
	}
	p.screenshot("dashboard-run.png")

	// Pause: a dialog asks first; then the outcome and the new status.
	p.clickNow(`button[data-action="pause"]`)
	p.until("the pause dialog", `document.querySelector('dialog[open] button[data-confirm]') !== null`)
	p.confirm("the pause", "ok")
	p.until("the run paused on the page", `document.querySelector('#status')?.textContent.trim() === 'paused'`)
	if s := f.status("order-2001"); s != runtime.StatusPaused {
		t.Fatalf("after pause the run is %s", s)
	}

	p.clickNow(`button[data-action="resume"]`)
	p.until("the resume dialog", `document.querySelector('dialog[open] button[data-confirm]') !== null`)
	p.confirm("the resume", "ok")
	p.until("the run waiting again on the page", `document.querySelector('#status')?.textContent.trim() === 'waiting'`)
	if s := f.status("order-2001"); s != runtime.StatusWaiting {
		t.Fatalf("after resume the run is %s", s)
	}

	// The event: a payload that is not JSON is refused in the browser and
	// nothing is sent.
	p.clickNow(`button[data-action="event"]`)
	p.until("the event dialog", `document.querySelector('dialog[open] textarea[name=payload]') !== null`)
	p.set("dialog[open] input[name=topic]", "shipment")
	p.set("dialog[open] textarea[name=payload]", `{"tracking": "ZX-1"}`)
	p.screenshot("dashboard-event.png")
	p.set("dialog[open] textarea[name=payload]", `{"tracking": ZX-1}`)
	p.click("dialog[open] button[data-confirm]")
	p.until("#payload-error", `(() => { const e = document.querySelector('#payload-error'); return e !== null && e.textContent.trim() !== '' && e.getClientRects().length > 0; })()`)
	if n := f.posts.get("/runs/order-2001/event"); n != 0 {
		t.Fatalf("a payload that is not JSON was sent %d times", n)
	}
	if s := f.status("order-2001"); s != runtime.StatusWaiting {
		t.Fatalf("after a refused payload the run is %s", s)
	}

	// A JSON payload is sent; the page then follows the run without a
	// reload: delivering, then complete.
	p.set("dialog[open] textarea[name=payload]", `{"tracking": "ZX-1"}`)
	p.confirm("the event", "ok")
	if n := f.posts.get("/runs/order-2001/event"); n != 1 {
		t.Fatalf("the event was posted %d times, want 1", n)
	}
	p.until("the run past its wait", `['running', 'complete'].includes(document.querySelector('#status')?.textContent.trim())`)
	e2eEval[string](p, "window.stemE2EMark = 'unchanged'")
	close(f.deliver)
	p.until("the run complete on the page", `document.querySelector('#status')?.textContent.trim() === 'complete'`)
	if mark := p.str("window.stemE2EMark"); mark != "unchanged" {
		t.Fatalf("the page reloaded to show the run complete (mark %q); it must update in place", mark)
	}
	p.until("the output on the page", `(document.querySelector('#output')?.textContent ?? '').includes('delivered lamp with ZX-1')`)
	if s := f.status("order-2001"); s != runtime.StatusComplete {
		t.Fatalf("the run is %s, want complete", s)
	}
}

// Terminate a run with a reason; restart an errored run from a chosen step,
// which keeps the steps before it.
func testBrowserTerminateRestart(t *testing.T, browser context.Context) {
	f := newE2EFixture(t, ui.Options{})
	f.start("order", "order-3001", "desk")
	f.start("charge", "charge-2", 990)
	f.waitStatus("order-3001", runtime.StatusWaiting)
	f.waitStatus("charge-2", runtime.StatusErrored)
	p := e2eTab(t, browser, f)

	p.open("runs/order-3001")
	p.clickNow(`button[data-action="terminate"]`)
	p.until("the terminate dialog", `document.querySelector('dialog[open] input[name=reason]') !== null`)
	p.set("dialog[open] input[name=reason]", "duplicate order")
	p.confirm("the terminate", "ok")
	p.until("the run terminated on the page", `document.querySelector('#status')?.textContent.trim() === 'terminated'`)
	if e := p.text("#error"); !strings.Contains(e, "duplicate order") {
		t.Fatalf("the terminated run's #error reads %q, want the reason", e)
	}
	if s := f.status("order-3001"); s != runtime.StatusTerminated {
		t.Fatalf("after terminate the run is %s", s)
	}
	// A finished run offers no pause.
	if n := p.count(`button[data-action="pause"]`); n != 0 {
		t.Errorf("a terminated run offers pause")
	}

	p.open("runs/charge-2")
	p.until("the errored run's page", `document.querySelector('main#run[data-status="errored"]') !== null`)
	f.cardOK.Store(true)
	p.clickNow(`button[data-action="restart"]`)
	p.until("the restart dialog", `document.querySelector('dialog[open] select[name=step]') !== null`)
	if first := p.str("document.querySelector('dialog[open] select[name=step]').options[0].value"); first != "" {
		t.Fatalf("the restart dialog's first choice is %q, want \"\" (from the top)", first)
	}
	p.set("dialog[open] select[name=step]", "charge@v1")
	p.confirm("the restart", "ok")
	p.until("the restarted run complete on the page", `document.querySelector('#status')?.textContent.trim() === 'complete'`)
	if out := p.text("#output"); !strings.Contains(out, "charged 990 cents") {
		t.Fatalf("the restarted run's #output reads %q", out)
	}
	if n := f.reserved.Load(); n != 1 {
		t.Fatalf("the reserve step ran %d times; a restart from charge@v1 keeps it", n)
	}
	xs, err := f.e.ListExecutions(f.ctx, "charge-2")
	if err != nil || len(xs) != 2 {
		t.Fatalf("charge-2's executions: %v %v, want 2", xs, err)
	}
	p.until("both executions listed", "document.querySelector('#executions') !== null")
}

// Send an update from the run's page: refused in the browser while the
// request is not JSON, then sent after the confirmation, its reply in the
// outcome; the updates and the stream the run writes follow on the page
// without a reload, updates sent elsewhere too, until the run ends.
func testBrowserUpdate(t *testing.T, browser context.Context) {
	f := newE2EFixture(t, ui.Options{})
	f.start("tally", "tally-1", 100)
	f.waitStatus("tally-1", runtime.StatusWaiting)
	p := e2eTab(t, browser, f)

	p.open("runs/tally-1")
	p.until("the waiting run's page", `document.querySelector('main#run[data-run-id="tally-1"]') !== null`)
	if w := p.text("#wait"); !strings.Contains(w, "Waiting for an update") || !strings.Contains(w, "add") {
		t.Fatalf("#wait reads %q, want the update add", w)
	}
	p.clickNow(`button[data-action="update"]`)
	p.until("the update dialog", `document.querySelector('dialog[open] textarea[name=request]') !== null`)
	p.set("dialog[open] select[name=update]", "add")
	p.set("dialog[open] textarea[name=request]", `{5`)
	p.click("dialog[open] button[data-confirm]")
	p.until("#request-error", `(() => { const e = document.querySelector('#request-error'); return e !== null && e.textContent.includes('The request is not JSON') && e.getClientRects().length > 0; })()`)
	if n := f.posts.get("/runs/tally-1/update"); n != 0 {
		t.Fatalf("a request that is not JSON was sent %d times", n)
	}
	p.set("dialog[open] textarea[name=request]", `5`)
	p.screenshot("dashboard-update.png")
	p.confirm("the update", "ok")
	if msg := p.text("#flash"); !strings.Contains(msg, "replied: 105") {
		t.Fatalf("the update's outcome reads %q, want its reply", msg)
	}
	p.until("the update listed", `document.querySelectorAll('#updates tr[data-state="replied"]').length === 1`)
	p.until("the stream listed", `document.querySelector('#streams .stream[data-stream="totals"]')?.dataset.length === '1'`)

	// Updates sent elsewhere show without a reload, as the run writes.
	e2eEval[string](p, "window.stemE2EMark = 'unchanged'")
	for _, n := range []int{7, 0} {
		if _, err := runtime.CallUpdate[int](f.ctx, f.e, "tally-1", "add", n); err != nil {
			t.Fatal(err)
		}
	}
	p.until("the run complete on the page", `document.querySelector('#status')?.textContent.trim() === 'complete'`)
	p.until("every update listed", `document.querySelectorAll('#updates tr[data-state="replied"]').length === 3`)
	e2eEval[bool](p, "(document.querySelector('#updates').scrollIntoView(), true)")
	p.screenshot("dashboard-updates.png")
	if v := p.text(`#streams li[data-offset="1"] pre`); v != "112" {
		t.Fatalf("the stream's second value reads %q, want 112", v)
	}
	if mark := p.str("window.stemE2EMark"); mark != "unchanged" {
		t.Fatalf("the page reloaded (mark %q); it must update in place", mark)
	}
	if n := p.count(`button[data-action="update"]`); n != 0 {
		t.Errorf("a finished run offers an update")
	}
}
