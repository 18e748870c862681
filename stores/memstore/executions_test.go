package memstore

import (
	"fmt"
	"testing"
	"time"

	"github.com/stemflow/stem/storage"
	"github.com/stemflow/stem/stores/storetest"
)

// TestForkAndRefuseKeepTheIndex runs past indexFrom checkpoints, so lookups
// go through cpIndex, then refuses an event and forks from a late step: the
// index follows both, and write-once still holds in the new execution.
func TestForkAndRefuseKeepTheIndex(t *testing.T) {
	ctx := t.Context()
	clock := storetest.NewClock(storetest.Start)
	s := New(Options{Clock: clock})
	defer s.Close()
	if _, err := s.CreateRuns(ctx, []storage.NewRun{{ID: "r", Workflow: "wf"}}); err != nil {
		t.Fatal(err)
	}
	claim := func() storage.Lease {
		t.Helper()
		got, err := s.Claim(ctx, storage.ClaimRequest{Owner: "w", Workflows: []string{"wf"}, Limit: 1, LeaseFor: time.Minute})
		if err != nil || len(got) != 1 {
			t.Fatalf("claim: %d runs, %v", len(got), err)
		}
		return got[0].Lease
	}
	write := func(l storage.Lease, key string) bool {
		t.Helper()
		res, err := s.Checkpoint(ctx, storage.CheckpointRequest{Lease: l, LeaseFor: time.Minute,
			Checkpoint: storage.Checkpoint{Key: key, Kind: storage.KindStep, Output: []byte(key)}})
		if err != nil {
			t.Fatal(err)
		}
		return res.Existing == nil
	}
	l := claim()
	const n = 2 * indexFrom
	for i := range n {
		if !write(l, fmt.Sprintf("k%d", i)) {
			t.Fatalf("k%d already written", i)
		}
	}
	// An event delivered at once from the buffer, then refused.
	if _, err := s.SendEvent(ctx, storage.Event{RunID: "r", Topic: "t", Payload: []byte("bad")}); err != nil {
		t.Fatal(err)
	}
	wait := &storage.Wait{Key: "ev", Topic: "t"}
	res, err := s.Suspend(ctx, storage.SuspendRequest{Lease: l, LeaseFor: time.Minute, Wait: wait})
	if err != nil || res.Delivered == nil {
		t.Fatalf("suspend: %+v, %v", res, err)
	}
	now := clock.Now()
	res, err = s.Suspend(ctx, storage.SuspendRequest{Lease: l, Wait: wait,
		Refuse: &storage.Refusal{Key: "ev", Attempt: storage.Attempt{Key: "ev", Number: 1, Started: now, Ended: now, Error: "does not decode"}}})
	if err != nil || res.Delivered != nil {
		t.Fatalf("refuse: %+v, %v", res, err)
	}
	r := s.runs["r"]
	if _, ok := r.find("ev"); ok || len(r.cpIndex) != n {
		t.Fatalf("after the refusal: ev found %v, index of %d keys, want %d", ok, len(r.cpIndex), n)
	}
	rp, err := s.LoadReplay(ctx, "r")
	if err != nil || len(rp.Pending) != 1 || rp.Pending[0].Execution != 1 || len(rp.Checkpoints) != n {
		t.Fatalf("replay: %+v, %v", rp, err)
	}
	// Fork from a step past indexFrom.
	from := indexFrom + 3
	if err := s.Restart(ctx, storage.RestartRequest{RunID: "r", FromKey: fmt.Sprintf("k%d", from)}); err != nil {
		t.Fatal(err)
	}
	if len(r.cpIndex) != from {
		t.Fatalf("forked index holds %d keys, want %d", len(r.cpIndex), from)
	}
	l = claim()
	if write(l, "k0") || write(l, fmt.Sprintf("k%d", from-1)) {
		t.Fatal("a copied checkpoint was written again")
	}
	if !write(l, fmt.Sprintf("k%d", from)) {
		t.Fatal("the fork key was not written in the new execution")
	}
	rp, err = s.LoadReplay(ctx, "r")
	if err != nil || rp.Execution != 2 || len(rp.Checkpoints) != from+1 || rp.Pending != nil {
		t.Fatalf("replay of the fork: execution %d, %d checkpoints, pending %v, %v", rp.Execution, len(rp.Checkpoints), rp.Pending, err)
	}
	for i, cp := range rp.Checkpoints {
		if cp.Execution != 2 || (i < from) != (cp.ForkedFrom == 1) || (i > 0 && cp.Seq <= rp.Checkpoints[i-1].Seq) {
			t.Fatalf("checkpoint %d = %+v", i, cp)
		}
	}
	old, err := s.ListSteps(ctx, storage.StepsQuery{RunID: "r", Execution: 1})
	if err != nil || len(old.Steps) != n || len(old.Pending) != 1 {
		t.Fatalf("execution 1: %d steps, pending %v, %v", len(old.Steps), old.Pending, err)
	}
}
