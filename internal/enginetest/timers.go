package enginetest

import (
	"sync/atomic"
	"time"

	"github.com/stemflow/stem/runtime"
)

var timeScenarios = []scenario{
	{"time/SleepUntil wakes at the time and does not sleep again", testSleepUntil},
	{"time/a long step outlives its lease by heartbeats while another engine polls", testHeartbeatKeepsLease},
}

func testSleepUntil(f *fixture) {
	wake := time.Now().Add(300 * time.Millisecond).Truncate(time.Millisecond)
	var sleeps atomic.Int32
	e := f.engine(config{}, func(e *runtime.Engine) {
		f.must(runtime.Register(e, "alarm", func(c *runtime.WorkflowContext, _ int) (time.Time, error) {
			sleeps.Add(1)
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
	if n := sleeps.Load(); n != 2 {
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
				case <-time.After(1200 * time.Millisecond):
					return 1, nil
				case <-sc.Done():
					return 0, sc.Err()
				}
			})
		}))
	}
	a := f.engine(config{lease: 300 * time.Millisecond}, register)
	b := f.engine(config{lease: 300 * time.Millisecond}, register)
	f.start(a)
	run, err := runtime.Start[int, int](f.ctx, a, "long", 0)
	f.must(err)
	f.eventually("the step started", func() bool { return runs.Load() == 1 })
	f.start(b) // polls every 10ms for four leases' time
	if _, err := run.Result(f.ctx); err != nil {
		f.t.Fatal(err)
	}
	if n := runs.Load(); n != 1 {
		f.t.Fatalf("the step ran %d times, want once: its lease was kept", n)
	}
}
