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
