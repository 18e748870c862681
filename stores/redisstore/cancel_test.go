package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/stemflow/stem/storage"
)

// TestCancelField: a cancellation request is the run hash's cq field, its
// reason after a marker byte so that an empty reason is still a request;
// a run without the field, as every run stored before cancellations were
// kept, reads not cancelled everywhere a request is reported. A waiting
// run the request makes ready is announced on the wake channel.
func TestCancelField(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := newClock()
	s, c := newTestStore(t, clock)
	k := s.keys
	mustCreate(t, s, storage.NewRun{ID: "r1", Workflow: "wf"})
	cr := mustClaimOne(t, s, "wf")
	if _, err := s.Suspend(ctx, storage.SuspendRequest{Lease: cr.Lease, ReadyAt: new(clock.Now().Add(time.Hour))}); err != nil {
		t.Fatal(err)
	}

	sub := c.Subscribe(ctx, k.wake())
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil {
		t.Fatalf("subscribing to the wake channel: %v", err)
	}
	if err := s.Cancel(ctx, storage.CancelRequest{RunID: "r1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := sub.ReceiveTimeout(ctx, 5*time.Second); err != nil {
		t.Fatalf("no wake-up for the waiting run the request made ready: %v", err)
	}
	if stored, err := c.HGet(ctx, k.run("r1"), "cq").Result(); err != nil || stored != marker {
		t.Fatalf("cq of a request without a reason = %q, %v; want the marker alone", stored, err)
	}
	if rec, err := s.GetRun(ctx, "r1"); err != nil || !rec.CancelRequested || rec.CancelReason != "" || rec.Status != storage.StatusQueued {
		t.Fatalf("GetRun = %+v, %v; want queued with the request", rec, err)
	}

	// Without the field: not cancelled, by the claim, heartbeat and
	// checkpoint too.
	c.HDel(ctx, k.run("r1"), "cq")
	if rec, err := s.GetRun(ctx, "r1"); err != nil || rec.CancelRequested || rec.CancelReason != "" {
		t.Fatalf("GetRun without cq = %+v, %v; want no request", rec, err)
	}
	cr = mustClaimOne(t, s, "wf")
	if cr.CancelRequested || cr.CancelReason != "" {
		t.Fatalf("claim without cq reports a request (%q)", cr.CancelReason)
	}
	if hb, err := s.Heartbeat(ctx, storage.HeartbeatRequest{Lease: cr.Lease, LeaseFor: time.Minute}); err != nil || hb.CancelRequested {
		t.Fatalf("Heartbeat without cq = %+v, %v; want no request", hb, err)
	}
	res, err := s.Checkpoint(ctx, storage.CheckpointRequest{Lease: cr.Lease, LeaseFor: time.Minute,
		Checkpoint: storage.Checkpoint{Key: "a@v1", Kind: storage.KindStep, Output: []byte("1")}})
	if err != nil || res.CancelRequested {
		t.Fatalf("Checkpoint without cq = %+v, %v; want no request", res, err)
	}
}
