package enginetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stemflow/stem/runtime"
)

var futureScenarios = []scenario{
	{"futures/five steps run at once, and a crash with three done re-runs only the two", testFuturesCrash},
	{"futures/at most MaxParallelSteps steps of a run execute at once", testFuturesLimit},
	{"futures/a failed future's error is returned where it is awaited, and a second Await is refused", testFuturesErrors},
	{"futures/events and children awaited together arrive in any order", testFuturesEventsChildren},
	{"futures/a build that creates independent futures in another order continues the runs in flight", testFuturesOrder},
	{"futures/a pause while steps run lets them finish and parks the run", testFuturesPause},
	{"futures/terminate cancels every running step and nothing more is written", testFuturesTerminate},
	{"select/an event before the timer wins, and the winner is kept on replay", testSelectEvent},
	{"select/the timer wins when no event comes, and a later event does not change the branch", testSelectTimer},
	{"select/no cases is an error at the call", testSelectEmpty},
	{"deadline/a run past its deadline ends with ErrDeadline while sleeping, waiting or in a step", testDeadline},
	{"deadline/a deadline already past is refused at the start and nothing is stored", testDeadlinePast},
	{"progress/callers read and wait for the published value, also during a long step", testProgress},
	{"continue/continue-as-new loops with a new input, one execution per iteration, and Result returns the last", testContinueAsNew},
}

// barrier lets n steps through only once all n have arrived: a step that
// ran alone reports it instead of waiting forever.
type barrier struct {
	n       int32
	arrived atomic.Int32
	all     chan struct{}
	once    sync.Once
}

func newBarrier(n int) *barrier { return &barrier{n: int32(n), all: make(chan struct{})} }

func (b *barrier) wait(ctx context.Context) error {
	if b.arrived.Add(1) == b.n {
		b.once.Do(func() { close(b.all) })
	}
	select {
	case <-b.all:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(20 * time.Second):
		return errors.New("the other steps never ran beside this one")
	}
}

func testFuturesCrash(f *fixture) {
	var runs [5]atomic.Int32
	hold := make(chan struct{})
	defer close(hold)
	var second atomic.Bool
	register := func(e *runtime.Engine) {
		f.must(runtime.Register(e, "fan", func(c *runtime.WorkflowContext, _ int) (int, error) {
			var fs []*runtime.Future[int]
			for i := range 5 {
				fs = append(fs, runtime.StepAsync(c, fmt.Sprintf("part%d@v1", i), runtime.StepOptions{}, func(sc runtime.StepContext) (int, error) {
					runs[i].Add(1)
					if i >= 3 && !second.Load() {
						<-hold // the first worker dies while these run
					}
					return i * 10, nil
				}))
			}
			sum := 0
			for _, fu := range fs {
				v, err := fu.Await()
				if err != nil {
					return 0, err
				}
				sum += v
			}
			return sum, nil
		}))
	}
	dying := &dyingStore{Store: f.store}
	a := f.engine(config{lease: 300 * time.Millisecond, store: dying}, register)
	f.start(a)
	run, err := runtime.Start[int, int](f.ctx, a, "fan", 0, runtime.WithID("r1"))
	f.must(err)
	f.eventually("three futures checkpointed while two run", func() bool {
		n := 0
		for _, s := range f.steps(a, "r1", 0) {
			if s.Status == runtime.StepComplete {
				n++
			}
		}
		return n == 3 && runs[3].Load() == 1 && runs[4].Load() == 1
	})
	dying.dead.Store(true)
	second.Store(true)
	b := f.engine(config{lease: 300 * time.Millisecond}, register)
	f.start(b)
	out, err := run.Result(f.ctx)
	f.must(err)
	if out != 100 {
		f.t.Fatalf("result %d, want 100", out)
	}
	for i := range runs {
		want := int32(1)
		if i >= 3 {
			want = 2
		}
		if n := runs[i].Load(); n != want {
			f.t.Fatalf("step part%d ran %d times, want %d: only the two unfinished ones run again", i, n, want)
		}
	}
	var keys []string
	for _, s := range f.steps(b, "r1", 0) {
		keys = append(keys, s.Key)
	}
	slices.Sort(keys)
	if want := []string{"part0@v1", "part1@v1", "part2@v1", "part3@v1", "part4@v1"}; !slices.Equal(keys, want) {
		f.t.Fatalf("steps %v, want each part once: %v", keys, want)
	}
}

func testFuturesLimit(f *fixture) {
	var now, peak atomic.Int32
	gate := newBarrier(3)
	e := f.engineWith(runtime.Config{MaxParallelSteps: 3}, func(e *runtime.Engine) {
		f.must(runtime.Register(e, "wide", func(c *runtime.WorkflowContext, _ int) (int, error) {
			var fs []runtime.Awaitable
			for i := range 6 {
				fs = append(fs, runtime.DoAsync(c, fmt.Sprintf("w%d@v1", i), runtime.StepOptions{}, func(sc runtime.StepContext) error {
					n := now.Add(1)
					defer now.Add(-1)
					for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
					}
					if i < 3 {
						return gate.wait(sc) // the first three run together
					}
					return nil
				}))
			}
			return 0, runtime.All(c, fs...)
		}))
	})
	f.start(e)
	run, err := runtime.Start[int, int](f.ctx, e, "wide", 0)
	f.must(err)
	_, err = run.Result(f.ctx)
	f.must(err)
	if p := peak.Load(); p != 3 {
		f.t.Fatalf("%d steps ran at once, want 3 (MaxParallelSteps)", p)
	}
}

func testFuturesErrors(f *fixture) {
	e := f.engine(config{}, func(e *runtime.Engine) {
		f.must(runtime.Register(e, "mixed", func(c *runtime.WorkflowContext, _ int) (string, error) {
			ok := runtime.StepAsync(c, "ok@v1", runtime.StepOptions{}, func(runtime.StepContext) (string, error) { return "fine", nil })
			bad := runtime.StepAsync(c, "bad@v1", runtime.StepOptions{}, func(runtime.StepContext) (string, error) {
				return "", runtime.Permanent(errors.New("card declined"))
			})
			allErr := runtime.All(c, ok, bad)
			v, err := ok.Await()
			_, badErr := bad.Await()
			_, again := ok.Await()
			return fmt.Sprintf("all=%v|ok=%s,%v|bad=%v|again=%v", allErr, v, err, badErr, errors.Is(again, runtime.ErrInvalidArgument)), nil
		}))
	})
	f.start(e)
	run, err := runtime.Start[int, string](f.ctx, e, "mixed", 0)
	f.must(err)
	out, err := run.Result(f.ctx)
	f.must(err)
	if !strings.Contains(out, "all=") || !strings.Contains(out, "card declined|ok=fine,<nil>|bad=") || !strings.HasSuffix(out, "again=true") {
		f.t.Fatalf("result %q: want All to return the failed future's error, ok's value, bad's error, and a second Await refused", out)
	}
}

func testFuturesEventsChildren(f *fixture) {
	e := f.engine(config{}, func(e *runtime.Engine) {
		f.must(runtime.Register(e, "double", func(c *runtime.WorkflowContext, n int) (int, error) { return 2 * n, nil }))
		f.must(runtime.Register(e, "gather", func(c *runtime.WorkflowContext, _ int) (string, error) {
			a := runtime.OnEvent[string](c, "a", "topic-a")
			b := runtime.OnEvent[string](c, "b", "topic-b")
			k1 := runtime.CallChildAsync[int](c, "k1", "double", 1)
			k2 := runtime.CallChildAsync[int](c, "k2", "double", 2)
			if err := runtime.All(c, a, b, k1, k2); err != nil {
				return "", err
			}
			av, _ := a.Await()
			bv, _ := b.Await()
			v1, _ := k1.Await()
			v2, _ := k2.Await()
			return fmt.Sprintf("%s %s %d %d", av, bv, v1, v2), nil
		}))
		f.must(runtime.RegisterEvent[string](e, "topic-a"))
		f.must(runtime.RegisterEvent[string](e, "topic-b"))
	})
	f.start(e)
	run, err := runtime.Start[int, string](f.ctx, e, "gather", 0, runtime.WithID("g"))
	f.must(err)
	f.waitStatus(e, "g", runtime.StatusWaiting)
	f.must(e.SendEvent(f.ctx, "g", "topic-b", "B"))
	// An emit reaches only runs waiting: wait until the run parks again,
	// on what is left.
	f.eventually("the run waits on topic-a alone", func() bool {
		info := f.info(e, "g")
		return info.Status == runtime.StatusWaiting && slices.Equal(info.WaitTopics, []string{"topic-a"})
	})
	_, err = e.Emit(f.ctx, "topic-a", "A")
	f.must(err)
	out, err := run.Result(f.ctx)
	f.must(err)
	if out != "A B 2 4" {
		f.t.Fatalf("result %q, want %q", out, "A B 2 4")
	}
}

func testFuturesOrder(f *fixture) {
	var swapped atomic.Bool
	e := f.engine(config{}, func(e *runtime.Engine) {
		f.must(runtime.Register(e, "fickle", func(c *runtime.WorkflowContext, _ int) (int, error) {
			names := []string{"first", "second"}
			if swapped.Load() {
				slices.Reverse(names)
			}
			fs := map[string]*runtime.Future[int]{}
			for _, n := range names {
				fs[n] = runtime.OnEvent[int](c, n, "topic-"+n)
			}
			got, err := runtime.WaitForEvent[int](c, "go", "go", 0)
			if err != nil {
				return 0, err
			}
			a, err := fs["first"].Await()
			if err != nil {
				return 0, err
			}
			b, err := fs["second"].Await()
			return got*100 + a*10 + b, err
		}))
	})
	f.start(e)
	run, err := runtime.Start[int, int](f.ctx, e, "fickle", 0, runtime.WithID("r1"))
	f.must(err)
	f.must(e.SendEvent(f.ctx, "r1", "topic-first", 2))
	f.waitStatus(e, "r1", runtime.StatusWaiting)
	swapped.Store(true) // the deploy: the two futures are created the other way round
	f.must(e.SendEvent(f.ctx, "r1", "topic-second", 3))
	f.must(e.SendEvent(f.ctx, "r1", "go", 1))
	got, err := run.Result(f.ctx)
	if err != nil || got != 123 {
		f.t.Fatalf("result = %d, %v; want 123: each future keeps its own event whatever order they are created in", got, err)
	}
	if info := f.info(e, "r1"); info.Hold != nil {
		f.t.Fatalf("run held: %+v", *info.Hold)
	}
}

func testFuturesPause(f *fixture) {
	var runs atomic.Int32
	release := make(chan struct{})
	e := f.engine(config{lease: time.Second}, func(e *runtime.Engine) {
		f.must(runtime.Register(e, "pausable", func(c *runtime.WorkflowContext, _ int) (int, error) {
			var fs []runtime.Awaitable
			for i := range 3 {
				fs = append(fs, runtime.DoAsync(c, fmt.Sprintf("s%d@v1", i), runtime.StepOptions{}, func(sc runtime.StepContext) error {
					runs.Add(1)
					select {
					case <-release:
						return nil
					case <-sc.Done():
						return context.Cause(sc)
					}
				}))
			}
			return 0, runtime.All(c, fs...)
		}))
	})
	f.start(e)
	run, err := runtime.Start[int, int](f.ctx, e, "pausable", 0, runtime.WithID("r1"))
	f.must(err)
	f.eventually("three steps running", func() bool { return runs.Load() == 3 })
	f.must(e.Pause(f.ctx, "r1"))
	time.Sleep(600 * time.Millisecond) // heartbeats learn of the pause
	close(release)
	f.waitStatus(e, "r1", runtime.StatusPaused)
	f.must(e.Resume(f.ctx, "r1"))
	_, err = run.Result(f.ctx)
	f.must(err)
	if n := runs.Load(); n != 3 {
		f.t.Fatalf("steps ran %d times, want 3: a pause lets running steps finish", n)
	}
}

func testFuturesTerminate(f *fixture) {
	var mu sync.Mutex
	var causes []error
	var started atomic.Int32
	e := f.engine(config{lease: time.Second}, func(e *runtime.Engine) {
		f.must(runtime.Register(e, "doomed", func(c *runtime.WorkflowContext, _ int) (int, error) {
			var fs []runtime.Awaitable
			for i := range 3 {
				fs = append(fs, runtime.DoAsync(c, fmt.Sprintf("s%d@v1", i), runtime.StepOptions{}, func(sc runtime.StepContext) error {
					started.Add(1)
					<-sc.Done()
					mu.Lock()
					causes = append(causes, context.Cause(sc))
					mu.Unlock()
					return sc.Err()
				}))
			}
			return 0, runtime.All(c, fs...)
		}))
	})
	f.start(e)
	run, err := runtime.Start[int, int](f.ctx, e, "doomed", 0, runtime.WithID("r1"))
	f.must(err)
	f.eventually("three steps running", func() bool { return started.Load() == 3 })
	f.must(e.Terminate(f.ctx, "r1", "stop"))
	if _, err := run.Result(f.ctx); !errors.Is(err, runtime.ErrTerminated) {
		f.t.Fatalf("result %v, want ErrTerminated", err)
	}
	f.eventually("every step saw the termination", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(causes) == 3
	})
	for _, c := range causes {
		if !errors.Is(c, runtime.ErrTerminated) {
			f.t.Fatalf("a step was cancelled with %v, want ErrTerminated", c)
		}
	}
	for _, s := range f.steps(e, "r1", 0) {
		if s.Status == runtime.StepComplete || s.Status == runtime.StepFailed {
			f.t.Fatalf("step %s has an outcome %s written after the termination", s.Key, s.Status)
		}
	}
}

// approval registers "approve": the first of an approval event and a
// timer of timeout wins; a short sleep after it makes the workflow replay.
func approval(f *fixture, timeout time.Duration, calls *atomic.Int32) func(e *runtime.Engine) {
	return func(e *runtime.Engine) {
		f.must(runtime.Register(e, "approve", func(c *runtime.WorkflowContext, _ int) (string, error) {
			calls.Add(1)
			ev := runtime.OnEvent[string](c, "approval", "approvals")
			t := c.Timer("expiry", timeout)
			i, err := runtime.Select(c, "first", ev, t)
			if err != nil {
				return "", err
			}
			if err := c.Sleep("settle", 50*time.Millisecond); err != nil {
				return "", err
			}
			if i == 1 {
				return "expired", nil
			}
			v, err := ev.Await()
			return "approved " + v, err
		}))
		f.must(runtime.RegisterEvent[string](e, "approvals"))
	}
}

func testSelectEvent(f *fixture) {
	var calls atomic.Int32
	e := f.engine(config{}, approval(f, time.Hour, &calls))
	f.start(e)
	run, err := runtime.Start[int, string](f.ctx, e, "approve", 0, runtime.WithID("r1"))
	f.must(err)
	f.waitStatus(e, "r1", runtime.StatusWaiting)
	f.must(e.SendEvent(f.ctx, "r1", "approvals", "by ann"))
	out, err := run.Result(f.ctx)
	f.must(err)
	if out != "approved by ann" {
		f.t.Fatalf("result %q, want approved by ann", out)
	}
	s := findStep(f.steps(e, "r1", 0), "first#0")
	if s == nil || s.Kind != runtime.KindSelect || string(s.Output) != "0" {
		f.t.Fatalf("select step %+v, want a select checkpoint of case 0", s)
	}
}

func testSelectTimer(f *fixture) {
	var calls atomic.Int32
	e := f.engine(config{}, approval(f, 100*time.Millisecond, &calls))
	f.start(e)
	run, err := runtime.Start[int, string](f.ctx, e, "approve", 0, runtime.WithID("r1"))
	f.must(err)
	f.eventually("the timer won", func() bool {
		s := findStep(f.steps(e, "r1", 0), "first#0")
		return s != nil && s.Status == runtime.StepComplete
	})
	// The run sleeps after the select: an approval now is delivered to the
	// event future, but the replay keeps the timer's branch.
	_ = e.SendEvent(f.ctx, "r1", "approvals", "too late")
	out, err := run.Result(f.ctx)
	f.must(err)
	if out != "expired" {
		f.t.Fatalf("result %q, want expired: the select's winner is kept on replay", out)
	}
	if n := calls.Load(); n < 2 {
		f.t.Fatalf("the workflow ran %d times, want a replay after the select", n)
	}
}

func testSelectEmpty(f *fixture) {
	e := f.engine(config{}, func(e *runtime.Engine) {
		f.must(runtime.Register(e, "empty", func(c *runtime.WorkflowContext, _ int) (int, error) {
			return runtime.Select(c, "nothing")
		}))
	})
	f.start(e)
	run, err := runtime.Start[int, int](f.ctx, e, "empty", 0)
	f.must(err)
	if _, err := run.Result(f.ctx); !errors.Is(err, runtime.ErrInvalidArgument) || !strings.Contains(err.Error(), `"nothing"`) {
		f.t.Fatalf("result %v, want ErrInvalidArgument naming the select", err)
	}
}

func testDeadline(f *fixture) {
	var causes sync.Map
	e := f.engineWith(runtime.Config{PollInterval: hourlyPoll}, func(e *runtime.Engine) {
		f.must(runtime.Register(e, "sleepy", func(c *runtime.WorkflowContext, _ int) (int, error) {
			return 0, c.Sleep("nap", time.Hour)
		}))
		f.must(runtime.Register(e, "patient", func(c *runtime.WorkflowContext, _ int) (int, error) {
			return runtime.WaitForEvent[int](c, "never", "never", 0)
		}, runtime.WorkflowTimeout(150*time.Millisecond)))
		f.must(runtime.Register(e, "busy", func(c *runtime.WorkflowContext, _ int) (int, error) {
			return runtime.Step(c, "work@v1", runtime.StepOptions{}, func(sc runtime.StepContext) (int, error) {
				causes.Store("busy started", true)
				<-sc.Done()
				causes.Store("busy", context.Cause(sc))
				return 0, sc.Err()
			})
		}))
	})
	f.start(e)
	sleepy, err := runtime.Start[int, int](f.ctx, e, "sleepy", 0, runtime.WithTimeout(150*time.Millisecond))
	f.must(err)
	patient, err := runtime.Start[int, int](f.ctx, e, "patient", 0)
	f.must(err)
	busy, err := runtime.Start[int, int](f.ctx, e, "busy", 0, runtime.WithDeadline(time.Now().Add(150*time.Millisecond)))
	f.must(err)
	for name, run := range map[string]*runtime.Run[int]{"sleeping": sleepy, "waiting (timeout=)": patient, "in a step": busy} {
		if _, err := resultSoon(f, run, "a run past its deadline "+name); !errors.Is(err, runtime.ErrDeadline) {
			f.t.Fatalf("run %s: result %v, want ErrDeadline", name, err)
		}
		if st, _ := run.Status(f.ctx); st != runtime.StatusErrored {
			f.t.Fatalf("run %s: status %s, want errored", name, st)
		}
	}
	// On a loaded machine the deadline may pass before the run is even
	// claimed: it then ends without its step, which is right too. A step
	// that began must see its context cancelled by the deadline.
	if _, began := causes.Load("busy started"); !began {
		f.t.Log("the busy run's deadline passed before its step began: the in-step case was not exercised")
		return
	}
	f.eventually("the busy step's context was cancelled", func() bool { _, ok := causes.Load("busy"); return ok })
	if c, _ := causes.Load("busy"); !errors.Is(c.(error), runtime.ErrDeadline) {
		f.t.Fatalf("the step's context was cancelled with %v, want ErrDeadline", c)
	}
}

func testDeadlinePast(f *fixture) {
	e := f.engine(config{}, func(e *runtime.Engine) {
		f.must(runtime.Register(e, "w", func(c *runtime.WorkflowContext, _ int) (int, error) { return 0, nil }))
	})
	_, err := runtime.Start[int, int](f.ctx, e, "w", 0, runtime.WithID("late"), runtime.WithDeadline(time.Now().Add(-time.Second)))
	if !errors.Is(err, runtime.ErrInvalidArgument) || !strings.Contains(err.Error(), "past") {
		f.t.Fatalf("start with a past deadline: %v, want ErrInvalidArgument saying it is past", err)
	}
	if _, err := e.Get(f.ctx, "late"); !errors.Is(err, runtime.ErrRunNotFound) {
		f.t.Fatalf("Get after the refused start: %v, want ErrRunNotFound", err)
	}
	_, err = runtime.Start[int, int](f.ctx, e, "w", 0, runtime.WithTimeout(0))
	f.wantInvalid(err, "WithTimeout(0)")
}

func (f *fixture) wantInvalid(err error, what string) {
	f.t.Helper()
	if !errors.Is(err, runtime.ErrInvalidArgument) {
		f.t.Fatalf("%s: %v, want ErrInvalidArgument", what, err)
	}
}

type stage struct {
	Done int    `json:"done"`
	Note string `json:"note,omitempty"`
}

func testProgress(f *fixture) {
	release := make(chan struct{})
	e := f.engine(config{lease: time.Second}, func(e *runtime.Engine) {
		f.must(runtime.Register(e, "tracked", func(c *runtime.WorkflowContext, _ int) (int, error) {
			if err := runtime.SetProgress(c, stage{Done: 1}); err != nil {
				return 0, err
			}
			if err := runtime.SetProgress(c, stage{Note: strings.Repeat("x", runtime.DefaultMaxPayloadBytes)}); !errors.Is(err, runtime.ErrPayloadTooLarge) {
				return 0, fmt.Errorf("oversize progress: %v, want ErrPayloadTooLarge", err)
			}
			if err := runtime.Do(c, "long@v1", runtime.StepOptions{}, func(runtime.StepContext) error { <-release; return nil }); err != nil {
				return 0, err
			}
			if err := runtime.SetProgress(c, stage{Done: 2}); err != nil {
				return 0, err
			}
			return runtime.WaitForEvent[int](c, "go", "go", 0)
		}))
	})
	f.start(e)
	run, err := runtime.Start[int, int](f.ctx, e, "tracked", 0, runtime.WithID("r1"))
	f.must(err)
	f.eventually("progress 1 readable while the long step runs", func() bool {
		p, ok, err := runtime.GetProgress[stage](f.ctx, e, "r1")
		return err == nil && ok && p.Done == 1
	})
	got := make(chan stage, 1)
	go func() {
		p, err := runtime.WaitProgress(f.ctx, e, "r1", stage{Done: 1})
		if err != nil {
			f.t.Error(err)
		}
		got <- p
	}()
	close(release)
	if p := <-got; p.Done != 2 {
		f.t.Fatalf("WaitProgress returned %+v, want done 2", p)
	}
	f.waitStatus(e, "r1", runtime.StatusWaiting)
	if info := f.info(e, "r1"); string(info.Progress) != `{"done":2}` {
		f.t.Fatalf("RunInfo.Progress %s, want {\"done\":2}", info.Progress)
	}
	f.must(e.SendEvent(f.ctx, "r1", "go", 1))
	_, err = run.Result(f.ctx)
	f.must(err)
}

func testContinueAsNew(f *fixture) {
	var bodies atomic.Int32
	e := f.engine(config{}, func(e *runtime.Engine) {
		f.must(runtime.Register(e, "loop", func(c *runtime.WorkflowContext, n int) (int, error) {
			bodies.Add(1)
			v, err := runtime.Step(c, "inc@v1", runtime.StepOptions{}, func(runtime.StepContext) (int, error) { return n + 1, nil })
			if err != nil {
				return 0, err
			}
			if v < 5 {
				return 0, runtime.ContinueAsNew(c, v)
			}
			if err := runtime.ContinueAsNew(c, "not an int"); !errors.Is(err, runtime.ErrInvalidArgument) {
				return 0, fmt.Errorf("continue with a wrong input type: %v, want ErrInvalidArgument", err)
			}
			return v, nil
		}))
	})
	f.start(e)
	run, err := runtime.Start[int, int](f.ctx, e, "loop", 0, runtime.WithID("r1"))
	f.must(err)
	out, err := run.Result(f.ctx)
	f.must(err)
	if out != 5 {
		f.t.Fatalf("result %d, want 5", out)
	}
	execs, err := e.ListExecutions(f.ctx, "r1")
	f.must(err)
	if len(execs) != 5 {
		f.t.Fatalf("%d executions, want 5", len(execs))
	}
	for i, x := range execs {
		want := runtime.StatusContinued
		if i == 4 {
			want = runtime.StatusComplete
		}
		if x.Status != want {
			f.t.Fatalf("execution %d ended %s, want %s", x.Number, x.Status, want)
		}
		if steps := f.steps(e, "r1", x.Number); len(steps) != 1 {
			f.t.Fatalf("execution %d has %d steps, want its own one", x.Number, len(steps))
		}
	}
	if n := bodies.Load(); n != 5 {
		f.t.Fatalf("the workflow ran %d times, want 5: each execution replays nothing", n)
	}
}
