package redisstore

import (
	"context"
	"fmt"
	"reflect"
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

// TestClaimReplyAsStored: what a claim replies of each run is the run as
// the claim left it, whether the claim read the run in one call (a queue
// without limits, a recovery) or in two (a queue with limits).
func TestClaimReplyAsStored(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := newClock()
	s, _ := newTestStore(t, clock)
	deadline := clock.Now().Add(time.Hour)
	mustCreate(t, s,
		storage.NewRun{ID: "free", Workflow: "wf", ParentID: "p", Input: []byte(`{"n":1}`), Deadline: &deadline,
			Version: 2, Headers: map[string]string{"traceparent": "00-a-b-01"}},
		storage.NewRun{ID: "limited", Workflow: "wf", Queue: "jobs", Input: []byte(`{"n":2}`), Version: 2,
			Headers: map[string]string{"tracestate": "x=y"}})
	check := func(what string, got []storage.ClaimedRun, want string, recoveries int) {
		t.Helper()
		if len(got) != 1 || got[0].Lease.RunID != want {
			t.Fatalf("%s: claimed %+v, want %s", what, got, want)
		}
		c := got[0]
		rec, err := s.GetRun(ctx, want)
		if err != nil {
			t.Fatal(err)
		}
		if c.Workflow != rec.Workflow || c.ParentID != rec.ParentID || string(c.Input) != string(rec.Input) ||
			c.Recoveries != recoveries || rec.Recoveries != recoveries || !c.LeaseUntil.Equal(rec.LeaseUntil) ||
			c.Lease.Token != rec.Token || c.Version != rec.Version || !reflect.DeepEqual(c.Headers, rec.Headers) ||
			!reflect.DeepEqual(c.Deadline, rec.Deadline) || c.Headers == nil {
			t.Fatalf("%s: claimed %+v\nstored %+v", what, c, rec)
		}
	}
	claim := func(queues ...storage.Queue) []storage.ClaimedRun {
		t.Helper()
		got, err := s.Claim(ctx, storage.ClaimRequest{Owner: "w", Workflows: []string{"wf"}, Limit: 1, LeaseFor: time.Minute, Queues: queues})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	check("a claim of a queue without limits", claim(), "free", 0)
	check("a claim of a queue with limits", claim(storage.Queue{Name: "jobs", Concurrency: 5}), "limited", 0)
	clock.Advance(2 * time.Minute)
	check("a recovery", claim(), "free", 1)
	check("a recovery from a queue with limits", claim(storage.Queue{Name: "jobs", Concurrency: 5}), "limited", 1)
}
