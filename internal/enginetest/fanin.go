package enginetest

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stemflow/stem/runtime"
)

var faninScenarios = []scenario{
	{"fanin/AwaitAll returns the values in order and the first error in argument order", testAwaitAll},
	{"fanin/AwaitAll refuses a future of another execution", testAwaitAllForeign},
	{"fanin/SelectFuture returns the winner's value, and the same winner after a crash", testSelectFutureCrash},
	{"fanin/a timer read back on a replay is not ready before its time, and a failed child fails All", testReplayedTimerAndChild},
}

func testAwaitAll(f *fixture) {
	e := f.engine(config{}, func(e *runtime.Engine) {
		f.must(runtime.Register(e, "gather", func(c *runtime.WorkflowContext, fail bool) (string, error) {
			var fs []*runtime.Future[int]
			for i := range 4 {
				fs = append(fs, runtime.StepAsync(c, fmt.Sprintf("part%d@v1", i), runtime.StepOptions{}, func(runtime.StepContext) (int, error) {
					if fail && i >= 1 && i <= 2 {
						// The later failure ends first: the error returned
						// is still the first in argument order.
						time.Sleep(time.Duration(2-i) * 50 * time.Millisecond)
						return 0, runtime.Permanent(fmt.Errorf("part %d failed", i))
					}
					return (i + 1) * 10, nil
				}))
			}
			vals, err := runtime.AwaitAll(fs)
			_, again := fs[3].Await()
			return fmt.Sprintf("%v|%v|again=%v", vals, err, errors.Is(again, runtime.ErrInvalidArgument)), nil
		}))
	})
	f.start(e)
	ok, err := runtime.Start[bool, string](f.ctx, e, "gather", false)
	f.must(err)
	out, err := ok.Result(f.ctx)
	f.must(err)
	if out != "[10 20 30 40]|<nil>|again=true" {
		f.t.Fatalf("result %q: want the four values in order, no error, and every future awaited once", out)
	}
	bad, err := runtime.Start[bool, string](f.ctx, e, "gather", true)
	f.must(err)
	out, err = bad.Result(f.ctx)
	f.must(err)
	if !strings.HasPrefix(out, "[10 0 0 40]|") || !strings.Contains(out, "part 1 failed") || strings.Contains(out, "part 2") || !strings.HasSuffix(out, "again=true") {
		f.t.Fatalf("result %q: want the good values, zero for the failed, part 1's error and every future awaited", out)
	}
}

func testAwaitAllForeign(f *fixture) {
	var (
		mu    sync.Mutex
		stash *runtime.Future[int]
	)
	e := f.engine(config{}, func(e *runtime.Engine) {
		f.must(runtime.Register(e, "mixer", func(c *runtime.WorkflowContext, _ int) (string, error) {
			own := runtime.StepAsync(c, "own@v1", runtime.StepOptions{}, func(runtime.StepContext) (int, error) { return 1, nil })
			if _, err := own.Await(); err != nil {
				return "", err
			}
			mu.Lock()
			old := stash
			stash = own
			mu.Unlock()
			// The first execution of the workflow function parks here; the
			// next goes on with the first one's future kept.
			if err := c.Sleep("nap", 10*time.Millisecond); err != nil {
				return "", err
			}
			if old == nil {
				return "", errors.New("the workflow function did not run again after its sleep")
			}
			now := runtime.StepAsync(c, "now@v1", runtime.StepOptions{}, func(runtime.StepContext) (int, error) { return 2, nil })
			_, err := runtime.AwaitAll([]*runtime.Future[int]{now, old})
			return fmt.Sprint(err), nil
		}))
	})
	f.start(e)
	run, err := runtime.Start[int, string](f.ctx, e, "mixer", 0)
	f.must(err)
	out, err := run.Result(f.ctx)
	f.must(err)
	if !strings.Contains(out, runtime.ErrInvalidArgument.Error()) || !strings.Contains(out, "another run or execution") {
		f.t.Fatalf("AwaitAll with a future of another execution: %q, want ErrInvalidArgument saying so", out)
	}
}

func testSelectFutureCrash(f *fixture) {
	release := make(chan struct{})
	hold := make(chan struct{})
	defer close(hold)
	var second atomic.Bool
	var calls atomic.Int32
	register := func(e *runtime.Engine) {
		f.must(runtime.Register(e, "race", func(c *runtime.WorkflowContext, _ int) (string, error) {
			calls.Add(1)
			slow := runtime.StepAsync(c, "slow@v1", runtime.StepOptions{}, func(sc runtime.StepContext) (int, error) {
				<-release
				return 1, nil
			})
			fast := runtime.StepAsync(c, "fast@v1", runtime.StepOptions{}, func(runtime.StepContext) (int, error) { return 2, nil })
			i, v, err := runtime.SelectFuture(c, "first", []*runtime.Future[int]{slow, fast})
			if err != nil {
				return "", err
			}
			// The first worker dies in this step, once slow has its
			// checkpoint too: without the select's, a replay would pick
			// slow, the first case ready.
			if _, err := runtime.Step(c, "after@v1", runtime.StepOptions{}, func(sc runtime.StepContext) (int, error) {
				if !second.Load() {
					select {
					case <-hold:
					case <-sc.Done():
					}
					return 0, errors.New("the worker died")
				}
				return 0, nil
			}); err != nil {
				return "", err
			}
			return fmt.Sprintf("%d:%d", i, v), nil
		}))
	}
	dying := &dyingStore{Store: f.store}
	a := f.engine(config{lease: 300 * time.Millisecond, store: dying}, register)
	f.start(a)
	run, err := runtime.Start[int, string](f.ctx, a, "race", 0, runtime.WithID("r1"))
	f.must(err)
	f.eventually("the select is checkpointed", func() bool {
		s := findStep(f.steps(a, "r1", 0), "first#0")
		return s != nil && s.Status == runtime.StepComplete
	})
	close(release)
	f.eventually("the losing step has its checkpoint too", func() bool {
		s := findStep(f.steps(a, "r1", 0), "slow@v1")
		return s != nil && s.Status == runtime.StepComplete
	})
	dying.dead.Store(true)
	second.Store(true)
	b := f.engine(config{lease: 300 * time.Millisecond}, register)
	f.start(b)
	out, err := run.Result(f.ctx)
	f.must(err)
	if out != "1:2" {
		f.t.Fatalf("result %q, want 1:2: the winner the select checkpointed, with its value", out)
	}
	if n := calls.Load(); n < 2 {
		f.t.Fatalf("the workflow ran %d times, want a replay after the crash", n)
	}
	if s := findStep(f.steps(b, "r1", 0), "first#0"); s == nil || s.Kind != runtime.KindSelect || string(s.Output) != "1" {
		f.t.Fatalf("select step %+v, want a select checkpoint of case 1", s)
	}
}

func testReplayedTimerAndChild(f *fixture) {
	e := f.engine(config{}, func(e *runtime.Engine) {
		f.must(runtime.Register(e, "fail", func(c *runtime.WorkflowContext, _ int) (int, error) {
			return 0, errors.New("child gave up")
		}))
		f.must(runtime.Register(e, "timers", func(c *runtime.WorkflowContext, _ int) (string, error) {
			// Both timers are created, then the run parks: the select runs
			// on a replay, which reads their wake times back.
			timers := []*runtime.Future[struct{}]{c.Timer("slow", time.Hour), c.Timer("quick", 50*time.Millisecond)}
			first, _, err := runtime.SelectFuture(c, "first-due", timers)
			if err != nil {
				return "", err
			}
			child := runtime.CallChildAsync[int](c, "child", "fail", 0)
			if err := c.Sleep("nap", 10*time.Millisecond); err != nil {
				return "", err
			}
			return fmt.Sprintf("timer %d|all: %v", first, runtime.All(c, child)), nil
		}))
	})
	f.start(e)
	run, err := runtime.Start[int, string](f.ctx, e, "timers", 0)
	f.must(err)
	out, err := run.Result(f.ctx)
	f.must(err)
	if !strings.HasPrefix(out, "timer 1|all: ") || !strings.Contains(out, "child gave up") {
		f.t.Fatalf("result %q: want the quick timer first and All returning the child's error", out)
	}
}
