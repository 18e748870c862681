package enginetest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/storage"
)

var cancelScenarios = []scenario{
	{"cancel/a terminate from another engine reaches a step blocked on its context", testTerminateReachesStep},
	{"cancel/a restart from another engine mid-step never runs two executions at once", testRestartNoOverlap},
	{"cancel/a failed write hands the run over before its lease expires", testFailedWriteHandsOver},
	{"cancel/a step whose timeout exceeds the lease keeps it without heartbeats", testTimeoutHoldsLease},
	{"cancel/a pause from another engine parks a run waiting to retry", testPauseParksRetry},
}

// longLease is the lease of the cancellation scenarios: what they show
// happens long before it would expire.
const longLease = 30 * time.Second

// engineWith returns an engine on cfg (the fixture's store, polling often,
// unless cfg says otherwise) with register's workflows, not running yet.
func (f *fixture) engineWith(cfg runtime.Config, register func(e *runtime.Engine)) *runtime.Engine {
	f.t.Helper()
	if cfg.Store == nil {
		cfg.Store = f.store
	}
	if cfg.PollInterval == 0 {
		cfg.PollInterval = 10 * time.Millisecond
	}
	if cfg.ShutdownGrace == 0 {
		cfg.ShutdownGrace = 50 * time.Millisecond
	}
	e, err := runtime.New(cfg)
	f.must(err)
	register(e)
	return e
}

// within polls cond until it holds, failing after d.
func (f *fixture) within(d time.Duration, what string, cond func() bool) {
	f.t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) || f.ctx.Err() != nil {
			f.t.Fatalf("not within %v: %s", d, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// blocker registers "blocker", whose step "work@v1" blocks on its context in
// its first call and returns at once in later ones. Each call's cause of
// cancellation is sent on causes.
func blocker(f *fixture, calls *atomic.Int32, causes chan<- error) func(e *runtime.Engine) {
	return func(e *runtime.Engine) {
		f.must(runtime.Register(e, "blocker", func(c *runtime.WorkflowContext, _ int) (int, error) {
			return runtime.Step(c, "work@v1", runtime.StepOptions{}, func(sc runtime.StepContext) (int, error) {
				if calls.Add(1) > 1 {
					return 2, nil
				}
				<-sc.Done()
				causes <- context.Cause(sc)
				return 0, sc.Err()
			})
		}))
	}
}

func testTerminateReachesStep(f *fixture) {
	var calls atomic.Int32
	causes := make(chan error, 1)
	a := f.engine(config{lease: longLease}, blocker(f, &calls, causes))
	b := f.engine(config{lease: longLease}, blocker(f, &calls, causes)) // another process's client
	f.start(a)
	_, err := runtime.Start[int, int](f.ctx, a, "blocker", 0, runtime.WithID("r1"))
	f.must(err)
	f.eventually("the step started", func() bool { return calls.Load() == 1 })
	began := time.Now()
	f.must(b.Terminate(f.ctx, "r1", "operator"))
	select {
	case cause := <-causes:
		if !errors.Is(cause, runtime.ErrTerminated) {
			f.t.Fatalf("the step's context was cancelled with %v, want ErrTerminated", cause)
		}
		if d := time.Since(began); d >= longLease {
			f.t.Fatalf("the step learned of the termination after %v, not before its lease of %v expired", d, longLease)
		}
	case <-time.After(longLease):
		f.t.Fatalf("the step was not cancelled within its lease of %v", longLease)
	}
	f.waitStatus(b, "r1", runtime.StatusTerminated)
	if n := calls.Load(); n != 1 {
		f.t.Fatalf("the step ran %d times, want once", n)
	}
}

func testRestartNoOverlap(f *fixture) {
	var (
		calls, running, overlaps atomic.Int32
		mu                       sync.Mutex
		causes                   []error
	)
	register := func(e *runtime.Engine) {
		f.must(runtime.Register(e, "blocker", func(c *runtime.WorkflowContext, _ int) (int, error) {
			return runtime.Step(c, "work@v1", runtime.StepOptions{}, func(sc runtime.StepContext) (int, error) {
				if running.Add(1) > 1 {
					overlaps.Add(1)
				}
				defer running.Add(-1)
				if calls.Add(1) > 1 {
					return 2, nil
				}
				<-sc.Done()
				mu.Lock()
				causes = append(causes, context.Cause(sc))
				mu.Unlock()
				// Cleaning up takes a while: a new execution started now
				// would run beside this one.
				time.Sleep(300 * time.Millisecond)
				return 0, sc.Err()
			})
		}))
	}
	a := f.engine(config{lease: longLease}, register)
	b := f.engine(config{lease: longLease}, register)
	f.start(a)
	run, err := runtime.Start[int, int](f.ctx, a, "blocker", 0, runtime.WithID("r1"))
	f.must(err)
	f.eventually("the step started", func() bool { return calls.Load() == 1 })
	f.start(b) // both engines claim from now on
	began := time.Now()
	f.must(b.Restart(f.ctx, "r1"))
	out, err := run.Result(f.ctx)
	f.must(err)
	if out != 2 {
		f.t.Fatalf("result %d, want 2 from the new execution", out)
	}
	if d := time.Since(began); d >= longLease {
		f.t.Fatalf("the new execution ended %v after the restart: it waited for the old lease of %v to expire", d, longLease)
	}
	if n := overlaps.Load(); n != 0 {
		f.t.Fatalf("the step ran in two executions at once %d times", n)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(causes) != 1 || !errors.Is(causes[0], runtime.ErrRestarted) {
		f.t.Fatalf("the old execution's step was cancelled with %v, want ErrRestarted", causes)
	}
	if execs, err := a.ListExecutions(f.ctx, "r1"); err != nil || len(execs) != 2 {
		f.t.Fatalf("executions %+v (%v), want two", execs, err)
	}
}

// errUnreachable is what failingStore's failed write returns.
var errUnreachable = errors.New("enginetest: the store did not answer this write")

// failingStore is one worker's view of a store that fails its first
// Checkpoint, writing nothing, as a store that timed out would.
type failingStore struct {
	storage.Store
	failed atomic.Bool
}

func (s *failingStore) Checkpoint(ctx context.Context, req storage.CheckpointRequest) (storage.CheckpointResult, error) {
	if s.failed.CompareAndSwap(false, true) {
		return storage.CheckpointResult{}, errUnreachable
	}
	return s.Store.Checkpoint(ctx, req)
}

func testFailedWriteHandsOver(f *fixture) {
	var calls atomic.Int32
	register := func(e *runtime.Engine) {
		f.must(runtime.Register(e, "twice", func(c *runtime.WorkflowContext, _ int) (int, error) {
			return runtime.Step(c, "work@v1", runtime.StepOptions{}, func(runtime.StepContext) (int, error) {
				return int(calls.Add(1)), nil
			})
		}))
	}
	failing := &failingStore{Store: f.store}
	a := f.engine(config{lease: longLease, store: failing}, register)
	b := f.engine(config{lease: longLease}, register)
	f.start(a)
	began := time.Now()
	run, err := runtime.Start[int, int](f.ctx, a, "twice", 0, runtime.WithID("r1"))
	f.must(err)
	f.eventually("the checkpoint failed", failing.failed.Load)
	f.start(b)
	ctx, cancel := context.WithTimeout(f.ctx, longLease/3)
	defer cancel()
	out, err := run.Result(ctx)
	if err != nil {
		f.t.Fatalf("no result %v after the failed write: %v (the run waited for its lease of %v to expire)", time.Since(began), err, longLease)
	}
	if out != 2 {
		f.t.Fatalf("result %d, want 2: the step ran again after its checkpoint failed", out)
	}
}

func testTimeoutHoldsLease(f *fixture) {
	const lease = 300 * time.Millisecond
	var calls atomic.Int32
	register := func(e *runtime.Engine) {
		f.must(runtime.Register(e, "long", func(c *runtime.WorkflowContext, _ int) (int, error) {
			return runtime.Step(c, "work@v1", runtime.StepOptions{Timeout: 10 * lease}, func(sc runtime.StepContext) (int, error) {
				calls.Add(1)
				select {
				case <-time.After(4 * lease):
					return 1, nil
				case <-sc.Done():
					return 0, sc.Err()
				}
			})
		}))
	}
	// Heartbeats come too seldom to keep the lease: only the step's
	// timeout can.
	cfg := runtime.Config{LeaseDuration: lease, HeartbeatInterval: time.Hour}
	a := f.engineWith(cfg, register)
	b := f.engineWith(cfg, register)
	f.start(a)
	run, err := runtime.Start[int, int](f.ctx, a, "long", 0)
	f.must(err)
	f.eventually("the step started", func() bool { return calls.Load() == 1 })
	f.start(b) // polls every 10ms while the step outlives its lease
	if _, err := run.Result(f.ctx); err != nil {
		f.t.Fatal(err)
	}
	if n := calls.Load(); n != 1 {
		f.t.Fatalf("the step ran %d times, want once: its timeout should have held the lease", n)
	}
}

func testPauseParksRetry(f *fixture) {
	var calls atomic.Int32
	register := func(e *runtime.Engine) {
		f.must(runtime.Register(e, "retrying", func(c *runtime.WorkflowContext, _ int) (int, error) {
			return runtime.Step(c, "work@v1", runtime.StepOptions{Retries: 3, Backoff: time.Hour, MaxBackoff: time.Hour},
				func(runtime.StepContext) (int, error) {
					calls.Add(1)
					return 0, errors.New("not yet")
				})
		}))
	}
	a := f.engine(config{lease: longLease}, register)
	b := f.engine(config{lease: longLease}, register) // another process's client
	f.start(a)
	_, err := runtime.Start[int, int](f.ctx, a, "retrying", 0, runtime.WithID("r1"))
	f.must(err)
	f.eventually("the first attempt failed and its retry waits", func() bool {
		s := findStep(f.steps(b, "r1", 0), "work@v1")
		return s != nil && len(s.Attempts) == 1 && s.Attempts[0].RetryAt != nil
	})
	f.must(b.Pause(f.ctx, "r1"))
	f.within(longLease/3, "the run waiting to retry is paused", func() bool {
		return f.info(b, "r1").Status == runtime.StatusPaused
	})
	if n := calls.Load(); n != 1 {
		f.t.Fatalf("the step ran %d times, want once: the retry is due in an hour", n)
	}
	s := findStep(f.steps(b, "r1", 0), "work@v1")
	if s == nil || len(s.Attempts) != 1 || s.Attempts[0].RetryAt == nil {
		f.t.Fatalf("step %+v, want its failed attempt with the retry time kept", s)
	}
}
