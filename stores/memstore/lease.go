package memstore

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/stemflow/stem/storage"
)

// defaultQueues is what a claim naming no queue takes from, and
// defaultQueueNames what NextWake then looks at (ClaimQueues and
// QueueNames, without allocating them for every call).
var (
	defaultQueues     = []storage.Queue{{Name: storage.DefaultQueue}}
	defaultQueueNames = []string{storage.DefaultQueue}
)

// source is one index a claim takes from, with its queue and the limits
// the claim gives the queue.
type source struct {
	ix  *index
	q   *queueState
	lim *storage.Queue
}

// aside is a due entry a claim passed over, pushed back when it is done.
type aside struct {
	ix *index
	e  entry
}

// Claim leases up to req.Limit claimable runs of req.Workflows on
// req.Queues: highest priority first, recoveries before ready runs within
// a priority, then oldest ReadyAt or lease expiry. A ready run is passed
// over while its queue or partition has no free place, or while it would
// start and its queue's rate window is full. Only the indexes of the
// versions req.Versions allows are looked at, so the runs of the others
// are never seen, let alone counted against req.Limit.
func (s *Store) Claim(ctx context.Context, req storage.ClaimRequest) ([]storage.ClaimedRun, error) {
	if err := req.Validate(); err != nil {
		return nil, refuse(err)
	}
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	if req.Empty() {
		return nil, nil
	}
	now := s.clock()
	nowNano := now.UnixNano()
	queues := req.Queues
	if len(queues) == 0 {
		queues = defaultQueues
	}
	var buf [8]source
	srcs := buf[:0]
	for i := range queues {
		lim := &queues[i]
		q := s.queues[lim.Name]
		if q == nil {
			continue
		}
		if lim.Rate > 0 {
			q.keepStarts(lim.Rate)
		}
		for _, wf := range req.Workflows {
			q.indexes(wf, req.Versions, func(ix *index) {
				ix.promote(nowNano)
				srcs = append(srcs, source{ix: ix, q: q, lim: lim})
			})
		}
	}
	var out []storage.ClaimedRun
	var passed []aside
	for len(out) < req.Limit {
		// The best head of every source's heaps: a recovery goes before
		// a ready run of its priority.
		var best *source
		var head entry
		recovery := false
		for i := range srcs {
			src := &srcs[i]
			if h := src.ix.expired; len(h) > 0 && (best == nil || h[0].prio > head.prio || h[0].prio == head.prio && (!recovery || h[0].at < head.at)) {
				best, head, recovery = src, h[0], true
			}
			if h := src.ix.ready; len(h) > 0 && !src.q.full(src.lim) && (best == nil || h[0].prio > head.prio || h[0].prio == head.prio && !recovery && h[0].at < head.at) {
				best, head, recovery = src, h[0], false
			}
		}
		if best == nil {
			break
		}
		r := head.r
		if recovery {
			best.ix.expired.pop()
			if !leaseCurrent(head) {
				continue // a lease that has ended
			}
			if until := r.rec.LeaseUntil.UnixNano(); until > nowNano {
				best.ix.pushLease(&best.ix.leases, entry{at: until, gen: head.gen, r: r})
				continue // extended since it expired
			}
		} else {
			best.ix.ready.pop()
			if !readyCurrent(head) {
				continue // superseded
			}
			if at := r.rec.ReadyAt.UnixNano(); at > nowNano {
				// Not due after all: the clock went back.
				best.ix.pushReady(&best.ix.waiting, entry{at: at, gen: head.gen, r: r})
				continue
			}
			if best.q.passOver(r, best.lim, nowNano) {
				passed = append(passed, aside{best.ix, head})
				continue
			}
		}
		if out == nil {
			out = make([]storage.ClaimedRun, 0, min(req.Limit, 16))
		}
		out = append(out, s.claim(r, req, now, recovery))
	}
	for _, p := range passed {
		p.ix.pushReady(&p.ix.ready, p.e)
	}
	return out, nil
}

func (s *Store) claim(r *run, req storage.ClaimRequest, now time.Time, recovered bool) storage.ClaimedRun {
	rec := &r.rec
	rec.Status = storage.StatusRunning
	rec.ReadyAt = nil
	rec.Owner = req.Owner
	rec.LeaseUntil = now.Add(req.LeaseFor)
	rec.Token++
	rec.Hold = nil
	if recovered {
		rec.Recoveries++
	}
	if !r.started {
		r.started = true
		r.q.recordStart(now.UnixNano())
	}
	rec.Active = nil
	rec.UpdatedAt = now
	s.track(r, now)
	r.ix.pushLease(&r.ix.leases, entry{at: rec.LeaseUntil.UnixNano(), gen: uint64(rec.Token), r: r})
	rp := r.replay()
	return storage.ClaimedRun{
		Replay:       &rp,
		Lease:        storage.Lease{RunID: rec.ID, Owner: rec.Owner, Token: rec.Token},
		Workflow:     rec.Workflow,
		ParentID:     rec.ParentID,
		Input:        clone(rec.Input),
		Recoveries:   rec.Recoveries,
		SuspendState: clone(r.state),
		Wait:         cloneWait(rec.Wait),
		Deadline:     cloneTime(rec.Deadline),
		Version:      rec.Version,
		Headers:      cloneHeaders(rec.Headers),
		LeaseUntil:   rec.LeaseUntil,

		CancelRequested: rec.CancelRequested,
		CancelReason:    rec.CancelReason,
	}
}

// Heartbeat extends the lease, fenced, records the active step when named,
// and reports a requested pause. A lost lease says why.
func (s *Store) Heartbeat(ctx context.Context, req storage.HeartbeatRequest) (storage.HeartbeatResult, error) {
	if err := req.Validate(); err != nil {
		return storage.HeartbeatResult{}, refuse(err)
	}
	if err := s.lock(ctx); err != nil {
		return storage.HeartbeatResult{}, err
	}
	defer s.mu.Unlock()
	r := s.leased(req.Lease)
	if r == nil {
		return storage.HeartbeatResult{}, s.lost("heartbeat", req.Lease)
	}
	now := s.clock()
	r.rec.LeaseUntil = now.Add(req.LeaseFor)
	r.rec.UpdatedAt = now
	if req.Step != nil {
		r.rec.Active = cloneActive(req.Step)
	}
	r.publish(req.Progress)
	return storage.HeartbeatResult{PauseRequested: r.rec.PauseRequested, CancelRequested: r.rec.CancelRequested}, nil
}

// lost is the error of a fenced write op whose lease l does not hold, with
// the reason judged from the run as it is; the caller holds the mutex.
func (s *Store) lost(op string, l storage.Lease) error {
	r := s.runs[l.RunID]
	if r == nil {
		return fmt.Errorf("memstore: %s: %w", op, storage.LeaseLost(op, l, false, "", 0, time.Time{}, s.clock()))
	}
	return fmt.Errorf("memstore: %s: %w", op, storage.LeaseLost(op, l, true, r.rec.Status, r.rec.Token, r.rec.LeaseUntil, s.clock()))
}

// letGo applies a release by the holder of a lease that a Restart revoked
// while it was live: the new execution becomes ready now and the old lease
// ends. It reports false, changing nothing, when l is not such a lease.
func (s *Store) letGo(l storage.Lease, now time.Time) bool {
	r := s.runs[l.RunID]
	if r == nil || storage.LeaseLost("suspend", l, true, r.rec.Status, r.rec.Token, r.rec.LeaseUntil, now).Loss != storage.LossRestarted {
		return false
	}
	rec := &r.rec
	r.release(now)
	ready := now
	rec.ReadyAt = &ready
	if rec.Status == storage.StatusWaiting {
		rec.Status = storage.StatusQueued
	}
	rec.UpdatedAt = now
	s.schedule(r, now)
	if rec.Status == storage.StatusQueued {
		s.hub.Signal()
	}
	return true
}

// Suspend parks a running run, fenced, unless its wait is satisfied at once.
// A refusal is applied first: the refused event checkpoint is deleted and
// its attempt recorded.
func (s *Store) Suspend(ctx context.Context, req storage.SuspendRequest) (storage.SuspendResult, error) {
	if err := req.Validate(); err != nil {
		return storage.SuspendResult{}, refuse(err)
	}
	if err := s.lock(ctx); err != nil {
		return storage.SuspendResult{}, err
	}
	defer s.mu.Unlock()
	r := s.leased(req.Lease)
	if r == nil {
		if now := s.clock(); req.Releases(now) && s.letGo(req.Lease, now) {
			return storage.SuspendResult{}, nil
		}
		return storage.SuspendResult{}, s.lost("suspend", req.Lease)
	}
	r.publish(req.Progress)
	if f := req.Refuse; f != nil {
		i, ok := r.find(f.Key)
		if !ok || r.cps[i].Kind != storage.KindEvent {
			return storage.SuspendResult{}, fmt.Errorf("memstore: suspend run %q: refuse %q: no event checkpoint of the key in execution %d: %w",
				r.rec.ID, f.Key, r.rec.Execution, storage.ErrInvalidState)
		}
		r.remove(i)
		r.attempts = append(r.attempts, cloneAttempt(f.Attempt, r.rec.Execution))
		r.loose = true
	}
	now := s.clock()
	rec := &r.rec
	rec.UpdatedAt = now
	rec.Active = nil
	if cp := req.Checkpoint; cp != nil {
		if _, ok := r.find(cp.Key); !ok {
			r.write(cp.Key, cp.Kind, clone(cp.Output), cp.Error, now)
		}
	}
	if w := req.Wait; w != nil {
		if delivered := r.satisfy(w, req.LeaseFor, now); delivered != nil {
			return storage.SuspendResult{Delivered: delivered}, nil
		}
		s.setWait(r, w)
	}
	r.state = clone(req.SuspendState)
	rec.ReadyAt = cloneTime(req.ReadyAt)
	if rec.CancelRequested && !req.CancelSeen && req.Hold == nil && (rec.ReadyAt == nil || rec.ReadyAt.After(now)) {
		rec.ReadyAt = &now // its worker has yet to see the cancellation
	}
	rec.Hold = req.Hold.Clone()
	r.release(now)
	var res storage.SuspendResult
	switch {
	case rec.PauseRequested:
		rec.PauseRequested = false
		rec.Status = storage.StatusPaused
		res.Paused = true
	case rec.ReadyAt != nil && !rec.ReadyAt.After(now):
		rec.Status = storage.StatusQueued
		s.hub.Signal()
	default:
		rec.Status = storage.StatusWaiting
	}
	s.schedule(r, now)
	return res, nil
}

// TakeEvent resolves a wait without parking, fenced, as Suspend's
// delivery does; see storage.Store.
func (s *Store) TakeEvent(ctx context.Context, req storage.TakeEventRequest) (*storage.Checkpoint, error) {
	if err := req.Validate(); err != nil {
		return nil, refuse(err)
	}
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	r := s.leased(req.Lease)
	if r == nil {
		return nil, s.lost("take event", req.Lease)
	}
	now := s.clock()
	cp := r.satisfy(req.Wait, req.LeaseFor, now)
	if cp != nil {
		r.rec.UpdatedAt = now
	}
	return cp, nil
}

// satisfy resolves w at once, if it can: the checkpoint of the first of
// its cases that has one, or else its oldest buffered event, consumed and
// written as its case's checkpoint. The lease is then extended by leaseFor
// (when positive) and a copy of the checkpoint returned; otherwise nothing
// changes and it returns nil.
func (r *run) satisfy(w *storage.Wait, leaseFor time.Duration, now time.Time) *storage.Checkpoint {
	var i int
	ok := false
	for _, c := range w.Cases() {
		if i, ok = r.find(c.Key); ok {
			break
		}
	}
	if !ok {
		j := r.buffered(w)
		if j < 0 {
			return nil
		}
		c, _ := w.Case(r.events[j].topic)
		payload := r.events[j].payload
		r.events = slices.Delete(r.events, j, j+1)
		i = r.write(c.Key, c.DeliveryKind(), payload, nil, now)
	}
	if leaseFor > 0 {
		r.rec.LeaseUntil = now.Add(leaseFor)
	}
	cp := cloneCheckpoint(r.cps[i])
	return &cp
}

// Complete finishes a run, fenced, and delivers req.Notify when set. With
// req.ChildError it also ends, as Terminate does, every unfinished
// descendant that did not abandon its parent.
func (s *Store) Complete(ctx context.Context, req storage.CompleteRequest) error {
	if err := req.Validate(); err != nil {
		return refuse(err)
	}
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	r := s.leased(req.Lease)
	if r == nil {
		return s.lost("complete", req.Lease)
	}
	s.complete(r, req, s.clock())
	return nil
}

// complete finishes r as Complete does; the caller holds the mutex and
// checked the lease.
func (s *Store) complete(r *run, req storage.CompleteRequest, now time.Time) {
	r.publish(req.Progress)
	s.finish(r, req.Status, clone(req.Output), cloneError(req.Error), now)
	if req.ChildError != nil {
		s.terminateChildren(r, *req.ChildError, req.ChildCancel, nil, now)
	}
	if req.Notify != nil {
		s.sendNotify(req.Notify, now)
	}
}

// finish makes r final, clearing its lease, wait and suspension data.
func (s *Store) finish(r *run, status storage.RunStatus, output []byte, errInfo *storage.ErrorInfo, now time.Time) {
	defer s.hub.Finished(r.rec.ID)
	rec := &r.rec
	rec.Status = status
	rec.Output = output
	rec.Error = errInfo
	rec.PauseRequested = false
	rec.ReadyAt = nil
	rec.Active = nil
	ended := now
	rec.EndedAt = &ended
	rec.UpdatedAt = now
	r.release(now)
	s.clearWait(r)
	r.state = nil
	s.track(r, now)
}

// NextWake finds the earliest current entry of the named workflows'
// indexes on the named queues, of the versions req.Versions allows,
// discarding stale heads as Claim does. An entry among the due is due now.
func (s *Store) NextWake(ctx context.Context, req storage.NextWakeRequest) (storage.NextWake, error) {
	if err := req.Validate(); err != nil {
		return storage.NextWake{}, refuse(err)
	}
	if err := s.lock(ctx); err != nil {
		return storage.NextWake{}, err
	}
	defer s.mu.Unlock()
	now := s.clock().UnixNano()
	var w storage.NextWake
	var earliest int64
	take := func(at int64) {
		if !w.Found || at < earliest {
			w.Found, earliest = true, at
		}
	}
	names := req.Queues
	if len(names) == 0 {
		names = defaultQueueNames
	}
	for _, name := range names {
		q := s.queues[name]
		if q == nil {
			continue
		}
		for _, wf := range req.Workflows {
			q.indexes(wf, req.Versions, func(ix *index) {
				if at, ok := ix.nextWake(now); ok {
					take(at)
				}
			})
		}
	}
	if w.Found {
		w.After = max(0, time.Duration(earliest-now))
	}
	return w, nil
}

// nextWake returns the earliest time (Unix nanoseconds) at which a run of
// the index is due or its lease expires, false when none: the current
// heads of its heaps, the stale ones discarded as Claim does.
func (ix *index) nextWake(now int64) (int64, bool) {
	ix.promote(now)
	var earliest int64
	found := false
	take := func(at int64) {
		if !found || at < earliest {
			found, earliest = true, at
		}
	}
	for _, h := range []*entryHeap{&ix.ready, &ix.waiting} {
		for len(*h) > 0 {
			if e := (*h)[0]; readyCurrent(e) {
				take(e.r.rec.ReadyAt.UnixNano())
				break
			}
			h.pop() // superseded
		}
	}
	for _, h := range []*entryHeap{&ix.expired, &ix.leases} {
		for len(*h) > 0 {
			e := (*h)[0]
			if !leaseCurrent(e) {
				h.pop() // a lease that has ended
				continue
			}
			if until := e.r.rec.LeaseUntil.UnixNano(); until > e.at {
				h.pop() // extended since the entry was pushed
				ix.pushLease(&ix.leases, entry{at: until, gen: e.gen, r: e.r})
				continue
			}
			take(e.at)
			break
		}
	}
	return earliest, found
}
