package ui_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/stemflow/stem/ui"
)

// rebound is r as a browser sends it from a page at evil.example:8233
// whose name was made to resolve to the dashboard's address: to the
// browser the page and the dashboard are one origin, so it sends the
// attacker's name as the Host, Sec-Fetch-Site same-origin, and, as the
// variant asks, the attacker's Origin.
func rebound(r *http.Request, origin, fetchSite bool) *http.Request {
	r.Host = "evil.example:8233"
	r.Header.Del("Sec-Fetch-Site")
	if fetchSite {
		r.Header.Set("Sec-Fetch-Site", "same-origin")
	}
	if origin {
		r.Header.Set("Origin", "http://evil.example:8233")
	}
	return r
}

// refusedHost fails unless the response refuses the request's host before
// any page: 421, plain text, no cookie, no token, nothing of the runs.
func refusedHost(t *testing.T, res *response, secrets ...string) {
	t.Helper()
	res.want(t, http.StatusMisdirectedRequest)
	if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("%s %s: Content-Type %q, want plain text", res.req.Method, res.req.URL, ct)
	}
	if res.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("%s %s: no X-Content-Type-Options: nosniff", res.req.Method, res.req.URL)
	}
	if c := res.Header.Values("Set-Cookie"); len(c) > 0 {
		t.Errorf("%s %s: sets cookies %q for a host it does not answer to", res.req.Method, res.req.URL, c)
	}
	res.contains(t, `does not answer to the host "evil.example:8233"`, "--allowed-host evil.example")
	res.lacks(t, append([]string{`name="csrf"`, "<html", "<!doctype"}, secrets...)...)
}

// A page whose name re-resolves to the dashboard (DNS rebinding) gets
// nothing from it: every page, asset and action answers 421 Misdirected
// Request with a plain message and no cookie or token, for an operator
// and for a read-only viewer, with the attacker's Origin or without; and
// the run the action names is unchanged.
func TestDNSRebindingIsRefused(t *testing.T) {
	t.Parallel()
	d := newDash(t, true, nil)
	d.start("approval", "order-1", `{"note":"rush-secret"}`)
	d.waitStatus("order-1", "waiting")
	page := "/" + runPath("order-1")
	pages := []string{"/", "/runs", "/runs?workflow=approval", page, "/runs/?id=order-1", "/queues", "/schedules", "/workers", "/assets/stem.css", "/no-such-page"}

	for _, access := range []ui.Access{ui.AccessOperate, ui.AccessRead} {
		d.access = access
		for _, p := range pages {
			for _, origin := range []bool{false, true} {
				res := d.do(rebound(httptest.NewRequest(http.MethodGet, p, nil), origin, true))
				refusedHost(t, res, "rush-secret", "order-1")
			}
		}
	}

	// With a cookie and token the dashboard gave its own page, a POST
	// from the rebound page still acts on nothing.
	d.access = ui.AccessOperate
	cookie, token := d.session(page)
	for _, v := range []struct{ origin, fetchSite bool }{{false, true}, {true, true}, {true, false}} {
		for _, action := range []string{"pause", "terminate", "event"} {
			form := url.Values{"csrf": {token}, "topic": {"order.approved"}, "payload": {`{"by":"Mallory"}`}}
			res := d.do(rebound(postRequest(page+"/"+action, form, cookie), v.origin, v.fetchSite))
			refusedHost(t, res)
		}
	}
	if st := d.status("order-1"); st != "waiting" {
		t.Fatalf("after rebound actions the run is %s, want waiting (unchanged)", st)
	}
	// The dashboard's own name still works, with the same session.
	d.post(page+"/pause", url.Values{"csrf": {token}}, cookie).want(t, http.StatusSeeOther)
	d.waitStatus("order-1", "paused")
}

// The dashboard answers to localhost and its subdomains, IP addresses
// (with or without a port, IPv6 in brackets) and the allowed names, in
// any case, on any port; to nothing else, and to no malformed Host.
func TestAllowedHosts(t *testing.T) {
	t.Parallel()
	d := newDash(t, false, nil)
	cases := []struct {
		allowed []string
		ok, no  []string
	}{
		{nil,
			[]string{"localhost", "localhost:8233", "LocalHost:8233", "localhost.:8233", "app.localhost:8233",
				"127.0.0.1", "127.0.0.1:8233", "[::1]", "[::1]:8233", "10.1.2.3:80", "[2001:db8::1]:8233"},
			[]string{"evil.example", "evil.example:8233", "example.com", "localhost.evil.example:8233", "evillocalhost:8233",
				"", "::1", "[::1", "[evil.example]:8233", "[127.0.0.1]:8233", "localhost:http", "a b"}},
		{[]string{"ops.example.com", ".corp.example", "Stem.Internal."},
			[]string{"ops.example.com", "OPS.example.com:443", "corp.example", "eu.corp.example:8233", "stem.internal:8233", "localhost:8233", "[::1]:8233"},
			[]string{"evil.example:8233", "example.com", "xops.example.com", "evilcorp.example", "ops.example.com.evil.example"}},
		{[]string{"*"}, []string{"evil.example:8233", "anything"}, nil},
	}
	for _, c := range cases {
		h := ui.New(d.e, ui.Options{AllowedHosts: c.allowed})
		for _, host := range append(c.ok, c.no...) {
			want := http.StatusOK
			if !slices.Contains(c.ok, host) {
				want = http.StatusMisdirectedRequest
			}
			r := httptest.NewRequest(http.MethodGet, "/runs", nil)
			r.Host = host
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, r)
			if rec.Code != want {
				t.Errorf("allowed %q, Host %q: status %d, want %d\n%s", c.allowed, host, rec.Code, want, rec.Body)
			}
		}
	}
}

// A list of allowed hosts is checked: names only, without a port, a
// scheme or a path; New panics on a bad one.
func TestAllowedHostsAreChecked(t *testing.T) {
	t.Parallel()
	for _, good := range [][]string{nil, {"ops.example.com"}, {".example.com", "*", "10.0.0.1", "[::1]", "::1", "stem_ui.internal."}} {
		if err := ui.CheckAllowedHosts(good); err != nil {
			t.Errorf("CheckAllowedHosts(%q): %v", good, err)
		}
	}
	for _, bad := range []string{"", ".", "ops.example.com:8233", "https://ops.example.com", "ops.example.com/stem", "a..b", "ops example", "bücher.example"} {
		err := ui.CheckAllowedHosts([]string{"ok.example", bad})
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%q", bad)) {
			t.Errorf("CheckAllowedHosts(%q) = %v, want an error quoting it", bad, err)
		}
	}
	defer func() {
		if p := recover(); p == nil || !strings.Contains(fmt.Sprint(p), "AllowedHosts") {
			t.Errorf("New with a host with a port: panic %v, want one naming Options.AllowedHosts", p)
		}
	}()
	ui.New(nil, ui.Options{AllowedHosts: []string{"ops.example.com:8233"}})
}
