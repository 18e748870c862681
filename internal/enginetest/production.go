package enginetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/schedule"
	"github.com/stemflow/stem/storage"
)

// Production controls, end to end: queue limits held by the store across
// engines, priorities and recoveries as a worker sees them, schedules fired
// by several engines, and retention swept by the engines.
var productionScenarios = []scenario{
	{"queue/a concurrency limit of 3 holds across four engines, one of which dies, measured by the steps", testQueueLimitEngines},
	{"queue/a partition runs one at a time while other partitions run beside it", testQueuePartitions},
	{"queue/a free worker takes higher priorities first, and a dead worker's run before the backlog", testQueuePriorityRecovery},
	{"queue/bad queues at start or registration are refused, with nothing stored", testQueueBadInput},
	{"queue/engines that disagree on a queue's limits: the second one's Run reports both", testQueueMismatch},
	{"queue/an engine whose queue is full backs off instead of claiming in a loop", testQueueFullBackoff},
	{"schedule/four engines fire every tick once", testScheduleFourEngines},
	{"schedule/overlap: skip while the last run goes on, buffer one starts once it ends", testScheduleOverlap},
	{"retention/engines delete finished runs past their retention and keep the rest", testRetention},
}

// gauge counts what is executing at once and remembers the most.
type gauge struct {
	mu       sync.Mutex
	now, max int
	byKey    map[string]int
	maxByKey map[string]int
}

func (g *gauge) enter(key string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.now++
	g.max = max(g.max, g.now)
	if g.byKey == nil {
		g.byKey, g.maxByKey = map[string]int{}, map[string]int{}
	}
	g.byKey[key]++
	g.maxByKey[key] = max(g.maxByKey[key], g.byKey[key])
}

func (g *gauge) leave(key string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.now--
	g.byKey[key]--
}

// limited registers queue q and "pay", on it, whose two steps each count
// themselves in g (by the run's partition, its input) for hold. dead, when
// not nil, says the engine's process has died: its steps then stop
// counting at once, as a dead process's steps stop running, rather than
// run on in this test process past the leases others take over.
func limited(f *fixture, q runtime.Queue, g *gauge, hold time.Duration, dead func() bool) func(e *runtime.Engine) {
	if dead == nil {
		dead = func() bool { return false }
	}
	return func(e *runtime.Engine) {
		f.must(e.RegisterQueue(q))
		f.must(runtime.Register(e, "pay", func(c *runtime.WorkflowContext, partition string) (int, error) {
			for i := range 2 {
				_, err := runtime.Step(c, fmt.Sprintf("call%d@v1", i), runtime.StepOptions{}, func(sc runtime.StepContext) (int, error) {
					if dead() {
						return 0, errDead
					}
					g.enter(partition)
					defer g.leave(partition)
					for end := time.Now().Add(hold); time.Now().Before(end) && !dead(); {
						time.Sleep(time.Millisecond)
					}
					return i, nil
				})
				if err != nil {
					return 0, err
				}
			}
			return 1, nil
		}, runtime.WorkflowQueue(q.Name)))
	}
}

func testQueueLimitEngines(f *fixture) {
	var g gauge
	q := runtime.Queue{Name: "payments", Concurrency: 3}
	var engines []*runtime.Engine
	// The last engine's process dies partway: its runs keep their places
	// until their leases expire and another engine takes them back.
	dying := &dyingStore{Store: f.store}
	for i := range 4 {
		// The live engines' leases outlast any stall of a busy machine: a
		// live worker whose lease lapsed mid-step would rightly lose its
		// run to another, whose step would then overlap its own.
		c := config{workers: 4}
		var dead func() bool
		if i == 3 {
			c.store, dead, c.lease = dying, dying.dead.Load, 300*time.Millisecond
		}
		engines = append(engines, f.engine(c, limited(f, q, &g, 15*time.Millisecond, dead)))
	}
	items := make([]runtime.BatchItem[string], 24)
	for i := range items {
		items[i] = runtime.BatchItem[string]{ID: fmt.Sprintf("pay-%02d", i), Input: ""}
	}
	runs, err := runtime.StartBatch[string, int](f.ctx, engines[0], "pay", items)
	f.must(err)
	for _, e := range engines {
		f.start(e)
	}
	for i, r := range runs {
		if i == 4 {
			dying.dead.Store(true)
		}
		if _, err := r.Result(f.ctx); err != nil {
			f.t.Fatalf("%s: %v", r.ID(), err)
		}
	}
	if g.max > 3 {
		f.t.Fatalf("%d runs of the queue executed steps at once, over its limit of 3", g.max)
	}
	if g.max < 2 {
		f.t.Fatalf("at most %d run executed at once: the limit of 3 was never used", g.max)
	}
	info := f.info(engines[1], "pay-00")
	if info.Queue != "payments" {
		f.t.Fatalf("run's queue = %q, want payments (the workflow's)", info.Queue)
	}
}

func testQueuePartitions(f *fixture) {
	var g gauge
	q := runtime.Queue{Name: "per-customer", PartitionConcurrency: 1}
	e := f.engine(config{workers: 8}, limited(f, q, &g, 10*time.Millisecond, nil))
	var runs []*runtime.Run[int]
	for i := range 12 {
		customer := fmt.Sprintf("c%d", i%3)
		r, err := runtime.Start[string, int](f.ctx, e, "pay", customer, runtime.WithPartition(customer))
		f.must(err)
		runs = append(runs, r)
	}
	f.start(e)
	for _, r := range runs {
		if _, err := r.Result(f.ctx); err != nil {
			f.t.Fatal(err)
		}
	}
	for k, m := range g.maxByKey {
		if m > 1 {
			f.t.Fatalf("partition %s ran %d at once, over its limit of 1", k, m)
		}
	}
	if g.max < 2 {
		f.t.Fatalf("at most %d run at once: partitions did not run beside each other", g.max)
	}
	info := f.info(e, runs[0].ID())
	if info.Partition != "c0" || info.Queue != "per-customer" {
		f.t.Fatalf("run placed on %q/%q, want per-customer/c0", info.Queue, info.Partition)
	}
}

func testQueuePriorityRecovery(f *fixture) {
	var mu sync.Mutex
	var order []string
	register := func(e *runtime.Engine) {
		f.must(runtime.Register(e, "ordered", func(c *runtime.WorkflowContext, in string) (string, error) {
			return runtime.Step(c, "note@v1", runtime.StepOptions{}, func(sc runtime.StepContext) (string, error) {
				mu.Lock()
				order = append(order, c.RunID())
				mu.Unlock()
				return in, nil
			})
		}))
	}
	e := f.engine(config{workers: 1, lease: time.Second}, register)
	// A run a dead worker held: claimed by hand, its lease left to expire.
	_, err := runtime.Start[string, string](f.ctx, e, "ordered", "", runtime.WithID("orphan"))
	f.must(err)
	claimed, err := f.store.Claim(f.ctx, storage.ClaimRequest{Owner: "dead-worker", Workflows: []string{"ordered"}, Limit: 1, LeaseFor: 300 * time.Millisecond})
	f.must(err)
	if len(claimed) != 1 {
		f.t.Fatalf("claimed %d runs, want the orphan", len(claimed))
	}
	// A backlog behind it, older than its lease expiry, and two urgent runs.
	for i := range 5 {
		_, err := runtime.Start[string, string](f.ctx, e, "ordered", "", runtime.WithID(fmt.Sprintf("backlog-%d", i)))
		f.must(err)
	}
	for _, id := range []string{"urgent-a", "urgent-b"} {
		_, err := runtime.Start[string, string](f.ctx, e, "ordered", "", runtime.WithID(id), runtime.WithPriority(10))
		f.must(err)
	}
	time.Sleep(400 * time.Millisecond) // the orphan's lease expires
	f.start(e)
	f.eventually("all eight runs complete", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(order) == 8
	})
	mu.Lock()
	defer mu.Unlock()
	want := []string{"urgent-a", "urgent-b", "orphan", "backlog-0", "backlog-1", "backlog-2", "backlog-3", "backlog-4"}
	if !slices.Equal(order, want) {
		f.t.Fatalf("one worker ran %v, want %v: priority first, then the recovery, then the backlog oldest first", order, want)
	}
}

func testQueueBadInput(f *fixture) {
	e := f.engine(config{}, func(e *runtime.Engine) {
		f.must(e.RegisterQueue(runtime.Queue{Name: "plain", Concurrency: 2}))
		f.must(runtime.Register(e, "greet", func(c *runtime.WorkflowContext, in string) (string, error) { return in, nil }))
	})
	_, err := runtime.Start[string, string](f.ctx, e, "greet", "x", runtime.OnQueue("plian"))
	if !errors.Is(err, runtime.ErrUnknownQueue) || !strings.Contains(err.Error(), `"plian"`) || !strings.Contains(err.Error(), `did you mean "plain"`) {
		f.t.Errorf("start on a misspelled queue: %v, want ErrUnknownQueue naming it and suggesting plain", err)
	}
	_, err = runtime.Start[string, string](f.ctx, e, "greet", "x", runtime.OnQueue("plain"), runtime.WithPartition("cust-1"))
	if !errors.Is(err, runtime.ErrInvalidArgument) || !strings.Contains(err.Error(), `queue "plain" has no partitions`) {
		f.t.Errorf("a partition on a queue without partitions: %v", err)
	}
	_, err = runtime.Start[string, string](f.ctx, e, "greet", "x", runtime.WithPriority(storage.MaxPriority+1))
	if !errors.Is(err, runtime.ErrInvalidArgument) || !strings.Contains(err.Error(), "priority") {
		f.t.Errorf("a priority out of range: %v", err)
	}
	for _, q := range []runtime.Queue{
		{Name: "neg", Concurrency: -1},
		{Name: "rate", Rate: 5},
		{Name: "bad name"},
		{Name: "plain", Concurrency: 3},
	} {
		if err := e.RegisterQueue(q); !errors.Is(err, runtime.ErrInvalidArgument) {
			f.t.Errorf("RegisterQueue(%+v) = %v, want ErrInvalidArgument", q, err)
		}
	}
	// A workflow on a queue nobody registered: Run says so.
	e2 := f.engine(config{}, func(e *runtime.Engine) {
		f.must(runtime.Register(e, "lost", func(c *runtime.WorkflowContext, in string) (string, error) { return in, nil }, runtime.WorkflowQueue("nowhere")))
	})
	if err := e2.Run(f.ctx); !errors.Is(err, runtime.ErrUnknownQueue) || !strings.Contains(err.Error(), "workflow lost runs on queue \"nowhere\"") {
		f.t.Errorf("Run with a workflow on an unregistered queue: %v", err)
	}
	page, err := f.store.ListRuns(f.ctx, storage.ListRunsQuery{})
	f.must(err)
	if len(page.Runs) != 0 {
		f.t.Fatalf("bad starts stored %d runs", len(page.Runs))
	}
}

func testQueueMismatch(f *fixture) {
	reg := func(limit int) func(e *runtime.Engine) {
		return func(e *runtime.Engine) {
			f.must(e.RegisterQueue(runtime.Queue{Name: "shared", Concurrency: limit}))
			f.must(runtime.Register(e, "greet", func(c *runtime.WorkflowContext, in string) (string, error) { return in, nil }, runtime.WorkflowQueue("shared")))
		}
	}
	first := f.engine(config{}, reg(5))
	f.start(first)
	f.eventually("the first engine records its queue", func() bool {
		c, err := f.store.GetCatalog(f.ctx)
		return err == nil && len(c.Queues) == 1
	})
	second := f.engine(config{}, reg(3))
	err := second.Run(f.ctx)
	if !errors.Is(err, runtime.ErrQueueMismatch) || !strings.Contains(err.Error(), "concurrency 3") || !strings.Contains(err.Error(), "concurrency 5") {
		f.t.Fatalf("Run of an engine with other limits = %v, want ErrQueueMismatch naming both", err)
	}
	// The same limits are no mismatch.
	third := f.engine(config{}, reg(5))
	stop := f.start(third)
	r, err := runtime.Start[string, string](f.ctx, third, "greet", "hi")
	f.must(err)
	if _, err := r.Result(f.ctx); err != nil {
		f.t.Fatal(err)
	}
	stop()
}

// scheduled registers "tick", which records its run ID and, when block is
// set, waits until it is closed.
func scheduled(f *fixture, seen *sync.Map, block <-chan struct{}) func(e *runtime.Engine) {
	return func(e *runtime.Engine) {
		f.must(runtime.Register(e, "tick", func(c *runtime.WorkflowContext, in string) (string, error) {
			return runtime.Step(c, "note@v1", runtime.StepOptions{}, func(sc runtime.StepContext) (string, error) {
				n, _ := seen.LoadOrStore(c.RunID(), new(atomic.Int32))
				n.(*atomic.Int32).Add(1)
				if block != nil {
					select {
					case <-block:
					case <-sc.Done():
						return "", sc.Err()
					}
				}
				return in, nil
			})
		}, runtime.WorkflowTimeout(time.Hour)))
	}
}

func (f *fixture) scheduleEngines(n int, register func(e *runtime.Engine)) []*runtime.Engine {
	var out []*runtime.Engine
	for range n {
		out = append(out, f.engineWith(runtime.Config{Services: []runtime.Service{schedule.Service{Poll: 20 * time.Millisecond}}}, register))
	}
	return out
}

func testScheduleFourEngines(f *fixture) {
	var seen sync.Map
	engines := f.scheduleEngines(4, scheduled(f, &seen, nil))
	info, err := schedule.Create(f.ctx, engines[0], schedule.Spec{ID: "every-second", Workflow: "tick", Cron: "@every 1s", Input: "hi", Overlap: schedule.Allow})
	f.must(err)
	first := info.NextFireAt
	var stops []func()
	for _, e := range engines {
		stops = append(stops, f.start(e))
	}
	time.Sleep(time.Until(first.Add(3*time.Second + 500*time.Millisecond)))
	for _, stop := range stops {
		stop()
	}
	// Every tick from the first to the last the schedule fired has one
	// run, no other run exists, and the schedule was written once a tick.
	s, err := schedule.Get(f.ctx, engines[0], "every-second")
	f.must(err)
	if s.LastFireAt == nil || s.LastFireAt.Before(first.Add(2*time.Second)) {
		f.t.Fatalf("last fired at %v, want at least three ticks from %v", s.LastFireAt, first)
	}
	page, err := f.store.ListRuns(f.ctx, storage.ListRunsQuery{Workflow: "tick"})
	f.must(err)
	var got []string
	for _, r := range page.Runs {
		got = append(got, r.ID)
	}
	var want []string
	for t := first; !t.After(*s.LastFireAt); t = t.Add(time.Second) {
		want = append(want, schedule.RunID("every-second", t))
	}
	if !slices.Equal(got, want) {
		f.t.Fatalf("runs %v, want one per tick %v", got, want)
	}
	// A tick's run gets what a start gets: its workflow's timeout=.
	if r, err := f.store.GetRun(f.ctx, want[0]); err != nil || r.Deadline == nil || r.Deadline.Sub(r.CreatedAt) < 59*time.Minute {
		f.t.Fatalf("a tick's run: deadline %v (err %v), want its workflow's timeout of an hour", r.Deadline, err)
	}
	if s.Revision > int64(1+len(want)) {
		f.t.Fatalf("schedule revision %d after %d ticks, want at most %d: one write per tick at most", s.Revision, len(want), 1+len(want))
	}
	seen.Range(func(k, v any) bool {
		if n := v.(*atomic.Int32).Load(); n != 1 {
			f.t.Errorf("run %v's step ran %d times", k, n)
		}
		return true
	})
}

func testScheduleOverlap(f *fixture) {
	var seen sync.Map
	block := make(chan struct{})
	engines := f.scheduleEngines(2, scheduled(f, &seen, block))
	skip, err := schedule.Create(f.ctx, engines[0], schedule.Spec{ID: "skipper", Workflow: "tick", Cron: "@every 1s", Input: "s"})
	f.must(err)
	buf, err := schedule.Create(f.ctx, engines[0], schedule.Spec{ID: "buffer", Workflow: "tick", Cron: "@every 1s", Input: "b", Overlap: schedule.BufferOne})
	f.must(err)
	// The two schedules may be created either side of a second's edge, so
	// each one's ticks are counted from its own first.
	bufFirst := buf.NextFireAt
	for _, e := range engines {
		f.start(e)
	}
	first := skip.NextFireAt
	// Three ticks pass while the first runs block.
	time.Sleep(time.Until(bufFirst.Add(2*time.Second + 500*time.Millisecond)))
	count := func(prefix string) []string {
		page, err := f.store.ListRuns(f.ctx, storage.ListRunsQuery{Workflow: "tick"})
		f.must(err)
		var ids []string
		for _, r := range page.Runs {
			if strings.HasPrefix(r.ID, prefix+"@") {
				ids = append(ids, r.ID)
			}
		}
		return ids
	}
	if got := count("skipper"); len(got) != 1 {
		f.t.Fatalf("skip: runs %v while the first still runs, want only the first", got)
	}
	if got := count("buffer"); len(got) != 1 {
		f.t.Fatalf("buffer one: runs %v while the first still runs, want only the first", got)
	}
	var held schedule.Info
	f.eventually("buffer one holds a tick", func() bool {
		held, err = schedule.Get(f.ctx, engines[0], "buffer")
		f.must(err)
		return held.Held != nil
	})
	if !held.Held.Equal(bufFirst.Add(time.Second)) {
		f.t.Fatalf("buffer one holds %v, want the second tick %v", held.Held, bufFirst.Add(time.Second))
	}
	if got := count("skipper"); len(got) != 1 || got[0] != schedule.RunID("skipper", first) {
		f.t.Fatalf("skip: runs %v while the first still runs, want only the first", got)
	}
	close(block)
	f.eventually("the held tick starts once the first run ends", func() bool {
		return slices.Contains(count("buffer"), schedule.RunID("buffer", bufFirst.Add(time.Second)))
	})
}

func testRetention(f *fixture) {
	quick := func(c *runtime.WorkflowContext, in string) (string, error) { return in, nil }
	e := f.engineWith(runtime.Config{Retention: 50 * time.Millisecond, SweepInterval: 30 * time.Millisecond}, func(e *runtime.Engine) {
		f.must(runtime.Register(e, "brief", quick))
		f.must(runtime.Register(e, "kept", quick, runtime.WorkflowRetention(0)))
		f.must(runtime.Register(e, "long", quick, runtime.WorkflowRetention(time.Hour)))
		f.must(runtime.Register(e, "waits", func(c *runtime.WorkflowContext, in string) (string, error) {
			return in, c.Sleep("nap", time.Hour)
		}))
	})
	var ids []string
	for _, wf := range []string{"brief", "kept", "long"} {
		for i := range 3 {
			id := fmt.Sprintf("%s-%d", wf, i)
			_, err := runtime.Start[string, string](f.ctx, e, wf, "x", runtime.WithID(id))
			f.must(err)
			ids = append(ids, id)
		}
	}
	_, err := runtime.Start[string, string](f.ctx, e, "waits", "x", runtime.WithID("asleep"))
	f.must(err)
	_, err = f.store.SendEvent(f.ctx, storage.Event{RunID: "brief-0", Topic: "late", Payload: []byte(`1`)})
	f.must(err)
	f.start(e)
	f.eventually("the brief runs are deleted", func() bool {
		for i := range 3 {
			if _, err := f.store.GetRun(f.ctx, fmt.Sprintf("brief-%d", i)); !errors.Is(err, storage.ErrRunNotFound) {
				return false
			}
		}
		return true
	})
	for _, id := range ids {
		_, err := f.store.GetRun(f.ctx, id)
		gone := errors.Is(err, storage.ErrRunNotFound)
		if wantGone := strings.HasPrefix(id, "brief-"); gone != wantGone {
			f.t.Errorf("run %s deleted: %v, want %v (err %v)", id, gone, wantGone, err)
		}
	}
	// The sleeper may still be on its way to its park on a slow machine;
	// what matters is that it is never deleted and parks.
	f.eventually("the unfinished run is kept and parks", func() bool {
		r, err := f.store.GetRun(f.ctx, "asleep")
		if err != nil {
			f.t.Fatalf("an unfinished run: %v; want it kept", err)
		}
		return r.Status == storage.StatusWaiting
	})
}

// countingStore counts a worker's claims.
type countingStore struct {
	storage.Store
	claims atomic.Int32
}

func (c *countingStore) Claim(ctx context.Context, req storage.ClaimRequest) ([]storage.ClaimedRun, error) {
	c.claims.Add(1)
	return c.Store.Claim(ctx, req)
}

func testQueueFullBackoff(f *fixture) {
	release := make(chan struct{})
	counting := &countingStore{Store: f.store}
	e := f.engineWith(runtime.Config{Store: counting, PollInterval: 200 * time.Millisecond}, func(e *runtime.Engine) {
		f.must(e.RegisterQueue(runtime.Queue{Name: "single", Concurrency: 1}))
		f.must(runtime.Register(e, "hold", func(c *runtime.WorkflowContext, in string) (string, error) {
			return runtime.Step(c, "hold@v1", runtime.StepOptions{}, func(sc runtime.StepContext) (string, error) {
				select {
				case <-release:
				case <-sc.Done():
				}
				return in, nil
			})
		}, runtime.WorkflowQueue("single")))
	})
	var runs []*runtime.Run[string]
	for i := range 5 {
		r, err := runtime.Start[string, string](f.ctx, e, "hold", fmt.Sprint(i))
		f.must(err)
		runs = append(runs, r)
	}
	f.start(e)
	f.eventually("one run holds the queue's place", func() bool {
		st, err := e.QueueStats(f.ctx, "single")
		return err == nil && st[0].Running == 1 && st[0].Ready == 4
	})
	before := counting.claims.Load()
	time.Sleep(time.Second)
	// Ready runs, no place: without a back-off the engine would claim every
	// 2ms (about 500 times); doubling to the 200ms poll, about a dozen.
	if n := counting.claims.Load() - before; n > 60 {
		f.t.Fatalf("%d claims in a second while the queue was full: the engine claims in a loop", n)
	}
	close(release)
	for _, r := range runs {
		if _, err := r.Result(f.ctx); err != nil {
			f.t.Fatal(err)
		}
	}
}
