package pgstore

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// listener is the state of the store's LISTEN connection. Its hints go to
// the store's storage.Hub, which fans them out to subscribers.
type listener struct {
	mu      sync.Mutex
	started bool // guarded by mu, as is starting after Close
	// pid is the backend process ID of the listening connection while it is
	// connected (tests terminate it to force a reconnect).
	pid atomic.Uint32
	// ready is closed the first time the listener has subscribed.
	ready     chan struct{}
	readyOnce sync.Once
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
	ch := s.hub.Subscribe(ctx)
	if s.notify {
		s.startListener()
	}
	return ch
}

// startListener starts the listener goroutine once, unless the store is
// closed.
func (s *Store) startListener() {
	l := &s.listener
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.started || s.closed.Load() {
		return
	}
	l.started = true
	s.wg.Add(1)
	go s.listen()
}

// Finished returns a channel that receives the ID of each run that ends
// (completes, errors or is terminated) after the call, by this process or
// any other using the same schema, through the same LISTEN connection as
// Notifications; see storage.FinishNotifier. With Options.DisableNotify it
// never receives. The channel is closed when ctx is done or the store
// closes.
//
// The first call waits, at most Options.CallTimeout, until the listener has
// subscribed, so that a run ending after Finished returns is heard: an ID
// missed before then could not be recovered as a ready hint is.
func (s *Store) Finished(ctx context.Context) <-chan string {
	ch := s.hub.SubscribeFinished(ctx)
	if s.notify {
		s.startListener()
		t := time.NewTimer(s.pool.timeout)
		defer t.Stop()
		select {
		case <-s.listener.ready:
		case <-ctx.Done():
		case <-s.stopCtx.Done():
		case <-t.C: // a listener that cannot connect leaves waiters to poll
		}
	}
	return ch
}

// HearsEveryFinish reports whether Finished hears runs other processes
// end: true unless Options.DisableNotify; see storage.EveryFinishNotifier.
func (s *Store) HearsEveryFinish() bool { return s.notify }

// completeArgs are the arguments of q.complete: args, and the channel it
// notifies on when notifications are on.
func (s *Store) completeArgs(args ...any) []any {
	if s.notify {
		args = append(args, s.channel)
	}
	return args
}

// notifyFinishedTx queues a notification that each of the runs ids ended,
// sent when tx commits.
func (s *Store) notifyFinishedTx(ctx context.Context, tx pgx.Tx, ids []string) error {
	if !s.notify || len(ids) == 0 {
		return nil
	}
	_, err := tx.Exec(ctx, s.q.notifyFinished, s.channel, ids)
	return err
}

// poke wakes this process's subscribers at once after a local write made
// runs ready; other processes learn of it through NOTIFY.
func (s *Store) poke() {
	if s.notify {
		s.hub.Signal()
	}
}

// notifyTx queues a ready notification, sent when tx commits.
func (s *Store) notifyTx(ctx context.Context, tx pgx.Tx) error {
	if !s.notify {
		return nil
	}
	_, err := tx.Exec(ctx, s.q.notify, s.channel)
	return err
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
		s.listenerFailed(err, backoff)
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
		s.listener.pid.Store(0)
		closeCtx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		conn.Close(closeCtx)
	}()
	if err := s.listenOn(ctx, conn); err != nil {
		return false, err
	}
	s.hub.Signal()
	s.listener.pid.Store(conn.PgConn().PID())
	s.listener.readyOnce.Do(func() { close(s.listener.ready) })
	for {
		n, err := s.waitNotification(ctx, conn)
		if err != nil {
			return true, err
		}
		if id, ok := strings.CutPrefix(n.Payload, finishedPrefix); ok {
			s.hub.Finished(id)
		} else {
			s.hub.Signal()
		}
	}
}
