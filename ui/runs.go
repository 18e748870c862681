package ui

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/storage"
)

// runsPageSize is how many runs the runs page lists at once.
const runsPageSize = 50

// runFilter is the runs page's query: the form's values as they are shown
// again, and the ListRunsQuery they make.
type runFilter struct {
	Workflow, Status, Queue, Prefix, From, To, Order, Parent string
	// Where is the attribute search as typed (customer=C-7 total>=100).
	Where string
	// Children lists child runs too; without it (and without Parent)
	// only top-level runs are listed, each child reached from its
	// parent.
	Children bool
	After    string
	query    runtime.ListRunsQuery
}

// filterError is what is wrong with a runs filter, in words; Field names
// the form field it is about ("where" for the attribute search, "" for
// the others), so the page shows it next to that field.
type filterError struct {
	Field string
	Msg   string
}

func (e *filterError) Error() string { return e.Msg }

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

// parseRunFilter reads the runs page's query, the attribute search
// through the engine (which knows each attribute's type). An error (a
// *filterError) says what is wrong in words; the filter then holds the
// values as given, to show again.
func (h *handler) parseRunFilter(ctx context.Context, v url.Values) (runFilter, error) {
	f := runFilter{
		Workflow: strings.TrimSpace(v.Get("workflow")), Status: strings.TrimSpace(v.Get("status")),
		Queue: strings.TrimSpace(v.Get("queue")), Prefix: v.Get("prefix"),
		From: strings.TrimSpace(v.Get("from")), To: strings.TrimSpace(v.Get("to")),
		Order: strings.TrimSpace(v.Get("order")), Parent: v.Get("parent"), After: v.Get("after"),
		Where: strings.TrimSpace(v.Get("where")),
	}
	switch c := v.Get("children"); c {
	case "", "0", "hide":
	case "1", "show", "on":
		f.Children = true
	default:
		return f, &filterError{Msg: fmt.Sprintf("children=%q: children are shown (1) or hidden (0)", c)}
	}
	if f.After != "" {
		if _, _, err := storage.ParseCreatedCursor(f.After); err != nil {
			return f, &filterError{Msg: "This page's link holds a cursor the runs page no longer reads (runs are listed by creation time now): start again from the first page."}
		}
	}
	q := runtime.ListRunsQuery{Workflow: f.Workflow, Queue: f.Queue, IDPrefix: f.Prefix, ParentID: f.Parent,
		After: f.After, Limit: runsPageSize, Descending: true, Order: storage.OrderCreated,
		TopLevel: !f.Children && f.Parent == ""}
	if f.Status != "" {
		st := runtime.RunStatus(strings.ToLower(f.Status))
		if !st.Valid() {
			return f, &filterError{Msg: fmt.Sprintf("unknown status %q: a run is %s", f.Status, statusNames())}
		}
		f.Status, q.Status = string(st), st
	}
	switch f.Order {
	case "", "newest":
		f.Order = ""
	case "oldest":
		q.Descending = false
	default:
		return f, &filterError{Msg: fmt.Sprintf("unknown order %q: runs are listed newest or oldest first", f.Order)}
	}
	var err error
	if f.From != "" {
		if q.CreatedFrom, f.From, err = parseTime("from", f.From); err != nil {
			return f, &filterError{Msg: err.Error()}
		}
	}
	if f.To != "" {
		if q.CreatedTo, f.To, err = parseTime("to", f.To); err != nil {
			return f, &filterError{Msg: err.Error()}
		}
	}
	if !q.CreatedFrom.IsZero() && !q.CreatedTo.IsZero() && !q.CreatedTo.After(q.CreatedFrom) {
		return f, &filterError{Msg: fmt.Sprintf("the time range ends (%s) at or before it begins (%s)", when(&q.CreatedTo), when(&q.CreatedFrom))}
	}
	if f.Where != "" {
		if q.Where, err = h.parseWhere(ctx, f.Where); err != nil {
			return f, &filterError{Field: "where", Msg: err.Error()}
		}
	}
	f.query = q
	return f, nil
}

// parseWhere reads an attribute search: filters written NAME OP VALUE
// (customer=C-7 total>=100 order^=88), separated by spaces or commas; a
// value with either is written in double quotes (note="two words"). Each
// value is read in its attribute's declared type (Engine.ParseWhere).
func (h *handler) parseWhere(ctx context.Context, text string) ([]runtime.AttrFilter, error) {
	terms, err := splitWhere(text)
	if err != nil {
		return nil, err
	}
	if len(terms) > storage.MaxAttrFilters {
		return nil, fmt.Errorf("%d attribute filters: a search combines at most %d", len(terms), storage.MaxAttrFilters)
	}
	fs, err := h.e.ParseWhere(ctx, terms)
	if err != nil {
		return nil, errors.New(inWords(err))
	}
	return fs, nil
}

// splitWhere splits an attribute search into its filters: at spaces and
// commas outside double quotes, the quotes removed (\" and \\ inside them
// are a quote and a backslash).
func splitWhere(s string) ([]string, error) {
	var terms []string
	var b strings.Builder
	quoted, have := false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quoted && c == '\\' && i+1 < len(s) && (s[i+1] == '"' || s[i+1] == '\\'):
			i++
			b.WriteByte(s[i])
		case c == '"':
			quoted, have = !quoted, true
		case !quoted && (c == ' ' || c == ',' || c == '\t' || c == '\n' || c == '\r'):
			if have {
				terms = append(terms, b.String())
			}
			b.Reset()
			have = false
		default:
			b.WriteByte(c)
			have = true
		}
	}
	if quoted {
		return nil, fmt.Errorf("%s: a double quote is not closed", s)
	}
	if have {
		terms = append(terms, b.String())
	}
	return terms, nil
}

// inWords is an engine's refusal as a page says it: without the
// sentinel's "stem: invalid argument: " before the words that matter.
func inWords(err error) string {
	msg := err.Error()
	for _, p := range []string{runtime.ErrInvalidArgument.Error() + ": ", "stem: "} {
		msg = strings.TrimPrefix(msg, p)
	}
	return msg
}

// values is the filter as a query, without the cursor.
func (f runFilter) values() url.Values {
	v := url.Values{}
	for _, kv := range [][2]string{{"workflow", f.Workflow}, {"status", f.Status}, {"queue", f.Queue}, {"prefix", f.Prefix},
		{"from", f.From}, {"to", f.To}, {"order", f.Order}, {"parent", f.Parent}, {"where", f.Where}} {
		if kv[1] != "" {
			v.Set(kv[0], kv[1])
		}
	}
	if f.Children {
		v.Set("children", "1")
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
	// WhereError says it of the attribute search, shown next to it.
	Error, WhereError string
	ParentHref        string
	Newest            bool
	// ChildrenHref lists the same runs with their children (or without,
	// when they are shown).
	ChildrenHref string
	// Bulk holds the filter's fields for the bulk action form, and
	// BulkActions its choices; BulkActions is nil without AccessOperate.
	Bulk        url.Values
	BulkActions []bulkChoice
	// StartHref leads to the start form of the filter's workflow, or to
	// the list of workflows.
	StartHref string
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
	Created, Updated                  *ago
	Detail                            string
	// Held says an engine holds the run: its code no longer matches its
	// history.
	Held bool
	// Attrs are the first of the run's search attributes; MoreAttrs
	// counts the others, all of which AllAttrs lists.
	Attrs     []attrChip
	MoreAttrs int
	AllAttrs  string
	// ParentID is the run that started this one; Depth is how far the
	// row is set in under its parent listed above it (0: not), and
	// ParentHref links the parent when it is not listed above.
	ParentID   string
	ParentHref string
	Depth      int
	parent     string
}

// attrsShown is how many of a run's attributes the runs table shows.
const attrsShown = 3

// attrValueShown caps an attribute's value in the runs table.
const attrValueShown = 40

// attrChip is one attribute in the runs table: name=value, linking to
// the runs with the same value.
type attrChip struct {
	Name, Value, Full, Href string
}

func (h *handler) runs(rq *request) error {
	ctx := rq.r.Context()
	f, ferr := h.parseRunFilter(ctx, rq.r.URL.Query())
	p := &runsPage{F: f, Statuses: storage.Statuses, Newest: f.Order == "", StartHref: rq.base + "start"}
	status := http.StatusOK
	if cat, err := h.e.Catalog(ctx); err == nil {
		for _, w := range cat.Workflows {
			p.Workflows = append(p.Workflows, w.Name)
		}
	} else {
		h.log.Warn("ui: reading the catalog for the runs page", "err", err)
	}
	if f.Workflow != "" {
		if slices.Contains(p.Workflows, f.Workflow) {
			p.StartHref = rq.base + startPath(f.Workflow)
		} else {
			p.Workflows = append(p.Workflows, f.Workflow)
		}
	}
	if f.Parent != "" {
		p.ParentHref = rq.base + runPath(f.Parent, "")
	}
	if f.Parent == "" {
		g := f
		g.Children = !f.Children
		p.ChildrenHref = withQuery(rq.base+"runs", g.values())
	}
	if ferr == nil {
		runs, next, err := h.e.ListRuns(ctx, f.query)
		if err != nil {
			if s, _ := errorStatus(err); s != http.StatusBadRequest {
				return err
			}
			ferr = &filterError{Msg: inWords(err)}
		}
		now := h.e.Now()
		for _, r := range runs {
			p.Rows = append(p.Rows, h.runRow(rq, r, now))
		}
		p.Rows = groupChildren(p.Rows)
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
		if rq.operate() {
			p.Bulk = f.values()
			p.BulkActions = bulkChoices
		}
	} else {
		var fe *filterError
		if errors.As(ferr, &fe) && fe.Field == "where" {
			p.WhereError = fe.Msg
		} else {
			p.Error = ferr.Error()
		}
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

// runRow is one run as the runs table shows it, at now.
func (h *handler) runRow(rq *request, r runtime.RunInfo, now time.Time) runRow {
	row := runRow{ID: r.ID, Href: rq.base + runPath(r.ID, ""), Workflow: r.Workflow, Version: r.Version,
		Status: string(r.Status), Queue: r.Queue, Created: since(r.CreatedAt, now), Updated: since(r.UpdatedAt, now),
		Detail: runDetail(r, now), Held: r.Hold != nil, ParentID: r.ParentID, parent: r.ParentID}
	if r.ParentID != "" {
		row.ParentHref = rq.base + runPath(r.ParentID, "")
	}
	all := make([]string, len(r.Attributes))
	for i, a := range r.Attributes {
		all[i] = a.String()
		if i >= attrsShown {
			continue
		}
		value := a.Value()
		chip := attrChip{Name: a.Name, Value: value, Full: a.String(),
			Href: withQuery(rq.base+"runs", url.Values{"where": {whereTerm(a)}})}
		if len(value) > attrValueShown {
			cut := attrValueShown
			for cut > 0 && !utf8.RuneStart(value[cut]) {
				cut--
			}
			chip.Value = value[:cut] + "…"
		}
		row.Attrs = append(row.Attrs, chip)
	}
	row.MoreAttrs = max(0, len(r.Attributes)-attrsShown)
	row.AllAttrs = strings.Join(all, "\n")
	return row
}

// whereTerm is the attribute search that finds the runs with a's value:
// name=value, the value quoted when it holds a space, a comma or a quote.
func whereTerm(a runtime.Attr) string {
	v := a.Value()
	if v == "" || strings.ContainsAny(v, " ,\t\n\r\"\\") {
		v = `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(v) + `"`
	}
	return a.Name + "=" + v
}

// groupChildren puts each child run listed right after its parent, when
// both are on the page, set in by one more step per generation; the
// other rows keep their order.
func groupChildren(rows []runRow) []runRow {
	on := make(map[string]bool, len(rows))
	for _, r := range rows {
		on[r.ID] = true
	}
	kids := map[string][]int{}
	for i, r := range rows {
		if r.parent != "" && r.parent != r.ID && on[r.parent] {
			kids[r.parent] = append(kids[r.parent], i)
		}
	}
	if len(kids) == 0 {
		return rows
	}
	out := make([]runRow, 0, len(rows))
	placed := make([]bool, len(rows))
	var place func(i, depth int)
	place = func(i, depth int) {
		if placed[i] {
			return
		}
		placed[i] = true
		r := rows[i]
		r.Depth = depth
		if depth > 0 {
			r.ParentHref = ""
		}
		out = append(out, r)
		for _, k := range kids[r.ID] {
			place(k, depth+1)
		}
	}
	for i, r := range rows {
		if r.parent != "" && r.parent != r.ID && on[r.parent] {
			continue
		}
		place(i, 0)
	}
	for i := range rows { // a cycle, which parents cannot make: keep every row
		place(i, 0)
	}
	return out
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
