package storage

import (
	"context"
	"sync"
)

// Hub fans "runs may be ready" hints out to subscribers; stores that
// implement Notifier keep one. A hint never blocks: each subscriber channel
// holds one value, and hints that find it full merge into the one pending,
// so a slow subscriber misses nothing it needs. The zero Hub is ready to use.
type Hub struct {
	mu     sync.Mutex
	subs   map[chan struct{}]func() bool // each subscriber's context.AfterFunc stop
	closed bool
}

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
}
