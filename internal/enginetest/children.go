package enginetest

import (
	"errors"
	"strings"
	"sync/atomic"
	"time"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/storage"
)

var childScenarios = []scenario{
	{"child/a restarted parent takes its finished child's outcome", testRestartParentWithFinishedChild},
	{"child/a restarted parent awaits a finished child started without waiting", testRestartParentStartChild},
	{"child/a taken child ID fails the parent's call naming both runs", testChildCollision},
	{"child/terminating a parent terminates its children, not abandoned ones", testTerminateParentTerminatesChildren},
	{"child/a parent that completes, errors or passes its deadline ends its children per their policy", testParentClosePolicies},
}

// family registers parent "fam.parent" (input: how to call the child) and
// child "fam.child", counting the child's runs.
func family(f *fixture, childRuns *atomic.Int32) func(e *runtime.Engine) {
	return func(e *runtime.Engine) {
		f.must(runtime.Register(e, "fam.child", func(c *runtime.WorkflowContext, n int) (int, error) {
			childRuns.Add(1)
			return runtime.Step(c, "double@v1", runtime.StepOptions{}, func(runtime.StepContext) (int, error) { return 2 * n, nil })
		}))
		f.must(runtime.Register(e, "fam.parent", func(c *runtime.WorkflowContext, how string) (int, error) {
			switch how {
			case "start":
				h, err := runtime.StartChild[int](c, "child", "fam.child", 21)
				if err != nil {
					return 0, err
				}
				return h.Result()
			default:
				return runtime.CallChild[int](c, "child", "fam.child", 21)
			}
		}))
	}
}

func testRestartParentWithFinishedChild(f *fixture) {
	var childRuns atomic.Int32
	e := f.engine(config{}, family(f, &childRuns))
	f.start(e)
	run, err := runtime.Start[string, int](f.ctx, e, "fam.parent", "call", runtime.WithID("p1"))
	f.must(err)
	got, err := run.Result(f.ctx)
	f.must(err)
	f.must(run.Restart(f.ctx))
	f.waitStatus(e, "p1", runtime.StatusComplete)
	again, err := run.Result(f.ctx)
	f.must(err)
	if got != 42 || again != 42 || childRuns.Load() != 1 {
		f.t.Fatalf("results %d then %d, child ran %d times; want 42, 42, once", got, again, childRuns.Load())
	}
	if info := f.info(e, "p1"); info.Execution != 2 {
		f.t.Fatalf("parent in execution %d after a restart, want 2", info.Execution)
	}
}

func testRestartParentStartChild(f *fixture) {
	var childRuns atomic.Int32
	e := f.engine(config{}, family(f, &childRuns))
	f.start(e)
	run, err := runtime.Start[string, int](f.ctx, e, "fam.parent", "start", runtime.WithID("p1"))
	f.must(err)
	if got, err := run.Result(f.ctx); err != nil || got != 42 {
		f.t.Fatalf("first execution: %d, %v; want 42", got, err)
	}
	f.must(run.Restart(f.ctx))
	f.waitStatus(e, "p1", runtime.StatusComplete)
	if got, err := run.Result(f.ctx); err != nil || got != 42 || childRuns.Load() != 1 {
		f.t.Fatalf("after restart: %d, %v, child ran %d times; want 42 and the child once", got, err, childRuns.Load())
	}
}

func testChildCollision(f *fixture) {
	var childRuns atomic.Int32
	e := f.engine(config{}, func(e *runtime.Engine) {
		family(f, &childRuns)(e)
		f.must(runtime.Register(e, "fam.other", func(c *runtime.WorkflowContext, n int) (int, error) { return n, nil }))
	})
	// Nobody can take a child's ID by hand: '/' is reserved for children.
	if _, err := runtime.Start[int, int](f.ctx, e, "fam.child", 1, runtime.WithID("p1/child")); !errors.Is(err, runtime.ErrInvalidArgument) {
		f.t.Fatalf("starting run p1/child by hand: %v, want ErrInvalidArgument", err)
	}
	// Children of another workflow under the same call (started by an
	// earlier version of the parents' code) hold the IDs the parents'
	// children would get.
	_, err := f.store.CreateRuns(f.ctx, []storage.NewRun{
		{ID: "p1/child", Workflow: "fam.other", ParentID: "p1"},
		{ID: "p2/child", Workflow: "fam.other", ParentID: "p2"},
	})
	f.must(err)
	f.start(e)
	for _, c := range []struct{ parent, how, holder string }{{"p1", "call", "fam.other"}, {"p2", "start", "fam.other"}} {
		run, err := runtime.Start[string, int](f.ctx, e, "fam.parent", c.how, runtime.WithID(c.parent))
		f.must(err)
		_, err = run.Result(f.ctx)
		if !errors.Is(err, runtime.ErrChildCollision) {
			f.t.Fatalf("parent %s: %v, want ErrChildCollision", c.parent, err)
		}
		for _, s := range []string{c.parent, c.parent + "/child", c.holder} {
			if !strings.Contains(err.Error(), s) {
				f.t.Errorf("parent %s: error %q does not name %q", c.parent, err, s)
			}
		}
		if st := f.info(e, c.parent).Status; st != runtime.StatusErrored {
			f.t.Fatalf("parent %s is %s, want errored (not waiting forever)", c.parent, st)
		}
	}
	// The runs holding the IDs were not touched.
	if info := f.info(e, "p1/child"); info.Workflow != "fam.other" || info.ParentID != "p1" {
		f.t.Fatalf("holder changed: %+v", info)
	}
}

func testTerminateParentTerminatesChildren(f *fixture) {
	waits := func(c *runtime.WorkflowContext, n int) (int, error) {
		return runtime.WaitForEvent[int](c, "go", "fam.go", 0)
	}
	e := f.engine(config{}, func(e *runtime.Engine) {
		f.must(runtime.Register(e, "fam.grandchild", waits))
		f.must(runtime.Register(e, "fam.kid", func(c *runtime.WorkflowContext, n int) (int, error) {
			if _, err := runtime.StartChild[int](c, "grand", "fam.grandchild", n); err != nil {
				return 0, err
			}
			return waits(c, n)
		}))
		f.must(runtime.Register(e, "fam.parent", func(c *runtime.WorkflowContext, n int) (int, error) {
			if _, err := runtime.StartChild[int](c, "stays", "fam.grandchild", n, runtime.Abandon()); err != nil {
				return 0, err
			}
			return runtime.CallChild[int](c, "kid", "fam.kid", n)
		}))
	})
	f.start(e)
	run, err := runtime.Start[int, int](f.ctx, e, "fam.parent", 1, runtime.WithID("p1"))
	f.must(err)
	for _, id := range []string{"p1", "p1/kid", "p1/kid/grand", "p1/stays"} {
		f.waitStatus(e, id, runtime.StatusWaiting)
	}
	f.must(run.Terminate(f.ctx, "customer cancelled"))
	for _, id := range []string{"p1", "p1/kid", "p1/kid/grand"} {
		info := f.waitStatus(e, id, runtime.StatusTerminated)
		if !errors.Is(info.Err, runtime.ErrTerminated) || !strings.Contains(info.Err.Error(), "customer cancelled") || info.EndedAt == nil {
			f.t.Errorf("%s: err %v, ended %v; want ErrTerminated saying why, and an end time", id, info.Err, info.EndedAt)
		}
	}
	if st := f.info(e, "p1/stays").Status; st != runtime.StatusWaiting {
		f.t.Fatalf("abandoned child is %s, want still waiting", st)
	}
}

// testParentClosePolicies: a parent that ends without awaiting its
// children (it completes, it errors, it passes its deadline) terminates
// the unfinished ones started with the default policy, and theirs, in the
// same change; a child started with ParentClose(ParentCloseAbandon) runs
// on to its own end. Each child records its policy.
func testParentClosePolicies(f *fixture) {
	waits := func(c *runtime.WorkflowContext, n int) (int, error) {
		return runtime.WaitForEvent[int](c, "go", "fam.go", 0)
	}
	e := f.engine(config{}, func(e *runtime.Engine) {
		f.must(runtime.Register(e, "fam.waits", waits))
		f.must(runtime.Register(e, "fam.kid", func(c *runtime.WorkflowContext, n int) (int, error) {
			if _, err := runtime.StartChild[int](c, "grand", "fam.waits", n); err != nil {
				return 0, err
			}
			return waits(c, n)
		}))
		f.must(runtime.Register(e, "fam.leaver", func(c *runtime.WorkflowContext, how string) (int, error) {
			if _, err := runtime.StartChild[int](c, "kid", "fam.kid", 1, runtime.ParentClose(runtime.ParentCloseTerminate)); err != nil {
				return 0, err
			}
			if _, err := runtime.StartChild[int](c, "stays", "fam.waits", 1, runtime.ParentClose(runtime.ParentCloseAbandon)); err != nil {
				return 0, err
			}
			// Wait until both children wait, so they are unfinished when
			// the parent ends.
			if _, err := runtime.WaitForEvent[int](c, "ready", "fam.ready", 0); err != nil {
				return 0, err
			}
			if how == "error" {
				return 0, errors.New("gave up")
			}
			return 7, nil
		}))
	})
	f.start(e)
	for _, how := range []string{"complete", "error", "deadline"} {
		opts := []runtime.StartOption{runtime.WithID(how)}
		if how == "deadline" {
			// Never told it is ready, the parent ends at its deadline,
			// long after its children wait.
			opts = append(opts, runtime.WithTimeout(5*time.Second))
		}
		_, err := runtime.Start[string, int](f.ctx, e, "fam.leaver", how, opts...)
		f.must(err)
		for _, id := range []string{how + "/kid", how + "/kid/grand", how + "/stays"} {
			f.waitStatus(e, id, runtime.StatusWaiting)
		}
		if got := f.info(e, how+"/kid").ParentClose; got != runtime.ParentCloseTerminate {
			f.t.Errorf("%s/kid records parent-close policy %q, want terminate", how, got)
		}
		if got := f.info(e, how+"/stays").ParentClose; got != runtime.ParentCloseAbandon {
			f.t.Errorf("%s/stays records parent-close policy %q, want abandon", how, got)
		}
		if how != "deadline" {
			f.must(e.SendEvent(f.ctx, how, "fam.ready", 1))
		}
		want := map[string]runtime.RunStatus{"complete": runtime.StatusComplete, "error": runtime.StatusErrored, "deadline": runtime.StatusErrored}[how]
		f.waitStatus(e, how, want)
		for _, id := range []string{how + "/kid", how + "/kid/grand"} {
			info := f.waitStatus(e, id, runtime.StatusTerminated)
			if !errors.Is(info.Err, runtime.ErrTerminated) || !strings.Contains(info.Err.Error(), "parent "+how) || info.EndedAt == nil {
				f.t.Errorf("%s: err %v, ended %v; want ErrTerminated naming the parent that ended", id, info.Err, info.EndedAt)
			}
		}
		if st := f.info(e, how+"/stays").Status; st != runtime.StatusWaiting {
			f.t.Fatalf("the abandoned child of the parent that ended by %s is %s, want still waiting", how, st)
		}
		f.must(e.SendEvent(f.ctx, how+"/stays", "fam.go", 3))
		f.waitStatus(e, how+"/stays", runtime.StatusComplete)
	}
}
