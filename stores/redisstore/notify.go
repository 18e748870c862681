package redisstore

import "context"

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
	if !s.listening && !s.closed.Load() && ctx.Err() == nil {
		s.listen(ctx)
	}
	return ch
}

// listen subscribes to the wake channel and signals the hub on every
// message until the store closes. It waits for the server's confirmation,
// so that every change after the first Notifications call returns is seen;
// a failure only costs the hints (the engine polls), and go-redis keeps
// trying to subscribe again. The caller holds closeMu.
func (s *Store) listen(ctx context.Context) {
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
			case _, ok := <-msgs:
				if !ok {
					return
				}
				s.hub.Signal()
			}
		}
	}()
}
