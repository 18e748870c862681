package sqlitestore

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/storage"
)

// TestForeignCommitsAreHeard: two Stores on one file stand for two
// processes. A's own writes, thousands of them and the checkpoints they
// bring, never tell A's subscribers they missed an end; one write by B
// wakes A's ready subscribers and tells its finished subscribers they may
// have missed some (storage.Missed), once.
func TestForeignCommitsAreHeard(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "stem.db")
	// A small log and a short idle wait: A's writes checkpoint often, and
	// its idle writer truncates the log.
	a, err := Open(path, Options{MaxWAL: 64 << 10, IdleCheckpoint: foreignCheck / 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	ends, ready := a.Finished(ctx), a.Notifications(ctx)

	// A's own writes: runs created, claimed and completed, named as they end.
	for i := range 300 {
		id := fmt.Sprintf("a%03d", i)
		if _, err := a.CreateRuns(ctx, []storage.NewRun{{ID: id, Workflow: "wf", Input: make([]byte, 512)}}); err != nil {
			t.Fatal(err)
		}
		claimed, err := a.Claim(ctx, storage.ClaimRequest{Owner: "a", Workflows: []string{"wf"}, Limit: 1, LeaseFor: time.Minute})
		if err != nil || len(claimed) != 1 {
			t.Fatalf("claim: %v, %d runs", err, len(claimed))
		}
		if err := a.Complete(ctx, storage.CompleteRequest{Lease: claimed[0].Lease, Status: storage.StatusComplete}); err != nil {
			t.Fatal(err)
		}
		if id := <-ends; id == storage.Missed {
			t.Fatalf("after A's own write %d its subscriber was told it missed ends", i)
		}
	}
	// Several checks of data_version, and a TRUNCATE checkpoint, pass with
	// A idle: still no gap.
	time.Sleep(3 * foreignCheck)
	select {
	case id := <-ends:
		t.Fatalf("an idle store's subscriber got %q", id)
	default:
	}
	for len(ready) > 0 {
		<-ready
	}

	b, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	if _, err := b.CreateRuns(ctx, []storage.NewRun{{ID: "b1", Workflow: "wf"}}); err != nil {
		t.Fatal(err)
	}
	select {
	case id := <-ends:
		if id != storage.Missed {
			t.Fatalf("after B's write A's subscriber got %q, want storage.Missed", id)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("B's write never reached A's finished subscriber")
	}
	select {
	case <-ready:
	case <-time.After(30 * time.Second):
		t.Fatal("B's write never woke A's ready subscriber")
	}
}

// TestResultOfARunAnotherProcessEnds: a caller in one process awaits a run
// that a worker in another process (a Store of its own on the file) works
// and ends; the caller's engine polls only every hour, so the result
// comes from hearing the other process's write.
func TestResultOfARunAnotherProcessEnds(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	path := filepath.Join(t.TempDir(), "stem.db")
	open := func(workers int) *runtime.Engine {
		s, err := Open(path, Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		e, err := runtime.New(runtime.Config{Store: s, Workers: workers, PollInterval: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Close() })
		if err := runtime.Register(e, "foreign.double", func(_ *runtime.WorkflowContext, n int) (int, error) { return 2 * n, nil }); err != nil {
			t.Fatal(err)
		}
		return e
	}
	caller, worker := open(1), open(1)
	run, err := runtime.Start[int, int](ctx, caller, "foreign.double", 21) // caller does not work runs: not eager
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- worker.Run(ctx) }()
	out, err := run.Result(ctx)
	if err != nil || out != 42 {
		t.Fatalf("Result = %d, %v; want 42", out, err)
	}
	cancel()
	<-done
}
