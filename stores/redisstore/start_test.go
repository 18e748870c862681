package redisstore

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stemflow/stem/storage"
)

// storeKeys lists the keys under the store's prefix (prefixKeys), without
// the prefix and sorted, leaving out the operation replies (op:), which
// expire by themselves.
func storeKeys(t *testing.T, s *Store, c *redis.Client) []string {
	t.Helper()
	var keys []string
	for _, k := range prefixKeys(t, c, globEscape(s.keys.prefix)) {
		if k = strings.TrimPrefix(k, s.keys.prefix); !strings.HasPrefix(k, "op:") {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

// TestReplaceLeavesNothing: a replacement deletes every key the replaced
// run and its descendants owned (checkpoints, attempts, an ended
// execution's, buffered events, children indexes, finished index
// entries), terminates first, and announces, the descendant its
// cascade does not reach (below a finished child that abandons its
// parent), and leaves the store's keys exactly as a fresh create of the
// new run would, the record of the start key the old run held gone too,
// but for the last tokens of the descendants ever claimed (tk:<id>),
// kept for the next runs of their IDs (TestReplaceKeepsTokens).
func TestReplaceLeavesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := newClock()
	s, c := newTestStore(t, clock)
	fresh, fc := newTestStore(t, clock)
	ended := s.Finished(ctx)
	key := &storage.StartKey{Key: "k:1"}
	mustCreate(t, s, storage.NewRun{ID: "p", Workflow: "wf", Input: []byte("old"), Key: key})
	p := mustClaimOne(t, s, "wf")
	if err := s.Restart(ctx, storage.RestartRequest{RunID: "p"}); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Minute) // the restart waits for the revoked lease to expire
	p = mustClaimOne(t, s, "wf")
	if _, err := s.Checkpoint(ctx, storage.CheckpointRequest{Lease: p.Lease, LeaseFor: time.Minute,
		Checkpoint: storage.Checkpoint{Key: "s@v1", Kind: storage.KindStep, Output: []byte("x")},
		Attempts:   []storage.Attempt{{Key: "s@v1", Number: 1, Started: clock.Now(), Ended: clock.Now()}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SendEvent(ctx, storage.Event{RunID: "p", Topic: "t", Payload: []byte("e")}); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, s,
		storage.NewRun{ID: "p/c", Workflow: "wf-c", ParentID: "p"},
		storage.NewRun{ID: "p/a", Workflow: "wf-a", ParentID: "p", ParentPolicy: storage.ParentAbandon})
	if _, err := s.SendEvent(ctx, storage.Event{RunID: "p/c", Topic: "t", Payload: []byte("e")}); err != nil {
		t.Fatal(err)
	}
	a := mustClaimOne(t, s, "wf-a")
	if err := s.Complete(ctx, storage.CompleteRequest{Lease: a.Lease, Status: storage.StatusComplete}); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, s, storage.NewRun{ID: "p/a/g", Workflow: "wf-g", ParentID: "p/a"})
	g := mustClaimOne(t, s, "wf-g")
	if _, err := s.Suspend(ctx, storage.SuspendRequest{Lease: g.Lease, LeaseFor: time.Minute, Wait: &storage.Wait{Key: "w@v1", Topic: "gt"}}); err != nil {
		t.Fatal(err)
	}
	if got := <-ended; got != "p/a" {
		t.Fatalf("Finished heard %q, want p/a", got)
	}

	clock.Advance(time.Second)
	newRun := storage.NewRun{ID: "p", Workflow: "wf", Input: []byte("new")}
	replacing := newRun
	replacing.OnExisting, replacing.Replace = storage.ExistingReplace, &storage.ReplaceTerms{
		Error: storage.ErrorInfo{Message: "replaced"}, ChildError: storage.ErrorInfo{Message: "parent replaced"}}
	res, err := s.CreateRuns(ctx, []storage.NewRun{replacing})
	if err != nil || !res[0].Created || res[0].ReplacedStatus != storage.StatusRunning {
		t.Fatalf("replace = %+v, %v", res, err)
	}
	var heard []string
	for range 3 {
		select {
		case id := <-ended:
			heard = append(heard, id)
		case <-time.After(5 * time.Second):
			t.Fatalf("Finished heard only %v", heard)
		}
	}
	slices.Sort(heard)
	if want := []string{"p", "p/a/g", "p/c"}; !slices.Equal(heard, want) {
		t.Fatalf("Finished heard %v, want %v", heard, want)
	}
	mustCreate(t, fresh, newRun)
	want := append(storeKeys(t, fresh, fc), "tk:p/a", "tk:p/a/g")
	slices.Sort(want)
	if got := storeKeys(t, s, c); !slices.Equal(got, want) {
		t.Fatalf("keys after the replace:\n%q\nafter a fresh create:\n%q", got, want)
	}
	if ids, err := s.Emit(ctx, storage.EmitRequest{Topic: "gt", Payload: []byte("x")}); err != nil || len(ids) != 0 {
		t.Fatalf("Emit reached %v, %v: a deleted run kept its wait", ids, err)
	}
}

// TestReplaceKeepsTokens: a replacement keeps the last token of each
// descendant ever claimed, and of none other, under its ID, expiring a
// day after the descendant's lease would have ended; the next run created
// under the ID, queued or leased, goes on from it and deletes it, so the
// deleted run's holder never matches its lease.
func TestReplaceKeepsTokens(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := newClock()
	s, c := newTestStore(t, clock)
	k := s.keys
	mustCreate(t, s, storage.NewRun{ID: "p", Workflow: "wf"})
	mustClaimOne(t, s, "wf")
	mustCreate(t, s,
		storage.NewRun{ID: "p/run", Workflow: "wf-run", ParentID: "p"},
		storage.NewRun{ID: "p/done", Workflow: "wf-done", ParentID: "p"},
		storage.NewRun{ID: "p/new", Workflow: "wf-new", ParentID: "p"})
	mustClaimOne(t, s, "wf-run") // leased for a minute
	done := mustClaimOne(t, s, "wf-done")
	if err := s.Complete(ctx, storage.CompleteRequest{Lease: done.Lease, Status: storage.StatusComplete}); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Second)
	res, err := s.CreateRuns(ctx, []storage.NewRun{{ID: "p", Workflow: "wf", OnExisting: storage.ExistingReplace,
		Replace: &storage.ReplaceTerms{Error: storage.ErrorInfo{Message: "replaced"}, ChildError: storage.ErrorInfo{Message: "parent replaced"}}}})
	if err != nil || !res[0].Created || !res[0].Replaced {
		t.Fatalf("replace = %+v, %v", res, err)
	}
	const day = 24 * time.Hour
	for _, tc := range []struct {
		id  string
		ttl time.Duration // the longest it can have
	}{
		{"p/run", day + 59*time.Second}, // the rest of its lease, then a day
		{"p/done", day},                 // its lease ended when it did
	} {
		if got, err := c.Get(ctx, k.keptToken(tc.id)).Result(); err != nil || got != "1" {
			t.Errorf("%s's kept token = %q, %v; want 1", tc.id, got, err)
		}
		if ttl, err := c.PTTL(ctx, k.keptToken(tc.id)).Result(); err != nil || ttl > tc.ttl || ttl < tc.ttl-5*time.Second {
			t.Errorf("%s's kept token expires in %v, %v; want %v", tc.id, ttl, err, tc.ttl)
		}
	}
	for _, id := range []string{"p", "p/new"} {
		if n, err := c.Exists(ctx, k.keptToken(id)).Result(); err != nil || n != 0 {
			t.Errorf("a token of %s is kept (%d, %v): the new run's goes on from its own, the other was never claimed", id, n, err)
		}
	}

	mustCreate(t, s, storage.NewRun{ID: "p/run", Workflow: "wf-run", ParentID: "p"})
	if got := mustClaimOne(t, s, "wf-run"); got.Lease.Token != 2 {
		t.Errorf("the new p/run's first claim has token %d, want 2", got.Lease.Token)
	}
	res, err = s.CreateRuns(ctx, []storage.NewRun{{ID: "p/done", Workflow: "wf-done", ParentID: "p",
		Lease: &storage.EagerLease{Owner: "w", For: time.Minute}}})
	if err != nil || !res[0].Created || res[0].Run.Token != 2 {
		t.Errorf("the new p/done created leased = %+v, %v; want token 2", res, err)
	}
	mustCreate(t, s, storage.NewRun{ID: "p/new", Workflow: "wf-new", ParentID: "p"})
	if got := mustClaimOne(t, s, "wf-new"); got.Lease.Token != 1 {
		t.Errorf("the new p/new's first claim has token %d, want 1", got.Lease.Token)
	}
	for _, id := range []string{"p/run", "p/done"} {
		if n, err := c.Exists(ctx, k.keptToken(id)).Result(); err != nil || n != 0 {
			t.Errorf("%s's kept token outlived the run created under its ID (%d, %v)", id, n, err)
		}
	}
}

// TestRepeatedPolicyCreate: createpolicy.lua sent again by the client
// (same operation ID) returns its first results instead of joining,
// returning or delivering a second time.
func TestRepeatedPolicyCreate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, c := newTestStore(t, newClock())
	r := storage.NewRun{ID: "r", Workflow: "wf", Key: &storage.StartKey{Key: "k"},
		Event: &storage.Event{Topic: "t", Payload: []byte("once")}}
	args := appendNewRun([]any{"op-create"}, r)
	args, err := appendPolicies(args, r)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		v, err := s.run(ctx, createPolicyScript, []string{s.keys.run("r")}, args...)
		if err != nil {
			t.Fatal(err)
		}
		res := v.([]any)[0].([]any)
		if res[0] != int64(1) || res[3] != int64(0) {
			t.Fatalf("call %d: created %v, joined %v; want the first call's created, not joined", i, res[0], res[3])
		}
	}
	if n := c.LLen(ctx, s.keys.events("r", "t")).Val(); n != 1 {
		t.Fatalf("%d events buffered, want 1", n)
	}
}

// TestStartKeyRecords: the record of a start key goes with its run when
// Purge deletes it, and a record whose run does not hold the key (here a
// plain run under the ID it names) holds nothing: a keyed create makes a
// run, which the record then names.
func TestStartKeyRecords(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := newClock()
	s, c := newTestStore(t, clock)
	sk := s.keys.startKey("wf", "k")
	mustCreate(t, s, storage.NewRun{ID: "a", Workflow: "wf", Key: &storage.StartKey{Key: "k"}})
	a := mustClaimOne(t, s, "wf")
	if err := s.Complete(ctx, storage.CompleteRequest{Lease: a.Lease, Status: storage.StatusComplete}); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Second)
	if got, err := s.Purge(ctx, storage.PurgeRequest{FinishedBefore: clock.Now(), Limit: 10}); err != nil || got.Runs != 1 {
		t.Fatalf("Purge = %+v, %v", got, err)
	}
	if n := c.Exists(ctx, sk).Val(); n != 0 {
		t.Fatal("the start key's record outlived its purged run")
	}

	mustCreate(t, s, storage.NewRun{ID: "b", Workflow: "wf"})
	c.Set(ctx, sk, "b", 0)
	res, err := s.CreateRuns(ctx, []storage.NewRun{{ID: "c", Workflow: "wf", Key: &storage.StartKey{Key: "k"}}})
	if err != nil || !res[0].Created || res[0].Joined {
		t.Fatalf("keyed create over a record naming a run without the key = %+v, %v; want created", res, err)
	}
	if got := c.Get(ctx, sk).Val(); got != "c" {
		t.Fatalf("the record names %q, want c", got)
	}
}

// TestDebounceRounding: a debounce window shorter than the store's
// microsecond is one microsecond, not none: the run waits for it and a
// create within it joins.
func TestDebounceRounding(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := newClock()
	s, _ := newTestStore(t, clock)
	key := &storage.StartKey{Key: "k", Debounce: time.Nanosecond}
	res, err := s.CreateRuns(ctx, []storage.NewRun{{ID: "a", Workflow: "wf", Key: key}, {ID: "b", Workflow: "wf", Key: key}})
	if err != nil {
		t.Fatal(err)
	}
	if want := clock.Now().Add(time.Microsecond); !res[0].Created || res[0].Run.ReadyAt == nil || !res[0].Run.ReadyAt.Equal(want) {
		t.Fatalf("first create = %+v, want created ready at %v", res[0], want)
	}
	if !res[1].Joined || res[1].Run.ID != "a" {
		t.Fatalf("second create = %+v, want joined to a", res[1])
	}
}

// TestPlainCreatePath: a create with no policy, event or key takes
// create.lua (or createleased.lua), as before start policies: only the
// others need createpolicy.lua.
func TestPlainCreatePath(t *testing.T) {
	t.Parallel()
	later := time.Now()
	for _, r := range []storage.NewRun{
		{ID: "a", Workflow: "wf"},
		{ID: "a", Workflow: "wf", Lease: &storage.EagerLease{Owner: "w", For: time.Minute}},
		{ID: "a", Workflow: "wf", StartAt: &later, Replace: &storage.ReplaceTerms{}},
	} {
		if hasPolicy(r) {
			t.Errorf("hasPolicy(%+v) = true, want false", r)
		}
	}
	for _, r := range []storage.NewRun{
		{ID: "a", Workflow: "wf", OnExisting: storage.ExistingFail},
		{ID: "a", Workflow: "wf", OnEnded: storage.EndedReject},
		{ID: "a", Workflow: "wf", Event: &storage.Event{Topic: "t"}},
		{ID: "a", Workflow: "wf", Key: &storage.StartKey{Key: "k"}},
	} {
		if !hasPolicy(r) {
			t.Errorf("hasPolicy(%+v) = false, want true", r)
		}
	}
}
