package ui

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// DefaultSession is how long a login lasts when Login.Session is zero.
const DefaultSession = 12 * time.Hour

// Login is the dashboard's own login (Options.Login), for serving it where
// no authenticating proxy or application stands in front of it, as stem ui
// does with --token or --basic-auth: a secret token, a user name and
// password, or both.
//
// A browser is led to a login page whose form, given the token or the
// user and password, sets a session cookie (signed with Options.CSRFKey,
// HttpOnly, SameSite=Strict, Secure over TLS) that lasts Session; the
// pages' Log out button ends it. A script sends the token as
// "Authorization: Bearer TOKEN", or the user and password with HTTP Basic
// authentication (curl -u USER:PASSWORD), with every request instead. The
// secrets are compared in constant time, and failed logins are limited to
// ten a minute. A login gives AccessOperate, which Options.Authorize, when
// set, may lower.
type Login struct {
	// Token is a secret that logs in; "" for none. Make it long and
	// random: 32 random bytes, encoded, or more.
	Token string
	// User and Password log in by name and password; both or neither.
	User, Password string
	// Session is how long a login lasts; 0 means DefaultSession.
	Session time.Duration
}

// Check reports what is wrong with the login: no secret at all, a user
// without a password or the reverse, a negative session. New panics on a
// login Check refuses; a command that takes the secrets from its user
// checks them with it first.
func (l *Login) Check() error {
	switch {
	case l.Token == "" && l.User == "" && l.Password == "":
		return errors.New("a login needs a token, or a user and a password")
	case (l.User == "") != (l.Password == ""):
		return errors.New("a login by name needs both a user and a password")
	case strings.ContainsAny(l.User, ":\r\n"):
		return errors.New("a user name cannot hold ':' or a line break")
	case l.Session < 0:
		return fmt.Errorf("a session of %v: want a positive duration (0 for the default, %v)", l.Session, DefaultSession)
	}
	return nil
}

// sessionCookie holds a browser's login: its expiry and signature.
const sessionCookie = "stem_session"

// maxFailedLogins bounds the failed logins a handler answers in a minute;
// past it, logins are refused until the minute is over.
const maxFailedLogins = 10

// login is a handler's Login, ready to check requests.
type login struct {
	Login
	// cred names the secrets, so a session signed for other secrets (the
	// token changed) is not one.
	cred string
	mu   sync.Mutex
	// failed are the times of the latest failed logins.
	failed []time.Time
}

func newLogin(l Login) *login {
	if l.Session == 0 {
		l.Session = DefaultSession
	}
	sum := sha256.Sum256([]byte(l.Token + "\x00" + l.User + "\x00" + l.Password))
	return &login{Login: l, cred: hex.EncodeToString(sum[:16])}
}

// same compares a secret given with the one expected in constant time,
// whatever their lengths.
func same(given, want string) bool {
	g, w := sha256.Sum256([]byte(given)), sha256.Sum256([]byte(want))
	return subtle.ConstantTimeCompare(g[:], w[:]) == 1
}

// secrets reports whether a token, or a user and password, are the
// login's.
func (l *login) secrets(token, user, password string) bool {
	tokenOK := l.Token != "" && token != "" && same(token, l.Token)
	userOK := same(user, l.User)
	passwordOK := same(password, l.Password)
	return tokenOK || l.User != "" && user != "" && userOK && passwordOK
}

// authenticated reports whether a request carries a login: a session
// cookie the handler signed, unexpired, or the secrets in its
// Authorization header. cookie says it was the cookie (a browser's, which
// the pages offer to log out).
func (h *handler) authenticated(r *http.Request) (ok, cookie bool) {
	l := h.login
	for _, c := range r.CookiesNamed(sessionCookie) {
		if h.validSession(c.Value) {
			return true, true
		}
	}
	auth := r.Header.Get("Authorization")
	if token, isBearer := cutPrefixFold(auth, "Bearer "); isBearer {
		return l.Token != "" && l.secrets(strings.TrimSpace(token), "", ""), false
	}
	if user, password, isBasic := r.BasicAuth(); isBasic {
		return l.User != "" && l.secrets("", user, password), false
	}
	return false, false
}

// cutPrefixFold is strings.CutPrefix ignoring the case of prefix.
func cutPrefixFold(s, prefix string) (string, bool) {
	if len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix) {
		return s[len(prefix):], true
	}
	return s, false
}

// session is the value of a session cookie that lasts until exp.
func (h *handler) session(exp time.Time) string {
	e := strconv.FormatInt(exp.Unix(), 10)
	return e + "." + base64.RawURLEncoding.EncodeToString(h.mac("session", h.login.cred, e))
}

func (h *handler) validSession(v string) bool {
	e, sig, ok := strings.Cut(v, ".")
	if !ok {
		return false
	}
	unix, err := strconv.ParseInt(e, 10, 64)
	if err != nil || !time.Now().Before(time.Unix(unix, 0)) {
		return false
	}
	got, err := base64.RawURLEncoding.DecodeString(sig)
	return err == nil && hmac.Equal(got, h.mac("session", h.login.cred, e))
}

// tooMany reports whether the failed logins of the last minute reached
// the bound, forgetting older ones.
func (l *login) tooMany(now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	i := 0
	for i < len(l.failed) && now.Sub(l.failed[i]) > time.Minute {
		i++
	}
	l.failed = l.failed[i:]
	return len(l.failed) >= maxFailedLogins
}

func (l *login) fail(now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.failed = append(l.failed, now)
}

// loginPage is the login template's data.
type loginPage struct {
	// Token and Password say which secrets the form asks for.
	Token, Password bool
	User            string
	Next            string
	Error           string
	// Out says the browser has just logged out.
	Out bool
}

// serveLogin serves the login page, the login and the logout, and leads
// a request without a login to the login page. It reports whether it
// answered the request.
func (h *handler) serveLogin(w http.ResponseWriter, r *http.Request) (answered, cookie bool) {
	rq := h.newRequest(w, r, AccessNone)
	switch r.URL.Path {
	case "/login":
		h.loginRoute(rq)
		return true, false
	case "/logout":
		if r.Method != http.MethodPost {
			h.fail(rq, &httpError{status: http.StatusMethodNotAllowed, title: "Not allowed",
				msg: "Log out with the pages' Log out button (a POST)."})
			return true, false
		}
		if err := h.cop.Check(r); err != nil {
			h.fail(rq, &httpError{status: http.StatusForbidden, title: "Refused", msg: "The logout came from a page of another site: log out from the dashboard's own pages."})
			return true, false
		}
		http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
		redirect(w, rq.base+"login?out=1", http.StatusSeeOther)
		return true, false
	}
	if strings.HasPrefix(r.URL.Path, "/assets/") {
		return false, false
	}
	ok, cookie := h.authenticated(r)
	if ok {
		return false, cookie
	}
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		next := strings.TrimLeft(r.URL.EscapedPath(), "/")
		if r.URL.RawQuery != "" {
			next += "?" + r.URL.RawQuery
		}
		loc := rq.base + "login"
		if next != "" && next != "runs" {
			loc = withQuery(loc, url.Values{"next": {next}})
		}
		redirect(w, loc, http.StatusSeeOther)
		return true, false
	}
	if h.login.Token != "" {
		w.Header().Set("WWW-Authenticate", `Bearer realm="Stem dashboard"`)
	}
	h.fail(rq, &httpError{status: http.StatusUnauthorized, title: "Log in first",
		msg: "This dashboard needs a login: open its login page in a browser, or send the token (Authorization: Bearer TOKEN) or the user and password (HTTP Basic) with the request."})
	return true, false
}

// loginRoute serves GET and POST login.
func (h *handler) loginRoute(rq *request) {
	r := rq.r
	p := &loginPage{Token: h.login.Token != "", Password: h.login.User != "", Next: safeNext(r.URL.Query().Get("next")), Out: r.URL.Query().Has("out")}
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		if ok, _ := h.authenticated(r); ok && !p.Out {
			redirect(rq.w, rq.base+orRuns(p.Next), http.StatusSeeOther)
			return
		}
		h.render(rq, http.StatusOK, "login", &view{Title: "Log in", Page: p})
		return
	case http.MethodPost:
	default:
		h.fail(rq, &httpError{status: http.StatusMethodNotAllowed, title: "Not allowed", msg: "Log in with the login page's form."})
		return
	}
	if err := h.cop.Check(r); err != nil {
		h.fail(rq, &httpError{status: http.StatusForbidden, title: "Refused", msg: "The login came from a page of another site: log in from the dashboard's own login page."})
		return
	}
	r.Body = http.MaxBytesReader(rq.w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		h.fail(rq, badRequest("The form could not be read: %v", err))
		return
	}
	p.Out = false
	p.User = r.PostForm.Get("user")
	if n := safeNext(r.PostForm.Get("next")); n != "" {
		p.Next = n
	}
	now := time.Now()
	if h.login.tooMany(now) {
		p.Error = "Too many failed logins in the last minute: wait a minute, then try again."
		h.render(rq, http.StatusTooManyRequests, "login", &view{Title: "Log in", Page: p})
		return
	}
	if !h.login.secrets(r.PostForm.Get("token"), p.User, r.PostForm.Get("password")) {
		h.login.fail(now)
		h.log.Warn("ui: a failed login", "remote", r.RemoteAddr, "user", p.User)
		switch {
		case p.Token && p.Password:
			p.Error = "Wrong token, or wrong user or password."
		case p.Token:
			p.Error = "Wrong token."
		default:
			p.Error = "Wrong user or password."
		}
		h.render(rq, http.StatusUnauthorized, "login", &view{Title: "Log in", Page: p})
		return
	}
	exp := now.Add(h.login.Session)
	http.SetCookie(rq.w, &http.Cookie{Name: sessionCookie, Value: h.session(exp), Expires: exp, HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	h.log.Info("ui: a login", "remote", r.RemoteAddr, "user", p.User)
	redirect(rq.w, rq.base+orRuns(p.Next), http.StatusSeeOther)
}

// safeNext is a page to return to after the login, relative to the mount
// point, or "" when it is not one (an absolute URL, a path from the root).
func safeNext(next string) string {
	if next == "" || strings.ContainsAny(next[:1], `/\`) || strings.Contains(next, "://") || strings.ContainsAny(next, "\r\n\x00") {
		return ""
	}
	if u, err := url.Parse(next); err != nil || u.Scheme != "" || u.Host != "" {
		return ""
	}
	return next
}

func orRuns(next string) string {
	if next == "" {
		return "runs"
	}
	return next
}
