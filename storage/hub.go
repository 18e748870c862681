package storage

import (
	"context"
	"sync"
)

// Hub fans "runs may be ready" hints out to subscribers, and the IDs of
// runs that ended to the subscribers of those; stores that implement
// Notifier or FinishNotifier keep one. A hint never blocks: each ready
// subscriber's channel holds one value, and hints that find it full merge
// into the one pending, so a slow subscriber misses nothing it needs; a
// finished subscriber's channel holds FinishedBuffer IDs, and IDs that find
// it full are dropped (its waiters poll). The zero Hub is ready to use.
type Hub struct {
	mu       sync.Mutex
	subs     map[chan struct{}]func() bool // each subscriber's context.AfterFunc stop
	finished map[chan string]func() bool
	closed   bool
}

// FinishedBuffer is how many run IDs a Finished subscriber's channel holds.
const FinishedBuffer = 256

// Subscribe returns a channel that receives the hub's hints until ctx is
// done or the hub closes; then the channel is closed.
func (h *Hub) Subscribe(ctx context.Context) <-chan struct{} {
	ch := make(chan struct{}, 1)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed || ctx.Err() != nil {
		close(ch)
		return ch
	}
	if h.subs == nil {
		h.subs = make(map[chan struct{}]func() bool)
	}
	// The callback takes h.mu in its own goroutine, so registering it while
	// holding h.mu is safe.
	h.subs[ch] = context.AfterFunc(ctx, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if _, ok := h.subs[ch]; ok {
			delete(h.subs, ch)
			close(ch)
		}
	})
	return ch
}

// SubscribeFinished returns a channel that receives the IDs passed to
// Finished until ctx is done or the hub closes; then the channel is closed.
func (h *Hub) SubscribeFinished(ctx context.Context) <-chan string {
	ch := make(chan string, FinishedBuffer)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed || ctx.Err() != nil {
		close(ch)
		return ch
	}
	if h.finished == nil {
		h.finished = make(map[chan string]func() bool)
	}
	h.finished[ch] = context.AfterFunc(ctx, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if _, ok := h.finished[ch]; ok {
			delete(h.finished, ch)
			close(ch)
		}
	})
	return ch
}

// Finished tells every finished subscriber that the runs ids ended.
func (h *Hub) Finished(ids ...string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.finished {
		for _, id := range ids {
			select {
			case ch <- id:
			default: // full: dropped, the subscriber's waiters poll
			}
		}
	}
}

// Signal wakes every subscriber.
func (h *Hub) Signal() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// Close closes every subscriber's channel; later subscribers get a closed
// channel.
func (h *Hub) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for ch, stop := range h.subs {
		stop()
		delete(h.subs, ch)
		close(ch)
	}
	for ch, stop := range h.finished {
		stop()
		delete(h.finished, ch)
		close(ch)
	}
}
