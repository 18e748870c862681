package ui

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"html/template"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

//go:embed templates/*.html
var templateFiles embed.FS

// pages holds each page's template: the layout with the page's content.
var pages = parsePages()

func parsePages() map[string]*template.Template {
	layout := template.Must(template.New("layout.html").Funcs(funcs).ParseFS(templateFiles, "templates/layout.html"))
	out := map[string]*template.Template{}
	for _, name := range []string{"runs", "run", "queues", "schedules", "workers", "error", "bulk", "bulks", "bulknew", "start", "starts", "login"} {
		t := template.Must(layout.Clone())
		out[name] = template.Must(t.ParseFS(templateFiles, "templates/"+name+".html"))
	}
	return out
}

var funcs = template.FuncMap{
	"dur":   duration,
	"shown": shown,
}

// view is what the layout renders: the page's own data is Page.
type view struct {
	Title string
	// Base leads back to the mount point; every URL starts with it.
	Base string
	// Nav is the section the page belongs to: runs, queues, schedules,
	// workers.
	Nav string
	// Refresh, in milliseconds, is how often the page refreshes its live
	// part; 0 when it does not.
	Refresh int64
	Flash   *flash
	// CSRF is the token the page's forms carry; "" without AccessOperate.
	CSRF    string
	Operate bool
	// Logout says the request is logged in with the dashboard's own
	// login, whose Log out button the header shows.
	Logout        bool
	CSS, JS, Icon string
	Page          any
}

// bufs recycles the buffers pages render into, so a page that fails to
// render is replaced whole by an error page.
var bufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// render writes the page with status.
func (h *handler) render(rq *request, status int, name string, v *view) {
	v.Base = rq.base
	v.Operate = rq.operate()
	v.Logout = rq.session && h.login != nil
	if rq.access > AccessNone || name == "login" {
		v.CSS = rq.base + "assets/" + cssAsset.versioned()
		v.JS = rq.base + "assets/" + jsAsset.versioned()
		v.Icon = rq.base + "assets/" + iconAsset.versioned()
	}
	if v.Operate && v.CSRF == "" {
		v.CSRF = h.csrfToken(rq)
	}
	buf := bufs.Get().(*bytes.Buffer)
	buf.Reset()
	defer bufs.Put(buf)
	if err := pages[name].ExecuteTemplate(buf, "layout.html", v); err != nil {
		h.log.Error("ui: rendering a page", "page", name, "path", rq.r.URL.Path, "err", err)
		if name != "error" {
			h.fail(rq, &httpError{status: http.StatusInternalServerError, title: "Page not shown",
				msg: "The page could not be rendered: " + err.Error()})
		}
		return
	}
	hd := rq.w.Header()
	hd.Set("Content-Type", "text/html; charset=utf-8")
	hd.Set("Cache-Control", "no-store")
	// The page's refresh asks with the ETag it has: an unchanged page
	// is not sent again.
	sum := fnv.New64a()
	sum.Write(buf.Bytes())
	etag := fmt.Sprintf(`"%x"`, sum.Sum64())
	hd.Set("ETag", etag)
	if status == http.StatusOK && rq.r.Header.Get("If-None-Match") == etag {
		rq.w.WriteHeader(http.StatusNotModified)
		return
	}
	rq.w.WriteHeader(status)
	rq.w.Write(buf.Bytes())
}

// errorPage is the error template's data.
type errorPage struct {
	Status  int
	Title   string
	Message string
}

// fail shows err as a page in words with its status.
func (h *handler) fail(rq *request, err error) {
	status, title := errorStatus(err)
	if status >= 500 {
		h.log.Error("ui: a request failed", "method", rq.r.Method, "path", rq.r.URL.Path, "err", err)
	}
	msg := err.Error()
	if msg == "" {
		msg = http.StatusText(status)
	}
	v := &view{Title: title, Page: errorPage{Status: status, Title: title, Message: msg}}
	if rq.access > AccessNone {
		// A request refused access sees nothing but the refusal: no
		// navigation to pages it may not see.
		v.Nav = "none"
	}
	h.render(rq, status, "error", v)
}

// moment is a time as a page shows it: <time datetime="ISO">Text</time>.
type moment struct {
	ISO, Text string
}

// at is t as a page shows it, in UTC to the second; nil for the zero
// time.
func at(t time.Time) *moment {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &moment{ISO: u.Format(time.RFC3339Nano), Text: u.Format(timeText)}
}

// atPtr is at for a time that may be nil.
func atPtr(t *time.Time) *moment {
	if t == nil {
		return nil
	}
	return at(*t)
}

// ago is a time as the lists show it: how long ago, in words ("3 min
// ago"), with the exact time to the millisecond in UTC as its title.
type ago struct {
	ISO, Exact, Text string
}

// exactText is how a relative time's title writes the time.
const exactText = "2006-01-02 15:04:05.000Z"

// since is t as the lists show it at now; nil for the zero time.
func since(t, now time.Time) *ago {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &ago{ISO: u.Format(time.RFC3339Nano), Exact: u.Format(exactText), Text: relative(now.Sub(t), u)}
}

// relative says how long ago a time d before now was: "just now",
// "12 s ago", "3 min ago", "5 h ago", "4 days ago", and after a month
// the date (u's); a time ahead of now is "in 3 min".
func relative(d time.Duration, u time.Time) string {
	in := d < 0
	if in {
		d = -d
	}
	var s string
	switch {
	case d < 5*time.Second:
		return "just now"
	case d < time.Minute:
		s = fmt.Sprintf("%d s", d/time.Second)
	case d < time.Hour:
		s = fmt.Sprintf("%d min", d/time.Minute)
	case d < 48*time.Hour:
		s = fmt.Sprintf("%d h", d/time.Hour)
	case d < 31*24*time.Hour:
		s = fmt.Sprintf("%d days", d/(24*time.Hour))
	default:
		return u.Format("2006-01-02")
	}
	if in {
		return "in " + s
	}
	return s + " ago"
}

// timeText is how pages write times.
const timeText = "2006-01-02 15:04:05Z"

// when is t in words for a message; "" for the zero time and nil.
func when(t *time.Time) string {
	if m := atPtr(t); m != nil {
		return m.Text
	}
	return ""
}

// duration formats a duration short and readable: 850µs, 12ms, 1.25s,
// 3m20s, 2h5m.
func duration(d time.Duration) string {
	switch {
	case d < 0:
		return "-" + duration(-d)
	case d == 0:
		return "0s"
	case d < time.Millisecond:
		return d.Round(time.Microsecond).String()
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(10 * time.Millisecond).String()
	case d < time.Hour:
		d = d.Round(time.Second)
		if s := d % time.Minute / time.Second; s != 0 {
			return fmt.Sprintf("%dm%ds", d/time.Minute, s)
		}
		return fmt.Sprintf("%dm", d/time.Minute)
	}
	d = d.Round(time.Minute)
	if m := d % time.Hour / time.Minute; m != 0 {
		return fmt.Sprintf("%dh%dm", d/time.Hour, m)
	}
	return fmt.Sprintf("%dh", d/time.Hour)
}

// plural is "1 run", "2 runs".
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// text is a long text shown in part: its first line, and the whole in a
// collapsed <details> when there is more.
type text struct {
	First string
	Full  string
	// More says Full holds more than First; Lines counts its lines.
	More  bool
	Lines int
}

// firstLineMax caps the part of a text shown before it is expanded.
const firstLineMax = 240

func longText(s string) *text {
	if s == "" {
		return nil
	}
	first, _, multi := strings.Cut(s, "\n")
	t := &text{First: first, Full: s, Lines: strings.Count(s, "\n") + 1}
	if len(first) > firstLineMax {
		cut := firstLineMax
		for cut > 0 && !utf8.RuneStart(first[cut]) {
			cut--
		}
		t.First = first[:cut] + "…"
		t.More = true
	}
	t.More = t.More || multi
	return t
}

// payload is a JSON value shown as indented text, collapsed when long.
type payload struct {
	Text  string
	Long  bool
	Lines int
	Bytes int
}

// longPayload is how many lines a payload shows before it is collapsed.
const longPayload = 24

func prettyJSON(raw json.RawMessage) *payload {
	if len(raw) == 0 {
		return nil
	}
	var b bytes.Buffer
	s := string(raw)
	if err := json.Indent(&b, raw, "", "  "); err == nil {
		s = b.String()
	}
	lines := strings.Count(s, "\n") + 1
	return &payload{Text: s, Lines: lines, Bytes: len(raw), Long: lines > longPayload || len(s) > 4000}
}

// errText is an error's text, "" for nil.
func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// runPath is the path of a run's page, or of one of its actions, from the
// mount point: runs/<ID escaped as one segment>[/<action>]. An ID that
// browsers would take for a dot segment ("." or "..") goes in the query.
func runPath(id, action string) string {
	if id == "." || id == ".." {
		q := url.Values{"id": {id}}
		if action != "" {
			q.Set("do", action)
		}
		return "runs/?" + q.Encode()
	}
	p := "runs/" + url.PathEscape(id)
	if action != "" {
		p += "/" + action
	}
	return p
}

// withQuery adds the query q to path, which may hold one already.
func withQuery(path string, q url.Values) string {
	if len(q) == 0 {
		return path
	}
	if strings.Contains(path, "?") {
		return path + "&" + q.Encode()
	}
	return path + "?" + q.Encode()
}
