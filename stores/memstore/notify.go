package memstore

import "context"

// Notifications returns a channel that receives a value when a run becomes
// ready to claim at once: created, resumed, woken by an event, released
// ready, or restarted. Runs that become ready by the passing of time (a
// sleep ending, a lease expiring) are found by polling. The channel is
// closed when ctx is done or the store closes.
//
// The methods that make a run ready signal the store's storage.Hub inside
// their critical section, so a woken subscriber's Claim sees the change.
func (s *Store) Notifications(ctx context.Context) <-chan struct{} {
	return s.hub.Subscribe(ctx)
}

// Finished returns a channel that receives the ID of each run that ends
// (completes, errors or is terminated) after the call; see
// storage.FinishNotifier. The channel is closed when ctx is done or the
// store closes.
func (s *Store) Finished(ctx context.Context) <-chan string {
	return s.hub.SubscribeFinished(ctx)
}

// HearsEveryFinish reports that Finished hears every run that ends: no
// other process shares the store; see storage.EveryFinishNotifier.
func (s *Store) HearsEveryFinish() bool { return true }
