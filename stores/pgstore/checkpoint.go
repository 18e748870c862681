package pgstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stemflow/stem/storage"
)

// LoadReplay returns the current execution's checkpoints in sequence order
// and the attempts of its keys without a checkpoint, read by one statement,
// or ErrRunNotFound.
func (s *Store) LoadReplay(ctx context.Context, runID string) (storage.Replay, error) {
	const op = "load replay"
	if err := s.check(op); err != nil {
		return storage.Replay{}, err
	}
	rows, err := s.pool.Query(ctx, s.q.loadReplay, runID)
	if err != nil {
		return storage.Replay{}, s.wrap(op, err)
	}
	var (
		rp    storage.Replay
		found bool
	)
	err = forRows(rows, func() error {
		found = true
		return scanReplayRow(rows, &rp)
	})
	if err != nil {
		return storage.Replay{}, s.wrap(op, err)
	}
	if !found {
		return storage.Replay{}, fmt.Errorf("pgstore: %s of run %q: %w", op, runID, storage.ErrRunNotFound)
	}
	return rp, nil
}

// scanReplayRow adds one row of loadReplay (or, after the run's ID, of
// loadClaimed) to rp; dest are the columns before it.
func scanReplayRow(rows pgx.Rows, rp *storage.Replay, dest ...any) error {
	var (
		execution int32
		isAttempt bool
		c         ckptRow
		a         attemptRow
	)
	if err := rows.Scan(append(append(append(dest, &execution, &isAttempt), c.dest()...), a.dest()...)...); err != nil {
		return err
	}
	rp.Execution = int(execution)
	if isAttempt {
		rp.Pending = append(rp.Pending, a.attempt(c.key, rp.Execution))
		return nil
	}
	cp, ok, err := c.checkpoint(rp.Execution)
	if ok {
		rp.Checkpoints = append(rp.Checkpoints, cp)
	}
	return err
}

// forRows calls fn for each row, then closes rows and returns the first
// error.
func forRows(rows pgx.Rows, fn func() error) error {
	defer rows.Close()
	for rows.Next() {
		if err := fn(); err != nil {
			return err
		}
	}
	return rows.Err()
}

// ckptRow is a checkpoint read by loadReplay or history: every column is
// NULL in a row that holds no checkpoint. key is also an attempt's key.
type ckptRow struct {
	key, kind  *string
	output     []byte
	errJSON    []byte
	seq        *int64
	created    *time.Time
	forkedFrom *int32
}

func (c *ckptRow) dest() []any {
	return []any{&c.key, &c.kind, &c.output, &c.errJSON, &c.seq, &c.created, &c.forkedFrom}
}

// checkpoint returns the row's checkpoint of execution; ok is false when
// the row holds none.
func (c *ckptRow) checkpoint(execution int) (cp storage.Checkpoint, ok bool, err error) {
	if c.kind == nil {
		return storage.Checkpoint{}, false, nil
	}
	info, err := decodeError(c.errJSON)
	if err != nil {
		return storage.Checkpoint{}, false, err
	}
	cp = storage.Checkpoint{
		Key: *c.key, Kind: storage.CheckpointKind(*c.kind), Output: c.output, Error: info, Seq: *c.seq,
		Execution: execution, CreatedAt: *c.created,
	}
	if c.forkedFrom != nil {
		cp.ForkedFrom = int(*c.forkedFrom)
	}
	return cp, true, nil
}

// attemptRow is an attempt read by loadReplay or history (its key and
// sequence number are in the ckptRow columns).
type attemptRow struct {
	number         *int32
	started, ended *time.Time
	errText        *string
	retryAt        *time.Time
}

func (a *attemptRow) dest() []any {
	return []any{&a.number, &a.started, &a.ended, &a.errText, &a.retryAt}
}

func (a *attemptRow) attempt(key *string, execution int) storage.Attempt {
	out := storage.Attempt{RetryAt: a.retryAt, Execution: execution}
	if key != nil {
		out.Key = *key
	}
	if a.number != nil {
		out.Number = int(*a.number)
	}
	if a.started != nil {
		out.Started = *a.started
	}
	if a.ended != nil {
		out.Ended = *a.ended
	}
	if a.errText != nil {
		out.Error = *a.errText
	}
	return out
}

// Checkpoint records a step's result under the lease: fence, write-once
// insert into the current execution, attempts, lease extension and the
// pause hand-off, in one statement shared with the other runs' checkpoints
// queued at the same moment (see writer.go). A completion it carries
// (req.Complete) follows it in the same transaction and round trip, in the
// batch's completeRides statement; one with a Notify, in a transaction of
// its own (checkpointNotify). A reply and stream writes it carries
// (req.Reply, req.Streams) follow it likewise, in the batch's interact
// statement (see interact.go); a reply is checked first, by one read,
// against the run's updates. Search attributes it carries
// (req.Attributes) follow it in the batch's setAttrs statement (see
// attrs.go): a merge that would leave the run more than
// storage.MaxAttributes fails the batch's transaction, whose calls are
// then written again one by one (writeBatch), so that this one alone
// fails, with storage.ErrInvalidArgument and nothing written.
func (s *Store) Checkpoint(ctx context.Context, req storage.CheckpointRequest) (storage.CheckpointResult, error) {
	const op = "checkpoint"
	if err := s.check(op); err != nil {
		return storage.CheckpointResult{}, err
	}
	if err := req.Validate(); err != nil {
		return storage.CheckpointResult{}, fmt.Errorf("pgstore: %w", err)
	}
	call, err := s.checkpointCall(req)
	if err != nil {
		return storage.CheckpointResult{}, s.wrap(op, err)
	}
	if err := s.checkReply(ctx, s.pool, &req); err != nil {
		return storage.CheckpointResult{}, s.wrap(op, err)
	}
	c := req.Completion()
	if c == nil {
		return s.submit(ctx, call)
	}
	errJSON, err := encodeError(c.Error)
	if err != nil {
		return storage.CheckpointResult{}, s.wrap(op, err)
	}
	childJSON, err := encodeError(c.ChildError)
	if err != nil {
		return storage.CheckpointResult{}, s.wrap(op, err)
	}
	if c.Notify != nil {
		return s.checkpointNotify(ctx, call, *c, errJSON, childJSON)
	}
	// The completion rides in the writers' batch, after the checkpoint
	// statement, in its transaction (see completeManySQL).
	call.ride = &finCall{req: *c, errJSON: textOf(errJSON), childJSON: textOf(childJSON)}
	res, err := s.submit(ctx, call)
	if err == nil && call.ride.woke {
		s.poke()
	}
	return res, err
}

// checkpointCall is the call that writes req's checkpoint, its error and
// attempts encoded. The step's own attempts ride in its checkpoint row;
// attempts of other keys (none, from the runtime) go to the attempts
// table, so that a key without a checkpoint finds its attempts there.
func (s *Store) checkpointCall(req storage.CheckpointRequest) (*ckptCall, error) {
	errJSON, err := encodeError(req.Checkpoint.Error)
	if err != nil {
		return nil, err
	}
	call := &ckptCall{req: req, errJSON: textOf(errJSON), done: make(chan struct{})}
	if call.inter, err = interactionOf(&call.req); err != nil {
		return nil, err
	}
	own, key := req.Attempts, req.Checkpoint.Key
	if slices.ContainsFunc(own, func(a storage.Attempt) bool { return a.Key != key }) {
		own = nil
		for _, a := range req.Attempts {
			if a.Key == key {
				own = append(own, a)
			} else {
				call.loose = append(call.loose, a)
			}
		}
	}
	if call.attempts, err = encodeAttempts(own); err != nil {
		return nil, err
	}
	return call, nil
}

// checkpointNotify writes a checkpoint that carries a completion with a
// Notify (an event to deliver to another run, which takes more than one
// statement) in a transaction of its own: the checkpoint statement for
// this call alone, then, when it wrote the checkpoint and no pause took
// effect, Complete's transaction (completeTx).
func (s *Store) checkpointNotify(ctx context.Context, call *ckptCall, c storage.CompleteRequest, errJSON, childJSON []byte) (storage.CheckpointResult, error) {
	const op = "checkpoint"
	var (
		res   storage.CheckpointResult
		ready bool
	)
	err := s.inTx(ctx, func(tx pgx.Tx) (err error) {
		ready = false
		if res, err = s.checkpointIn(ctx, tx, call, s.clock()); err != nil || res.Existing != nil || res.Paused {
			return err
		}
		if ready, err = s.completeTx(ctx, tx, "complete", c, errJSON, childJSON); err != nil {
			return err
		}
		res.Completed = true
		return nil
	})
	if err != nil {
		if errors.Is(err, storage.ErrLeaseLost) {
			return storage.CheckpointResult{}, err
		}
		return storage.CheckpointResult{}, s.wrap(op, err)
	}
	if ready {
		s.poke()
	}
	return res, nil
}

// RecordAttempts appends attempts to the current execution under the lease
// and extends it, in one statement.
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

// ListSteps returns one execution's checkpoints in sequence order, each
// with its input and its attempts in the order recorded: those recorded
// apart (failures before a retry) and those stored with a checkpoint,
// merged by the one sequence that orders both; and the attempts of keys
// without a checkpoint. All of it is read by one statement.
func (s *Store) ListSteps(ctx context.Context, q storage.StepsQuery) (storage.History, error) {
	const op = "list steps"
	if err := s.check(op); err != nil {
		return storage.History{}, err
	}
	if err := q.Validate(); err != nil {
		return storage.History{}, fmt.Errorf("pgstore: %w", err)
	}
	type seqAttempt struct {
		seq int64
		storage.Attempt
	}
	var (
		h        storage.History
		current  int
		found    bool
		attempts []seqAttempt
	)
	rows, err := s.pool.Query(ctx, s.q.history, q.RunID, int32(q.Execution))
	if err != nil {
		return storage.History{}, s.wrap(op, err)
	}
	err = forRows(rows, func() error {
		found = true
		var (
			cur, ex   int32
			isAttempt bool
			c         ckptRow
			attJSON   []byte
			input     []byte
			a         attemptRow
		)
		dest := append([]any{&cur, &ex, &isAttempt}, c.dest()...)
		dest = append(append(dest, &attJSON, &input), a.dest()...)
		if err := rows.Scan(dest...); err != nil {
			return err
		}
		current, h.Execution = int(cur), int(ex)
		if isAttempt {
			attempts = append(attempts, seqAttempt{*c.seq, a.attempt(c.key, h.Execution)})
			return nil
		}
		cp, ok, err := c.checkpoint(h.Execution)
		if !ok || err != nil {
			return err
		}
		cp.Input = input
		as, err := decodeAttempts(attJSON, h.Execution)
		if err != nil {
			return err
		}
		for _, a := range as {
			attempts = append(attempts, seqAttempt{cp.Seq, a})
		}
		h.Steps = append(h.Steps, storage.StepRecord{Checkpoint: cp})
		return nil
	})
	if err != nil {
		return storage.History{}, s.wrap(op, err)
	}
	if !found {
		return storage.History{}, fmt.Errorf("pgstore: %s of run %q: %w", op, q.RunID, storage.ErrRunNotFound)
	}
	if h.Execution > current {
		return storage.History{}, fmt.Errorf("pgstore: %s of run %q: %w: execution %d: the run has %d",
			op, q.RunID, storage.ErrInvalidArgument, h.Execution, current)
	}
	if len(attempts) == 0 {
		return h, nil
	}
	sort.SliceStable(attempts, func(i, j int) bool { return attempts[i].seq < attempts[j].seq })
	steps := make(map[string]int, len(h.Steps))
	for i := range h.Steps {
		steps[h.Steps[i].Key] = i
	}
	for _, a := range attempts {
		if i, ok := steps[a.Key]; ok {
			h.Steps[i].Attempts = append(h.Steps[i].Attempts, a.Attempt)
		} else {
			h.Pending = append(h.Pending, a.Attempt)
		}
	}
	return h, nil
}
