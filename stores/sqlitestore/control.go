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

// Terminate ends an unfinished run; see storage.Store.
func (s *Store) Terminate(ctx context.Context, req storage.TerminateRequest) error {
	if err := req.Validate(); err != nil {
		return fmt.Errorf("sqlitestore: %w", err)
	}
	return s.write(ctx, "terminate", func(w *wtx) error {
		status, err := w.status(req.RunID)
		if err != nil {
			return err
		}
		if status.Finished() {
			return fmt.Errorf("%w: terminate a %s run", storage.ErrInvalidState, status)
		}
		n := s.now().UnixNano()
		e := req.Error
		if err := w.finish(req.RunID, storage.StatusTerminated, nil, &e, n); err != nil {
			return err
		}
		return w.deliverNotify(req.Notify, n)
	})
}

// Restart drops a run's checkpoints, attempts, wait and suspension state and
// queues it again; see storage.Store.
func (s *Store) Restart(ctx context.Context, runID string) error {
	return s.write(ctx, "restart", func(w *wtx) error {
		if _, err := w.status(runID); err != nil {
			return err
		}
		n := s.now().UnixNano()
		if _, err := w.exec(`DELETE FROM checkpoints WHERE run_ref = (SELECT ref FROM runs WHERE id = ?1)`, runID); err != nil {
			return err
		}
		if _, err := w.exec(`DELETE FROM attempts WHERE run_ref = (SELECT ref FROM runs WHERE id = ?1)`, runID); err != nil {
			return err
		}
		if _, err := w.exec(`UPDATE run_data SET output = NULL, error_message = NULL, error_code = NULL, suspend_state = NULL
			WHERE ref = (SELECT ref FROM runs WHERE id = ?1)`, runID); err != nil {
			return err
		}
		if _, err := w.exec(`UPDATE runs SET status = 'queued', ready_at = ?2, pause_requested = 0, recoveries = 0,
				updated_at = ?2, `+releaseLease("?2")+`,
				wait_key = NULL, wait_topic = NULL, wait_kind = NULL, wait_deadline = NULL
			WHERE id = ?1`, runID, n); err != nil {
			return err
		}
		w.wake = true
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
