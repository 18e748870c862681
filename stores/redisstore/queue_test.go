package redisstore

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stemflow/stem/storage"
)

// TestClaimPastFullPartition: a claim reads past a backlog of a full
// partition longer than one round of reads (which is as long as the claim
// still needs) and leases the run of a free partition behind it.
func TestClaimPastFullPartition(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := newClock()
	s, _ := newTestStore(t, clock)
	var runs []storage.NewRun
	for i := range 250 {
		runs = append(runs, storage.NewRun{ID: fmt.Sprintf("a-%03d", i), Workflow: "wf", Queue: "jobs", Partition: "a"})
	}
	if _, err := s.CreateRuns(ctx, runs); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Second)
	if _, err := s.CreateRuns(ctx, []storage.NewRun{{ID: "b", Workflow: "wf", Queue: "jobs", Partition: "b"}}); err != nil {
		t.Fatal(err)
	}
	q := []storage.Queue{{Name: "jobs", PartitionConcurrency: 1}}
	got, err := s.Claim(ctx, storage.ClaimRequest{Owner: "w", Workflows: []string{"wf"}, Limit: 2, LeaseFor: time.Minute, Queues: q})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, c := range got {
		ids = append(ids, c.Lease.RunID)
	}
	if !slices.Equal(ids, []string{"a-000", "b"}) {
		t.Fatalf("claimed %v, want [a-000 b]", ids)
	}
	stats, err := s.QueueStats(ctx, []string{"jobs", storage.DefaultQueue})
	if err != nil || stats[0].Running != 2 || stats[0].Ready != 249 || stats[1] != (storage.QueueStats{Queue: storage.DefaultQueue}) {
		t.Fatalf("QueueStats = %+v, %v", stats, err)
	}
}

// TestLevelsForgotten: NextWake finds a delayed run at a priority other
// than 0; once no run is left at that priority, a claim forgets it.
func TestLevelsForgotten(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := newClock()
	s, c := newTestStore(t, clock)
	later := clock.Now().Add(time.Minute)
	if _, err := s.CreateRuns(ctx, []storage.NewRun{{ID: "r", Workflow: "wf", Queue: "jobs", Priority: 7, StartAt: &later}}); err != nil {
		t.Fatal(err)
	}
	nw, err := s.NextWake(ctx, storage.NextWakeRequest{Workflows: []string{"wf"}, Queues: []string{"jobs"}})
	if err != nil || !nw.Found || nw.After != time.Minute {
		t.Fatalf("NextWake = %+v, %v; want a minute", nw, err)
	}
	if nw, err := s.NextWake(ctx, storage.NextWakeRequest{Workflows: []string{"wf"}}); err != nil || nw.Found {
		t.Fatalf("NextWake of the default queue = %+v, %v; want none", nw, err)
	}
	req := storage.ClaimRequest{Owner: "w", Workflows: []string{"wf"}, Limit: 5, LeaseFor: time.Minute, Queues: []storage.Queue{{Name: "jobs"}}}
	clock.Advance(time.Minute)
	got, err := s.Claim(ctx, req)
	if err != nil || len(got) != 1 {
		t.Fatalf("Claim = %v, %v", got, err)
	}
	if err := s.Complete(ctx, storage.CompleteRequest{Lease: got[0].Lease, Status: storage.StatusComplete}); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Claim(ctx, req); err != nil || len(got) != 0 {
		t.Fatalf("Claim = %v, %v; want nothing", got, err)
	}
	if n := c.ZCard(ctx, s.keys.levels("jobs", "wf")).Val(); n != 0 {
		t.Fatalf("levels set holds %d priorities after its runs left, want 0", n)
	}
}
