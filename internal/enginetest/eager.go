package enginetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/storage"
)

// eagerScenarios are the runs an engine starts leased to itself (an eager
// start) and the checkpoints written with the run's next write (the last
// one carrying the run's completion), across the crashes, pauses,
// terminations and children they meet.
var eagerScenarios = []scenario{
	{"eager/a run started on a working engine costs a create and one write per step", testEagerOneWritePerStep},
	{"eager/a run started eagerly whose worker dies is finished by another, its written steps kept", testEagerCrash},
	{"eager/a run is not started eagerly on a limited queue, and the limit holds", testEagerLimitedQueue},
	{"ride/a crash at the write that carries the completion runs the last step again, and loses nothing", testRideCrash},
	{"ride/a crash after the completion landed leaves the run complete", testRideCrashAfter},
	{"ride/a pause during the last step parks the run, and resuming it completes it", testRidePause},
	{"ride/a termination during the last step writes nothing more", testRideTerminate},
	{"ride/a child's completion rides with its last step and reaches its parent", testRideChild},
	{"deferred/a step's checkpoint is written while the workflow computes before its next call", testDeferredWritten},
}

// working starts e and returns once it works: its runs start eagerly.
func (f *fixture) working(e *runtime.Engine) {
	f.t.Helper()
	f.start(e)
	f.eventually("the engine works", func() bool {
		ws, err := e.Workers(f.ctx)
		f.must(err)
		for _, w := range ws {
			if w.ID == e.WorkerID() {
				return true
			}
		}
		return false
	})
}

// writeCounter counts a worker's writes of one kind and the runs its
// claims return.
type writeCounter struct {
	storage.Store
	mu          sync.Mutex
	creates     int
	claimed     map[string]bool
	checkpoints map[string]int
	completes   map[string]int
	rides       map[string]int
}

func newWriteCounter(s storage.Store) *writeCounter {
	return &writeCounter{Store: s, claimed: map[string]bool{}, checkpoints: map[string]int{}, completes: map[string]int{}, rides: map[string]int{}}
}

func (c *writeCounter) CreateRuns(ctx context.Context, runs []storage.NewRun) ([]storage.CreateResult, error) {
	c.mu.Lock()
	c.creates++
	c.mu.Unlock()
	return c.Store.CreateRuns(ctx, runs)
}

func (c *writeCounter) Claim(ctx context.Context, req storage.ClaimRequest) ([]storage.ClaimedRun, error) {
	got, err := c.Store.Claim(ctx, req)
	c.mu.Lock()
	for _, r := range got {
		c.claimed[r.Lease.RunID] = true
	}
	c.mu.Unlock()
	return got, err
}

func (c *writeCounter) Checkpoint(ctx context.Context, req storage.CheckpointRequest) (storage.CheckpointResult, error) {
	c.mu.Lock()
	c.checkpoints[req.Lease.RunID]++
	if req.Complete != nil {
		c.rides[req.Lease.RunID]++
	}
	c.mu.Unlock()
	return c.Store.Checkpoint(ctx, req)
}

func (c *writeCounter) Complete(ctx context.Context, req storage.CompleteRequest) error {
	c.mu.Lock()
	c.completes[req.Lease.RunID]++
	c.mu.Unlock()
	return c.Store.Complete(ctx, req)
}

// registerSteps registers name: n steps, each counted in seen under the
// run's ID, the last of which waits for gate when it is not nil, and
// returns the sum of the steps' outputs (1+2+...+n).
func registerSteps(f *fixture, e *runtime.Engine, name string, n int, seen *sideEffects, gate <-chan struct{}) {
	f.must(runtime.Register(e, name, func(c *runtime.WorkflowContext, _ int) (int, error) {
		sum := 0
		for i := 1; i <= n; i++ {
			v, err := runtime.Step(c, fmt.Sprintf("s%d@v1", i), runtime.StepOptions{}, func(sc runtime.StepContext) (int, error) {
				seen.add(sc.RunID(), fmt.Sprintf("s%d", i))
				if i == n && gate != nil {
					select {
					case <-gate:
					case <-sc.Done():
						return 0, sc.Err()
					}
				}
				return i, nil
			})
			if err != nil {
				return 0, err
			}
			sum += v
		}
		return sum, nil
	}))
}

func testEagerOneWritePerStep(f *fixture) {
	var seen sideEffects
	counting := newWriteCounter(f.store)
	e := f.engine(config{store: counting}, func(e *runtime.Engine) { registerSteps(f, e, "eager.steps", 4, &seen, nil) })
	f.working(e)
	run, err := runtime.Start[int, int](f.ctx, e, "eager.steps", 0)
	f.must(err)
	got, err := run.Result(f.ctx)
	f.must(err)
	if got != 10 {
		f.t.Fatalf("result %d, want 10", got)
	}
	counting.mu.Lock()
	defer counting.mu.Unlock()
	id := run.ID()
	if counting.claimed[id] || counting.checkpoints[id] != 4 || counting.rides[id] != 1 || counting.completes[id] != 0 {
		f.t.Fatalf("run %s: claimed %v, %d checkpoint writes (%d carrying the completion), %d completions; want no claim, 4 writes, the last completing the run, no Complete",
			id, counting.claimed[id], counting.checkpoints[id], counting.rides[id], counting.completes[id])
	}
	steps := f.steps(e, id, 0)
	if len(steps) != 4 || steps[0].Key != "s1@v1" || steps[3].Key != "s4@v1" {
		f.t.Fatalf("steps %+v, want s1..s4 in order", steps)
	}
	if s := seen.of(id); s["s1"] != 1 || s["s4"] != 1 {
		f.t.Fatalf("steps ran %v, want each once", s)
	}
}

func testEagerCrash(f *fixture) {
	var seen sideEffects
	gate := make(chan struct{})
	defer close(gate)
	dying := &dyingStore{Store: f.store}
	a := f.engine(config{store: dying, lease: 500 * time.Millisecond}, func(e *runtime.Engine) { registerSteps(f, e, "eager.crash", 3, &seen, gate) })
	f.working(a)
	run, err := runtime.Start[int, int](f.ctx, a, "eager.crash", 0)
	f.must(err)
	id := run.ID()
	f.eventually("the last step runs on the engine that started the run", func() bool { return seen.of(id)["s3"] == 1 })
	if info := f.info(a, id); info.Status != runtime.StatusRunning {
		f.t.Fatalf("status %s, want running", info.Status)
	}
	dying.dead.Store(true)
	b := f.engine(config{lease: 500 * time.Millisecond}, func(e *runtime.Engine) { registerSteps(f, e, "eager.crash", 3, &seen, nil) })
	f.start(b)
	h, err := runtime.Get[int](f.ctx, b, "eager.crash", id)
	f.must(err)
	got, err := h.Result(f.ctx)
	f.must(err)
	if got != 6 {
		f.t.Fatalf("result %d, want 6", got)
	}
	// s1 and s2 were written when the next step began; only s3, which
	// was running at the crash, runs again.
	if s := seen.of(id); s["s1"] != 1 || s["s2"] != 1 || s["s3"] != 2 {
		f.t.Fatalf("steps ran %v, want s1 and s2 once, s3 twice", s)
	}
	if info := f.info(b, id); info.Recoveries != 0 || info.Execution != 1 {
		f.t.Fatalf("run %+v: want execution 1, recoveries reset by its checkpoints", info)
	}
}

func testEagerLimitedQueue(f *fixture) {
	var seen sideEffects
	counting := newWriteCounter(f.store)
	gate := make(chan struct{})
	e := f.engine(config{store: counting}, func(e *runtime.Engine) {
		f.must(e.RegisterQueue(runtime.Queue{Name: "one", Concurrency: 1}))
		registerSteps(f, e, "eager.limited", 1, &seen, gate)
	})
	f.start(e)
	var runs []*runtime.Run[int]
	for range 3 {
		r, err := runtime.Start[int, int](f.ctx, e, "eager.limited", 0, runtime.OnQueue("one"))
		f.must(err)
		runs = append(runs, r)
	}
	f.eventually("one run holds the queue's place", func() bool {
		n := 0
		for _, r := range runs {
			n += seen.of(r.ID())["s1"]
		}
		return n == 1
	})
	close(gate)
	for _, r := range runs {
		got, err := r.Result(f.ctx)
		f.must(err)
		if got != 1 {
			f.t.Fatalf("result %d, want 1", got)
		}
	}
	counting.mu.Lock()
	defer counting.mu.Unlock()
	for _, r := range runs {
		if !counting.claimed[r.ID()] {
			f.t.Fatalf("run %s on a limited queue was not claimed: it started eagerly", r.ID())
		}
	}
}

// rideDyingStore dies at the checkpoint that carries a completion: before
// it is written (landed false) or right after (landed true).
type rideDyingStore struct {
	dyingStore
	landed bool
}

func (d *rideDyingStore) Checkpoint(ctx context.Context, req storage.CheckpointRequest) (storage.CheckpointResult, error) {
	if req.Complete == nil || d.dead.Load() {
		return d.dyingStore.Checkpoint(ctx, req)
	}
	d.dead.Store(true)
	if !d.landed {
		return storage.CheckpointResult{}, errDead
	}
	if _, err := d.Store.Checkpoint(ctx, req); err != nil {
		return storage.CheckpointResult{}, err
	}
	return storage.CheckpointResult{}, errDead
}

// crashAtRide runs a 3-step run on an engine that dies at the write that
// carries its completion, then on another; it returns what ran and the
// run's ID.
func crashAtRide(f *fixture, landed bool) (*sideEffects, string, *runtime.Engine) {
	seen := &sideEffects{}
	dying := &rideDyingStore{dyingStore: dyingStore{Store: f.store}, landed: landed}
	a := f.engine(config{store: dying, lease: 500 * time.Millisecond}, func(e *runtime.Engine) { registerSteps(f, e, "ride.crash", 3, seen, nil) })
	f.working(a)
	run, err := runtime.Start[int, int](f.ctx, a, "ride.crash", 0)
	f.must(err)
	f.eventually("the worker dies at the completing write", func() bool { return dying.dead.Load() })
	b := f.engine(config{lease: 500 * time.Millisecond}, func(e *runtime.Engine) { registerSteps(f, e, "ride.crash", 3, seen, nil) })
	f.start(b)
	h, err := runtime.Get[int](f.ctx, b, "ride.crash", run.ID())
	f.must(err)
	got, err := h.Result(f.ctx)
	f.must(err)
	if got != 6 {
		f.t.Fatalf("result %d, want 6", got)
	}
	return seen, run.ID(), b
}

func testRideCrash(f *fixture) {
	seen, id, b := crashAtRide(f, false)
	if s := seen.of(id); s["s1"] != 1 || s["s2"] != 1 || s["s3"] != 2 {
		f.t.Fatalf("steps ran %v, want s1 and s2 once, s3 again after the crash", s)
	}
	if steps := f.steps(b, id, 0); len(steps) != 3 {
		f.t.Fatalf("steps %+v, want s1..s3", steps)
	}
}

func testRideCrashAfter(f *fixture) {
	seen, id, b := crashAtRide(f, true)
	info := f.info(b, id)
	if s := seen.of(id); s["s1"] != 1 || s["s2"] != 1 || s["s3"] != 1 {
		f.t.Fatalf("steps ran %v, want each once: the completion landed", s)
	}
	if info.Status != runtime.StatusComplete || info.Recoveries != 0 {
		f.t.Fatalf("run %+v, want complete, never recovered", info)
	}
}

func testRidePause(f *fixture) {
	var seen sideEffects
	gate := make(chan struct{})
	e := f.engine(config{}, func(e *runtime.Engine) { registerSteps(f, e, "ride.pause", 2, &seen, gate) })
	f.working(e)
	run, err := runtime.Start[int, int](f.ctx, e, "ride.pause", 0)
	f.must(err)
	f.eventually("the last step runs", func() bool { return seen.of(run.ID())["s2"] == 1 })
	f.must(run.Pause(f.ctx))
	close(gate)
	info := f.waitStatus(e, run.ID(), runtime.StatusPaused)
	if steps := f.steps(e, run.ID(), 0); len(steps) != 2 {
		f.t.Fatalf("paused run %+v has steps %+v, want both written", info, steps)
	}
	f.must(run.Resume(f.ctx))
	got, err := run.Result(f.ctx)
	f.must(err)
	if s := seen.of(run.ID()); got != 3 || s["s1"] != 1 || s["s2"] != 1 {
		f.t.Fatalf("result %d, steps ran %v; want 3, each step once", got, s)
	}
}

func testRideTerminate(f *fixture) {
	var seen sideEffects
	gate := make(chan struct{})
	var s2Done atomic.Bool
	e := f.engine(config{}, func(e *runtime.Engine) {
		f.must(runtime.Register(e, "ride.term", func(c *runtime.WorkflowContext, _ int) (int, error) {
			if _, err := runtime.Step(c, "s1@v1", runtime.StepOptions{}, func(sc runtime.StepContext) (int, error) { return 1, nil }); err != nil {
				return 0, err
			}
			return runtime.Step(c, "s2@v1", runtime.StepOptions{}, func(sc runtime.StepContext) (int, error) {
				seen.add(sc.RunID(), "s2")
				<-gate // finishes whatever the termination says
				s2Done.Store(true)
				return 2, nil
			})
		}))
	})
	f.working(e)
	run, err := runtime.Start[int, int](f.ctx, e, "ride.term", 0)
	f.must(err)
	f.eventually("the last step runs", func() bool { return seen.of(run.ID())["s2"] == 1 })
	f.must(run.Terminate(f.ctx, "enough"))
	close(gate)
	f.eventually("the step returned", s2Done.Load)
	_, err = run.Result(f.ctx)
	if !errors.Is(err, runtime.ErrTerminated) {
		f.t.Fatalf("result error %v, want ErrTerminated", err)
	}
	// The engine's execution ends with nothing written after the
	// termination: s2 has no checkpoint.
	f.eventually("the execution ends", func() bool { return len(f.steps(e, run.ID(), 0)) == 1 })
	time.Sleep(50 * time.Millisecond)
	if steps := f.steps(e, run.ID(), 0); len(steps) != 1 || steps[0].Key != "s1@v1" {
		f.t.Fatalf("steps %+v, want only s1", steps)
	}
	if info := f.info(e, run.ID()); info.Status != runtime.StatusTerminated {
		f.t.Fatalf("status %s, want terminated", info.Status)
	}
}

func testRideChild(f *fixture) {
	var seen sideEffects
	counting := newWriteCounter(f.store)
	e := f.engine(config{store: counting}, func(e *runtime.Engine) {
		registerSteps(f, e, "ride.kid", 2, &seen, nil)
		f.must(runtime.Register(e, "ride.parent", func(c *runtime.WorkflowContext, _ int) (int, error) {
			v, err := runtime.CallChild[int](c, "kid", "ride.kid", 0)
			return v * 10, err
		}))
	})
	f.working(e)
	run, err := runtime.Start[int, int](f.ctx, e, "ride.parent", 0)
	f.must(err)
	got, err := run.Result(f.ctx)
	f.must(err)
	if got != 30 {
		f.t.Fatalf("result %d, want 30", got)
	}
	kid := run.ID() + "/kid"
	counting.mu.Lock()
	defer counting.mu.Unlock()
	if counting.rides[kid] != 1 || counting.completes[kid] != 0 {
		f.t.Fatalf("child %s: %d riding completions, %d Completes; want its completion on its last step's write", kid, counting.rides[kid], counting.completes[kid])
	}
}

func testDeferredWritten(f *fixture) {
	gate := make(chan struct{})
	e := f.engine(config{}, func(e *runtime.Engine) {
		f.must(runtime.Register(e, "deferred.compute", func(c *runtime.WorkflowContext, _ int) (int, error) {
			v, err := runtime.Step(c, "s1@v1", runtime.StepOptions{}, func(sc runtime.StepContext) (int, error) { return 1, nil })
			if err != nil {
				return 0, err
			}
			<-gate // code between two calls that takes its time
			w, err := runtime.Step(c, "s2@v1", runtime.StepOptions{}, func(sc runtime.StepContext) (int, error) { return 2, nil })
			return v + w, err
		}))
	})
	f.working(e)
	run, err := runtime.Start[int, int](f.ctx, e, "deferred.compute", 0)
	f.must(err)
	f.eventually("s1's checkpoint is written while the workflow computes", func() bool {
		steps := f.steps(e, run.ID(), 0)
		return len(steps) == 1 && steps[0].Key == "s1@v1"
	})
	close(gate)
	got, err := run.Result(f.ctx)
	f.must(err)
	if got != 3 {
		f.t.Fatalf("result %d, want 3", got)
	}
}
