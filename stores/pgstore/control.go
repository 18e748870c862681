package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

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

// Terminate ends an unfinished run and its execution, delivers its Notify
// event and, with ChildError, terminates its descendants and requests the
// cancellation of the children cancelled with their parent (see the
// cascade query in queries.go), all in one transaction.
func (s *Store) Terminate(ctx context.Context, req storage.TerminateRequest) ([]string, error) {
	const op = "terminate"
	if err := s.check(op); err != nil {
		return nil, err
	}
	if err := req.Validate(); err != nil {
		return nil, fmt.Errorf("pgstore: %w", err)
	}
	errJSON, err := encodeError(&req.Error)
	if err != nil {
		return nil, s.wrap(op, err)
	}
	childJSON, err := encodeError(req.ChildError)
	if err != nil {
		return nil, s.wrap(op, err)
	}
	var (
		ready bool
		ids   []string
	)
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		ready, ids = false, nil
		r, err := s.lockExisting(ctx, tx, req.RunID)
		if err != nil {
			return err
		}
		if r.Status.Finished() {
			return fmt.Errorf("run %q is %s: %w", req.RunID, r.Status, storage.ErrInvalidState)
		}
		rows, err := tx.Query(ctx, s.q.terminate, r.now, req.RunID, errJSON)
		if err != nil {
			return err
		}
		if ids, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
			return err
		}
		if len(ids) != 1 {
			return fmt.Errorf("run %q was not terminated", req.RunID)
		}
		children, woke, err := s.terminateChildren(ctx, tx, r.now, req.RunID, childJSON, req.ChildCancel)
		if err != nil {
			return err
		}
		ids = append(ids, children...)
		if err := s.notifyFinishedTx(ctx, tx, ids); err != nil {
			return err
		}
		if req.Notify != nil {
			if ready, err = s.deliverNotify(ctx, tx, *req.Notify, r.now); err != nil {
				return err
			}
		}
		if woke && !ready {
			ready = true
			return s.notifyTx(ctx, tx)
		}
		return nil
	})
	if err != nil {
		return nil, s.wrap(op, err)
	}
	if ready {
		s.poke()
	}
	return ids, nil
}

// closeChildren applies the parent-close policy to the children of root,
// which ends in tx (see terminateChildren), announces the runs it ended,
// and reports whether it made one ready.
func (s *Store) closeChildren(ctx context.Context, tx pgx.Tx, now time.Time, root string, childJSON []byte, reason string) (woke bool, err error) {
	children, woke, err := s.terminateChildren(ctx, tx, now, root, childJSON, reason)
	if err != nil {
		return false, err
	}
	return woke, s.notifyFinishedTx(ctx, tx, children)
}

// terminateChildren terminates in tx, at now, with the error childJSON
// (JSON; nil changes nothing), the unfinished descendants of run root
// that terminate with their parent, and requests with reason the
// cancellation of the children cancelled with their parent (see the
// cascade query in queries.go). It returns the IDs it terminated, which
// the caller announces (notifyFinishedTx), and whether a run it cancelled
// became ready now, which the caller announces too (notifyTx).
func (s *Store) terminateChildren(ctx context.Context, tx pgx.Tx, now time.Time, root string, childJSON []byte,
	reason string) (ids []string, woke bool, err error) {
	if childJSON == nil {
		return nil, false, nil
	}
	rows, err := tx.Query(ctx, s.q.cascade, now, root, string(childJSON), reason)
	if err != nil {
		return nil, false, err
	}
	err = forRows(rows, func() error {
		var (
			id     string
			cancel bool
		)
		if err := rows.Scan(&id, &cancel); err != nil {
			return err
		}
		if cancel {
			woke = true
		} else {
			ids = append(ids, id)
		}
		return nil
	})
	return ids, woke, err
}

// Cancel requests a run's cancellation, which its workflow handles: the
// first request wins. A waiting run becomes ready now, and is announced.
func (s *Store) Cancel(ctx context.Context, req storage.CancelRequest) error {
	const op = "cancel"
	if err := s.check(op); err != nil {
		return err
	}
	if err := req.Validate(); err != nil {
		return fmt.Errorf("pgstore: %w", err)
	}
	ready := false
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		ready = false
		r, err := s.lockExisting(ctx, tx, req.RunID)
		if err != nil {
			return err
		}
		switch {
		case r.Status.Finished():
			return fmt.Errorf("run %q is %s: %w", req.RunID, r.Status, storage.ErrInvalidState)
		case r.CancelRequested:
			return nil
		}
		var status string
		if err := tx.QueryRow(ctx, s.q.cancel, r.now, r.ID, req.Reason).Scan(&status); err != nil {
			return err
		}
		if r.Status == storage.StatusWaiting && status == string(storage.StatusQueued) {
			ready = true
			return s.notifyTx(ctx, tx)
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

// Restart ends the run's current execution and queues it to run again in
// the next one, from the top or, with FromKey, from that step with copies of
// the checkpoints written before it. The previous lease holder is fenced
// out: the run is no longer running, and the next claim issues a greater
// token. With IfExecution, the run read under its lock, before anything is
// written, must be in that execution, or the restart is ErrConflict: the
// lock makes the judgement and the write one change. The run's search
// attributes stay as they are.
func (s *Store) Restart(ctx context.Context, req storage.RestartRequest) error {
	const op = "restart"
	if err := s.check(op); err != nil {
		return err
	}
	if err := req.Validate(); err != nil {
		return fmt.Errorf("pgstore: %w", err)
	}
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		r, err := s.lockExisting(ctx, tx, req.RunID)
		if err != nil {
			return err
		}
		if req.IfExecution > 0 && r.Execution != req.IfExecution {
			return fmt.Errorf("run %q is in execution %d, not %d: %w", r.ID, r.Execution, req.IfExecution, storage.ErrConflict)
		}
		var fork *int64
		if req.FromKey != "" {
			var seq int64
			err := tx.QueryRow(ctx, s.q.forkSeq, r.ID, r.Execution, req.FromKey).Scan(&seq)
			if errors.Is(err, pgx.ErrNoRows) {
				return fmt.Errorf("run %q: restart from step %q: no checkpoint of the key in execution %d: %w",
					r.ID, req.FromKey, r.Execution, storage.ErrInvalidArgument)
			}
			if err != nil {
				return err
			}
			fork = &seq
		}
		if _, err := tx.Exec(ctx, s.q.restart, r.now, r.ID, fork, req.FromKey, storage.UpdateTopicPrefix); err != nil {
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
