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

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/storage"
)

// Bulk actions: the runs page's filter, an action, a confirmation page
// that states how many runs the filter matches, and a page per bulk
// action that follows its progress. The engines that run the bulk
// workflow (runtime.RegisterBulk) carry them out; the dashboard only
// starts them and reads them.

// bulkCountUpTo bounds the count a confirmation states: past it, the page
// says "more than".
const bulkCountUpTo = 100_000

// bulksShown is how many bulk actions the bulk actions page lists: the
// newest.
const bulksShown = 50

// bulkChoice is a bulk action the runs page offers.
type bulkChoice struct {
	Action runtime.BulkAction
	// Label names it on the runs page's menu; Verb on the confirmation's
	// button ("Restart 50 runs").
	Label, Verb string
	// Explain says what it does to each run.
	Explain string
	// Reason says it records a reason; Danger that it cannot be undone.
	Reason, Danger bool
}

var bulkChoices = []bulkChoice{
	{Action: runtime.BulkRestartFailed, Label: "Restart from the failed step", Verb: "Restart",
		Explain: "A new execution of each run begins at the step that failed it, keeping the results of the steps before it. A run that did not fail at a step is skipped."},
	{Action: runtime.BulkRestart, Label: "Restart from the top", Verb: "Restart",
		Explain: "A new execution of each run begins from the top, with the same input."},
	{Action: runtime.BulkPause, Label: "Pause", Verb: "Pause",
		Explain: "Each run pauses: a waiting or queued one at once, a running one at its next step boundary. It stays paused until resumed."},
	{Action: runtime.BulkResume, Label: "Resume", Verb: "Resume",
		Explain: "Each paused run goes on where it paused."},
	{Action: runtime.BulkCancel, Label: "Cancel", Verb: "Cancel", Reason: true,
		Explain: "Each workflow sees the cancellation at its next durable call, runs its cleanup and ends itself."},
	{Action: runtime.BulkTerminate, Label: "Terminate", Verb: "Terminate", Reason: true, Danger: true,
		Explain: "Each run ends now, with its unfinished children, and cannot go on (it can be restarted)."},
}

// bulkChoiceOf is the choice of an action, false when there is none.
func bulkChoiceOf(a runtime.BulkAction) (bulkChoice, bool) {
	i := slices.IndexFunc(bulkChoices, func(c bulkChoice) bool { return c.Action == a })
	if i < 0 {
		return bulkChoice{}, false
	}
	return bulkChoices[i], true
}

// bulkActionNames lists the actions, for messages.
func bulkActionNames() string {
	names := make([]string, len(bulkChoices))
	for i, c := range bulkChoices {
		names[i] = string(c.Action)
	}
	return strings.Join(names, ", ")
}

// bulkNewPage is the confirmation page's data.
type bulkNewPage struct {
	Choice bulkChoice
	// Filter is the filter in words; Fields its form fields, carried
	// to the POST; RunsHref lists the runs it matches.
	Filter   []string
	Fields   url.Values
	RunsHref string
	// Count is how many runs the filter matches now, More that there
	// are more than Count.
	Count int
	More  bool
	// CountText is the count in words: "50 runs".
	CountText string
	// NoWorker says no engine sharing the store records the bulk
	// workflow: the action would wait until one runs.
	NoWorker bool
	Reason   string
	// Error says why the action was not started.
	Error  string
	Action string
}

// bulkNew is the confirmation of a bulk action: the filter in words and
// how many runs it matches now, and the form that starts it.
func (h *handler) bulkNew(rq *request) error {
	if !rq.operate() {
		return readOnlyError()
	}
	p, err := h.bulkConfirmation(rq, rq.r.URL.Query())
	if err != nil {
		return err
	}
	h.render(rq, http.StatusOK, "bulknew", &view{Title: p.Choice.Label + " · bulk action", Nav: "bulks", Page: p})
	return nil
}

// bulkConfirmation reads an action and a filter and counts the runs it
// matches.
func (h *handler) bulkConfirmation(rq *request, v url.Values) (*bulkNewPage, error) {
	ctx := rq.r.Context()
	action := runtime.BulkAction(strings.TrimSpace(v.Get("action")))
	choice, ok := bulkChoiceOf(action)
	if !ok {
		return nil, badRequest("%q is not a bulk action: choose one of %s.", action, bulkActionNames())
	}
	f, err := h.parseRunFilter(ctx, v)
	if err != nil {
		return nil, badRequest("The filter cannot be read: %v", err)
	}
	if f.After != "" {
		return nil, badRequest("A bulk action acts on every run its filter matches, not on a page of them: leave out the cursor (after).")
	}
	p := &bulkNewPage{Choice: choice, Action: string(action), Filter: queryWords(f.query), Fields: f.values(),
		RunsHref: withQuery(rq.base+"runs", f.values()), Reason: strings.TrimSpace(v.Get("reason"))}
	p.Count, p.More, err = h.e.CountMatching(ctx, bulkFilter(f.query), bulkCountUpTo)
	if err != nil {
		return nil, err
	}
	p.CountText = countWords(p.Count, p.More)
	p.NoWorker = !h.bulkServed(ctx)
	return p, nil
}

// bulkServed reports whether an engine sharing the store records the
// bulk workflow in the catalog (or the catalog cannot be read, when it
// is not for the page to say).
func (h *handler) bulkServed(ctx context.Context) bool {
	cat, err := h.e.Catalog(ctx)
	if err != nil {
		return true
	}
	return slices.ContainsFunc(cat.Workflows, func(w storage.WorkflowType) bool { return w.Name == runtime.BulkWorkflow })
}

// bulkFilter is a runs page's query as a bulk action's filter: without
// its page size and cursor.
func bulkFilter(q runtime.ListRunsQuery) runtime.ListRunsQuery {
	q.Limit, q.After = 0, ""
	return q
}

// bulkStart starts a bulk action from its confirmation's form and leads
// to its page.
func (h *handler) bulkStart(rq *request) error {
	rq.r.Body = http.MaxBytesReader(rq.w, rq.r.Body, maxActionBody)
	if err := h.checkPost(rq); err != nil {
		return err
	}
	form := rq.r.PostForm
	p, err := h.bulkConfirmation(rq, form)
	if err != nil {
		return err
	}
	if p.Count == 0 && !p.More {
		p.Error = "No run matches the filter now: there is nothing to act on."
		h.render(rq, http.StatusConflict, "bulknew", &view{Title: p.Choice.Label + " · bulk action", Nav: "bulks", Page: p})
		return nil
	}
	f, _ := h.parseRunFilter(rq.r.Context(), form)
	req := runtime.BulkRequest{Action: p.Choice.Action, Filter: bulkFilter(f.query)}
	if p.Choice.Reason {
		req.Reason = p.Reason
	}
	id, err := h.e.StartBulk(rq.r.Context(), req)
	if err != nil {
		status, _ := errorStatus(err)
		if status >= 500 && !errors.Is(err, runtime.ErrInvalidArgument) {
			h.log.Error("ui: starting a bulk action", "action", req.Action, "err", err)
		}
		p.Error = "The bulk action was not started: " + inWords(err)
		h.render(rq, status, "bulknew", &view{Title: p.Choice.Label + " · bulk action", Nav: "bulks", Page: p})
		return nil
	}
	h.log.Info("ui: bulk action", "action", req.Action, "bulk", id, "matched", p.Count)
	msg := fmt.Sprintf("Started: %s over the %s the filter matches.", strings.ToLower(p.Choice.Label), countWords(p.Count, p.More))
	loc := withQuery(rq.base+bulkPath(id), url.Values{"flash": {h.pageFlashToken(bulkScope(id), flash{Kind: "ok", Message: msg})}})
	redirect(rq.w, loc, http.StatusSeeOther)
	return nil
}

// countWords is a count of runs in words: "1 run", "50 runs", "more than
// 100000 runs".
func countWords(n int, more bool) string {
	if more {
		return fmt.Sprintf("more than %d runs", n)
	}
	return plural(n, "run", "runs")
}

// bulkScope is the scope of a bulk action page's outcome messages.
func bulkScope(id string) string { return "bulk\x00" + id }

// bulkPath is the path of a bulk action's page from the mount point.
func bulkPath(id string) string {
	if id == "." || id == ".." {
		return "bulks/?" + url.Values{"id": {id}}.Encode()
	}
	return "bulks/" + url.PathEscape(id)
}

// bulkRow is one bulk action as the pages show it.
type bulkRow struct {
	ID, Href, RunHref, Status string
	Action                    string
	Label                     string
	Filter                    []string
	RunsHref                  string
	Reason                    string
	Progress                  runtime.BulkProgress
	Created                   *ago
	// Finished says the bulk action's run ended; Live that the page
	// follows it.
	Finished bool
	// Bar is the progress bar's segments: acted, skipped and failed of
	// the runs matched so far, in a viewBox 1000 wide.
	Bar []barSegment
}

// bulkRowOf is b as the pages show it, at now.
func (h *handler) bulkRowOf(rq *request, b runtime.BulkInfo, now time.Time) bulkRow {
	q := b.Request.Filter
	row := bulkRow{ID: b.ID, Href: rq.base + bulkPath(b.ID), RunHref: rq.base + runPath(b.ID, ""), Status: string(b.Status),
		Action: string(b.Request.Action), Label: string(b.Request.Action), Filter: queryWords(q),
		RunsHref: withQuery(rq.base+"runs", queryValues(q)), Reason: b.Request.Reason, Progress: b.Progress,
		Created: since(b.CreatedAt, now), Finished: b.Status.Finished()}
	if c, ok := bulkChoiceOf(b.Request.Action); ok {
		row.Label = c.Label
	}
	if m := b.Progress.Matched; m > 0 {
		x := 0.0
		for _, s := range []struct {
			status string
			n      int
		}{{"complete", b.Progress.Acted}, {"terminated", b.Progress.Skipped}, {"errored", b.Progress.Failed}} {
			if s.n > 0 {
				w := 1000 * float64(s.n) / float64(m)
				row.Bar = append(row.Bar, barSegment{Status: s.status, X: x, W: w, N: int64(s.n)})
				x += w
			}
		}
	}
	return row
}

// bulkPage is a bulk action's page's data.
type bulkPage struct {
	bulkRow
}

func (h *handler) bulkByPath(rq *request) error { return h.bulk(rq, rq.r.PathValue("id")) }

// bulkByQuery serves bulks/?id=ID, the page of a bulk action whose ID is
// a dot segment.
func (h *handler) bulkByQuery(rq *request) error {
	q := rq.r.URL.Query()
	if !q.Has("id") {
		return h.notFound(rq)
	}
	return h.bulk(rq, q.Get("id"))
}

// bulk is a bulk action's page: what it does to which runs, and how far
// it has gone, live until it ends.
func (h *handler) bulk(rq *request, id string) error {
	b, err := h.e.GetBulk(rq.r.Context(), id)
	if err != nil {
		if errors.Is(err, runtime.ErrRunNotFound) {
			return &httpError{status: http.StatusNotFound, title: "Not found",
				msg: fmt.Sprintf("There is no bulk action %s. The bulk actions page lists the latest.", shownPlain(id))}
		}
		return err
	}
	p := &bulkPage{bulkRow: h.bulkRowOf(rq, b, h.e.Now())}
	v := &view{Title: p.Label + " · bulk action " + shownPlain(id), Nav: "bulks", Page: p,
		Flash: h.readPageFlash(bulkScope(id), rq.r.URL.Query().Get("flash"))}
	if !p.Finished && !b.Progress.Done {
		v.Refresh = h.refresh.Milliseconds()
	}
	h.render(rq, http.StatusOK, "bulk", v)
	return nil
}

// bulksPage is the bulk actions page's data.
type bulksPage struct {
	Bulks []bulkRow
}

// bulks lists the latest bulk actions, live.
func (h *handler) bulks(rq *request) error {
	list, err := h.e.ListBulks(rq.r.Context(), bulksShown)
	if err != nil {
		return err
	}
	now := h.e.Now()
	p := &bulksPage{}
	for _, b := range list {
		p.Bulks = append(p.Bulks, h.bulkRowOf(rq, b, now))
	}
	h.render(rq, http.StatusOK, "bulks", &view{Title: "Bulk actions", Nav: "bulks", Page: p, Refresh: h.refresh.Milliseconds()})
	return nil
}

// queryWords is a listing's filter in words: each condition a run must
// meet, or that every run does.
func queryWords(q runtime.ListRunsQuery) []string {
	var out []string
	add := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	if q.Workflow != "" {
		add("workflow is %s", shownPlain(q.Workflow))
	}
	if q.Status != "" {
		add("status is %s", q.Status)
	}
	if q.Queue != "" {
		add("queue is %s", shownPlain(q.Queue))
	}
	if q.IDPrefix != "" {
		add("ID begins with %s", shownPlain(q.IDPrefix))
	}
	if !q.CreatedFrom.IsZero() {
		add("created at or after %s", q.CreatedFrom.UTC().Format(exactText))
	}
	if !q.CreatedTo.IsZero() {
		add("created before %s", q.CreatedTo.UTC().Format(exactText))
	}
	if q.ParentID != "" {
		add("started by run %s", shownPlain(q.ParentID))
	}
	for _, w := range q.Where {
		add("attribute %s", w)
	}
	if q.TopLevel {
		add("started by no other run (children are left out)")
	}
	if len(out) == 0 {
		out = append(out, "every run in the store")
	}
	return out
}

// queryValues is a listing's filter as the runs page's query.
func queryValues(q runtime.ListRunsQuery) url.Values {
	f := runFilter{Workflow: q.Workflow, Status: string(q.Status), Queue: q.Queue, Prefix: q.IDPrefix, Parent: q.ParentID,
		Children: !q.TopLevel && q.ParentID == ""}
	if !q.CreatedFrom.IsZero() {
		f.From = q.CreatedFrom.UTC().Format(time.RFC3339Nano)
	}
	if !q.CreatedTo.IsZero() {
		f.To = q.CreatedTo.UTC().Format(time.RFC3339Nano)
	}
	terms := make([]string, len(q.Where))
	for i, w := range q.Where {
		terms[i] = filterTerm(w)
	}
	f.Where = strings.Join(terms, " ")
	return f.values()
}

// filterTerm is an attribute filter as the search box reads it back.
func filterTerm(w runtime.AttrFilter) string {
	t := whereTerm(w.Value)
	return w.Value.Name + string(w.Op) + strings.TrimPrefix(t, w.Value.Name+"=")
}

// readOnlyError refuses a page that only an operator may use.
func readOnlyError() error {
	return &httpError{status: http.StatusForbidden, title: "Not allowed",
		msg: "You may look at the runs but not act on them: your access is read-only."}
}
