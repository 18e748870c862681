package ui_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/stemflow/stem/storage"
)

// scriptTag finds script elements; a page holds one, its own asset's.
var scriptTag = regexp.MustCompile(`(?i)<script`)

// noScriptInjected fails if the page holds a script element besides the
// dashboard's own, or any of the test's markup unescaped.
func noScriptInjected(t *testing.T, where string, body string) {
	t.Helper()
	if n := len(scriptTag.FindAllString(body, -1)); n != 1 {
		t.Errorf("%s: %d <script> elements, want the dashboard's one\n%s", where, n, body)
	}
	for _, bad := range []string{`<script>alert`, `<i>x`, `<b>bold`, `onerror='`, `"' onerror`} {
		if strings.Contains(body, bad) {
			t.Errorf("%s: the page holds %q unescaped\n%s", where, bad, body)
		}
	}
}

// Run IDs, workflow names from the URL, payloads, errors, terminate
// reasons and the outcome message are escaped wherever they appear:
// text, attributes, URLs and the flash.
func TestEverythingShownIsEscaped(t *testing.T) {
	t.Parallel()
	d := newDash(t, true, nil)
	ctx := context.Background()
	const parent = `p"'<i>x`
	child := parent + `/"><script>alert('id')</script>`
	_, err := d.store.CreateRuns(ctx, []storage.NewRun{
		{ID: parent, Workflow: "nobody", Input: []byte(`{"note":"</pre><script>alert('input')</script>"}`)},
	})
	must(t, err)
	_, err = d.store.CreateRuns(ctx, []storage.NewRun{
		{ID: child, Workflow: "nobody", ParentID: parent, Input: []byte(`"' onerror='x"`)},
	})
	must(t, err)
	d.start("doomed", `doomed"<script>alert('run')`, `0`)
	d.waitStatus(`doomed"<script>alert('run')`, "errored")

	pages := []string{
		"/runs",
		"/runs?children=1",
		"/runs?workflow=" + url.QueryEscape(`"><script>alert('wf')</script>`),
		"/runs?prefix=" + url.QueryEscape(`"><script>alert('prefix')</script>`),
		"/runs?parent=" + url.QueryEscape(parent),
		"/" + runPath(parent),
		"/" + runPath(child),
		"/" + runPath(`doomed"<script>alert('run')`),
	}
	for _, p := range pages {
		res := d.get(p).want(t, http.StatusOK)
		noScriptInjected(t, p, res.body)
	}
	// An attribute search is shown again, and refused in words, escaped.
	for _, where := range []string{`x="><script>alert('where')</script>`, `"><script>alert('where')</script>`} {
		p := "/runs?where=" + url.QueryEscape(where)
		noScriptInjected(t, p, d.get(p).body)
	}
	d.get("/runs?children=1").contains(t, `data-run-id="p&#34;&#39;&lt;i&gt;x/&#34;&gt;&lt;script&gt;alert(&#39;id&#39;)&lt;/script&gt;"`)
	d.get("/"+runPath(parent)).contains(t, `&lt;/pre&gt;&lt;script&gt;alert(&#39;input&#39;)&lt;/script&gt;`)
	d.get("/"+runPath(`doomed"<script>alert('run')`)).contains(t, `boom: &#34;&lt;b&gt;bold&lt;/b&gt;&#34; &amp; &#39;quoted&#39;`)

	// A terminate reason comes back in the flash, and in the run's error.
	res := d.act(parent, "terminate", url.Values{"reason": {`<script>alert('reason')</script>"'`}})
	page := d.follow("/"+runPath(parent)+"/terminate", res).want(t, http.StatusOK)
	noScriptInjected(t, "the page after terminate", page.body)
	if kind, msg := flashOf(page.body); kind != "ok" || !strings.Contains(msg, `&lt;script&gt;alert(&#39;reason&#39;)&lt;/script&gt;`) {
		t.Errorf("flash %q %q, want the reason escaped", kind, msg)
	}

	// A refusal's words, which quote what was sent, are escaped too.
	res = d.act(parent, "restart", url.Values{"step": {`<script>alert('step')</script>`}})
	page = d.follow("/"+runPath(parent)+"/restart", res).want(t, http.StatusOK)
	noScriptInjected(t, "the page after a refused restart", page.body)
	if kind, _ := flashOf(page.body); kind != "error" {
		t.Errorf("restart from an unknown step: flash %q, want an error", kind)
	}
}

// A POST acts only with the token of its page and its cookie, from the
// dashboard's own origin: anything else is a 403 in words and the run is
// not touched.
func TestActionsNeedTheTokenAndTheOrigin(t *testing.T) {
	t.Parallel()
	d := newDash(t, true, nil)
	d.start("approval", "order-1", `{"note":"rush"}`)
	d.waitStatus("order-1", "waiting")
	page := "/" + runPath("order-1")
	cookie, token := d.session(page)
	target := page + "/pause"

	cases := []struct {
		name string
		req  func() *http.Request
	}{
		{"no token", func() *http.Request { return postRequest(target, url.Values{}, cookie) }},
		{"a wrong token", func() *http.Request {
			return postRequest(target, url.Values{"csrf": {strings.Repeat("A", len(token))}}, cookie)
		}},
		{"a token that is not base64", func() *http.Request { return postRequest(target, url.Values{"csrf": {"%%%"}}, cookie) }},
		{"no cookie", func() *http.Request { return postRequest(target, url.Values{"csrf": {token}}) }},
		{"another cookie", func() *http.Request {
			other, _ := d.session(page)
			return postRequest(target, url.Values{"csrf": {token}}, other)
		}},
		{"a cross-site fetch", func() *http.Request {
			r := postRequest(target, url.Values{"csrf": {token}}, cookie)
			r.Header.Set("Sec-Fetch-Site", "cross-site")
			return r
		}},
		{"another origin", func() *http.Request {
			r := postRequest(target, url.Values{"csrf": {token}}, cookie)
			r.Header.Del("Sec-Fetch-Site")
			r.Header.Set("Origin", "https://evil.example")
			return r
		}},
	}
	for _, c := range cases {
		res := d.do(c.req()).want(t, http.StatusForbidden)
		res.contains(t, `id="problem-message"`, "refused")
		res.lacks(t, "goroutine", "Forbidden\n")
		if st := d.status("order-1"); st != "waiting" {
			t.Fatalf("%s: run is %s after a refused pause, want it untouched (waiting)", c.name, st)
		}
	}

	res := d.do(postRequest(target, url.Values{"csrf": {token}}, cookie)).want(t, http.StatusSeeOther)
	if st := d.status("order-1"); st != "paused" {
		t.Fatalf("with the token: run is %s, want paused", st)
	}
	d.follow(target, res)
}

// Authorize decides: none sees nothing (403 on every route, assets
// included), read sees the pages without buttons and may not post,
// operate sees and does everything.
func TestAuthorizeHook(t *testing.T) {
	t.Parallel()
	d := newDash(t, true, nil)
	d.start("approval", "order-1", `{}`)
	d.waitStatus("order-1", "waiting")
	page := "/" + runPath("order-1")
	cookie, token := d.session(page)

	as := func(access, method, target string, form url.Values) *response {
		var r *http.Request
		if method == http.MethodGet {
			r = httpGet(target)
		} else {
			r = postRequest(target, form, cookie)
		}
		r.Header.Set("X-Test-Access", access)
		return d.do(r)
	}
	for _, target := range []string{"/", "/runs", page, "/queues", "/schedules", "/workers", "/assets/stem.css", "/assets/stem.js", "/nowhere"} {
		res := as("none", http.MethodGet, target, nil).want(t, http.StatusForbidden)
		res.contains(t, "You may not see this dashboard").lacks(t, `href="./runs"`, `href="../runs"`, "order-1")
	}
	for _, action := range []string{"pause", "terminate", "event"} {
		as("none", http.MethodPost, page+"/"+action, url.Values{"csrf": {token}}).want(t, http.StatusForbidden)
		as("read", http.MethodPost, page+"/"+action, url.Values{"csrf": {token}, "topic": {"order.approved"}, "payload": {`{}`}}).
			want(t, http.StatusForbidden).contains(t, "read-only")
	}
	if st := d.status("order-1"); st != "waiting" {
		t.Fatalf("run is %s after refused actions, want waiting", st)
	}

	for _, target := range []string{"/runs", page, "/queues", "/schedules", "/workers"} {
		res := as("read", http.MethodGet, target, nil).want(t, http.StatusOK)
		res.lacks(t, "data-action=", "<dialog", `name="csrf"`, "stem_csrf").contains(t, `id="nav"`)
		if len(res.Cookies()) > 0 {
			t.Errorf("GET %s read-only: sets cookies %v; nothing to protect", target, res.Cookies())
		}
	}
	as("read", http.MethodGet, "/assets/stem.css", nil).want(t, http.StatusOK)

	res := as("operate", http.MethodGet, page, nil).want(t, http.StatusOK)
	for _, a := range []string{"pause", "terminate", "restart", "event"} {
		res.contains(t, `data-action="`+a+`"`)
	}
	as("operate", http.MethodPost, page+"/pause", url.Values{"csrf": {token}}).want(t, http.StatusSeeOther)
	if st := d.status("order-1"); st != "paused" {
		t.Fatalf("run is %s after an operator's pause, want paused", st)
	}
}

func httpGet(target string) *http.Request {
	return httptest.NewRequest(http.MethodGet, target, nil)
}

// The assets are the embedded files, named by their hash so they may be
// cached for good, and revalidated by ETag otherwise.
func TestAssetsAreCached(t *testing.T) {
	t.Parallel()
	d := newDash(t, false, nil)
	page := d.get("/runs").want(t, http.StatusOK)
	for _, re := range []string{`href="(\./assets/stem\.css\?v=[0-9a-f]+)"`, `src="(\./assets/stem\.js\?v=[0-9a-f]+)"`} {
		m := regexp.MustCompile(re).FindStringSubmatch(page.body)
		if m == nil {
			t.Fatalf("the runs page does not link %s", re)
		}
		res := d.get(resolve(t, "/runs", m[1])).want(t, http.StatusOK)
		if cc := res.Header.Get("Cache-Control"); !strings.Contains(cc, "immutable") {
			t.Errorf("%s: Cache-Control %q, want immutable", m[1], cc)
		}
		if !strings.HasPrefix(res.Header.Get("Content-Type"), "text/") || len(res.body) == 0 {
			t.Errorf("%s: %q, %d bytes", m[1], res.Header.Get("Content-Type"), len(res.body))
		}
		r := httpGet(resolve(t, "/runs", m[1]))
		r.Header.Set("If-None-Match", res.Header.Get("ETag"))
		d.do(r).want(t, http.StatusNotModified)
		plain := d.get(strings.Split(resolve(t, "/runs", m[1]), "?")[0]).want(t, http.StatusOK)
		if cc := plain.Header.Get("Cache-Control"); cc != "no-cache" {
			t.Errorf("%s without its hash: Cache-Control %q, want no-cache", m[1], cc)
		}
	}
	d.get("/assets/nope.js").want(t, http.StatusNotFound)
}
