package ui_test

import (
	"net/http"
	"testing"
)

// Every page renders, with the security headers.
func TestPagesRender(t *testing.T) {
	t.Parallel()
	d := newDash(t, true, nil)
	d.start("approval", "order-1", `{"note":"rush"}`)
	d.start("flaky", "flaky-1", `0`)
	d.start("doomed", "doomed-1", `0`)
	d.waitStatus("order-1", "waiting")
	d.waitSleeping("flaky-1")
	d.waitStatus("doomed-1", "errored")
	for _, p := range []string{"/runs", "/runs/order-1", "/runs/flaky-1", "/runs/flaky-1%2Fship", "/runs/doomed-1", "/queues", "/schedules", "/workers"} {
		res := d.get(p).want(t, http.StatusOK)
		for h, want := range map[string]string{
			"Content-Type":           "text/html; charset=utf-8",
			"X-Content-Type-Options": "nosniff",
			"X-Frame-Options":        "DENY",
			"Referrer-Policy":        "same-origin",
		} {
			if got := res.Header.Get(h); got != want {
				t.Errorf("GET %s: %s %q, want %q", p, h, got, want)
			}
		}
		if csp := res.Header.Get("Content-Security-Policy"); csp == "" || csp[:len("default-src 'self'")] != "default-src 'self'" {
			t.Errorf("GET %s: Content-Security-Policy %q", p, csp)
		}
	}

	// A page unchanged since the ETag its refresh names is not sent again.
	cookie, _ := d.session("/runs/doomed-1")
	for _, p := range []string{"/runs", "/runs/doomed-1"} {
		res := d.get(p, cookie).want(t, http.StatusOK)
		r := httpGet(p)
		r.AddCookie(cookie)
		r.Header.Set("If-None-Match", res.Header.Get("ETag"))
		if again := d.do(r); again.StatusCode != http.StatusNotModified || again.body != "" {
			t.Errorf("GET %s with its ETag: %d, %d bytes; want 304 and nothing", p, again.StatusCode, len(again.body))
		}
		r = httpGet(p)
		r.AddCookie(cookie)
		r.Header.Set("If-None-Match", `"0"`)
		d.do(r).want(t, http.StatusOK)
	}
}
