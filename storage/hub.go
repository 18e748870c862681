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
// finished subscriber's channel holds FinishedBuffer IDs, and when IDs
// find it full the subscriber is told it missed some (Missed), so it
// misses no end it waits for either. The zero Hub is ready to use.
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
	return subscribe(ctx, h, &h.subs, 1)
}

// SubscribeFinished returns a channel that receives the IDs passed to
// Finished until ctx is done or the hub closes; then the channel is closed.
func (h *Hub) SubscribeFinished(ctx context.Context) <-chan string {
	return subscribe(ctx, h, &h.finished, FinishedBuffer)
}

// subscribe adds a channel of size to the subscribers subs of h, removed
// and closed when ctx is done; a closed hub or a done ctx gets a closed
// channel.
func subscribe[T any](ctx context.Context, h *Hub, subs *map[chan T]func() bool, size int) <-chan T {
	ch := make(chan T, size)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed || ctx.Err() != nil {
		close(ch)
		return ch
	}
	if *subs == nil {
		*subs = make(map[chan T]func() bool)
	}
	// The callback takes h.mu in its own goroutine, so registering it while
	// holding h.mu is safe.
	(*subs)[ch] = context.AfterFunc(ctx, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if _, ok := (*subs)[ch]; ok {
			delete(*subs, ch)
			close(ch)
		}
	})
	return ch
}

// Missed is what a finished subscriber receives, in place of run IDs,
// when some may not have reached it: its channel was full, or the store's
// subscription to the server's announcements was down for a while (see
// Gap). No run has the empty ID. A subscriber that receives it treats
// every run it waits on as possibly ended.
const Missed = ""

// Finished tells every finished subscriber that the runs ids ended. A
// subscriber whose channel is full gets Missed instead of the IDs that do
// not fit.
func (h *Hub) Finished(ids ...string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.finished {
		for _, id := range ids {
			sendFinished(ch, id)
		}
	}
}

// Gap tells every finished subscriber that announcements may have been
// missed (Missed): the store's subscription to them was down, and is back.
func (h *Hub) Gap() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.finished {
		sendFinished(ch, Missed)
	}
}

// sendFinished sends id to a finished subscriber's channel, or, when it
// is full, empties it and leaves Missed in it, which stands for the IDs
// taken out and this one. The caller holds h.mu, so no other send can
// take the room made.
func sendFinished(ch chan string, id string) {
	select {
	case ch <- id:
		return
	default:
	}
drain:
	for {
		select {
		case <-ch:
		default:
			break drain
		}
	}
	ch <- Missed
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
	closeAll(h.subs)
	closeAll(h.finished)
}

// closeAll stops, removes and closes every subscriber of subs. The caller
// holds the hub's lock.
func closeAll[T any](subs map[chan T]func() bool) {
	for ch, stop := range subs {
		stop()
		delete(subs, ch)
		close(ch)
	}
}
