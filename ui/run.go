package ui

import (
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/storage"
)

// childrenShown caps the children a run's page lists; the rest are a link
// away, on the runs page filtered by parent.
const childrenShown = 25

// runPage is the run template's data.
type runPage struct {
	runtime.RunInfo
	Href     string
	Finished bool
	// The run's times, as the page shows them.
	Created, Updated, Began, Ended, Due, ReadyAtM *moment
	Input                                         *payload
	Output                                        *payload
	Progress                                      *payload
	Error                                         *text
	// InputErr and OpenErr say why a payload could not be opened.
	InputErr, OpenErr string
	// ErrorName is the durable name of the declared error (//stem:error)
	// the run's error was recorded with, or "".
	ErrorName  string
	ParentHref string
	// ParentClose is what becomes of the run when its parent ends:
	// "terminate", "cancel" or "abandon" (children only).
	ParentClose string

	Executions []executionRow
	// Shown is the execution whose steps are listed; Current the run's.
	Shown, Current int
	// Timeline draws the shown execution's calls on a time axis, and the
	// run's executions on another.
	Timeline *timelineView
	Steps    []stepView
	Wait     *waitView
	Sleep    *sleepView
	// Held says why an engine holds the run; nil when it does not.
	Held *holdView

	Children     []childRow
	MoreChildren string

	// Actions holds the URL of each action the run's state allows, by
	// name; empty without AccessOperate.
	Actions      map[string]string
	RestartSteps []string
	// Topics are the topics an event may be sent on: the wait's first,
	// then the catalog's; Topic is the one the form proposes, the wait's.
	Topics []string
	Topic  string

	// Updates are the run's latest updates, of UpdatesTotal; Streams its
	// streams, by name, and MoreStreams how many more it has.
	Updates      []updateRow
	UpdatesTotal int
	Streams      []streamView
	MoreStreams  int
	// UpdateChoices are the updates the catalog records, which the form
	// may send.
	UpdateChoices []updateChoice
}

// The rows of a run's page are flat structs of what the page shows, times
// formatted: a template reads an embedded struct's fields, and calls
// functions, far slower than plain fields, and a run may have thousands of
// steps.

// executionRow is one execution in the run's list of them.
type executionRow struct {
	Number, ForkedFrom int
	Status, FromStep   string
	Began, Ended       *moment
	Href               string
	Shown              bool
	Error              *text
}

// stepView is one step as the page shows it.
type stepView struct {
	// Ref is its anchor, which the timeline's bar links to.
	Ref               string
	Key, Kind, Status string
	ForkedFrom        int
	Created           *moment
	// When is where the timeline places it: its start and end to the
	// millisecond, and how long it took.
	When stepTime
	// WhenHTML is When as the step's head shows it (see stepTime.html).
	WhenHTML template.HTML
	Input    *payload
	Output   *payload
	// InputNote says why its input was not recorded.
	InputNote string
	Error     *text
	// Wake is a sleep's wake time; WakeVerb says it in words for the
	// sleep's state ("Wakes at", "Woke at", "Would have woken at").
	Wake               *moment
	WakeVerb           string
	ChildID, ChildHref string
	// Attempt and Since describe a running step's attempt; Next is when
	// a retrying step's next attempt is due.
	Attempt   int
	Since     *moment
	Next      *moment
	OpenError string
	Attempts  []attemptView
}

// attemptView is one attempt of a step.
type attemptView struct {
	Number         int
	Started, Retry *moment
	Duration       string
	Ended          bool
	Error          *text
}

// waitView is the event wait a run is parked on. Held says the run is
// held: its wait is kept, and its ready time is the hold's next try, not
// the wait's timeout.
type waitView struct {
	// What is what it waits for in words: "an event", "an update", or
	// "an event or an update"; Topics are the event topics, Updates the
	// names of the updates.
	What            string
	Topics, Updates []string
	Timeout         *moment
	Held            bool
}

// holdView is a run's hold as the page shows it: Call counts the
// execution's calls from 1 (Hold.Position counts from 0); Retry is when an
// engine looks at the run again; FromStep is the step a restart may begin
// from to keep the calls before the divergence ("" when the run recorded
// none there in its current execution).
type holdView struct {
	Reason, Recorded, Called string
	Call, Execution          int
	Since, Retry             *moment
	FromStep                 string
}

// sleepView is the sleep a run is parked in.
type sleepView struct {
	Key   string
	Until *moment
}

// childRow is one child of the run.
type childRow struct {
	ID, Href, Workflow, Status string
	Created                    *moment
}

func (h *handler) runByPath(rq *request) error {
	return h.run(rq, rq.r.PathValue("id"))
}

// runByQuery serves runs/?id=ID, the page of a run whose ID is a dot
// segment; runs/ alone leads to the runs page.
func (h *handler) runByQuery(rq *request) error {
	q := rq.r.URL.Query()
	if !q.Has("id") {
		redirect(rq.w, rq.base+"runs", http.StatusFound)
		return nil
	}
	return h.run(rq, q.Get("id"))
}

func (h *handler) run(rq *request, id string) error {
	ctx := rq.r.Context()
	q := rq.r.URL.Query()
	info, err := h.e.Get(ctx, id)
	if err != nil {
		return runErr(id, err)
	}
	p := &runPage{RunInfo: info, Href: rq.base + runPath(id, ""), Finished: info.Status.Finished(), Current: info.Execution, Shown: info.Execution,
		Created: at(info.CreatedAt), Updated: at(info.UpdatedAt), Began: at(info.StartedAt), Ended: atPtr(info.EndedAt), Due: atPtr(info.Deadline)}
	if info.Status == runtime.StatusQueued {
		p.ReadyAtM = atPtr(info.ReadyAt)
	}
	if s := q.Get("execution"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return badRequest("execution %q is not an execution number: executions are numbered from 1", s)
		}
		if n > info.Execution {
			return &httpError{status: http.StatusNotFound, title: "No such execution",
				msg: fmt.Sprintf("Run %s has no execution %d: it has %s, 1 to %d.", id, n, plural(info.Execution, "execution", "executions"), info.Execution)}
		}
		p.Shown = n
	}
	p.Input, p.Output, p.Progress = prettyJSON(info.Input), prettyJSON(info.Output), prettyJSON(info.Progress)
	p.Error = longText(errText(info.Err))
	p.InputErr, p.OpenErr = errText(info.InputErr), errText(info.OpenErr)
	if p.OpenErr == errText(info.Err) {
		p.OpenErr = "" // the error itself is sealed, and says so
	}
	if info.Err != nil {
		p.ErrorName, _ = runtime.DeclaredErrorName(info.Err)
	}
	if info.ParentID != "" {
		p.ParentHref = rq.base + runPath(info.ParentID, "")
		p.ParentClose = "terminate"
		if info.ParentClose != runtime.ParentCloseTerminate {
			p.ParentClose = string(info.ParentClose)
		}
	}

	execs, err := h.e.ListExecutions(ctx, id)
	if err != nil {
		return runErr(id, err)
	}
	for _, x := range execs {
		p.Executions = append(p.Executions, executionRow{Number: x.Number, ForkedFrom: x.ForkedFrom, Status: string(x.Status), FromStep: x.FromStep,
			Began: at(x.StartedAt), Ended: atPtr(x.EndedAt), Shown: x.Number == p.Shown,
			Href: withQuery(p.Href, url.Values{"execution": {strconv.Itoa(x.Number)}}), Error: longText(errText(x.Err))})
	}
	steps, err := h.e.ListSteps(ctx, id, p.Shown)
	if err != nil {
		return runErr(id, err)
	}
	children, next, err := h.e.ListRuns(ctx, runtime.ListRunsQuery{ParentID: id, Limit: childrenShown})
	if err != nil {
		return err
	}
	var times []stepTime
	// The list writes times to the millisecond, with the date when it is
	// not that of the execution's start.
	day := info.StartedAt.UTC()
	for _, x := range execs {
		if x.Number == p.Shown {
			day = x.StartedAt.UTC()
		}
	}
	p.Timeline, times = timeline(timelineIn{RunID: id, Base: rq.base, Href: p.Href, Shown: p.Shown, Execs: execs,
		Live: p.Shown == p.Current && !p.Finished, Steps: steps, Children: h.childTimes(rq, id, children, steps), Now: h.e.Now()})
	p.Steps = make([]stepView, len(steps))
	for i, s := range steps {
		p.Steps[i] = stepOf(rq.base, id, s, day)
		p.Steps[i].Ref, p.Steps[i].When, p.Steps[i].WhenHTML = stepRef(i), times[i], times[i].html()
		if s.Kind == runtime.KindSleep {
			// Fired, pending, lost or cancelled, as the timeline found.
			st := times[i].State
			p.Steps[i].Status = st
			switch st {
			case "pending":
				p.Steps[i].WakeVerb = "Wakes at"
			case "lost", "cancelled":
				p.Steps[i].WakeVerb = "Would have woken at"
			default:
				p.Steps[i].WakeVerb = "Woke at"
			}
		}
	}
	if h := info.Hold; h != nil {
		p.Held = &holdView{Reason: h.Reason, Recorded: h.Recorded, Called: h.Called, Call: h.Position + 1, Execution: h.Execution,
			Since: at(h.Since), Retry: atPtr(info.ReadyAt)}
		if h.Recorded != "" && h.Execution == info.Execution {
			p.Held.FromStep = h.Recorded
		}
	}
	// A paused run keeps its wait, and waits again once resumed. A held
	// run keeps its wait too; its ready time is the hold's next try.
	if info.Status == runtime.StatusWaiting || info.Status == runtime.StatusPaused {
		if len(info.WaitTopics) > 0 {
			p.Wait = &waitView{Timeout: atPtr(info.ReadyAt), Held: p.Held != nil}
			for _, t := range info.WaitTopics {
				if name, ok := storage.UpdateNameOf(t); ok {
					p.Wait.Updates = append(p.Wait.Updates, name)
				} else {
					p.Wait.Topics = append(p.Wait.Topics, t)
				}
			}
			switch {
			case len(p.Wait.Updates) == 0:
				p.Wait.What = "an event"
			case len(p.Wait.Topics) == 0:
				p.Wait.What = "an update"
			default:
				p.Wait.What = "an event or an update"
			}
			if p.Held != nil {
				p.Wait.Timeout = nil
			}
		} else if info.ReadyAt != nil && info.Status == runtime.StatusWaiting && p.Held == nil {
			p.Sleep = &sleepView{Until: atPtr(info.ReadyAt)}
			for i := len(steps) - 1; i >= 0 && p.Shown == p.Current; i-- {
				if steps[i].Kind == runtime.KindSleep {
					p.Sleep.Key = steps[i].Key
					break
				}
			}
		}
	}

	if err := h.interactions(ctx, p); err != nil {
		return runErr(id, err)
	}

	for _, c := range children {
		p.Children = append(p.Children, childRow{ID: c.ID, Href: rq.base + runPath(c.ID, ""), Workflow: c.Workflow, Status: string(c.Status), Created: at(c.CreatedAt)})
	}
	if next != "" {
		p.MoreChildren = withQuery(rq.base+"runs", url.Values{"parent": {id}, "order": {"oldest"}})
	}

	if rq.operate() {
		if err := h.actions(rq, p, steps); err != nil {
			return err
		}
	}
	v := &view{Title: "Run " + shownPlain(id), Nav: "runs", Page: p, Flash: h.readFlash(id, q.Get("flash"))}
	if !p.Finished {
		v.Refresh = h.refresh.Milliseconds()
	}
	h.render(rq, http.StatusOK, "run", v)
	return nil
}

// runErr names the run in a not-found error.
func runErr(id string, err error) error {
	if s, _ := errorStatus(err); s == http.StatusNotFound {
		return &httpError{status: http.StatusNotFound, title: "No such run",
			msg: fmt.Sprintf("There is no run %q in this store. It may have been purged, or the ID mistyped.", id)}
	}
	return err
}

// actions fills what an operator may do with the run in its state: the
// actions' URLs, the steps it may restart from (those checkpointed in its
// current execution) and the topics an event may be sent on.
func (h *handler) actions(rq *request, p *runPage, shown []runtime.StepInfo) error {
	id := p.ID
	p.Actions = map[string]string{}
	add := func(name string) { p.Actions[name] = rq.base + runPath(id, name) }
	switch {
	case p.Status == runtime.StatusPaused || p.PauseRequested:
		add("resume")
	case !p.Finished:
		add("pause")
	}
	if !p.Finished {
		if !p.CancelRequested {
			add("cancel")
		}
		add("terminate")
		add("event")
	}
	add("restart")

	current := shown
	if p.Shown != p.Current {
		var err error
		if current, err = h.e.ListSteps(rq.r.Context(), id, 0); err != nil {
			return runErr(id, err)
		}
	}
	for _, s := range current {
		if s.Seq > 0 {
			p.RestartSteps = append(p.RestartSteps, s.Key)
		}
	}
	if !p.Finished {
		for _, t := range p.WaitTopics {
			if !strings.HasPrefix(t, storage.ReservedTopicPrefix) {
				p.Topics = append(p.Topics, t)
			}
		}
		if len(p.Topics) > 0 {
			p.Topic = p.Topics[0]
		}
		if cat, err := h.e.Catalog(rq.r.Context()); err == nil {
			for _, ev := range cat.Events {
				if !slices.Contains(p.Topics, ev.Topic) && !strings.HasPrefix(ev.Topic, storage.ReservedTopicPrefix) {
					p.Topics = append(p.Topics, ev.Topic)
				}
			}
			if p.UpdateChoices = updateChoices(cat); len(p.UpdateChoices) > 0 {
				add("update")
			}
		}
	}
	return nil
}

// stepStatus is a step's status as the page shows it: its StepStatus, or
// "timed_out" for an event wait that timed out, which the runtime records
// as the wait's error and the workflow may well handle, so it is not
// shown as a failure (stem show says the same).
func stepStatus(s runtime.StepInfo) string {
	if s.Status == runtime.StepFailed && s.Kind == runtime.KindEvent && errors.Is(s.Err, runtime.ErrEventTimeout) {
		return "timed_out"
	}
	return string(s.Status)
}

// stepOf is a step as the page shows it.
func stepOf(base, runID string, s runtime.StepInfo, day time.Time) stepView {
	v := stepView{Key: s.Key, Kind: string(s.Kind), Status: stepStatus(s), ForkedFrom: s.ForkedFrom, Created: at(s.CreatedAt),
		Next: atMilliPtr(s.NextAttemptAt, day), Error: longText(errText(s.Err)), OpenError: errText(s.OpenErr)}
	if v.OpenError == errText(s.Err) {
		v.OpenError = ""
	}
	v.Input, v.InputNote = prettyJSON(s.Input), s.InputNote
	if s.Status == runtime.StepRunning {
		v.Attempt, v.Since = s.Attempt, atMilli(s.Started, day)
	}
	switch s.Kind {
	case runtime.KindSleep:
		var wake time.Time
		if json.Unmarshal(s.Output, &wake) == nil {
			v.Wake, v.WakeVerb = atMilli(wake, day), "Wakes at"
		}
	case runtime.KindChild:
		v.ChildID = runID + "/" + s.Key
		v.ChildHref = base + runPath(v.ChildID, "")
		v.Output = prettyJSON(s.Output)
	default:
		v.Output = prettyJSON(s.Output)
	}
	if v.Output != nil && v.Output.Text == "null" {
		v.Output = nil
	}
	v.Attempts = make([]attemptView, len(s.Attempts))
	for i, a := range s.Attempts {
		av := attemptView{Number: a.Number, Started: atMilli(a.Started, day), Ended: !a.Ended.IsZero(), Error: longText(a.Error)}
		if av.Error != nil && a.RetryAt != nil {
			av.Retry = atMilli(*a.RetryAt, day)
		}
		if !a.Ended.IsZero() && !a.Started.IsZero() {
			av.Duration = duration(a.Ended.Sub(a.Started))
		}
		v.Attempts[i] = av
	}
	return v
}

// childLookups caps the children the timeline looks up one by one, beyond
// those the page lists.
const childLookups = 25

// childTimes gathers what the timeline needs of the run's children: the
// listed ones, then those of the child calls among steps it lacks, looked
// up one by one (up to childLookups). One not found is left out: the
// timeline spans its call as a wait.
func (h *handler) childTimes(rq *request, id string, listed []runtime.RunInfo, steps []runtime.StepInfo) map[string]childTimes {
	out := make(map[string]childTimes, len(listed))
	add := func(c runtime.RunInfo) {
		start := c.StartedAt
		if start.IsZero() {
			start = c.CreatedAt
		}
		out[c.ID] = childTimes{Start: start, End: c.EndedAt, Status: string(c.Status)}
	}
	for _, c := range listed {
		add(c)
	}
	looked := 0
	for _, s := range steps {
		if s.Kind != runtime.KindChild {
			continue
		}
		cid := id + "/" + s.Key
		if _, ok := out[cid]; ok || looked >= childLookups {
			continue
		}
		looked++
		if c, err := h.e.Get(rq.r.Context(), cid); err == nil {
			add(c)
		}
	}
	return out
}
