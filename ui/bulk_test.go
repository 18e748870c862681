package ui_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/stemflow/stem/runtime"
)

// bulkDash is a dashboard whose engine runs the test workflows and the
// bulk actions, with n errored runs of payable in group (IDs
// <group>-0...).
func bulkDash(t *testing.T, group string, n int) *dash {
	t.Helper()
	d := newDash(t, false, nil)
	register(t, d.e)
	must(t, runtime.RegisterBulk(d.e))
	runEngine(t, d.e)
	for i := range n {
		d.start("payable", fmt.Sprintf("%s-%d", group, i), fmt.Sprintf("%q", group))
	}
	for i := range n {
		d.waitStatus(fmt.Sprintf("%s-%d", group, i), runtime.StatusErrored)
	}
	return d
}

var bulkCount = regexp.MustCompile(`<span id="bulk-count" data-count="(\d+)" data-more="(true|false)">([^<]*)</span>`)

// From the runs page's filter, a bulk restart from the failed step is
// reviewed on a page that states the filter and the count, and started by
// its form; its page follows it to the end, and every run completes,
// each from its failed step.
func TestBulkRestartFailed(t *testing.T) {
	t.Parallel()
	d := bulkDash(t, "bulk-a", 5)
	d.start("payable", "other-0", `"bulk-other"`)
	d.waitStatus("other-0", runtime.StatusErrored)

	review := "/bulk?action=restart-failed&status=errored&where=&workflow=payable&prefix=bulk-a-"
	res := d.get(review).want(t, http.StatusOK)
	m := bulkCount.FindStringSubmatch(res.body)
	if m == nil || m[1] != "5" || m[2] != "false" || m[3] != "5 runs" {
		t.Fatalf("the confirmation's count: %q\n%s", m, res.body)
	}
	res.contains(t, `<h1>Restart from the failed step: <span id="bulk-count"`,
		`<li>workflow is payable</li>`, `<li>status is errored</li>`, `<li>ID begins with bulk-a-</li>`,
		`<li>started by no other run (children are left out)</li>`,
		`<button id="bulk-confirm" type="submit" data-confirm>Restart 5 runs</button>`,
		`<input type="hidden" name="action" value="restart-failed">`).lacks(t, `id="bulk-no-worker"`)

	payOK.Store("bulk-a", true)
	cookie, token := d.session(review)
	res = d.post("/bulk", url.Values{"csrf": {token}, "action": {"restart-failed"}, "status": {"errored"}, "workflow": {"payable"}, "prefix": {"bulk-a-"}}, cookie)
	loc := res.Header.Get("Location")
	if res.StatusCode != http.StatusSeeOther || !strings.HasPrefix(loc, "./bulks/") {
		t.Fatalf("POST bulk: %d to %q\n%s", res.StatusCode, loc, res.body)
	}
	id, _ := url.PathUnescape(strings.TrimPrefix(loc[:strings.Index(loc, "?")], "./bulks/"))
	page := d.follow("/bulk", res)
	if kind, msg := flashOf(page.body); kind != "ok" || msg != "Started: restart from the failed step over the 5 runs the filter matches." {
		t.Errorf("the bulk's page says %s %q", kind, msg)
	}
	page.contains(t, `<main id="bulk-page" class="narrow" data-bulk-id="`+id+`" data-action="restart-failed">`)

	eventually(t, "the bulk action is done", func() bool {
		b, err := d.e.GetBulk(context.Background(), id)
		return err == nil && b.Progress.Done && b.Status.Finished()
	})
	for i := range 5 {
		info := d.waitStatus(fmt.Sprintf("bulk-a-%d", i), runtime.StatusComplete)
		if info.Execution != 2 {
			t.Errorf("run %s is in execution %d, want 2", info.ID, info.Execution)
		}
	}
	if s := d.status("other-0"); s != runtime.StatusErrored {
		t.Errorf("a run the filter does not match is %s", s)
	}
	res = d.get("/bulks/"+url.PathEscape(id)).want(t, http.StatusOK)
	res.contains(t, `data-matched="5" data-acted="5" data-skipped="0" data-failed="0" data-done="true"`).lacks(t, "data-refresh")
	d.get("/bulks").want(t, http.StatusOK).contains(t, `<tr data-bulk-id="`+id+`" data-status="complete" data-done="true">`, `<td>Restart from the failed step</td>`)
}

// A bulk action is an operator's, its form carries the token, its filter
// must match a run, and its action be one; the confirmation says when no
// engine carries bulk actions out.
func TestBulkRefusals(t *testing.T) {
	t.Parallel()
	d := bulkDash(t, "bulk-b", 1)
	d.get("/bulk?action=explode&workflow=payable").want(t, http.StatusBadRequest).contains(t, `&#34;explode&#34; is not a bulk action: choose one of restart-failed, restart, pause, resume, cancel, terminate.`)
	d.get("/bulk?action=pause&where="+url.QueryEscape("total>=lots")).want(t, http.StatusBadRequest).contains(t, "The filter cannot be read")
	d.get("/bulk?action=pause&workflow=payable&after=x").want(t, http.StatusBadRequest)

	none := d.get("/bulk?action=terminate&workflow=nothing").want(t, http.StatusOK)
	none.contains(t, `data-count="0"`, `<p id="bulk-nothing" class="empty">`).lacks(t, `id="bulk-confirm"`)
	cookie, token := d.session("/bulk?action=terminate&workflow=payable")
	d.post("/bulk", url.Values{"csrf": {token}, "action": {"terminate"}, "workflow": {"nothing"}}, cookie).want(t, http.StatusConflict).
		contains(t, `<p id="bulk-error" class="error" role="alert">No run matches the filter now: there is nothing to act on.</p>`)
	d.post("/bulk", url.Values{"csrf": {"forged"}, "action": {"terminate"}, "workflow": {"payable"}}, cookie).want(t, http.StatusForbidden)

	r := httpGet("/bulk?action=terminate&workflow=payable")
	r.Header.Set("X-Test-Access", "read")
	d.do(r).want(t, http.StatusForbidden)
	r = postRequest("/bulk", url.Values{"csrf": {token}, "action": {"terminate"}, "workflow": {"payable"}}, cookie)
	r.Header.Set("X-Test-Access", "read")
	d.do(r).want(t, http.StatusForbidden)
	if bs, err := d.e.ListBulks(context.Background(), 10); err != nil || len(bs) != 0 {
		t.Fatalf("refused bulk actions started %v (%v)", bs, err)
	}
	if s := d.status("bulk-b-0"); s != runtime.StatusErrored {
		t.Fatalf("after refused bulk actions the run is %s", s)
	}

	// A dashboard whose store no bulk worker serves says so.
	w := newDash(t, false, nil)
	w.get("/bulk?action=pause").want(t, http.StatusOK).contains(t, `id="bulk-no-worker"`)
	w.get("/bulks").want(t, http.StatusOK).contains(t, `<p id="no-bulks" class="empty">No bulk actions yet.</p>`)
	w.get("/bulks/nothing").want(t, http.StatusNotFound).contains(t, "There is no bulk action nothing.")
}
