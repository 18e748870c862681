package redisstore

import (
	"context"

	"github.com/redis/go-redis/v9"
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
	s.listen(ctx, &s.listeningWake, s.keys.wake(), func(string) { s.hub.Signal() }, s.hub.Signal)
	return ch
}

// Finished returns a channel that receives the ID of each run that ends
// (completes, errors or is terminated) after the call, by this process or
// any other using the same prefix: the scripts that end runs publish the
// ID on the prefix's ended channel, which a subscription of its own reads,
// so that a process that only works runs never hears completions and one
// that only awaits results never hears ready hints; see
// storage.FinishNotifier. The channel is closed when ctx is done or the
// store closes.
func (s *Store) Finished(ctx context.Context) <-chan string {
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	ch := s.hub.SubscribeFinished(ctx)
	s.listen(ctx, &s.listeningEnded, s.keys.ended(), func(id string) { s.hub.Finished(id) }, s.hub.Gap)
	return ch
}

// HearsEveryFinish reports that Finished hears the runs every process
// ends, through the server's pub/sub; see storage.EveryFinishNotifier.
func (s *Store) HearsEveryFinish() bool { return true }

// listen subscribes to channel, once (listening records it), unless the
// store is closed, and passes every message's payload to heard until the
// store closes. It waits for the server's confirmation, so that every
// change after the call returns is seen; a failure only costs the hints
// (the engine polls), and go-redis keeps trying to subscribe again. Each
// subscription after the first (go-redis subscribes again after a lost
// connection) calls resubscribed: messages may have been missed. The
// caller holds closeMu.
func (s *Store) listen(ctx context.Context, listening *bool, channel string, heard func(payload string), resubscribed func()) {
	if *listening || s.closed.Load() || ctx.Err() != nil {
		return
	}
	*listening = true
	ps := s.client.Subscribe(context.WithoutCancel(ctx), channel)
	rctx, cancel := s.bound(ctx)
	defer cancel()
	if _, err := ps.Receive(rctx); err != nil && ctx.Err() == nil {
		s.logger.Warn("redisstore: subscribing to "+channel+" failed; workers and waiters fall back to polling", "error", err)
	}
	msgs := ps.ChannelWithSubscriptions()
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
				switch m := m.(type) {
				case *redis.Message:
					heard(m.Payload)
				case *redis.Subscription:
					if m.Kind == "subscribe" {
						resubscribed()
					}
				}
			}
		}
	}()
}
