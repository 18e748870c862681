package redisstore

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stemflow/stem/storage"
)

// TestHoldField: a hold is the run hash's hl field, a JSON object, which
// a claim deletes with the run's ready time, a recovery's claim too. A
// run whose hash kept a hold through a claim (one by a worker of code
// older than holds) is left with none by its next Suspend without one.
func TestHoldField(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := newClock()
	s, c := newTestStore(t, clock)
	k := s.keys
	mustCreate(t, s, storage.NewRun{ID: "r1", Workflow: "wf"})
	cr := mustClaimOne(t, s, "wf")
	held := &storage.Hold{Reason: "the code returned where the history has a@v1", Recorded: "a@v1", Position: 2, Execution: 1, Since: clock.Now()}
	if _, err := s.Suspend(ctx, storage.SuspendRequest{Lease: cr.Lease, ReadyAt: new(clock.Now()), Hold: held}); err != nil {
		t.Fatal(err)
	}
	stored, err := c.HGet(ctx, k.run("r1"), "hl").Result()
	if err != nil {
		t.Fatalf("the held run's hl field: %v", err)
	}
	var h storage.Hold
	if err := json.Unmarshal([]byte(stored), &h); err != nil || h.Recorded != "a@v1" || h.Called != "" || h.Position != 2 {
		t.Fatalf("hl = %q (%v), want the hold as JSON", stored, err)
	}

	// The claim deletes it; so does the claim of a recovery.
	cr = mustClaimOne(t, s, "wf")
	if n, err := c.HExists(ctx, k.run("r1"), "hl").Result(); err != nil || n {
		t.Fatalf("hl after a claim: %v, %v; want none", n, err)
	}
	c.HSet(ctx, k.run("r1"), "hl", stored)
	clock.Advance(2 * time.Minute)
	cr = mustClaimOne(t, s, "wf")
	if rec, err := s.GetRun(ctx, "r1"); err != nil || rec.Hold != nil || rec.Recoveries != 1 {
		t.Fatalf("GetRun after a recovery = %+v, %v; want no hold", rec, err)
	}

	// A hold left by a claim that did not delete it goes with the next
	// suspension.
	c.HSet(ctx, k.run("r1"), "hl", stored)
	if rec, err := s.GetRun(ctx, "r1"); err != nil || rec.Hold == nil || rec.Hold.Recorded != "a@v1" {
		t.Fatalf("GetRun = %+v, %v; want the hold of hl", rec, err)
	}
	if _, err := s.Suspend(ctx, storage.SuspendRequest{Lease: cr.Lease, ReadyAt: new(clock.Now().Add(time.Hour))}); err != nil {
		t.Fatal(err)
	}
	if rec, err := s.GetRun(ctx, "r1"); err != nil || rec.Hold != nil {
		t.Fatalf("GetRun after a suspension without a hold = %+v, %v; want none", rec, err)
	}
}
