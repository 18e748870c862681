package sqlitestore

import (
	"context"
	"sync"
)

// notifier fans a "runs may be ready" hint out to subscribers. A send never
// blocks: a subscriber that has not read the last hint yet misses nothing by
// skipping this one.
type notifier struct {
	mu     sync.Mutex
	subs   map[chan struct{}]struct{}
	closed bool
}

func (n *notifier) subscribe(ctx context.Context) chan struct{} {
	ch := make(chan struct{}, 1)
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed || ctx.Err() != nil {
		close(ch)
		return ch
	}
	if n.subs == nil {
		n.subs = make(map[chan struct{}]struct{})
	}
	n.subs[ch] = struct{}{}
	context.AfterFunc(ctx, func() {
		n.mu.Lock()
		defer n.mu.Unlock()
		if _, ok := n.subs[ch]; ok {
			delete(n.subs, ch)
			close(ch)
		}
	})
	return ch
}

func (n *notifier) signal() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for ch := range n.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

func (n *notifier) closeAll() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.closed = true
	for ch := range n.subs {
		delete(n.subs, ch)
		close(ch)
	}
}

// Notifications returns a channel that receives a value after a write of
// this Store made a run ready to claim now (a created, released, resumed,
// restarted or woken run). Writes by other Store instances on the same file
// are not seen: the hints only make this process's workers faster, polling
// stays necessary. The channel is closed when ctx is done or the store
// closes.
func (s *Store) Notifications(ctx context.Context) <-chan struct{} {
	return s.notify.subscribe(ctx)
}
