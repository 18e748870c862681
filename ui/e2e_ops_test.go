package ui_test

// The operator's pages in a real browser (see e2e_test.go): the attribute
// search, a bulk restart from the failed step of 50 runs, the start form
// and the dashboard's own login.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/ui"
)

// The browser suite of the operator's pages.
func TestDashboardOpsInBrowser(t *testing.T) {
	browser := e2eBrowser(t)
	t.Run("Search", func(t *testing.T) { testBrowserSearch(t, browser) })
	t.Run("BulkRestartFailed", func(t *testing.T) { testBrowserBulkRestartFailed(t, browser) })
	t.Run("StartForm", func(t *testing.T) { testBrowserStartForm(t, browser) })
	t.Run("Login", func(t *testing.T) { testBrowserLogin(t, browser) })
}

// e2eOps is an e2e fixture with a second engine on its store that serves
// the operator's workflows and carries out bulk actions:
//
//   - shop: takes a basket, its attributes customer (string), total
//     (number) and rush (bool) declared and given at its start;
//   - settle: bills (counted in billed), then pays, which fails for good
//     until payOK is set;
//   - quote: takes a quoteRequest and answers with its price.
type e2eOps struct {
	*e2eFixture
	ops    *runtime.Engine
	payOK  atomic.Bool
	billed atomic.Int32
}

// basket is the shop workflow's input.
type basket struct {
	Customer string  `json:"customer"`
	Total    float64 `json:"total"`
}

// quoteRequest is the quote workflow's input: a field of each kind.
type quoteRequest struct {
	Customer string   `json:"customer"`
	Items    int      `json:"items"`
	Express  bool     `json:"express"`
	Tags     []string `json:"tags"`
}

func newE2EOps(t *testing.T, opts ui.Options) *e2eOps {
	t.Helper()
	f := &e2eOps{e2eFixture: newE2EFixture(t, opts)}
	e, err := runtime.New(runtime.Config{Store: f.e.Store(), PollInterval: 20 * time.Millisecond, ShutdownGrace: -1, WorkerID: "e2e-ops-worker"})
	must(t, err)
	f.ops = e
	must(t, runtime.Register(e, "shop", func(c *runtime.WorkflowContext, b basket) (string, error) {
		return runtime.Step(c, "pack@v1", runtime.StepOptions{}, func(runtime.StepContext) (string, error) { return "packed for " + b.Customer, nil })
	}, runtime.WorkflowAttributes(runtime.AttrDecl{Name: "customer", Type: runtime.AttrString}, runtime.AttrDecl{Name: "total", Type: runtime.AttrNumber},
		runtime.AttrDecl{Name: "rush", Type: runtime.AttrBool})))
	must(t, runtime.Register(e, "settle", func(c *runtime.WorkflowContext, n int) (string, error) {
		if _, err := runtime.Step(c, "bill@v1", runtime.StepOptions{}, func(runtime.StepContext) (int, error) {
			f.billed.Add(1)
			return n, nil
		}); err != nil {
			return "", err
		}
		return runtime.Step(c, "pay@v1", runtime.StepOptions{}, func(runtime.StepContext) (string, error) {
			if !f.payOK.Load() {
				return "", runtime.Permanent(errors.New("the bank is closed"))
			}
			return fmt.Sprintf("paid %d", n), nil
		})
	}))
	must(t, runtime.Register(e, "quote", func(c *runtime.WorkflowContext, q quoteRequest) (string, error) {
		return runtime.Step(c, "price@v1", runtime.StepOptions{}, func(runtime.StepContext) (string, error) {
			return fmt.Sprintf("%d items for %s: %d cents", q.Items, q.Customer, 250*q.Items), nil
		})
	}))
	must(t, runtime.RegisterBulk(e))
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- e.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-ran; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("the ops engine's Run: %v", err)
		}
		e.Close()
	})
	// The catalog records the ops engine's workflows once it runs.
	deadline := time.Now().Add(e2eWait)
	for {
		cat, err := f.e.Catalog(f.ctx)
		if err == nil && strings.Contains(fmt.Sprint(cat.Workflows), "quote") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the catalog lacks the ops engine's workflows after %v: %v %v", e2eWait, cat.Workflows, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return f
}

// shop starts a run of shop with its attributes.
func (f *e2eOps) shop(id, customer string, total float64, rush bool) {
	f.t.Helper()
	_, err := runtime.Start[basket, string](f.ctx, f.ops, "shop", basket{Customer: customer, Total: total}, runtime.WithID(id),
		runtime.WithAttributes(runtime.StringAttr("customer", customer), runtime.NumberAttr("total", total), runtime.BoolAttr("rush", rush)))
	if err != nil {
		f.t.Fatalf("start %s: %v", id, err)
	}
}

// Search the runs by attribute: the filter in the attributes' types,
// combined with the others, kept in the box; a filter that cannot be read
// is said next to the box and lists nothing; an attribute's link in the
// table searches for its value.
func testBrowserSearch(t *testing.T, browser context.Context) {
	f := newE2EOps(t, ui.Options{})
	f.shop("basket-101", "C-7", 150, true)
	f.shop("basket-102", "C-7", 40, false)
	f.shop("basket-103", "C-8", 300, false)
	f.shop("basket-104", "C-70", 120, false)
	for _, id := range []string{"basket-101", "basket-102", "basket-103", "basket-104"} {
		f.waitStatus(id, runtime.StatusComplete)
	}
	p := e2eTab(t, browser, f.e2eFixture)

	p.open("runs")
	p.wantRows("every run", "basket-101", "basket-102", "basket-103", "basket-104")
	p.set("#filters input[name=where]", "customer=C-7 total>=100")
	p.click("#filters button#apply")
	p.wantRows("customer=C-7 total>=100", "basket-101")
	if q := p.str("location.search"); !strings.Contains(q, "where=customer%3DC-7+total%3E%3D100") {
		t.Fatalf("the search's URL %q does not keep it", q)
	}
	if v := p.str("document.querySelector('#filters input[name=where]').value"); v != "customer=C-7 total>=100" {
		t.Fatalf("the search box reads %q", v)
	}
	if got := p.attrs(`#runs tr[data-run-id="basket-101"] a.attr`, "data-attr"); strings.Join(got, ",") != "customer,rush,total" {
		t.Fatalf("basket-101's attributes: %v", got)
	}

	p.set("#filters input[name=where]", "customer^=C-7")
	p.click("#filters button#apply")
	p.wantRows("customer^=C-7", "basket-101", "basket-102", "basket-104")
	p.screenshot("dashboard-search.png")

	// A number that is not one: refused in words next to the box, which
	// keeps what was typed.
	p.set("#filters input[name=where]", "total>=lots")
	p.click("#filters button#apply")
	p.until("the search's error", `(document.querySelector('#where-error')?.textContent ?? '').includes('attribute total is a number')`)
	if n := p.count("#runs tr[data-run-id]"); n != 0 {
		t.Fatalf("a search that cannot be read lists %d runs", n)
	}
	if v := p.str("document.querySelector('#filters input[name=where]').value"); v != "total>=lots" {
		t.Fatalf("after a refused search the box reads %q", v)
	}
	if inv := p.str("document.querySelector('#where').getAttribute('aria-invalid')"); inv != "true" {
		t.Fatalf("the refused search's box is not marked invalid")
	}

	// An attribute's link searches for its value.
	p.open("runs?where=total%3E%3D300")
	p.wantRows("total>=300", "basket-103")
	p.clickNow(`#runs tr[data-run-id="basket-103"] a.attr[data-attr="customer"]`)
	p.until("the search the link leads to", `document.querySelector('#filters input[name=where]')?.value === 'customer=C-8'`)
	p.wantRows("the link customer=C-8", "basket-103")
}

// A bulk restart from the failed step of 50 errored runs: chosen under
// the runs page's filter, reviewed on a page that states the count of 50,
// confirmed, and followed live until every run completed, the steps
// before the failed one not run again.
func testBrowserBulkRestartFailed(t *testing.T, browser context.Context) {
	f := newE2EOps(t, ui.Options{})
	const n = 50
	for i := range n {
		if _, err := runtime.Start[int, string](f.ctx, f.ops, "settle", i, runtime.WithID(fmt.Sprintf("settle-%02d", i))); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		f.waitStatus(fmt.Sprintf("settle-%02d", i), runtime.StatusErrored)
	}
	if b := f.billed.Load(); b != n {
		t.Fatalf("billed %d times before the bulk action, want %d", b, n)
	}
	f.start("greet", "greet-1", "ada") // a run the filter does not match
	f.waitStatus("greet-1", runtime.StatusComplete)
	p := e2eTab(t, browser, f.e2eFixture)

	p.open("runs?workflow=settle&status=errored")
	p.until("the errored runs", fmt.Sprintf("document.querySelectorAll('#runs tr[data-run-id]').length === %d", n))
	p.set("#bulk-action", "restart-failed")
	p.click("#bulk-go")
	p.until("the bulk action's review", `document.querySelector('main#bulk-new[data-action="restart-failed"]') !== null`)
	if c := p.str("document.querySelector('#bulk-count').dataset.count"); c != fmt.Sprint(n) {
		t.Fatalf("the review states %s runs, want %d", c, n)
	}
	if txt := p.text("#bulk-confirm"); txt != fmt.Sprintf("Restart %d runs", n) {
		t.Fatalf("the confirm button reads %q", txt)
	}
	words := p.str("Array.from(document.querySelectorAll('#bulk-filter li'), li => li.textContent).join('; ')")
	for _, w := range []string{"workflow is settle", "status is errored"} {
		if !strings.Contains(words, w) {
			t.Fatalf("the review's filter %q lacks %q", words, w)
		}
	}
	p.screenshot("dashboard-bulk.png")

	f.payOK.Store(true)
	p.click("#bulk-confirm")
	p.until("the bulk action's page", `document.querySelector('main#bulk-page') !== null && document.querySelector('#flash[data-kind="ok"]') !== null`)
	p.until("the bulk action done, on its page without a reload", fmt.Sprintf(
		`(() => { const g = document.querySelector('#bulk-progress'); return g !== null && g.dataset.done === 'true' && g.dataset.acted === '%d'; })()`, n))
	p.screenshot("dashboard-bulk-progress.png")
	for i := range n {
		f.waitStatus(fmt.Sprintf("settle-%02d", i), runtime.StatusComplete)
	}
	if b := f.billed.Load(); b != n {
		t.Fatalf("billed %d times after the bulk restart from the failed step, want %d (the bill step kept)", b, n)
	}
	if s := f.status("greet-1"); s != runtime.StatusComplete {
		t.Fatalf("a run outside the filter is %s", s)
	}
	p.open("bulks")
	p.until("the bulk listed", `document.querySelector('#bulks tr[data-done="true"]') !== null`)
}

// Start a run from the form: a field the schema refuses is refused next
// to it, the values kept; a good form starts the run and leads to its
// page.
func testBrowserStartForm(t *testing.T, browser context.Context) {
	f := newE2EOps(t, ui.Options{})
	p := e2eTab(t, browser, f.e2eFixture)

	p.open("runs")
	p.click("#start-link")
	p.until("the workflows to start", `document.querySelector('#start-workflows li[data-workflow="quote"] a') !== null`)
	p.click(`#start-workflows li[data-workflow="quote"] a`)
	p.until("quote's form", `document.querySelector('main#start-page[data-workflow="quote"] form#start-form') !== null`)
	p.set("#field-customer", "C-9")
	p.set("#field-items", "3")
	p.set("#field-tags", `["gift", 2]`)
	e2eEval[bool](p, "(document.querySelector('#field-express').checked = true, true)")
	p.set("#field-run-id", "quote-1")
	e2eEval[bool](p, "window.stemE2EBefore = true")
	p.click("#start-submit")
	p.until("the refusal next to the field", `window.stemE2EBefore === undefined && (document.querySelector('#field-tags-error')?.textContent ?? '').includes('want string, got number 2')`)
	for sel, want := range map[string]string{"#field-customer": "C-9", "#field-items": "3", "#field-tags": `["gift", 2]`, "#field-run-id": "quote-1"} {
		if v := p.str(fmt.Sprintf("document.querySelector(%s).value", jsString(sel))); v != want {
			t.Errorf("after the refusal %s reads %q, want %q", sel, v, want)
		}
	}
	if !e2eEval[bool](p, "document.querySelector('#field-express').checked") {
		t.Errorf("after the refusal the express box is not ticked")
	}
	if c := p.count(".field-error"); c != 1 {
		t.Errorf("%d fields show an error, want the tags' alone", c)
	}
	if _, err := f.e.Get(f.ctx, "quote-1"); err == nil {
		t.Fatal("the refused form started the run")
	}
	p.screenshot("dashboard-start.png")

	p.set("#field-tags", `["gift", "wrapped"]`)
	p.click("#start-submit")
	p.until("the new run's page", `document.querySelector('main#run[data-run-id="quote-1"]') !== null && document.querySelector('#flash[data-kind="ok"]') !== null`)
	f.waitStatus("quote-1", runtime.StatusComplete)
	p.until("the run's output on its page", `(document.querySelector('#output')?.textContent ?? '').includes('3 items for C-9: 750 cents')`)
}

// The dashboard's own login (stem ui --basic-auth): a page leads to the
// login form; a wrong password is refused there; the right one leads to
// the page; logging out leads back to the form, and the pages with it.
func testBrowserLogin(t *testing.T, browser context.Context) {
	f := newE2EFixture(t, ui.Options{Login: &ui.Login{User: "ops", Password: "correct horse battery"}})
	f.start("greet", "greet-1", "ada")
	f.waitStatus("greet-1", runtime.StatusComplete)
	p := e2eTab(t, browser, f)

	p.open("runs/greet-1")
	p.until("the login page", `document.querySelector('form#login-form') !== null`)
	if loc := p.str("location.pathname + location.search"); loc != e2ePrefix+"/login?next=runs%2Fgreet-1" {
		t.Fatalf("the page without a login leads to %s", loc)
	}
	p.set("#login-user", "ops")
	p.screenshot("dashboard-login.png")
	p.set("#login-password", "wrong")
	p.click("#login-submit")
	p.until("the refusal", `(document.querySelector('#login-error')?.textContent ?? '') === 'Wrong user or password.'`)
	if v := p.str("document.querySelector('#login-user').value"); v != "ops" {
		t.Errorf("after the refusal the user reads %q", v)
	}
	if p.count(`main#run`) != 0 {
		t.Fatal("a wrong password shows the run")
	}
	p.set("#login-password", "correct horse battery")
	p.click("#login-submit")
	p.until("the run's page after the login", `document.querySelector('main#run[data-run-id="greet-1"]') !== null`)
	if cookie := p.str("document.cookie"); strings.Contains(cookie, "stem_session") {
		t.Fatalf("the session cookie is readable by the page's script: %q", cookie)
	}
	p.open("runs")
	p.until("the runs, logged in", `document.querySelector('#runs tr[data-run-id="greet-1"]') !== null`)

	p.click("#logout")
	p.until("logged out", `document.querySelector('#logged-out') !== null && document.querySelector('form#login-form') !== null`)
	p.open("runs")
	p.until("the login page again", `document.querySelector('form#login-form') !== null && document.querySelector('#runs') === null`)
}

// clickNow clicks the element sel selects, once it is there and shown, in
// one step of the page's own script: a refresh of the page's live part
// may replace the element between chromedp's finding it and clicking it,
// which fails the click; here it cannot come between.
func (p *e2ePage) clickNow(sel string) {
	p.t.Helper()
	p.until("click "+sel, fmt.Sprintf("(() => { const e = document.querySelector(%s); if (!e || e.getClientRects().length === 0) return false; e.click(); return true; })()", jsString(sel)))
}
