package runtime

import "sync"

// waiters wakes the callers waiting on a run's result (Wait, Result) when
// this engine ends that run, and only them: with many callers each waiting
// on its own run, a completion costs one wake-up and one read, not one per
// caller. Runs ended by another process are seen by the callers' polling.
type waiters struct {
	mu sync.Mutex
	m  map[string]*runWaiters
}

// runWaiters is the wake-up of one run's callers: done is closed when the
// run ends here; refs counts the callers holding it.
type runWaiters struct {
	done chan struct{}
	refs int
}

// add registers a caller waiting on run id and returns what it waits on;
// the caller calls remove with it when it stops waiting.
func (w *waiters) add(id string) *runWaiters {
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
