package ui

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/storage"
)

// runsPageSize is how many runs the runs page lists at once.
const runsPageSize = 50

// runFilter is the runs page's query: the form's values as they are shown
// again, and the ListRunsQuery they make.
type runFilter struct {
	Workflow, Status, Queue, Prefix, From, To, Order, Parent string
	After                                                    string
	query                                                    runtime.ListRunsQuery
}

// timeLayouts are the times the from and to fields take besides RFC
// 3339: a datetime-local input's values, and a date, all read as UTC.
var timeLayouts = []string{"2006-01-02T15:04", "2006-01-02T15:04:05", "2006-01-02T15:04:05.999999999", "2006-01-02"}

// parseTime reads a from or to field: RFC 3339, or one of timeLayouts in
// UTC. It returns the time and the value a datetime-local input shows.
func parseTime(field, s string) (time.Time, string, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	for _, layout := range timeLayouts {
		if err == nil {
			break
		}
		t, err = time.Parse(layout, s)
	}
	if err != nil {
		return time.Time{}, s, fmt.Errorf("%q in %s is not a time: give it as 2006-01-02T15:04 (UTC), a date, or RFC 3339 (2006-01-02T15:04:05+02:00)", s, field)
	}
	t = t.UTC()
	shown := t.Format("2006-01-02T15:04")
	if t.Second() != 0 || t.Nanosecond() != 0 {
		shown = t.Format("2006-01-02T15:04:05.999999999")
	}
	return t, shown, nil
}

// statusNames is every run status, for messages.
func statusNames() string {
	names := make([]string, len(storage.Statuses))
	for i, s := range storage.Statuses {
		names[i] = string(s)
	}
	return strings.Join(names, ", ")
}

// parseRunFilter reads the runs page's query. An error says what is wrong
// in words; the filter then holds the values as given, to show again.
func parseRunFilter(v url.Values) (runFilter, error) {
	f := runFilter{
		Workflow: strings.TrimSpace(v.Get("workflow")), Status: strings.TrimSpace(v.Get("status")),
		Queue: strings.TrimSpace(v.Get("queue")), Prefix: v.Get("prefix"),
		From: strings.TrimSpace(v.Get("from")), To: strings.TrimSpace(v.Get("to")),
		Order: strings.TrimSpace(v.Get("order")), Parent: v.Get("parent"), After: v.Get("after"),
	}
	q := runtime.ListRunsQuery{Workflow: f.Workflow, Queue: f.Queue, IDPrefix: f.Prefix, ParentID: f.Parent,
		After: f.After, Limit: runsPageSize, Descending: true}
	if f.Status != "" {
		st := runtime.RunStatus(strings.ToLower(f.Status))
		if !st.Valid() {
			return f, fmt.Errorf("unknown status %q: a run is %s", f.Status, statusNames())
		}
		f.Status, q.Status = string(st), st
	}
	switch f.Order {
	case "", "newest":
		f.Order = ""
	case "oldest":
		q.Descending = false
	default:
		return f, fmt.Errorf("unknown order %q: runs are listed newest or oldest first", f.Order)
	}
	var err error
	if f.From != "" {
		if q.CreatedFrom, f.From, err = parseTime("from", f.From); err != nil {
			return f, err
		}
	}
	if f.To != "" {
		if q.CreatedTo, f.To, err = parseTime("to", f.To); err != nil {
			return f, err
		}
	}
	if !q.CreatedFrom.IsZero() && !q.CreatedTo.IsZero() && !q.CreatedTo.After(q.CreatedFrom) {
		return f, fmt.Errorf("the time range ends (%s) at or before it begins (%s)", when(&q.CreatedTo), when(&q.CreatedFrom))
	}
	f.query = q
	return f, nil
}

// values is the filter as a query, without the cursor.
func (f runFilter) values() url.Values {
	v := url.Values{}
	for _, kv := range [][2]string{{"workflow", f.Workflow}, {"status", f.Status}, {"queue", f.Queue}, {"prefix", f.Prefix},
		{"from", f.From}, {"to", f.To}, {"order", f.Order}, {"parent", f.Parent}} {
		if kv[1] != "" {
			v.Set(kv[0], kv[1])
		}
	}
	return v
}

// runsPage is the runs template's data.
type runsPage struct {
	F         runFilter
	Workflows []string
	Statuses  []runtime.RunStatus
	Counts    []countLink
	Total     int64
	// CountsOf names the workflow the counts are of, "" for all.
	CountsOf string
	Bar      []barSegment
	Rows     []runRow
	// Next and First are the pagination links; Next is "" on the last
	// page.
	Next, First string
	// Error says what is wrong with the filter; nothing is listed then.
	Error      string
	ParentHref string
	Newest     bool
}

// countLink is one status's count, linking to the runs in it.
type countLink struct {
	Status  string
	Label   string
	N       int64
	Href    string
	Current bool
}

// barSegment is one status's part of the count bar, in a viewBox 1000
// wide.
type barSegment struct {
	Status string
	X, W   float64
	N      int64
}

// runRow is one run in the runs table.
type runRow struct {
	ID, Href, Workflow, Status, Queue string
	Version                           int
	Created, Updated                  *moment
	Detail                            string
	// Held says an engine holds the run: its code no longer matches its
	// history.
	Held bool
}

func (h *handler) runs(rq *request) error {
	ctx := rq.r.Context()
	f, ferr := parseRunFilter(rq.r.URL.Query())
	p := &runsPage{F: f, Statuses: storage.Statuses, Newest: f.Order == ""}
	status := http.StatusOK
	if cat, err := h.e.Catalog(ctx); err == nil {
		for _, w := range cat.Workflows {
			p.Workflows = append(p.Workflows, w.Name)
		}
	} else {
		h.log.Warn("ui: reading the catalog for the runs page", "err", err)
	}
	if f.Workflow != "" && !slices.Contains(p.Workflows, f.Workflow) {
		p.Workflows = append(p.Workflows, f.Workflow)
	}
	if f.Parent != "" {
		p.ParentHref = rq.base + runPath(f.Parent, "")
	}
	if ferr == nil {
		runs, next, err := h.e.ListRuns(ctx, f.query)
		if err != nil {
			if s, _ := errorStatus(err); s != http.StatusBadRequest {
				return err
			}
			ferr = err
		}
		now := h.e.Now()
		for _, r := range runs {
			p.Rows = append(p.Rows, runRow{ID: r.ID, Href: rq.base + runPath(r.ID, ""), Workflow: r.Workflow, Version: r.Version,
				Status: string(r.Status), Queue: r.Queue, Created: at(r.CreatedAt), Updated: at(r.UpdatedAt), Detail: runDetail(r, now), Held: r.Hold != nil})
		}
		v := f.values()
		p.First = withQuery(rq.base+"runs", v)
		if next != "" && ferr == nil {
			v.Set("after", next)
			p.Next = withQuery(rq.base+"runs", v)
		}
	}
	if ferr == nil {
		counts, err := h.e.CountRuns(ctx, f.Workflow)
		if err != nil {
			return err
		}
		p.CountsOf = f.Workflow
		p.counts(rq.base, f, counts)
	} else {
		p.Error = ferr.Error()
		p.Rows = nil
		p.First = rq.base + "runs"
		status = http.StatusBadRequest
	}
	v := &view{Title: "Runs", Nav: "runs", Page: p}
	if ferr == nil {
		v.Refresh = h.refresh.Milliseconds()
	}
	h.render(rq, status, "runs", v)
	return nil
}

// counts fills the count links and bar: one per status, and all.
func (p *runsPage) counts(base string, f runFilter, c runtime.RunCounts) {
	p.Total = c.Total()
	link := func(st string) string {
		g := f
		g.Status = st
		return withQuery(base+"runs", g.values())
	}
	p.Counts = append(p.Counts, countLink{Label: "all", N: p.Total, Href: link(""), Current: f.Status == ""})
	x := 0.0
	for _, st := range storage.Statuses {
		n := c[st]
		p.Counts = append(p.Counts, countLink{Status: string(st), Label: string(st), N: n, Href: link(string(st)), Current: f.Status == string(st)})
		if n > 0 && p.Total > 0 {
			w := 1000 * float64(n) / float64(p.Total)
			p.Bar = append(p.Bar, barSegment{Status: string(st), X: x, W: w, N: n})
			x += w
		}
	}
}

// runDetail is the runs table's word on what a run is doing or why it
// ended, at now.
func runDetail(r runtime.RunInfo, now time.Time) string {
	if r.Hold != nil && !r.Status.Finished() {
		return "held: " + longText(r.Hold.Reason).First
	}
	switch r.Status {
	case runtime.StatusErrored, runtime.StatusTerminated:
		if t := longText(errText(r.Err)); t != nil {
			return t.First
		}
	case runtime.StatusWaiting:
		if len(r.WaitTopics) > 0 {
			s := "waits for " + strings.Join(waitNames(r.WaitTopics), ", ")
			if r.ReadyAt != nil {
				s += " until " + when(r.ReadyAt)
			}
			return s
		}
		if r.ReadyAt != nil {
			return "sleeps until " + when(r.ReadyAt)
		}
	case runtime.StatusQueued:
		if r.ReadyAt != nil && r.ReadyAt.After(now) {
			return "starts at " + when(r.ReadyAt)
		}
	case runtime.StatusRunning:
		if r.PauseRequested {
			return "pause requested"
		}
	}
	return ""
}

// waitNames are the topics a run waits on, as the pages name them: an
// update's as "update NAME".
func waitNames(topics []string) []string {
	out := make([]string, len(topics))
	for i, t := range topics {
		if name, ok := storage.UpdateNameOf(t); ok {
			t = "update " + name
		}
		out[i] = t
	}
	return out
}
