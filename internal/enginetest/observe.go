package enginetest

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stemflow/stem/runtime"
)

// What observers rely on, end to end: the headers a run's start gave it
// (its trace context) reach every execution of the run, whichever engine
// runs it and however it got there, and a child's come from its parent's
// execution; running engines are listed as workers, and a dead one drops
// out.
var observeScenarios = []scenario{
	{"observe/a run's headers reach each execution, across a crash and hand-over, continue-as-new, a pause and a restart; its child's come from the parent's execution", testHeadersEverywhere},
	{"observe/running engines are listed as workers until they stop; a dead one's record expires", testWorkersListed},
}

type traceKey struct{}

type execKey struct{}

// seenExecution is what an execution hook saw of one execution.
type seenExecution struct {
	run        string
	headers    map[string]string
	recoveries int
	execution  int
	outcome    runtime.Outcome
}

// headerHooks stamp each start with the trace in its context, or, for a
// child, the execution starting it; and record every execution.
func headerHooks(mu *sync.Mutex, seen *[]seenExecution) runtime.Hooks {
	return runtime.Hooks{
		Start: func(ctx context.Context, s *runtime.HookStart, next func(context.Context) error) error {
			trace, _ := ctx.Value(traceKey{}).(string)
			if parent, ok := ctx.Value(execKey{}).(string); ok {
				trace = "child of " + parent
			}
			for i := range s.Runs {
				s.Runs[i].Headers = map[string]string{"trace": trace}
			}
			return next(ctx)
		},
		Execution: func(ctx context.Context, x *runtime.HookExecution, next func(context.Context)) {
			next(context.WithValue(ctx, execKey{}, x.RunID))
			mu.Lock()
			defer mu.Unlock()
			*seen = append(*seen, seenExecution{x.RunID, maps.Clone(x.Headers), x.Recoveries, x.Execution, x.Outcome})
		},
	}
}

func testHeadersEverywhere(f *fixture) {
	var mu sync.Mutex
	var seen []seenExecution
	hooks := []runtime.Hooks{headerHooks(&mu, &seen)}
	var crashed atomic.Bool
	gate, atGate := make(chan struct{}), make(chan struct{}, 4)
	register := func(dying *dyingStore) func(e *runtime.Engine) {
		return func(e *runtime.Engine) {
			f.must(runtime.Register(e, "obs.kid", func(c *runtime.WorkflowContext, in int) (int, error) { return in * 2, nil }))
			f.must(runtime.Register(e, "obs.parent", func(c *runtime.WorkflowContext, in int) (int, error) {
				if _, err := runtime.Step(c, "one@v1", runtime.StepOptions{}, func(runtime.StepContext) (int, error) { return in, nil }); err != nil {
					return 0, err
				}
				if _, err := runtime.Step(c, "two@v1", runtime.StepOptions{}, func(runtime.StepContext) (int, error) {
					if dying != nil && crashed.CompareAndSwap(false, true) {
						dying.dead.Store(true) // the process dies before the checkpoint
					}
					return in, nil
				}); err != nil {
					return 0, err
				}
				kid, err := runtime.CallChild[int](c, "kid", "obs.kid", in)
				if err != nil {
					return 0, err
				}
				if in == 1 {
					return 0, runtime.ContinueAsNew(c, 2)
				}
				// Held here, so the run can be paused while it runs.
				if _, err := runtime.Step(c, "gate@v1", runtime.StepOptions{}, func(runtime.StepContext) (int, error) {
					atGate <- struct{}{}
					<-gate
					return 0, nil
				}); err != nil {
					return 0, err
				}
				return kid, nil
			}))
		}
	}
	dying := &dyingStore{Store: f.store}
	a := f.engine(config{lease: 300 * time.Millisecond, store: dying, hooks: hooks}, register(dying))
	f.start(a)
	_, err := runtime.Start[int, int](context.WithValue(f.ctx, traceKey{}, "trace-1"), a, "obs.parent", 1, runtime.WithID("obs"))
	f.must(err)
	f.eventually("the first worker dies in step two", dying.dead.Load)
	b := f.engine(config{lease: 300 * time.Millisecond, hooks: hooks}, register(nil))
	f.start(b)
	select {
	case <-atGate: // the run, continued as new, is at its gate
	case <-f.ctx.Done():
		f.t.Fatal("the run never reached its gate")
	}
	f.must(b.Pause(f.ctx, "obs"))
	gate <- struct{}{}
	f.waitStatus(b, "obs", runtime.StatusPaused)
	f.must(b.Resume(f.ctx, "obs"))
	f.waitStatus(b, "obs", runtime.StatusComplete)
	f.must(b.Restart(f.ctx, "obs"))
	close(gate)
	f.eventually("the restarted run completes", func() bool {
		info := f.info(b, "obs")
		return info.Execution == 3 && info.Status == runtime.StatusComplete
	})
	// The execution hook records an outcome once the store's write is
	// done, so the run may read complete a moment before it is recorded;
	// on a loaded machine the restarted execution may also have been
	// stopped once (its short lease lapsed) before it completed.
	f.eventually("the restarted execution's completion is recorded", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return slices.ContainsFunc(seen, func(x seenExecution) bool {
			return x.run == "obs" && x.execution == 3 && x.outcome == runtime.OutcomeComplete
		})
	})

	mu.Lock()
	defer mu.Unlock()
	var outcomes []string
	recovered := false
	for _, x := range seen {
		want := map[string]string{"trace": "trace-1"}
		if x.run != "obs" {
			want = map[string]string{"trace": "child of obs"}
		} else {
			outcomes = append(outcomes, fmt.Sprintf("%d %s", x.execution, x.outcome))
			recovered = recovered || x.recoveries == 1
		}
		if !maps.Equal(x.headers, want) {
			f.t.Errorf("execution %d of %s (recoveries %d, %s) had headers %v, want %v", x.execution, x.run, x.recoveries, x.outcome, x.headers, want)
		}
	}
	if !recovered {
		f.t.Errorf("no execution of obs was a recovery: %+v", seen)
	}
	// Execution 1 continued on the engine that recovered it, then execution
	// 2 paused and completed, and the restart's execution 3 completed; the
	// child waits parked the run between.
	for _, want := range []string{"1 continued", "2 paused", "2 complete", "3 complete"} {
		if !slices.Contains(outcomes, want) {
			f.t.Errorf("the executions of obs ended %v, want among them %q", outcomes, want)
		}
	}
}

func testWorkersListed(f *fixture) {
	noop := func(e *runtime.Engine) {
		f.must(runtime.Register(e, "obs.noop", func(c *runtime.WorkflowContext, in int) (int, error) { return in, nil }))
	}
	a, b := f.engine(config{}, noop), f.engine(config{}, noop)
	stopA := f.start(a)
	f.start(b)
	ids := func() []string {
		ws, err := a.Workers(f.ctx)
		f.must(err)
		var out []string
		for _, w := range ws {
			out = append(out, w.ID)
		}
		return out
	}
	both := []string{a.WorkerID(), b.WorkerID()}
	slices.Sort(both)
	f.eventually("both engines are listed", func() bool { return slices.Equal(ids(), both) })
	stopA()
	if got := ids(); !slices.Equal(got, []string{b.WorkerID()}) {
		f.t.Fatalf("after one engine stopped the workers are %v, want only %s", got, b.WorkerID())
	}
	dying := &dyingStore{Store: f.store}
	c := f.engine(config{store: dying, workerTTL: time.Second}, noop)
	stopC := f.start(c)
	f.eventually("the third engine is listed", func() bool { return len(ids()) == 2 })
	dying.dead.Store(true)
	stopC() // it cannot remove its record: it is dead
	if got := ids(); !slices.Contains(got, c.WorkerID()) {
		f.t.Fatalf("a dead engine's record vanished before it expired: %v", got)
	}
	f.eventually("the dead engine's record expires", func() bool { return slices.Equal(ids(), []string{b.WorkerID()}) })
}
