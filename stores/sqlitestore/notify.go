package sqlitestore

import "context"

// Notifications returns a channel that receives a value after a write of
// this Store made a run ready to claim now (a created, released, resumed,
// restarted or woken run), and within a tenth of a second of any write by
// another Store on the same file, another process's (see foreign.go). They
// are hints: engines poll regardless. The channel is closed when ctx is
// done or the store closes.
func (s *Store) Notifications(ctx context.Context) <-chan struct{} {
	return s.hub.Subscribe(ctx)
}

// Finished returns a channel that receives the ID of each run this Store
// ends (completes, errors or terminates) after the call, once its write has
// committed; see storage.FinishNotifier. It receives the announcements of
// this Store's replies to updates and writes to streams too, after their
// commits (storage.UpdateAnnouncement, StreamAnnouncement; see
// storage.Announced). Ends and writes by other processes on the same file
// are not named: a write of theirs sends storage.Missed instead (see
// foreign.go), at most once a second, upon which a caller reads the run
// (or update, or stream) it awaits. The channel is closed when ctx is done or the
// store closes.
func (s *Store) Finished(ctx context.Context) <-chan string {
	return s.hub.SubscribeFinished(ctx)
}

// HearsEveryFinish reports that Finished hears of every run's end, by this
// process or another on the file, named or as storage.Missed; see
// storage.EveryFinishNotifier.
func (s *Store) HearsEveryFinish() bool { return true }
