package pgstore

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// listener is the state of the store's LISTEN connection, started by the
// first call that needs it (Notifications or Finished). One connection
// listens on both the ready channel and the ended channel, so that a
// completion, which notifies both, is heard by one backend of the store,
// not two. What it hears goes to the store's storage.Hub, which fans it out
// to subscribers; a hint or an end no one subscribed to costs the hub
// nothing.
type listener struct {
	// channels are the channels LISTENed to (raw names).
	channels []string
	// heard passes one notification on.
	heard func(channel, payload string)
	// reconnected, when set, runs after each (re)subscription.
	reconnected func()

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
// case a notification was missed. Behind a transaction pooler without
// Options.ListenURL, it starts the store's poll instead (see poll): other
// processes' writes wake subscribers within Options.NotifyPoll.
func (s *Store) Notifications(ctx context.Context) <-chan struct{} {
	ch := s.hub.Subscribe(ctx)
	if s.notify {
		s.startListener(&s.listener)
	}
	return ch
}

// startListener starts l's goroutine once, unless the store is closed:
// the LISTEN connection, or in a store that polls (see poll), the poll.
func (s *Store) startListener(l *listener) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.started || s.closed.Load() {
		return
	}
	l.started = true
	s.wg.Add(1)
	if s.polls() {
		go s.poll(l)
		return
	}
	go s.listen(l)
}

// initListeners sets up the listener: a ready hint wakes subscribers
// (after a reconnection every subscriber is woken once, in case a hint was
// missed, and finished subscribers are told they may have missed ends),
// and each payload on the ended channel is the ID of a run that ended.
func (s *Store) initListeners() {
	s.listener = listener{
		channels: []string{s.channel, s.endedChannel},
		heard: func(channel, payload string) {
			if channel == s.endedChannel {
				s.hub.Finished(payload)
			} else {
				s.hub.Signal()
			}
		},
	}
	subscribed := false
	s.listener.reconnected = func() {
		s.hub.Signal()
		if subscribed {
			s.hub.Gap() // ends announced while it was down were missed
		}
		subscribed = true
	}
	s.listener.ready = make(chan struct{})
}

// Finished returns a channel that receives the ID of each run that ends
// (completes, errors or is terminated) after the call, by this process or
// any other using the same schema, through the store's LISTEN connection
// (the one Notifications starts); see storage.FinishNotifier. With
// Options.DisableNotify it never receives. The channel is closed when ctx
// is done or the store closes. A store that polls (behind a transaction
// pooler without Options.ListenURL) hears no ID: it tells its subscribers
// that ends may have been missed (storage.Missed) within about a second of
// any commit that wrote (see poll).
//
// The first call waits, at most Options.CallTimeout, until the listener has
// subscribed (or the poll has read once), so that a run ending after
// Finished returns is heard: an ID missed before then could not be
// recovered as a ready hint is.
func (s *Store) Finished(ctx context.Context) <-chan string {
	ch := s.hub.SubscribeFinished(ctx)
	if s.notify {
		s.startListener(&s.listener)
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
// end: true unless Options.DisableNotify, or the store polls (behind a
// transaction pooler without Options.ListenURL), where Finished only says
// that ends may have been missed, at most once a second: a caller awaiting
// a run there reads it at its own pace too, sooner at first, so that the
// result of a short run comes within milliseconds; see
// storage.EveryFinishNotifier.
func (s *Store) HearsEveryFinish() bool { return s.notify && !s.polls() }

// completeArgs are the arguments of q.complete: args, and the channel it
// notifies on when notifications are on.
func (s *Store) completeArgs(args ...any) []any {
	if s.notify {
		args = append(args, s.endedChannel)
	}
	return args
}

// notifyFinishedTx queues a notification that each of the runs ids ended,
// sent when tx commits.
func (s *Store) notifyFinishedTx(ctx context.Context, tx pgx.Tx, ids []string) error {
	if !s.notify || len(ids) == 0 {
		return nil
	}
	_, err := tx.Exec(ctx, s.q.notifyFinished, s.endedChannel, ids)
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

// listen keeps one connection LISTENing on l's channels until the store
// closes, reconnecting with capped exponential backoff.
func (s *Store) listen(l *listener) {
	defer s.wg.Done()
	ctx := s.stopCtx
	backoff := 50 * time.Millisecond
	for {
		connected, err := s.listenOnce(ctx, l)
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

// listenOnce connects, subscribes, tells l it did (a notification may have
// been missed while disconnected) and relays notifications until the
// connection fails or ctx ends.
func (s *Store) listenOnce(ctx context.Context, l *listener) (connected bool, err error) {
	cfg := s.pool.Config().ConnConfig
	if s.listenCfg != nil {
		cfg = s.listenCfg
	}
	conn, err := pgx.ConnectConfig(ctx, cfg.Copy())
	if err != nil {
		return false, err
	}
	defer func() {
		l.pid.Store(0)
		closeCtx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		conn.Close(closeCtx)
	}()
	for _, ch := range l.channels {
		if err := s.listenOn(ctx, conn, ch); err != nil {
			return false, err
		}
	}
	if l.reconnected != nil {
		l.reconnected()
	}
	l.pid.Store(conn.PgConn().PID())
	l.readyOnce.Do(func() { close(l.ready) })
	for {
		n, err := s.waitNotification(ctx, conn)
		if err != nil {
			return true, err
		}
		l.heard(n.Channel, n.Payload)
	}
}
