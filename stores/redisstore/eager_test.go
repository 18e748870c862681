package redisstore

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stemflow/stem/storage"
)

// TestEagerKeys: a run created leased is in its lane's lease set, scored
// by its lease expiry, and in no ready set nor its queue's set of queued
// runs; its priority is in the levels set, so that a claim recovers it
// at that priority. Its start is recorded only for a queue a claim named
// with a rate, and a batch of leased runs alone publishes no wake-up.
func TestEagerKeys(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := newClock()
	s, c := newTestStore(t, clock)
	k := s.keys
	wake := c.Subscribe(ctx, k.wake())
	t.Cleanup(func() { _ = wake.Close() })
	if _, err := wake.Receive(ctx); err != nil {
		t.Fatal(err)
	}

	lease := &storage.EagerLease{Owner: "w", For: time.Minute}
	mustCreate(t, s, storage.NewRun{ID: "e", Workflow: "wf", Queue: "jobs", Priority: 3, Lease: lease})
	until := float64(clock.Now().Add(time.Minute).UnixMicro())
	if sc, err := c.ZScore(ctx, k.laneLeases("wf", "jobs", 3, 0), "e").Result(); err != nil || sc != until {
		t.Fatalf("lease set score %v, %v; want the lease's expiry %v", sc, err, until)
	}
	if n := c.Exists(ctx, k.laneReady("wf", "jobs", 3, 0), k.queued("jobs"), k.starts("jobs")).Val(); n != 0 {
		t.Fatalf("%d of the ready set, the set of queued runs and the set of starts exist, want none", n)
	}
	if p, err := c.ZRange(ctx, k.levels("jobs", "wf"), 0, -1).Result(); err != nil || len(p) != 1 || p[0] != "3" {
		t.Fatalf("levels set %v, %v; want [3]", p, err)
	}

	// The only hint is the queued run's.
	mustCreate(t, s, storage.NewRun{ID: "q", Workflow: "wf"})
	if _, err := wake.ReceiveTimeout(ctx, 5*time.Second); err != nil {
		t.Fatalf("no wake-up for a queued run: %v", err)
	}
	if msg, err := wake.ReceiveTimeout(ctx, 200*time.Millisecond); err == nil {
		t.Fatalf("a second wake-up %v, want one only", msg)
	}

	// A claim that names a rate for the queue, its window empty, makes
	// the next leased run's start count.
	rated := []storage.Queue{{Name: "jobs", Rate: 1, RatePeriod: time.Hour}}
	if got, err := s.Claim(ctx, storage.ClaimRequest{Owner: "w", Workflows: []string{"other"}, Limit: 1, LeaseFor: time.Minute, Queues: rated}); err != nil || len(got) != 0 {
		t.Fatalf("Claim = %v, %v; want nothing", got, err)
	}
	if ok, err := c.SIsMember(ctx, k.ratedQueues(), "jobs").Result(); err != nil || !ok {
		t.Fatalf("jobs in the rated queues set: %v, %v; want true", ok, err)
	}
	mustCreate(t, s, storage.NewRun{ID: "e2", Workflow: "wf", Queue: "jobs", Lease: lease})
	if got, err := c.ZRange(ctx, k.starts("jobs"), 0, -1).Result(); err != nil || len(got) != 1 || got[0] != "e2:1" {
		t.Fatalf("starts %v, %v; want [e2:1]", got, err)
	}

	// The expired lease is recovered at its priority.
	clock.Advance(2 * time.Minute)
	got, err := s.Claim(ctx, storage.ClaimRequest{Owner: "w2", Workflows: []string{"wf"}, Limit: 1, LeaseFor: time.Minute, Queues: []storage.Queue{{Name: "jobs"}}})
	if err != nil || len(got) != 1 || got[0].Lease.RunID != "e" || got[0].Recoveries != 1 || got[0].Lease.Token != 2 {
		t.Fatalf("Claim = %+v, %v; want e recovered with token 2", got, err)
	}
}

// scriptCalls counts the scripts a client runs.
type scriptCalls struct{ n atomic.Int64 }

func (h *scriptCalls) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *scriptCalls) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if n := cmd.Name(); n == "evalsha" || n == "eval" {
			h.n.Add(1)
		}
		return next(ctx, cmd)
	}
}

func (h *scriptCalls) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestEagerRunCalls: a ten-step run started leased and completed with its
// last checkpoint costs eleven script calls, the create and one per
// step, with no claim and no call of its own for the completion.
func TestEagerRunCalls(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, c := newTestStore(t, nil)
	calls := &scriptCalls{}
	c.AddHook(calls)
	res, err := s.CreateRuns(ctx, []storage.NewRun{{ID: "r", Workflow: "wf", Lease: &storage.EagerLease{Owner: "w", For: time.Minute}}})
	if err != nil || !res[0].Created {
		t.Fatalf("CreateRuns = %+v, %v", res, err)
	}
	l := storage.Lease{RunID: "r", Owner: "w", Token: res[0].Run.Token}
	for i := range 10 {
		req := storage.CheckpointRequest{Lease: l, LeaseFor: time.Minute,
			Checkpoint: storage.Checkpoint{Key: "s" + strconv.Itoa(i) + "@v1", Kind: storage.KindStep, Output: []byte("1")}}
		if i == 9 {
			req.Complete = &storage.CompleteRequest{Status: storage.StatusComplete, Output: []byte("done")}
		}
		got, err := s.Checkpoint(ctx, req)
		if err != nil || got.Completed != (i == 9) {
			t.Fatalf("checkpoint %d = %+v, %v", i, got, err)
		}
	}
	if n := calls.n.Load(); n != 11 {
		t.Fatalf("%d script calls, want 11", n)
	}
	if rec, err := s.GetRun(ctx, "r"); err != nil || rec.Status != storage.StatusComplete || string(rec.Output) != "done" {
		t.Fatalf("GetRun = %+v, %v; want complete", rec, err)
	}
	if n := c.Exists(ctx, s.keys.leases("wf")).Val(); n != 0 {
		t.Fatal("the completed run is left in the lease set")
	}
}

// TestEagerSchedule: a schedule write creates its runs as CreateRuns
// does, a run with a lease leased, in the same script.
func TestEagerSchedule(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := newClock()
	s, _ := newTestStore(t, clock)
	next := clock.Now().Add(5 * time.Minute)
	res, err := s.WriteSchedule(ctx, storage.ScheduleWrite{
		Schedule: storage.Schedule{ID: "nightly", Workflow: "wf", Cron: "*/5 * * * *", NextFireAt: next, CheckAt: next},
		Runs: []storage.NewRun{
			{ID: "queued", Workflow: "wf"},
			{ID: "leased", Workflow: "wf", Lease: &storage.EagerLease{Owner: "w", For: time.Minute}},
		},
	})
	if err != nil || len(res.Runs) != 2 {
		t.Fatalf("WriteSchedule = %+v, %v", res, err)
	}
	if r := res.Runs[0]; !r.Created || r.Run.Status != storage.StatusQueued {
		t.Fatalf("first run %+v, want created queued", r)
	}
	if r := res.Runs[1]; !r.Created || r.Run.Status != storage.StatusRunning || r.Run.Owner != "w" || r.Run.Token != 1 ||
		!r.Run.LeaseUntil.Equal(clock.Now().Add(time.Minute)) {
		t.Fatalf("second run %+v, want created running, held by w with token 1 for a minute", r)
	}
	if got := mustClaimOne(t, s, "wf"); got.Lease.RunID != "queued" {
		t.Fatalf("claimed %s, want the queued run", got.Lease.RunID)
	}
}
