package memstore

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/stemflow/stem/storage"
)

// WriteSchedule creates or replaces a schedule if it is at the revision the
// write expects, and creates the write's runs, in one critical section.
func (s *Store) WriteSchedule(ctx context.Context, w storage.ScheduleWrite) (storage.ScheduleWriteResult, error) {
	if err := w.Validate(); err != nil {
		return storage.ScheduleWriteResult{}, refuse(err)
	}
	if err := s.lock(ctx); err != nil {
		return storage.ScheduleWriteResult{}, err
	}
	defer s.mu.Unlock()
	id := w.Schedule.ID
	old := s.schedules[id]
	switch {
	case w.Revision == 0 && old != nil:
		return storage.ScheduleWriteResult{}, fmt.Errorf("memstore: create schedule %q: it exists at revision %d: %w", id, old.Revision, storage.ErrConflict)
	case w.Revision != 0 && old == nil:
		return storage.ScheduleWriteResult{}, fmt.Errorf("memstore: write schedule %q at revision %d: %w", id, w.Revision, storage.ErrScheduleNotFound)
	case old != nil && old.Revision != w.Revision:
		return storage.ScheduleWriteResult{}, fmt.Errorf("memstore: write schedule %q at revision %d: it is at revision %d: %w", id, w.Revision, old.Revision, storage.ErrConflict)
	}
	now := s.clock()
	sc := cloneSchedule(w.Schedule)
	sc.Revision, sc.CreatedAt, sc.UpdatedAt = w.Revision+1, now, now
	if old != nil {
		sc.CreatedAt = old.CreatedAt
	} else {
		i, _ := slices.BinarySearch(s.scheduleIDs, id)
		s.scheduleIDs = slices.Insert(s.scheduleIDs, i, id)
	}
	s.schedules[id] = &sc
	res := storage.ScheduleWriteResult{Schedule: cloneSchedule(sc)}
	if len(w.Runs) > 0 {
		res.Runs = s.create(w.Runs, now)
	}
	return res, nil
}

// GetSchedule returns a schedule, or ErrScheduleNotFound.
func (s *Store) GetSchedule(ctx context.Context, id string) (storage.Schedule, error) {
	if err := s.lock(ctx); err != nil {
		return storage.Schedule{}, err
	}
	defer s.mu.Unlock()
	sc := s.schedules[id]
	if sc == nil {
		return storage.Schedule{}, scheduleNotFound("get", id)
	}
	return cloneSchedule(*sc), nil
}

// ListSchedules lists schedules by ID after the cursor, or, with DueBy,
// the unpaused ones due by then, by CheckAt and ID: a look at every
// schedule, which are few.
func (s *Store) ListSchedules(ctx context.Context, q storage.ScheduleQuery) (storage.SchedulePage, error) {
	if err := q.Validate(); err != nil {
		return storage.SchedulePage{}, refuse(err)
	}
	limit := q.PageSize()
	if err := s.lock(ctx); err != nil {
		return storage.SchedulePage{}, err
	}
	defer s.mu.Unlock()
	var page storage.SchedulePage
	if q.DueBy != nil {
		var due []*storage.Schedule
		for _, sc := range s.schedules {
			if !sc.Paused && !sc.CheckAt.After(*q.DueBy) {
				due = append(due, sc)
			}
		}
		slices.SortFunc(due, func(a, b *storage.Schedule) int {
			return cmp.Or(a.CheckAt.Compare(b.CheckAt), strings.Compare(a.ID, b.ID))
		})
		for _, sc := range due[:min(limit, len(due))] {
			page.Schedules = append(page.Schedules, cloneSchedule(*sc))
		}
		return page, nil
	}
	ids := s.scheduleIDs
	start := sort.SearchStrings(ids, q.After)
	if start < len(ids) && ids[start] == q.After {
		start++
	}
	for _, id := range ids[start:] {
		if len(page.Schedules) == limit {
			page.Next = page.Schedules[limit-1].ID
			break
		}
		page.Schedules = append(page.Schedules, cloneSchedule(*s.schedules[id]))
	}
	return page, nil
}

// DeleteSchedule deletes a schedule; its runs stay.
func (s *Store) DeleteSchedule(ctx context.Context, id string) error {
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	if s.schedules[id] == nil {
		return scheduleNotFound("delete", id)
	}
	delete(s.schedules, id)
	if i, ok := slices.BinarySearch(s.scheduleIDs, id); ok {
		s.scheduleIDs = slices.Delete(s.scheduleIDs, i, i+1)
	}
	return nil
}

func scheduleNotFound(op, id string) error {
	return fmt.Errorf("memstore: %s schedule %q: %w", op, id, storage.ErrScheduleNotFound)
}

// cloneSchedule returns a copy of sc that shares nothing with it.
func cloneSchedule(sc storage.Schedule) storage.Schedule {
	sc.Input = clone(sc.Input)
	sc.Held = cloneTime(sc.Held)
	sc.LastFireAt = cloneTime(sc.LastFireAt)
	return sc
}
