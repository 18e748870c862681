package sqlitestore

import (
	"context"

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
