package pgstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/stemflow/stem/storage"
)

// The operator's controls: each locks the run (lockExisting), judges its
// status and writes in one transaction.

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
	if err := req.Validate(); err != nil {
		return fmt.Errorf("pgstore: %w", err)
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
