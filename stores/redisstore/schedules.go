package redisstore

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/stemflow/stem/storage"
)

// The scripts of schedules: a write compared by revision that creates its
// runs in the same change, a page of the ID or due index, a delete.
var (
	schedWriteScript  = newScript("schedwrite")
	schedListScript   = newScript("schedlist")
	schedDeleteScript = newScript("scheddelete")
)

func init() {
	allScripts = append(allScripts, schedWriteScript, schedListScript, schedDeleteScript)
}

// scheduleEntry is how a schedule is stored, as JSON in its hash's j
// field; the hash's rev, ca and ua fields hold its Revision, CreatedAt
// and UpdatedAt (µs), which the scripts set.
type scheduleEntry struct {
	Workflow      string                `json:"wf"`
	Cron          string                `json:"cron"`
	TimeZone      string                `json:"tz,omitempty"`
	Input         []byte                `json:"in,omitempty"`
	NilInput      bool                  `json:"nin,omitempty"`
	Queue         string                `json:"q,omitempty"`
	Partition     string                `json:"pt,omitempty"`
	Priority      int                   `json:"pr,omitempty"`
	Overlap       storage.OverlapPolicy `json:"ov,omitempty"`
	CatchUp       storage.CatchUpPolicy `json:"cu,omitempty"`
	CatchUpWindow time.Duration         `json:"cw,omitempty"`
	Paused        bool                  `json:"p,omitempty"`
	NextFireAt    time.Time             `json:"nf"`
	CheckAt       time.Time             `json:"ck"`
	Held          *time.Time            `json:"h,omitempty"`
	LastFireAt    *time.Time            `json:"lf,omitempty"`
	LastRunID     string                `json:"lr,omitempty"`
}

func encodeSchedule(sc storage.Schedule) (string, error) {
	b, err := json.Marshal(scheduleEntry{
		Workflow: sc.Workflow, Cron: sc.Cron, TimeZone: sc.TimeZone,
		Input: sc.Input, NilInput: sc.Input == nil,
		Queue: sc.Queue, Partition: sc.Partition, Priority: sc.Priority,
		Overlap: sc.Overlap, CatchUp: sc.CatchUp, CatchUpWindow: sc.CatchUpWindow,
		Paused: sc.Paused, NextFireAt: sc.NextFireAt, CheckAt: sc.CheckAt,
		Held: sc.Held, LastFireAt: sc.LastFireAt, LastRunID: sc.LastRunID,
	})
	if err != nil {
		return "", fmt.Errorf("redisstore: encoding schedule %q: %w", sc.ID, err)
	}
	return string(b), nil
}

// decodeSchedule builds a schedule from its ID and its hash's rev, ca, ua
// and j fields.
func decodeSchedule(id, rev, created, updated, enc string) (storage.Schedule, error) {
	sc := storage.Schedule{ID: id}
	var e scheduleEntry
	if err := json.Unmarshal([]byte(enc), &e); err != nil {
		return sc, fmt.Errorf("redisstore: bad stored schedule %q: %w", id, err)
	}
	var err error
	if sc.Revision, err = parseInt(rev); err != nil {
		return sc, err
	}
	if sc.CreatedAt, err = fromMicros(created); err != nil {
		return sc, err
	}
	if sc.UpdatedAt, err = fromMicros(updated); err != nil {
		return sc, err
	}
	sc.Workflow, sc.Cron, sc.TimeZone = e.Workflow, e.Cron, e.TimeZone
	sc.Input = e.Input
	if sc.Input == nil && !e.NilInput {
		sc.Input = []byte{}
	}
	sc.Queue, sc.Partition, sc.Priority = e.Queue, e.Partition, e.Priority
	sc.Overlap, sc.CatchUp, sc.CatchUpWindow = e.Overlap, e.CatchUp, e.CatchUpWindow
	sc.Paused, sc.NextFireAt, sc.CheckAt = e.Paused, e.NextFireAt, e.CheckAt
	sc.Held, sc.LastFireAt, sc.LastRunID = e.Held, e.LastFireAt, e.LastRunID
	return sc, nil
}

// WriteSchedule implements storage.Store: one script compares the stored
// revision, writes the schedule and its index entries (si by ID, sc by
// CheckAt while unpaused) and creates the runs as CreateRuns does
// (create_run), so that of any number of processes writing the same tick
// exactly one takes it.
func (s *Store) WriteSchedule(ctx context.Context, w storage.ScheduleWrite) (storage.ScheduleWriteResult, error) {
	var res storage.ScheduleWriteResult
	if err := w.Validate(); err != nil {
		return res, fmt.Errorf("redisstore: %w", err)
	}
	if err := s.checkOpen(); err != nil {
		return res, err
	}
	sc := w.Schedule
	enc, err := encodeSchedule(sc)
	if err != nil {
		return res, err
	}
	paused := ""
	if sc.Paused {
		paused = "1"
	}
	keys := make([]string, 0, 1+len(w.Runs))
	keys = append(keys, s.keys.schedule(sc.ID))
	args := make([]any, 0, 5+newRunFields*len(w.Runs))
	args = append(args, sc.ID, w.Revision, enc, micros(sc.CheckAt), paused)
	for _, r := range w.Runs {
		keys = append(keys, s.keys.run(r.ID))
	}
	args = appendNewRuns(args, w.Runs)
	v, err := s.run(ctx, schedWriteScript, keys, args...)
	if err != nil {
		return res, fmt.Errorf("redisstore: write schedule %q: %w", sc.ID, err)
	}
	list, ok := v.([]any)
	if !ok || len(list) == 0 {
		return res, fmt.Errorf("redisstore: write schedule %q: unexpected reply", sc.ID)
	}
	switch str(list[0]) {
	case "NOTFOUND":
		return res, fmt.Errorf("redisstore: write schedule %q at revision %d: %w", sc.ID, w.Revision, storage.ErrScheduleNotFound)
	case "CONFLICT":
		if w.Revision == 0 {
			return res, fmt.Errorf("redisstore: create schedule %q: it exists: %w", sc.ID, storage.ErrConflict)
		}
		return res, fmt.Errorf("redisstore: write schedule %q: expected revision %d, stored %s: %w", sc.ID, w.Revision, str(list[1]), storage.ErrConflict)
	}
	if len(list) != 5 {
		return res, fmt.Errorf("redisstore: write schedule %q: unexpected reply", sc.ID)
	}
	if res.Schedule, err = decodeSchedule(sc.ID, str(list[1]), str(list[2]), str(list[3]), enc); err != nil {
		return res, err
	}
	runs, _ := list[4].([]any)
	if res.Runs, err = appendCreated(nil, runs); err != nil {
		return res, err
	}
	return res, nil
}

// GetSchedule implements storage.Store.
func (s *Store) GetSchedule(ctx context.Context, id string) (storage.Schedule, error) {
	if err := s.checkOpen(); err != nil {
		return storage.Schedule{}, err
	}
	v, err := s.client.HMGet(ctx, s.keys.schedule(id), "rev", "ca", "ua", "j").Result()
	if err != nil {
		return storage.Schedule{}, fmt.Errorf("redisstore: get schedule %q: %w", id, s.wrapErr(err))
	}
	if v[0] == nil {
		return storage.Schedule{}, fmt.Errorf("redisstore: get schedule %q: %w", id, storage.ErrScheduleNotFound)
	}
	return decodeSchedule(id, str(v[0]), str(v[1]), str(v[2]), str(v[3]))
}

// ListSchedules implements storage.Store: a page of the IDs index (si)
// or of the due index (sc, by CheckAt and then ID, which holds only the
// unpaused), read with each schedule in one script.
func (s *Store) ListSchedules(ctx context.Context, q storage.ScheduleQuery) (storage.SchedulePage, error) {
	var page storage.SchedulePage
	if err := q.Validate(); err != nil {
		return page, fmt.Errorf("redisstore: %w", err)
	}
	if err := s.checkOpen(); err != nil {
		return page, err
	}
	limit := q.PageSize()
	var v any
	var err error
	if q.DueBy != nil {
		v, err = s.run(ctx, schedListScript, []string{s.keys.schedulesDue()}, "due", micros(*q.DueBy), limit+1)
	} else {
		start := "-"
		if q.After != "" {
			start = "(" + q.After
		}
		v, err = s.run(ctx, schedListScript, []string{s.keys.scheduleIDs()}, "id", start, limit+1)
	}
	if err != nil {
		return page, fmt.Errorf("redisstore: list schedules: %w", err)
	}
	list, ok := v.([]any)
	if !ok {
		return page, fmt.Errorf("redisstore: list schedules: unexpected reply")
	}
	for _, item := range list {
		pair, ok := item.([]any)
		if !ok || len(pair) != 2 {
			return page, fmt.Errorf("redisstore: list schedules: unexpected reply")
		}
		f, ok := pair[1].([]any)
		if !ok || len(f) != 4 || f[0] == nil {
			continue // deleted between the index and the hash: cannot happen in one script
		}
		sc, err := decodeSchedule(str(pair[0]), str(f[0]), str(f[1]), str(f[2]), str(f[3]))
		if err != nil {
			return page, err
		}
		page.Schedules = append(page.Schedules, sc)
	}
	if len(page.Schedules) > limit {
		page.Schedules = page.Schedules[:limit]
		if q.DueBy == nil {
			page.Next = page.Schedules[limit-1].ID
		}
	}
	return page, nil
}

// DeleteSchedule implements storage.Store.
func (s *Store) DeleteSchedule(ctx context.Context, id string) error {
	if err := s.checkOpen(); err != nil {
		return err
	}
	v, err := s.run(ctx, schedDeleteScript, []string{s.keys.schedule(id)}, id)
	if err != nil {
		return fmt.Errorf("redisstore: delete schedule %q: %w", id, err)
	}
	if list, ok := v.([]any); ok && len(list) == 1 && list[0] == "NOTFOUND" {
		return fmt.Errorf("redisstore: delete schedule %q: %w", id, storage.ErrScheduleNotFound)
	}
	_, err = status("delete schedule", id, v)
	return err
}
