package enginetest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/stemflow/stem/runtime"
)

var attemptScenarios = []scenario{
	{"attempts/the retry budget survives a crash and hand-over", testBudgetAcrossCrash},
	{"attempts/the retry budget survives a graceful hand-over", testBudgetAcrossShutdown},
	{"attempts/an attempt that fails while its engine shuts down is recorded", testFailureDuringShutdown},
	{"attempts/a worker dying mid-attempt counts against MaxRecoveries", testCrashCountsAsRecovery},
	{"attempts/a retrying step is listed with its failed attempts", testRetryingVisible},
	{"attempts/a long step is listed as running", testRunningVisible},
	{"attempts/a per-attempt timeout fails the attempt and the retry runs", testAttemptTimeout},
}

// flaky registers "flaky" whose one step always fails, recording the
// attempt numbers it saw.
func flaky(f *fixture, seen *[]int, mu *sync.Mutex, backoff time.Duration) func(e *runtime.Engine) {
	return func(e *runtime.Engine) {
		f.must(runtime.Register(e, "flaky", func(c *runtime.WorkflowContext, _ int) (int, error) {
			return runtime.Step(c, "charge@v1", runtime.StepOptions{Retries: 3, Backoff: backoff, MaxBackoff: backoff},
				func(sc runtime.StepContext) (int, error) {
					mu.Lock()
					*seen = append(*seen, sc.Attempt())
					mu.Unlock()
					return 0, fmt.Errorf("card declined on attempt %d", sc.Attempt())
				})
		}))
	}
}

// wantBudget checks that the step ran attempts 1 to 4 once each (a retry
// budget of 3) and the run errored with them all stored.
func wantBudget(f *fixture, e *runtime.Engine, seen []int) {
	f.t.Helper()
	if !slices.Equal(seen, []int{1, 2, 3, 4}) {
		f.t.Fatalf("attempts seen %v, want 1 2 3 4: the budget of 3 retries is not granted again", seen)
	}
	f.waitStatus(e, "r1", runtime.StatusErrored)
	s := findStep(f.steps(e, "r1", 0), "charge@v1")
	if s == nil || s.Status != runtime.StepFailed || len(s.Attempts) != 4 {
		f.t.Fatalf("step %+v, want failed with 4 attempts", s)
	}
	for i, a := range s.Attempts {
		if a.Number != i+1 || !strings.Contains(a.Error, fmt.Sprintf("attempt %d", i+1)) {
			f.t.Fatalf("attempt %d stored as %+v", i+1, a)
		}
	}
}

func testBudgetAcrossCrash(f *fixture) {
	var mu sync.Mutex
	var seen []int
	dying := &dyingStore{Store: f.store, afterAttempts: 2}
	a := f.engine(config{lease: 300 * time.Millisecond, store: dying}, flaky(f, &seen, &mu, 20*time.Millisecond))
	f.start(a)
	_, err := runtime.Start[int, int](f.ctx, a, "flaky", 0, runtime.WithID("r1"))
	f.must(err)
	f.eventually("the first worker died after two failed attempts", dying.dead.Load)
	b := f.engine(config{lease: 300 * time.Millisecond}, flaky(f, &seen, &mu, 20*time.Millisecond))
	f.start(b)
	f.waitStatus(b, "r1", runtime.StatusErrored)
	mu.Lock()
	defer mu.Unlock()
	wantBudget(f, b, seen)
}

func testBudgetAcrossShutdown(f *fixture) {
	var mu sync.Mutex
	var seen []int
	// The backoff is long enough that the hand-over falls within it on a
	// loaded machine too: the test stops the engine a poll after the
	// second failure.
	a := f.engine(config{parkAfter: -1}, flaky(f, &seen, &mu, 2*time.Second))
	stopA := f.start(a)
	_, err := runtime.Start[int, int](f.ctx, a, "flaky", 0, runtime.WithID("r1"))
	f.must(err)
	f.eventually("two attempts failed", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) == 2
	})
	stopA() // a deploy: the run is handed back during its backoff
	b := f.engine(config{parkAfter: -1}, flaky(f, &seen, &mu, 2*time.Second))
	f.start(b)
	f.waitStatus(b, "r1", runtime.StatusErrored)
	mu.Lock()
	defer mu.Unlock()
	wantBudget(f, b, seen)
}

// testFailureDuringShutdown: an attempt that fails on its own while its
// engine shuts down, within ShutdownGrace, is recorded before the run is
// handed over, so the next engine does not run that attempt again.
func testFailureDuringShutdown(f *fixture) {
	var mu sync.Mutex
	var seen []int
	inSecond, proceed := make(chan struct{}), make(chan struct{})
	register := func(e *runtime.Engine) {
		f.must(runtime.Register(e, "flaky", func(c *runtime.WorkflowContext, _ int) (int, error) {
			return runtime.Step(c, "charge@v1", runtime.StepOptions{Retries: 3, Backoff: 20 * time.Millisecond, MaxBackoff: 20 * time.Millisecond},
				func(sc runtime.StepContext) (int, error) {
					mu.Lock()
					seen = append(seen, sc.Attempt())
					n := len(seen)
					mu.Unlock()
					if n == 2 {
						close(inSecond)
						<-proceed // until the engine is shutting down
					}
					return 0, fmt.Errorf("card declined on attempt %d", sc.Attempt())
				})
		}))
	}
	a := f.engineWith(runtime.Config{LeaseDuration: longLease, ShutdownGrace: longLease}, register)
	stopA := f.start(a)
	_, err := runtime.Start[int, int](f.ctx, a, "flaky", 0, runtime.WithID("r1"))
	f.must(err)
	select {
	case <-inSecond:
	case <-f.ctx.Done():
		f.t.Fatal("the second attempt never began")
	}
	stopped := make(chan struct{})
	go func() { stopA(); close(stopped) }()
	// The shutdown begins at once; the attempt fails well within its grace.
	time.Sleep(100 * time.Millisecond)
	close(proceed)
	<-stopped
	b := f.engine(config{}, register)
	f.start(b)
	f.waitStatus(b, "r1", runtime.StatusErrored)
	mu.Lock()
	defer mu.Unlock()
	wantBudget(f, b, seen)
}

func testCrashCountsAsRecovery(f *fixture) {
	var mu sync.Mutex
	var seen []int
	register := func(e *runtime.Engine) {
		f.must(runtime.Register(e, "hangs", func(c *runtime.WorkflowContext, _ int) (int, error) {
			return runtime.Step(c, "hang@v1", runtime.StepOptions{Retries: 5}, func(sc runtime.StepContext) (int, error) {
				mu.Lock()
				seen = append(seen, sc.Attempt())
				mu.Unlock()
				<-sc.Done()
				return 0, sc.Err()
			})
		}))
	}
	// Each worker dies while the attempt runs; the next claims the run once
	// the lease expires. With MaxRecoveries 1, the third claim finds a
	// poison run.
	for i := range 3 {
		dying := &dyingStore{Store: f.store}
		e, err := runtime.New(runtime.Config{Store: dying, LeaseDuration: 200 * time.Millisecond, PollInterval: 10 * time.Millisecond, MaxRecoveries: 1, ShutdownGrace: -1})
		f.must(err)
		register(e)
		if i == 0 {
			_, err := runtime.Start[int, int](f.ctx, e, "hangs", 0, runtime.WithID("r1"))
			f.must(err)
		}
		stop := f.start(e)
		if i == 2 {
			break
		}
		f.eventually("the step is running", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(seen) == i+1
		})
		dying.dead.Store(true)
		stop()
	}
	e := f.engine(config{}, register)
	info := f.waitStatus(e, "r1", runtime.StatusErrored)
	if !errors.Is(info.Err, runtime.ErrPoisonRun) {
		f.t.Fatalf("run error %v, want ErrPoisonRun", info.Err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(seen, []int{1, 1}) {
		f.t.Fatalf("attempts seen %v, want 1 1: a crash mid-attempt counts against MaxRecoveries, not the retry budget", seen)
	}
}

func testRetryingVisible(f *fixture) {
	e := f.engine(config{}, func(e *runtime.Engine) {
		f.must(runtime.Register(e, "slowretry", func(c *runtime.WorkflowContext, _ int) (int, error) {
			return runtime.Step(c, "charge@v1", runtime.StepOptions{Retries: 5, Backoff: time.Hour, MaxBackoff: time.Hour},
				func(sc runtime.StepContext) (int, error) { return 0, errors.New("gateway timeout") })
		}))
	})
	f.start(e)
	before := time.Now()
	_, err := runtime.Start[int, int](f.ctx, e, "slowretry", 0, runtime.WithID("r1"))
	f.must(err)
	var s *runtime.StepInfo
	f.eventually("the step is listed as retrying", func() bool {
		s = findStep(f.steps(e, "r1", 0), "charge@v1")
		return s != nil && s.Status == runtime.StepRetrying
	})
	if len(s.Attempts) != 1 || s.Attempts[0].Error != "gateway timeout" || s.NextAttemptAt == nil || s.NextAttemptAt.Before(before.Add(29*time.Minute)) {
		f.t.Fatalf("retrying step %+v, want one failed attempt saying why and the next attempt half an hour to an hour on (backoff with jitter)", s)
	}
}

func testRunningVisible(f *fixture) {
	release := make(chan struct{})
	e := f.engine(config{}, func(e *runtime.Engine) {
		f.must(runtime.Register(e, "long", func(c *runtime.WorkflowContext, _ int) (int, error) {
			return runtime.Step(c, "render@v1", runtime.StepOptions{}, func(sc runtime.StepContext) (int, error) {
				<-release
				return 1, nil
			})
		}))
	})
	f.start(e)
	started := time.Now()
	_, err := runtime.Start[int, int](f.ctx, e, "long", 0, runtime.WithID("r1"))
	f.must(err)
	var s *runtime.StepInfo
	f.eventually("the step is listed as running", func() bool {
		s = findStep(f.steps(e, "r1", 0), "render@v1")
		return s != nil && s.Status == runtime.StepRunning
	})
	if n := findStep(f.steps(e, "r1", 1), "render@v1"); n == nil || n.Status != runtime.StepRunning {
		close(release)
		f.t.Fatalf("asked for by its number, the current execution lists the step as %+v, want running", n)
	}
	close(release)
	if s.Attempt != 1 || s.Started.Before(started.Add(-time.Second)) || s.Started.After(time.Now()) {
		f.t.Fatalf("running step %+v, want attempt 1 with its start time", s)
	}
	f.waitStatus(e, "r1", runtime.StatusComplete)
	if s := findStep(f.steps(e, "r1", 0), "render@v1"); s == nil || s.Status != runtime.StepComplete {
		f.t.Fatalf("finished step %+v, want complete", s)
	}
}

func testAttemptTimeout(f *fixture) {
	e := f.engine(config{}, func(e *runtime.Engine) {
		f.must(runtime.Register(e, "timed", func(c *runtime.WorkflowContext, _ int) (int, error) {
			return runtime.Step(c, "call@v1", runtime.StepOptions{Retries: 1, Timeout: 50 * time.Millisecond, Backoff: time.Millisecond},
				func(sc runtime.StepContext) (int, error) {
					if sc.Attempt() == 1 {
						<-sc.Done() // a hung call: the timeout ends it
						return 0, sc.Err()
					}
					return 7, nil
				})
		}))
	})
	f.start(e)
	run, err := runtime.Start[int, int](f.ctx, e, "timed", 0)
	f.must(err)
	got, err := run.Result(f.ctx)
	f.must(err)
	s := findStep(f.steps(e, run.ID(), 0), "call@v1")
	if got != 7 || s == nil || len(s.Attempts) != 2 || !strings.Contains(s.Attempts[0].Error, "deadline") || s.Attempts[1].Error != "" {
		f.t.Fatalf("result %d, step %+v; want 7 after a first attempt that timed out", got, s)
	}
}
