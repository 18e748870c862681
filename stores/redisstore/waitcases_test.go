package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/stemflow/stem/storage"
)

// TestLegacyBufferedEvent: an event buffered before events carried their
// sequence number (a marked payload alone) counts as the oldest, and is
// delivered whole.
func TestLegacyBufferedEvent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, client := newTestStore(t, newClock())
	mustCreate(t, s, storage.NewRun{ID: "r", Workflow: "wf"})
	if _, err := s.SendEvent(ctx, storage.Event{RunID: "r", Topic: "a", Payload: []byte("new")}); err != nil {
		t.Fatal(err)
	}
	if err := client.RPush(ctx, s.keys.events("r", "b"), mark([]byte("12:old"))).Err(); err != nil {
		t.Fatal(err)
	}
	l := mustClaimOne(t, s, "wf").Lease
	res, err := s.Suspend(ctx, storage.SuspendRequest{Lease: l, LeaseFor: time.Minute,
		Wait: &storage.Wait{Key: "a@v1", Topic: "a", Also: []storage.WaitCase{{Key: "b@v1", Topic: "b"}}}})
	if err != nil {
		t.Fatal(err)
	}
	if d := res.Delivered; d == nil || d.Key != "b@v1" || string(d.Output) != "12:old" || d.Kind != storage.KindEvent {
		t.Fatalf("Suspend delivered %+v, want the legacy event b@v1=12:old", res.Delivered)
	}
}
