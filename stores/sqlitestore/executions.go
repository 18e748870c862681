package sqlitestore

import (
	"context"
	"fmt"

	"github.com/stemflow/stem/storage"
)

// ListExecutions returns a run's executions, oldest first, or
// storage.ErrRunNotFound. The current execution reports the run's status
// and error; an earlier one those it ended with.
func (s *Store) ListExecutions(ctx context.Context, runID string) ([]storage.ExecutionRecord, error) {
	var out []storage.ExecutionRecord
	err := s.read(ctx, "list executions", false, func(c *conn) error {
		out = nil
		if err := c.query(`SELECT e.number, e.started_at, e.ended_at,
				iif(e.number = r.execution, r.status, e.status),
				iif(e.number = r.execution, d.error_message, e.error_message),
				iif(e.number = r.execution, d.error_code, e.error_code),
				e.forked_from, e.from_key
			FROM runs r JOIN run_data d ON d.ref = r.ref JOIN executions e ON e.run_ref = r.ref
			WHERE r.id = ?1 ORDER BY e.number`, func(r row) error {
			out = append(out, storage.ExecutionRecord{
				Number:     int(r.int64(0)),
				StartedAt:  r.time(1),
				EndedAt:    r.timePtr(2),
				Status:     storage.RunStatus(r.str(3)),
				Error:      r.errorInfo(4),
				ForkedFrom: int(r.int64(6)),
				FromKey:    r.str(7),
			})
			return nil
		}, runID); err != nil {
			return err
		}
		if len(out) == 0 {
			// Every run has an execution from its creation on.
			return storage.ErrRunNotFound
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ContinueAsNew ends the run's current execution with StatusContinued and
// begins the next with req.Input and nothing else, fenced by the lease; see
// storage.Store. The ended execution's checkpoints and attempts stay where
// they are, under its number: every read of a run's replay or steps picks
// one execution by the indexes that lead with (run, execution), so the
// executions before cost the new one nothing. With req.ChildError the
// run's descendants meet their parent policy in the same change, as in
// Complete.
func (s *Store) ContinueAsNew(ctx context.Context, req storage.ContinueRequest) error {
	if err := req.Validate(); err != nil {
		return fmt.Errorf("sqlitestore: %w", err)
	}
	l := req.Lease
	return s.write(ctx, "continue as new", func(w *wtx) error {
		now := s.now()
		st, err := w.fenceAt(l, now)
		if err != nil {
			return err
		}
		n := now.UnixNano()
		next := st.execution + 1
		if _, err := w.exec(`UPDATE executions SET ended_at = ?3, status = ?4 WHERE run_ref = ?1 AND number = ?2`,
			st.ref, st.execution, n, string(storage.StatusContinued)); err != nil {
			return err
		}
		if _, err := w.exec(`INSERT INTO executions (run_ref, number, started_at) VALUES (?1, ?2, ?3)`, st.ref, next, n); err != nil {
			return err
		}
		if _, err := w.exec(`UPDATE run_data SET input = ?2, output = NULL, error_message = NULL, error_code = NULL,
				suspend_state = NULL, progress = coalesce(?3, progress)
			WHERE ref = ?1`, st.ref, bytesArg(req.Input), bytesArg(req.Progress)); err != nil {
			return err
		}
		// The lease ends now (owner and token keep describing it, so the
		// next claim's token is greater); a pause requested meanwhile
		// takes effect.
		status := storage.StatusQueued
		if st.pauseRequested {
			status = storage.StatusPaused
		}
		if _, err := w.exec(`UPDATE runs SET execution = ?2, status = ?3, ready_at = ?4, pause_requested = 0, recoveries = 0,
				updated_at = ?4, `+releaseLease("?4")+`, `+clearActive+`, `+clearWait+`
			WHERE ref = ?1`, st.ref, next, string(status), n); err != nil {
			return err
		}
		if status == storage.StatusQueued {
			w.wake = true
		}
		_, err = w.terminateChildren(l.RunID, req.ChildError, req.ChildCancel, n)
		return err
	})
}
