package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stemflow/stem/storage"
)

// Schedules live in the schedules table, written whole and compared by
// revision; the runs a write starts are created in its transaction as
// CreateRuns creates them (createIn).

// WriteSchedule creates the schedule (revision 0: an insert that fails
// over to ErrConflict when the ID is taken) or replaces it at the expected
// revision (an update that says, when it writes nothing, whether the
// schedule is missing or at another revision), then creates the write's
// runs, in one transaction.
func (s *Store) WriteSchedule(ctx context.Context, w storage.ScheduleWrite) (storage.ScheduleWriteResult, error) {
	const op = "write schedule"
	if err := s.check(op); err != nil {
		return storage.ScheduleWriteResult{}, err
	}
	if err := w.Validate(); err != nil {
		return storage.ScheduleWriteResult{}, fmt.Errorf("pgstore: %w", err)
	}
	sc := w.Schedule
	args := []any{s.clock(), sc.ID, sc.Workflow, sc.Cron, sc.TimeZone, sc.Input, sc.Queue, sc.Partition, int32(sc.Priority),
		string(sc.Overlap), string(sc.CatchUp), int64(sc.CatchUpWindow), sc.Paused, sc.NextFireAt, sc.CheckAt, sc.Held,
		sc.LastFireAt, sc.LastRunID}
	var (
		res     storage.ScheduleWriteResult
		created bool
	)
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		res, created = storage.ScheduleWriteResult{}, false
		if w.Revision == 0 {
			stored, err := scanSchedule(tx.QueryRow(ctx, s.q.insertSchedule, args...))
			if errors.Is(err, pgx.ErrNoRows) {
				return fmt.Errorf("schedule %q exists already: %w", sc.ID, storage.ErrConflict)
			}
			if err != nil {
				return err
			}
			res.Schedule = stored
		} else {
			var written bool
			stored, err := scanSchedule(tx.QueryRow(ctx, s.q.updateSchedule, append(args, w.Revision)...), &written)
			switch {
			case errors.Is(err, pgx.ErrNoRows):
				return fmt.Errorf("schedule %q: %w", sc.ID, storage.ErrScheduleNotFound)
			case err != nil:
				return err
			case !written:
				return fmt.Errorf("schedule %q is at revision %d, not %d: %w", sc.ID, stored.Revision, w.Revision, storage.ErrConflict)
			}
			res.Schedule = stored
		}
		if len(w.Runs) == 0 {
			return nil
		}
		out, ready, err := s.createIn(ctx, tx, w.Runs)
		if err != nil {
			return err
		}
		res.Runs, created = out, ready
		return nil
	})
	if err != nil {
		return storage.ScheduleWriteResult{}, s.wrap(op, err)
	}
	if created {
		s.poke()
	}
	return res, nil
}

// GetSchedule returns a schedule, or ErrScheduleNotFound.
func (s *Store) GetSchedule(ctx context.Context, id string) (storage.Schedule, error) {
	const op = "get schedule"
	if err := s.check(op); err != nil {
		return storage.Schedule{}, err
	}
	sc, err := scanSchedule(s.pool.QueryRow(ctx, s.q.getSchedule, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return storage.Schedule{}, fmt.Errorf("pgstore: %s %q: %w", op, id, storage.ErrScheduleNotFound)
	}
	if err != nil {
		return storage.Schedule{}, s.wrap(op, err)
	}
	return sc, nil
}

// ListSchedules reads a page by ID through the primary key, or the due
// schedules by CheckAt through schedules_due_idx.
func (s *Store) ListSchedules(ctx context.Context, q storage.ScheduleQuery) (storage.SchedulePage, error) {
	const op = "list schedules"
	if err := s.check(op); err != nil {
		return storage.SchedulePage{}, err
	}
	if err := q.Validate(); err != nil {
		return storage.SchedulePage{}, fmt.Errorf("pgstore: %w", err)
	}
	limit := q.PageSize()
	var (
		rows pgx.Rows
		err  error
	)
	if q.DueBy != nil {
		rows, err = s.pool.Query(ctx, s.q.dueSchedules, *q.DueBy, limit+1)
	} else {
		rows, err = s.pool.Query(ctx, s.q.listSchedules, q.After, limit+1)
	}
	if err != nil {
		return storage.SchedulePage{}, s.wrap(op, err)
	}
	var page storage.SchedulePage
	err = forRows(rows, func() error {
		sc, err := scanSchedule(rows)
		page.Schedules = append(page.Schedules, sc)
		return err
	})
	if err != nil {
		return storage.SchedulePage{}, s.wrap(op, err)
	}
	if len(page.Schedules) > limit {
		page.Schedules = page.Schedules[:limit]
		if q.DueBy == nil {
			page.Next = page.Schedules[limit-1].ID
		}
	}
	return page, nil
}

// DeleteSchedule deletes a schedule, or reports ErrScheduleNotFound.
func (s *Store) DeleteSchedule(ctx context.Context, id string) error {
	const op = "delete schedule"
	if err := s.check(op); err != nil {
		return err
	}
	tag, err := s.pool.Exec(ctx, s.q.deleteSchedule, id)
	if err != nil {
		return s.wrap(op, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("pgstore: %s %q: %w", op, id, storage.ErrScheduleNotFound)
	}
	return nil
}

// scanSchedule reads extra destinations, then the schedColumns.
func scanSchedule(row scanner, extra ...any) (storage.Schedule, error) {
	var (
		sc               storage.Schedule
		priority         int32
		overlap, catchUp string
		window           int64
	)
	dest := append(extra, &sc.ID, &sc.Workflow, &sc.Cron, &sc.TimeZone, &sc.Input, &sc.Queue, &sc.Partition, &priority,
		&overlap, &catchUp, &window, &sc.Paused, &sc.NextFireAt, &sc.CheckAt, &sc.Held, &sc.LastFireAt, &sc.LastRunID,
		&sc.Revision, &sc.CreatedAt, &sc.UpdatedAt)
	if err := row.Scan(dest...); err != nil {
		return storage.Schedule{}, err
	}
	sc.Priority, sc.Overlap, sc.CatchUp, sc.CatchUpWindow = int(priority), storage.OverlapPolicy(overlap), storage.CatchUpPolicy(catchUp), time.Duration(window)
	return sc, nil
}
