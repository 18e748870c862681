package ui_test

// The harness of the browser tests (e2e_test.go): a headless Chromium, a
// SQLite store with a running engine and the test workflows, and the
// dashboard served under a prefix as a user's server would mount it.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/stores/sqlitestore"
	"github.com/stemflow/stem/ui"
)

const (
	// e2eChromiumEnv names the browser the tests must use; set (as CI
	// sets it), a browser that cannot start fails the tests instead of
	// skipping them.
	e2eChromiumEnv = "STEM_TEST_CHROMIUM"
	// e2eScreenshotsEnv names the folder the screenshots are written to.
	e2eScreenshotsEnv = "STEM_UI_SCREENSHOTS"
	// e2eWait bounds every wait on the browser: an action, a page load,
	// a condition the page must reach.
	e2eWait = 20 * time.Second
	// e2ePrefix is where the test server mounts the dashboard.
	e2ePrefix = "/ops/stem"
	// e2eRefresh is the dashboard's refresh period in the tests.
	e2eRefresh = 300 * time.Millisecond
	// e2eWidth and e2eHeight are the browser's viewport, and so the
	// screenshots' size.
	e2eWidth, e2eHeight = 1280, 800
)

// e2eChromium returns the browser to drive: $STEM_TEST_CHROMIUM, else the
// first of chromium, chromium-browser and google-chrome on PATH; without
// one the test is skipped, saying so. required says the browser was named
// by $STEM_TEST_CHROMIUM, so it must work.
func e2eChromium(t *testing.T) (path string, required bool) {
	t.Helper()
	if p := os.Getenv(e2eChromiumEnv); p != "" {
		return p, true
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, false
		}
	}
	t.Skipf("no Chromium: none of chromium, chromium-browser, google-chrome is on PATH and $%s is not set; "+
		"install Debian's chromium (.ci/run does) or set $%s to a Chrome or Chromium binary", e2eChromiumEnv, e2eChromiumEnv)
	return "", false
}

// e2eBrowser starts a headless Chromium for the test and returns its
// context; e2eTab opens tabs in it. The browser is closed when the test
// ends.
func e2eBrowser(t *testing.T) context.Context {
	t.Helper()
	path, required := e2eChromium(t)
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		// Containers often have a small /dev/shm, where Chromium's
		// renderers otherwise crash; and no crash reports.
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-breakpad", true),
		chromedp.UserDataDir(filepath.Join(t.TempDir(), "chromium-profile")),
		chromedp.WindowSize(e2eWidth, e2eHeight),
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	log := &e2eLog{}
	ctx, cancel := chromedp.NewContext(allocCtx, chromedp.WithErrorf(log.printf), chromedp.WithLogf(log.printf))
	started := false
	t.Cleanup(func() {
		if started {
			closing, stop := context.WithTimeout(ctx, e2eWait)
			chromedp.Cancel(closing) // closes the browser gracefully, then waits for it
			stop()
			cancel()
		}
		// A browser that did not start is not waited for: chromedp's
		// cancel would wait for it forever.
		cancelAlloc()
		if t.Failed() {
			log.dump(t, "chromedp")
		}
	})
	// The first Run starts the browser and binds it to ctx, so it is
	// bounded by a timer that cancels the browser, not by a timeout on
	// ctx.
	watchdog := time.AfterFunc(e2eWait, cancelAlloc)
	err := chromedp.Do(ctx)
	if !watchdog.Stop() && err == nil {
		err = fmt.Errorf("did not start within %v", e2eWait)
	}
	started = err == nil
	if err != nil {
		if required {
			t.Fatalf("the browser $%s=%s cannot start: %v", e2eChromiumEnv, path, err)
		}
		t.Fatalf("the browser %s (found on PATH) cannot start: %v; set $%s to a working one", path, err, e2eChromiumEnv)
	}
	return ctx
}

// e2eLog holds what chromedp logs, shown when a test fails.
type e2eLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *e2eLog) printf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
}

func (l *e2eLog) add(line string) { l.printf("%s", line) }

func (l *e2eLog) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.lines...)
}

func (l *e2eLog) dump(t *testing.T, what string) {
	t.Helper()
	if lines := l.all(); len(lines) > 0 {
		t.Logf("%s said:\n%s", what, strings.Join(lines, "\n"))
	}
}

// e2ePage is one browser tab on the dashboard of a fixture.
type e2ePage struct {
	t    *testing.T
	ctx  context.Context
	base string // the dashboard's URL, with its trailing slash
	// console holds what the pages of the tab wrote to the console and
	// the exceptions they threw.
	console e2eLog
	// failures are the console's exceptions and refused resources
	// (Content-Security-Policy): the dashboard's pages must have none.
	failures atomic.Int32
}

// e2eTab opens a tab of browser on the dashboard of f, closed when the
// test ends. The tab fails the test if a page throws an uncaught exception
// or the browser refuses a resource of it.
func e2eTab(t *testing.T, browser context.Context, f *e2eFixture) *e2ePage {
	t.Helper()
	ctx, cancel := chromedp.NewContext(browser)
	p := &e2ePage{t: t, ctx: ctx, base: f.base}
	t.Cleanup(func() {
		cancel()
		if t.Failed() {
			p.console.dump(t, "the pages' console")
		}
	})
	watchdog := time.AfterFunc(e2eWait, cancel)
	err := chromedp.Do(ctx, chromedp.EmulateViewport(e2eWidth, e2eHeight))
	if !watchdog.Stop() && err == nil {
		err = fmt.Errorf("no tab within %v", e2eWait)
	}
	if err != nil {
		t.Fatalf("opening a tab: %v", err)
	}
	messages := chromedp.Console(ctx)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			p.console.add(fmt.Sprintf("%s %s:%d %s", m.Type, m.URL, m.Line, m.Text))
			if m.IsException() || (m.Type == chromedp.ConsoleError && m.Source == "security") {
				p.failures.Add(1)
			}
		}
	}()
	t.Cleanup(func() {
		if n := p.failures.Load(); n > 0 {
			t.Errorf("the dashboard's pages threw %d uncaught exceptions or had resources refused; the console:\n%s", n, strings.Join(p.console.all(), "\n"))
		}
	})
	return p
}

// do runs actions on the tab within e2eWait; what says what they do, for
// the failure.
func (p *e2ePage) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, e2eWait)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		p.t.Fatalf("%s: %v\n%s", what, err, p.describe())
	}
}

// open loads the dashboard's page at path (relative to the mount point).
func (p *e2ePage) open(path string) {
	p.t.Helper()
	p.do("open "+p.base+path, chromedp.Navigate(p.base+path))
}

// click clicks the element sel selects (a CSS selector), once visible.
func (p *e2ePage) click(sel string) {
	p.t.Helper()
	p.do("click "+sel, chromedp.Click(chromedp.CSS(sel), chromedp.NodeVisible))
}

// confirm clicks the confirm button of the open dialog and waits for the
// page its action leads to, with an outcome of kind ("ok" or "error");
// what names the action.
func (p *e2ePage) confirm(what, kind string) {
	p.t.Helper()
	e2eEval[bool](p, "window.stemE2EBefore = true")
	p.click("dialog[open] button[data-confirm]")
	p.until(what+"'s outcome", fmt.Sprintf("window.stemE2EBefore === undefined && document.querySelector('#flash[data-kind=%s]') !== null", jsString(kind)))
}

// set sets the value of the form field sel selects.
func (p *e2ePage) set(sel, value string) {
	p.t.Helper()
	p.do(fmt.Sprintf("set %s to %q", sel, value), chromedp.SetValue(chromedp.CSS(sel), value))
	if got := p.str(fmt.Sprintf("document.querySelector(%s).value", jsString(sel))); got != value {
		p.t.Fatalf("%s: set to %q, holds %q (no such option?)\n%s", sel, value, got, p.describe())
	}
}

// eval evaluates a JavaScript expression in the page.
func e2eEval[T any](p *e2ePage, expr string) T {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, e2eWait)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		p.t.Fatalf("evaluating %s: %v\n%s", expr, err, p.describe())
	}
	return v
}

// str evaluates an expression that gives a string.
func (p *e2ePage) str(expr string) string {
	p.t.Helper()
	return e2eEval[string](p, "String("+expr+")")
}

// text is the trimmed text of the element sel selects, "" if none.
func (p *e2ePage) text(sel string) string {
	p.t.Helper()
	return p.str(fmt.Sprintf("(document.querySelector(%s)?.textContent ?? '').trim()", jsString(sel)))
}

// count is how many elements sel selects.
func (p *e2ePage) count(sel string) int {
	p.t.Helper()
	return e2eEval[int](p, fmt.Sprintf("document.querySelectorAll(%s).length", jsString(sel)))
}

// attrs lists the attribute name of every element sel selects.
func (p *e2ePage) attrs(sel, name string) []string {
	p.t.Helper()
	return e2eEval[[]string](p, fmt.Sprintf("Array.from(document.querySelectorAll(%s), e => e.getAttribute(%s) ?? '')", jsString(sel), jsString(name)))
}

// until waits until the JavaScript expression cond is true in the page,
// across page loads, for at most e2eWait; what says what it waits for.
func (p *e2ePage) until(what, cond string) {
	p.t.Helper()
	deadline := time.Now().Add(e2eWait)
	var last error
	for {
		ctx, cancel := context.WithTimeout(p.ctx, time.Second)
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool]("Boolean("+cond+")"))
		cancel()
		if err == nil && ok {
			return
		}
		if err != nil {
			last = err // a page being replaced has no context to evaluate in
		}
		if p.ctx.Err() != nil || time.Now().After(deadline) {
			p.t.Fatalf("waited %v for %s (%s); last error: %v\n%s", e2eWait, what, cond, last, p.describe())
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// describe says where the tab is and what it shows, for a failure.
func (p *e2ePage) describe() string {
	ctx, cancel := context.WithTimeout(p.ctx, 2*time.Second)
	defer cancel()
	loc, _ := chromedp.Run(ctx, chromedp.Evaluate[string]("location.href"))
	body, err := chromedp.Run(ctx, chromedp.Evaluate[string]("document.body ? document.body.innerText : ''"))
	if err != nil {
		body = fmt.Sprintf("(no page text: %v)", err)
	}
	const max = 3000
	if len(body) > max {
		body = body[:max] + "…"
	}
	return fmt.Sprintf("the tab is at %s and shows:\n%s", loc, body)
}

// screenshot writes the viewport as a PNG named name into the screenshots
// folder.
func (p *e2ePage) screenshot(name string) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, e2eWait)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		p.t.Fatalf("screenshot %s: %v", name, err)
	}
	dir := e2eScreenshots(p.t)
	if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
		p.t.Fatal(err)
	}
}

var e2eScreenshotsSaid sync.Once

// e2eScreenshots is the folder the screenshots go to: $STEM_UI_SCREENSHOTS,
// else stem-ui-screenshots in the system's temporary folder.
func e2eScreenshots(t *testing.T) string {
	t.Helper()
	dir := os.Getenv(e2eScreenshotsEnv)
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "stem-ui-screenshots")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("the screenshots folder: %v", err)
	}
	e2eScreenshotsSaid.Do(func() { t.Logf("screenshots in %s (set $%s for another folder)", dir, e2eScreenshotsEnv) })
	return dir
}

// jsString quotes s as a JavaScript string literal.
func jsString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r == 0x2028 || r == 0x2029:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// shipment is the payload of the "shipment" event the order workflow
// waits for.
type shipment struct {
	Tracking string `json:"tracking"`
}

// e2eFixture is a SQLite store, an engine working it with the test
// workflows, and the dashboard on it, served by a test server under
// e2ePrefix.
type e2eFixture struct {
	t     *testing.T
	e     *runtime.Engine
	ctx   context.Context
	base  string // the dashboard's URL, with its trailing slash
	posts e2eCounter
	// release unblocks the hold workflow's step; deliver the order
	// workflow's last step.
	release, deliver chan struct{}
	// cardOK makes the charge workflow's charge step succeed; reserved
	// counts its reserve step's runs.
	cardOK   atomic.Bool
	reserved atomic.Int32
}

// e2eCounter counts requests by method and path.
type e2eCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *e2eCounter) add(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[key]++
}

func (c *e2eCounter) get(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[key]
}

// newE2EFixture opens a SQLite store in a temporary folder, starts an
// engine on it with the test workflows, and serves the dashboard with opts
// under e2ePrefix.
func newE2EFixture(t *testing.T, opts ui.Options) *e2eFixture {
	t.Helper()
	store, err := sqlitestore.Open(filepath.Join(t.TempDir(), "stem.db"), sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e, err := runtime.New(runtime.Config{Store: store, PollInterval: 20 * time.Millisecond, ShutdownGrace: -1, WorkerID: "e2e-worker"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	f := &e2eFixture{t: t, e: e, ctx: ctx, release: make(chan struct{}), deliver: make(chan struct{})}
	f.register()
	ran := make(chan error, 1)
	go func() { ran <- e.Run(ctx) }()

	if opts.Refresh == 0 {
		opts.Refresh = e2eRefresh
	}
	dashboard := ui.New(e, opts)
	mux := http.NewServeMux()
	mux.Handle(e2ePrefix+"/", http.StripPrefix(e2ePrefix, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			f.posts.add(r.URL.Path)
		}
		dashboard.ServeHTTP(w, r)
	})))
	srv := httptest.NewUnstartedServer(mux)
	// Requests live in serving, so a live page's stream ends when the
	// test does and the server can close.
	serving, stopServing := context.WithCancel(context.Background())
	srv.Config.BaseContext = func(net.Listener) context.Context { return serving }
	srv.Start()
	f.base = srv.URL + e2ePrefix + "/"

	t.Cleanup(func() {
		stopServing()
		srv.CloseClientConnections()
		srv.Close()
		cancel()
		if err := <-ran; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("engine.Run: %v", err)
		}
		e.Close()
		store.Close()
	})
	return f
}

// register registers the test workflows and the event type.
func (f *e2eFixture) register() {
	t := f.t
	t.Helper()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(runtime.Register(f.e, "greet", func(c *runtime.WorkflowContext, name string) (string, error) {
		return runtime.Step(c, "say@v1", runtime.StepOptions{}, func(runtime.StepContext) (string, error) { return "hello " + name, nil })
	}))
	// order reserves, waits up to an hour for its shipment, then delivers
	// once the test closes deliver.
	must(runtime.Register(f.e, "order", func(c *runtime.WorkflowContext, item string) (string, error) {
		if _, err := runtime.Step(c, "reserve@v1", runtime.StepOptions{}, func(runtime.StepContext) (string, error) { return "reserved " + item, nil }); err != nil {
			return "", err
		}
		s, err := runtime.WaitForEvent[shipment](c, "shipped", "shipment", time.Hour)
		if err != nil {
			return "", err
		}
		return runtime.Step(c, "deliver@v1", runtime.StepOptions{}, func(sc runtime.StepContext) (string, error) {
			select {
			case <-f.deliver:
				return "delivered " + item + " with " + s.Tracking, nil
			case <-sc.Done():
				return "", sc.Err()
			}
		})
	}))
	must(runtime.RegisterEvent[shipment](f.e, "shipment"))
	// hold runs its one step until the test closes release.
	must(runtime.Register(f.e, "hold", func(c *runtime.WorkflowContext, n int) (string, error) {
		return runtime.Step(c, "work@v1", runtime.StepOptions{}, func(sc runtime.StepContext) (string, error) {
			select {
			case <-f.release:
				return "done", nil
			case <-sc.Done():
				return "", sc.Err()
			}
		})
	}))
	// charge reserves, then fails to charge (twice: one retry) until the
	// test sets cardOK.
	must(runtime.Register(f.e, "charge", func(c *runtime.WorkflowContext, cents int) (string, error) {
		if _, err := runtime.Step(c, "reserve@v1", runtime.StepOptions{}, func(runtime.StepContext) (int, error) {
			f.reserved.Add(1)
			return cents, nil
		}); err != nil {
			return "", err
		}
		return runtime.Step(c, "charge@v1", runtime.StepOptions{Retries: 1, Backoff: time.Millisecond}, func(runtime.StepContext) (string, error) {
			if !f.cardOK.Load() {
				return "", errors.New("card declined: insufficient funds")
			}
			return fmt.Sprintf("charged %d cents", cents), nil
		})
	}))
	// tally takes "add" updates: it appends the total after each to its
	// stream "totals" and replies it, until an update of 0 ends it.
	must(runtime.RegisterUpdate[int, int](f.e, "add", nil))
	must(runtime.Register(f.e, "tally", func(c *runtime.WorkflowContext, total int) (string, error) {
		for {
			u, err := runtime.AwaitUpdate[int, int](c, "add", "add")
			if err != nil {
				return "", err
			}
			if u.Request == 0 {
				return fmt.Sprintf("total %d", total), u.Reply(c, total)
			}
			total += u.Request
			if err := runtime.Append(c, "totals", total); err != nil {
				return "", err
			}
			if err := u.Reply(c, total); err != nil {
				return "", err
			}
		}
	}))
	// parent calls greet as its child.
	must(runtime.Register(f.e, "parent", func(c *runtime.WorkflowContext, name string) (string, error) {
		return runtime.CallChild[string](c, "greeting", "greet", name)
	}))
}

// start starts a run of workflow with id and input.
func (f *e2eFixture) start(workflow, id string, in any, opts ...runtime.StartOption) {
	f.t.Helper()
	var err error
	opts = append(opts, runtime.WithID(id))
	switch in := in.(type) {
	case string:
		_, err = runtime.Start[string, string](f.ctx, f.e, workflow, in, opts...)
	case int:
		_, err = runtime.Start[int, string](f.ctx, f.e, workflow, in, opts...)
	default:
		f.t.Fatalf("start %s: input %T", id, in)
	}
	if err != nil {
		f.t.Fatalf("start %s: %v", id, err)
	}
}

// waitStatus waits until the run is in status want.
func (f *e2eFixture) waitStatus(id string, want runtime.RunStatus) {
	f.t.Helper()
	deadline := time.Now().Add(e2eWait)
	for {
		info, err := f.e.Get(f.ctx, id)
		if err == nil && info.Status == want {
			return
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("run %s is %s (%v) after %v, want %s", id, info.Status, err, e2eWait, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// status is the run's status now.
func (f *e2eFixture) status(id string) runtime.RunStatus {
	f.t.Helper()
	info, err := f.e.Get(f.ctx, id)
	if err != nil {
		f.t.Fatalf("get %s: %v", id, err)
	}
	return info.Status
}
