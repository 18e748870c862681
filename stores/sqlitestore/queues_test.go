package sqlitestore_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stemflow/stem/storage"
	"github.com/stemflow/stem/stores/sqlitestore"
	"github.com/stemflow/stem/stores/storetest"
)

// queueFixture is a store on a manual clock.
type queueFixture struct {
	t     *testing.T
	s     *sqlitestore.Store
	clock *storetest.Clock
	path  string
}

func newQueueFixture(t *testing.T) *queueFixture {
	t.Helper()
	t.Parallel()
	clock := storetest.NewClock(storetest.Start)
	path := filepath.Join(t.TempDir(), "stem.db")
	s, err := sqlitestore.Open(path, sqlitestore.Options{Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return &queueFixture{t: t, s: s, clock: clock, path: path}
}

func (f *queueFixture) create(runs ...storage.NewRun) {
	f.t.Helper()
	for i := range runs {
		if runs[i].Workflow == "" {
			runs[i].Workflow = "wf"
		}
	}
	if _, err := f.s.CreateRuns(f.t.Context(), runs); err != nil {
		f.t.Fatal(err)
	}
}

func (f *queueFixture) claim(limit int, queues ...storage.Queue) []string {
	f.t.Helper()
	got, err := f.s.Claim(f.t.Context(), storage.ClaimRequest{Owner: "w", Workflows: []string{"wf"}, Limit: limit, LeaseFor: time.Minute, Queues: queues})
	if err != nil {
		f.t.Fatal(err)
	}
	ids := make([]string, len(got))
	for i, c := range got {
		ids[i] = c.Lease.RunID
	}
	return ids
}

// Within a claim: higher priority first, recoveries before ready runs of
// the same priority, then oldest first, across the queues named.
func TestClaimOrder(t *testing.T) {
	f := newQueueFixture(t)
	f.create(storage.NewRun{ID: "stalled", Priority: 1})
	if got := f.claim(1); !slices.Equal(got, []string{"stalled"}) {
		t.Fatalf("first claim = %v", got)
	}
	f.clock.Advance(2 * time.Minute) // the stalled lease expires
	f.create(storage.NewRun{ID: "low", Priority: -5, Queue: "b"})
	f.clock.Advance(time.Second)
	f.create(storage.NewRun{ID: "old1", Priority: 1, Queue: "b"})
	f.clock.Advance(time.Second)
	f.create(storage.NewRun{ID: "new1", Priority: 1})
	f.clock.Advance(time.Second)
	f.create(storage.NewRun{ID: "high", Priority: 7, Queue: "b"})
	f.create(storage.NewRun{ID: "other", Priority: 100, Queue: "c"})
	got := f.claim(10, storage.Queue{Name: storage.DefaultQueue}, storage.Queue{Name: "b"})
	if want := []string{"high", "stalled", "old1", "new1", "low"}; !slices.Equal(got, want) {
		t.Fatalf("claim = %v, want %v", got, want)
	}
	rec, err := f.s.GetRun(t.Context(), "high")
	if err != nil || rec.Queue != "b" || rec.Priority != 7 || rec.Partition != "" {
		t.Fatalf("GetRun(high) = %+v, %v", rec, err)
	}
	page, err := f.s.ListRuns(t.Context(), storage.ListRunsQuery{Queue: "b"})
	if err != nil || len(page.Runs) != 3 {
		t.Fatalf("ListRuns(queue b) = %+v, %v", page, err)
	}
}

// A queue's concurrency holds across stores sharing the file, claiming at
// once; recoveries are never held back; the places free as runs park.
func TestClaimConcurrencyAcrossStores(t *testing.T) {
	f := newQueueFixture(t)
	other, err := sqlitestore.Open(f.path, sqlitestore.Options{Clock: f.clock})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	var runs []storage.NewRun
	for i := range 50 {
		runs = append(runs, storage.NewRun{ID: fmt.Sprintf("r%02d", i), Queue: "q"})
	}
	f.create(runs...)
	q := storage.Queue{Name: "q", Concurrency: 3}
	var mu sync.Mutex
	var all []storage.ClaimedRun
	var wg sync.WaitGroup
	for i := range 8 {
		s := f.s
		if i%2 == 1 {
			s = other
		}
		wg.Go(func() {
			got, err := s.Claim(t.Context(), storage.ClaimRequest{Owner: "w", Workflows: []string{"wf"}, Limit: 2, LeaseFor: time.Minute, Queues: []storage.Queue{q}})
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			all = append(all, got...)
			mu.Unlock()
		})
	}
	wg.Wait()
	if len(all) != 3 {
		t.Fatalf("concurrent claims took %d runs, want 3", len(all))
	}
	// Expired leases still hold their places, and are claimed back.
	f.clock.Advance(2 * time.Minute)
	if got := f.claim(10, q); len(got) != 3 {
		t.Fatalf("claim after the leases expired = %v, want the 3 recoveries", got)
	}
	got, err := f.s.Claim(t.Context(), storage.ClaimRequest{Owner: "w", Workflows: []string{"wf"}, Limit: 10, LeaseFor: time.Minute, Queues: []storage.Queue{q}})
	if err != nil || len(got) != 0 {
		t.Fatalf("claim of a full queue = %v, %v", got, err)
	}
	stats, err := f.s.QueueStats(t.Context(), []string{"q", "none"})
	if err != nil || !slices.Equal(stats, []storage.QueueStats{{Queue: "q", Ready: 47, Running: 3, OldestReady: 2 * time.Minute}, {Queue: "none"}}) {
		t.Fatalf("QueueStats = %+v, %v", stats, err)
	}
	// A parked run frees its place.
	var l storage.Lease
	for _, c := range all {
		l = c.Lease
	}
	l.Token++ // claimed back once
	later := f.clock.Now().Add(time.Hour)
	if _, err := f.s.Suspend(t.Context(), storage.SuspendRequest{Lease: l, ReadyAt: &later}); err != nil {
		t.Fatal(err)
	}
	if got := f.claim(10, q); len(got) != 1 {
		t.Fatalf("claim after one parked = %v, want one run", got)
	}
	stats, err = f.s.QueueStats(t.Context(), []string{"q"})
	if err != nil || !slices.Equal(stats, []storage.QueueStats{{Queue: "q", Ready: 46, Running: 3, Waiting: 1, OldestReady: 2 * time.Minute}}) {
		t.Fatalf("QueueStats = %+v, %v", stats, err)
	}
}

// A full partition is passed over; other partitions go on.
func TestClaimPartitions(t *testing.T) {
	f := newQueueFixture(t)
	for i := range 5 {
		f.create(storage.NewRun{ID: fmt.Sprintf("a%d", i), Queue: "q", Partition: "a"})
		f.clock.Advance(time.Millisecond)
	}
	f.create(storage.NewRun{ID: "b0", Queue: "q", Partition: "b"})
	f.create(storage.NewRun{ID: "b1", Queue: "q", Partition: "b"})
	q := storage.Queue{Name: "q", PartitionConcurrency: 1}
	if got := f.claim(1, q); !slices.Equal(got, []string{"a0"}) {
		t.Fatalf("claim = %v", got)
	}
	if got := f.claim(10, q); !slices.Equal(got, []string{"b0"}) {
		t.Fatalf("claim = %v, want b0 alone", got)
	}
	if got := f.claim(10, q); len(got) != 0 {
		t.Fatalf("claim = %v, want none", got)
	}
}

// At most Rate starts within any RatePeriod; runs resuming are not starts.
func TestClaimRate(t *testing.T) {
	f := newQueueFixture(t)
	for i := range 5 {
		f.create(storage.NewRun{ID: fmt.Sprintf("r%d", i), Queue: "q"})
	}
	q := storage.Queue{Name: "q", Rate: 2, RatePeriod: time.Minute}
	got, err := f.s.Claim(t.Context(), storage.ClaimRequest{Owner: "w", Workflows: []string{"wf"}, Limit: 10, LeaseFor: time.Hour, Queues: []storage.Queue{q}})
	if err != nil || len(got) != 2 {
		t.Fatalf("claim = %v, %v; want 2", got, err)
	}
	now := f.clock.Now()
	if _, err := f.s.Suspend(t.Context(), storage.SuspendRequest{Lease: got[0].Lease, ReadyAt: &now}); err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(30 * time.Second)
	if ids := f.claim(10, q); !slices.Equal(ids, []string{got[0].Lease.RunID}) {
		t.Fatalf("claim in the full window = %v, want the resumed run alone", ids)
	}
	f.clock.Advance(30 * time.Second)
	if ids := f.claim(10, q); len(ids) != 2 {
		t.Fatalf("claim in the next window = %v, want 2", ids)
	}
}

// NextWake looks at the named queues only, at every priority.
func TestNextWakeQueues(t *testing.T) {
	f := newQueueFixture(t)
	in := func(d time.Duration) *time.Time { at := f.clock.Now().Add(d); return &at }
	f.create(storage.NewRun{ID: "a", Queue: "q", StartAt: in(time.Hour), Priority: 3},
		storage.NewRun{ID: "b", Queue: "q", StartAt: in(time.Minute), Priority: -3},
		storage.NewRun{ID: "c", Queue: "other", StartAt: in(time.Second)})
	w, err := f.s.NextWake(t.Context(), storage.NextWakeRequest{Workflows: []string{"wf"}, Queues: []string{"q"}})
	if err != nil || !w.Found || w.After != time.Minute {
		t.Fatalf("NextWake(q) = %+v, %v; want a minute", w, err)
	}
	w, err = f.s.NextWake(t.Context(), storage.NextWakeRequest{Workflows: []string{"wf"}})
	if err != nil || w.Found {
		t.Fatalf("NextWake(default) = %+v, %v; want none", w, err)
	}
}

// WriteSchedule compares revisions and creates its runs with the write.
func TestScheduleRevisions(t *testing.T) {
	f := newQueueFixture(t)
	ctx := t.Context()
	at := f.clock.Now().Add(time.Minute)
	sc := storage.Schedule{ID: "nightly", Workflow: "wf", Cron: "* * * * *", NextFireAt: at, CheckAt: at, Input: []byte{}}
	res, err := f.s.WriteSchedule(ctx, storage.ScheduleWrite{Schedule: sc})
	if err != nil || res.Schedule.Revision != 1 || !res.Schedule.CreatedAt.Equal(f.clock.Now()) {
		t.Fatalf("create = %+v, %v", res, err)
	}
	if _, err := f.s.WriteSchedule(ctx, storage.ScheduleWrite{Schedule: sc}); !errors.Is(err, storage.ErrConflict) {
		t.Fatalf("second create: %v, want ErrConflict", err)
	}
	if _, err := f.s.WriteSchedule(ctx, storage.ScheduleWrite{Schedule: storage.Schedule{ID: "nope", Workflow: "wf", Cron: "x", NextFireAt: at, CheckAt: at}, Revision: 1}); !errors.Is(err, storage.ErrScheduleNotFound) {
		t.Fatalf("write of an unknown schedule: %v, want ErrScheduleNotFound", err)
	}
	tick := storage.ScheduleWrite{Schedule: sc, Revision: 1, Runs: []storage.NewRun{{ID: "nightly-1", Workflow: "wf", Queue: "q"}}}
	tick.Schedule.LastRunID = "nightly-1"
	tick.Schedule.LastFireAt = &at
	res, err = f.s.WriteSchedule(ctx, tick)
	if err != nil || res.Schedule.Revision != 2 || len(res.Runs) != 1 || !res.Runs[0].Created || res.Runs[0].Run.Queue != "q" ||
		res.Schedule.LastRunID != "nightly-1" || !res.Schedule.LastFireAt.Equal(at) || res.Schedule.Input == nil {
		t.Fatalf("tick = %+v, %v", res, err)
	}
	tick.Runs[0].ID = "nightly-2"
	if _, err := f.s.WriteSchedule(ctx, tick); !errors.Is(err, storage.ErrConflict) {
		t.Fatalf("stale tick: %v, want ErrConflict", err)
	}
	if _, err := f.s.GetRun(ctx, "nightly-2"); !errors.Is(err, storage.ErrRunNotFound) {
		t.Fatalf("a conflicting write created its run: %v", err)
	}
	due := f.clock.Now().Add(time.Hour)
	page, err := f.s.ListSchedules(ctx, storage.ScheduleQuery{DueBy: &due})
	if err != nil || len(page.Schedules) != 1 || page.Schedules[0].Revision != 2 {
		t.Fatalf("ListSchedules(due) = %+v, %v", page, err)
	}
	if err := f.s.DeleteSchedule(ctx, "nightly"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.GetSchedule(ctx, "nightly"); !errors.Is(err, storage.ErrScheduleNotFound) {
		t.Fatalf("GetSchedule after delete: %v", err)
	}
	if err := f.s.DeleteSchedule(ctx, "nightly"); !errors.Is(err, storage.ErrScheduleNotFound) {
		t.Fatalf("second delete: %v", err)
	}
}

// Purge deletes finished runs, oldest first, with what they own; a dry run
// counts.
func TestPurge(t *testing.T) {
	f := newQueueFixture(t)
	ctx := t.Context()
	for i := range 4 {
		id := fmt.Sprintf("r%d", i)
		f.create(storage.NewRun{ID: id})
		got := f.claim(1)
		if _, err := f.s.Checkpoint(ctx, storage.CheckpointRequest{Lease: storage.Lease{RunID: got[0], Owner: "w", Token: 1}, LeaseFor: time.Minute,
			Checkpoint: storage.Checkpoint{Key: "s@v1", Kind: storage.KindStep, Output: []byte(`1`)}}); err != nil {
			t.Fatal(err)
		}
		if _, err := f.s.SendEvent(ctx, storage.Event{RunID: id, Topic: "t", Payload: []byte(`1`)}); err != nil {
			t.Fatal(err)
		}
		if err := f.s.Complete(ctx, storage.CompleteRequest{Lease: storage.Lease{RunID: got[0], Owner: "w", Token: 1}, Status: storage.StatusComplete}); err != nil {
			t.Fatal(err)
		}
		f.clock.Advance(time.Minute)
	}
	f.create(storage.NewRun{ID: "open"})
	req := storage.PurgeRequest{FinishedBefore: f.clock.Now(), Limit: 3, DryRun: true}
	if res, err := f.s.Purge(ctx, req); err != nil || res != (storage.PurgeResult{Runs: 3, Events: 3}) {
		t.Fatalf("dry run = %+v, %v", res, err)
	}
	req.DryRun = false
	if res, err := f.s.Purge(ctx, req); err != nil || res != (storage.PurgeResult{Runs: 3, Events: 3}) {
		t.Fatalf("purge = %+v, %v", res, err)
	}
	page, err := f.s.ListRuns(ctx, storage.ListRunsQuery{})
	if err != nil || len(page.Runs) != 2 || page.Runs[0].ID != "open" || page.Runs[1].ID != "r3" {
		t.Fatalf("runs left = %+v, %v", page.Runs, err)
	}
	if res, err := f.s.Purge(ctx, req); err != nil || res != (storage.PurgeResult{Runs: 1, Events: 1}) {
		t.Fatalf("second purge = %+v, %v", res, err)
	}
}

// The catalog keeps a workflow's queue and retention and the queues.
func TestCatalogQueues(t *testing.T) {
	f := newQueueFixture(t)
	ctx := t.Context()
	week := 7 * 24 * time.Hour
	c := storage.Catalog{
		Workflows: []storage.WorkflowType{{Name: "a", Version: 1, Queue: "q", Retention: &week, Worker: "w"}, {Name: "b", Version: 1, Worker: "w"}},
		Queues:    []storage.QueueType{{Queue: storage.Queue{Name: "q", Concurrency: 2, PartitionConcurrency: 1, Rate: 5, RatePeriod: time.Second}, Worker: "w", UpdatedAt: f.clock.Now()}},
	}
	if err := f.s.PutCatalog(ctx, c); err != nil {
		t.Fatal(err)
	}
	got, err := f.s.GetCatalog(ctx)
	if err != nil || len(got.Workflows) != 2 || got.Workflows[0].Queue != "q" || *got.Workflows[0].Retention != week ||
		got.Workflows[1].Retention != nil || len(got.Queues) != 1 || got.Queues[0].Queue != c.Queues[0].Queue || !got.Queues[0].UpdatedAt.Equal(f.clock.Now()) {
		t.Fatalf("GetCatalog = %+v, %v", got, err)
	}
}
