package pgstore

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/jackc/pgx/v5"

	"github.com/stemflow/stem/storage"
)

// Checkpoints are written by a few writer goroutines per store, each taking
// every request queued at that moment (one per run) into one statement and
// one commit: group commit. With one caller a request is written alone at
// once; with many, a commit carries many steps, so throughput is not bound
// by the server's commits per second.

const (
	// defaultWriters is how many checkpoint statements may be in flight at
	// once per store.
	defaultWriters = 2
	// maxBatch caps the checkpoints one statement writes.
	maxBatch = 128
)

// The states of a queued checkpoint.
const (
	callQueued    int32 = iota
	callTaken           // in a batch: the caller waits for its result
	callWithdrawn       // given up by its caller before any writer took it
)

// ckptCall is one Checkpoint call waiting for its batch.
type ckptCall struct {
	req      storage.CheckpointRequest
	errJSON  *string
	attempts *string // JSON, of the checkpoint's own key
	// loose are the request's attempts of other keys, recorded apart.
	loose []storage.Attempt
	state atomic.Int32
	res   storage.CheckpointResult
	err   error
	done  chan struct{}
}

// finish hands the call its result and wakes its caller.
func (c *ckptCall) finish(res storage.CheckpointResult, err error) {
	c.res, c.err = res, err
	close(c.done)
}

// submit queues a checkpoint call for the writers and waits for its
// result. A call given up (ctx done, store closed) before a writer took it
// is withdrawn and never written; once taken, the writer's statement
// decides.
func (s *Store) submit(ctx context.Context, call *ckptCall) (storage.CheckpointResult, error) {
	const op = "checkpoint"
	if err := ctx.Err(); err != nil {
		return storage.CheckpointResult{}, s.wrap(op, err)
	}
	select {
	case s.ckptQueue <- call:
	case <-ctx.Done():
		return storage.CheckpointResult{}, s.wrap(op, ctx.Err())
	case <-s.stopCtx.Done():
		return storage.CheckpointResult{}, fmt.Errorf("pgstore: %s: %w", op, storage.ErrClosed)
	}
	select {
	case <-call.done:
		return call.res, call.err
	case <-ctx.Done():
		if call.state.CompareAndSwap(callQueued, callWithdrawn) {
			return storage.CheckpointResult{}, s.wrap(op, ctx.Err())
		}
	case <-s.writersGone:
		if call.state.CompareAndSwap(callQueued, callWithdrawn) {
			return storage.CheckpointResult{}, fmt.Errorf("pgstore: %s: %w", op, storage.ErrClosed)
		}
	}
	// A writer took the call: its statement decides, and every writer
	// finishes its calls before it exits.
	<-call.done
	return call.res, call.err
}

// startWriters starts the checkpoint writers; Close stops them.
func (s *Store) startWriters(n int) {
	s.ckptQueue = make(chan *ckptCall, 4*maxBatch)
	s.writersGone = make(chan struct{})
	var left atomic.Int32
	left.Store(int32(n))
	for range n {
		s.wg.Go(func() {
			defer func() {
				if left.Add(-1) == 0 {
					close(s.writersGone)
				}
			}()
			s.writeLoop()
		})
	}
}

// writeLoop takes the next queued checkpoint and every other one queued by
// then (one per run; a second for the same run waits for the next batch),
// writes them in one statement, and repeats until the store closes.
func (s *Store) writeLoop() {
	var (
		batch  = make([]*ckptCall, 0, maxBatch)
		carry  []*ckptCall
		runIDs = make(map[string]struct{}, maxBatch)
	)
	for {
		batch = batch[:0]
		clear(runIDs)
		next := carry[:0:0]
		take := func(c *ckptCall) {
			if _, dup := runIDs[c.req.Lease.RunID]; dup {
				next = append(next, c)
				return
			}
			if c.state.CompareAndSwap(callQueued, callTaken) {
				runIDs[c.req.Lease.RunID] = struct{}{}
				batch = append(batch, c)
			}
		}
		for _, c := range carry {
			take(c)
		}
		if len(batch) == 0 && len(next) == 0 {
			select {
			case c := <-s.ckptQueue:
				take(c)
			case <-s.stopCtx.Done():
				return
			}
		}
	drain:
		for len(batch) < maxBatch {
			select {
			case c := <-s.ckptQueue:
				take(c)
			default:
				break drain
			}
		}
		carry = next
		if len(batch) > 0 {
			s.writeBatch(batch)
		}
	}
}

// writeBatch writes a batch and completes its calls. If the statement
// fails as a whole, each checkpoint is written again alone, so that one bad
// request fails only its own call.
func (s *Store) writeBatch(batch []*ckptCall) {
	s.batches.Add(1)
	s.batched.Add(int64(len(batch)))
	ctx := s.stopCtx
	results, errs, err := s.writeCheckpoints(ctx, batch)
	if err == nil {
		for i, c := range batch {
			c.finish(results[i], errs[i])
		}
		return
	}
	if len(batch) == 1 {
		batch[0].finish(storage.CheckpointResult{}, s.wrap("checkpoint", err))
		return
	}
	for _, c := range batch {
		res, errs, err := s.writeCheckpoints(ctx, []*ckptCall{c})
		if err != nil {
			c.finish(storage.CheckpointResult{}, s.wrap("checkpoint", err))
		} else {
			c.finish(res[0], errs[0])
		}
	}
}

// writeCheckpoints runs the checkpoint statement for calls (distinct runs)
// and returns each call's result and error; err is a failure of the whole.
func (s *Store) writeCheckpoints(ctx context.Context, calls []*ckptCall) ([]storage.CheckpointResult, []error, error) {
	n := len(calls)
	var (
		runIDs   = make([]string, n)
		tokens   = make([]int64, n)
		keys     = make([]string, n)
		kinds    = make([]string, n)
		outputs  = make([][]byte, n)
		errTexts = make([]*string, n)
		attempts = make([]*string, n)
		leases   = make([]int64, n)
	)
	var (
		looseReq []int64
		loose    []storage.Attempt
	)
	for i, c := range calls {
		r := &c.req
		runIDs[i], tokens[i], keys[i], kinds[i] = r.Lease.RunID, r.Lease.Token, r.Checkpoint.Key, string(r.Checkpoint.Kind)
		outputs[i], errTexts[i], attempts[i], leases[i] = r.Checkpoint.Output, c.errJSON, c.attempts, micros(r.LeaseFor)
		for range c.loose {
			looseReq = append(looseReq, int64(i+1))
		}
		loose = append(loose, c.loose...)
	}
	args := append([]any{s.clock(), runIDs, tokens, keys, kinds, outputs, errTexts, attempts, leases, looseReq},
		attemptArrays(loose)...)
	results := make([]storage.CheckpointResult, n)
	errs := make([]error, n)
	executions := make([]int32, n)
	var reread []int
	err := s.retrying(ctx, func() error {
		reread = reread[:0]
		for i := range calls {
			results[i], errs[i] = storage.CheckpointResult{}, leaseLost("checkpoint", calls[i].req.Lease)
		}
		args[0] = s.clock()
		rows, err := s.pool.Query(ctx, s.q.checkpoint, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				ord            int64
				written, pause bool
				execution      int32
			)
			if err := rows.Scan(&ord, &written, &pause, &execution); err != nil {
				return err
			}
			i := int(ord - 1)
			errs[i], executions[i] = nil, execution
			if written {
				results[i].Paused = pause
			} else {
				reread = append(reread, i)
			}
		}
		return rows.Err()
	})
	if err != nil {
		return nil, nil, err
	}
	// The key already had a checkpoint in the run's current execution:
	// report it. It is read with a fresh snapshot, which also sees one
	// committed by a delivery the statement waited for.
	for _, i := range reread {
		existing, err := scanCheckpoint(s.pool.QueryRow(ctx, s.q.getCheckpoint, runIDs[i], executions[i], keys[i]))
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			// Taken back since by a refusal, which needs the lease too.
			errs[i] = leaseLost("checkpoint", calls[i].req.Lease)
		case err != nil:
			errs[i] = s.wrap("checkpoint", err)
		default:
			results[i].Existing = &existing
		}
	}
	return results, errs, nil
}
