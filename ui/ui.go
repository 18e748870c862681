// Package ui is Stem's web dashboard: an http.Handler that shows the runs of
// an engine's store and operates them, for mounting in any Go server.
//
// It is server-rendered HTML (html/template) with one stylesheet and one
// small script, embedded in the binary: nothing is fetched from elsewhere,
// and there is no build step. The pages are
//
//   - runs: the runs, newest first by creation time, a page at a time
//     through the store's index (keyset pagination), filtered by
//     workflow, status, queue, ID prefix, creation time and search
//     attributes (customer=C-7 total>=100 region^=eu, read by
//     Engine.ParseWhere in each attribute's declared type; a filter that
//     cannot be read is said in words next to the search box), with the
//     count of runs in each status; runs started by other runs are left
//     out unless asked for, then set in under their parents; times read
//     "3 min ago", the exact millisecond in their title; each run's first
//     attributes link to the runs with the same value; the page refreshes
//     itself and keeps its filter;
//   - a run: its input, status, output or error and progress; its
//     executions; its updates (request, reply or error) and streams (their
//     last values); the timeline of one execution (its durable calls on
//     one time axis, concurrent ones side by side, with millisecond times
//     and durations); the steps of that execution in order, each with its
//     input, attempts, durations and errors; its sleep or wait; its
//     children and parent; live while the run is unfinished;
//   - bulk actions: the runs page's filter with an action (terminate,
//     cancel, pause, resume, restart from the top or from the failed
//     step) leads to a confirmation that states the filter in words and
//     how many runs it matches (Engine.CountMatching); confirmed, the
//     action starts (Engine.StartBulk) and its page follows its progress
//     live; the bulk actions page lists the latest;
//   - start a run: a form per workflow made from the JSON Schema of its
//     input its workers recorded in the catalog (a field per property:
//     text, number, checkbox, a choice for an enum, JSON for the rest),
//     checked against the schema on the server before the run starts,
//     each refusal next to its field with the values kept;
//   - queues, schedules (each paused, resumed, triggered now or deleted
//     from its row) and workers.
//
// The actions (pause, resume, terminate, restart from the top or from a
// step, send an event, send an update; a schedule's; a bulk action; a
// start) are POSTs carrying the form's token, each confirmed first (in a
// dialog, or on a page of its own); the outcome, or the engine's refusal
// in words, shows on the page the action leads to. An update's request
// is checked against the schema its workers recorded, and an update with
// a validator (which only the application can run) is sent only when the
// form's "send unvalidated" box is ticked; the action waits
// Options.UpdateWait for the reply, which the outcome quotes.
//
// New runs no workers. A bulk action is carried out by the engines that
// call runtime.RegisterBulk and Run, on any process sharing the store
// (stem ui runs one unless it is read-only); until one does, the action
// waits, queued, and its confirmation says that none records it.
//
// # Mounting
//
// Every URL the pages hold is relative, so the handler works at the root
// and under any prefix:
//
//	mux.Handle("/ops/stem/", http.StripPrefix("/ops/stem", ui.New(engine, ui.Options{})))
//
// The engine need not run workflows: runtime.New(runtime.Config{Store: st,
// Codec: c}) is enough, and its codec opens sealed payloads for display.
//
// # Access
//
// Options.Authorize says what each request may do: AccessNone (every page
// answers 403), AccessRead (the pages without the actions; every POST
// answers 403) or AccessOperate. Mount the dashboard behind the
// application's own authentication, and answer from the identity it
// found (see the example of New with a session middleware):
//
//	mux.Handle("/ops/stem/", requireSession(http.StripPrefix("/ops/stem", ui.New(engine, ui.Options{
//		Authorize: func(r *http.Request) ui.Access {
//			switch user := userFrom(r.Context()); {
//			case user.Has("stem-operator"):
//				return ui.AccessOperate
//			case user.Has("stem-viewer"):
//				return ui.AccessRead
//			}
//			return ui.AccessNone
//		},
//	}))))
//
// Where nothing authenticates in front of it, Options.Login gives the
// dashboard a login of its own: a token, or a user and password, entered
// in a login page that sets a signed session cookie (HttpOnly,
// SameSite=Strict), or sent by scripts as a bearer token or HTTP Basic
// authentication. stem ui offers it with --token-file and --basic-auth,
// and refuses to listen beyond localhost without a login unless told
// --insecure-no-login; --read-only answers Authorize with AccessRead.
//
// # Safety
//
// The dashboard answers only to the host names it serves: localhost (and
// its subdomains, *.localhost), IP addresses, and Options.AllowedHosts. A
// request whose Host header names another host is refused with 421
// Misdirected Request and a plain message, for every method and page and
// whatever Authorize says, before any page, cookie or token is made. This
// defeats DNS rebinding: a web page at evil.example whose name is made to
// resolve to 127.0.0.1 is, to the browser, of the same origin as the
// dashboard, so without the check it could read every run and its
// payloads and post actions; the browser still sends Host: evil.example,
// which is refused. An IP address needs no allowing, since no other site's
// page can have it as its origin. Mounted behind a name (a proxy at
// ops.example.com that passes the Host on), list the name:
//
//	ui.New(engine, ui.Options{AllowedHosts: []string{"ops.example.com"}})
//
// Every value is escaped by html/template; payloads are shown as text. A
// name a store holds from before the rules on names refused invisible
// characters (storage.Invisible: a right-to-left override, a zero-width
// space) shows each such character as a marked escape (\u202E, set apart
// by the stylesheet) in links, headings and titles, so two run IDs never
// look the same. Each
// POST must carry the form's token, which is tied to a cookie, and pass
// http.CrossOriginProtection; Options.Authorize says what a request may do
// (see Access). Responses forbid framing and inline script (a
// Content-Security-Policy of default-src 'self').
package ui

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/stemflow/stem/runtime"
)

// Access is what a request may do with the dashboard.
type Access int

// The levels of access, each allowing what the one before allows.
const (
	// AccessNone refuses the request: every route answers 403.
	AccessNone Access = iota
	// AccessRead shows the pages without the actions: no action buttons,
	// and every POST answers 403.
	AccessRead
	// AccessOperate shows the pages and allows the actions.
	AccessOperate
)

// String names the access level.
func (a Access) String() string {
	switch a {
	case AccessNone:
		return "none"
	case AccessRead:
		return "read"
	case AccessOperate:
		return "operate"
	}
	return fmt.Sprintf("Access(%d)", int(a))
}

// DefaultRefresh is how often the runs page and a live run page refresh
// when Options.Refresh is zero.
const DefaultRefresh = 2 * time.Second

// Options configures the dashboard. The zero value lets every request
// operate.
type Options struct {
	// Authorize says what a request may do; nil lets every request
	// operate. Put the dashboard behind your own authentication and
	// answer from the request's identity.
	Authorize func(r *http.Request) Access
	// Refresh is how often the runs page and a live run page refresh;
	// 0 means DefaultRefresh, and a negative value turns refreshing off.
	Refresh time.Duration
	// Logger receives what the dashboard could not do for a request (a
	// store that fails, a page that does not render). Nil: discarded.
	Logger *slog.Logger
	// CSRFKey signs the forms' tokens, the outcome messages and the
	// login's session cookies (Login). Dashboards
	// that serve one site from several processes (behind a load balancer)
	// share one key of at least 32 random bytes; nil draws a key per
	// handler, so a page outlives neither a restart nor a hop to another
	// process (its next action is refused, and reloading it helps).
	CSRFKey []byte
	// TrustedOrigins are origins besides the request's own ("https://
	// ops.example.com") whose pages may post actions: see
	// http.CrossOriginProtection.AddTrustedOrigin.
	TrustedOrigins []string
	// AllowedHosts are the host names, besides localhost and IP
	// addresses, that requests may name in their Host header
	// ("ops.example.com"; ".example.com" for a domain and its
	// subdomains; "*" for every name, when a proxy in front checks the
	// Host itself). A request naming another host is refused with 421
	// Misdirected Request before any page, cookie or token is made: see
	// the package doc's Safety. Names have no port: an allowed name is
	// answered on any port. New panics on a list CheckAllowedHosts
	// refuses.
	AllowedHosts []string
	// UpdateWait is how long an update sent from a run's page waits for
	// the workflow's reply before the page says it is pending; 0 means
	// DefaultUpdateWait.
	UpdateWait time.Duration
	// Login, when set, puts the dashboard behind a login of its own (a
	// token, or a user and password): see Login. An application that
	// has its own authentication answers Authorize instead. New panics
	// on a login Login.Check refuses.
	Login *Login
}

// handler is the dashboard.
type handler struct {
	e       *runtime.Engine
	auth    func(*http.Request) Access
	refresh time.Duration
	// updateWait bounds the wait for an update's reply (Options.UpdateWait).
	updateWait time.Duration
	log        *slog.Logger
	key        []byte
	cop        *http.CrossOriginProtection
	hosts      *hosts
	mux        *http.ServeMux
	// login is Options.Login, nil without one.
	login *login
}

// New returns the dashboard for the runs of e's store, as an http.Handler.
// It reads and acts only through e (Get, ListRuns, CountRuns, ParseWhere,
// ListExecutions, ListSteps, Updates, Streams, StreamJSON, OpenUpdate,
// Pause, Resume, Terminate, Restart, SendEventJSON, SendUpdateJSON,
// AwaitUpdate, StartJSON, CountMatching, StartBulk, GetBulk, ListBulks,
// QueueStats, Catalog, Workers, Store().ListSchedules, and package
// schedule's Pause, Resume, Trigger and Delete). e needs no workflows
// registered and need not Run; its codec opens sealed payloads for
// display. The bulk actions it starts need an engine that runs them (see
// the package doc).
//
// New panics when opts holds a CSRFKey shorter than 32 bytes, a trusted
// origin http.CrossOriginProtection refuses, an allowed host
// CheckAllowedHosts refuses, or a Login its Check refuses: all are
// programming errors.
func New(e *runtime.Engine, opts Options) http.Handler {
	h := &handler{e: e, auth: opts.Authorize, refresh: opts.Refresh, log: opts.Logger, cop: http.NewCrossOriginProtection()}
	if h.refresh == 0 {
		h.refresh = DefaultRefresh
	}
	h.updateWait = opts.UpdateWait
	if h.updateWait <= 0 {
		h.updateWait = DefaultUpdateWait
	}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	switch {
	case opts.CSRFKey == nil:
		h.key = make([]byte, 32)
		rand.Read(h.key)
	case len(opts.CSRFKey) < 32:
		panic(fmt.Sprintf("ui: Options.CSRFKey is %d bytes; it needs at least 32 random bytes", len(opts.CSRFKey)))
	default:
		h.key = append([]byte(nil), opts.CSRFKey...)
	}
	for _, o := range opts.TrustedOrigins {
		if err := h.cop.AddTrustedOrigin(o); err != nil {
			panic(fmt.Sprintf("ui: Options.TrustedOrigins: %v", err))
		}
	}
	hs, err := newHosts(opts.AllowedHosts)
	if err != nil {
		panic(fmt.Sprintf("ui: Options.AllowedHosts: %v", err))
	}
	h.hosts = hs
	if opts.Login != nil {
		if err := opts.Login.Check(); err != nil {
			panic(fmt.Sprintf("ui: Options.Login: %v", err))
		}
		h.login = newLogin(*opts.Login)
	}
	h.routes()
	return h
}

// routes registers the pages and actions. Run IDs are one path segment,
// escaped ('/' as %2F, as child runs' IDs hold it); IDs that are dot
// segments ("." and "..") are passed in the query instead (see runPath).
func (h *handler) routes() {
	m := http.NewServeMux()
	m.HandleFunc("GET /{$}", h.page(h.root))
	m.HandleFunc("GET /runs", h.page(h.runs))
	m.HandleFunc("GET /runs/{$}", h.page(h.runByQuery))
	m.HandleFunc("POST /runs/{$}", h.page(h.actByQuery))
	m.HandleFunc("GET /runs/{id}", h.page(h.runByPath))
	m.HandleFunc("POST /runs/{id}/{action}", h.page(h.actByPath))
	m.HandleFunc("GET /bulk", h.page(h.bulkNew))
	m.HandleFunc("POST /bulk", h.page(h.bulkStart))
	m.HandleFunc("GET /bulks", h.page(h.bulks))
	m.HandleFunc("GET /bulks/{$}", h.page(h.bulkByQuery))
	m.HandleFunc("GET /bulks/{id}", h.page(h.bulkByPath))
	m.HandleFunc("GET /start", h.page(h.start))
	m.HandleFunc("POST /start", h.page(h.startRun))
	m.HandleFunc("GET /queues", h.page(h.queues))
	m.HandleFunc("GET /schedules", h.page(h.schedules))
	m.HandleFunc("POST /schedules/{$}", h.page(h.scheduleActByQuery))
	m.HandleFunc("POST /schedules/{id}/{action}", h.page(h.scheduleActByPath))
	m.HandleFunc("GET /workers", h.page(h.workers))
	m.HandleFunc("GET /assets/{name}", h.asset)
	m.HandleFunc("/", h.page(h.notFound))
	h.mux = m
}

// ServeHTTP refuses a request for a host it does not answer to, sets the
// security headers, asks Authorize, and serves the route.
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !h.hosts.allows(r.Host) {
		misdirected(w, r)
		return
	}
	hd := w.Header()
	hd.Set("Content-Security-Policy", "default-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'; object-src 'none'")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("Referrer-Policy", "same-origin")
	loggedIn := false
	if h.login != nil {
		answered, cookie := h.serveLogin(w, r)
		if answered {
			return
		}
		loggedIn = cookie
	}
	access := AccessOperate
	if h.auth != nil {
		access = h.auth(r)
	}
	if access <= AccessNone {
		rq := h.newRequest(w, r, AccessNone)
		h.fail(rq, &httpError{status: http.StatusForbidden, title: "Not allowed",
			msg: "You may not see this dashboard. Ask whoever runs it for access."})
		return
	}
	if access > AccessOperate {
		access = AccessOperate
	}
	ctx := context.WithValue(r.Context(), accessKey{}, access)
	if loggedIn {
		ctx = context.WithValue(ctx, sessionKey{}, true)
	}
	h.mux.ServeHTTP(w, r.WithContext(ctx))
}

// accessKey carries a request's Access from ServeHTTP to the routes.
type accessKey struct{}

// sessionKey marks a request logged in with the login's session cookie,
// whose pages offer to log out.
type sessionKey struct{}

// request is one request as the routes see it.
type request struct {
	w      http.ResponseWriter
	r      *http.Request
	access Access
	// base leads from the request's path back to the mount point: "./"
	// at the top level, "../" one segment down, and so on.
	base string
	// session says the request is logged in with the login's cookie.
	session bool
}

func (h *handler) newRequest(w http.ResponseWriter, r *http.Request, access Access) *request {
	session, _ := r.Context().Value(sessionKey{}).(bool)
	return &request{w: w, r: r, access: access, base: baseOf(r.URL.EscapedPath()), session: session}
}

// baseOf is the relative path from a request path (as the mux sees it,
// escaped, with the mount prefix stripped) to the mount point.
func baseOf(path string) string {
	n := strings.Count(path, "/") - 1
	if n <= 0 {
		return "./"
	}
	return strings.Repeat("../", n)
}

// operate reports whether the request may act.
func (rq *request) operate() bool { return rq.access >= AccessOperate }

// page adapts a route to http.HandlerFunc: the route returns an error
// to show as a page in words.
func (h *handler) page(route func(*request) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		access, _ := r.Context().Value(accessKey{}).(Access)
		rq := h.newRequest(w, r, access)
		if err := route(rq); err != nil {
			h.fail(rq, err)
		}
	}
}

func (h *handler) root(rq *request) error {
	redirect(rq.w, rq.base+"runs", http.StatusFound)
	return nil
}

func (h *handler) notFound(rq *request) error {
	if rq.r.Method != http.MethodGet && rq.r.Method != http.MethodHead {
		return &httpError{status: http.StatusMethodNotAllowed, title: "Not allowed",
			msg: fmt.Sprintf("%s %s is not something the dashboard does: pages are read with GET, and actions are the buttons on a run's page.", rq.r.Method, rq.r.URL.Path)}
	}
	return &httpError{status: http.StatusNotFound, title: "No such page",
		msg: fmt.Sprintf("There is no page at %s. The dashboard has runs, bulk actions, a start form, queues, schedules and workers.", rq.r.URL.Path)}
}

// redirect answers with a Location relative to the request's URL, which
// http.Redirect would make absolute without the mount prefix.
func redirect(w http.ResponseWriter, location string, status int) {
	w.Header().Set("Location", location)
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
}

// httpError is a refusal shown as a page: its status, a title and words.
type httpError struct {
	status int
	title  string
	msg    string
}

func (e *httpError) Error() string { return e.msg }

// badRequest is a 400 saying what is wrong with the request's URL or form.
func badRequest(format string, args ...any) error {
	return &httpError{status: http.StatusBadRequest, title: "Bad request", msg: fmt.Sprintf(format, args...)}
}

// errorStatus maps an engine's error to a page's status and title.
func errorStatus(err error) (int, string) {
	var he *httpError
	switch {
	case errors.As(err, &he):
		return he.status, he.title
	case errors.Is(err, runtime.ErrRunNotFound):
		return http.StatusNotFound, "Not found"
	case errors.Is(err, runtime.ErrInvalidArgument):
		return http.StatusBadRequest, "Bad request"
	case errors.Is(err, runtime.ErrInvalidState):
		return http.StatusConflict, "Not possible now"
	case errors.Is(err, runtime.ErrClosed):
		return http.StatusServiceUnavailable, "Store closed"
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return http.StatusServiceUnavailable, "Interrupted"
	}
	return http.StatusInternalServerError, "The store failed"
}
