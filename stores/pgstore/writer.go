package pgstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stemflow/stem/storage"
)

// Checkpoints are written by a few writer goroutines per store, each taking
// every request queued at that moment (one per run) into one statement and
// one commit: group commit. A request that finds no write in flight and
// nothing queued is written alone at once on its caller's goroutine
// (writeInline), so that one run at a time pays no hand-off to a writer
// and back; with many callers, those that arrive while a write is in
// flight queue, and a commit carries many steps, so throughput is not
// bound by the server's commits per second.

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

// ckptCall is one Checkpoint call waiting for its batch, or, with fin set,
// one Complete call: completions ride in the same transaction as the
// batch's checkpoints, so a run's end costs no commit of its own.
type ckptCall struct {
	req storage.CheckpointRequest
	fin *finCall
	// ride is the completion a checkpoint call carries
	// (CheckpointRequest.Complete), written after its checkpoint in the
	// batch's transaction (see completeManySQL).
	ride     *finCall
	create   *createCall
	park     *parkCall
	errJSON  *string
	attempts *string // JSON, of the checkpoint's own key
	// loose are the request's attempts of other keys, recorded apart.
	loose []storage.Attempt
	// inter is what the checkpoint writes to its run's updates and
	// streams (CheckpointRequest.Reply, Streams), nil for neither.
	inter *interaction
	state atomic.Int32
	res   storage.CheckpointResult
	err   error
	done  chan struct{}
}

// finCall is what a Complete call writes.
type finCall struct {
	req     storage.CompleteRequest
	errJSON *string
	// childJSON is the error of the descendants the completion
	// terminates (cascadeMany), nil for none.
	childJSON *string
	// woke is true when the completion's cascade made a child whose
	// cancellation it requested ready now.
	woke bool
}

// createCall is what a CreateRuns call writes, and what it gets back.
// Creations need no lease: any number ride in one batch, their runs in
// call order, so that an ID repeated across calls is created by the first
// as it would be by calls one after another.
type createCall struct {
	runs []storage.NewRun
	out  []storage.CreateResult
}

// parkCall is what a Suspend call that writes a checkpoint and registers
// no wait (a sleep) writes, and what it gets back.
type parkCall struct {
	req     storage.SuspendRequest
	errJSON *string
	res     storage.SuspendResult
	// ready is true when the run parked ready to claim at once.
	ready bool
}

// textOf is encoded JSON as the text the batch statements take for a
// jsonb column, nil for none.
func textOf(js []byte) *string {
	if js == nil {
		return nil
	}
	s := string(js)
	return &s
}

// lease is the lease the call is fenced by; a creation has none.
func (c *ckptCall) lease() storage.Lease {
	switch {
	case c.fin != nil:
		return c.fin.req.Lease
	case c.park != nil:
		return c.park.req.Lease
	case c.create != nil:
		return storage.Lease{}
	}
	return c.req.Lease
}

// completion is what the call completes: a Complete call's finCall, or
// the completion a checkpoint call carries (nil for none).
func (c *ckptCall) completion() *finCall {
	if c.fin != nil {
		return c.fin
	}
	return c.ride
}

// finish hands the call its result and wakes its caller.
func (c *ckptCall) finish(res storage.CheckpointResult, err error) {
	c.res, c.err = res, err
	close(c.done)
}

// submit queues a checkpoint or completion call for the writers and
// waits for its result. A call given up (ctx done, store closed) before a
// writer took it is withdrawn and never written; once taken, the writer's
// statement decides.
func (s *Store) submit(ctx context.Context, call *ckptCall) (storage.CheckpointResult, error) {
	op := call.op()
	if err := ctx.Err(); err != nil {
		return storage.CheckpointResult{}, s.wrap(op, err)
	}
	if s.stopCtx.Err() != nil {
		return storage.CheckpointResult{}, fmt.Errorf("pgstore: %s: %w", op, storage.ErrClosed)
	}
	if s.writeInline(call) {
		return call.res, call.err
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

// writeInline writes call alone on the caller's goroutine when the store
// is idle, no write in flight and nothing queued: one run at a time pays
// no hand-off to a writer and back. It reports false, having done
// nothing, otherwise; the call then queues for the writers, and shares the
// commit of whatever else is queued by the time a slot frees (group
// commit). Busy stores keep batching: a call that arrives while another
// write is in flight waits for it rather than commit alone beside it.
func (s *Store) writeInline(call *ckptCall) bool {
	if len(s.ckptQueue) > 0 || len(s.slots) < cap(s.slots) {
		return false
	}
	select {
	case <-s.slots:
	default:
		return false
	}
	defer func() { s.slots <- struct{}{} }()
	// Close waits for the store's goroutines, this write among them,
	// before it closes the pool.
	s.closeMu.RLock()
	defer s.closeMu.RUnlock()
	if s.stopCtx.Err() != nil {
		return false
	}
	call.state.Store(callTaken)
	s.writeBatch([]*ckptCall{call})
	return true
}

// startWriters starts the checkpoint writers; Close stops them. n is also
// how many writes may be in flight at once, inline ones (writeInline)
// included: each takes one of n slots.
func (s *Store) startWriters(n int) {
	s.ckptQueue = make(chan *ckptCall, 4*maxBatch)
	s.slots = make(chan struct{}, n)
	for range n {
		s.slots <- struct{}{}
	}
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
			id := c.lease().RunID
			if _, dup := runIDs[id]; dup && id != "" {
				next = append(next, c)
				return
			}
			if c.state.CompareAndSwap(callQueued, callTaken) {
				runIDs[id] = struct{}{}
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
		// Wait for a free slot before taking the rest: what queues
		// meanwhile joins this batch.
		select {
		case <-s.slots:
		case <-s.stopCtx.Done():
			// What was taken is not written: its callers see the
			// store close.
			s.abandon(batch)
			return
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
		s.slots <- struct{}{}
	}
}

// abandon finishes calls a writer took but will not write, because the
// store is closing.
func (s *Store) abandon(calls []*ckptCall) {
	for _, c := range calls {
		if c.state.Load() == callTaken {
			c.finish(storage.CheckpointResult{}, fmt.Errorf("pgstore: %s: %w", c.op(), storage.ErrClosed))
		}
	}
}

// writeBatch writes a batch and completes its calls. If the transaction
// fails as a whole, each call is written again alone, so that one bad
// request fails only its own call.
func (s *Store) writeBatch(batch []*ckptCall) {
	s.batches.Add(1)
	s.batched.Add(int64(len(batch)))
	ctx := s.stopCtx
	errs, err := s.writeCalls(ctx, batch)
	if err == nil {
		for i, c := range batch {
			c.finish(c.res, errs[i])
		}
		return
	}
	if len(batch) == 1 {
		batch[0].finish(storage.CheckpointResult{}, s.wrap(batch[0].op(), err))
		return
	}
	for _, c := range batch {
		errs, err := s.writeCalls(ctx, []*ckptCall{c})
		if err != nil {
			c.finish(storage.CheckpointResult{}, s.wrap(c.op(), err))
		} else {
			c.finish(c.res, errs[0])
		}
	}
}

// op names the call's operation in its errors.
func (c *ckptCall) op() string {
	switch {
	case c.fin != nil:
		return "complete"
	case c.create != nil:
		return "create runs"
	case c.park != nil:
		return "suspend"
	}
	return "checkpoint"
}

// writeCalls writes calls (distinct runs) in one transaction and one round
// trip: the creation statement and a read of the created runs for the
// creations, the checkpoint statement for the checkpoints (and the
// interact statement for the replies and stream writes some carry, and
// the setAttrs statement for the search attributes some carry), the
// completion statement for the completions. It sets each checkpoint call's res and
// each creation's out, and returns each call's error; err is a failure of
// the whole.
func (s *Store) writeCalls(ctx context.Context, calls []*ckptCall) ([]error, error) {
	var ckpts, fins, creates, parks []*ckptCall
	for _, c := range calls {
		switch {
		case c.fin != nil:
			fins = append(fins, c)
		case c.create != nil:
			creates = append(creates, c)
		case c.park != nil:
			parks = append(parks, c)
		default:
			ckpts = append(ckpts, c)
		}
	}
	ckptSQL, ckptArgs := s.checkpointStatement(ckpts)
	// The checkpoints that carry a reply or stream writes: one more
	// statement, after the checkpoint statement, when there are any.
	var inters []*ckptCall
	for _, c := range ckpts {
		if c.inter != nil {
			inters = append(inters, c)
		}
	}
	var interArgs []any
	if len(inters) > 0 {
		interArgs = s.interactArgs(inters, false)
	}
	// The checkpoints that carry search attributes: one more statement,
	// after the checkpoint statement, when there are any.
	var attrCalls []*ckptCall
	for _, c := range ckpts {
		if len(c.req.Attributes) > 0 {
			attrCalls = append(attrCalls, c)
		}
	}
	var attrArgs []any
	if len(attrCalls) > 0 {
		attrArgs = setAttrsArgs(attrCalls, false)
	}
	finArgs := completeManyArgs(fins)
	createSQL, createArgs := s.createArgs(creates)
	// The checkpoints that carry a completion (CheckpointRequest.Complete
	// without a Notify): rides[i] is ckpts[rideOf[i]].
	var (
		rides  []*ckptCall
		rideOf []int
	)
	for i, c := range ckpts {
		if c.ride != nil {
			rides, rideOf = append(rides, c), append(rideOf, i)
		}
	}
	rideArgs := rideManyArgs(rides)
	cascadeArgs := s.cascadeManyArgs(slices.Concat(fins, rides))
	parkArgs := s.parkManyArgs(parks)
	parkErrs := make([]error, len(parks))
	created := make(map[string]bool)
	records := make(map[string]storage.RunRecord)
	results := make([]storage.CheckpointResult, len(ckpts))
	ckptErrs := make([]error, len(ckpts))
	finErrs := make([]error, len(fins))
	executions := make([]int32, len(ckpts))
	var reread []int
	err := s.retrying(ctx, func() error {
		reread = reread[:0]
		for i, c := range ckpts {
			results[i], ckptErrs[i] = storage.CheckpointResult{}, leaseLost("checkpoint", c.req.Lease)
		}
		for i, c := range fins {
			finErrs[i] = leaseLost("complete", c.fin.req.Lease)
		}
		for i, c := range parks {
			parkErrs[i] = leaseLost("suspend", c.park.req.Lease)
		}
		for _, c := range fins {
			c.fin.woke = false
		}
		for _, c := range rides {
			c.ride.woke = false
		}
		clear(created)
		clear(records)
		now := s.clock()
		b := &pgx.Batch{}
		if len(creates) > 0 {
			createArgs[0] = now
			b.Queue(createSQL, createArgs...)
			b.Queue(s.q.selectRuns, createArgs[1])
		}
		if len(ckpts) > 0 {
			ckptArgs[0] = now
			b.Queue(ckptSQL, ckptArgs...)
		}
		if len(inters) > 0 {
			// After the checkpoints, whose writes it reads.
			interArgs[0] = now
			b.Queue(s.q.interact, interArgs...)
		}
		if len(attrCalls) > 0 {
			// After the checkpoints, whose writes it reads.
			b.Queue(s.q.setAttrs, attrArgs...)
		}
		if len(fins) > 0 {
			finArgs[0] = now
			b.Queue(s.q.completeMany, s.completeArgs(finArgs...)...)
		}
		if len(rides) > 0 {
			// After the checkpoints, whose writes it reads.
			rideArgs[0] = now
			b.Queue(s.q.completeRides, s.completeArgs(rideArgs...)...)
		}
		if cascadeArgs != nil {
			cascadeArgs[0] = now
			b.Queue(s.q.cascadeMany, cascadeArgs...)
		}
		if len(parks) > 0 {
			parkArgs[0] = now
			b.Queue(s.q.parkMany, parkArgs...)
		}
		br := s.pool.SendBatch(ctx, b)
		defer br.Close()
		if len(creates) > 0 {
			if err := s.readCreated(br, created, records); err != nil {
				return err
			}
		}
		if len(ckpts) > 0 {
			err := eachRow(br, func(rows pgx.Rows) error {
				var (
					ord                              int64
					written, pause, pauseReq, cancel bool
					execution                        int32
				)
				if err := rows.Scan(&ord, &written, &pause, &execution, &pauseReq, &cancel); err != nil {
					return err
				}
				i := int(ord - 1)
				ckptErrs[i], executions[i] = nil, execution
				results[i].CancelRequested = cancel
				if written {
					results[i].Paused, results[i].PauseRequested = pause, pauseReq
				} else {
					reread = append(reread, i)
				}
				return nil
			})
			if err != nil {
				return err
			}
		}
		if len(inters) > 0 {
			if _, err := br.Exec(); err != nil {
				return err
			}
		}
		if len(attrCalls) > 0 {
			if _, err := br.Exec(); err != nil {
				return err
			}
		}
		if len(fins) > 0 {
			err := eachRow(br, func(rows pgx.Rows) error {
				var ord int64
				err := rows.Scan(&ord)
				if err == nil {
					finErrs[ord-1] = nil
				}
				return err
			})
			if err != nil {
				return err
			}
		}
		if len(rides) > 0 {
			err := eachRow(br, func(rows pgx.Rows) error {
				var ord int64
				err := rows.Scan(&ord)
				if err == nil {
					results[rideOf[ord-1]].Completed = true
				}
				return err
			})
			if err != nil {
				return err
			}
		}
		if cascadeArgs != nil {
			if err := eachRow(br, func(rows pgx.Rows) error { return markWoken(rows, fins, rides) }); err != nil {
				return err
			}
		}
		if len(parks) > 0 {
			err := eachRow(br, func(rows pgx.Rows) error {
				var (
					ord    int64
					status string
				)
				if err := rows.Scan(&ord, &status); err != nil {
					return err
				}
				p := parks[ord-1].park
				parkErrs[ord-1] = nil
				p.res = storage.SuspendResult{Paused: status == string(storage.StatusPaused)}
				p.ready = status == string(storage.StatusQueued)
				return nil
			})
			if err != nil {
				return err
			}
		}
		return br.Close()
	})
	if err != nil {
		return nil, err
	}
	// The key already had a checkpoint in the run's current execution:
	// report it. It is read with a fresh snapshot, which also sees one
	// committed by a delivery the statement waited for.
	for _, i := range reread {
		c := ckpts[i]
		existing, err := scanCheckpoint(s.pool.QueryRow(ctx, s.q.getCheckpoint, c.req.Lease.RunID, executions[i], c.req.Checkpoint.Key))
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			// Taken back since by a refusal, which needs the lease too.
			ckptErrs[i] = leaseLost("checkpoint", c.req.Lease)
		case err != nil:
			ckptErrs[i] = s.wrap("checkpoint", err)
		default:
			results[i].Existing = &existing
		}
	}
	errs := make([]error, len(calls))
	var ci, fi, pi int
	for i, c := range calls {
		switch {
		case c.fin != nil:
			errs[i] = finErrs[fi]
			fi++
		case c.park != nil:
			errs[i] = parkErrs[pi]
			pi++
		case c.create != nil:
			errs[i] = c.create.results(created, records)
		default:
			c.res = results[ci]
			errs[i] = ckptErrs[ci]
			ci++
		}
	}
	return errs, nil
}

// parkManyArgs are the park statement's arguments for calls; the first,
// the clock, is set per attempt.
func (s *Store) parkManyArgs(calls []*ckptCall) []any {
	n := len(calls)
	var (
		runIDs   = make([]string, n)
		tokens   = make([]int64, n)
		keys     = make([]string, n)
		kinds    = make([]string, n)
		outputs  = make([][]byte, n)
		errTexts = make([]*string, n)
		readyAt  = make([]*time.Time, n)
		states   = make([][]byte, n)
	)
	for i, c := range calls {
		r := &c.park.req
		runIDs[i], tokens[i], keys[i], kinds[i] = r.Lease.RunID, r.Lease.Token, r.Checkpoint.Key, string(r.Checkpoint.Kind)
		outputs[i], errTexts[i], readyAt[i], states[i] = r.Checkpoint.Output, c.park.errJSON, r.ReadyAt, r.SuspendState
	}
	progress := progressArray(calls, func(c *ckptCall) []byte { return c.park.req.Progress })
	inputs := progressArray(calls, func(c *ckptCall) []byte { return c.park.req.Checkpoint.Input })
	args := []any{nil, runIDs, tokens, keys, kinds, outputs, errTexts, readyAt, states, progress, cancelSeenArray(calls), inputs}
	if s.notify {
		args = append(args, s.channel)
	}
	return args
}

// cancelSeenArray is which park calls saw their run's cancellation
// (SuspendRequest.CancelSeen), as the array the park statement takes: nil,
// one NULL read as not seen for every call, when none did.
func cancelSeenArray(calls []*ckptCall) []bool {
	var out []bool
	for i, c := range calls {
		if c.park.req.CancelSeen {
			if out == nil {
				out = make([]bool, len(calls))
			}
			out[i] = true
		}
	}
	return out
}

// createArgs are the creation statement for the runs of calls, and its
// arguments, in call order; the first, the clock, is set per attempt.
// The statement is createRuns, or createLeased when a run is created
// leased (NewRun.Lease), so that creations without a lease pay nothing
// for those; likewise createAttrs and createBoth when a run carries
// search attributes (NewRun.Attributes), which are sent for the first
// request of each ID only, the one the statement creates.
func (s *Store) createArgs(calls []*ckptCall) (string, []any) {
	var (
		n             int
		leased, attrs bool
	)
	for _, c := range calls {
		n += len(c.create.runs)
		for _, r := range c.create.runs {
			leased = leased || r.Lease != nil
			attrs = attrs || len(r.Attributes) > 0
		}
	}
	var (
		ids       = make([]string, 0, n)
		workflows = make([]string, 0, n)
		parents   = make([]string, 0, n)
		inputs    = make([][]byte, 0, n)
		policies  = make([]string, 0, n)
		starts    = make([]*time.Time, 0, n)
		deadlines = make([]*time.Time, 0, n)
		queues    = make([]string, 0, n)
		parts     = make([]string, 0, n)
		prios     = make([]int32, 0, n)
		versions  = make([]int32, 0, n)
		headers   = make([]*string, 0, n)
		owners    []*string
		leases    []int64
		rated     = []string{}
		attrRows  attrRows
		attrObjs  []*string
		first     map[string]bool
	)
	if attrs {
		first, attrObjs = make(map[string]bool, n), make([]*string, 0, n)
	}
	if leased {
		owners, leases = make([]*string, 0, n), make([]int64, 0, n)
	}
	for _, c := range calls {
		for _, r := range c.create.runs {
			ids, workflows, parents = append(ids, r.ID), append(workflows, r.Workflow), append(parents, r.ParentID)
			inputs, policies, starts = append(inputs, r.Input), append(policies, string(r.ParentPolicy)), append(starts, r.StartAt)
			deadlines = append(deadlines, r.Deadline)
			queues, parts, prios = append(queues, r.QueueOf()), append(parts, r.Partition), append(prios, int32(r.Priority))
			versions = append(versions, int32(r.Version))
			headers = append(headers, encodeHeaders(r.Headers))
			if attrs {
				attrObjs = append(attrObjs, encodeAttrs(r.Attributes))
				if !first[r.ID] {
					first[r.ID] = true
					attrRows.add(r.ID, r.Attributes)
				}
			}
			if !leased {
				continue
			}
			if l := r.Lease; l != nil {
				owners, leases = append(owners, &l.Owner), append(leases, micros(l.For))
				if _, ok := s.rated.Load(r.QueueOf()); ok && !slices.Contains(rated, r.QueueOf()) {
					rated = append(rated, r.QueueOf())
				}
			} else {
				owners, leases = append(owners, nil), append(leases, 0)
			}
		}
	}
	query := s.q.createRuns
	args := []any{nil, ids, workflows, parents, inputs, policies, starts, deadlines, queues, parts, prios, versions, headers}
	if leased {
		query = s.q.createLeased
		args = append(args, owners, leases, rated)
	}
	if attrs {
		query = s.q.createAttrs
		if leased {
			query = s.q.createBoth
		}
		args = append(append(args, attrObjs), attrRows.args()...)
	}
	if s.notify {
		args = append(args, s.channel)
	}
	return query, args
}

// readCreated reads the creation statement's and the read's rows: the IDs
// created, and the records of every run named.
func (s *Store) readCreated(br pgx.BatchResults, created map[string]bool, records map[string]storage.RunRecord) error {
	err := eachRow(br, func(rows pgx.Rows) error {
		var id string
		err := rows.Scan(&id)
		created[id] = err == nil
		return err
	})
	if err != nil {
		return err
	}
	return eachRow(br, func(rows pgx.Rows) error {
		rec, err := scanRun(rows)
		if err == nil {
			records[rec.ID] = rec
		}
		return err
	})
}

// eachRow calls fn for each row of the batch's next statement, then closes
// its rows and returns the first error.
func eachRow(br pgx.BatchResults, fn func(rows pgx.Rows) error) error {
	rows, err := br.Query()
	if err != nil {
		return err
	}
	return forRows(rows, func() error { return fn(rows) })
}

// results sets the call's results from what the batch created and read,
// taking each created ID from created: only its first request is created.
func (c *createCall) results(created map[string]bool, records map[string]storage.RunRecord) error {
	c.out = make([]storage.CreateResult, len(c.runs))
	for i, r := range c.runs {
		rec, ok := records[r.ID]
		if !ok {
			return fmt.Errorf("pgstore: create runs: run %q vanished after insert", r.ID)
		}
		c.out[i] = storage.CreateResult{Created: created[r.ID], Run: rec}
		delete(created, r.ID)
	}
	return nil
}

// checkpointStatement is the statement that writes calls' checkpoints and
// its arguments, the first of which, the clock, is set per attempt: for
// one call with no attempts of other keys (one run at a time, as a rule)
// the one-run statement, for any other the many-run one. Both return the
// same rows.
func (s *Store) checkpointStatement(calls []*ckptCall) (string, []any) {
	if len(calls) != 1 || len(calls[0].loose) > 0 {
		return s.q.checkpoint, checkpointArgs(calls)
	}
	c := calls[0]
	r := &c.req
	return s.q.checkpointOne, []any{nil, r.Lease.RunID, r.Lease.Token, r.Checkpoint.Key, string(r.Checkpoint.Kind),
		r.Checkpoint.Output, c.errJSON, c.attempts, micros(r.LeaseFor), r.Progress, r.Busy, r.Checkpoint.Input}
}

// checkpointArgs are the checkpoint statement's arguments for calls; the
// first, the clock, is set per attempt.
func checkpointArgs(calls []*ckptCall) []any {
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
	args := append([]any{nil, runIDs, tokens, keys, kinds, outputs, errTexts, attempts, leases, looseReq},
		attemptArrays(loose)...)
	return append(args, progressArray(calls, func(c *ckptCall) []byte { return c.req.Progress }), busyArray(calls),
		progressArray(calls, func(c *ckptCall) []byte { return c.req.Checkpoint.Input }))
}

// busyArray is which calls are Busy, as the array the checkpoint statement
// takes: nil, one NULL read as not busy for every call, when none is.
func busyArray(calls []*ckptCall) []bool {
	var out []bool
	for i, c := range calls {
		if c.req.Busy {
			if out == nil {
				out = make([]bool, len(calls))
			}
			out[i] = true
		}
	}
	return out
}

// progressArray is the progress each call publishes, as the array a batch
// statement takes: nil, sent as one NULL that the statement reads as no
// progress for every call, when none publishes any, so that a batch
// without progress costs nothing more. The checkpoints' inputs go the
// same way.
func progressArray(calls []*ckptCall, of func(*ckptCall) []byte) [][]byte {
	var out [][]byte
	for i, c := range calls {
		if p := of(c); p != nil {
			if out == nil {
				out = make([][]byte, len(calls))
			}
			out[i] = p
		}
	}
	return out
}

// completeManyArgs are the completion statement's arguments for calls; the
// first, the clock, is set per attempt.
func completeManyArgs(calls []*ckptCall) []any {
	n := len(calls)
	var (
		runIDs   = make([]string, n)
		tokens   = make([]int64, n)
		statuses = make([]string, n)
		outputs  = make([][]byte, n)
		errTexts = make([]*string, n)
	)
	for i, c := range calls {
		f := c.completion()
		r := &f.req
		runIDs[i], tokens[i], statuses[i], outputs[i], errTexts[i] = r.Lease.RunID, r.Lease.Token, string(r.Status), r.Output, f.errJSON
	}
	progress := progressArray(calls, func(c *ckptCall) []byte { return c.completion().req.Progress })
	return []any{nil, runIDs, tokens, statuses, outputs, errTexts, progress}
}

// rideManyArgs are completeRides' arguments for the checkpoint calls
// rides, each carrying a completion: completeMany's, and the keys of
// their checkpoints. The first, the clock, is set per attempt.
func rideManyArgs(rides []*ckptCall) []any {
	if len(rides) == 0 {
		return nil
	}
	keys := make([]string, len(rides))
	for i, c := range rides {
		keys[i] = c.req.Checkpoint.Key
	}
	return append(completeManyArgs(rides), keys)
}

// cascadeManyArgs are the arguments of the statement that terminates the
// descendants of the completions that carry a child error, and requests
// the cancellation of their children cancelled with them (cascadeMany),
// with the channels; nil when none does. calls are completions and
// checkpoints that carry one (see ckptCall.completion). The first, the
// clock, is set per attempt.
func (s *Store) cascadeManyArgs(calls []*ckptCall) []any {
	var (
		runIDs   []string
		tokens   []int64
		statuses []string
		errTexts []*string
		reasons  []string
	)
	for _, c := range calls {
		if f := c.completion(); f.childJSON != nil {
			r := &f.req
			runIDs, tokens = append(runIDs, r.Lease.RunID), append(tokens, r.Lease.Token)
			statuses, errTexts = append(statuses, string(r.Status)), append(errTexts, f.childJSON)
			reasons = append(reasons, r.ChildCancel)
		}
	}
	if runIDs == nil {
		return nil
	}
	args := s.completeArgs(nil, runIDs, tokens, statuses, errTexts, reasons)
	if s.notify {
		args = append(args, s.channel)
	}
	return args
}

// markWoken reads a row of cascadeMany: when it is a child whose
// cancellation the cascade requested and made ready, it marks every
// completion of fins and rides that carries a child error as having woken
// one (the row does not say whose child it is; the mark only makes the
// caller wake this process's subscribers).
func markWoken(rows pgx.Rows, fins, rides []*ckptCall) error {
	var (
		id    string
		woken bool
	)
	if err := rows.Scan(&id, &woken); err != nil || !woken {
		return err
	}
	for _, c := range slices.Concat(fins, rides) {
		if f := c.completion(); f.childJSON != nil {
			f.woke = true
		}
	}
	return nil
}
