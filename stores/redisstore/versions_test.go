package redisstore

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stemflow/stem/storage"
)

// TestVersionLanes: a run of version 0 is stored as before versions were
// kept (no version field, the lanes of layout 2), so a store written
// before reads the same; a run of another version has lanes of its own,
// in any queue and at any priority, and its version goes in the versions
// set of its queue and workflow. A versioned run of a named queue keeps
// the queue's counts right when a checkpoint pauses it; the run without
// a version field is claimed as version 0's.
func TestVersionLanes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, c := newTestStore(t, newClock())
	k := s.keys
	_, err := s.CreateRuns(ctx, []storage.NewRun{
		{ID: "old", Workflow: "wf"},
		{ID: "v3", Workflow: "wf", Version: 3},
		{ID: "mail", Workflow: "wf", Queue: "mail", Priority: 2, Version: 3},
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := c.HExists(ctx, k.run("old"), "vr").Val(); n {
		t.Errorf("a run of version 0 has a version field")
	}
	for key, want := range map[string]int64{
		k.ready("wf"):                      1,
		k.laneReady("wf", "", 0, 3):        1,
		k.laneReady("wf", "mail", 2, 3):    1,
		k.laneReady("wf", "mail", 2, 0):    0,
		k.laneReady("wf", "default", 0, 3): 1,
	} {
		if n := c.ZCard(ctx, key).Val(); n != want {
			t.Errorf("ZCARD %s = %d, want %d", key, n, want)
		}
	}
	for _, q := range []string{storage.DefaultQueue, "mail"} {
		if got := c.SMembers(ctx, k.versions(q, "wf")).Val(); !slices.Equal(got, []string{"3"}) {
			t.Errorf("versions of %s = %q, want [3]", q, got)
		}
	}
	if got := c.ZRange(ctx, k.levels("mail", "wf"), 0, -1).Val(); !slices.Equal(got, []string{"2"}) {
		t.Errorf("levels of mail = %q, want [2]", got)
	}

	got, err := s.Claim(ctx, storage.ClaimRequest{Owner: "w", Workflows: []string{"wf"}, Limit: 10, LeaseFor: time.Minute,
		Queues: []storage.Queue{{Name: "mail", Concurrency: 5}}, Versions: map[string][]int{"wf": {3}}})
	if err != nil || len(got) != 1 || got[0].Lease.RunID != "mail" || got[0].Version != 3 {
		t.Fatalf("Claim of mail's version 3 = %+v, %v; want mail at version 3", got, err)
	}
	if err := s.Pause(ctx, "mail"); err != nil {
		t.Fatal(err)
	}
	res, err := s.Checkpoint(ctx, storage.CheckpointRequest{Lease: got[0].Lease, LeaseFor: time.Minute,
		Checkpoint: storage.Checkpoint{Key: "s@v1", Kind: storage.KindStep, Output: []byte("1")}})
	if err != nil || !res.Paused {
		t.Fatalf("Checkpoint with a pause requested = %+v, %v; want paused", res, err)
	}
	stats, err := s.QueueStats(ctx, []string{"mail"})
	if want := (storage.QueueStats{Queue: "mail", Paused: 1}); err != nil || stats[0] != want {
		t.Fatalf("QueueStats of mail = %+v, %v; want %+v", stats, err, want)
	}

	// The run without a version field is claimed as version 0's.
	for _, want := range []struct {
		id      string
		version int
	}{{"old", 0}, {"v3", 3}} {
		got, err := s.Claim(ctx, storage.ClaimRequest{Owner: "w", Workflows: []string{"wf"}, Limit: 10, LeaseFor: time.Minute,
			Versions: map[string][]int{"wf": {want.version}}})
		if err != nil || len(got) != 1 || got[0].Lease.RunID != want.id || got[0].Version != want.version {
			t.Fatalf("Claim of version %d = %+v, %v; want %s", want.version, got, err, want.id)
		}
	}
}

// TestVersionLevelKept: a claim that does not take a version leaves the
// priority level of that version's runs alone, queued or running, so
// that a claim of the version still finds them; once no run of any
// version is left at the level, a claim forgets it. Two workflows share
// the level, so the claim asks first whether any lane of each exists.
func TestVersionLevelKept(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := newClock()
	s, c := newTestStore(t, clock)
	wfs := []string{"wf", "other"}
	if _, err := s.CreateRuns(ctx, []storage.NewRun{
		{ID: "r", Workflow: "wf", Queue: "jobs", Priority: 5, Version: 1},
		{ID: "o", Workflow: "other", Queue: "jobs", Priority: 5, Version: 1},
	}); err != nil {
		t.Fatal(err)
	}
	only := func(versions []int) map[string][]int {
		if versions == nil {
			return nil
		}
		return map[string][]int{"wf": versions, "other": versions}
	}
	claim := func(versions ...int) []storage.ClaimedRun {
		t.Helper()
		got, err := s.Claim(ctx, storage.ClaimRequest{Owner: "w", Workflows: wfs, Limit: 5, LeaseFor: time.Minute,
			Queues: []storage.Queue{{Name: "jobs"}}, Versions: only(versions)})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	wake := func(versions ...int) storage.NextWake {
		t.Helper()
		nw, err := s.NextWake(ctx, storage.NextWakeRequest{Workflows: wfs, Queues: []string{"jobs"}, Versions: only(versions)})
		if err != nil {
			t.Fatal(err)
		}
		return nw
	}
	levels := func(what string, want ...string) {
		t.Helper()
		for _, wf := range wfs {
			if got := c.ZRange(ctx, s.keys.levels("jobs", wf), 0, -1).Val(); !slices.Equal(got, want) {
				t.Fatalf("levels of %s %s = %q, want %q", wf, what, got, want)
			}
		}
	}
	if got := claim(0, 2); len(got) != 0 {
		t.Fatalf("a claim of versions 0 and 2 leased %v", got)
	}
	if nw := wake(0, 2); nw.Found {
		t.Fatalf("NextWake of versions 0 and 2 = %+v, want none", nw)
	}
	levels("after a claim of other versions", "5")
	if nw := wake(1); !nw.Found || nw.After != 0 {
		t.Fatalf("NextWake of version 1 = %+v, want now", nw)
	}
	got := claim(1)
	if len(got) != 2 {
		t.Fatalf("a claim of version 1 = %v, want r and o", got)
	}
	if got := claim(2); len(got) != 0 {
		t.Fatalf("a claim of version 2 leased %v", got)
	}
	levels("after a claim of version 2", "5")
	// The runs end; a claim at any version, which reads versions 0 and 1
	// and finds neither's lanes, forgets the level.
	for _, g := range got {
		if err := s.Complete(ctx, storage.CompleteRequest{Lease: g.Lease, Status: storage.StatusComplete}); err != nil {
			t.Fatal(err)
		}
	}
	if none := claim(); len(none) != 0 {
		t.Fatalf("a claim at any version = %v, want nothing", none)
	}
	levels("after its runs left")
}
