package storage_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stemflow/stem/storage"
)

// TestLeaseLost: the judge every store calls says why a lease was lost, and
// its error still matches ErrLeaseLost through a store's wrapping.
func TestLeaseLost(t *testing.T) {
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	l := storage.Lease{RunID: "r1", Owner: "w", Token: 3}
	later, earlier := now.Add(time.Second), now.Add(-time.Second)
	for _, c := range []struct {
		what   string
		found  bool
		status storage.RunStatus
		token  int64
		until  time.Time
		want   storage.LeaseLoss
	}{
		{"an unknown run", false, "", 0, time.Time{}, storage.LossEnded},
		{"a terminated run", true, storage.StatusTerminated, 3, earlier, storage.LossTerminated},
		{"a run terminated after another claim", true, storage.StatusTerminated, 4, earlier, storage.LossTerminated},
		{"another claim", true, storage.StatusRunning, 4, later, storage.LossTaken},
		{"a restart under the live lease", true, storage.StatusQueued, 3, later, storage.LossRestarted},
		{"a restart under the live lease, paused since", true, storage.StatusPaused, 3, later, storage.LossRestarted},
		{"a release", true, storage.StatusQueued, 3, now, storage.LossEnded},
		{"a completed run", true, storage.StatusComplete, 3, now, storage.LossEnded},
		{"a lease that holds", true, storage.StatusRunning, 3, later, storage.LossUnknown},
	} {
		err := fmt.Errorf("somestore: heartbeat: %w", storage.LeaseLost("heartbeat", l, c.found, c.status, c.token, c.until, now))
		var lost *storage.LeaseLostError
		if !errors.Is(err, storage.ErrLeaseLost) || !errors.As(err, &lost) || lost.Loss != c.want || lost.RunID != "r1" || lost.Token != 3 {
			t.Errorf("%s: %v, want loss %q matching ErrLeaseLost", c.what, err, c.want)
		}
	}
}

// TestReleases: only a bare hand-back, ready by now, is a release.
func TestReleases(t *testing.T) {
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	at := func(t time.Time) *time.Time { return &t }
	for _, c := range []struct {
		what string
		req  storage.SuspendRequest
		want bool
	}{
		{"ready now", storage.SuspendRequest{ReadyAt: at(now)}, true},
		{"ready before now", storage.SuspendRequest{ReadyAt: at(now.Add(-time.Hour))}, true},
		{"ready later", storage.SuspendRequest{ReadyAt: at(now.Add(time.Second))}, false},
		{"waiting for an event", storage.SuspendRequest{}, false},
		{"a sleep", storage.SuspendRequest{ReadyAt: at(now), Checkpoint: &storage.Checkpoint{Key: "k", Kind: storage.KindSleep}}, false},
		{"a wait", storage.SuspendRequest{ReadyAt: at(now), Wait: &storage.Wait{Key: "k", Topic: "t"}}, false},
	} {
		if got := c.req.Releases(now); got != c.want {
			t.Errorf("%s: Releases = %v, want %v", c.what, got, c.want)
		}
	}
}
