package enginetest

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stemflow/stem/runtime"
)

var historyScenarios = []scenario{
	{"history/a restart keeps the previous execution readable", testRestartKeepsHistory},
	{"history/restart from a failed step reruns it and what follows only", testRestartFromStep},
	{"history/autoversion completes, suspends and fails at iterations 0, 1 and 11", testAutoversion},
}

func testRestartKeepsHistory(f *fixture) {
	var runs atomic.Int32
	e := f.engine(config{}, func(e *runtime.Engine) {
		f.must(runtime.Register(e, "twice", func(c *runtime.WorkflowContext, _ int) (int, error) {
			return runtime.Step(c, "count@v1", runtime.StepOptions{}, func(runtime.StepContext) (int, error) {
				return int(runs.Add(1)), nil
			})
		}))
	})
	f.start(e)
	run, err := runtime.Start[int, int](f.ctx, e, "twice", 0, runtime.WithID("r1"))
	f.must(err)
	_, err = run.Result(f.ctx)
	f.must(err)
	f.must(run.Restart(f.ctx))
	f.eventually("the second execution completes", func() bool {
		info := f.info(e, "r1")
		return info.Execution == 2 && info.Status == runtime.StatusComplete
	})
	xs, err := e.ListExecutions(f.ctx, "r1")
	f.must(err)
	if len(xs) != 2 || xs[0].Number != 1 || xs[0].Status != runtime.StatusComplete || xs[0].EndedAt == nil ||
		xs[1].Number != 2 || xs[1].Status != runtime.StatusComplete || xs[1].StartedAt.Before(*xs[0].EndedAt) {
		f.t.Fatalf("executions %+v, want 1 then 2, both complete, in order", xs)
	}
	// The step ran again in the second execution, so its output is a
	// later count than the first's. (A step runs at least once per
	// execution: a loaded machine may let a lease lapse and run it twice,
	// so the counts need not be 1 and 2.)
	first, second := findStep(f.steps(e, "r1", 1), "count@v1"), findStep(f.steps(e, "r1", 2), "count@v1")
	if first == nil || second == nil || first.Execution != 1 || second.Execution != 2 {
		f.t.Fatalf("steps of executions 1 and 2: %+v and %+v, want count@v1 in each", first, second)
	}
	var n1, n2 int
	if _, err := fmt.Sscan(string(first.Output), &n1); err != nil {
		f.t.Fatalf("execution 1's output %q: %v", first.Output, err)
	}
	if _, err := fmt.Sscan(string(second.Output), &n2); err != nil {
		f.t.Fatalf("execution 2's output %q: %v", second.Output, err)
	}
	if n1 < 1 || n2 <= n1 {
		f.t.Fatalf("execution 1 counted %d and execution 2 %d: the second execution must run the step again", n1, n2)
	}
	if _, err := e.ListSteps(f.ctx, "r1", 3); !errors.Is(err, runtime.ErrInvalidArgument) {
		f.t.Fatalf("steps of an execution the run never had: %v, want ErrInvalidArgument", err)
	}
}

func testRestartFromStep(f *fixture) {
	var mu sync.Mutex
	ran := map[string]int{}
	var broken atomic.Bool
	broken.Store(true)
	step := func(c *runtime.WorkflowContext, key string, v int) (int, error) {
		return runtime.Step(c, key, runtime.StepOptions{}, func(runtime.StepContext) (int, error) {
			mu.Lock()
			ran[key]++
			mu.Unlock()
			if key == "ship@v1" && broken.Load() {
				return 0, runtime.Permanent(errors.New("carrier rejected the label"))
			}
			return v, nil
		})
	}
	e := f.engine(config{}, func(e *runtime.Engine) {
		f.must(runtime.Register(e, "order", func(c *runtime.WorkflowContext, _ int) (int, error) {
			total := 0
			for i, key := range []string{"reserve@v1", "charge@v1", "ship@v1", "notify@v1"} {
				v, err := step(c, key, i+1)
				if err != nil {
					return 0, err
				}
				total += v
			}
			return total, nil
		}))
	})
	f.start(e)
	run, err := runtime.Start[int, int](f.ctx, e, "order", 0, runtime.WithID("r1"))
	f.must(err)
	if _, err := run.Result(f.ctx); err == nil {
		f.t.Fatal("the first execution did not fail")
	}
	broken.Store(false)
	if err := e.Restart(f.ctx, "r1", runtime.FromStep("notify@v1")); !errors.Is(err, runtime.ErrInvalidArgument) {
		f.t.Fatalf("restart from a step with no checkpoint: %v, want ErrInvalidArgument", err)
	}
	f.must(run.Restart(f.ctx, runtime.FromStep("ship@v1")))
	f.eventually("the second execution completes", func() bool {
		info := f.info(e, "r1")
		return info.Execution == 2 && info.Status == runtime.StatusComplete
	})
	if got, err := run.Result(f.ctx); err != nil || got != 10 {
		f.t.Fatalf("result %d, %v; want 10", got, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := map[string]int{"reserve@v1": 1, "charge@v1": 1, "ship@v1": 2, "notify@v1": 1}; fmt.Sprint(ran) != fmt.Sprint(want) {
		f.t.Fatalf("steps ran %v, want %v: the steps before the fork keep their results", ran, want)
	}
	steps := f.steps(e, "r1", 0)
	if len(steps) != 4 || steps[0].ForkedFrom != 1 || steps[1].ForkedFrom != 1 || steps[2].ForkedFrom != 0 {
		f.t.Fatalf("steps of the fork %+v, want the first two carried over from execution 1", steps)
	}
	xs, err := e.ListExecutions(f.ctx, "r1")
	f.must(err)
	if len(xs) != 2 || xs[0].Status != runtime.StatusErrored || xs[0].Err == nil || xs[1].ForkedFrom != 1 || xs[1].FromStep != "ship@v1" {
		f.t.Fatalf("executions %+v, want an errored first and a fork of it from ship@v1", xs)
	}
}

func testAutoversion(f *fixture) {
	for _, at := range []int{0, 1, 11} {
		for _, mode := range []string{"complete", "suspend", "fail"} {
			id := fmt.Sprintf("%s-%d", mode, at)
			var mu sync.Mutex
			ran := map[int]int{}
			counted := &dyingStore{Store: f.store}
			e := f.engine(config{store: counted}, func(e *runtime.Engine) {
				f.must(runtime.Register(e, "pack.all", func(c *runtime.WorkflowContext, n int) (int, error) {
					total := 0
					for i := range n {
						v, err := runtime.Step(c, "pack@v1", runtime.StepOptions{Autoversion: true}, func(sc runtime.StepContext) (int, error) {
							mu.Lock()
							ran[sc.Iteration()]++
							mu.Unlock()
							if sc.Iteration() != i {
								return 0, fmt.Errorf("iteration %d at loop index %d", sc.Iteration(), i)
							}
							if mode == "fail" && i == at {
								return 0, runtime.Permanent(errors.New("box too small"))
							}
							return i, nil
						})
						if err != nil {
							return 0, err
						}
						total += v
						if mode == "suspend" && i == at {
							if err := c.Sleep("breather", 20*time.Millisecond); err != nil {
								return 0, err
							}
						}
					}
					return total, nil
				}))
			})
			stop := f.start(e)
			run, err := runtime.Start[int, int](f.ctx, e, "pack.all", 12, runtime.WithID(id))
			f.must(err)
			got, err := run.Result(f.ctx)
			stop()
			last := 11
			if mode == "fail" {
				last = at
				if err == nil || f.info(e, id).Status != runtime.StatusErrored {
					f.t.Fatalf("%s: result err %v, want the step's failure and an errored run", id, err)
				}
			} else if err != nil || got != 66 {
				f.t.Fatalf("%s: total %d, %v; want 66", id, got, err)
			}
			mu.Lock()
			for i := 0; i <= last; i++ {
				if ran[i] != 1 {
					f.t.Errorf("%s: iteration %d ran %d times, want 1", id, i, ran[i])
				}
			}
			if len(ran) != last+1 {
				f.t.Errorf("%s: iterations run %v", id, ran)
			}
			mu.Unlock()
			if n := counted.suspends.Load(); mode == "suspend" && n != 1 {
				f.t.Errorf("%s: %d suspensions, want 1", id, n)
			}
			var keys []string
			for _, s := range f.steps(e, id, 0) {
				if s.Kind == runtime.KindStep {
					keys = append(keys, s.Key)
				}
			}
			for i, k := range keys {
				if k != runtime.IterationKey("pack@v1", i) {
					f.t.Fatalf("%s: steps listed %v, want execution order (#10 after #9)", id, keys)
				}
			}
		}
	}
}
