package pgstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stemflow/stem/storage"
	"github.com/stemflow/stem/stores/storetest"
)

// TestEagerRunWrites: a run created leased and finished with its last
// step costs one batch per write, eleven for ten steps: no claim, and no
// commit of the completion's own.
func TestEagerRunWrites(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newTestStore(t, Options{Clock: storetest.NewClock(storetest.Start)})
	res, err := s.CreateRuns(ctx, []storage.NewRun{{ID: "run-1", Workflow: "wf", Lease: &storage.EagerLease{Owner: "w", For: time.Minute}}})
	if err != nil || !res[0].Created || res[0].Run.Status != storage.StatusRunning {
		t.Fatalf("create leased: %+v, %v", res, err)
	}
	l := storage.Lease{RunID: "run-1", Owner: "w", Token: res[0].Run.Token}
	for i := range 10 {
		req := storage.CheckpointRequest{Lease: l, LeaseFor: time.Minute,
			Checkpoint: storage.Checkpoint{Key: fmt.Sprintf("s%d@v1", i), Kind: storage.KindStep, Output: []byte("x")}}
		if i == 9 {
			req.Complete = &storage.CompleteRequest{Status: storage.StatusComplete, Output: []byte("done")}
		}
		got, err := s.Checkpoint(ctx, req)
		if err != nil || got.Completed != (i == 9) {
			t.Fatalf("step %d: %+v, %v", i, got, err)
		}
	}
	if n := s.batches.Load(); n != 11 {
		t.Fatalf("%d batches, want 11", n)
	}
	if rec, err := s.GetRun(ctx, "run-1"); err != nil || rec.Status != storage.StatusComplete || string(rec.Output) != "done" {
		t.Fatalf("run: %+v, %v", rec, err)
	}
}

// TestRideBatchMixed: one batch carrying a riding completion, one whose
// checkpoint exists already and a plain checkpoint completes the first
// run alone.
func TestRideBatchMixed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newTestStore(t, Options{Clock: storetest.NewClock(storetest.Start)})
	runs := claimAll(t, s, 3, "w")
	a, b, c := runs[0].Lease, runs[1].Lease, runs[2].Lease
	if _, err := s.Checkpoint(ctx, storage.CheckpointRequest{Lease: b, LeaseFor: time.Minute,
		Checkpoint: storage.Checkpoint{Key: "k@v1", Kind: storage.KindStep, Output: []byte("first")}}); err != nil {
		t.Fatal(err)
	}
	ride := func(l storage.Lease, output string) *ckptCall {
		call := stepCall(l, "k@v1", output)
		call.ride = &finCall{req: storage.CompleteRequest{Lease: l, Status: storage.StatusComplete, Output: []byte("done")}}
		return call
	}
	calls := []*ckptCall{ride(a, "a"), ride(b, "again"), stepCall(c, "k@v1", "c")}
	s.writeBatch(calls)
	for i, want := range []bool{true, false, false} {
		if calls[i].err != nil || calls[i].res.Completed != want {
			t.Fatalf("call %d: %+v, %v; want completed %v", i, calls[i].res, calls[i].err, want)
		}
	}
	if calls[1].res.Existing == nil {
		t.Fatalf("the existing checkpoint is not reported: %+v", calls[1].res)
	}
	for id, want := range map[string]storage.RunStatus{a.RunID: storage.StatusComplete, b.RunID: storage.StatusRunning, c.RunID: storage.StatusRunning} {
		if rec, err := s.GetRun(ctx, id); err != nil || rec.Status != want {
			t.Fatalf("run %s: %s, %v; want %s", id, rec.Status, err, want)
		}
	}
}
