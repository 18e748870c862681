package pgstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stemflow/stem/storage"
	"github.com/stemflow/stem/stores/storetest"
)

// claimAll creates n runs and claims them all.
func claimAll(t *testing.T, s *Store, n int, owner string) []storage.ClaimedRun {
	t.Helper()
	createN(t, s, n)
	got, err := s.Claim(context.Background(), storage.ClaimRequest{Owner: owner, Workflows: []string{"wf"}, Limit: n, LeaseFor: time.Minute})
	if err != nil || len(got) != n {
		t.Fatalf("claim: %v (%d of %d)", err, len(got), n)
	}
	return got
}

// checkpointsOf returns the checkpoints a worker would replay the run from.
func checkpointsOf(ctx context.Context, s *Store, runID string) ([]storage.Checkpoint, error) {
	rp, err := s.LoadReplay(ctx, runID)
	return rp.Checkpoints, err
}

func stepCall(l storage.Lease, key, output string) *ckptCall {
	return &ckptCall{
		req: storage.CheckpointRequest{Lease: l, LeaseFor: time.Minute,
			Checkpoint: storage.Checkpoint{Key: key, Kind: storage.KindStep, Output: []byte(output)}},
		done: make(chan struct{}),
	}
}

// TestCheckpointBatchMixed: one statement carrying a fresh write, a write
// under a stolen lease and a write of an existing key answers each on its
// own.
func TestCheckpointBatchMixed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := storetest.NewClock(storetest.Start)
	s := newTestStore(t, Options{Clock: clock})
	runs := claimAll(t, s, 3, "old")
	a, b, c := runs[0].Lease, runs[1].Lease, runs[2].Lease
	if _, err := s.Checkpoint(ctx, storage.CheckpointRequest{Lease: c, LeaseFor: time.Minute,
		Checkpoint: storage.Checkpoint{Key: "k@v1", Kind: storage.KindStep, Output: []byte("first")}}); err != nil {
		t.Fatal(err)
	}
	// b's lease expires and another worker takes the run over; a and c
	// extend theirs first.
	clock.Advance(30 * time.Second)
	for _, l := range []storage.Lease{a, c} {
		if _, err := s.Heartbeat(ctx, storage.HeartbeatRequest{Lease: l, LeaseFor: time.Minute}); err != nil {
			t.Fatal(err)
		}
	}
	clock.Advance(31 * time.Second)
	stolen, err := s.Claim(ctx, storage.ClaimRequest{Owner: "new", Workflows: []string{"wf"}, Limit: 10, LeaseFor: time.Minute})
	if err != nil || len(stolen) != 1 || stolen[0].Lease.RunID != b.RunID {
		t.Fatalf("takeover: %v %+v", err, stolen)
	}

	calls := []*ckptCall{stepCall(a, "k@v1", "a"), stepCall(b, "k@v1", "stale"), stepCall(c, "k@v1", "second")}
	s.writeBatch(calls)
	if err := calls[0].err; err != nil || calls[0].res.Existing != nil {
		t.Fatalf("fresh write: %v %+v", err, calls[0].res)
	}
	if err := calls[1].err; !errors.Is(err, storage.ErrLeaseLost) {
		t.Fatalf("stale write: %v, want ErrLeaseLost", err)
	}
	if err := calls[2].err; err != nil || calls[2].res.Existing == nil || string(calls[2].res.Existing.Output) != "first" {
		t.Fatalf("existing key: %v %+v", err, calls[2].res)
	}
	if cps, _ := checkpointsOf(ctx, s, b.RunID); len(cps) != 0 {
		t.Fatalf("the stale write landed: %+v", cps)
	}
}

// TestCheckpointBatchFallback: a request that makes the shared statement
// fail fails alone; the others in its batch are written.
func TestCheckpointBatchFallback(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newTestStore(t, Options{})
	runs := claimAll(t, s, 2, "w")
	good := stepCall(runs[0].Lease, "k@v1", "ok")
	bad := stepCall(runs[1].Lease, "k@v1", "bad")
	notJSON := "{not json"
	bad.errJSON = &notJSON
	s.writeBatch([]*ckptCall{good, bad})
	if good.err != nil {
		t.Fatalf("good request: %v", good.err)
	}
	if bad.err == nil {
		t.Fatal("bad request succeeded")
	}
	if cps, err := checkpointsOf(ctx, s, runs[0].Lease.RunID); err != nil || len(cps) != 1 {
		t.Fatalf("good checkpoint: %v %+v", err, cps)
	}
	if cps, err := checkpointsOf(ctx, s, runs[1].Lease.RunID); err != nil || len(cps) != 0 {
		t.Fatalf("bad checkpoint: %v %+v", err, cps)
	}
}

// TestCheckpointSameRunConcurrently: checkpoints of one run issued at once
// never share a statement, all land, and their sequence follows their
// commit order.
func TestCheckpointSameRunConcurrently(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newTestStore(t, Options{})
	runs := claimAll(t, s, 2, "w")
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Go(func() {
			l := runs[i%2].Lease
			if _, err := s.Checkpoint(ctx, storage.CheckpointRequest{Lease: l, LeaseFor: time.Minute,
				Checkpoint: storage.Checkpoint{Key: fmt.Sprintf("k%d@v1", i), Kind: storage.KindStep}}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	for _, r := range runs {
		cps, err := checkpointsOf(ctx, s, r.Lease.RunID)
		if err != nil || len(cps) != 20 {
			t.Fatalf("run %s: %v, %d checkpoints", r.Lease.RunID, err, len(cps))
		}
		for i := 1; i < len(cps); i++ {
			if cps[i].Seq <= cps[i-1].Seq {
				t.Fatalf("sequence not increasing: %+v", cps)
			}
		}
	}
}

// TestStaleLeaseWritesRejected: after another worker took a run over, every
// fenced write under the old lease fails with ErrLeaseLost and changes
// nothing.
func TestStaleLeaseWritesRejected(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := storetest.NewClock(storetest.Start)
	s := newTestStore(t, Options{Clock: clock})
	old := claimAll(t, s, 1, "old")[0].Lease
	clock.Advance(2 * time.Minute)
	got, err := s.Claim(ctx, storage.ClaimRequest{Owner: "new", Workflows: []string{"wf"}, Limit: 1, LeaseFor: time.Minute})
	if err != nil || len(got) != 1 || got[0].Lease.Token <= old.Token || got[0].Recoveries != 1 {
		t.Fatalf("takeover: %v %+v", err, got)
	}
	before, err := s.GetRun(ctx, old.RunID)
	if err != nil {
		t.Fatal(err)
	}
	cp := storage.Checkpoint{Key: "k@v1", Kind: storage.KindStep, Output: []byte("stale")}
	ready := clock.Now()
	writes := map[string]func() error{
		"Checkpoint": func() error {
			_, err := s.Checkpoint(ctx, storage.CheckpointRequest{Lease: old, LeaseFor: time.Minute, Checkpoint: cp})
			return err
		},
		"RecordAttempts": func() error {
			return s.RecordAttempts(ctx, storage.RecordAttemptsRequest{Lease: old, LeaseFor: time.Minute, Attempts: []storage.Attempt{{Key: "k@v1", Number: 1, Error: "x"}}})
		},
		"Heartbeat": func() error {
			_, err := s.Heartbeat(ctx, storage.HeartbeatRequest{Lease: old, LeaseFor: time.Minute})
			return err
		},
		"Suspend": func() error {
			_, err := s.Suspend(ctx, storage.SuspendRequest{Lease: old, LeaseFor: time.Minute, Checkpoint: &cp, ReadyAt: &ready})
			return err
		},
		"Complete": func() error {
			return s.Complete(ctx, storage.CompleteRequest{Lease: old, Status: storage.StatusComplete, Output: []byte("x")})
		},
		"CompleteNotify": func() error {
			return s.Complete(ctx, storage.CompleteRequest{Lease: old, Status: storage.StatusComplete,
				Notify: &storage.Event{RunID: old.RunID, Topic: "t"}})
		},
	}
	for name, write := range writes {
		if err := write(); !errors.Is(err, storage.ErrLeaseLost) {
			t.Errorf("%s under a stolen lease: %v, want ErrLeaseLost", name, err)
		}
	}
	after, err := s.GetRun(ctx, old.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if after.Token != before.Token || after.Status != storage.StatusRunning || !after.LeaseUntil.Equal(before.LeaseUntil) ||
		!after.UpdatedAt.Equal(before.UpdatedAt) {
		t.Fatalf("stale writes changed the run:\nbefore %+v\nafter  %+v", before, after)
	}
	if h, err := s.ListSteps(ctx, storage.StepsQuery{RunID: old.RunID}); err != nil || len(h.Steps) != 0 || len(h.Pending) != 0 {
		t.Fatalf("stale writes left steps: %v %+v", err, h)
	}
}

// TestCheckpointBatchOtherKeys: attempts of keys other than the checkpoint's
// ride in the batch statement to the attempts table, for the requests whose
// checkpoint is written only: they are pending until their own key
// checkpoints, then listed with it; a stale request's are not written.
func TestCheckpointBatchOtherKeys(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newTestStore(t, Options{})
	runs := claimAll(t, s, 3, "w")
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	retry := at.Add(time.Minute)
	calls := make([]*ckptCall, 3)
	for i, r := range runs {
		l := r.Lease
		if i == 2 {
			l.Token++ // stale
		}
		calls[i] = stepCall(l, "k@v1", "out")
		calls[i].attempts, _ = encodeAttempts([]storage.Attempt{{Key: "k@v1", Number: 1, Started: at, Ended: at}})
		calls[i].loose = []storage.Attempt{
			{Key: "other@v1", Number: 1, Started: at, Ended: at, Error: "first", RetryAt: &retry},
			{Key: "other@v1", Number: 2, Started: at, Ended: at, Error: fmt.Sprint("run ", i)},
		}
	}
	s.writeBatch(calls)
	for i, c := range calls {
		if wantLost := i == 2; errors.Is(c.err, storage.ErrLeaseLost) != wantLost || (!wantLost && c.err != nil) {
			t.Fatalf("call %d: %v", i, c.err)
		}
	}
	for i, r := range runs {
		id := r.Lease.RunID
		rp, err := s.LoadReplay(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if i == 2 {
			if len(rp.Checkpoints) != 0 || len(rp.Pending) != 0 {
				t.Fatalf("stale request wrote %+v", rp)
			}
			continue
		}
		if len(rp.Checkpoints) != 1 || len(rp.Pending) != 2 || rp.Pending[0].Number != 1 || rp.Pending[1].Error != fmt.Sprint("run ", i) ||
			rp.Pending[0].RetryAt == nil || !rp.Pending[0].RetryAt.Equal(retry) || rp.Pending[0].Execution != 1 {
			t.Fatalf("replay of %s: %+v", id, rp)
		}
		if _, err := s.Checkpoint(ctx, storage.CheckpointRequest{Lease: r.Lease, LeaseFor: time.Minute,
			Checkpoint: storage.Checkpoint{Key: "other@v1", Kind: storage.KindStep}}); err != nil {
			t.Fatal(err)
		}
		h, err := s.ListSteps(ctx, storage.StepsQuery{RunID: id})
		if err != nil || len(h.Steps) != 2 || len(h.Steps[0].Attempts) != 1 || len(h.Steps[1].Attempts) != 2 || len(h.Pending) != 0 {
			t.Fatalf("steps of %s: %v %+v", id, err, h)
		}
		if rp, err := s.LoadReplay(ctx, id); err != nil || len(rp.Pending) != 0 || len(rp.Checkpoints) != 2 {
			t.Fatalf("replay of %s after its checkpoint: %v %+v", id, err, rp)
		}
	}
}

// TestBatchProgress: one batch of checkpoints, completions and parks, some
// publishing progress and some not, publishes each run's own and leaves the
// others' as they were; a call under a lost lease publishes nothing.
func TestBatchProgress(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := storetest.NewClock(storetest.Start)
	s := newTestStore(t, Options{Clock: clock})
	runs := claimAll(t, s, 7, "w")
	for _, r := range runs {
		if _, err := s.Heartbeat(ctx, storage.HeartbeatRequest{Lease: r.Lease, LeaseFor: time.Minute, Progress: []byte("before")}); err != nil {
			t.Fatal(err)
		}
	}
	stale := runs[6].Lease
	stale.Token--
	with := func(c *ckptCall, p string) *ckptCall {
		switch {
		case c.fin != nil:
			c.fin.req.Progress = []byte(p)
		case c.park != nil:
			c.park.req.Progress = []byte(p)
		default:
			c.req.Progress = []byte(p)
		}
		return c
	}
	fin := func(l storage.Lease) *ckptCall {
		return &ckptCall{fin: &finCall{req: storage.CompleteRequest{Lease: l, Status: storage.StatusComplete}}, done: make(chan struct{})}
	}
	park := func(l storage.Lease) *ckptCall {
		at := clock.Now().Add(time.Hour)
		return &ckptCall{park: &parkCall{req: storage.SuspendRequest{Lease: l, LeaseFor: time.Minute, ReadyAt: &at,
			Checkpoint: &storage.Checkpoint{Key: "nap@v1", Kind: storage.KindSleep, Output: []byte(`"x"`)}}}, done: make(chan struct{})}
	}
	calls := []*ckptCall{
		with(stepCall(runs[0].Lease, "k@v1", "1"), "p0"),
		stepCall(runs[1].Lease, "k@v1", "1"),
		with(fin(runs[2].Lease), "p2"),
		fin(runs[3].Lease),
		with(park(runs[4].Lease), "p4"),
		park(runs[5].Lease),
		with(stepCall(stale, "k@v1", "1"), "stale"),
	}
	s.writeBatch(calls)
	for i, c := range calls[:6] {
		if c.err != nil {
			t.Fatalf("call %d: %v", i, c.err)
		}
	}
	if !errors.Is(calls[6].err, storage.ErrLeaseLost) {
		t.Fatalf("stale call: %v, want ErrLeaseLost", calls[6].err)
	}
	for i, want := range []string{"p0", "before", "p2", "before", "p4", "before", "before"} {
		rec, err := s.GetRun(ctx, runs[i].Lease.RunID)
		if err != nil || string(rec.Progress) != want {
			t.Errorf("run %d: progress %q, %v; want %q", i, rec.Progress, err, want)
		}
	}
	// A batch in which no call publishes progress leaves every run's.
	more := []*ckptCall{stepCall(runs[0].Lease, "k2@v1", "2"), stepCall(runs[1].Lease, "k2@v1", "2")}
	s.writeBatch(more)
	for i, want := range []string{"p0", "before"} {
		if more[i].err != nil {
			t.Fatal(more[i].err)
		}
		if rec, err := s.GetRun(ctx, runs[i].Lease.RunID); err != nil || string(rec.Progress) != want {
			t.Errorf("run %d after a batch without progress: %q, %v; want %q", i, rec.Progress, err, want)
		}
	}
}

// TestCompleteBatchCascades: completions with child errors riding in one
// batch terminate their descendants in its transaction, a parent and its
// child both completing included (the grandchild is reached through the
// child, finished by the same batch); a refused completion and one
// without a child error touch no child.
func TestCompleteBatchCascades(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := storetest.NewClock(storetest.Start)
	s := newTestStore(t, Options{Clock: clock})
	// p ── c ── g; r ── k; q ── j: p, c, r and q run, the others wait queued.
	if _, err := s.CreateRuns(ctx, []storage.NewRun{
		{ID: "p", Workflow: "wf"}, {ID: "c", Workflow: "wf", ParentID: "p"}, {ID: "g", Workflow: "wf-kid", ParentID: "c"},
		{ID: "r", Workflow: "wf"}, {ID: "k", Workflow: "wf-kid", ParentID: "r"},
		{ID: "q", Workflow: "wf"}, {ID: "j", Workflow: "wf-kid", ParentID: "q"},
	}); err != nil {
		t.Fatal(err)
	}
	claimed, err := s.Claim(ctx, storage.ClaimRequest{Owner: "w", Workflows: []string{"wf"}, Limit: 10, LeaseFor: time.Minute})
	if err != nil || len(claimed) != 4 {
		t.Fatalf("claim: %v (%d runs, want 4)", err, len(claimed))
	}
	leases := map[string]storage.Lease{}
	for _, c := range claimed {
		leases[c.Lease.RunID] = c.Lease
	}
	stale := leases["r"]
	stale.Token--
	errP, errC := storage.ErrorInfo{Message: "parent p finished"}, storage.ErrorInfo{Message: "parent c finished"}
	fin := func(l storage.Lease, child *storage.ErrorInfo) *ckptCall {
		js, err := encodeError(child)
		if err != nil {
			t.Fatal(err)
		}
		return &ckptCall{fin: &finCall{req: storage.CompleteRequest{Lease: l, Status: storage.StatusComplete, ChildError: child},
			childJSON: textOf(js)}, done: make(chan struct{})}
	}
	calls := []*ckptCall{
		fin(leases["p"], &errP), fin(leases["c"], &errC),
		fin(stale, &storage.ErrorInfo{Message: "parent r finished"}),
		fin(leases["q"], nil),
	}
	clock.Advance(time.Second)
	s.writeBatch(calls)
	for i, c := range calls {
		switch {
		case i == 2:
			if !errors.Is(c.err, storage.ErrLeaseLost) {
				t.Fatalf("stale completion: %v, want ErrLeaseLost", c.err)
			}
		case c.err != nil:
			t.Fatalf("call %d: %v", i, c.err)
		}
	}
	for id, want := range map[string]storage.RunStatus{
		"p": storage.StatusComplete, "c": storage.StatusComplete, "g": storage.StatusTerminated,
		"r": storage.StatusRunning, "k": storage.StatusQueued, "q": storage.StatusComplete, "j": storage.StatusQueued,
	} {
		rec, err := s.GetRun(ctx, id)
		if err != nil || rec.Status != want {
			t.Fatalf("run %s: %s, %v; want %s", id, rec.Status, err, want)
		}
		if id == "g" && (rec.Error == nil || (*rec.Error != errP && *rec.Error != errC) || rec.EndedAt == nil || !rec.EndedAt.Equal(clock.Now())) {
			t.Fatalf("run g: error %+v, ended %v; want %+v or %+v, ended %v", rec.Error, rec.EndedAt, errP, errC, clock.Now())
		}
	}
}
