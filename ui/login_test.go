package ui_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/stores/memstore"
	"github.com/stemflow/stem/ui"
)

// loginDash is a dashboard with a login, mounted under /ops/stem, whose
// Authorize gives read-only access to requests with X-Test-Access: read.
func loginDash(t *testing.T, l ui.Login) http.Handler {
	t.Helper()
	st := memstore.New(memstore.Options{})
	t.Cleanup(func() { st.Close() })
	e, err := runtime.New(runtime.Config{Store: st})
	must(t, err)
	t.Cleanup(func() { e.Close() })
	h := ui.New(e, ui.Options{Login: &l, AllowedHosts: testHosts, Authorize: func(r *http.Request) ui.Access {
		if r.Header.Get("X-Test-Access") == "read" {
			return ui.AccessRead
		}
		return ui.AccessOperate
	}})
	mux := http.NewServeMux()
	mux.Handle("/ops/stem/", http.StripPrefix("/ops/stem", h))
	return mux
}

func serveLogin(h http.Handler, r *http.Request) *http.Response {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	return rec.Result()
}

// The login under a prefix: a page leads to the login form and back to
// the page after it; the session's cookie lets the browser in, the
// Authorize hook still decides the access; a login page from another
// site, a next page that leaves the dashboard, and a host the dashboard
// does not answer to are refused.
func TestLoginUnderAPrefix(t *testing.T) {
	t.Parallel()
	h := loginDash(t, ui.Login{User: "ops", Password: "pw", Token: "tok-0123456789"})

	res := serveLogin(h, httptest.NewRequest(http.MethodGet, "/ops/stem/queues?x=1", nil))
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "./login?next=queues%3Fx%3D1" {
		t.Fatalf("GET queues: %d to %q", res.StatusCode, res.Header.Get("Location"))
	}
	res = serveLogin(h, httptest.NewRequest(http.MethodGet, "/ops/stem/login?next=queues%3Fx%3D1", nil))
	body := readAll(t, res)
	for _, want := range []string{`<link rel="stylesheet" href="./assets/stem.css?v=`, `<input type="hidden" name="next" value="queues?x=1">`,
		`name="user"`, `name="password" type="password"`, `<p class="or">or</p>`, `name="token" type="password"`} {
		if !strings.Contains(body, want) {
			t.Errorf("the login page lacks %q\n%s", want, body)
		}
	}
	if strings.Contains(body, `id="nav"`+">\n<a") {
		t.Errorf("the login page shows the dashboard's navigation")
	}

	login := func(form url.Values, header ...string) *http.Response {
		r := postRequest("/ops/stem/login", form)
		for i := 0; i+1 < len(header); i += 2 {
			r.Header.Set(header[i], header[i+1])
		}
		return serveLogin(h, r)
	}
	if res := login(url.Values{"token": {"tok-0123456789"}}, "Sec-Fetch-Site", "cross-site"); res.StatusCode != http.StatusForbidden || sessionCookie(res) != nil {
		t.Fatalf("a login from another site: %d", res.StatusCode)
	}
	res = login(url.Values{"user": {"ops"}, "password": {"pw"}, "next": {"//evil.example/x"}})
	session := sessionCookie(res)
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "./runs" || session == nil {
		t.Fatalf("a login with a next page elsewhere: %d to %q", res.StatusCode, res.Header.Get("Location"))
	}
	res = login(url.Values{"token": {"tok-0123456789"}, "next": {"queues?x=1"}})
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "./queues?x=1" {
		t.Fatalf("a login by token: %d to %q", res.StatusCode, res.Header.Get("Location"))
	}

	get := func(target string, header ...string) (*http.Response, string) {
		r := httptest.NewRequest(http.MethodGet, target, nil)
		r.AddCookie(&http.Cookie{Name: session.Name, Value: session.Value})
		for i := 0; i+1 < len(header); i += 2 {
			r.Header.Set(header[i], header[i+1])
		}
		res := serveLogin(h, r)
		return res, readAll(t, res)
	}
	if res, body := get("/ops/stem/runs"); res.StatusCode != http.StatusOK || !strings.Contains(body, `<form id="logout-form" class="logout" method="post" action="./logout">`) || !strings.Contains(body, `id="start-link"`) {
		t.Fatalf("GET runs logged in: %d\n%s", res.StatusCode, body)
	}
	if res, body := get("/ops/stem/runs", "X-Test-Access", "read"); res.StatusCode != http.StatusOK || strings.Contains(body, `id="start-link"`) || !strings.Contains(body, `read-only`) {
		t.Fatalf("GET runs logged in, read-only: %d\n%s", res.StatusCode, body)
	}
	// Logged in already, the login page leads on.
	if res, _ := get("/ops/stem/login"); res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "./runs" {
		t.Fatalf("GET login logged in: %d to %q", res.StatusCode, res.Header.Get("Location"))
	}
	// The host check comes first.
	r := httptest.NewRequest(http.MethodGet, "http://evil.example/ops/stem/login", nil)
	if res := serveLogin(h, r); res.StatusCode != http.StatusMisdirectedRequest {
		t.Fatalf("GET login for another host: %d, want 421", res.StatusCode)
	}
	// Logout is a POST from the dashboard's own pages.
	if res, _ := get("/ops/stem/logout"); res.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("GET logout: %d", res.StatusCode)
	}
}

// Failed logins are limited: past ten in a minute, even the right
// secret is refused until the minute is over.
func TestLoginLimitsFailures(t *testing.T) {
	t.Parallel()
	h := loginDash(t, ui.Login{Token: "tok-0123456789"})
	for i := range 10 {
		res := serveLogin(h, postRequest("/ops/stem/login", url.Values{"token": {"guess"}}))
		if res.StatusCode != http.StatusUnauthorized {
			t.Fatalf("failed login %d: %d, want 401", i, res.StatusCode)
		}
	}
	res := serveLogin(h, postRequest("/ops/stem/login", url.Values{"token": {"tok-0123456789"}}))
	if body := readAll(t, res); res.StatusCode != http.StatusTooManyRequests || !strings.Contains(body, "Too many failed logins") || sessionCookie(res) != nil {
		t.Fatalf("a login after ten failures: %d\n%s", res.StatusCode, body)
	}
}

// New refuses a login without secrets, or with half of a user's.
func TestLoginChecked(t *testing.T) {
	t.Parallel()
	for _, l := range []ui.Login{{}, {User: "ops"}, {Password: "pw"}, {User: "a:b", Password: "pw"}} {
		if err := l.Check(); err == nil {
			t.Errorf("Login %+v: Check passes", l)
		}
	}
	if err := (&ui.Login{Token: "t"}).Check(); err != nil {
		t.Errorf("a token: %v", err)
	}
}

func sessionCookie(res *http.Response) *http.Cookie {
	for _, c := range res.Cookies() {
		if c.Name == "stem_session" && c.MaxAge >= 0 {
			return c
		}
	}
	return nil
}

func readAll(t *testing.T, res *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(res.Body)
	must(t, err)
	return string(b)
}
