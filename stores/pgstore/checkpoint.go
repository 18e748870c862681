package pgstore

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stemflow/stem/storage"
)

// LoadCheckpoints returns a run's checkpoints in sequence order, or
// ErrRunNotFound.
func (s *Store) LoadCheckpoints(ctx context.Context, runID string) ([]storage.Checkpoint, error) {
	const op = "load checkpoints"
	if err := s.check(op); err != nil {
		return nil, err
	}
	var (
		cps   []storage.Checkpoint
		found bool
	)
	rows, err := s.pool.Query(ctx, s.q.loadCheckpoint, runID)
	if err != nil {
		return nil, s.wrap(op, err)
	}
	cps, found, err = collectCheckpoints(rows)
	if err != nil {
		return nil, s.wrap(op, err)
	}
	if !found {
		return nil, fmt.Errorf("pgstore: %s of run %q: %w", op, runID, storage.ErrRunNotFound)
	}
	return cps, nil
}

// collectCheckpoints reads the loadCheckpoint query's rows: found is false
// when there were none (no such run).
func collectCheckpoints(rows pgx.Rows) (cps []storage.Checkpoint, found bool, err error) {
	defer rows.Close()
	for rows.Next() {
		found = true
		var (
			key, kind *string
			output    []byte
			errJSON   []byte
			seq       *int64
			created   *time.Time
		)
		if err := rows.Scan(&key, &kind, &output, &errJSON, &seq, &created); err != nil {
			return nil, false, err
		}
		if key == nil {
			continue // the run has no checkpoints
		}
		info, err := decodeError(errJSON)
		if err != nil {
			return nil, false, err
		}
		cps = append(cps, storage.Checkpoint{
			Key: *key, Kind: storage.CheckpointKind(*kind), Output: output, Error: info, Seq: *seq, CreatedAt: *created,
		})
	}
	return cps, found, rows.Err()
}

// Checkpoint records a step's result under the lease: fence, write-once
// insert, attempts, lease extension and the pause hand-off, in one statement
// shared with the other runs' checkpoints queued at the same moment (see
// writer.go).
func (s *Store) Checkpoint(ctx context.Context, req storage.CheckpointRequest) (storage.CheckpointResult, error) {
	const op = "checkpoint"
	if err := s.check(op); err != nil {
		return storage.CheckpointResult{}, err
	}
	if err := req.Validate(); err != nil {
		return storage.CheckpointResult{}, fmt.Errorf("pgstore: %w", err)
	}
	errJSON, err := encodeError(req.Checkpoint.Error)
	if err != nil {
		return storage.CheckpointResult{}, s.wrap(op, err)
	}
	call := &ckptCall{req: req, done: make(chan struct{})}
	if errJSON != nil {
		str := string(errJSON)
		call.errJSON = &str
	}
	if call.attempts, err = encodeAttempts(req.Attempts); err != nil {
		return storage.CheckpointResult{}, s.wrap(op, err)
	}
	return s.submit(ctx, call)
}

// RecordAttempts appends attempts under the lease and extends it, in one
// statement.
func (s *Store) RecordAttempts(ctx context.Context, req storage.RecordAttemptsRequest) error {
	const op = "record attempts"
	if err := s.check(op); err != nil {
		return err
	}
	if err := req.Validate(); err != nil {
		return fmt.Errorf("pgstore: %w", err)
	}
	lease := req.Lease
	args := append([]any{s.clock(), lease.RunID, lease.Token, micros(req.LeaseFor)}, attemptArrays(req.Attempts)...)
	var n int
	if err := s.pool.QueryRow(ctx, s.q.recordAttempts, args...).Scan(&n); err != nil {
		return s.wrap(op, err)
	}
	if n == 0 {
		return leaseLost(op, lease)
	}
	return nil
}

// ListSteps returns a run's checkpoints in sequence order, each with its
// attempts in the order recorded: those recorded apart (failures before a
// retry) and those stored with a checkpoint, merged by the one sequence that
// orders both. Both are read in one implicit transaction.
func (s *Store) ListSteps(ctx context.Context, runID string) ([]storage.StepRecord, error) {
	const op = "list steps"
	if err := s.check(op); err != nil {
		return nil, err
	}
	type seqAttempt struct {
		seq int64
		storage.Attempt
	}
	var (
		steps []storage.StepRecord
		found bool
		all   []seqAttempt
	)
	b := &pgx.Batch{}
	b.Queue(s.q.listSteps, runID).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			found = true
			var (
				key, kind *string
				output    []byte
				errJSON   []byte
				seq       *int64
				created   *time.Time
				attJSON   []byte
			)
			if err := rows.Scan(&key, &kind, &output, &errJSON, &seq, &created, &attJSON); err != nil {
				return err
			}
			if key == nil {
				continue // the run has no checkpoints
			}
			info, err := decodeError(errJSON)
			if err != nil {
				return err
			}
			as, err := decodeAttempts(attJSON)
			if err != nil {
				return err
			}
			for _, a := range as {
				all = append(all, seqAttempt{*seq, a})
			}
			steps = append(steps, storage.StepRecord{Checkpoint: storage.Checkpoint{
				Key: *key, Kind: storage.CheckpointKind(*kind), Output: output, Error: info, Seq: *seq, CreatedAt: *created,
			}})
		}
		return rows.Err()
	})
	b.Queue(s.q.listAttempts, runID).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var (
				a seqAttempt
				n int32
			)
			if err := rows.Scan(&a.seq, &a.Key, &n, &a.Started, &a.Ended, &a.Error); err != nil {
				return err
			}
			a.Number = int(n)
			all = append(all, a)
		}
		return rows.Err()
	})
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return nil, s.wrap(op, err)
	}
	if !found {
		return nil, fmt.Errorf("pgstore: %s of run %q: %w", op, runID, storage.ErrRunNotFound)
	}
	if len(steps) == 0 {
		return nil, nil
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].seq < all[j].seq })
	byKey := make(map[string][]storage.Attempt)
	for _, a := range all {
		byKey[a.Key] = append(byKey[a.Key], a.Attempt)
	}
	for i := range steps {
		steps[i].Attempts = byKey[steps[i].Key]
	}
	return steps, nil
}
