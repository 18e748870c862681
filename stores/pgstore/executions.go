package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/stemflow/stem/storage"
)

// A run's executions live in the executions table: CreateRuns records the
// first, Complete and Terminate end the current one, and Restart ends it and
// records the next, each in the statement or transaction of the change
// itself. The current execution's end, status and error are read from the
// run.

// ListExecutions returns a run's executions, oldest first, read by one
// statement.
func (s *Store) ListExecutions(ctx context.Context, runID string) ([]storage.ExecutionRecord, error) {
	const op = "list executions"
	if err := s.check(op); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, s.q.executions, runID)
	if err != nil {
		return nil, s.wrap(op, err)
	}
	var (
		out   []storage.ExecutionRecord
		found bool
	)
	err = forRows(rows, func() error {
		found = true
		var (
			number, forkedFrom *int32
			started            *time.Time
			ended              *time.Time
			status, fromKey    *string
			errJSON            []byte
		)
		if err := rows.Scan(&number, &started, &ended, &status, &errJSON, &forkedFrom, &fromKey); err != nil {
			return err
		}
		if number == nil {
			return nil // none recorded
		}
		info, err := decodeError(errJSON)
		if err != nil {
			return err
		}
		e := storage.ExecutionRecord{Number: int(*number), StartedAt: *started, EndedAt: ended, Error: info}
		if status != nil {
			e.Status = storage.RunStatus(*status)
		}
		if forkedFrom != nil {
			e.ForkedFrom = int(*forkedFrom)
		}
		if fromKey != nil {
			e.FromKey = *fromKey
		}
		out = append(out, e)
		return nil
	})
	if err != nil {
		return nil, s.wrap(op, err)
	}
	if !found {
		return nil, fmt.Errorf("pgstore: %s of run %q: %w", op, runID, storage.ErrRunNotFound)
	}
	return out, nil
}
