package enginetest

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/stemflow/stem/runtime"
)

var timeScenarios = []scenario{
	{"time/SleepUntil wakes at the time and does not sleep again", testSleepUntil},
	{"time/a long step outlives its lease by heartbeats while another engine polls", testHeartbeatKeepsLease},
	{"time/a sleep wakes at its time, not at the next poll", testSleepWakesOnTime},
	{"time/an event timeout fires at its time, not at the next poll", testEventTimeoutOnTime},
	{"time/Result in an engine that does not work the run returns at its end, not at the next poll", testResultElsewhereOnTime},
	{"time/a delayed start waits queued until its time, then runs without waiting for a poll", testDelayedStart},
}

func testSleepUntil(f *fixture) {
	wake := time.Now().Add(time.Second).Truncate(time.Millisecond)
	var sleeps atomic.Int32
	// early says the run first came well before its wake time, so it must
	// have slept (a loaded machine may start it later than that).
	var early atomic.Bool
	e := f.engine(config{}, func(e *runtime.Engine) {
		f.must(runtime.Register(e, "alarm", func(c *runtime.WorkflowContext, _ int) (time.Time, error) {
			if sleeps.Add(1) == 1 {
				early.Store(time.Now().Before(wake.Add(-200 * time.Millisecond)))
			}
			if err := c.SleepUntil("alarm", wake); err != nil {
				return time.Time{}, err
			}
			return runtime.Step(c, "ring@v1", runtime.StepOptions{}, func(runtime.StepContext) (time.Time, error) { return time.Now(), nil })
		}))
	})
	f.start(e)
	run, err := runtime.Start[int, time.Time](f.ctx, e, "alarm", 0)
	f.must(err)
	rang, err := run.Result(f.ctx)
	f.must(err)
	if rang.Before(wake) {
		f.t.Fatalf("rang at %v, before the wake time %v", rang, wake)
	}
	if n := sleeps.Load(); early.Load() && n != 2 || n > 2 {
		f.t.Fatalf("the workflow ran %d times, want 2 (once to sleep, once after waking)", n)
	}
}

func testHeartbeatKeepsLease(f *fixture) {
	var runs atomic.Int32
	register := func(e *runtime.Engine) {
		f.must(runtime.Register(e, "long", func(c *runtime.WorkflowContext, _ int) (int, error) {
			return runtime.Step(c, "work@v1", runtime.StepOptions{}, func(sc runtime.StepContext) (int, error) {
				runs.Add(1)
				select {
				case <-time.After(4 * time.Second): // over three leases
					return 1, nil
				case <-sc.Done():
					return 0, sc.Err()
				}
			})
		}))
	}
	// A lease long enough that a loaded machine's stall of the heartbeat
	// (every quarter lease) does not lose it: losing it to a stall hands
	// the step over by design, which is not what this scenario tests.
	a := f.engine(config{lease: 1200 * time.Millisecond}, register)
	b := f.engine(config{lease: 1200 * time.Millisecond}, register)
	f.start(a)
	run, err := runtime.Start[int, int](f.ctx, a, "long", 0)
	f.must(err)
	f.eventually("the step started", func() bool { return runs.Load() == 1 })
	f.start(b) // polls every 10ms for over three leases' time
	if _, err := run.Result(f.ctx); err != nil {
		f.t.Fatal(err)
	}
	if n := runs.Load(); n != 1 {
		f.t.Fatalf("the step ran %d times, want once: its lease was kept", n)
	}
}

// hourlyPoll is a poll interval no test outlasts: a run that resumes under
// it was woken by its own wake time.
const hourlyPoll = time.Hour

// resultSoon waits for run's result for at most 30 s, a small fraction of
// hourlyPoll.
func resultSoon[Out any](f *fixture, run *runtime.Run[Out], what string) (Out, error) {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(f.ctx, 30*time.Second)
	defer cancel()
	out, err := run.Result(ctx)
	if ctx.Err() != nil {
		f.t.Fatalf("%s: no result after 30 s: polling hourly, the engine was not woken when the run could go on or ended", what)
	}
	return out, err
}

func testSleepWakesOnTime(f *fixture) {
	e := f.engineWith(runtime.Config{PollInterval: hourlyPoll}, func(e *runtime.Engine) {
		f.must(runtime.Register(e, "nap", func(c *runtime.WorkflowContext, _ int) (int, error) {
			return 1, c.Sleep("nap", 50*time.Millisecond)
		}))
	})
	f.start(e)
	run, err := runtime.Start[int, int](f.ctx, e, "nap", 0)
	f.must(err)
	_, err = resultSoon(f, run, "a 50 ms sleep")
	f.must(err)
}

func testEventTimeoutOnTime(f *fixture) {
	e := f.engineWith(runtime.Config{PollInterval: hourlyPoll}, func(e *runtime.Engine) {
		f.must(runtime.Register(e, "await", func(c *runtime.WorkflowContext, _ int) (string, error) {
			return runtime.WaitForEvent[string](c, "reply", "replies", 50*time.Millisecond)
		}))
		f.must(runtime.RegisterEvent[string](e, "replies"))
	})
	f.start(e)
	run, err := runtime.Start[int, string](f.ctx, e, "await", 0)
	f.must(err)
	if _, err := resultSoon(f, run, "a 50 ms event timeout"); !errors.Is(err, runtime.ErrEventTimeout) {
		f.t.Fatalf("result error %v, want ErrEventTimeout", err)
	}
}

func testResultElsewhereOnTime(f *fixture) {
	release := make(chan struct{})
	var started atomic.Int32
	register := func(e *runtime.Engine) {
		f.must(runtime.Register(e, "gate", func(c *runtime.WorkflowContext, _ int) (int, error) {
			return runtime.Step(c, "pass@v1", runtime.StepOptions{}, func(sc runtime.StepContext) (int, error) {
				started.Add(1)
				select {
				case <-release:
					return 7, nil
				case <-sc.Done():
					return 0, sc.Err()
				}
			})
		}))
	}
	worker := f.engine(config{}, register)
	client := f.engineWith(runtime.Config{PollInterval: hourlyPoll}, register) // never runs
	f.start(worker)
	run, err := runtime.Start[int, int](f.ctx, client, "gate", 0)
	f.must(err)
	f.eventually("the step started", func() bool { return started.Load() == 1 })
	go func() {
		// Most likely the client waits by now; if not, its first read
		// finds the run ended and the case proves less, never wrongly
		// fails.
		time.Sleep(50 * time.Millisecond)
		close(release)
	}()
	if out, err := resultSoon(f, run, "Result in an engine that does not work the run"); err != nil || out != 7 {
		f.t.Fatalf("Result = %d, %v; want 7", out, err)
	}
}

func testDelayedStart(f *fixture) {
	var ranAt atomic.Int64
	e := f.engineWith(runtime.Config{PollInterval: hourlyPoll}, func(e *runtime.Engine) {
		f.must(runtime.Register(e, "later", func(c *runtime.WorkflowContext, _ int) (int, error) {
			return runtime.Step(c, "note@v1", runtime.StepOptions{}, func(runtime.StepContext) (int, error) {
				ranAt.Store(time.Now().UnixNano())
				return 1, nil
			})
		}))
	})
	f.start(e)
	startAt := time.Now().Add(300 * time.Millisecond)
	run, err := runtime.Start[int, int](f.ctx, e, "later", 0, runtime.WithStartAt(startAt))
	f.must(err)
	if info := f.info(e, run.ID()); info.Status != runtime.StatusQueued || info.ReadyAt == nil || info.ReadyAt.Before(startAt.Add(-time.Millisecond)) {
		f.t.Fatalf("a run delayed until %v is %s ready at %v, want queued until then", startAt, info.Status, info.ReadyAt)
	}
	_, err = resultSoon(f, run, "a run delayed by 300 ms")
	f.must(err)
	if at := time.Unix(0, ranAt.Load()); at.Before(startAt) {
		f.t.Fatalf("the delayed run's step ran at %v, before its start time %v", at, startAt)
	}
	for _, opt := range []runtime.StartOption{runtime.WithDelay(-time.Second), runtime.WithStartAt(time.Time{})} {
		_, err := runtime.Start[int, int](f.ctx, e, "later", 0, opt, runtime.WithID("refused"))
		if !errors.Is(err, runtime.ErrInvalidArgument) {
			f.t.Fatalf("a bad start time: %v, want ErrInvalidArgument", err)
		}
	}
	if _, err := e.Get(f.ctx, "refused"); !errors.Is(err, runtime.ErrRunNotFound) {
		f.t.Fatalf("a refused start stored its run: %v", err)
	}
}
