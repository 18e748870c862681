package sqlitestore

import (
	"context"
	"fmt"

	"github.com/stemflow/stem/storage"
)

// LoadCheckpoints returns every checkpoint of a run in sequence order, or
// storage.ErrRunNotFound.
func (s *Store) LoadCheckpoints(ctx context.Context, runID string) ([]storage.Checkpoint, error) {
	var cps []storage.Checkpoint
	err := s.read(ctx, "load checkpoints", false, func(c *conn) error {
		cps = nil
		if err := c.query(`SELECT `+checkpointCols+` FROM checkpoints WHERE run_ref = (SELECT ref FROM runs WHERE id = ?1) ORDER BY seq`, func(r row) error {
			cps = append(cps, scanCheckpoint(r))
			return nil
		}, runID); err != nil {
			return err
		}
		if len(cps) == 0 {
			return runMustExist(c, runID)
		}
		return nil
	})
	return cps, err
}

// Checkpoint records a step's result under the lease; see storage.Store.
func (s *Store) Checkpoint(ctx context.Context, req storage.CheckpointRequest) (storage.CheckpointResult, error) {
	if err := req.Validate(); err != nil {
		return storage.CheckpointResult{}, fmt.Errorf("sqlitestore: %w", err)
	}
	var res storage.CheckpointResult
	l := req.Lease
	err := s.write(ctx, "checkpoint", func(w *wtx) error {
		res = storage.CheckpointResult{}
		now := s.now()
		n := now.UnixNano()
		until := leaseUntil(now, req.LeaseFor)
		// The fence, and what the write depends on: a requested pause, a
		// wait this checkpoint resolves (an event wait that timed out).
		var pause, resolvesWait bool
		var ref int64
		found, err := w.queryRow(`SELECT pause_requested, wait_key IS ?3, ref FROM runs
			WHERE id = ?1 AND status = 'running' AND token = ?2`,
			func(r row) { pause, resolvesWait, ref = r.int64(0) != 0, r.int64(1) != 0, r.int64(2) },
			l.RunID, l.Token, req.Checkpoint.Key)
		if err != nil {
			return err
		}
		if !found {
			return leaseLost(l)
		}
		written, err := w.insertCheckpoint(ref, &req.Checkpoint, req.Attempts, n)
		if err != nil {
			return err
		}
		if !written {
			// Written before (an event delivered while the worker decided a
			// timeout): extend the lease, nothing more.
			if err := w.extendLease(l.RunID, until, n); err != nil {
				return err
			}
			res.Existing, err = w.loadCheckpoint(ref, req.Checkpoint.Key)
			return err
		}
		switch {
		case pause:
			// The pause takes effect: the run is parked, its lease released.
			_, err = w.exec(`UPDATE runs SET status = 'paused', pause_requested = 0, recoveries = 0,
					ready_at = ?2, updated_at = ?2, `+releaseLease("?2")+`,
					wait_key = iif(?3, NULL, wait_key), wait_topic = iif(?3, NULL, wait_topic),
					wait_kind = iif(?3, NULL, wait_kind), wait_deadline = iif(?3, NULL, wait_deadline)
				WHERE ref = ?1`, ref, n, resolvesWait)
			res.Paused = true
		case resolvesWait:
			_, err = w.exec(`UPDATE runs SET lease_until = ?2, recoveries = 0, updated_at = ?3,
					wait_key = NULL, wait_topic = NULL, wait_kind = NULL, wait_deadline = NULL
				WHERE ref = ?1`, ref, until, n)
		default:
			_, err = w.exec(`UPDATE runs SET lease_until = ?2, recoveries = 0, updated_at = ?3 WHERE ref = ?1`, ref, until, n)
		}
		return err
	})
	if err != nil {
		return storage.CheckpointResult{}, err
	}
	return res, nil
}

// RecordAttempts appends attempts under the lease and extends it.
func (s *Store) RecordAttempts(ctx context.Context, req storage.RecordAttemptsRequest) error {
	if err := req.Validate(); err != nil {
		return fmt.Errorf("sqlitestore: %w", err)
	}
	lease, leaseFor, attempts := req.Lease, req.LeaseFor, req.Attempts
	return s.write(ctx, "record attempts", func(w *wtx) error {
		st, err := w.fence(lease)
		if err != nil {
			return err
		}
		now := s.now()
		if err := w.insertAttempts(st.ref, attempts); err != nil {
			return err
		}
		return w.extendLease(lease.RunID, leaseUntil(now, leaseFor), now.UnixNano())
	})
}

// ListSteps returns a run's checkpoints in sequence order, each with its
// attempts in the order recorded, or storage.ErrRunNotFound.
func (s *Store) ListSteps(ctx context.Context, runID string) ([]storage.StepRecord, error) {
	var steps []storage.StepRecord
	err := s.read(ctx, "list steps", true, func(c *conn) error {
		steps = nil
		index := map[string]int{}
		// Attempts in the order recorded: those recorded on their own
		// before the step's checkpoint, those written with checkpoints,
		// those recorded on their own after it.
		var before, with, after []storage.Attempt
		if err := c.query(`SELECT `+checkpointCols+`, attempts FROM checkpoints WHERE run_ref = (SELECT ref FROM runs WHERE id = ?1) ORDER BY seq`, func(r row) error {
			cp := scanCheckpoint(r)
			index[cp.Key] = len(steps)
			steps = append(steps, storage.StepRecord{Checkpoint: cp})
			as, err := decodeAttempts(r.bytes(7))
			if err != nil {
				return fmt.Errorf("checkpoint %q of run %q: %w", cp.Key, runID, err)
			}
			with = append(with, as...)
			return nil
		}, runID); err != nil {
			return err
		}
		if len(steps) == 0 {
			return runMustExist(c, runID)
		}
		if err := c.query(`SELECT key, number, started_at, ended_at, error, after_checkpoint FROM attempts WHERE run_ref = (SELECT ref FROM runs WHERE id = ?1) ORDER BY id`, func(r row) error {
			a := storage.Attempt{
				Key:     r.str(0),
				Number:  int(r.int64(1)),
				Started: r.time(2),
				Ended:   r.time(3),
				Error:   r.str(4),
			}
			if r.int64(5) != 0 {
				after = append(after, a)
			} else {
				before = append(before, a)
			}
			return nil
		}, runID); err != nil {
			return err
		}
		for _, list := range [][]storage.Attempt{before, with, after} {
			for _, a := range list {
				if i, ok := index[a.Key]; ok { // else: a step with no checkpoint yet
					steps[i].Attempts = append(steps[i].Attempts, a)
				}
			}
		}
		return nil
	})
	return steps, err
}

// checkpointCols are the columns scanCheckpoint reads, from checkpoints.
const checkpointCols = `key, kind, output, error_message, error_code, seq, created_at`

func scanCheckpoint(r row) storage.Checkpoint {
	return storage.Checkpoint{
		Key:       r.str(0),
		Kind:      storage.CheckpointKind(r.str(1)),
		Output:    r.bytes(2),
		Error:     r.errorInfo(3),
		Seq:       r.int64(5),
		CreatedAt: r.time(6),
	}
}

// runMustExist returns storage.ErrRunNotFound when no run has the ID. The
// readers call it when a run's listing came back empty, to tell a run with
// no checkpoints from no run at all.
func runMustExist(c *conn, id string) error {
	found, err := c.queryRow(`SELECT 1 FROM runs WHERE id = ?1`, func(row) {}, id)
	if err == nil && !found {
		err = storage.ErrRunNotFound
	}
	return err
}

// insertCheckpoint writes cp, with the attempts that produced it, unless the
// run has a checkpoint for its key; written reports which.
func (w *wtx) insertCheckpoint(ref int64, cp *storage.Checkpoint, attempts []storage.Attempt, now int64) (written bool, err error) {
	n, err := w.exec(`INSERT INTO checkpoints (run_ref, key, kind, output, error_message, error_code, attempts, created_at)
		VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) ON CONFLICT (run_ref, key) DO NOTHING`,
		ref, cp.Key, string(cp.Kind), bytesArg(cp.Output), errMsg(cp.Error), errCode(cp.Error),
		bytesArg(encodeAttempts(attempts)), now)
	return n == 1, err
}

// loadCheckpoint returns the run's checkpoint for key, or nil.
func (w *wtx) loadCheckpoint(ref int64, key string) (*storage.Checkpoint, error) {
	var cp *storage.Checkpoint
	_, err := w.queryRow(`SELECT `+checkpointCols+` FROM checkpoints WHERE run_ref = ?1 AND key = ?2`, func(r row) {
		c := scanCheckpoint(r)
		cp = &c
	}, ref, key)
	return cp, err
}

// insertAttempts appends attempts recorded on their own, noting for each
// whether its step's checkpoint exists already.
func (w *wtx) insertAttempts(ref int64, attempts []storage.Attempt) error {
	for _, a := range attempts {
		if _, err := w.exec(`INSERT INTO attempts (run_ref, key, number, started_at, ended_at, error, after_checkpoint)
			VALUES (?1, ?2, ?3, ?4, ?5, ?6, EXISTS (SELECT 1 FROM checkpoints WHERE run_ref = ?1 AND key = ?2))`,
			ref, a.Key, a.Number, nanos(a.Started), nanos(a.Ended), a.Error); err != nil {
			return err
		}
	}
	return nil
}
