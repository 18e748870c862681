package runtime

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/stemflow/stem/storage"
)

// workPool is what Run executes runs with: its slots, the executions it
// waits for when it stops, and what a start needs to know to hand a run
// straight to it (an eager start). It exists while Run runs.
type workPool struct {
	ctx   context.Context
	slots chan struct{}
	freed chan struct{}
	// unlimited holds the work queues that set no limit: only their runs
	// start eagerly; a limited queue's runs go through its claims.
	unlimited map[string]bool
	// backlog is set while the last claim came back full of runs other
	// than those this engine queued itself since: others' runs are
	// queued, and a new one waits its turn behind them.
	backlog atomic.Bool

	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
	// queued holds the runs this engine started that did not start
	// eagerly, until a claim takes them (at most maxQueuedHere).
	queued map[string]bool
}

// maxQueuedHere bounds workPool.queued: past it, runs this engine queued
// count as others' (a conservative backlog).
const maxQueuedHere = 4096

// free gives a slot back and tells Run's claim loop, which may be waiting
// for one: an eager start's slot, taken before its create, is given back
// like an execution's.
func (p *workPool) free() {
	<-p.slots
	select {
	case p.freed <- struct{}{}:
	default:
	}
}

// noteQueued records runs this engine started without an eager start.
func (p *workPool) noteQueued(runs []storage.NewRun) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := range runs {
		if runs[i].Lease == nil && len(p.queued) < maxQueuedHere {
			p.queued[runs[i].ID] = true
		}
	}
}

// claimed records what a claim of limit runs took: it is a backlog of
// others' runs when it came back full and took one this engine did not
// queue itself.
func (p *workPool) claimed(runs []storage.ClaimedRun, limit int) {
	p.mu.Lock()
	others := false
	for _, r := range runs {
		if p.queued[r.Lease.RunID] {
			delete(p.queued, r.Lease.RunID)
		} else {
			others = true
		}
	}
	p.mu.Unlock()
	p.backlog.Store(others && len(runs) == limit)
}

// launch executes r on its own goroutine, in a slot the caller holds. It
// reports false, doing nothing, once the pool is closed.
func (p *workPool) launch(e *Engine, r storage.ClaimedRun) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.wg.Add(1)
	// Counted from here, not from the goroutine's start, so a run held is
	// never a moment without work.
	e.working.Add(1)
	free := sync.OnceFunc(p.free)
	go func() {
		defer p.wg.Done()
		defer e.working.Add(-1)
		e.execute(p.ctx, r, free)
		e.mu.Lock()
		delete(e.eager, r.Lease.RunID) // when a hook did not execute it
		e.mu.Unlock()
		free()
	}()
	return true
}

// close stops launches and waits for every execution launched.
func (p *workPool) close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.wg.Wait()
}

// eagerSlots leases to this engine, for an eager start, the runs of a
// create that it can begin at once: while Run runs, for each run of a
// workflow it works, on a queue without limits, not delayed, while no
// backlog waits and a slot is free. Each such run gets NewRun.Lease and
// holds a slot; the caller hands each to startEager or gives the slots
// back. It returns the pool and the indexes of the runs leased.
func (e *Engine) eagerSlots(runs []storage.NewRun) (*workPool, []int) {
	if e.cfg.DisableEagerStart {
		return nil, nil
	}
	e.mu.Lock()
	p := e.pool
	e.mu.Unlock()
	if p == nil || p.ctx.Err() != nil {
		return nil, nil
	}
	if p.backlog.Load() {
		return p, nil // the runs wait their turn behind others'
	}
	var names []string
	var leased []int
	for i := range runs {
		r := &runs[i]
		if r.StartAt != nil || r.Lease != nil || r.Key != nil || r.OnExisting == storage.ExistingReplace || !p.unlimited[r.QueueOf()] {
			continue
		}
		if names == nil {
			e.mu.Lock()
			names = e.sealed.claimable(e.clock.Now(), slices.Clone(e.names))
			e.mu.Unlock()
		}
		if !slices.Contains(names, r.Workflow) {
			continue
		}
		select {
		case p.slots <- struct{}{}:
		default:
			return p, leased // no slot free
		}
		r.Lease = &storage.EagerLease{Owner: e.cfg.WorkerID, For: e.cfg.LeaseDuration}
		leased = append(leased, i)
	}
	return p, leased
}

// startEager begins the runs eagerSlots leased, as created (res, in the
// order of runs), and frees the slots of those the store did not create
// leased to this engine (an ID that existed).
func (e *Engine) startEager(p *workPool, leased []int, res []storage.CreateResult) {
	for _, i := range leased {
		rec := res[i].Run
		if !res[i].Created || rec.Status != storage.StatusRunning || rec.Owner != e.cfg.WorkerID {
			p.free()
			continue
		}
		c := storage.ClaimedRun{
			Lease:      storage.Lease{RunID: rec.ID, Owner: rec.Owner, Token: rec.Token},
			Workflow:   rec.Workflow,
			ParentID:   rec.ParentID,
			Input:      rec.Input,
			Deadline:   rec.Deadline,
			Version:    rec.Version,
			Headers:    rec.Headers,
			LeaseUntil: rec.LeaseUntil,
			Replay:     &storage.Replay{Execution: rec.Execution},
			// A cancellation can be asked for a run as soon as it exists.
			CancelRequested: rec.CancelRequested,
			CancelReason:    rec.CancelReason,
		}
		e.mu.Lock()
		if e.eager == nil {
			e.eager = map[string]bool{}
		}
		e.eager[rec.ID] = true
		e.mu.Unlock()
		if !p.launch(e, c) {
			e.mu.Lock()
			delete(e.eager, rec.ID)
			e.mu.Unlock()
			// The engine stopped meanwhile: hand the run back at once.
			p.free()
			e.releaseClaimed(c)
		}
	}
}

// dropEager frees the slots eagerSlots took for a create that failed, and
// takes the leases off its runs.
func dropEager(p *workPool, leased []int, runs []storage.NewRun) {
	for _, i := range leased {
		runs[i].Lease = nil
		p.free()
	}
}
