package redisstore

import (
	"context"
	"strings"
)

// Notifications implements storage.Notifier with Redis pub/sub: the scripts
// publish on the prefix's wake channel whenever they make a run ready now.
// The store holds one subscription to it, opened by the first call and
// closed by Close, and fans its messages out to every caller through a
// storage.Hub. They are hints only; the channel is closed when ctx is done
// or the store closes.
func (s *Store) Notifications(ctx context.Context) <-chan struct{} {
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	ch := s.hub.Subscribe(ctx)
	s.listen(ctx)
	return ch
}

// Finished returns a channel that receives the ID of each run that ends
// (completes, errors or is terminated) after the call, by this process or
// any other using the same prefix: the scripts that end runs publish
// finishedPrefix and the ID on the wake channel, which the same
// subscription as Notifications reads; see storage.FinishNotifier. The
// channel is closed when ctx is done or the store closes.
func (s *Store) Finished(ctx context.Context) <-chan string {
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	ch := s.hub.SubscribeFinished(ctx)
	s.listen(ctx)
	return ch
}

// HearsEveryFinish reports that Finished hears the runs every process
// ends, through the server's pub/sub; see storage.EveryFinishNotifier.
func (s *Store) HearsEveryFinish() bool { return true }

// finishedPrefix starts a wake-channel message that a run ended; its ID
// follows (scripts/lib/state.lua, finish). A ready hint's message is "1".
const finishedPrefix = "f:"

// listen subscribes to the wake channel, once, unless the store is closed,
// and passes every message to the hub until the store closes. It waits for
// the server's confirmation, so that every change after the first
// Notifications or Finished call returns is seen; a failure only costs the
// hints (the engine polls), and go-redis keeps trying to subscribe again.
// The caller holds closeMu.
func (s *Store) listen(ctx context.Context) {
	if s.listening || s.closed.Load() || ctx.Err() != nil {
		return
	}
	s.listening = true
	ps := s.client.Subscribe(context.WithoutCancel(ctx), s.keys.wake())
	rctx, cancel := s.bound(ctx)
	defer cancel()
	if _, err := ps.Receive(rctx); err != nil && ctx.Err() == nil {
		s.logger.Warn("redisstore: subscribing to wake-ups failed; workers fall back to polling", "error", err)
	}
	msgs := ps.Channel()
	s.subs.Add(1)
	go func() {
		defer s.subs.Done()
		defer ps.Close()
		for {
			select {
			case <-s.done:
				return
			case m, ok := <-msgs:
				if !ok {
					return
				}
				if id, ok := strings.CutPrefix(m.Payload, finishedPrefix); ok {
					s.hub.Finished(id)
				} else {
					s.hub.Signal()
				}
			}
		}
	}()
}
