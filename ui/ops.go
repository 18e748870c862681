package ui

import (
	"net/http"
	"net/url"
	"slices"

	"github.com/stemflow/stem/runtime"
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
}

// schedulesPage is the schedules template's data.
type schedulesPage struct {
	Schedules   []scheduleRow
	Next, First string
}

func (h *handler) schedules(rq *request) error {
	after := rq.r.URL.Query().Get("after")
	page, err := h.e.Store().ListSchedules(rq.r.Context(), storage.ScheduleQuery{After: after, Limit: schedulesPageSize})
	if err != nil {
		return err
	}
	p := &schedulesPage{First: rq.base + "schedules"}
	for _, s := range page.Schedules {
		row := scheduleRow{Schedule: s, Next: at(s.NextFireAt), Held: atPtr(s.Held), Last: atPtr(s.LastFireAt),
			WorkflowHref: withQuery(rq.base+"runs", url.Values{"workflow": {s.Workflow}})}
		if s.LastRunID != "" {
			row.LastRunHref = rq.base + runPath(s.LastRunID, "")
		}
		p.Schedules = append(p.Schedules, row)
	}
	if page.Next != "" {
		p.Next = withQuery(rq.base+"schedules", url.Values{"after": {page.Next}})
	}
	h.render(rq, http.StatusOK, "schedules", &view{Title: "Schedules", Nav: "schedules", Page: p})
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
