package redisstore

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/stemflow/stem/storage"
)

// TestContinueKeys: ContinueAsNew renames the ended execution's
// checkpoints and attempts to its own keys, as Restart does, so the keys
// the checkpoint and replay scripts read (the run hash, c:<id>, a:<id>)
// hold only the current execution: after many continues they are what
// they were after the first, whatever the number of executions before.
func TestContinueKeys(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newClock()
	s, client := newTestStore(t, c)
	k := s.keys
	mustCreate(t, s, storage.NewRun{ID: "r", Workflow: "wf"})
	if _, err := s.SendEvent(ctx, storage.Event{RunID: "r", Topic: "later", Payload: []byte("L")}); err != nil {
		t.Fatal(err)
	}
	// one execution's work: a checkpoint, a pending attempt, progress
	work := func(l storage.Lease) {
		t.Helper()
		now := c.Now()
		if _, err := s.Checkpoint(ctx, storage.CheckpointRequest{Lease: l, LeaseFor: time.Minute,
			Checkpoint: storage.Checkpoint{Key: "s@v1", Kind: storage.KindStep, Output: []byte("x")},
			Attempts:   []storage.Attempt{{Key: "s@v1", Number: 1, Started: now, Ended: now}, {Key: "t@v1", Number: 1, Started: now, Ended: now, Error: "down"}},
			Progress:   []byte("p")}); err != nil {
			t.Fatal(err)
		}
	}
	type shape struct {
		fields         []string
		cps, atts      int64
		replayCps, pen int
	}
	look := func() shape {
		t.Helper()
		fields, err := client.HKeys(ctx, k.run("r")).Result()
		if err != nil {
			t.Fatal(err)
		}
		cps, err := client.HLen(ctx, k.checkpoints("r")).Result()
		if err != nil {
			t.Fatal(err)
		}
		atts, err := client.LLen(ctx, k.attempts("r")).Result()
		if err != nil {
			t.Fatal(err)
		}
		rp, err := s.LoadReplay(ctx, "r")
		if err != nil {
			t.Fatal(err)
		}
		return shape{fields, cps, atts, len(rp.Checkpoints), len(rp.Pending)}
	}

	// the contract's measure: a run continued 10 000 times (2.5s here);
	// -short checks the same with fewer
	n := 10000
	if testing.Short() {
		n = 200
	}
	var first shape
	for i := 1; i <= n; i++ {
		l := mustClaimOne(t, s, "wf").Lease
		work(l)
		if i == 2 {
			first = look()
		}
		if err := s.ContinueAsNew(ctx, storage.ContinueRequest{Lease: l, Input: []byte{byte(i)}}); err != nil {
			t.Fatal(err)
		}
	}
	work(mustClaimOne(t, s, "wf").Lease)
	if got := look(); !reflect.DeepEqual(got, first) {
		t.Fatalf("after %d continues the current execution's keys are %+v, after 2 they were %+v", n, got, first)
	}
	if first.cps != 1 || first.atts != 2 || first.pen != 1 {
		t.Fatalf("current execution's keys hold %+v, want one checkpoint and two attempts, one pending", first)
	}
	for _, ex := range []int{1, n} {
		if m, err := client.HLen(ctx, k.pastCheckpoints(ex, "r")).Result(); err != nil || m != 1 {
			t.Fatalf("checkpoints of ended execution %d: %d %v", ex, m, err)
		}
		if m, err := client.LLen(ctx, k.pastAttempts(ex, "r")).Result(); err != nil || m != 2 {
			t.Fatalf("attempts of ended execution %d: %d %v", ex, m, err)
		}
	}
	if m, err := client.LLen(ctx, k.executions("r")).Result(); err != nil || m != int64(n) {
		t.Fatalf("executions list: %d %v, want %d", m, err, n)
	}
	if m, err := client.LLen(ctx, k.events("r", "later")).Result(); err != nil || m != 1 {
		t.Fatalf("buffered events after the continues: %d %v, want the one sent before", m, err)
	}
	execs, err := s.ListExecutions(ctx, "r")
	if err != nil || len(execs) != n+1 || execs[0].Status != storage.StatusContinued || execs[n].Status != storage.StatusRunning {
		t.Fatalf("executions: %v, %d of them", err, len(execs))
	}
}

// TestContinueLeaseLost: a ContinueAsNew whose lease no longer holds says
// why, as a heartbeat does, and a repeated one (the client sending the
// script again) finds its lease released.
func TestContinueLeaseLost(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newTestStore(t, newClock())
	mustCreate(t, s, storage.NewRun{ID: "r", Workflow: "wf"})
	l := mustClaimOne(t, s, "wf").Lease
	if err := s.ContinueAsNew(ctx, storage.ContinueRequest{Lease: l, Input: []byte("2")}); err != nil {
		t.Fatal(err)
	}
	err := s.ContinueAsNew(ctx, storage.ContinueRequest{Lease: l, Input: []byte("2")})
	var lost *storage.LeaseLostError
	if !errors.As(err, &lost) || lost.RunID != "r" || lost.Token != l.Token {
		t.Fatalf("repeated ContinueAsNew: %v, want a *LeaseLostError", err)
	}
	if execs, err := s.ListExecutions(ctx, "r"); err != nil || len(execs) != 2 {
		t.Fatalf("executions after a repeated ContinueAsNew: %v %+v", err, execs)
	}
}
