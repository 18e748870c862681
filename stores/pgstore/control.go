package pgstore

import (
	"context"
	"errors"
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

// Terminate ends an unfinished run and its execution, delivers its Notify
// event and, with ChildError, terminates its descendants (see the cascade
// query in queries.go), all in one transaction.
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
		if childJSON != nil {
			rows, err := tx.Query(ctx, s.q.cascade, r.now, req.RunID, childJSON)
			if err != nil {
				return err
			}
			children, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				return err
			}
			ids = append(ids, children...)
		}
		if err := s.notifyFinishedTx(ctx, tx, ids); err != nil {
			return err
		}
		if req.Notify != nil {
			ready, err = s.deliverNotify(ctx, tx, *req.Notify, r.now)
			return err
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

// Restart ends the run's current execution and queues it to run again in
// the next one, from the top or, with FromKey, from that step with copies of
// the checkpoints written before it. The previous lease holder is fenced
// out: the run is no longer running, and the next claim issues a greater
// token.
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
		if _, err := tx.Exec(ctx, s.q.restart, r.now, r.ID, fork, req.FromKey); err != nil {
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
