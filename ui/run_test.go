package ui_test

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/storage"
	"github.com/stemflow/stem/ui"
)

// stepItems finds the steps a run page lists, in order.
var stepItems = regexp.MustCompile(`<li class="step" data-key="([^"]*)" data-status="([^"]*)">`)

func stepsOf(res *response) []string {
	var out []string
	for _, m := range stepItems.FindAllStringSubmatch(res.body, -1) {
		out = append(out, m[1]+"="+m[2])
	}
	return out
}

// A run's page shows its steps in order with their attempts (failed ones
// with their error, the stack collapsed), its child as a link, and its
// sleep; the child's page links back to its parent.
func TestRunPageShowsStepsAttemptsChildrenAndParent(t *testing.T) {
	t.Parallel()
	d := newDash(t, true, nil)
	d.start("flaky", "flaky-1", `0`)
	d.waitSleeping("flaky-1")

	res := d.get("/"+runPath("flaky-1")).want(t, http.StatusOK)
	res.contains(t, `<main id="run" data-run-id="flaky-1" data-status="waiting">`, `<span id="status" class="status st-waiting">waiting</span>`,
		`<pre id="input">0</pre>`, `<section id="sleep" class="callout">`, `(sleep <code>cool-off</code>)`,
		`<body data-refresh="2000">`)
	// The sleep has not fired: it is pending, not complete.
	sameIDs(t, "steps", stepsOf(res), []string{"charge@v1=complete", "ship=complete", "cool-off=pending"})
	charge := res.body[strings.Index(res.body, `data-key="charge@v1"`):strings.Index(res.body, `data-key="ship"`)]
	for _, want := range []string{
		`<li class="attempt failed" data-attempt="1">`, `<li class="attempt failed" data-attempt="2">`, `<li class="attempt" data-attempt="3">`,
		`<pre class="first">card &lt;script&gt;alert(&#39;declined&#39;)&lt;/script&gt; declined</pre><details class="more"><summary>4 lines</summary><pre>card`,
		"goroutine 7 [running]:", "took ", "retry at", "succeeded", `<pre class="out">42</pre>`,
	} {
		if !strings.Contains(charge, want) {
			t.Errorf("the charge step lacks %q:\n%s", want, charge)
		}
	}
	res.contains(t, `<a class="child-link" href="../runs/flaky-1%2Fship">flaky-1/ship</a>`,
		`<section id="children">`, `<a class="run-link" href="../runs/flaky-1%2Fship">flaky-1/ship</a>`,
		`<p class="wake">Wakes at <time`, `<table id="executions"`, `<tr data-execution="1" class="shown">`)

	child := d.get("/runs/flaky-1%2Fship").want(t, http.StatusOK)
	child.contains(t, `<p id="parent">Child of <a class="run-link" href="../runs/flaky-1">flaky-1</a> <span class="sub" id="parent-close">parent-close: terminate</span></p>`,
		`data-status="complete"`, `<pre id="output">&#34;packed parcel&#34;</pre>`).lacks(t, "data-refresh", `id="children"`)
	sameIDs(t, "the child's steps", stepsOf(child), []string{"pack@v1=complete"})

	// A run waiting for an event says for which and until when; an errored
	// one shows its error; progress shows as JSON.
	d.start("approval", "order-1", `{"note":"rush"}`)
	d.waitStatus("order-1", "waiting")
	wait := d.get("/"+runPath("order-1")).want(t, http.StatusOK)
	wait.contains(t, `<section id="wait" class="callout">`, `<code class="topic">order.approved</code>`, "Times out at <time",
		`<pre id="progress">{
  &#34;stage&#34;: &#34;awaiting approval&#34;
}</pre>`, `<datalist id="topics"><option value="order.approved"></datalist>`, `name="topic" list="topics" required autocomplete="off" spellcheck="false" value="order.approved"`,
		`<p id="payload-error" class="error" role="alert" hidden></p>`, `<textarea name="payload"`)
	sameIDs(t, "the waiting run's steps", stepsOf(wait), []string{"check@v1=complete", "approved=waiting"})

	d.start("doomed", "doomed-1", `0`)
	d.waitStatus("doomed-1", "errored")
	failed := d.get("/"+runPath("doomed-1")).want(t, http.StatusOK)
	failed.contains(t, `<pre id="error">boom: &#34;&lt;b&gt;bold&lt;/b&gt;&#34; &amp; &#39;quoted&#39;</pre>`, `<h2>Error <code id="error-name">ui.boom</code></h2>`).lacks(t, "data-refresh", `id="output"`)
	sameIDs(t, "the failed run's steps", stepsOf(failed), []string{"explode@v1=failed"})
}

// An earlier execution's steps are a link away, and the restart dialog
// offers the current execution's steps.
func TestRunPageShowsEarlierExecutions(t *testing.T) {
	t.Parallel()
	d := newDash(t, true, nil)
	d.start("approval", "order-1", `{}`)
	d.waitStatus("order-1", "waiting")
	must(t, d.e.Restart(context.Background(), "order-1"))
	d.waitStatus("order-1", "waiting")
	must(t, d.e.Terminate(context.Background(), "order-1", "enough"))

	res := d.get("/"+runPath("order-1")).want(t, http.StatusOK)
	res.contains(t, `<tr data-execution="1">`, `<a href="../runs/order-1?execution=1">1</a>`, `<tr data-execution="2" class="shown">`,
		`<option value="">from the top</option><option value="check@v1">from step check@v1</option></select>`)
	first := d.get("/runs/order-1?execution=1").want(t, http.StatusOK)
	first.contains(t, "<h2>Steps of execution 1</h2>", `<tr data-execution="1" class="shown">`,
		`<option value="check@v1">from step check@v1</option>`)
	sameIDs(t, "execution 1", stepsOf(first), []string{"check@v1=complete"})
}

// What a URL asks for that is not there, or not well formed, is a page
// that says so, with the status to match; never a stack.
func TestBadURLsAreAnsweredInWords(t *testing.T) {
	t.Parallel()
	d := newDash(t, true, nil)
	d.start("approval", "order-1", `{}`)
	d.waitStatus("order-1", "waiting")
	for target, want := range map[string]struct {
		status int
		words  string
	}{
		"/runs/order-9":              {404, "There is no run &#34;order-9&#34; in this store"},
		"/runs/order-1?execution=x":  {400, "execution &#34;x&#34; is not an execution number"},
		"/runs/order-1?execution=0":  {400, "executions are numbered from 1"},
		"/runs/order-1?execution=-1": {400, "is not an execution number"},
		"/runs/order-1?execution=7":  {404, "Run order-1 has no execution 7: it has 1 execution, 1 to 1."},
		"/nowhere":                   {404, "There is no page at /nowhere"},
		"/runs/order-1/pause":        {404, "There is no page at /runs/order-1/pause"},
		"/runs/order-1/a/b":          {404, "There is no page"},
		"/assets/evil.js":            {404, "There is no page"},
	} {
		res := d.get(target).want(t, want.status)
		res.contains(t, `<main id="problem" class="problem"`, want.words, `id="nav"`, `href="`).lacks(t, "goroutine", ".go:")
		if ct := res.Header.Get("Content-Type"); ct != "text/html; charset=utf-8" {
			t.Errorf("%s: Content-Type %q", target, ct)
		}
	}
	res := d.do(postRequest("/queues", nil)).want(t, http.StatusMethodNotAllowed)
	res.contains(t, "POST /queues is not something the dashboard does")
	d.get("/").want(t, http.StatusFound)
	d.get("/runs/").want(t, http.StatusFound)
}

// Runs whose IDs browsers would take for a path's dot segments ("." and
// "..") are linked through the query, and their pages and actions work.
func TestDotRunIDs(t *testing.T) {
	t.Parallel()
	d := newDash(t, false, nil)
	_, err := d.store.CreateRuns(context.Background(), []storage.NewRun{{ID: "..", Workflow: "nobody"}, {ID: ".", Workflow: "nobody"}})
	must(t, err)
	list := d.get("/runs").want(t, http.StatusOK)
	list.contains(t, `<a class="run-link" href="./runs/?id=..">..</a>`, `<a class="run-link" href="./runs/?id=.">.</a>`)
	page := d.get("/runs/?id=..").want(t, http.StatusOK)
	page.contains(t, `data-run-id=".."`, `action="../runs/?do=pause&amp;id=..`)
	cookie, token := d.session("/runs/?id=..")
	res := d.post("/runs/?do=pause&id=..", map[string][]string{"csrf": {token}}, cookie)
	after := d.follow("/runs/?do=pause&id=..", res)
	if kind, msg := flashOf(after.body); kind != "ok" {
		t.Fatalf("pausing run ..: flash %q %q", kind, msg)
	}
	if st := d.status(".."); st != "paused" {
		t.Fatalf("run .. is %s, want paused", st)
	}
}

// A dashboard whose engine holds the codec's key shows sealed payloads
// opened; one without it shows the run all the same, saying what it
// cannot open.
func TestSealedPayloads(t *testing.T) {
	t.Parallel()
	d := newDash(t, false, nil)
	codec, err := runtime.NewAESGCMCodec([]byte("0123456789abcdef0123456789abcdef"))
	must(t, err)
	sealing, err := runtime.New(runtime.Config{Store: d.store, Codec: codec})
	must(t, err)
	t.Cleanup(func() { sealing.Close() })
	must(t, runtime.Register(sealing, "secret", func(c *runtime.WorkflowContext, in map[string]string) (string, error) { return "", nil }))
	_, err = sealing.StartJSON(context.Background(), "secret", "s-1", []byte(`{"card":"4242 4242 4242 4242"}`))
	must(t, err)
	must(t, sealing.Terminate(context.Background(), "s-1", "fraud suspected"))

	blind := d.get("/runs/s-1").want(t, http.StatusOK)
	blind.contains(t, `<p class="sealed">stem: sealed payload cannot be opened: input of run s-1`, `data-status="terminated"`).lacks(t, "4242", "fraud suspected")
	d.get("/runs").want(t, http.StatusOK).contains(t, `data-run-id="s-1"`)

	d.h = ui.New(sealing, ui.Options{AllowedHosts: testHosts})
	open := d.get("/runs/s-1").want(t, http.StatusOK)
	open.contains(t, `&#34;card&#34;: &#34;4242 4242 4242 4242&#34;`, `<pre id="error">stem: run terminated: fraud suspected</pre>`).lacks(t, `class="sealed"`)
}
