package memstore

import (
	"testing"
	"time"

	"github.com/stemflow/stem/storage"
	"github.com/stemflow/stem/stores/storetest"
)

// TestQueueStaysBounded parks and claims runs many times, extending leases
// in between: the heaps keep only a bounded number of superseded entries,
// and claims stay correct throughout.
func TestQueueStaysBounded(t *testing.T) {
	ctx := t.Context()
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	clock := storetest.NewClock(now)
	s := New(Options{Clock: clock})
	defer s.Close()
	const runs = 10
	var batch []storage.NewRun
	for i := range runs {
		batch = append(batch, storage.NewRun{ID: string(rune('a' + i)), Workflow: "wf"})
	}
	if _, err := s.CreateRuns(ctx, batch); err != nil {
		t.Fatal(err)
	}
	req := storage.ClaimRequest{Owner: "w", Workflows: []string{"wf"}, Limit: runs, LeaseFor: time.Minute}
	for round := range 500 {
		got, err := s.Claim(ctx, req)
		if err != nil || len(got) != runs {
			t.Fatalf("round %d: claimed %d runs, %v; want %d", round, len(got), err, runs)
		}
		for _, c := range got {
			for range 3 {
				if _, err := s.Heartbeat(ctx, storage.HeartbeatRequest{Lease: c.Lease, LeaseFor: time.Minute}); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Pause(ctx, c.Lease.RunID); err != nil {
				t.Fatal(err)
			}
			if err := s.Resume(ctx, c.Lease.RunID); err != nil {
				t.Fatal(err)
			}
			wake := now.Add(time.Duration(round%3) * time.Hour)
			if _, err := s.Suspend(ctx, storage.SuspendRequest{Lease: c.Lease, ReadyAt: &wake}); err != nil {
				t.Fatal(err)
			}
			if round%3 != 0 {
				if err := s.Restart(ctx, storage.RestartRequest{RunID: c.Lease.RunID}); err != nil {
					t.Fatal(err)
				}
			}
		}
		if round%3 == 0 {
			// Released at once: another worker claims and releases them.
			again, err := s.Claim(ctx, storage.ClaimRequest{Owner: "x", Workflows: []string{"wf"}, Limit: runs, LeaseFor: time.Minute})
			if err != nil || len(again) != runs {
				t.Fatalf("round %d: released runs not claimable: %d, %v", round, len(again), err)
			}
			for _, c := range again {
				wake := now
				if _, err := s.Suspend(ctx, storage.SuspendRequest{Lease: c.Lease, ReadyAt: &wake}); err != nil {
					t.Fatal(err)
				}
			}
		}
		now = now.Add(time.Second)
		clock.Set(now)
	}
	ix := s.queues[storage.DefaultQueue].workflows["wf"][0]
	for name, h := range map[string]entryHeap{"waiting": ix.waiting, "ready": ix.ready, "leases": ix.leases, "expired": ix.expired} {
		if len(h) > 2*runs+65 {
			t.Fatalf("the %s heap grew to %d entries for %d runs", name, len(h), runs)
		}
	}
}
