package memstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stemflow/stem/storage"

	"github.com/stemflow/stem/stores/memstore"
	"github.com/stemflow/stem/stores/storetest"
)

func notified(ch <-chan struct{}) bool {
	select {
	case _, ok := <-ch:
		return ok
	default:
		return false
	}
}

func TestNotifications(t *testing.T) {
	ctx := t.Context()
	c := storetest.NewClock(storetest.Start)
	s := memstore.New(memstore.Options{Clock: c})
	defer s.Close()
	subCtx, cancel := context.WithCancel(ctx)
	ch := s.Notifications(subCtx)
	other := s.Notifications(ctx)
	if notified(ch) {
		t.Fatal("notified before anything happened")
	}
	step := func(what string, want bool, f func() error) {
		t.Helper()
		if err := f(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if got := notified(ch); got != want {
			t.Fatalf("%s: notified %v, want %v", what, got, want)
		}
		notified(other)
	}
	var lease storage.Lease
	claim := func() error {
		got, err := s.Claim(ctx, storage.ClaimRequest{Owner: "w", Workflows: []string{"wf"}, Limit: 1, LeaseFor: time.Minute})
		if err == nil && len(got) != 1 {
			err = fmt.Errorf("claimed %d runs", len(got))
		}
		if err == nil {
			lease = got[0].Lease
		}
		return err
	}
	step("create", true, func() error {
		_, err := s.CreateRuns(ctx, []storage.NewRun{{ID: "r1", Workflow: "wf"}, {ID: "r2", Workflow: "wf"}})
		return err
	})
	step("claim", false, claim)
	step("sleep", false, func() error {
		wake := c.Now().Add(time.Hour)
		_, err := s.Suspend(ctx, storage.SuspendRequest{Lease: lease, LeaseFor: time.Minute, ReadyAt: &wake})
		return err
	})
	step("claim r2", false, claim)
	step("wait for an event", false, func() error {
		_, err := s.Suspend(ctx, storage.SuspendRequest{Lease: lease, LeaseFor: time.Minute, Wait: &storage.Wait{Key: "k", Topic: "t"}})
		return err
	})
	step("pause", false, func() error { return s.Pause(ctx, "r2") })
	step("emit to a paused run", false, func() error { _, err := s.Emit(ctx, storage.EmitRequest{Topic: "t", Payload: nil}); return err })
	step("resume", true, func() error { return s.Resume(ctx, "r2") })
	step("claim r2 again", false, claim)
	step("release ready now", true, func() error {
		now := c.Now()
		_, err := s.Suspend(ctx, storage.SuspendRequest{Lease: lease, LeaseFor: time.Minute, ReadyAt: &now})
		return err
	})
	step("claim r2 once more", false, claim)
	step("wait again", false, func() error {
		_, err := s.Suspend(ctx, storage.SuspendRequest{Lease: lease, LeaseFor: time.Minute, Wait: &storage.Wait{Key: "k2", Topic: "t"}})
		return err
	})
	step("send event", true, func() error { _, err := s.SendEvent(ctx, storage.Event{RunID: "r2", Topic: "t"}); return err })
	step("restart", true, func() error { return s.Restart(ctx, storage.RestartRequest{RunID: "r1"}) })

	cancel()
	for range ch { // closed once the subscription's context is done
	}
	if notified(other) {
		t.Fatal("stale notification on the other channel")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for range other { // closed by Close
	}
	if _, ok := <-s.Notifications(ctx); ok {
		t.Fatal("Notifications after Close delivered a value")
	}
}
