package pgstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stemflow/stem/storage"
	"github.com/stemflow/stem/stores/storetest"
)

func TestSmoke(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := storetest.NewClock(storetest.Start)
	s := newTestStore(t, Options{Clock: c})
	res, err := s.CreateRuns(ctx, []storage.NewRun{{ID: "r1", Workflow: "wf", Input: []byte("in")}, {ID: "r1", Workflow: "wf"}})
	if err != nil || !res[0].Created || res[1].Created {
		t.Fatalf("create: %v %+v", err, res)
	}
	claimed, err := s.Claim(ctx, storage.ClaimRequest{Owner: "w", Workflows: []string{"wf"}, Limit: 10, LeaseFor: time.Minute})
	if err != nil || len(claimed) != 1 || string(claimed[0].Input) != "in" {
		t.Fatalf("claim: %v %+v", err, claimed)
	}
	lease := claimed[0].Lease
	r, err := s.Checkpoint(ctx, storage.CheckpointRequest{Lease: lease, LeaseFor: time.Minute,
		Checkpoint: storage.Checkpoint{Key: "a@v1", Kind: storage.KindStep, Output: []byte("1")},
		Attempts:   []storage.Attempt{{Key: "a@v1", Number: 1, Started: c.Now(), Ended: c.Now()}}})
	if err != nil || r.Existing != nil || r.Paused {
		t.Fatalf("checkpoint: %v %+v", err, r)
	}
	r, err = s.Checkpoint(ctx, storage.CheckpointRequest{Lease: lease, LeaseFor: time.Minute,
		Checkpoint: storage.Checkpoint{Key: "a@v1", Kind: storage.KindStep, Output: []byte("2")}})
	if err != nil || r.Existing == nil || string(r.Existing.Output) != "1" {
		t.Fatalf("checkpoint again: %v %+v", err, r)
	}
	c.Advance(2 * time.Minute)
	again, err := s.Claim(ctx, storage.ClaimRequest{Owner: "w2", Workflows: []string{"wf"}, Limit: 10, LeaseFor: time.Minute})
	if err != nil || len(again) != 1 || again[0].Recoveries != 1 || again[0].Lease.Token <= lease.Token {
		t.Fatalf("reclaim: %v %+v", err, again)
	}
	if _, err := s.Heartbeat(ctx, storage.HeartbeatRequest{Lease: lease, LeaseFor: time.Minute}); !errors.Is(err, storage.ErrLeaseLost) {
		t.Fatalf("stale heartbeat: %v", err)
	}
	lease = again[0].Lease
	if err := s.RecordAttempts(ctx, storage.RecordAttemptsRequest{Lease: lease, LeaseFor: time.Minute, Attempts: []storage.Attempt{{Key: "b@v1", Number: 1, Error: "boom"}}}); err != nil {
		t.Fatal(err)
	}
	sr, err := s.Suspend(ctx, storage.SuspendRequest{Lease: lease, LeaseFor: time.Minute,
		Wait: &storage.Wait{Key: "ev@v1", Topic: "t", Kind: storage.KindEvent}, SuspendState: []byte("st")})
	if err != nil || sr.Delivered != nil {
		t.Fatalf("suspend: %v %+v", err, sr)
	}
	ids, err := s.Emit(ctx, storage.EmitRequest{Topic: "t", Payload: []byte("payload")})
	if err != nil || len(ids) != 1 || ids[0] != "r1" {
		t.Fatalf("emit: %v %v", err, ids)
	}
	claimed, err = s.Claim(ctx, storage.ClaimRequest{Owner: "w3", Workflows: []string{"wf"}, Limit: 10, LeaseFor: time.Minute})
	if err != nil || len(claimed) != 1 || string(claimed[0].SuspendState) != "st" {
		t.Fatalf("claim after emit: %v %+v", err, claimed)
	}
	cps, err := checkpointsOf(ctx, s, "r1")
	if err != nil || len(cps) != 2 || cps[1].Key != "ev@v1" || string(cps[1].Output) != "payload" {
		t.Fatalf("load: %v %+v", err, cps)
	}
	if ok, err := s.SendEvent(ctx, storage.Event{RunID: "r1", Topic: "later", Payload: []byte("x")}); err != nil || ok {
		t.Fatalf("send: %v %v", err, ok)
	}
	sr, err = s.Suspend(ctx, storage.SuspendRequest{Lease: claimed[0].Lease, LeaseFor: time.Minute,
		Wait: &storage.Wait{Key: "later@v1", Topic: "later"}})
	if err != nil || sr.Delivered == nil || string(sr.Delivered.Output) != "x" || sr.Delivered.Kind != storage.KindEvent {
		t.Fatalf("suspend buffered: %v %+v", err, sr)
	}
	if err := s.Complete(ctx, storage.CompleteRequest{Lease: claimed[0].Lease, Status: storage.StatusComplete, Output: []byte("out")}); err != nil {
		t.Fatal(err)
	}
	rec, err := s.GetRun(ctx, "r1")
	if err != nil || rec.Status != storage.StatusComplete || string(rec.Output) != "out" {
		t.Fatalf("get: %v %+v", err, rec)
	}
	h, err := s.ListSteps(ctx, storage.StepsQuery{RunID: "r1"})
	if err != nil || h.Execution != 1 || len(h.Steps) != 3 || len(h.Steps[0].Attempts) != 1 ||
		len(h.Pending) != 1 || h.Pending[0].Key != "b@v1" || h.Pending[0].Execution != 1 {
		t.Fatalf("steps: %v %+v", err, h)
	}
	page, err := s.ListRuns(ctx, storage.ListRunsQuery{Status: storage.StatusComplete})
	if err != nil || len(page.Runs) != 1 {
		t.Fatalf("list: %v %+v", err, page)
	}
	if err := s.Restart(ctx, storage.RestartRequest{RunID: "r1"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Pause(ctx, "r1"); err != nil {
		t.Fatal(err)
	}
	if err := s.Resume(ctx, "r1"); err != nil {
		t.Fatal(err)
	}
	if ids, err := s.Terminate(ctx, storage.TerminateRequest{RunID: "r1", Error: storage.ErrorInfo{Message: "stop"}}); err != nil || len(ids) != 1 || ids[0] != "r1" {
		t.Fatalf("terminate: %v %v", err, ids)
	}
	rec, err = s.GetRun(ctx, "r1")
	if err != nil || rec.Status != storage.StatusTerminated || rec.Error == nil || rec.Error.Message != "stop" ||
		rec.Execution != 2 || rec.EndedAt == nil {
		t.Fatalf("get: %v %+v", err, rec)
	}
	execs, err := s.ListExecutions(ctx, "r1")
	if err != nil || len(execs) != 2 || execs[0].Status != storage.StatusComplete || execs[1].Status != storage.StatusTerminated {
		t.Fatalf("executions: %v %+v", err, execs)
	}
}
