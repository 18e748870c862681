package ui_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/storage"
	"github.com/stemflow/stem/stores/memstore"
	"github.com/stemflow/stem/stores/sqlitestore"
	"github.com/stemflow/stem/ui"
)

// testHosts are the hosts the test dashboards answer to besides localhost
// and IP addresses: httptest.NewRequest's.
var testHosts = []string{"example.com"}

// dash is a dashboard over a memstore-backed engine, for handler tests.
type dash struct {
	t     *testing.T
	store storage.Store
	e     *runtime.Engine
	h     http.Handler
	// access is what Authorize answers: a request may name another in the
	// X-Test-Access header ("none", "read", "operate").
	access ui.Access
}

// approval is the payload of the order.approved event.
type approval struct {
	By string `json:"by"`
}

// newDash returns a dashboard over a fresh memstore. With work, the
// engine registers the test workflows (see register) and runs them.
func newDash(t *testing.T, work bool, clock storage.Clock) *dash {
	t.Helper()
	return newDashClock(t, memstore.New(memstore.Options{Clock: clock}), work, clock)
}

// newSQLiteDash is newDash over a SQLite store in a file of its own.
func newSQLiteDash(t *testing.T, work bool, clock storage.Clock) *dash {
	t.Helper()
	st, err := sqlitestore.Open(filepath.Join(t.TempDir(), "stem.db"), sqlitestore.Options{Clock: clock})
	must(t, err)
	return newDashClock(t, st, work, clock)
}

// newDashOn returns a dashboard over st, which it closes at the test's
// end.
func newDashOn(t *testing.T, st storage.Store, work bool) *dash {
	t.Helper()
	return newDashClock(t, st, work, nil)
}

// newDashClock is newDashOn with the engine on clock (nil: the system's),
// the store's own, so that the pages' "3 min ago" reads the store's
// times on the store's clock.
func newDashClock(t *testing.T, st storage.Store, work bool, clock storage.Clock) *dash {
	t.Helper()
	d := &dash{t: t, store: st, access: ui.AccessOperate}
	t.Cleanup(func() { d.store.Close() })
	e, err := runtime.New(runtime.Config{Store: d.store, PollInterval: 5 * time.Millisecond, HeartbeatInterval: 50 * time.Millisecond, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	d.e = e
	t.Cleanup(func() { e.Close() })
	if work {
		register(t, e)
		runEngine(t, e)
	}
	d.h = ui.New(e, ui.Options{Authorize: d.authorize, AllowedHosts: testHosts})
	return d
}

// runEngine runs e until the test ends.
func runEngine(t *testing.T, e *runtime.Engine) {
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.Run(ctx)
	}()
	t.Cleanup(func() {
		stop()
		<-done
	})
}

func (d *dash) authorize(r *http.Request) ui.Access {
	switch r.Header.Get("X-Test-Access") {
	case "none":
		return ui.AccessNone
	case "read":
		return ui.AccessRead
	case "operate":
		return ui.AccessOperate
	}
	return d.access
}

// register registers the test workflows:
//
//   - approval: a step, progress, then a wait for order.approved (an hour
//     at most), then its output;
//   - flaky: a step that fails twice with a long error before it
//     succeeds, a child call of leaf, then an hour's sleep;
//   - leaf: one step;
//   - doomed: a step that fails for good;
//   - gated: a step that runs until its run's gate (see gates) is
//     closed, then another;
//   - payable: a step that returns its input, then one that fails for
//     good until payOK holds the input.
func register(t *testing.T, e *runtime.Engine) {
	t.Helper()
	must(t, runtime.Register(e, "payable", func(c *runtime.WorkflowContext, group string) (string, error) {
		if _, err := runtime.Step(c, "bill@v1", runtime.StepOptions{}, func(runtime.StepContext) (string, error) { return group, nil }); err != nil {
			return "", err
		}
		return runtime.Step(c, "pay@v1", runtime.StepOptions{}, func(runtime.StepContext) (string, error) {
			if _, ok := payOK.Load(group); !ok {
				return "", runtime.Permanent(errors.New("the bank is closed"))
			}
			return "paid " + group, nil
		})
	}))
	must(t, runtime.Register(e, "gated", func(c *runtime.WorkflowContext, _ int) (string, error) {
		if err := runtime.Do(c, "hold@v1", runtime.StepOptions{}, func(sc runtime.StepContext) error {
			gate, _ := gates.Load(sc.RunID())
			select {
			case <-gate.(chan struct{}):
			case <-sc.Done():
			}
			return nil
		}); err != nil {
			return "", err
		}
		return runtime.Step(c, "after@v1", runtime.StepOptions{}, func(runtime.StepContext) (string, error) { return "released", nil })
	}))
	must(t, runtime.RegisterEvent[approval](e, "order.approved"))
	must(t, runtime.Register(e, "approval", func(c *runtime.WorkflowContext, in map[string]string) (string, error) {
		if _, err := runtime.Step(c, "check@v1", runtime.StepOptions{}, func(runtime.StepContext) (string, error) { return "checked " + in["note"], nil }); err != nil {
			return "", err
		}
		if err := runtime.SetProgress(c, map[string]string{"stage": "awaiting approval"}); err != nil {
			return "", err
		}
		a, err := runtime.WaitForEvent[approval](c, "approved", "order.approved", time.Hour)
		if err != nil {
			return "", err
		}
		return "approved by " + a.By, nil
	}))
	must(t, runtime.Register(e, "flaky", func(c *runtime.WorkflowContext, _ int) (string, error) {
		_, err := runtime.Step(c, "charge@v1", runtime.StepOptions{Retries: 3, Backoff: time.Millisecond, MaxBackoff: time.Millisecond}, func(sc runtime.StepContext) (int, error) {
			if sc.Attempt() < 3 {
				return 0, errors.New("card <script>alert('declined')</script> declined\ngoroutine 7 [running]:\nshop.charge(0x1)\n\t/src/shop/charge.go:42 +0x1d")
			}
			return 42, nil
		})
		if err != nil {
			return "", err
		}
		if _, err := runtime.CallChild[string](c, "ship", "leaf", "parcel"); err != nil {
			return "", err
		}
		return "", c.Sleep("cool-off", time.Hour)
	}))
	must(t, runtime.Register(e, "leaf", func(c *runtime.WorkflowContext, in string) (string, error) {
		return runtime.Step(c, "pack@v1", runtime.StepOptions{}, func(runtime.StepContext) (string, error) { return "packed " + in, nil })
	}))
	must(t, runtime.Register(e, "doomed", func(c *runtime.WorkflowContext, _ int) (string, error) {
		return runtime.Step(c, "explode@v1", runtime.StepOptions{}, func(runtime.StepContext) (string, error) {
			return "", runtime.Permanent(fmt.Errorf(`boom: "<b>bold</b>" & 'quoted'%w`, errBoom))
		})
	}))
}

// errBoom is a declared error with an empty text, so the doomed run's
// text stays as it was: the run page names it.
var errBoom = errors.New("")

func init() { runtime.DeclareError("ui.boom", errBoom) }

// gates hold the gated workflow's runs in their first step, by run ID,
// until closed.
var gates sync.Map

// payOK holds the groups of the payable workflow whose pay step succeeds.
var payOK sync.Map

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// start starts a run of a test workflow with a chosen ID and input.
func (d *dash) start(workflow, id, input string) {
	d.t.Helper()
	if _, err := d.e.StartJSON(context.Background(), workflow, id, []byte(input)); err != nil {
		d.t.Fatal(err)
	}
}

// eventually polls until cond holds, failing the test after a generous
// while; it asserts an outcome, not how long it took.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting until %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitStatus waits until the run is in status.
func (d *dash) waitStatus(id string, status runtime.RunStatus) runtime.RunInfo {
	d.t.Helper()
	var info runtime.RunInfo
	eventually(d.t, fmt.Sprintf("run %s is %s", id, status), func() bool {
		var err error
		info, err = d.e.Get(context.Background(), id)
		return err == nil && info.Status == status
	})
	return info
}

// waitSleeping waits until the run sleeps: waiting, for no event.
func (d *dash) waitSleeping(id string) {
	d.t.Helper()
	eventually(d.t, "run "+id+" sleeps", func() bool {
		info, err := d.e.Get(context.Background(), id)
		return err == nil && info.Status == runtime.StatusWaiting && len(info.WaitTopics) == 0 && info.ReadyAt != nil
	})
}

// status returns the run's status now.
func (d *dash) status(id string) runtime.RunStatus {
	d.t.Helper()
	info, err := d.e.Get(context.Background(), id)
	must(d.t, err)
	return info.Status
}

// response is a response with its body read.
type response struct {
	*http.Response
	body string
	req  *http.Request
}

// do serves one request with the dashboard.
func (d *dash) do(r *http.Request) *response {
	d.t.Helper()
	rec := httptest.NewRecorder()
	d.h.ServeHTTP(rec, r)
	res := rec.Result()
	b, _ := io.ReadAll(res.Body)
	return &response{Response: res, body: string(b), req: r}
}

// get serves a GET of target, with the cookies given.
func (d *dash) get(target string, cookies ...*http.Cookie) *response {
	d.t.Helper()
	r := httptest.NewRequest(http.MethodGet, target, nil)
	for _, c := range cookies {
		r.AddCookie(c)
	}
	return d.do(r)
}

// post serves a form POST of target, with the cookies given, as a browser
// on the dashboard's own page sends it.
func (d *dash) post(target string, form url.Values, cookies ...*http.Cookie) *response {
	d.t.Helper()
	r := postRequest(target, form, cookies...)
	return d.do(r)
}

func postRequest(target string, form url.Values, cookies ...*http.Cookie) *http.Request {
	r := httptest.NewRequest(http.MethodPost, target, strings.NewReader(form.Encode()))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	r.Header.Set("Sec-Fetch-Site", "same-origin")
	for _, c := range cookies {
		r.AddCookie(c)
	}
	return r
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// session opens the page at target as an operator and returns the csrf
// cookie it set and the token its forms carry.
func (d *dash) session(target string) (*http.Cookie, string) {
	d.t.Helper()
	res := d.get(target)
	if res.StatusCode != http.StatusOK {
		d.t.Fatalf("GET %s: %d\n%s", target, res.StatusCode, res.body)
	}
	var cookie *http.Cookie
	for _, c := range res.Cookies() {
		if c.Name == "stem_csrf" {
			cookie = c
		}
	}
	m := csrfField.FindStringSubmatch(res.body)
	if cookie == nil || m == nil {
		d.t.Fatalf("GET %s: no csrf cookie (%v) or token in the page", target, res.Header["Set-Cookie"])
	}
	return &http.Cookie{Name: cookie.Name, Value: cookie.Value}, m[1]
}

// act posts an action as an operator on the run's page would, and
// returns the response (a redirect when the action was taken up).
func (d *dash) act(id, action string, form url.Values) *response {
	d.t.Helper()
	page := "/" + runPath(id)
	cookie, token := d.session(page)
	if form == nil {
		form = url.Values{}
	}
	form.Set("csrf", token)
	return d.post(page+"/"+action, form, cookie)
}

// follow reads the page a redirect leads to, resolving its Location
// against the request's URL as a browser does.
func (d *dash) follow(from string, res *response) *response {
	d.t.Helper()
	if res.StatusCode != http.StatusSeeOther && res.StatusCode != http.StatusFound {
		d.t.Fatalf("%s: status %d, want a redirect\n%s", from, res.StatusCode, res.body)
	}
	return d.get(resolve(d.t, from, res.Header.Get("Location")))
}

// resolve resolves ref against the URL from, as a browser does.
func resolve(t *testing.T, from, ref string) string {
	t.Helper()
	base, err := url.Parse("http://example.com" + from)
	must(t, err)
	u, err := url.Parse(ref)
	if err != nil {
		t.Fatalf("%s: bad URL %q: %v", from, ref, err)
	}
	r := base.ResolveReference(u)
	return r.RequestURI()
}

// runPath is a run page's path as the dashboard links it.
func runPath(id string) string { return "runs/" + url.PathEscape(id) }

var flashDiv = regexp.MustCompile(`<div id="flash" class="flash" data-kind="(ok|error)" role="status">([^<]*)</div>`)

// flashOf returns the kind and message of the page's flash, "" when it
// has none.
func flashOf(body string) (kind, msg string) {
	m := flashDiv.FindStringSubmatch(body)
	if m == nil {
		return "", ""
	}
	return m[1], m[2]
}

// want fails unless the response has the status.
func (r *response) want(t *testing.T, status int) *response {
	t.Helper()
	if r.StatusCode != status {
		t.Fatalf("%s %s: status %d, want %d\n%s", r.req.Method, r.req.URL, r.StatusCode, status, r.body)
	}
	return r
}

// contains fails unless the body holds every string.
func (r *response) contains(t *testing.T, subs ...string) *response {
	t.Helper()
	for _, s := range subs {
		if !strings.Contains(r.body, s) {
			t.Errorf("%s %s: body lacks %q\n%s", r.req.Method, r.req.URL, s, r.body)
		}
	}
	return r
}

// lacks fails if the body holds any of the strings.
func (r *response) lacks(t *testing.T, subs ...string) *response {
	t.Helper()
	for _, s := range subs {
		if strings.Contains(r.body, s) {
			t.Errorf("%s %s: body holds %q\n%s", r.req.Method, r.req.URL, s, r.body)
		}
	}
	return r
}
