package pgstore

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// hub fans ready hints out to subscribers. Each subscriber channel has room
// for one value; hints that find it full are merged into the one pending.
type hub struct {
	mu      sync.Mutex
	subs    map[chan struct{}]struct{}
	closed  bool
	started bool
	// listenerPID is the backend process ID of the listening connection
	// while it is connected (tests terminate it to force a reconnect).
	listenerPID atomic.Uint32
	// listening is closed the first time the listener has subscribed.
	listening     chan struct{}
	listeningOnce sync.Once
}

// Notifications returns a channel that receives a value when runs may have
// become ready to claim: created, released ready, woken by an event,
// resumed or restarted, by this process or any other using the same schema
// (through LISTEN/NOTIFY). Runs that become ready by the passing of time are
// found by polling. The channel is closed when ctx is done or the store
// closes. With Options.DisableNotify it never receives.
//
// The first call starts the store's listener: one dedicated connection,
// reconnected after failures, after which every subscriber is woken once in
// case a notification was missed.
func (s *Store) Notifications(ctx context.Context) <-chan struct{} {
	ch := make(chan struct{}, 1)
	h := &s.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		close(ch)
		return ch
	}
	h.subs[ch] = struct{}{}
	context.AfterFunc(ctx, func() { h.unsubscribe(ch) })
	if s.notify && !h.started {
		h.started = true
		s.wg.Add(1)
		go s.listen()
	}
	return ch
}

func (h *hub) unsubscribe(ch chan struct{}) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.subs[ch]; ok {
		delete(h.subs, ch)
		close(ch)
	}
}

func (h *hub) broadcast() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

func (h *hub) closeAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for ch := range h.subs {
		delete(h.subs, ch)
		close(ch)
	}
}

func (h *hub) markListening() {
	h.listeningOnce.Do(func() { close(h.listening) })
}

// poke wakes this process's subscribers at once after a local write made
// runs ready; other processes learn of it through NOTIFY.
func (s *Store) poke() {
	if s.notify {
		s.hub.broadcast()
	}
}

// listen keeps one connection LISTENing on the store's channel until the
// store closes, reconnecting with capped exponential backoff.
func (s *Store) listen() {
	defer s.wg.Done()
	ctx := s.stopCtx
	backoff := 50 * time.Millisecond
	for {
		connected, err := s.listenOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		if connected {
			backoff = 50 * time.Millisecond
		}
		s.log.Warn("notification listener failed; reconnecting", "err", err, "after", backoff)
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(2*backoff, s.retry)
	}
}

// listenOnce connects, subscribes, wakes every subscriber (a notification
// may have been missed while disconnected) and relays notifications until
// the connection fails or ctx ends.
func (s *Store) listenOnce(ctx context.Context) (connected bool, err error) {
	cfg := s.pool.Config().ConnConfig.Copy()
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return false, err
	}
	defer func() {
		s.hub.listenerPID.Store(0)
		closeCtx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		conn.Close(closeCtx)
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{s.channel}.Sanitize()); err != nil {
		return false, err
	}
	s.hub.broadcast()
	s.hub.listenerPID.Store(conn.PgConn().PID())
	s.hub.markListening()
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			return true, err
		}
		s.hub.broadcast()
	}
}
