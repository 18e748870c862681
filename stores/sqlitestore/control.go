package sqlitestore

import (
	"context"
	"fmt"

	"github.com/stemflow/stem/storage"
)

// Pause pauses a run; see storage.Store.
func (s *Store) Pause(ctx context.Context, runID string) error {
	return s.write(ctx, "pause", func(w *wtx) error {
		status, err := w.status(runID)
		if err != nil {
			return err
		}
		n := s.now().UnixNano()
		switch status {
		case storage.StatusQueued, storage.StatusWaiting:
			_, err = w.exec(`UPDATE runs SET status = 'paused', updated_at = ?2 WHERE id = ?1`, runID, n)
		case storage.StatusRunning:
			_, err = w.exec(`UPDATE runs SET pause_requested = 1, updated_at = ?2 WHERE id = ?1 AND NOT pause_requested`, runID, n)
		case storage.StatusPaused:
		default:
			err = fmt.Errorf("%w: pause a %s run", storage.ErrInvalidState, status)
		}
		return err
	})
}

// Resume undoes Pause; see storage.Store.
func (s *Store) Resume(ctx context.Context, runID string) error {
	return s.write(ctx, "resume", func(w *wtx) error {
		status, err := w.status(runID)
		if err != nil {
			return err
		}
		n := s.now().UnixNano()
		switch status {
		case storage.StatusPaused:
			_, err = w.exec(`UPDATE runs SET status = iif(ready_at <= ?2, 'queued', 'waiting'), updated_at = ?2 WHERE id = ?1`, runID, n)
			w.wake = true
		case storage.StatusRunning:
			var changed int64
			changed, err = w.exec(`UPDATE runs SET pause_requested = 0, updated_at = ?2 WHERE id = ?1 AND pause_requested`, runID, n)
			if err == nil && changed == 0 {
				err = fmt.Errorf("%w: resume a running run with no pause requested", storage.ErrInvalidState)
			}
		default:
			err = fmt.Errorf("%w: resume a %s run", storage.ErrInvalidState, status)
		}
		return err
	})
}

// Terminate ends an unfinished run and, with req.ChildError, its
// unfinished descendants that terminate with their parent, and requests
// the cancellation of the children cancelled with their parent; see
// storage.Store.
func (s *Store) Terminate(ctx context.Context, req storage.TerminateRequest) ([]string, error) {
	if err := req.Validate(); err != nil {
		return nil, fmt.Errorf("sqlitestore: %w", err)
	}
	var ids []string
	err := s.write(ctx, "terminate", func(w *wtx) (err error) {
		ids, err = w.terminate(req, s.now().UnixNano())
		return err
	})
	if err != nil {
		return nil, err
	}
	return ids, nil
}

// terminate is Terminate in the writing transaction, at now: it returns
// the IDs of the runs it ended, req.RunID first. A create that replaces an
// unfinished run terminates it with it.
func (w *wtx) terminate(req storage.TerminateRequest, now int64) ([]string, error) {
	status, err := w.status(req.RunID)
	if err != nil {
		return nil, err
	}
	if status.Finished() {
		return nil, fmt.Errorf("%w: terminate a %s run", storage.ErrInvalidState, status)
	}
	e := req.Error
	if err := w.finish(req.RunID, storage.StatusTerminated, nil, &e, nil, false, now); err != nil {
		return nil, err
	}
	children, err := w.terminateChildren(req.RunID, req.ChildError, req.ChildCancel, now)
	if err != nil {
		return nil, err
	}
	if err := w.deliverNotify(req.Notify, now); err != nil {
		return nil, err
	}
	return append([]string{req.RunID}, children...), nil
}

// terminateChildren terminates with e, at now, the unfinished descendants
// of run root that terminate with their parent (see descendantsQuery),
// requests with reason the cancellation of the unfinished children of
// those and of root that are cancelled with their parent (see
// cancelChildrenQuery), and returns the IDs it terminated; a nil e changes
// nothing.
func (w *wtx) terminateChildren(root string, e *storage.ErrorInfo, reason string, now int64) ([]string, error) {
	if e == nil {
		return nil, nil
	}
	if err := w.cancelChildren(root, reason, now); err != nil {
		return nil, err
	}
	var children []string
	if err := w.query(descendantsQuery, func(r row) error {
		children = append(children, r.str(0))
		return nil
	}, root); err != nil {
		return nil, err
	}
	for _, id := range children {
		if err := w.finish(id, storage.StatusTerminated, nil, e, nil, false, now); err != nil {
			return nil, err
		}
	}
	return children, nil
}

// descendantsQuery selects the unfinished descendants of run ?1 reached
// through children that terminate with their parent (an abandoning child
// and everything under it are left out; a finished child does not stop the
// walk), nearest first, then by ID. Each run has one parent, so the walk
// meets a run at most once, unless the parents loop back to ?1 itself,
// which is left out.
const descendantsQuery = `WITH RECURSIVE tree (id, depth, finished) AS (
		SELECT id, 1, status IN ('complete', 'errored', 'terminated') FROM runs
			WHERE parent_id = ?1 AND parent_policy = '' AND id != ?1
		UNION ALL
		SELECT r.id, t.depth + 1, r.status IN ('complete', 'errored', 'terminated') FROM tree t JOIN runs r ON r.parent_id = t.id
			WHERE r.parent_policy = '' AND r.id != ?1
	)
	SELECT id FROM tree WHERE NOT finished ORDER BY depth, id`

// cancelChildren requests with reason, at now, the cancellation of the
// unfinished children of run root and of its descendants that terminate
// with their parent, when they are cancelled with their parent (see
// cancelChildrenQuery).
func (w *wtx) cancelChildren(root, reason string, now int64) error {
	var ids []string
	if err := w.query(cancelChildrenQuery, func(r row) error {
		ids = append(ids, r.str(0))
		return nil
	}, root); err != nil {
		return err
	}
	for _, id := range ids {
		if err := w.requestCancel(id, reason, now); err != nil {
			return err
		}
	}
	return nil
}

// cancelChildrenQuery selects, by ID, the unfinished runs cancelled with
// their parent whose parent is run ?1 or one of the descendants of ?1
// that descendantsQuery walks (finished ones too): the children whose
// cancellation the end of ?1 requests. Their own children are left to
// their ending.
const cancelChildrenQuery = `WITH RECURSIVE tree (id) AS (
		SELECT ?1
		UNION
		SELECT r.id FROM tree t JOIN runs r ON r.parent_id = t.id
			WHERE r.parent_policy = '' AND r.id != ?1
	)
	SELECT r.id FROM tree t JOIN runs r ON r.parent_id = t.id
	WHERE r.parent_policy = 'cancel' AND r.id != ?1 AND r.status NOT IN ('complete', 'errored', 'terminated')
	ORDER BY r.id`

// Cancel requests a run's cancellation; the first request wins. See
// storage.Store.
func (s *Store) Cancel(ctx context.Context, req storage.CancelRequest) error {
	if err := req.Validate(); err != nil {
		return fmt.Errorf("sqlitestore: %w", err)
	}
	return s.write(ctx, "cancel", func(w *wtx) error {
		status, err := w.status(req.RunID)
		if err != nil {
			return err
		}
		if status.Finished() {
			return fmt.Errorf("%w: cancel a %s run", storage.ErrInvalidState, status)
		}
		return w.requestCancel(req.RunID, req.Reason, s.now().UnixNano())
	})
}

// requestCancel records with reason, at now, the cancellation of the
// unfinished run id, unless one is recorded already: a waiting run not
// held becomes queued, ready now (its wait stays registered), and a paused
// one not held is ready now, for when it is resumed.
func (w *wtx) requestCancel(id, reason string, now int64) error {
	var status string
	found, err := w.queryRow(`UPDATE runs SET cancel_reason = ?2, updated_at = ?3,
			status = iif(status = 'waiting' AND hold IS NULL, 'queued', status),
			ready_at = iif(status IN ('waiting', 'paused') AND hold IS NULL, ?3, ready_at)
		WHERE id = ?1 AND cancel_reason IS NULL AND status NOT IN ('complete', 'errored', 'terminated')
		RETURNING status`, func(r row) { status = r.str(0) }, id, reason, now)
	if err == nil && found && status == string(storage.StatusQueued) {
		w.wake = true
	}
	return err
}

// Restart begins a run's next execution, from the top or, with
// req.FromKey, with copies of the checkpoints written before that key's
// (their inputs too); see storage.Store. With req.IfExecution it is
// storage.ErrConflict, nothing written, unless the run is in that
// execution. The run's search attributes stay as they are.
func (s *Store) Restart(ctx context.Context, req storage.RestartRequest) error {
	if err := req.Validate(); err != nil {
		return fmt.Errorf("sqlitestore: %w", err)
	}
	return s.write(ctx, "restart", func(w *wtx) error {
		var ref, exec, until int64
		var status string
		var updates bool
		// Whether the run has updates is one probe of their primary key.
		found, err := w.queryRow(`SELECT ref, execution, status, coalesce(lease_until, 0),
				EXISTS (SELECT 1 FROM updates u WHERE u.run_ref = runs.ref)
			FROM runs WHERE id = ?1`, func(r row) {
			ref, exec, status, until, updates = r.int64(0), r.int64(1), r.str(2), r.int64(3), r.int64(4) != 0
		}, req.RunID)
		if err != nil {
			return err
		}
		if !found {
			return storage.ErrRunNotFound
		}
		if req.IfExecution > 0 && int64(req.IfExecution) != exec {
			return fmt.Errorf("restart run %q: %w: its current execution is %d, not %d", req.RunID, storage.ErrConflict, exec, req.IfExecution)
		}
		n := s.now().UnixNano()
		next := exec + 1
		var forkedFrom int64
		if req.FromKey != "" {
			var seq int64
			found, err := w.queryRow(`SELECT seq FROM checkpoints WHERE run_ref = ?1 AND execution = ?2 AND key = ?3`,
				func(r row) { seq = r.int64(0) }, ref, exec, req.FromKey)
			if err != nil {
				return err
			}
			if !found {
				return fmt.Errorf("%w: restart run %q from step %q: execution %d has no checkpoint of it", storage.ErrInvalidArgument, req.RunID, req.FromKey, exec)
			}
			// The copies get new sequence numbers, in the same order.
			if _, err := w.exec(`INSERT INTO checkpoints (run_ref, execution, key, kind, output, error_message, error_code, forked_from, created_at, input)
				SELECT run_ref, ?3, key, kind, output, error_message, error_code, execution, created_at, input FROM checkpoints
				WHERE run_ref = ?1 AND execution = ?2 AND seq < ?4 ORDER BY seq`, ref, exec, next, seq); err != nil {
				return err
			}
			forkedFrom = exec
		}
		if updates {
			if err := w.rebuffer(ref, next, n); err != nil {
				return err
			}
		}
		// The current execution ends now with the run's status, unless it
		// ended already (a finished run).
		if _, err := w.exec(`UPDATE executions SET ended_at = ?3, status = ?4 WHERE run_ref = ?1 AND number = ?2 AND ended_at IS NULL`,
			ref, exec, n, status); err != nil {
			return err
		}
		if _, err := w.exec(`INSERT INTO executions (run_ref, number, started_at, forked_from, from_key) VALUES (?1, ?2, ?3, ?4, ?5)`,
			ref, next, n, forkedFrom, req.FromKey); err != nil {
			return err
		}
		if _, err := w.exec(`UPDATE run_data SET output = NULL, error_message = NULL, error_code = NULL, suspend_state = NULL,
				progress = NULL
			WHERE ref = ?1`, ref); err != nil {
			return err
		}
		// A live lease fences the new execution until it expires or its
		// holder lets go (Suspend); only a running run or one restarted
		// under a live lease has a lease that has not expired. The lease
		// is kept, to be judged.
		readyAt := max(n, until)
		// The new execution's first claim is a start again (a queue's
		// rate counts it), the run is unfinished, and its cancellation is
		// no longer requested.
		if _, err := w.exec(`UPDATE runs SET execution = ?3, status = 'queued', ready_at = ?4, pause_requested = 0, recoveries = 0,
				cancel_reason = NULL,
				first_claimed_at = NULL, ended_at = NULL, updated_at = ?2, `+clearActive+`, `+clearWait+`
			WHERE ref = ?1`, ref, n, next, readyAt); err != nil {
			return err
		}
		// Only ever set: another request of the batch may have set it.
		if readyAt == n {
			w.wake = true
		}
		return nil
	})
}

// status returns a run's status, or storage.ErrRunNotFound.
func (w *wtx) status(runID string) (storage.RunStatus, error) {
	var status storage.RunStatus
	found, err := w.queryRow(`SELECT status FROM runs WHERE id = ?1`, func(r row) { status = storage.RunStatus(r.str(0)) }, runID)
	if err == nil && !found {
		err = storage.ErrRunNotFound
	}
	return status, err
}
