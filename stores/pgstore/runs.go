package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/stemflow/stem/storage"

	"github.com/jackc/pgx/v5"
)

// CreateRuns inserts the runs with one INSERT ... ON CONFLICT DO NOTHING and
// reads back every requested ID, both in one implicit transaction (one round
// trip). Runs that already existed are reported with Created false.
func (s *Store) CreateRuns(ctx context.Context, runs []storage.NewRun) ([]storage.CreateResult, error) {
	const op = "create runs"
	if err := s.check(op); err != nil {
		return nil, err
	}
	if len(runs) == 0 {
		return []storage.CreateResult{}, nil
	}
	ids := make([]string, len(runs))
	workflows := make([]string, len(runs))
	parents := make([]string, len(runs))
	inputs := make([][]byte, len(runs))
	for i, r := range runs {
		if r.ID == "" || r.Workflow == "" {
			return nil, fmt.Errorf("pgstore: %s: run %d has an empty ID or workflow: %w", op, i, storage.ErrInvalidArgument)
		}
		ids[i], workflows[i], parents[i], inputs[i] = r.ID, r.Workflow, r.ParentID, r.Input
	}
	args := []any{s.clock(), ids, workflows, parents, inputs}
	if s.notify {
		args = append(args, s.channel)
	}
	created := make(map[string]bool, len(runs))
	records := make(map[string]storage.RunRecord, len(runs))
	err := s.retrying(ctx, func() error {
		clear(created)
		clear(records)
		b := &pgx.Batch{}
		b.Queue(s.q.createRuns, args...).Query(func(rows pgx.Rows) error {
			for rows.Next() {
				var id string
				if err := rows.Scan(&id); err != nil {
					return err
				}
				created[id] = true
			}
			return rows.Err()
		})
		b.Queue(s.q.selectRuns, ids).Query(func(rows pgx.Rows) error {
			for rows.Next() {
				rec, err := scanRun(rows)
				if err != nil {
					return err
				}
				records[rec.ID] = rec
			}
			return rows.Err()
		})
		return s.pool.SendBatch(ctx, b).Close()
	})
	if err != nil {
		return nil, s.wrap(op, err)
	}
	out := make([]storage.CreateResult, len(runs))
	for i, id := range ids {
		rec, ok := records[id]
		if !ok {
			return nil, s.wrap(op, fmt.Errorf("run %q vanished after insert", id))
		}
		out[i] = storage.CreateResult{Created: created[id], Run: rec}
		delete(created, id) // a repeated ID in one request is created once
	}
	for _, r := range out {
		if r.Created {
			s.poke()
			break
		}
	}
	return out, nil
}

// GetRun returns a run's record, or ErrRunNotFound.
func (s *Store) GetRun(ctx context.Context, id string) (storage.RunRecord, error) {
	const op = "get run"
	if err := s.check(op); err != nil {
		return storage.RunRecord{}, err
	}
	rec, err := scanRun(s.pool.QueryRow(ctx, s.q.getRun, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return storage.RunRecord{}, fmt.Errorf("pgstore: %s %q: %w", op, id, storage.ErrRunNotFound)
	}
	if err != nil {
		return storage.RunRecord{}, s.wrap(op, err)
	}
	return rec, nil
}

// ListRuns returns a page of runs in ID order. The statement names only the
// filters the query sets, so each shape keeps an index-friendly plan.
func (s *Store) ListRuns(ctx context.Context, q storage.ListRunsQuery) (storage.RunPage, error) {
	const op = "list runs"
	if err := s.check(op); err != nil {
		return storage.RunPage{}, err
	}
	limit := q.Limit
	if limit <= 0 {
		limit = 100
	}
	var (
		where []string
		args  []any
	)
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, fmt.Sprintf(cond, len(args)))
	}
	if q.Workflow != "" {
		add("workflow = $%d", q.Workflow)
	}
	if q.Status != "" {
		add("status = $%d", string(q.Status))
	}
	if q.After != "" {
		add("id > $%d", q.After)
	}
	sql := `SELECT ` + cols("") + ` FROM ` + s.schema + `.runs`
	if len(where) > 0 {
		sql += ` WHERE ` + strings.Join(where, " AND ")
	}
	args = append(args, limit+1)
	sql += fmt.Sprintf(` ORDER BY id LIMIT $%d`, len(args))
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return storage.RunPage{}, s.wrap(op, err)
	}
	var page storage.RunPage
	for rows.Next() {
		rec, err := scanRun(rows)
		if err != nil {
			rows.Close()
			return storage.RunPage{}, s.wrap(op, err)
		}
		page.Runs = append(page.Runs, rec)
	}
	if err := rows.Err(); err != nil {
		return storage.RunPage{}, s.wrap(op, err)
	}
	if len(page.Runs) > limit {
		page.Runs = page.Runs[:limit]
		page.Next = page.Runs[limit-1].ID
	}
	return page, nil
}

// locked is a run read under FOR UPDATE, with the store clock's time.
type locked struct {
	storage.RunRecord
	now time.Time
}

// lock reads and locks a run inside tx; ok is false when no run has the ID.
func (s *Store) lock(ctx context.Context, tx pgx.Tx, id string) (r locked, ok bool, err error) {
	rec, err := scanRun(tx.QueryRow(ctx, s.q.lockRun, s.clock(), id), &r.now)
	if errors.Is(err, pgx.ErrNoRows) {
		return locked{}, false, nil
	}
	if err != nil {
		return locked{}, false, err
	}
	r.RunRecord = rec
	return r, true, nil
}

// lockExisting locks the run like lock, and reports a missing run as
// storage.ErrRunNotFound.
func (s *Store) lockExisting(ctx context.Context, tx pgx.Tx, id string) (locked, error) {
	r, ok, err := s.lock(ctx, tx, id)
	if err == nil && !ok {
		err = fmt.Errorf("run %q: %w", id, storage.ErrRunNotFound)
	}
	return r, err
}

// notifyTx queues a ready notification, sent when tx commits.
func (s *Store) notifyTx(ctx context.Context, tx pgx.Tx) error {
	if !s.notify {
		return nil
	}
	_, err := tx.Exec(ctx, s.q.notify, s.channel)
	return err
}

// Pause pauses a queued or waiting run at once and marks a running run to
// pause at its next step boundary.
func (s *Store) Pause(ctx context.Context, runID string) error {
	const op = "pause"
	if err := s.check(op); err != nil {
		return err
	}
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		r, err := s.lockExisting(ctx, tx, runID)
		if err != nil {
			return err
		}
		var set string
		switch {
		case r.Status.Finished():
			return fmt.Errorf("run %q is %s: %w", runID, r.Status, storage.ErrInvalidState)
		case r.Status == storage.StatusQueued || r.Status == storage.StatusWaiting:
			set = `status = 'paused'`
		case r.Status == storage.StatusRunning:
			if r.PauseRequested {
				return nil
			}
			set = `pause_requested = true`
		default: // paused
			return nil
		}
		_, err = tx.Exec(ctx, `UPDATE `+s.schema+`.runs SET `+set+`, updated_at = $1 WHERE id = $2 AND status = $3`,
			r.now, runID, string(r.Status))
		return err
	})
	return s.wrap(op, err)
}

// Resume undoes Pause.
func (s *Store) Resume(ctx context.Context, runID string) error {
	const op = "resume"
	if err := s.check(op); err != nil {
		return err
	}
	ready := false
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		ready = false
		r, err := s.lockExisting(ctx, tx, runID)
		if err != nil {
			return err
		}
		switch r.Status {
		case storage.StatusPaused:
			status := storage.StatusWaiting
			if r.ReadyAt != nil && !r.ReadyAt.After(r.now) {
				status = storage.StatusQueued
				ready = true
			}
			if _, err := tx.Exec(ctx, `UPDATE `+s.schema+`.runs SET status = $1, pause_requested = false, updated_at = $2
				WHERE id = $3 AND status = 'paused'`, string(status), r.now, runID); err != nil {
				return err
			}
			if ready {
				return s.notifyTx(ctx, tx)
			}
			return nil
		case storage.StatusRunning:
			if !r.PauseRequested {
				return fmt.Errorf("run %q is running and no pause was requested: %w", runID, storage.ErrInvalidState)
			}
			_, err := tx.Exec(ctx, `UPDATE `+s.schema+`.runs SET pause_requested = false, updated_at = $1
				WHERE id = $2 AND status = 'running'`, r.now, runID)
			return err
		default:
			return fmt.Errorf("run %q is %s: %w", runID, r.Status, storage.ErrInvalidState)
		}
	})
	if err != nil {
		return s.wrap(op, err)
	}
	if ready {
		s.poke()
	}
	return nil
}

// Terminate ends an unfinished run and delivers its Notify event.
func (s *Store) Terminate(ctx context.Context, req storage.TerminateRequest) error {
	const op = "terminate"
	if err := s.check(op); err != nil {
		return err
	}
	errJSON, err := encodeError(&req.Error)
	if err != nil {
		return s.wrap(op, err)
	}
	ready := false
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		ready = false
		r, err := s.lockExisting(ctx, tx, req.RunID)
		if err != nil {
			return err
		}
		if r.Status.Finished() {
			return fmt.Errorf("run %q is %s: %w", req.RunID, r.Status, storage.ErrInvalidState)
		}
		if _, err := tx.Exec(ctx, `UPDATE `+s.schema+`.runs SET status = 'terminated', output = NULL, error = $1,
			ready_at = NULL, wait_key = NULL, wait_topic = NULL, wait_kind = NULL, wait_deadline = NULL,
			suspend_state = NULL, pause_requested = false, lease_until = least(lease_until, $2), updated_at = $2
			WHERE id = $3 AND status = $4`, errJSON, r.now, req.RunID, string(r.Status)); err != nil {
			return err
		}
		if req.Notify != nil {
			ready, err = s.deliverNotify(ctx, tx, *req.Notify, r.now)
			return err
		}
		return nil
	})
	if err != nil {
		return s.wrap(op, err)
	}
	if ready {
		s.poke()
	}
	return nil
}

// Restart drops a run's history and queues it to run again from the top.
// The previous lease holder is fenced out: the run is no longer running, and
// the next claim issues a greater token.
func (s *Store) Restart(ctx context.Context, runID string) error {
	const op = "restart"
	if err := s.check(op); err != nil {
		return err
	}
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		r, err := s.lockExisting(ctx, tx, runID)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM `+s.schema+`.checkpoints WHERE run_id = $1`, runID); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM `+s.schema+`.attempts WHERE run_id = $1`, runID); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE `+s.schema+`.runs SET status = 'queued', ready_at = $1,
			output = NULL, error = NULL, wait_key = NULL, wait_topic = NULL, wait_kind = NULL, wait_deadline = NULL,
			suspend_state = NULL, pause_requested = false, lease_until = least(lease_until, $1), recoveries = 0,
			updated_at = $1
			WHERE id = $2`, r.now, runID); err != nil {
			return err
		}
		return s.notifyTx(ctx, tx)
	})
	if err != nil {
		return s.wrap(op, err)
	}
	s.poke()
	return nil
}
