package sqlitestore

import (
	"context"
	"fmt"
	"time"

	"github.com/stemflow/stem/storage"
)

// WriteSchedule creates or replaces a schedule, compared by revision, and
// creates the write's runs as CreateRuns does, in one transaction: the
// writer's, so concurrent writers of one tick, in any process, are
// serialised by SQLite's write lock and exactly one finds the revision it
// expected.
func (s *Store) WriteSchedule(ctx context.Context, sw storage.ScheduleWrite) (storage.ScheduleWriteResult, error) {
	if err := sw.Validate(); err != nil {
		return storage.ScheduleWriteResult{}, fmt.Errorf("sqlitestore: %w", err)
	}
	var res storage.ScheduleWriteResult
	err := s.write(ctx, "write schedule", func(w *wtx) error {
		res = storage.ScheduleWriteResult{}
		now := s.now()
		n := now.UnixNano()
		sc := sw.Schedule
		var rev, created int64
		found, err := w.queryRow(`SELECT revision, created_at FROM schedules WHERE id = ?1`,
			func(r row) { rev, created = r.int64(0), r.int64(1) }, sc.ID)
		switch {
		case err != nil:
			return err
		case sw.Revision == 0 && found:
			return fmt.Errorf("%w: schedule %q exists (revision %d)", storage.ErrConflict, sc.ID, rev)
		case sw.Revision != 0 && !found:
			return fmt.Errorf("%w: %q", storage.ErrScheduleNotFound, sc.ID)
		case sw.Revision != rev:
			return fmt.Errorf("%w: schedule %q is at revision %d, not %d", storage.ErrConflict, sc.ID, rev, sw.Revision)
		}
		if !found {
			created = n
		}
		if _, err := w.exec(`INSERT INTO schedules (id, workflow, cron, time_zone, input, queue, partition_key, priority,
				overlap, catch_up, catch_up_window, paused, next_fire_at, check_at, held, last_fire_at, last_run_id,
				revision, created_at, updated_at)
			VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20)
			ON CONFLICT (id) DO UPDATE SET workflow = excluded.workflow, cron = excluded.cron, time_zone = excluded.time_zone,
				input = excluded.input, queue = excluded.queue, partition_key = excluded.partition_key,
				priority = excluded.priority, overlap = excluded.overlap, catch_up = excluded.catch_up,
				catch_up_window = excluded.catch_up_window, paused = excluded.paused, next_fire_at = excluded.next_fire_at,
				check_at = excluded.check_at, held = excluded.held, last_fire_at = excluded.last_fire_at,
				last_run_id = excluded.last_run_id, revision = excluded.revision, updated_at = excluded.updated_at`,
			sc.ID, sc.Workflow, sc.Cron, sc.TimeZone, bytesArg(sc.Input), sc.Queue, sc.Partition, sc.Priority,
			string(sc.Overlap), string(sc.CatchUp), int64(sc.CatchUpWindow), sc.Paused, sc.NextFireAt.UnixNano(), sc.CheckAt.UnixNano(),
			nanosPtr(sc.Held), nanosPtr(sc.LastFireAt), sc.LastRunID, rev+1, created, n); err != nil {
			return err
		}
		runs, err := w.createRuns(sw.Runs, now)
		if err != nil {
			return err
		}
		stored, _, err := getSchedule(w.conn, sc.ID)
		res = storage.ScheduleWriteResult{Schedule: stored, Runs: runs}
		return err
	})
	if err != nil {
		return storage.ScheduleWriteResult{}, err
	}
	return res, nil
}

// GetSchedule returns a schedule, or storage.ErrScheduleNotFound.
func (s *Store) GetSchedule(ctx context.Context, id string) (storage.Schedule, error) {
	var sc storage.Schedule
	err := s.read(ctx, "get schedule", false, func(c *conn) error {
		var found bool
		var err error
		sc, found, err = getSchedule(c, id)
		if err == nil && !found {
			err = fmt.Errorf("%w: %q", storage.ErrScheduleNotFound, id)
		}
		return err
	})
	return sc, err
}

// ListSchedules lists schedules in ID order after the cursor, or, with
// q.DueBy, the unpaused ones due by then in CheckAt order (schedules_due).
func (s *Store) ListSchedules(ctx context.Context, q storage.ScheduleQuery) (storage.SchedulePage, error) {
	if err := q.Validate(); err != nil {
		return storage.SchedulePage{}, fmt.Errorf("sqlitestore: %w", err)
	}
	limit := q.PageSize()
	query, args := `SELECT `+scheduleCols+` FROM schedules WHERE id > ?1 ORDER BY id LIMIT ?2`, []any{q.After, limit + 1}
	if q.DueBy != nil {
		query = `SELECT ` + scheduleCols + ` FROM schedules INDEXED BY schedules_due
			WHERE paused = 0 AND check_at <= ?1 ORDER BY check_at, id LIMIT ?2`
		args = []any{q.DueBy.UnixNano(), limit}
	}
	var page storage.SchedulePage
	err := s.read(ctx, "list schedules", false, func(c *conn) error {
		page = storage.SchedulePage{}
		return c.query(query, func(r row) error {
			page.Schedules = append(page.Schedules, scanSchedule(r))
			return nil
		}, args...)
	})
	if err != nil {
		return storage.SchedulePage{}, err
	}
	if len(page.Schedules) > limit {
		page.Schedules = page.Schedules[:limit]
		page.Next = page.Schedules[limit-1].ID
	}
	return page, nil
}

// DeleteSchedule deletes a schedule; its runs stay.
func (s *Store) DeleteSchedule(ctx context.Context, id string) error {
	if err := storage.CheckScheduleID(id); err != nil {
		return fmt.Errorf("sqlitestore: delete schedule: %w", err)
	}
	return s.write(ctx, "delete schedule", func(w *wtx) error {
		deleted, err := w.exec(`DELETE FROM schedules WHERE id = ?1`, id)
		if err == nil && deleted == 0 {
			err = fmt.Errorf("%w: %q", storage.ErrScheduleNotFound, id)
		}
		return err
	})
}

// scheduleCols are the columns scanSchedule reads.
const scheduleCols = `id, workflow, cron, time_zone, input, queue, partition_key, priority, overlap, catch_up,
	catch_up_window, paused, next_fire_at, check_at, held, last_fire_at, last_run_id, revision, created_at, updated_at`

func scanSchedule(r row) storage.Schedule {
	return storage.Schedule{
		ID:            r.str(0),
		Workflow:      r.str(1),
		Cron:          r.str(2),
		TimeZone:      r.str(3),
		Input:         r.bytes(4),
		Queue:         r.str(5),
		Partition:     r.str(6),
		Priority:      int(r.int64(7)),
		Overlap:       storage.OverlapPolicy(r.str(8)),
		CatchUp:       storage.CatchUpPolicy(r.str(9)),
		CatchUpWindow: time.Duration(r.int64(10)),
		Paused:        r.int64(11) != 0,
		NextFireAt:    r.time(12),
		CheckAt:       r.time(13),
		Held:          r.timePtr(14),
		LastFireAt:    r.timePtr(15),
		LastRunID:     r.str(16),
		Revision:      r.int64(17),
		CreatedAt:     r.time(18),
		UpdatedAt:     r.time(19),
	}
}

func getSchedule(c *conn, id string) (storage.Schedule, bool, error) {
	var sc storage.Schedule
	found, err := c.queryRow(`SELECT `+scheduleCols+` FROM schedules WHERE id = ?1`, func(r row) { sc = scanSchedule(r) }, id)
	return sc, found, err
}
