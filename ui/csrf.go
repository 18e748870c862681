package ui

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"unicode/utf8"
)

// csrfCookie holds the browser's random value; each form carries the
// HMAC of it under the handler's key (a signed double submit): a page of
// another site can neither read the cookie nor compute the token, and a
// cookie planted by a neighbouring site is useless without the key.
const csrfCookie = "stem_csrf"

// csrfCookieLen is the cookie's value length: 32 random bytes, encoded.
var csrfCookieLen = base64.RawURLEncoding.EncodedLen(32)

func (h *handler) mac(parts ...string) []byte {
	m := hmac.New(sha256.New, h.key)
	for _, p := range parts {
		m.Write([]byte(p))
		m.Write([]byte{0})
	}
	return m.Sum(nil)
}

// csrfToken returns the token for the request's forms, setting the
// cookie it is tied to when the browser has none yet. The cookie has no
// Path: a browser keeps it for the directory of the page that set it,
// which holds every action's URL (all are below runs/), wherever the
// dashboard is mounted.
func (h *handler) csrfToken(rq *request) string {
	for _, c := range rq.r.CookiesNamed(csrfCookie) {
		if len(c.Value) == csrfCookieLen {
			return h.tokenFor(c.Value)
		}
	}
	b := make([]byte, 32)
	rand.Read(b)
	v := base64.RawURLEncoding.EncodeToString(b)
	http.SetCookie(rq.w, &http.Cookie{Name: csrfCookie, Value: v, HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: rq.r.TLS != nil})
	return h.tokenFor(v)
}

func (h *handler) tokenFor(cookie string) string {
	return base64.RawURLEncoding.EncodeToString(h.mac("csrf", cookie))
}

// checkPost refuses a POST that may not act: without AccessOperate, from
// another origin, or without the token of one of its csrf cookies.
func (h *handler) checkPost(rq *request) error {
	if !rq.operate() {
		return &httpError{status: http.StatusForbidden, title: "Not allowed",
			msg: "You may look at the runs but not act on them: your access is read-only."}
	}
	if err := h.cop.Check(rq.r); err != nil {
		return &httpError{status: http.StatusForbidden, title: "Refused",
			msg: "The action was refused because it came from a page of another site (" + err.Error() + "). Act from the dashboard's own pages."}
	}
	if err := rq.r.ParseForm(); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return &httpError{status: http.StatusRequestEntityTooLarge, title: "Too large",
				msg: fmt.Sprintf("The form is larger than the %d bytes an action may send.", tooBig.Limit)}
		}
		return badRequest("The form could not be read: %v", err)
	}
	token := rq.r.PostForm.Get("csrf")
	want, err := base64.RawURLEncoding.DecodeString(token)
	if token != "" && err == nil {
		for _, c := range rq.r.CookiesNamed(csrfCookie) {
			if hmac.Equal(want, h.mac("csrf", c.Value)) {
				return nil
			}
		}
	}
	return &httpError{status: http.StatusForbidden, title: "Refused",
		msg: "The action was refused: its form's security token is missing or stale (the dashboard restarted, or the browser did not send its cookie). Reload the page and try again."}
}

// flash is an action's outcome, shown once on the run's page after the
// redirect.
type flash struct {
	// Kind is "ok" or "error".
	Kind    string
	Message string
}

// maxFlash caps a flash message, in bytes, so the URL that carries it
// stays short.
const maxFlash = 1500

// flashToken encodes an outcome for the redirect's URL, signed with the
// run's ID, so a link cannot make the dashboard say what it did not.
func (h *handler) flashToken(runID string, f flash) string {
	return h.signFlash([]string{"flash", runID}, f)
}

// pageFlashToken is flashToken for a page other than a run's (the
// schedules, a bulk action), signed with scope, which names the page.
func (h *handler) pageFlashToken(scope string, f flash) string {
	return h.signFlash([]string{"page-flash", scope}, f)
}

// readPageFlash decodes a pageFlashToken for scope, nil when there is
// none or it is not the handler's.
func (h *handler) readPageFlash(scope, token string) *flash {
	return h.openFlash([]string{"page-flash", scope}, token)
}

func (h *handler) signFlash(parts []string, f flash) string {
	msg := f.Message
	if len(msg) > maxFlash {
		cut := maxFlash
		for cut > 0 && !utf8.RuneStart(msg[cut]) {
			cut--
		}
		msg = msg[:cut] + "…"
	}
	payload := f.Kind + "\n" + msg
	sum := h.mac(append(parts, payload)...)[:16]
	return base64.RawURLEncoding.EncodeToString([]byte(payload)) + "." + base64.RawURLEncoding.EncodeToString(sum)
}

// readFlash decodes a flash token for the run, nil when there is none or
// it is not the handler's.
func (h *handler) readFlash(runID, token string) *flash {
	return h.openFlash([]string{"flash", runID}, token)
}

func (h *handler) openFlash(parts []string, token string) *flash {
	if token == "" {
		return nil
	}
	p, s, ok := strings.Cut(token, ".")
	if !ok {
		return nil
	}
	payload, err1 := base64.RawURLEncoding.DecodeString(p)
	sum, err2 := base64.RawURLEncoding.DecodeString(s)
	if err1 != nil || err2 != nil || !hmac.Equal(sum, h.mac(append(parts, string(payload))...)[:16]) {
		return nil
	}
	kind, msg, _ := strings.Cut(string(payload), "\n")
	if kind != "ok" && kind != "error" {
		return nil
	}
	return &flash{Kind: kind, Message: msg}
}
