package memstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/stemflow/stem/storage"

	"go.uber.org/goleak"

	"github.com/stemflow/stem/stores/memstore"
	"github.com/stemflow/stem/stores/storetest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestSmoke(t *testing.T) {
	ctx := context.Background()
	c := storetest.NewClock(storetest.Start)
	s := memstore.New(memstore.Options{Clock: c})
	defer s.Close()
	res, err := s.CreateRuns(ctx, []storage.NewRun{{ID: "r1", Workflow: "wf", Input: []byte("in")}})
	if err != nil || !res[0].Created {
		t.Fatalf("create: %v %+v", err, res)
	}
	claimed, err := s.Claim(ctx, storage.ClaimRequest{Owner: "w", Workflows: []string{"wf"}, Limit: 10, LeaseFor: time.Minute})
	if err != nil || len(claimed) != 1 || string(claimed[0].Input) != "in" {
		t.Fatalf("claim: %v %+v", err, claimed)
	}
	lease := claimed[0].Lease
	if _, err := s.Checkpoint(ctx, storage.CheckpointRequest{Lease: lease, LeaseFor: time.Minute, Checkpoint: storage.Checkpoint{Key: "a@v1", Kind: storage.KindStep, Output: []byte("1")}}); err != nil {
		t.Fatal(err)
	}
	c.Advance(2 * time.Minute)
	again, err := s.Claim(ctx, storage.ClaimRequest{Owner: "w2", Workflows: []string{"wf"}, Limit: 10, LeaseFor: time.Minute})
	if err != nil || len(again) != 1 || again[0].Recoveries != 1 || again[0].Lease.Token <= lease.Token {
		t.Fatalf("reclaim: %v %+v", err, again)
	}
	if _, err := s.Heartbeat(ctx, storage.HeartbeatRequest{Lease: lease, LeaseFor: time.Minute}); err == nil {
		t.Fatal("stale heartbeat succeeded")
	}
	if err := s.Complete(ctx, storage.CompleteRequest{Lease: again[0].Lease, Status: storage.StatusComplete, Output: []byte("out")}); err != nil {
		t.Fatal(err)
	}
	rec, err := s.GetRun(ctx, "r1")
	if err != nil || rec.Status != storage.StatusComplete || string(rec.Output) != "out" {
		t.Fatalf("get: %v %+v", err, rec)
	}
}
