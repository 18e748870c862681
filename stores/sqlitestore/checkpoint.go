package sqlitestore

import (
	"context"
	"fmt"
	"time"

	"github.com/stemflow/stem/storage"
)

// LoadReplay returns the run's current execution, its checkpoints in
// sequence order and the attempts of its keys without a checkpoint, or
// storage.ErrRunNotFound. It is one statement, so it reads one state of the
// database without a read transaction.
func (s *Store) LoadReplay(ctx context.Context, runID string) (storage.Replay, error) {
	var rp storage.Replay
	err := s.read(ctx, "load replay", false, func(c *conn) error {
		var found bool
		var err error
		rp, found, _, err = readReplay(c, runID, 0)
		if err == nil && !found {
			err = storage.ErrRunNotFound
		}
		return err
	})
	return rp, err
}

// readReplay reads run runID's replay on c (replayQuery); found is false
// when there is no such run. With a budget above zero it stops, complete
// false, once the rows read pass that many bytes (their payloads and
// keys, and replayRowBytes each), leaving the rest unread.
func readReplay(c *conn, runID string, budget int) (rp storage.Replay, found, complete bool, err error) {
	used := 0
	err = c.query(replayQuery, func(r row) error {
		found = true
		rp.Execution = int(r.int64(0))
		switch {
		case r.isNull(2): // the run, with no checkpoint
			return nil
		case r.int64(1) == 0:
			cp := scanCheckpoint(r[3:])
			rp.Checkpoints = append(rp.Checkpoints, cp)
			used += len(cp.Output) + len(cp.Key)
			if cp.Error != nil {
				used += len(cp.Error.Message)
			}
		default:
			a := scanAttempt(r[3:])
			rp.Pending = append(rp.Pending, a)
			used += len(a.Key) + len(a.Error)
		}
		if used += replayRowBytes; budget > 0 && used > budget {
			return errStopRows
		}
		return nil
	}, runID)
	if err == errStopRows {
		return storage.Replay{}, found, false, nil
	}
	return rp, found, err == nil, err
}

// replayRowBytes is what readReplay counts for a row besides its payload
// and key.
const replayRowBytes = 64

// replayQuery selects, after the run's execution, a part (0: checkpoints,
// 1: pending attempts) and an order within it, the columns scanCheckpoint
// or scanAttempt reads. A run with no checkpoint has one row of part 0 with
// NULL order.
const replayQuery = `SELECT r.execution, 0, c.seq, ` + checkpointColsC + `
	FROM runs r LEFT JOIN checkpoints c ON c.run_ref = r.ref AND c.execution = r.execution
	WHERE r.id = ?1
UNION ALL
SELECT r.execution, 1, a.id, ` + attemptColsA + `, NULL, NULL
	FROM runs r JOIN attempts a ON a.run_ref = r.ref AND a.execution = r.execution
	WHERE r.id = ?1 AND NOT EXISTS (SELECT 1 FROM checkpoints c
		WHERE c.run_ref = a.run_ref AND c.execution = a.execution AND c.key = a.key)
ORDER BY 2, 3`

// Checkpoint records a step's result, with its call's input, under the
// lease; see storage.Store. The search attributes it sets, a reply and
// stream writes ride with it when it is written. A completion that rides
// with it (req.Complete) finishes the run in the same transaction, in
// place of the checkpoint's own update of the run.
func (s *Store) Checkpoint(ctx context.Context, req storage.CheckpointRequest) (storage.CheckpointResult, error) {
	if err := req.Validate(); err != nil {
		return storage.CheckpointResult{}, fmt.Errorf("sqlitestore: %w", err)
	}
	var res storage.CheckpointResult
	err := s.write(ctx, "checkpoint", func(w *wtx) (err error) {
		res, err = w.checkpoint(req, s.now())
		return err
	})
	if err != nil {
		return storage.CheckpointResult{}, err
	}
	return res, nil
}

// checkpoint is Checkpoint in the writing transaction, at now. CheckpointTx
// writes its step's checkpoint with it too.
func (w *wtx) checkpoint(req storage.CheckpointRequest, now time.Time) (storage.CheckpointResult, error) {
	var res storage.CheckpointResult
	l := req.Lease
	n := now.UnixNano()
	until := leaseUntil(now, req.LeaseFor)
	// The fence, and what the write depends on: the execution it belongs
	// to, a requested pause, a wait this checkpoint resolves (an event
	// wait that timed out), a requested cancellation, which every answer
	// reports.
	var pause, resolves bool
	var ref, exec int64
	found, err := w.queryRow(`SELECT pause_requested, `+resolvesWait+`, ref, execution, cancel_reason IS NOT NULL FROM runs
		WHERE id = ?1 AND status = 'running' AND token = ?2`,
		func(r row) {
			pause, resolves, ref, exec = r.int64(0) != 0, r.int64(1) != 0, r.int64(2), r.int64(3)
			res.CancelRequested = r.int64(4) != 0
		},
		l.RunID, l.Token, req.Checkpoint.Key)
	if err != nil {
		return res, err
	}
	if !found {
		return res, leaseLost(l)
	}
	written, err := w.insertCheckpoint(ref, exec, &req.Checkpoint, req.Attempts, n)
	if err != nil {
		return res, err
	}
	if written {
		// The attributes set ride with the checkpoint too, when it is
		// written; a merge over the limit fails the whole write.
		if err := w.mergeAttrs(ref, req.Attributes); err != nil {
			return res, err
		}
	}
	if req.Reply != nil || len(req.Streams) > 0 {
		// The reply and stream writes ride with the checkpoint, only
		// when it is written: a replay that finds it writes neither. A
		// reply to an update the run does not have is refused either way.
		if written {
			err = w.interact(ref, l.RunID, req.Reply, req.Streams, n)
		} else if req.Reply != nil {
			err = w.checkReply(ref, l.RunID, req.Reply)
		}
		if err != nil {
			return res, err
		}
	}
	if done := req.Completion(); done != nil && written && !pause {
		// The completion rides with the step: the run ends in this
		// change, its finishing statement doing the checkpoint's update
		// of the run (the lease ends, the active step and a wait the step
		// resolves go, recoveries reset) and publishing the progress, the
		// completion's over the checkpoint's.
		progress := done.Progress
		if progress == nil {
			progress = req.Progress
		}
		res.Completed = true
		return res, w.complete(*done, progress, true, n)
	}
	if err := w.publish(ref, req.Progress); err != nil {
		return res, err
	}
	if !written {
		// Written before (an event delivered while the worker decided a
		// timeout): extend the lease, nothing more.
		if err := w.extendLease(l.RunID, until, n); err != nil {
			return res, err
		}
		res.Existing, err = w.loadCheckpoint(ref, exec, req.Checkpoint.Key)
		return res, err
	}
	res.PauseRequested = pause && req.Busy
	switch {
	case pause && !req.Busy:
		// The pause takes effect: the run is parked, its lease released.
		_, err = w.exec(`UPDATE runs SET status = 'paused', pause_requested = 0, recoveries = 0,
				ready_at = ?2, updated_at = ?2, `+releaseLease("?2")+`, `+clearActive+`,
				wait_key = iif(?3, NULL, wait_key), wait_topic = iif(?3, NULL, wait_topic),
				wait_kind = iif(?3, NULL, wait_kind), wait_deadline = iif(?3, NULL, wait_deadline),
				wait_also = iif(?3, NULL, wait_also)
			WHERE ref = ?1`, ref, n, resolves)
		res.Paused = true
	case resolves:
		_, err = w.exec(`UPDATE runs SET lease_until = ?2, recoveries = 0, updated_at = ?3, `+clearActive+`, `+clearWait+`
			WHERE ref = ?1`, ref, until, n)
	default:
		_, err = w.exec(`UPDATE runs SET lease_until = ?2, recoveries = 0, updated_at = ?3, `+clearActive+` WHERE ref = ?1`, ref, until, n)
	}
	return res, err
}

// resolvesWait is the SQL expression, on a run's row, that says whether the
// checkpoint of key ?3 decides the run's registered wait: it is the key of
// one of the wait's cases (an event wait that timed out). A wait of one
// case is judged on wait_key alone; CASE keeps the further cases unread
// then.
const resolvesWait = `CASE WHEN wait_also IS NULL THEN wait_key IS ?3
	ELSE wait_key IS ?3 OR EXISTS (SELECT 1 FROM json_each(wait_also) WHERE value ->> 'key' = ?3) END`

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
		if err := w.insertAttempts(st.ref, st.execution, attempts); err != nil {
			return err
		}
		return w.extendLease(lease.RunID, leaseUntil(now, leaseFor), now.UnixNano())
	})
}

// ListSteps returns one execution's checkpoints in sequence order, each with
// its input and its attempts in the order recorded, and the attempts of its keys without
// a checkpoint; see storage.Store.
func (s *Store) ListSteps(ctx context.Context, q storage.StepsQuery) (storage.History, error) {
	if err := q.Validate(); err != nil {
		return storage.History{}, fmt.Errorf("sqlitestore: %w", err)
	}
	var h storage.History
	err := s.read(ctx, "list steps", true, func(c *conn) error {
		h = storage.History{}
		var ref, current int64
		found, err := c.queryRow(`SELECT ref, execution FROM runs WHERE id = ?1`, func(r row) { ref, current = r.int64(0), r.int64(1) }, q.RunID)
		if err != nil {
			return err
		}
		if !found {
			return storage.ErrRunNotFound
		}
		exec := int64(q.Execution)
		if exec == 0 {
			exec = current
		}
		if exec > current {
			return fmt.Errorf("%w: run %q has no execution %d (its current one is %d)", storage.ErrInvalidArgument, q.RunID, exec, current)
		}
		h.Execution = int(exec)
		index := map[string]int{}
		// Attempts in the order recorded: those recorded on their own
		// before the step's checkpoint, those written with checkpoints,
		// those recorded on their own after it.
		var before, with, after []storage.Attempt
		if err := c.query(`SELECT `+checkpointCols+`, attempts, input FROM checkpoints WHERE run_ref = ?1 AND execution = ?2 ORDER BY seq`, func(r row) error {
			cp := scanCheckpoint(r)
			cp.Input = r.bytes(10)
			index[cp.Key] = len(h.Steps)
			h.Steps = append(h.Steps, storage.StepRecord{Checkpoint: cp})
			as, err := decodeAttempts(r.bytes(9))
			if err != nil {
				return fmt.Errorf("checkpoint %q of run %q: %w", cp.Key, q.RunID, err)
			}
			for i := range as {
				as[i].Execution = cp.Execution
			}
			with = append(with, as...)
			return nil
		}, ref, exec); err != nil {
			return err
		}
		if err := c.query(`SELECT `+attemptCols+`, after_checkpoint FROM attempts WHERE run_ref = ?1 AND execution = ?2 ORDER BY id`, func(r row) error {
			a := scanAttempt(r)
			if _, ok := index[a.Key]; !ok {
				h.Pending = append(h.Pending, a)
			} else if r.int64(7) != 0 {
				after = append(after, a)
			} else {
				before = append(before, a)
			}
			return nil
		}, ref, exec); err != nil {
			return err
		}
		for _, list := range [][]storage.Attempt{before, with, after} {
			for _, a := range list {
				i := index[a.Key]
				h.Steps[i].Attempts = append(h.Steps[i].Attempts, a)
			}
		}
		return nil
	})
	if err != nil {
		return storage.History{}, err
	}
	return h, nil
}

// checkpointCols are the columns scanCheckpoint reads, from checkpoints;
// checkpointColsC the same of checkpoints c.
const (
	checkpointCols  = `key, kind, output, error_message, error_code, seq, created_at, execution, forked_from`
	checkpointColsC = `c.key, c.kind, c.output, c.error_message, c.error_code, c.seq, c.created_at, c.execution, c.forked_from`
)

func scanCheckpoint(r row) storage.Checkpoint {
	return storage.Checkpoint{
		Key:        r.str(0),
		Kind:       storage.CheckpointKind(r.str(1)),
		Output:     r.bytes(2),
		Error:      r.errorInfo(3),
		Seq:        r.int64(5),
		CreatedAt:  r.time(6),
		Execution:  int(r.int64(7)),
		ForkedFrom: int(r.int64(8)),
	}
}

// attemptCols are the columns scanAttempt reads, from attempts;
// attemptColsA the same of attempts a.
const (
	attemptCols  = `key, number, started_at, ended_at, error, retry_at, execution`
	attemptColsA = `a.key, a.number, a.started_at, a.ended_at, a.error, a.retry_at, a.execution`
)

func scanAttempt(r row) storage.Attempt {
	return storage.Attempt{
		Key:       r.str(0),
		Number:    int(r.int64(1)),
		Started:   r.time(2),
		Ended:     r.time(3),
		Error:     r.str(4),
		RetryAt:   r.timePtr(5),
		Execution: int(r.int64(6)),
	}
}

// insertCheckpoint writes cp in the run's execution exec, with its input
// and the attempts that produced it, unless the execution has a checkpoint for its key;
// written reports which.
func (w *wtx) insertCheckpoint(ref, exec int64, cp *storage.Checkpoint, attempts []storage.Attempt, now int64) (written bool, err error) {
	n, err := w.exec(`INSERT INTO checkpoints (run_ref, execution, key, kind, output, error_message, error_code, attempts, created_at, input)
		VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10) ON CONFLICT (run_ref, execution, key) DO NOTHING`,
		ref, exec, cp.Key, string(cp.Kind), bytesArg(cp.Output), errMsg(cp.Error), errCode(cp.Error),
		bytesArg(encodeAttempts(attempts)), now, bytesArg(cp.Input))
	return n == 1, err
}

// loadCheckpoint returns the checkpoint for key of the run's execution
// exec, or nil.
func (w *wtx) loadCheckpoint(ref, exec int64, key string) (*storage.Checkpoint, error) {
	var cp *storage.Checkpoint
	_, err := w.queryRow(`SELECT `+checkpointCols+` FROM checkpoints WHERE run_ref = ?1 AND execution = ?2 AND key = ?3`, func(r row) {
		c := scanCheckpoint(r)
		cp = &c
	}, ref, exec, key)
	return cp, err
}

// insertAttempts appends attempts recorded on their own to the run's
// execution exec, noting for each whether its step's checkpoint exists
// already.
func (w *wtx) insertAttempts(ref, exec int64, attempts []storage.Attempt) error {
	for _, a := range attempts {
		if _, err := w.exec(`INSERT INTO attempts (run_ref, execution, key, number, started_at, ended_at, error, retry_at, after_checkpoint)
			VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8,
				EXISTS (SELECT 1 FROM checkpoints WHERE run_ref = ?1 AND execution = ?2 AND key = ?3))`,
			ref, exec, a.Key, a.Number, nanos(a.Started), nanos(a.Ended), a.Error, nanosPtr(a.RetryAt)); err != nil {
			return err
		}
	}
	return nil
}
