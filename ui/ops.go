package ui

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/schedule"
	"github.com/stemflow/stem/storage"
)

// queueRow is one queue: its runs by state and its limits.
type queueRow struct {
	runtime.QueueStats
	Href string
	// Limits is the queue's limits as recorded in the catalog; Recorded
	// says whether any engine recorded it.
	Limits   storage.Queue
	Recorded bool
	Worker   string
	Updated  *moment
}

// queuesPage is the queues template's data.
type queuesPage struct {
	Queues []queueRow
}

func (h *handler) queues(rq *request) error {
	ctx := rq.r.Context()
	cat, err := h.e.Catalog(ctx)
	if err != nil {
		return err
	}
	names := []string{runtime.DefaultQueue}
	recorded := map[string]storage.QueueType{}
	for _, q := range cat.Queues {
		recorded[q.Name] = q
		if !slices.Contains(names, q.Name) {
			names = append(names, q.Name)
		}
	}
	for _, w := range cat.Workflows {
		if w.Queue != "" && !slices.Contains(names, w.Queue) {
			names = append(names, w.Queue)
		}
	}
	slices.Sort(names)
	stats, err := h.e.QueueStats(ctx, names...)
	if err != nil {
		return err
	}
	p := &queuesPage{}
	for _, s := range stats {
		row := queueRow{QueueStats: s, Href: withQuery(rq.base+"runs", url.Values{"queue": {s.Queue}})}
		if rec, ok := recorded[s.Queue]; ok {
			row.Limits, row.Recorded, row.Worker, row.Updated = rec.Queue, true, rec.Worker, at(rec.UpdatedAt)
		}
		p.Queues = append(p.Queues, row)
	}
	h.render(rq, http.StatusOK, "queues", &view{Title: "Queues", Nav: "queues", Page: p, Refresh: h.refresh.Milliseconds()})
	return nil
}

// schedulesPageSize is how many schedules the schedules page lists at
// once.
const schedulesPageSize = 50

// scheduleRow is one schedule.
type scheduleRow struct {
	storage.Schedule
	Next, Held, Last *moment
	WorkflowHref     string
	LastRunHref      string
	// N numbers the row, for its dialogs' IDs; Act is where its
	// actions post, the action's name added.
	N   int
	Act string
}

// schedulesPage is the schedules template's data.
type schedulesPage struct {
	Schedules   []scheduleRow
	Next, First string
	// After is the page's cursor, which an action's form carries so
	// the outcome shows on the same page.
	After string
}

func (h *handler) schedules(rq *request) error {
	q := rq.r.URL.Query()
	after := q.Get("after")
	page, err := h.e.Store().ListSchedules(rq.r.Context(), storage.ScheduleQuery{After: after, Limit: schedulesPageSize})
	if err != nil {
		return err
	}
	p := &schedulesPage{First: rq.base + "schedules", After: after}
	for i, s := range page.Schedules {
		row := scheduleRow{Schedule: s, Next: at(s.NextFireAt), Held: atPtr(s.Held), Last: atPtr(s.LastFireAt),
			WorkflowHref: withQuery(rq.base+"runs", url.Values{"workflow": {s.Workflow}}), N: i, Act: rq.base + schedulePath(s.ID, "")}
		if s.LastRunID != "" {
			row.LastRunHref = rq.base + runPath(s.LastRunID, "")
		}
		p.Schedules = append(p.Schedules, row)
	}
	if page.Next != "" {
		p.Next = withQuery(rq.base+"schedules", url.Values{"after": {page.Next}})
	}
	h.render(rq, http.StatusOK, "schedules", &view{Title: "Schedules", Nav: "schedules", Page: p,
		Flash: h.readPageFlash(schedulesScope, q.Get("flash"))})
	return nil
}

// schedulesScope is the scope of the schedules page's outcome messages.
const schedulesScope = "schedules"

// schedulePath is the path of a schedule's action from the mount point:
// schedules/<ID>/<action>, or schedules/?id=ID&do=<action> for an ID
// that is a dot segment. With action "" it is the path the action's name
// is appended to.
func schedulePath(id, action string) string {
	if id == "." || id == ".." {
		return "schedules/?" + url.Values{"id": {id}}.Encode() + "&do=" + action
	}
	return "schedules/" + url.PathEscape(id) + "/" + action
}

func (h *handler) scheduleActByPath(rq *request) error {
	return h.scheduleAct(rq, rq.r.PathValue("id"), rq.r.PathValue("action"))
}

// scheduleActByQuery serves schedules/?id=ID&do=ACTION, the actions of a
// schedule whose ID is a dot segment.
func (h *handler) scheduleActByQuery(rq *request) error {
	q := rq.r.URL.Query()
	if !q.Has("id") || !q.Has("do") {
		return h.notFound(rq)
	}
	return h.scheduleAct(rq, q.Get("id"), q.Get("do"))
}

// scheduleAct pauses, resumes, triggers or deletes a schedule and leads
// back to the schedules, which show the outcome; a trigger leads to the
// run it started.
func (h *handler) scheduleAct(rq *request, id, action string) error {
	if !slices.Contains([]string{"pause", "resume", "trigger", "delete"}, action) {
		return &httpError{status: http.StatusNotFound, title: "No such action",
			msg: fmt.Sprintf("%q is not an action: a schedule may be paused, resumed, triggered or deleted.", action)}
	}
	rq.r.Body = http.MaxBytesReader(rq.w, rq.r.Body, 64<<10)
	if err := h.checkPost(rq); err != nil {
		return err
	}
	ctx := rq.r.Context()
	name := shownPlain(id)
	var f flash
	var err error
	switch action {
	case "pause":
		if err = schedule.Pause(ctx, h.e, id); err == nil {
			f = flash{Kind: "ok", Message: fmt.Sprintf("Schedule %s paused: its ticks start no run until it is resumed.", name)}
		}
	case "resume":
		if err = schedule.Resume(ctx, h.e, id); err == nil {
			f = flash{Kind: "ok", Message: fmt.Sprintf("Schedule %s resumed: it ticks again from now on; the ticks it missed while paused are not started.", name)}
			if s, gerr := schedule.Get(ctx, h.e, id); gerr == nil && !s.NextFireAt.IsZero() {
				f.Message += " Its next tick is at " + when(&s.NextFireAt) + "."
			}
		}
	case "trigger":
		var runID string
		if runID, err = schedule.Trigger(ctx, h.e, id); err == nil {
			h.log.Info("ui: schedule action", "action", action, "schedule", id, "run", runID)
			msg := fmt.Sprintf("Started by schedule %s now, outside its calendar; its next tick is unchanged.", name)
			redirect(rq.w, withQuery(rq.base+runPath(runID, ""), url.Values{"flash": {h.flashToken(runID, flash{Kind: "ok", Message: msg})}}), http.StatusSeeOther)
			return nil
		}
	case "delete":
		if err = schedule.Delete(ctx, h.e, id); err == nil {
			f = flash{Kind: "ok", Message: fmt.Sprintf("Schedule %s deleted. The runs it started stay.", name)}
		}
	}
	if err != nil {
		if s, _ := errorStatus(err); s >= 500 && !errors.Is(err, schedule.ErrNotFound) {
			h.log.Error("ui: schedule action", "action", action, "schedule", id, "err", err)
		}
		if errors.Is(err, schedule.ErrNotFound) {
			f = flash{Kind: "error", Message: fmt.Sprintf("Could not %s schedule %s: it is not there (deleted meanwhile?).", action, name)}
		} else {
			f = flash{Kind: "error", Message: fmt.Sprintf("Could not %s schedule %s: %s", action, name, inWords(err))}
		}
	}
	h.log.Info("ui: schedule action", "action", action, "schedule", id, "outcome", f.Kind, "message", f.Message)
	v := url.Values{"flash": {h.pageFlashToken(schedulesScope, f)}}
	if after := rq.r.PostForm.Get("after"); after != "" {
		v.Set("after", after)
	}
	redirect(rq.w, withQuery(rq.base+"schedules", v), http.StatusSeeOther)
	return nil
}

// workerRow is one live worker.
type workerRow struct {
	runtime.Worker
	Started, Seen *moment
}

// workersPage is the workers template's data.
type workersPage struct {
	Workers []workerRow
}

func (h *handler) workers(rq *request) error {
	ws, err := h.e.Workers(rq.r.Context())
	if err != nil {
		return err
	}
	p := &workersPage{}
	for _, w := range ws {
		p.Workers = append(p.Workers, workerRow{Worker: w, Started: at(w.StartedAt), Seen: at(w.Heartbeat)})
	}
	h.render(rq, http.StatusOK, "workers", &view{Title: "Workers", Nav: "workers", Page: p, Refresh: h.refresh.Milliseconds()})
	return nil
}
