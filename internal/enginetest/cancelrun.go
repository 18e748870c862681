package enginetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/storage"
)

// A run's cancellation, end to end: the workflow sees it, cleans up on
// the detached context, and ends itself; across a crash, a pause, a
// child's parent-close policy, a select on a running step, a build that
// was not running when it was asked for, and hostile input.
var runCancelScenarios = []scenario{
	{"runcancel/a sleeping saga is cancelled: its compensation runs on the detached context and the run ends with ErrCanceled", testCancelSaga},
	{"runcancel/a running step's context is cancelled with the cause and it is not retried", testCancelRunningStep},
	{"runcancel/a worker that dies after each write of the cancellation hands it over: the cleanup runs once", testRunCancelAcrossCrash},
	{"runcancel/a paused run sees its cancellation when resumed", testRunCancelPaused},
	{"runcancel/a workflow that handles the cancellation completes", testCancelHandled},
	{"runcancel/a select on a running step and an event returns the cancellation at once", testRunCancelSelect},
	{"runcancel/children meet their parent-close policy: cancel, terminate, abandon", testCancelChildPolicies},
	{"runcancel/a parent cancelled while it awaits a child cancels the child by its policy", testCancelParentAwaiting},
	{"runcancel/a parent past its deadline while it awaits a child ends the child by its policy", testCancelDeadlineAwaiting},
	{"runcancel/a run cancelled while no worker runs is cancelled by the next build", testCancelNextBuild},
	{"runcancel/a loop of sleeps is cut at its iteration, and the workflow's own error wraps the cancellation", testCancelLoopOwnError},
	{"runcancel/hostile requests are refused with nothing changed; the first reason wins", testCancelHostile},
}

// registerCancelSaga registers name: a saga that reserves, naps, and
// charges, and releases what it reserved when cancelled, on the detached
// context.
func registerCancelSaga(f *fixture, e *runtime.Engine, name string, seen *sideEffects, nap time.Duration) {
	f.must(runtime.Register(e, name, func(c *runtime.WorkflowContext, in int) (out string, err error) {
		id := c.RunID()
		effect := func(step string) func(runtime.StepContext) error {
			return func(runtime.StepContext) error { seen.add(id, step); return nil }
		}
		if err := runtime.Do(c, "reserve@v1", runtime.StepOptions{}, effect("reserve")); err != nil {
			return "", err
		}
		defer func() {
			if errors.Is(err, runtime.ErrCanceled) {
				if rerr := runtime.Do(c.Detached(), "release@v1", runtime.StepOptions{}, effect("release")); rerr != nil {
					err = rerr
				}
			}
		}()
		if err := c.Sleep("cool-off", nap); err != nil {
			return "", err
		}
		if err := runtime.Do(c, "charge@v1", runtime.StepOptions{}, effect("charge")); err != nil {
			return "", err
		}
		return "charged", nil
	}))
}

// wantCanceled checks that run id ended errored with the cancellation,
// reason in its text, and that its saga released and never charged.
func wantCanceled(f *fixture, e *runtime.Engine, id, reason string, seen *sideEffects) {
	f.t.Helper()
	info := f.waitStatus(e, id, runtime.StatusErrored)
	if !errors.Is(info.Err, runtime.ErrCanceled) || !strings.Contains(info.Err.Error(), reason) {
		f.t.Fatalf("run %s ended with %v, want an error matching ErrCanceled that gives the reason %q", id, info.Err, reason)
	}
	if !info.CancelRequested || info.CancelReason != reason {
		f.t.Fatalf("run %s: CancelRequested %v, CancelReason %q; want the request and %q", id, info.CancelRequested, info.CancelReason, reason)
	}
	if got := seen.of(id); got["reserve"] != 1 || got["release"] != 1 || got["charge"] != 0 {
		f.t.Fatalf("run %s's side effects %v, want reserve and release once, no charge", id, got)
	}
	steps := f.steps(e, id, 1)
	if s := findStep(steps, "#cancel"); s == nil || s.Kind != runtime.KindCancel {
		f.t.Fatalf("run %s's history has no record of where its cancellation took effect: %+v", id, steps)
	}
}

func testCancelSaga(f *fixture) {
	var seen sideEffects
	e := f.engine(config{}, func(e *runtime.Engine) { registerCancelSaga(f, e, "saga", &seen, time.Hour) })
	f.start(e)
	_, err := runtime.Start[int, string](f.ctx, e, "saga", 0, runtime.WithID("saga-1"))
	f.must(err)
	f.waitStatus(e, "saga-1", runtime.StatusWaiting)
	f.must(e.Cancel(f.ctx, "saga-1", "the customer changed their mind"))
	wantCanceled(f, e, "saga-1", "the customer changed their mind", &seen)
	if err := e.Cancel(f.ctx, "saga-1", "again"); !errors.Is(err, runtime.ErrInvalidState) {
		f.t.Fatalf("Cancel of an errored run: %v, want ErrInvalidState", err)
	}
}

func testCancelRunningStep(f *fixture) {
	started := make(chan struct{}, 1)
	var causeSeen, wfCanceled, detachedLive atomic.Bool
	var undone atomic.Int32
	e := f.engine(config{}, func(e *runtime.Engine) {
		f.must(runtime.Register(e, "slow", func(c *runtime.WorkflowContext, in int) (string, error) {
			_, err := runtime.Step(c, "wait-for-it@v1", runtime.StepOptions{Retries: 5, Backoff: time.Millisecond}, func(sc runtime.StepContext) (string, error) {
				select {
				case started <- struct{}{}:
				default:
				}
				<-sc.Done()
				causeSeen.Store(errors.Is(context.Cause(sc), runtime.ErrCanceled))
				return "", sc.Err()
			})
			if errors.Is(err, runtime.ErrCanceled) {
				wfCanceled.Store(errors.Is(context.Cause(c.Context()), runtime.ErrCanceled))
				detachedLive.Store(c.Detached().Context().Err() == nil)
				if derr := runtime.Do(c.Detached(), "undo@v1", runtime.StepOptions{}, func(runtime.StepContext) error { undone.Add(1); return nil }); derr != nil {
					return "", derr
				}
			}
			return "", err
		}))
	})
	f.start(e)
	_, err := runtime.Start[int, string](f.ctx, e, "slow", 0, runtime.WithID("slow-1"))
	f.must(err)
	select {
	case <-started:
	case <-f.ctx.Done():
		f.t.Fatal("the step never started")
	}
	f.must(e.Cancel(f.ctx, "slow-1", "operator"))
	info := f.waitStatus(e, "slow-1", runtime.StatusErrored)
	if !errors.Is(info.Err, runtime.ErrCanceled) {
		f.t.Fatalf("the run ended with %v, want ErrCanceled", info.Err)
	}
	if !causeSeen.Load() || !wfCanceled.Load() || !detachedLive.Load() || undone.Load() != 1 {
		f.t.Fatalf("step saw the cause %v, workflow context cancelled %v, detached context live %v, undo ran %d times; want true, true, true, 1",
			causeSeen.Load(), wfCanceled.Load(), detachedLive.Load(), undone.Load())
	}
	s := findStep(f.steps(e, "slow-1", 1), "wait-for-it@v1")
	if s == nil || len(s.Attempts) != 1 {
		f.t.Fatalf("the cancelled step's record %+v, want one attempt: no retry after the cancellation", s)
	}
}

func testRunCancelAcrossCrash(f *fixture) {
	// A worker's writes: the reservation's checkpoint (1), the sleep (2);
	// then, cancelled, the cancellation's record (3) and the release with
	// the completion riding on it (4). Each worker dies right after one
	// of the last.
	var seen sideEffects
	type crashCase struct {
		id     string
		dying  *writeDyingStore
		engine *runtime.Engine
		stop   func()
	}
	var cases []*crashCase
	for n := 3; n <= 4; n++ {
		c := &crashCase{id: fmt.Sprintf("crash-%d", n)}
		c.dying = &writeDyingStore{dyingStore: dyingStore{Store: f.store}, after: int32(n)}
		c.engine = f.engine(config{lease: time.Second, store: c.dying}, func(e *runtime.Engine) {
			registerCancelSaga(f, e, "saga."+c.id, &seen, time.Hour)
		})
		_, err := runtime.Start[int, string](f.ctx, c.engine, "saga."+c.id, 0, runtime.WithID(c.id))
		f.must(err)
		c.stop = f.start(c.engine)
		cases = append(cases, c)
	}
	for _, c := range cases {
		f.waitStatus(c.engine, c.id, runtime.StatusWaiting)
		f.must(c.engine.Cancel(f.ctx, c.id, "crash test"))
	}
	for _, c := range cases {
		f.eventually(c.id+"'s first worker died", func() bool { return c.dying.dead.Load() })
		c.stop()
	}
	survivor := f.engine(config{}, func(e *runtime.Engine) {
		for _, c := range cases {
			registerCancelSaga(f, e, "saga."+c.id, &seen, time.Hour)
		}
	})
	f.start(survivor)
	for _, c := range cases {
		wantCanceled(f, survivor, c.id, "crash test", &seen)
	}
}

func testRunCancelPaused(f *fixture) {
	var seen sideEffects
	e := f.engine(config{}, func(e *runtime.Engine) { registerCancelSaga(f, e, "saga", &seen, time.Hour) })
	f.start(e)
	_, err := runtime.Start[int, string](f.ctx, e, "saga", 0, runtime.WithID("paused-1"))
	f.must(err)
	f.waitStatus(e, "paused-1", runtime.StatusWaiting)
	f.must(e.Pause(f.ctx, "paused-1"))
	f.must(e.Cancel(f.ctx, "paused-1", "while paused"))
	time.Sleep(50 * time.Millisecond) // time for a worker to take it, were it to
	if info := f.info(e, "paused-1"); info.Status != runtime.StatusPaused || !info.CancelRequested {
		f.t.Fatalf("a paused run after Cancel: %s (cancel requested %v), want it paused with the request", info.Status, info.CancelRequested)
	}
	if got := seen.of("paused-1"); got["release"] != 0 {
		f.t.Fatal("a paused run ran its cleanup")
	}
	f.must(e.Resume(f.ctx, "paused-1"))
	wantCanceled(f, e, "paused-1", "while paused", &seen)
}

func testCancelHandled(f *fixture) {
	var noted atomic.Int32
	e := f.engine(config{}, func(e *runtime.Engine) {
		f.must(runtime.Register(e, "polite", func(c *runtime.WorkflowContext, in int) (string, error) {
			err := c.Sleep("nap", time.Hour)
			if !errors.Is(err, runtime.ErrCanceled) {
				return "slept", err
			}
			reason, requested := c.CancelRequested()
			if err := runtime.Do(c.Detached(), "note@v1", runtime.StepOptions{}, func(runtime.StepContext) error { noted.Add(1); return nil }); err != nil {
				return "", err
			}
			if err := c.Detached().Sleep("settle", time.Millisecond); err != nil {
				return "", err
			}
			return fmt.Sprintf("stopped politely (%v: %s)", requested, reason), nil
		}))
	})
	f.start(e)
	r, err := runtime.Start[int, string](f.ctx, e, "polite", 0, runtime.WithID("polite-1"))
	f.must(err)
	f.waitStatus(e, "polite-1", runtime.StatusWaiting)
	f.must(e.Cancel(f.ctx, "polite-1", "done for today"))
	out, err := r.Result(f.ctx)
	if err != nil || out != "stopped politely (true: done for today)" || noted.Load() != 1 {
		f.t.Fatalf("a workflow that handles its cancellation: %q, %v (note ran %d times); want it complete, the note once", out, err, noted.Load())
	}
}

func testRunCancelSelect(f *fixture) {
	var causeSeen atomic.Bool
	started := make(chan struct{}, 1)
	e := f.engine(config{}, func(e *runtime.Engine) {
		f.must(runtime.Register(e, "picky", func(c *runtime.WorkflowContext, in int) (string, error) {
			slow := runtime.StepAsync(c, "slow@v1", runtime.StepOptions{}, func(sc runtime.StepContext) (string, error) {
				started <- struct{}{}
				<-sc.Done()
				causeSeen.Store(errors.Is(context.Cause(sc), runtime.ErrCanceled))
				return "", sc.Err()
			})
			ev := runtime.OnEvent[string](c, "go", "picky.go")
			i, err := runtime.Select(c, "first", slow, ev)
			if err != nil {
				return "", err
			}
			if i == 0 {
				return slow.Await() // the step's outcome: its cancellation
			}
			return ev.Await()
		}))
	})
	f.start(e)
	_, err := runtime.Start[int, string](f.ctx, e, "picky", 0, runtime.WithID("picky-1"))
	f.must(err)
	select {
	case <-started:
	case <-f.ctx.Done():
		f.t.Fatal("the step never started")
	}
	f.must(e.Cancel(f.ctx, "picky-1", "no longer needed"))
	info := f.waitStatus(e, "picky-1", runtime.StatusErrored)
	if !errors.Is(info.Err, runtime.ErrCanceled) {
		f.t.Fatalf("the select's run ended with %v, want ErrCanceled", info.Err)
	}
	f.eventually("the running step saw the cancellation as its cause", causeSeen.Load)
	s := findStep(f.steps(e, "picky-1", 1), "slow@v1")
	if s == nil || !errors.Is(s.Err, runtime.ErrCanceled) {
		f.t.Fatalf("the step cut short: %+v, want its checkpoint to be the cancellation", s)
	}
}

// registerFamily registers "family", whose input is the policy of its
// child "kid" (a cancel saga), started and left running while the parent
// returns at once, and the saga itself.
func registerFamily(f *fixture, e *runtime.Engine, seen *sideEffects) {
	registerCancelSaga(f, e, "kid", seen, time.Hour)
	f.must(runtime.Register(e, "family", func(c *runtime.WorkflowContext, policy string) (string, error) {
		child, err := runtime.StartChild[string](c, "kid", "kid", 0, runtime.ParentClose(runtime.ParentClosePolicy(policy)))
		if err != nil {
			return "", err
		}
		if _, err := runtime.WaitForEvent[string](c, "go", "family.go."+c.RunID(), 0); err != nil {
			return "", err
		}
		return child.ID(), nil
	}))
}

func testCancelChildPolicies(f *fixture) {
	var seen sideEffects
	e := f.engine(config{}, func(e *runtime.Engine) { registerFamily(f, e, &seen) })
	f.start(e)
	kids := map[runtime.ParentClosePolicy]string{}
	for _, p := range []runtime.ParentClosePolicy{runtime.ParentCloseCancel, runtime.ParentCloseTerminate, runtime.ParentCloseAbandon} {
		id := "family-" + string(p)
		if p == "" {
			id = "family-terminate"
		}
		_, err := runtime.Start[string, string](f.ctx, e, "family", string(p), runtime.WithID(id))
		f.must(err)
		f.waitStatus(e, id, runtime.StatusWaiting)
		kid := id + "/kid"
		f.waitStatus(e, kid, runtime.StatusWaiting)
		if got := f.info(e, kid).ParentClose; got != p {
			f.t.Fatalf("child %s records the policy %q, want %q", kid, got, p)
		}
		_, err = e.Emit(f.ctx, "family.go."+id, "now")
		f.must(err)
		f.waitStatus(e, id, runtime.StatusComplete)
		kids[p] = kid
	}
	wantCanceled(f, e, kids[runtime.ParentCloseCancel], "its parent family-cancel ended (complete) and the child's parent-close policy is cancel", &seen)
	if info := f.waitStatus(e, kids[runtime.ParentCloseTerminate], runtime.StatusTerminated); !errors.Is(info.Err, runtime.ErrTerminated) {
		f.t.Fatalf("the child with the terminate policy: %v, want ErrTerminated", info.Err)
	}
	if got := seen.of(kids[runtime.ParentCloseTerminate]); got["release"] != 0 {
		f.t.Fatal("a terminated child ran its cleanup")
	}
	if info := f.info(e, kids[runtime.ParentCloseAbandon]); info.Status != runtime.StatusWaiting || info.CancelRequested {
		f.t.Fatalf("the abandoned child: %s (cancel requested %v), want it still waiting", info.Status, info.CancelRequested)
	}
}

func testCancelParentAwaiting(f *fixture) {
	var seen sideEffects
	e := f.engine(config{}, func(e *runtime.Engine) {
		registerCancelSaga(f, e, "kid", &seen, time.Hour)
		f.must(runtime.Register(e, "waiter", func(c *runtime.WorkflowContext, in int) (string, error) {
			return runtime.CallChild[string](c, "kid", "kid", 0, runtime.ParentClose(runtime.ParentCloseCancel))
		}))
	})
	f.start(e)
	_, err := runtime.Start[int, string](f.ctx, e, "waiter", 0, runtime.WithID("waiter-1"))
	f.must(err)
	f.waitStatus(e, "waiter-1/kid", runtime.StatusWaiting)
	f.waitStatus(e, "waiter-1", runtime.StatusWaiting)
	f.must(e.Cancel(f.ctx, "waiter-1", "the order was withdrawn"))
	info := f.waitStatus(e, "waiter-1", runtime.StatusErrored)
	if !errors.Is(info.Err, runtime.ErrCanceled) {
		f.t.Fatalf("the cancelled parent ended with %v, want ErrCanceled", info.Err)
	}
	wantCanceled(f, e, "waiter-1/kid", "its parent waiter-1 ended (errored) and the child's parent-close policy is cancel", &seen)
}

func testCancelNextBuild(f *fixture) {
	var seen sideEffects
	old := f.engine(config{}, func(e *runtime.Engine) { registerCancelSaga(f, e, "saga", &seen, time.Hour) })
	stopOld := f.start(old)
	_, err := runtime.Start[int, string](f.ctx, old, "saga", 0, runtime.WithID("deploy-1"))
	f.must(err)
	f.waitStatus(old, "deploy-1", runtime.StatusWaiting)
	stopOld()
	f.must(old.Cancel(f.ctx, "deploy-1", "between builds"))
	if info := f.info(old, "deploy-1"); info.Status != runtime.StatusQueued || !info.CancelRequested {
		f.t.Fatalf("a parked run cancelled with no worker: %s (requested %v), want queued with the request", info.Status, info.CancelRequested)
	}
	next := f.engine(config{}, func(e *runtime.Engine) { registerCancelSaga(f, e, "saga", &seen, 2*time.Hour) })
	f.start(next)
	wantCanceled(f, next, "deploy-1", "between builds", &seen)
}

func testCancelHostile(f *fixture) {
	var seen sideEffects
	e := f.engine(config{}, func(e *runtime.Engine) { registerCancelSaga(f, e, "saga", &seen, time.Hour) })
	stop := f.start(e)
	_, err := runtime.Start[int, string](f.ctx, e, "saga", 0, runtime.WithID("hostile-1"))
	f.must(err)
	before := f.waitStatus(e, "hostile-1", runtime.StatusWaiting)
	// With no worker running, the run cannot end between the two valid
	// requests below, so the second one is a request on a live run.
	stop()
	for what, c := range map[string]struct {
		id, reason string
		want       error
	}{
		"an unknown run":          {"no-such-run", "x", runtime.ErrRunNotFound},
		"an empty run ID":         {"", "x", runtime.ErrInvalidArgument},
		"a control character":     {"hostile-1", "stop\x1b[2J", runtime.ErrInvalidArgument},
		"invalid UTF-8":           {"hostile-1", "stop\xff", runtime.ErrInvalidArgument},
		"a reason over the limit": {"hostile-1", strings.Repeat("x", storage.MaxCancelReason+1), runtime.ErrInvalidArgument},
	} {
		if err := e.Cancel(f.ctx, c.id, c.reason); !errors.Is(err, c.want) {
			f.t.Fatalf("Cancel of %s: %v, want %v", what, err, c.want)
		}
	}
	if after := f.info(e, "hostile-1"); after.CancelRequested || after.Status != before.Status {
		f.t.Fatalf("refused Cancels changed the run: %+v", after)
	}
	f.must(e.Cancel(f.ctx, "hostile-1", "first"))
	f.must(e.Cancel(f.ctx, "hostile-1", "second"))
	if got := f.info(e, "hostile-1"); got.CancelReason != "first" {
		f.t.Fatalf("after two requests the reason is %q, want the first", got.CancelReason)
	}
	next := f.engine(config{}, func(e *runtime.Engine) { registerCancelSaga(f, e, "saga", &seen, time.Hour) })
	f.start(next)
	wantCanceled(f, next, "hostile-1", "first", &seen)
}

// testCancelDeadlineAwaiting: a parent parked on a child that passes its
// deadline is woken by it in a new execution, which holds no record of
// the child call yet; the child still meets its policy.
func testCancelDeadlineAwaiting(f *fixture) {
	var seen sideEffects
	e := f.engine(config{}, func(e *runtime.Engine) {
		registerCancelSaga(f, e, "kid", &seen, time.Hour)
		f.must(runtime.Register(e, "hurried", func(c *runtime.WorkflowContext, in int) (string, error) {
			return runtime.CallChild[string](c, "kid", "kid", 0, runtime.ParentClose(runtime.ParentCloseCancel))
		}))
	})
	f.start(e)
	_, err := runtime.Start[int, string](f.ctx, e, "hurried", 0, runtime.WithID("hurried-1"), runtime.WithTimeout(2*time.Second))
	f.must(err)
	info := f.waitStatus(e, "hurried-1", runtime.StatusErrored)
	if !errors.Is(info.Err, runtime.ErrDeadline) {
		f.t.Fatalf("the parent ended with %v, want ErrDeadline", info.Err)
	}
	wantCanceled(f, e, "hurried-1/kid", "its parent hurried-1 ended (errored) and the child's parent-close policy is cancel", &seen)
}

// errGaveUp is a workflow's own error, wrapping the cancellation.
var errGaveUp = errors.New("the poller gave up")

// testCancelLoopOwnError: a run that sleeps in a loop is cut at the
// iteration it had reached, and returns its own error wrapping the
// cancellation: the caller reads both, and a replay agrees.
func testCancelLoopOwnError(f *fixture) {
	var ticks atomic.Int32
	e := f.engine(config{}, func(e *runtime.Engine) {
		f.must(runtime.Register(e, "poller", func(c *runtime.WorkflowContext, in int) (int, error) {
			for i := range 10 {
				if err := c.Sleep("tick", time.Hour); err != nil {
					return i, fmt.Errorf("%w after %d ticks: %w", errGaveUp, i, err)
				}
				ticks.Add(1)
			}
			return 10, nil
		}))
	})
	f.start(e)
	r, err := runtime.Start[int, int](f.ctx, e, "poller", 0, runtime.WithID("poller-1"))
	f.must(err)
	f.waitStatus(e, "poller-1", runtime.StatusWaiting)
	f.must(e.Cancel(f.ctx, "poller-1", "enough polling"))
	_, err = r.Result(f.ctx)
	// errGaveUp is not declared (//stem:error): its text travels, and the
	// package sentinel it wraps keeps its identity.
	if !strings.Contains(fmt.Sprint(err), errGaveUp.Error()) || !errors.Is(err, runtime.ErrCanceled) {
		f.t.Fatalf("the poller's result: %v, want its own error wrapping the cancellation", err)
	}
	if !strings.Contains(err.Error(), "after 0 ticks") || ticks.Load() != 0 {
		f.t.Fatalf("the poller: %v with %d ticks, want it cut at its first sleep", err, ticks.Load())
	}
	replaysClean(f, e, "poller-1")
}
