// Package stemtest is a kit for testing workflows: an engine on an
// in-memory store (or one the test names) whose clock is virtual, so that
// sleeps of a month, event timeouts of days and retries an hour apart run
// in milliseconds; and a test that crashes a workflow's worker at every
// step and checks that the run resumes to the same end.
//
// A test registers its workflows and gets a running engine:
//
//	env := stemtest.New(t, func(e *runtime.Engine) error {
//		return orders.RegisterWorkflows(e, orders.NewSteps(fakePayments))
//	})
//	run, err := orders.StartFulfil(env.Context(), env.Engine, order)
//	...
//	rec, err := run.Result(env.Context())   // a 30-day sleep passes at once
//	t.Logf("virtual time: %s", env.Elapsed())
//
// The clock moves forward by itself whenever every run is blocked on time
// (sleeping, waiting with a timeout, backing off before a retry) and no
// step is executing: it jumps to the next timer. Env.At schedules
// something (an event sent, say) at a virtual time, so it happens in order
// with the runs' own timers; UpdateAt sends an update at a virtual time
// and gives the test the workflow's reply to assert on, and StreamSoFar
// and FollowStream read what a run writes to a stream. Everything stops
// when the test ends; a test that failed logs each run's steps, updates
// and streams, and the virtual time reached.
//
// Generated test helpers (a workflow package's …stemtest package) build
// on this kit: typed step and workflow mocks (MockStep, MockWorkflow,
// the Expect assertions) and a crash-at-every-step test per workflow.
package stemtest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/storage"
	"github.com/stemflow/stem/stores/memstore"
)

// Option configures New.
type Option func(*options)

type options struct {
	store  func(clock storage.Clock) storage.Store
	start  time.Time
	manual bool
	config func(*runtime.Config)
	wall   time.Duration
	// started is AfterStart's.
	started func(env *Env, runID string)
	// setup is Setup's.
	setup func(env *Env)
	// hooks are the kit's own, outside the test's config (the crash
	// test's count of step functions run).
	hooks []runtime.Hooks
}

// WithStore runs the engine on the store open returns, given the virtual
// clock (pass it to the store's options, so leases and wake times are
// judged on it). Default: memstore.
func WithStore(open func(clock storage.Clock) storage.Store) Option {
	return func(o *options) { o.store = open }
}

// StartAt starts the virtual clock at t instead of Epoch.
func StartAt(t time.Time) Option { return func(o *options) { o.start = t } }

// ManualTime turns off the clock's moving by itself: only Env.Advance
// moves it.
func ManualTime() Option { return func(o *options) { o.manual = true } }

// WithConfig lets the test change the engine's configuration (the clock
// and store stay the kit's).
func WithConfig(f func(*runtime.Config)) Option { return func(o *options) { o.config = f } }

// AfterStart has CrashEveryStep call f right after it starts each run,
// with the run's ID: to send the run the events it waits for, at virtual
// times (Env.At), as the outside world would.
func AfterStart(f func(env *Env, runID string)) Option {
	return func(o *options) { o.started = f }
}

// Setup has New call f with the env once its engine runs, before New
// returns: to put mocks on the engine (a generated kit's Mock(env)) where
// the test does not call New itself, as in CrashEveryStep, whose every
// case calls f before it starts its run.
func Setup(f func(env *Env)) Option { return func(o *options) { o.setup = f } }

// WallTimeout bounds the test's Context in real time (default one
// minute).
func WallTimeout(d time.Duration) Option { return func(o *options) { o.wall = d } }

// Env is a test's engine, store and virtual clock.
type Env struct {
	// Engine is running, with the test's workflows registered.
	Engine *runtime.Engine
	// Store is the engine's store.
	Store storage.Store
	// Clock is the virtual clock the engine and store read.
	Clock *Clock

	t        testing.TB
	ctx      context.Context
	start    time.Time
	register func(e *runtime.Engine) error
	opts     options

	// storeCalls counts the engine's store calls under way.
	storeCalls atomic.Int64
	// updates counts UpdateAt's calls, for the updates' IDs.
	updates atomic.Int64

	mu sync.Mutex
	// swapping is held by a crash test while it replaces the engine, and
	// read-held by the functions At runs, which use env.Engine.
	swapping sync.RWMutex
	onEng    []func(e *runtime.Engine) error // OnEngine's, in order
	stop     func()                          // stops the current engine
	paused   int                             // Pause calls not yet undone
	stopped  bool
	// swapped is closed, and replaced, each time a crash test replaces
	// the engine: readers on the old engine go on with the new.
	swapped chan struct{}
}

// New returns a running engine on a fresh store with a virtual clock,
// with the workflows register registers. Cleanup is the test's: the engine
// stops and the store closes when the test ends.
func New(t testing.TB, register func(e *runtime.Engine) error, opts ...Option) *Env {
	t.Helper()
	o := options{start: Epoch, wall: time.Minute}
	for _, opt := range opts {
		opt(&o)
	}
	clock := NewClock(o.start)
	var st storage.Store
	if o.store != nil {
		st = o.store(clock)
	} else {
		st = memstore.New(memstore.Options{Clock: clock})
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.wall)
	env := &Env{Store: st, Clock: clock, t: t, ctx: ctx, start: o.start, register: register, opts: o, swapped: make(chan struct{})}
	t.Cleanup(func() {
		env.shutdown()
		if t.Failed() {
			env.report()
		}
		cancel()
		_ = st.Close()
	})
	env.Engine = env.newEngine(st)
	if !o.manual {
		go env.advance(ctx)
	}
	if o.setup != nil {
		o.setup(env)
	}
	return env
}

// OnEngine calls f with the env's engine now, and with every engine the
// env starts later (the fresh worker that resumes a run after
// CrashEveryStep kills one), after the test's register and before that
// engine runs: what a test changes on its engine (a mock, a stand-in for
// a child workflow) then holds for the whole test. Generated mocks call
// it. An error f returns fails the test.
func (env *Env) OnEngine(f func(e *runtime.Engine) error) {
	env.t.Helper()
	env.mu.Lock()
	env.onEng = append(env.onEng, f)
	e := env.Engine
	env.mu.Unlock()
	if err := f(e); err != nil {
		env.t.Fatalf("stemtest: %v", err)
	}
}

// newEngine starts an engine on st with the test's workflows.
func (env *Env) newEngine(st storage.Store) *runtime.Engine {
	env.t.Helper()
	cfg := runtime.Config{
		Store: st, Clock: env.Clock,
		// Leases and heartbeats run on the virtual clock too: long ones
		// keep the clock's steps few while a run backs off for hours.
		LeaseDuration: 4 * time.Hour, HeartbeatInterval: time.Hour,
		PollInterval: 500 * time.Millisecond, ShutdownGrace: 100 * time.Millisecond,
	}
	if env.opts.config != nil {
		env.opts.config(&cfg)
		cfg.Store, cfg.Clock = st, env.Clock
	}
	if cfg.RandomSeed == nil {
		// The context's Random and UUID give a run of a given ID the
		// same values in every test and every case of CrashEveryStep.
		cfg.RandomSeed = []byte("stemtest")
	}
	// Innermost of the hooks: the clock stands still while a store call
	// is under way (see settle). Clipped, so the test's own slice is
	// never written to.
	cfg.Hooks = append(slices.Clip(cfg.Hooks), env.opts.hooks...)
	cfg.Hooks = append(cfg.Hooks, runtime.Hooks{Store: env.storeCall})
	e, err := runtime.New(cfg)
	if err != nil {
		env.t.Fatalf("stemtest: %v", err)
	}
	if err := env.register(e); err != nil {
		env.t.Fatalf("stemtest: registering the workflows: %v", err)
	}
	env.mu.Lock()
	onEng := slices.Clone(env.onEng)
	env.mu.Unlock()
	for _, f := range onEng {
		if err := f(e); err != nil {
			env.t.Fatalf("stemtest: %v", err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	env.mu.Lock()
	env.stop = func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			env.t.Errorf("stemtest: engine: %v", err)
		}
		_ = e.Close()
	}
	env.mu.Unlock()
	return e
}

// T is the test the Env belongs to, for helpers that report to it.
func (env *Env) T() testing.TB { return env.t }

// Context is the test's context: cancelled when the test ends, or after
// WallTimeout of real time.
func (env *Env) Context() context.Context { return env.ctx }

// Now is the virtual time.
func (env *Env) Now() time.Time { return env.Clock.Now() }

// Elapsed is how much virtual time has passed since the test began.
func (env *Env) Elapsed() time.Duration { return env.Clock.Now().Sub(env.start) }

// At calls f on its own goroutine when the virtual clock reads d past now,
// in order with the runs' own timers: a test sends an event at a virtual
// time with it. f never runs while a crash test replaces the killed
// worker's engine, so env.Engine is a live engine in it.
func (env *Env) At(d time.Duration, f func()) {
	env.Clock.AfterFunc(d, func() {
		env.swapping.RLock()
		defer env.swapping.RUnlock()
		f()
	})
}

// Advance moves the virtual clock d forward, letting what each timer
// starts settle before the next fires.
func (env *Env) Advance(d time.Duration) {
	target := env.Clock.Now().Add(d)
	for {
		env.settle(env.ctx)
		if !env.Clock.fireNext(target) {
			break
		}
	}
	env.Clock.set(target)
	env.settle(env.ctx)
}

// Pause keeps the clock from moving by itself until the returned function
// is called: for a test that inspects runs between two steps of time.
func (env *Env) Pause() (resume func()) {
	env.mu.Lock()
	env.paused++
	env.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			env.mu.Lock()
			env.paused--
			env.mu.Unlock()
		})
	}
}

// quiet is how long the clock and the engine must be still, in real time,
// before the clock moves by itself; busyQuiet is how long while a step
// function or an execution is at work: one that has not touched the clock
// for that long is taken to wait for a timeout (or its context), which the
// clock must reach. While a store call is under way the clock does not
// move at all: the engine reads the time again once it returns, and a
// slow write must not let the clock run to the next timer (a heartbeat's,
// say) first.
const (
	quiet     = 3 * time.Millisecond
	busyQuiet = 50 * time.Millisecond
)

// advance moves the clock to its next timer whenever everything is
// blocked on time.
func (env *Env) advance(ctx context.Context) {
	for ctx.Err() == nil {
		env.settle(ctx)
		env.mu.Lock()
		hold := env.paused > 0 || env.stopped
		env.mu.Unlock()
		if hold {
			time.Sleep(time.Millisecond)
			continue
		}
		if at, ok := env.Clock.next(); ok {
			env.Clock.fireNext(at)
		} else {
			time.Sleep(time.Millisecond)
		}
	}
}

// settle returns once the clock has not been read or set for quiet, or
// for busyQuiet while a step function executes.
func (env *Env) settle(ctx context.Context) {
	last := env.Clock.activity.Load()
	still := time.Duration(0)
	for ctx.Err() == nil {
		time.Sleep(time.Millisecond)
		now := env.Clock.activity.Load()
		if now != last || env.storeCalls.Load() > 0 {
			last, still = now, 0
			continue
		}
		still += time.Millisecond
		if still >= quiet && env.working() == 0 || still >= busyQuiet {
			return
		}
	}
}

// working is how many step functions and executions are at work on the
// engine.
func (env *Env) working() int {
	env.mu.Lock()
	e := env.Engine
	env.mu.Unlock()
	if e == nil {
		return 0
	}
	return e.StepsRunning() + e.ExecutionsWorking()
}

// storeCall is the engine's Hooks.Store: it counts the calls under way.
func (env *Env) storeCall(ctx context.Context, _ string, next func(context.Context) error) error {
	env.storeCalls.Add(1)
	defer env.storeCalls.Add(-1)
	return next(ctx)
}

// shutdown stops the engine.
func (env *Env) shutdown() {
	env.mu.Lock()
	stop := env.stop
	env.stop, env.stopped = nil, true
	env.mu.Unlock()
	if stop != nil {
		stop()
	}
}

// report logs every run of the store with its steps, and the virtual time
// reached, for a test that failed.
func (env *Env) report() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var b strings.Builder
	fmt.Fprintf(&b, "stemtest: virtual time %s (%s after the start)\n", env.Clock.Now().Format(time.RFC3339), env.Elapsed())
	q := storage.ListRunsQuery{}
	for {
		page, err := env.Store.ListRuns(ctx, q)
		if err != nil {
			fmt.Fprintf(&b, "  (cannot list the runs: %v)\n", err)
			break
		}
		for _, r := range page.Runs {
			fmt.Fprintf(&b, "  run %s (%s@v%d): %s", r.ID, r.Workflow, r.Version, r.Status)
			if r.Error != nil {
				fmt.Fprintf(&b, ": %s", r.Error.Message)
			}
			b.WriteString("\n")
			h, err := env.Store.ListSteps(ctx, storage.StepsQuery{RunID: r.ID})
			if err != nil {
				continue
			}
			for _, a := range h.Pending {
				fmt.Fprintf(&b, "    %s attempt %d (no result yet)", a.Key, a.Number)
				if a.Error != "" {
					fmt.Fprintf(&b, ": %s", a.Error)
				}
				b.WriteString("\n")
			}
			for _, s := range h.Steps {
				fmt.Fprintf(&b, "    %s", s.Key)
				if n := len(s.Attempts); n > 0 {
					fmt.Fprintf(&b, " (%d attempt(s))", n)
				}
				if s.Error != nil {
					fmt.Fprintf(&b, ": %s", s.Error.Message)
				}
				b.WriteString("\n")
			}
			env.reportInteract(ctx, &b, r.ID)
		}
		if page.Next == "" {
			break
		}
		q.After = page.Next
	}
	env.t.Log(b.String())
}

// reportInteract logs a run's updates (the first page) and streams, for
// report.
func (env *Env) reportInteract(ctx context.Context, b *strings.Builder, runID string) {
	if us, err := env.Store.ListUpdates(ctx, storage.UpdatesQuery{RunID: runID}); err == nil {
		for _, u := range us {
			fmt.Fprintf(b, "    update %s (%s): %s", u.ID, u.Name, u.State)
			if u.Error != nil {
				fmt.Fprintf(b, ", error: %s", u.Error.Message)
			}
			b.WriteString("\n")
		}
	}
	if ss, err := env.Store.ListStreams(ctx, runID); err == nil {
		for _, s := range ss {
			closed := ""
			if s.Closed {
				closed = ", closed"
			}
			fmt.Fprintf(b, "    stream %s: %d value(s)%s\n", s.Name, s.Length, closed)
		}
	}
}
