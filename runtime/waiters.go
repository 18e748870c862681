package runtime

import (
	"context"
	"sync"
	"time"

	"github.com/stemflow/stem/storage"
)

// waiters wakes the callers waiting on a run's result (Wait, Result) when
// the run ends, and only them: with many callers each waiting on its own
// run, a completion costs one wake-up and one read, not one per caller.
// This engine's own runs wake their callers as they finish; runs ended by
// another process do when the store announces them (see watchFinished),
// and the callers' polling finds them otherwise.
type waiters struct {
	mu sync.Mutex
	m  map[string]*runWaiters
}

// runWaiters is the wake-up of one run's callers: done is closed when the
// run ends here; refs counts the callers holding it. ended, set before
// done is closed when this engine completed the run, is the run's final
// status and outcome as written, which a caller wanting only those need
// not read back.
type runWaiters struct {
	done  chan struct{}
	refs  int
	ended *storage.RunRecord
	// skipped is set when the store announced the run's end while this
	// engine executed it (see heard), and local when a caller waits on
	// the execution here without having read the run (see wait): the
	// execution's end wakes the callers even when it did not end the run.
	skipped, local bool
}

// add registers a caller waiting on run id and returns what it waits on;
// the caller calls remove with it when it stops waiting.
func (w *waiters) add(id string) *runWaiters { return w.register(id, false) }

// addLocal is add for a caller that waits on the run's execution here
// without having read the run: the execution's end wakes it, whatever
// the end (see executionEnded).
func (w *waiters) addLocal(id string) *runWaiters { return w.register(id, true) }

// register is add, marking the run's wait local when local is set, in one
// hold of the lock: an execution ending in between cannot miss the mark.
func (w *waiters) register(id string, local bool) *runWaiters {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.m == nil {
		w.m = map[string]*runWaiters{}
	}
	rw := w.m[id]
	if rw == nil {
		rw = &runWaiters{done: make(chan struct{})}
		w.m[id] = rw
	}
	rw.refs++
	rw.local = rw.local || local
	return rw
}

// remove unregisters a caller that got rw from add.
func (w *waiters) remove(id string, rw *runWaiters) {
	w.mu.Lock()
	defer w.mu.Unlock()
	rw.refs--
	if rw.refs == 0 && w.m[id] == rw {
		delete(w.m, id)
	}
}

// end wakes the callers waiting on run id, which this engine just ended
// as rec says (its ID, workflow, status, output and error). It calls
// mark, which makes the run no longer executing here, under the lock that
// heard (see watchFinished) takes: the store's announcement of the end,
// which may come first, wakes no caller before rec is theirs.
func (w *waiters) end(id string, rec *storage.RunRecord, mark func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	mark()
	if rw := w.m[id]; rw != nil {
		rw.ended = rec
		close(rw.done)
		delete(w.m, id)
	}
}

// heard wakes the callers waiting on run id, which the store announced as
// ended, unless executing says this engine still executes it: its end
// here wakes them, with the outcome (see end).
func (w *waiters) heard(id string, executing func(string) bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if rw := w.m[id]; rw != nil {
		w.hear(id, rw, executing)
	}
}

// hear handles the announcement of the end of run id to its callers rw:
// marked skipped while this engine executes the run, woken otherwise.
// The caller holds w.mu.
func (w *waiters) hear(id string, rw *runWaiters, executing func(string) bool) {
	if executing(id) {
		rw.skipped = true
		return
	}
	close(rw.done)
	delete(w.m, id)
}

// executionEnded wakes the callers waiting on run id, whose execution here
// ended without ending the run, when they need it: every caller, unless
// the engine hears every run's end (everywhere), in which case only those
// whose run's end was announced during the execution (skipped) or who
// wait on the execution without having read the run (local: an end
// announced before they came is theirs to learn), since the announcement
// of any later end wakes the others.
func (w *waiters) executionEnded(id string, everywhere bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if rw := w.m[id]; rw != nil && (!everywhere || rw.skipped || rw.local) {
		close(rw.done)
		delete(w.m, id)
	}
}

// heardAll wakes the callers waiting on every run but those executing
// says this engine still executes: the store's announcements of some runs'
// ends were missed, and each caller reads its run again.
func (w *waiters) heardAll(executing func(string) bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for id, rw := range w.m {
		w.hear(id, rw, executing)
	}
}

// wake wakes every caller waiting on the runs ids.
func (w *waiters) wake(ids ...string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, id := range ids {
		if rw := w.m[id]; rw != nil {
			close(rw.done)
			delete(w.m, id)
		}
	}
}

// watchFinished starts, once, a watch of the runs the store announces as
// finished (storage.FinishNotifier: Postgres NOTIFY, Redis pub/sub), which
// wakes the callers waiting on each, so that Result in a process that is
// not the worker returns within milliseconds of the completion. It lasts
// until the engine or the store closes. Stores that announce nothing are
// left to the callers' polling. It reports whether the store announces
// every run's end, whichever process ends it (storage.EveryFinishNotifier).
func (e *Engine) watchFinished() (everywhere bool) {
	fn, ok := e.cfg.Store.(storage.FinishNotifier)
	if !ok {
		return false
	}
	if ev, ok := fn.(storage.EveryFinishNotifier); ok {
		everywhere = ev.HearsEveryFinish()
	}
	e.mu.Lock()
	e.watchEverywhere = everywhere
	if e.closed {
		e.mu.Unlock()
		return false
	}
	if ready := e.watchReady; ready != nil {
		// Started by another caller: wait until it hears, so that a run
		// ending after this call returns is heard.
		e.mu.Unlock()
		<-ready
		return everywhere
	}
	ctx, cancel := context.WithCancel(context.Background())
	done, ready := make(chan struct{}), make(chan struct{})
	e.watchStop, e.watchDone, e.watchReady = cancel, done, ready
	e.mu.Unlock()
	ids := fn.Finished(ctx)
	close(ready)
	go func() {
		defer close(done)
		for id := range ids {
			// A run this engine executes wakes its callers itself as the
			// execution ends, with its outcome when it completed it: the
			// announcement may come first.
			if id == storage.Missed {
				e.waiters.heardAll(e.executing)
				continue
			}
			e.waiters.heard(id, e.executing)
		}
	}()
	return everywhere
}

// hearing reports whether the watch of the store's announcements (see
// watchFinished) has begun and everywhere announces every run's end: a
// caller registered from now on hears of any run's end.
func (e *Engine) hearing() bool {
	e.mu.Lock()
	ready, everywhere := e.watchReady, e.watchEverywhere
	e.mu.Unlock()
	if ready == nil || !everywhere {
		return false
	}
	select {
	case <-ready:
		return true
	default:
		return false
	}
}

// waitReaders is how many goroutines of the engine at most read runs for
// Wait; readerIdle how long one waits for work before it exits.
const (
	waitReaders = 8
	readerIdle  = 200 * time.Millisecond
)

// waitRead is Get for Wait, read by one of a few goroutines of the
// engine's rather than the caller's: a store read runs deep (a driver's
// decoding, SQLite's C translated to Go), and a goroutine's stack, once
// grown, stays grown while it waits and sets the size Go gives new
// goroutines. Thousands of callers each awaiting a run thus keep small
// stacks. Readers start as reads come and exit when idle.
func (e *Engine) waitRead(ctx context.Context, id string) (RunInfo, error) {
	if err := e.checkOpen(); err != nil {
		return RunInfo{}, err
	}
	req := waitReadReq{ctx: ctx, id: id, done: make(chan waitReadRes, 1)}
	for sent := false; !sent; {
		select {
		case e.reads <- req: // an idle reader took it
			sent = true
			continue
		default:
		}
		if e.readersActive.Add(1) <= waitReaders {
			go e.reader(req)
			break
		}
		e.readersActive.Add(-1)
		t := time.NewTimer(readerIdle)
		select {
		case e.reads <- req:
			sent = true
		case <-ctx.Done():
			t.Stop()
			return RunInfo{}, ctx.Err()
		case <-t.C: // a reader may have gone idle and left: look again
		}
		t.Stop()
	}
	res := <-req.done
	return res.info, res.err
}

// waitReadReq is one read for waitRead; its answer goes to done.
type waitReadReq struct {
	ctx  context.Context
	id   string
	done chan waitReadRes
}

type waitReadRes struct {
	info RunInfo
	err  error
}

// reader serves first, then every read handed to it, until none comes for
// readerIdle.
func (e *Engine) reader(first waitReadReq) {
	defer e.readersActive.Add(-1)
	serve := func(req waitReadReq) {
		info, err := e.Get(req.ctx, req.id)
		req.done <- waitReadRes{info, err}
	}
	serve(first)
	t := time.NewTimer(readerIdle)
	defer t.Stop()
	for {
		select {
		case req := <-e.reads:
			serve(req)
			t.Reset(readerIdle)
		case <-t.C:
			return
		}
	}
}

// executing reports whether this engine executes run id now and has not
// yet ended it: its end here will wake the run's waiters, so a waiter
// registered before asking need not read the run first.
func (e *Engine) executing(id string) bool {
	e.mu.Lock()
	x, eager := e.active[id], e.eager[id]
	e.mu.Unlock()
	return eager || x != nil && !x.ended.Load() && x.replay == nil
}
