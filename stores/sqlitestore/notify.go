package sqlitestore

import "context"

// Notifications returns a channel that receives a value after a write of
// this Store made a run ready to claim now (a created, released, resumed,
// restarted or woken run). Writes by other Store instances on the same file
// are not seen: the hints only make this process's workers faster, polling
// stays necessary. The channel is closed when ctx is done or the store
// closes.
func (s *Store) Notifications(ctx context.Context) <-chan struct{} {
	return s.hub.Subscribe(ctx)
}

// Finished returns a channel that receives the ID of each run this Store
// ends (completes, errors or terminates) after the call, once its write has
// committed; see storage.FinishNotifier. Other processes on the same file
// are not heard: their completions are found by polling. The channel is
// closed when ctx is done or the store closes.
func (s *Store) Finished(ctx context.Context) <-chan string {
	return s.hub.SubscribeFinished(ctx)
}
