package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stemflow/stem/storage"
)

// A run's executions live in the executions table: CreateRuns records the
// first, Complete and Terminate end the current one, and Restart and
// ContinueAsNew end it and record the next, each in the statement or
// transaction of the change itself. The current execution's end, status
// and error are read from the run. Checkpoints and attempts are keyed by
// execution first, so reading one execution's costs the same however many
// came before it.

// ContinueAsNew ends the current execution as continued and begins the
// next with req.Input, fenced by the lease, in one statement; see the
// continueAsNew query in queries.go. A lease that does not hold says why,
// judged by a second statement, with nothing written. With req.ChildError
// the statement runs in a transaction that applies the parent policy of
// the run's descendants too (continueWithChildren).
func (s *Store) ContinueAsNew(ctx context.Context, req storage.ContinueRequest) error {
	const op = "continue as new"
	if err := s.check(op); err != nil {
		return err
	}
	if err := req.Validate(); err != nil {
		return fmt.Errorf("pgstore: %w", err)
	}
	l := req.Lease
	if req.ChildError != nil {
		return s.continueWithChildren(ctx, req)
	}
	var status string
	err := s.pool.QueryRow(ctx, s.q.continueAsNew, s.continueArgs(s.clock(), req)...).Scan(&status)
	if errors.Is(err, pgx.ErrNoRows) {
		return s.lost(ctx, op, l)
	}
	if err != nil {
		return s.wrap(op, err)
	}
	if status == string(storage.StatusQueued) {
		s.poke()
	}
	return nil
}

// continueArgs are the arguments of the continueAsNew query for req at
// now (nil: the database's clock).
func (s *Store) continueArgs(now any, req storage.ContinueRequest) []any {
	args := []any{now, req.Lease.RunID, req.Lease.Token, req.Input, req.Progress}
	if s.notify {
		args = append(args, s.channel)
	}
	return args
}

// continueWithChildren is ContinueAsNew with req.ChildError: one
// transaction locks the run, checks the lease, runs the continueAsNew
// query and applies the parent policy of the run's descendants with the
// cascade Complete uses (terminateChildren).
func (s *Store) continueWithChildren(ctx context.Context, req storage.ContinueRequest) error {
	const op = "continue as new"
	childJSON, err := encodeError(req.ChildError)
	if err != nil {
		return s.wrap(op, err)
	}
	ready := false
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		ready = false
		r, err := s.fenced(ctx, tx, op, req.Lease)
		if err != nil {
			return err
		}
		var status string
		err = tx.QueryRow(ctx, s.q.continueAsNew, s.continueArgs(r.now, req)...).Scan(&status)
		if errors.Is(err, pgx.ErrNoRows) {
			return leaseLost(op, req.Lease)
		}
		if err != nil {
			return err
		}
		ready = status == string(storage.StatusQueued)
		woke, err := s.closeChildren(ctx, tx, r.now, r.ID, childJSON, req.ChildCancel)
		if err != nil {
			return err
		}
		if woke && !ready {
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
