package sqlitestore

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stemflow/stem/storage"
)

// syncOf returns the synchronous mode the writer's transaction runs under,
// as the request it queues sees it (1: NORMAL, 2: FULL), through write or
// writeLease.
func syncOf(t *testing.T, s *Store, leaseOnly bool) int64 {
	t.Helper()
	var mode int64
	read := func(w *wtx) error {
		_, err := w.queryRow("PRAGMA synchronous", func(r row) { mode = r.int64(0) })
		return err
	}
	var err error
	if leaseOnly {
		err = s.writeLease(t.Context(), "probe", read)
	} else {
		err = s.write(t.Context(), "probe", read)
	}
	if err != nil {
		t.Fatal(err)
	}
	return mode
}

// With SyncFull, a batch of lease-only writes commits at synchronous=NORMAL
// and every other batch at FULL, the connection going back to FULL first;
// with SyncNormal both are NORMAL.
func TestLeaseOnlyBatchesSkipTheirFsync(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		mode              Synchronous
		leaseOnly, others int64
	}{
		{SyncFull, 1, 2},
		{SyncNormal, 1, 1},
	} {
		s, err := Open(filepath.Join(t.TempDir(), "stem.db"), Options{Synchronous: tc.mode})
		if err != nil {
			t.Fatal(err)
		}
		for _, leaseOnly := range []bool{true, true, false, true, false, false} {
			want := tc.others
			if leaseOnly {
				want = tc.leaseOnly
			}
			if got := syncOf(t, s, leaseOnly); got != want {
				t.Errorf("%v: lease-only %v committed at synchronous=%d, want %d", tc.mode, leaseOnly, got, want)
			}
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// A batch that holds a lease-only write beside any other is fsynced whole.
func TestMixedBatchIsFsynced(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, err := Open(filepath.Join(t.TempDir(), "stem.db"), Options{Synchronous: SyncFull})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// A first write holds the writer until both requests are queued, so
	// that the writer takes them in one batch.
	release := make(chan struct{})
	held := make(chan error, 1)
	go func() {
		held <- s.write(ctx, "hold", func(*wtx) error { <-release; return nil })
	}()
	waitFor(func() bool { return s.writerTook(1) })
	modes := make([]int64, 2)
	var wg sync.WaitGroup
	for i, leaseOnly := range []bool{true, false} {
		wg.Go(func() { modes[i] = syncOf(t, s, leaseOnly) })
		waitFor(func() bool { return len(s.queue) == i+1 })
	}
	close(release)
	wg.Wait()
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	if modes[0] != 2 || modes[1] != 2 {
		t.Fatalf("a lease-only and another write in one batch committed at synchronous=%v, want FULL (2) for both", modes)
	}
}

// Only Claim and Heartbeat are lease-only: every write a user asked for or
// was told of stays fsynced with SyncFull, a heartbeat that publishes
// progress too.
func TestOnlyLeaseWritesSkipFsync(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := Open(filepath.Join(t.TempDir(), "stem.db"), Options{Synchronous: SyncFull})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	wf := []string{"wf"}
	var lease storage.Lease
	claim := func() error {
		cl, err := s.Claim(ctx, storage.ClaimRequest{Owner: "w", Workflows: wf, Limit: 1, LeaseFor: time.Hour})
		if err == nil && len(cl) == 1 {
			lease = cl[0].Lease
		}
		return err
	}
	later := time.Now().Add(time.Hour)
	step := func(key string) storage.Checkpoint {
		return storage.Checkpoint{Key: key, Kind: storage.KindStep, Output: []byte(`1`)}
	}
	for _, c := range []struct {
		name      string
		leaseOnly bool
		do        func() error
	}{
		{"put catalog", false, func() error {
			return s.PutCatalog(ctx, storage.Catalog{Workflows: []storage.WorkflowType{{Name: "wf"}}})
		}},
		{"create runs", false, func() error {
			_, err := s.CreateRuns(ctx, []storage.NewRun{{ID: "a", Workflow: "wf"}, {ID: "b", Workflow: "wf"}, {ID: "c", Workflow: "wf"}})
			return err
		}},
		{"claim", true, claim},
		{"heartbeat", true, func() error {
			_, err := s.Heartbeat(ctx, storage.HeartbeatRequest{Lease: lease, LeaseFor: time.Hour})
			return err
		}},
		{"heartbeat publishing progress", false, func() error {
			_, err := s.Heartbeat(ctx, storage.HeartbeatRequest{Lease: lease, LeaseFor: time.Hour, Progress: []byte(`{"done":1}`)})
			return err
		}},
		{"checkpoint", false, func() error {
			_, err := s.Checkpoint(ctx, storage.CheckpointRequest{Lease: lease, LeaseFor: time.Hour, Checkpoint: step("s1@v1")})
			return err
		}},
		{"record attempts", false, func() error {
			return s.RecordAttempts(ctx, storage.RecordAttemptsRequest{Lease: lease, LeaseFor: time.Hour,
				Attempts: []storage.Attempt{{Key: "s2@v1", Number: 1, Started: time.Now(), Ended: time.Now(), Error: "boom"}}})
		}},
		{"suspend", false, func() error {
			nap := step("nap@v1")
			_, err := s.Suspend(ctx, storage.SuspendRequest{Lease: lease, LeaseFor: time.Hour, Checkpoint: &nap, ReadyAt: &later})
			return err
		}},
		{"send event", false, func() error {
			_, err := s.SendEvent(ctx, storage.Event{RunID: "a", Topic: "t", Payload: []byte(`{}`)})
			return err
		}},
		{"emit", false, func() error {
			_, err := s.Emit(ctx, storage.EmitRequest{Topic: "t", Payload: []byte(`{}`)})
			return err
		}},
		{"pause", false, func() error { return s.Pause(ctx, "c") }},
		{"resume", false, func() error { return s.Resume(ctx, "c") }},
		{"claim again", true, claim},
		{"complete", false, func() error {
			return s.Complete(ctx, storage.CompleteRequest{Lease: lease, Status: storage.StatusComplete, Output: []byte(`1`)})
		}},
		{"terminate", false, func() error {
			_, err := s.Terminate(ctx, storage.TerminateRequest{RunID: "c", Error: storage.ErrorInfo{Message: "stop"}})
			return err
		}},
		{"restart", false, func() error { return s.Restart(ctx, storage.RestartRequest{RunID: "c"}) }},
		{"claim the restarted", true, claim},
		{"continue as new", false, func() error {
			return s.ContinueAsNew(ctx, storage.ContinueRequest{Lease: lease, Input: []byte(`2`)})
		}},
	} {
		before := s.lazy.Load()
		if err := c.do(); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := s.lazy.Load() - before; got != map[bool]int64{true: 1, false: 0}[c.leaseOnly] {
			t.Errorf("%s: %d batches committed without an fsync, want lease-only %v", c.name, got, c.leaseOnly)
		}
	}
}
