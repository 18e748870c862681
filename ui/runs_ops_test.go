package ui_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/storage"
)

// family seeds, a minute apart from epoch: p-1 (the parent), its child
// p-1/c, its grandchild p-1/c/g, and q-1 (another top-level run), each
// with attributes; the clock then reads epoch plus 3 minutes and 30
// seconds.
func family(t *testing.T) *dash {
	t.Helper()
	clock := &fixedClock{t: epoch}
	d := newDash(t, false, clock)
	ctx := context.Background()
	for i, r := range []storage.NewRun{
		{ID: "p-1", Workflow: "alpha", Attributes: []storage.Attr{storage.StringAttr("customer", "C-7"), storage.NumberAttr("total", 120),
			storage.StringAttr("note", "two words, one comma"), storage.BoolAttr("rush", true)}},
		{ID: "p-1/c", Workflow: "beta", ParentID: "p-1", Attributes: []storage.Attr{storage.StringAttr("customer", "C-7")}},
		{ID: "p-1/c/g", Workflow: "beta", ParentID: "p-1/c"},
		{ID: "q-1", Workflow: "alpha", Attributes: []storage.Attr{storage.StringAttr("customer", "C-8"), storage.NumberAttr("total", 80)}},
	} {
		clock.set(epoch.Add(time.Duration(i) * time.Minute))
		r.Input = []byte(`{}`)
		_, err := d.store.CreateRuns(ctx, []storage.NewRun{r})
		must(t, err)
	}
	clock.set(epoch.Add(3*time.Minute + 30*time.Second))
	return d
}

// The runs page lists top-level runs, newest first, each child reached
// from its parent; with children, each is set in under its parent, and
// one whose parent is not listed names it.
func TestRunsChildrenUnderTheirParents(t *testing.T) {
	t.Parallel()
	d := family(t)
	res := d.get("/runs").want(t, http.StatusOK)
	sameIDs(t, "top-level", d.rowsOf(res), []string{"q-1", "p-1"})
	res.contains(t, `<label class="check"><span><input type="checkbox" id="children" name="children" value="1"> with children</span></label>`)

	res = d.get("/runs?children=1").want(t, http.StatusOK)
	sameIDs(t, "with children", d.rowsOf(res), []string{"q-1", "p-1", "p-1/c", "p-1/c/g"})
	res.contains(t, `<tr data-run-id="p-1/c" data-status="queued" data-depth="1" class="child depth-1"><td class="id"><span class="nest" aria-hidden="true">↳</span><a class="run-link" href="./runs/p-1%2Fc">`,
		`<tr data-run-id="p-1/c/g" data-status="queued" data-depth="2" class="child depth-2">`, `id="children" name="children" value="1" checked`)

	res = d.get("/runs?children=1&workflow=beta").want(t, http.StatusOK)
	sameIDs(t, "beta with children", d.rowsOf(res), []string{"p-1/c", "p-1/c/g"})
	res.contains(t, `<span class="note of-parent">child of <a class="parent-link" href="./runs/p-1">p-1</a></span>`)

	// A filter that matches only children says they are left out.
	d.get("/runs?workflow=beta").want(t, http.StatusOK).contains(t,
		`No runs match. Runs started by other runs are not listed: <a id="show-children" href="./runs?children=1&amp;workflow=beta">list them too</a>.`)
	// A parent's children are listed as they were.
	sameIDs(t, "p-1's children", d.rowsOf(d.get("/runs?parent=p-1")), []string{"p-1/c"})
	d.get("/runs?children=maybe").want(t, http.StatusBadRequest).contains(t, `children=&#34;maybe&#34;: children are shown (1) or hidden (0)`)
}

// Times read how long ago, the exact millisecond in their title; a run's
// first attributes show, each a link to the runs with the same value.
func TestRunsTimesAndAttributes(t *testing.T) {
	t.Parallel()
	d := family(t)
	res := d.get("/runs").want(t, http.StatusOK)
	res.contains(t,
		`<time datetime="2025-01-01T00:03:00Z" title="2025-01-01 00:03:00.000Z">30 s ago</time>`,
		`<time datetime="2025-01-01T00:00:00Z" title="2025-01-01 00:00:00.000Z">3 min ago</time>`,
		`<th>Attributes</th>`,
		`<a class="attr" data-attr="customer" href="./runs?where=customer%3DC-7" title="customer=C-7"><span class="attr-name">customer</span>=<span class="attr-value">C-7</span></a>`,
		`<a class="attr" data-attr="note" href="./runs?where=note%3D%22two&#43;words%2C&#43;one&#43;comma%22" title="note=two words, one comma">`,
		`<a class="attr" data-attr="rush" href="./runs?where=rush%3Dtrue"`,
		`<span class="note more-attrs">+1</span>`,
		"<td class=\"attrs\" title=\"customer=C-7\nnote=two words, one comma\nrush=true\ntotal=120\">",
	)
}

// The attribute search: filters in each attribute's declared type, on
// their own or with the other filters, kept in the form and in the
// pages' links; a filter the engine cannot read is said next to the box,
// nothing listed.
func TestRunsAttributeSearch(t *testing.T) {
	t.Parallel()
	d := family(t)
	d.record(storage.WorkflowType{Name: "alpha", Attributes: []storage.AttrDecl{{Name: "customer", Type: storage.AttrString}, {Name: "total", Type: storage.AttrNumber}, {Name: "rush", Type: storage.AttrBool}, {Name: "note", Type: storage.AttrString}}})
	for where, want := range map[string][]string{
		"customer=C-7":                {"p-1"},
		"customer^=C-":                {"q-1", "p-1"},
		"total>=100":                  {"p-1"},
		"total<100, customer^=C":      {"q-1"},
		"rush=true":                   {"p-1"},
		`note="two words, one comma"`: {"p-1"},
		"customer=C-9":                nil,
	} {
		res := d.get("/runs?where="+url.QueryEscape(where)).want(t, http.StatusOK)
		sameIDs(t, where, d.rowsOf(res), want)
		res.contains(t, `name="where" value="`+strings.NewReplacer(`"`, "&#34;", "<", "&lt;", ">", "&gt;").Replace(where)+`"`)
	}
	sameIDs(t, "with children", d.rowsOf(d.get("/runs?children=1&where=customer%3DC-7")), []string{"p-1", "p-1/c"})
	sameIDs(t, "and a workflow", d.rowsOf(d.get("/runs?workflow=beta&children=1&where=customer%3DC-7")), []string{"p-1/c"})

	for where, words := range map[string]string{
		"total>=lots":                         `attribute total is a number; &#34;lots&#34; is not one`,
		"customer>=C":                         `compares only numbers and times`,
		"customer":                            `want NAME OP VALUE`,
		`note="open`:                          `a double quote is not closed`,
		"a=1 b=2 c=3 d=4 e=5 f=6 g=7 h=8 i=9": `9 attribute filters: a search combines at most 8`,
	} {
		res := d.get("/runs?where="+url.QueryEscape(where)).want(t, http.StatusBadRequest)
		res.contains(t, `<span id="where-error" class="error field-error" role="alert">`, words, `aria-invalid="true" aria-describedby="where-error"`).
			lacks(t, `<table id="runs"`, "data-refresh", `id="filter-error"`)
	}
}

// The runs page offers the bulk actions over its filter to an operator:
// a form that leads to the confirmation with the filter's fields.
func TestRunsOfferBulkActions(t *testing.T) {
	t.Parallel()
	d := family(t)
	res := d.get("/runs?workflow=alpha&status=queued").want(t, http.StatusOK)
	res.contains(t, `<form id="bulk" method="get" action="./bulk" class="bulk-bar">`,
		`<input type="hidden" name="status" value="queued">`, `<input type="hidden" name="workflow" value="alpha">`,
		`<option value="restart-failed">Restart from the failed step</option>`, `<option value="terminate">Terminate</option>`)
	r := httpGet("/runs")
	r.Header.Set("X-Test-Access", "read")
	d.do(r).lacks(t, `id="bulk"`)
	_ = runtime.BulkRestartFailed
}
