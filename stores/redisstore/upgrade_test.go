package redisstore

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stemflow/stem/storage"
)

// TestUpgradeLayout1: a store of key layout 1 (here made by removing from a
// store what layout 2 adds, and setting the version key to 1) is refused
// by OpenExisting and upgraded in place by a worker's New: its finished
// runs can be purged with their buffered events, a delayed start counts as
// scheduled, a run claimed before is not started again by a rate, and the
// prefix is marked with the current version.
func TestUpgradeLayout1(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := newClock()
	s, c := newTestStore(t, clock)
	p := s.keys.prefix
	const wf = "wf"
	later := clock.Now().Add(time.Hour)
	if _, err := s.CreateRuns(ctx, []storage.NewRun{{ID: "done", Workflow: wf}, {ID: "late", Workflow: wf, StartAt: &later}}); err != nil {
		t.Fatal(err)
	}
	claimed, err := s.Claim(ctx, storage.ClaimRequest{Owner: "w", Workflows: []string{wf}, Limit: 1, LeaseFor: time.Minute})
	if err != nil || len(claimed) != 1 {
		t.Fatalf("Claim = %v, %v", claimed, err)
	}
	if _, err := s.SendEvent(ctx, storage.Event{RunID: "done", Topic: "t", Payload: []byte("p")}); err != nil {
		t.Fatal(err)
	}
	if err := s.Complete(ctx, storage.CompleteRequest{Lease: claimed[0].Lease, Status: storage.StatusComplete}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateRuns(ctx, []storage.NewRun{{ID: "busy", Workflow: wf}}); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Claim(ctx, storage.ClaimRequest{Owner: "w", Workflows: []string{wf}, Limit: 1, LeaseFor: time.Minute}); err != nil || len(got) != 1 {
		t.Fatalf("Claim = %v, %v", got, err)
	}
	// Back to layout 1.
	k := s.keys
	if err := c.Del(ctx, k.finished(storage.StatusComplete), k.finishedWorkflow(storage.StatusComplete, wf), k.queued(storage.DefaultQueue), k.eventTopics("done")).Err(); err != nil {
		t.Fatal(err)
	}
	c.HDel(ctx, k.run("late"), "qf")
	c.HDel(ctx, k.run("busy"), "sd")
	c.Set(ctx, k.version(), "1", 0)

	_, err = New(ctx, c, Options{Prefix: p, Clock: clock, OpenExisting: true, Logger: quietLogger()})
	if !errors.Is(err, storage.ErrNotStore) {
		t.Fatalf("OpenExisting of layout 1: %v, want ErrNotStore", err)
	}
	s2, err := New(ctx, c, Options{Prefix: p, Clock: clock, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if v := c.Get(ctx, k.version()).Val(); v != strconv.Itoa(storeVersion) {
		t.Fatalf("version after the upgrade = %q, want %d", v, storeVersion)
	}
	stats, err := s2.QueueStats(ctx, []string{storage.DefaultQueue})
	if want := (storage.QueueStats{Queue: storage.DefaultQueue, Scheduled: 1, Running: 1}); err != nil || stats[0] != want {
		t.Fatalf("QueueStats after the upgrade = %+v, %v; want %+v", stats, err, want)
	}
	if sd := c.HGet(ctx, k.run("busy"), "sd").Val(); sd != "1" {
		t.Fatalf("a running run's started flag after the upgrade = %q, want 1", sd)
	}
	clock.Advance(time.Second)
	res, err := s2.Purge(ctx, storage.PurgeRequest{FinishedBefore: clock.Now(), Limit: 10})
	if want := (storage.PurgeResult{Runs: 1, Events: 1}); err != nil || res != want {
		t.Fatalf("Purge after the upgrade = %+v, %v; want %+v", res, err, want)
	}
	if n := c.Exists(ctx, k.events("done", "t"), k.run("done")).Val(); n != 0 {
		t.Fatalf("%d keys of the purged run left", n)
	}
	// A second worker's New finds the store upgraded.
	s3, err := New(ctx, c, Options{Prefix: p, Clock: clock, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	s3.Close()
}

// TestUpgradeLayout2: a store of key layout 2 (here made by taking out of
// their queues' sets of queued runs the runs queued when due, as layout 2
// left them, and setting the version key to 2) is refused by
// OpenExisting and upgraded in place by a worker's New: every queued run
// is then in its queue's set, so QueueStats finds the oldest ready run,
// and a claim takes it out again.
func TestUpgradeLayout2(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := newClock()
	s, c := newTestStore(t, clock)
	p, k := s.keys.prefix, s.keys
	later := clock.Now().Add(time.Hour)
	mustCreate(t, s, storage.NewRun{ID: "old", Workflow: "wf"}, storage.NewRun{ID: "mail-old", Workflow: "wf", Queue: "mail", Priority: 2})
	clock.Advance(time.Minute)
	mustCreate(t, s, storage.NewRun{ID: "new", Workflow: "wf"}, storage.NewRun{ID: "late", Workflow: "wf", StartAt: &later})
	clock.Advance(time.Minute)
	// Back to layout 2: only the delayed start is in a set.
	for _, r := range []struct{ id, queue string }{{"old", storage.DefaultQueue}, {"new", storage.DefaultQueue}, {"mail-old", "mail"}} {
		c.ZRem(ctx, k.queued(r.queue), r.id)
		c.HDel(ctx, k.run(r.id), "qf")
	}
	c.Set(ctx, k.version(), "2", 0)

	_, err := New(ctx, c, Options{Prefix: p, Clock: clock, OpenExisting: true, Logger: quietLogger()})
	if !errors.Is(err, storage.ErrNotStore) || !strings.Contains(err.Error(), "key layout 2") {
		t.Fatalf("OpenExisting of layout 2: %v, want ErrNotStore naming layout 2", err)
	}
	s2, err := New(ctx, c, Options{Prefix: p, Clock: clock, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if v := c.Get(ctx, k.version()).Val(); v != strconv.Itoa(storeVersion) {
		t.Fatalf("version after the upgrade = %q, want %d", v, storeVersion)
	}
	stats, err := s2.QueueStats(ctx, []string{storage.DefaultQueue, "mail"})
	want := []storage.QueueStats{
		{Queue: storage.DefaultQueue, Ready: 2, Scheduled: 1, OldestReady: 2 * time.Minute},
		{Queue: "mail", Ready: 1, OldestReady: 2 * time.Minute},
	}
	if err != nil || !reflect.DeepEqual(stats, want) {
		t.Fatalf("QueueStats after the upgrade = %+v, %v; want %+v", stats, err, want)
	}
	if got, err := s2.Claim(ctx, storage.ClaimRequest{Owner: "w", Workflows: []string{"wf"}, Limit: 10, LeaseFor: time.Minute,
		Queues: []storage.Queue{{Name: "mail"}}}); err != nil || len(got) != 1 {
		t.Fatalf("Claim of mail = %v, %v", got, err)
	}
	if n := c.ZCard(ctx, k.queued("mail")).Val(); n != 0 {
		t.Fatalf("mail's set of queued runs holds %d after its run was claimed, want 0", n)
	}
	// A second worker's New finds the store upgraded.
	s3, err := New(ctx, c, Options{Prefix: p, Clock: clock, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	s3.Close()
}

// TestDefaultLaneKeys: runs of the default queue at priority 0 use the
// ready and lease sets of layout 1, and nothing per queue; another queue's
// and another priority's runs have lanes and indexes of their own.
func TestDefaultLaneKeys(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, c := newTestStore(t, newClock())
	k := s.keys
	_, err := s.CreateRuns(ctx, []storage.NewRun{
		{ID: "a", Workflow: "wf"},
		{ID: "b", Workflow: "wf", Queue: "mail", Partition: "cust:1", Priority: 3},
		{ID: "c", Workflow: "wf", Priority: -2},
	})
	if err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]int64{
		k.ready("wf"):                           1,
		k.laneReady("wf", "mail", 3, 0):         1,
		k.laneReady("wf", "", -2, 0):            1,
		k.indexQueueStatus("queued", "mail"):    1,
		k.indexQueue("mail"):                    1,
		k.indexQueue(storage.DefaultQueue):      0,
		k.indexQueueStatus("queued", "default"): 0,
	} {
		if n := c.ZCard(ctx, key).Val(); n != want {
			t.Errorf("ZCARD %s = %d, want %d", key, n, want)
		}
	}
	if got := c.ZRange(ctx, k.levels("mail", "wf"), 0, -1).Val(); len(got) != 1 || got[0] != "3" {
		t.Errorf("levels of mail = %q, want [3]", got)
	}
	got, err := s.Claim(ctx, storage.ClaimRequest{Owner: "w", Workflows: []string{"wf"}, Limit: 10, LeaseFor: time.Minute,
		Queues: []storage.Queue{{Name: "mail", PartitionConcurrency: 1}}})
	if err != nil || len(got) != 1 || got[0].Lease.RunID != "b" {
		t.Fatalf("Claim of mail = %v, %v; want b", got, err)
	}
	if n := c.SCard(ctx, k.partition("mail", "cust:1")).Val(); n != 1 {
		t.Errorf("partition's running set holds %d, want 1", n)
	}
}

// TestUpgradeLayout3: a store of key layout 3 (here made by deleting the
// indexes by creation and setting the version key to 3) is refused by
// OpenExisting and upgraded in place by a worker's New, which puts every
// run in the indexes by creation: a listing in creation order, of all
// runs and of a workflow's, then finds them all.
func TestUpgradeLayout3(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := newClock()
	s, c := newTestStore(t, clock)
	p, k := s.keys.prefix, s.keys
	for _, id := range []string{"c", "a", "b"} {
		mustCreate(t, s, storage.NewRun{ID: id, Workflow: "wf-" + id})
		clock.Advance(time.Second)
	}
	mustCreate(t, s, storage.NewRun{ID: "d", Workflow: "wf-a"})
	c.Del(ctx, k.indexCreated(), k.indexWorkflowCreated("wf-a"), k.indexWorkflowCreated("wf-b"), k.indexWorkflowCreated("wf-c"))
	c.Set(ctx, k.version(), "3", 0)

	_, err := New(ctx, c, Options{Prefix: p, Clock: clock, OpenExisting: true, Logger: quietLogger()})
	if !errors.Is(err, storage.ErrNotStore) || !strings.Contains(err.Error(), "key layout 3") {
		t.Fatalf("OpenExisting of layout 3: %v, want ErrNotStore naming layout 3", err)
	}
	s2, err := New(ctx, c, Options{Prefix: p, Clock: clock, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if v := c.Get(ctx, k.version()).Val(); v != strconv.Itoa(storeVersion) {
		t.Fatalf("version after the upgrade = %q, want %d", v, storeVersion)
	}
	for _, tc := range []struct {
		q    storage.ListRunsQuery
		want []string
	}{
		{storage.ListRunsQuery{Order: storage.OrderCreated}, []string{"c", "a", "b", "d"}},
		{storage.ListRunsQuery{Order: storage.OrderCreated, Workflow: "wf-a", Descending: true}, []string{"d", "a"}},
	} {
		page, err := s2.ListRuns(ctx, tc.q)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range page.Runs {
			got = append(got, r.ID)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("ListRuns(%+v) after the upgrade = %q, want %q", tc.q, got, tc.want)
		}
	}
}
