package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/stemflow/stem/internal/crashtest"
	"github.com/stemflow/stem/internal/testserver"
	"github.com/stemflow/stem/storage"
)

// TestChaosServerRestart: three worker processes share 300 ten-step runs on
// a private redis-server with appendonly yes and appendfsync always, which
// is killed with SIGKILL and started again (replaying its AOF) twice when a
// third of the runs are complete: at once, so scripts in flight lose their
// answers and the clients reconnect straight away; then, 300ms later, kept
// down for ten leases, longer than go-redis retries a command, so the
// workers see the errors and every lease expires while the server is away. No
// worker is restarted: their clients reconnect by themselves, and every run
// still completes once, with exactly one checkpoint per step key.
func TestChaosServerRestart(t *testing.T) {
	rd := testserver.Redis(t, "--appendonly", "yes", "--appendfsync", "always")
	const prefix = "stemrestart:"
	crashtest.Run(t, crashtest.Config{
		Open: func(t testing.TB) storage.Store {
			s, err := Open(context.Background(), rd.URL(), Options{Prefix: prefix, Logger: quietLogger()})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })
			return s
		},
		Env:          []string{"STEM_TEST_REDIS_URL=" + rd.URL(), envCrashPrefix + "=" + prefix},
		Runs:         300,
		Processes:    3,
		Concurrency:  8,
		Lease:        300 * time.Millisecond,
		StepDuration: 20 * time.Millisecond,
		Disrupt: func(t *testing.T) {
			rd.Kill()
			rd.Start()
			time.Sleep(300 * time.Millisecond)
			rd.Kill()
			time.Sleep(3 * time.Second)
			rd.Start()
		},
		Timeout: 90 * time.Second,
	})
}

// TestFinishedAfterResubscribe: a subscriber to runs' ends hears them and
// is told of no gap at its subscription, and, after the server was killed and started again
// (go-redis subscribes again by itself), that it may have missed some
// (storage.Missed); ends flow again after that.
func TestFinishedAfterResubscribe(t *testing.T) {
	rd := testserver.Redis(t)
	ctx := t.Context()
	s, err := Open(ctx, rd.URL(), Options{Prefix: "stemresub:", Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	ends := s.Finished(ctx)
	endRun := func(id string) {
		t.Helper()
		testserver.AnswersAgain(t, "redis", func() error {
			_, err := s.CreateRuns(ctx, []storage.NewRun{{ID: id, Workflow: "wf"}})
			return err
		})
		claimed, err := s.Claim(ctx, storage.ClaimRequest{Owner: "w", Workflows: []string{"wf"}, Limit: 1, LeaseFor: time.Minute})
		if err != nil || len(claimed) != 1 {
			t.Fatalf("claim: %v, %d runs", err, len(claimed))
		}
		if err := s.Complete(ctx, storage.CompleteRequest{Lease: claimed[0].Lease, Status: storage.StatusComplete, Output: []byte("1")}); err != nil {
			t.Fatal(err)
		}
	}
	endRun("r0")
	select {
	case id := <-ends:
		if id != "r0" {
			t.Fatalf("the first thing a new subscriber to ends got is %q, want the end of r0", id)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the end of a run was not heard")
	}
	rd.Kill()
	rd.Start()
	select {
	case id := <-ends:
		if id != storage.Missed {
			t.Fatalf("after the server came back a subscriber to ends got %q, want storage.Missed", id)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("after the server came back a subscriber to ends was not told it may have missed some")
	}
	// Ends are heard again.
	endRun("r1")
	for {
		select {
		case id := <-ends:
			if id == "r1" {
				return
			}
		case <-time.After(60 * time.Second):
			t.Fatal("the end of a run after the resubscription was not heard")
		}
	}
}
