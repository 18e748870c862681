package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/storage"
)

// hookLog records what hooks saw, in order.
type hookLog struct {
	mu      sync.Mutex
	lines   []string
	starts  []runtime.HookStart
	execs   []runtime.HookExecution
	tries   []runtime.HookAttempt
	waits   []runtime.HookWait
	ops     map[string]int
	opOrder []string
}

func (l *hookLog) add(line string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, line)
}

type ctxKey string

// recordingHooks are hooks named name that record into l, put name into
// the context they pass on, and check that the hooks outside them did.
func recordingHooks(t *testing.T, name string, outer string, l *hookLog) runtime.Hooks {
	seenOuter := func(ctx context.Context, where string) {
		if outer != "" && ctx.Value(ctxKey(outer)) == nil {
			t.Errorf("hook %s (%s) runs without the context of hook %s, which wraps it", name, where, outer)
		}
	}
	with := func(ctx context.Context) context.Context { return context.WithValue(ctx, ctxKey(name), name) }
	return runtime.Hooks{
		Start: func(ctx context.Context, s *runtime.HookStart, next func(context.Context) error) error {
			seenOuter(ctx, "start")
			for i := range s.Runs {
				if s.Runs[i].Headers == nil {
					s.Runs[i].Headers = map[string]string{}
				}
				s.Runs[i].Headers["x-"+name] = "set by " + name
				// The run starting a child passes its execution's context:
				// what its execution hook put there reaches the child.
				if v, ok := ctx.Value(ctxKey("exec-of")).(string); ok {
					s.Runs[i].Headers["x-parent-exec"] = v
				}
			}
			l.add(name + " start> " + s.Workflow)
			err := next(with(ctx))
			l.add(name + " start< " + s.Workflow)
			if name == "inner" {
				l.mu.Lock()
				l.starts = append(l.starts, *s)
				l.mu.Unlock()
			}
			return err
		},
		Execution: func(ctx context.Context, x *runtime.HookExecution, next func(context.Context)) {
			seenOuter(ctx, "execution")
			l.add(name + " exec> " + x.RunID)
			next(context.WithValue(with(ctx), ctxKey("exec-of"), x.RunID))
			l.add(fmt.Sprintf("%s exec< %s %s", name, x.RunID, x.Outcome))
			if name == "inner" {
				l.mu.Lock()
				l.execs = append(l.execs, *x)
				l.mu.Unlock()
			}
		},
		Attempt: func(ctx context.Context, a *runtime.HookAttempt, next func(context.Context)) {
			seenOuter(ctx, "attempt")
			if ctx.Value(ctxKey("exec-of")) != a.RunID {
				t.Errorf("attempt %s of %s: its context is not its execution's", a.Key, a.RunID)
			}
			l.add(fmt.Sprintf("%s try> %s #%d", name, a.Key, a.Attempt))
			next(with(ctx))
			l.add(fmt.Sprintf("%s try< %s #%d", name, a.Key, a.Attempt))
			if name == "inner" {
				l.mu.Lock()
				l.tries = append(l.tries, *a)
				l.mu.Unlock()
			}
		},
		Wait: func(ctx context.Context, w runtime.HookWait) {
			seenOuter(ctx, "wait")
			l.add(name + " wait " + w.Key)
			if name == "inner" {
				l.mu.Lock()
				l.waits = append(l.waits, w)
				l.mu.Unlock()
			}
		},
		Store: func(ctx context.Context, op string, next func(context.Context) error) error {
			seenOuter(ctx, "store "+op)
			if name == "inner" {
				l.mu.Lock()
				if l.ops == nil {
					l.ops = map[string]int{}
				}
				l.ops[op]++
				l.opOrder = append(l.opOrder, op)
				l.mu.Unlock()
			}
			return next(with(ctx))
		},
	}
}

// hookedEngine is an engine on the fixture's store with the hooks.
func (f *fixture) hookedEngine(lease time.Duration, hooks []runtime.Hooks, register func(e *runtime.Engine)) *runtime.Engine {
	f.t.Helper()
	e, err := runtime.New(runtime.Config{
		Store: f.store, Workers: 8, LeaseDuration: lease, PollInterval: 5 * time.Millisecond,
		ShutdownGrace: 50 * time.Millisecond, Hooks: hooks,
	})
	must(f.t, err)
	register(e)
	return e
}

// A run's whole life passes through the hooks: its start and its child's,
// each execution with its outcome, each step attempt with its retry
// decision, each wait, and the store calls; the first hook wraps the
// second, and each hands its context on to what it wraps, down to the
// step function and the child's start.
func TestHooksSeeARunsLife(t *testing.T) {
	t.Parallel()
	f := setup(t)
	var l hookLog
	stepSaw := make(chan []any, 4)
	e := f.hookedEngine(time.Minute, []runtime.Hooks{recordingHooks(t, "outer", "", &l), recordingHooks(t, "inner", "outer", &l)}, func(e *runtime.Engine) {
		fails := 1
		must(t, runtime.Register(e, "hooks.kid", func(c *runtime.WorkflowContext, in string) (string, error) {
			return "kid:" + in, nil
		}))
		must(t, runtime.Register(e, "hooks.life", func(c *runtime.WorkflowContext, in string) (string, error) {
			v, err := runtime.Step(c, "flaky@v1", runtime.StepOptions{Retries: 2, Backoff: time.Millisecond, MaxBackoff: time.Millisecond}, func(sc runtime.StepContext) (string, error) {
				stepSaw <- []any{sc.Value(ctxKey("outer")), sc.Value(ctxKey("inner")), sc.Value(ctxKey("exec-of"))}
				if fails > 0 {
					fails--
					return "", errors.New("flaky: once")
				}
				return "ok", nil
			})
			if err != nil {
				return "", err
			}
			if err := c.Sleep("nap", 10*time.Millisecond); err != nil {
				return "", err
			}
			ev, err := runtime.WaitForEvent[string](c, "go", "hooks.go", time.Hour)
			if err != nil {
				return "", err
			}
			kid, err := runtime.CallChild[string](c, "kid", "hooks.kid", in)
			if err != nil {
				return "", err
			}
			return v + "/" + ev + "/" + kid, nil
		}))
	})
	ctx := waitCtx(t)
	run, err := runtime.Start[string, string](context.WithValue(ctx, ctxKey("caller"), "c"), e, "hooks.life", "in", runtime.WithID("life"))
	must(t, err)
	start(t, e)
	defer func() {
		if t.Failed() {
			l.mu.Lock()
			t.Logf("the hooks saw:\n%s", strings.Join(l.lines, "\n"))
			l.mu.Unlock()
		}
	}()
	eventually(t, "the run waits for its event", func() bool { return status(t, e, "life") == runtime.StatusWaiting && len(l.waitsOf("hooks.go")) == 1 })
	must(t, e.SendEvent(ctx, "life", "hooks.go", "go!"))
	got, err := run.Result(ctx)
	must(t, err)
	if got != "ok/go!/kid:in" {
		t.Fatalf("result %q", got)
	}
	// The run parks at its sleep and at its event. At its child it parks
	// too, unless another worker has finished the child before the run
	// suspends: then the store delivers the result at once and the same
	// execution goes on to complete.
	// The child's completion delivers the parent's result, so the
	// parent may finish before the child's execution hooks return: wait
	// for both.
	eventually(t, "the last executions' hooks return", func() bool {
		// An execution's hooks return once it is done, which for one that
		// parked at its child may be after the next one completed: the
		// outcomes are compared in any order.
		o := sortedWords(l.execOutcomes("life"))
		return (o == "complete parked parked parked" || o == "complete parked parked") && l.execOutcomes("life/kid") == "complete"
	})

	// The step function sees both attempt hooks' contexts and its
	// execution's.
	for range 2 {
		if saw := <-stepSaw; !slices.Equal(saw, []any{"outer", "inner", "life"}) {
			t.Errorf("the step's context holds %v, want the values of both hooks and its execution", saw)
		}
	}

	l.mu.Lock()
	defer l.mu.Unlock()
	// Starts: the run's, then its child's, with the headers the hooks
	// added, and the child's with its parent's execution.
	if len(l.starts) != 2 || l.starts[0].Workflow != "hooks.life" || l.starts[1].Workflow != "hooks.kid" || l.starts[1].ParentID != "life" {
		t.Fatalf("starts %+v, want hooks.life then its child hooks.kid", l.starts)
	}
	for _, s := range l.starts {
		if len(s.Results) != 1 || !s.Results[0].Created {
			t.Errorf("start of %s: results %+v, want one created", s.Workflow, s.Results)
		}
	}
	kidID := l.starts[1].Results[0].Run.ID
	wantHeaders := map[string]map[string]string{
		"life": {"x-outer": "set by outer", "x-inner": "set by inner"},
		kidID:  {"x-outer": "set by outer", "x-inner": "set by inner", "x-parent-exec": "life"},
	}
	for _, x := range l.execs {
		if fmt.Sprint(x.Headers) != fmt.Sprint(wantHeaders[x.RunID]) {
			t.Errorf("execution of %s has headers %v, want %v", x.RunID, x.Headers, wantHeaders[x.RunID])
		}
		if x.Execution != 1 || x.Workflow == "" || x.Version != 1 {
			t.Errorf("execution %+v: want execution 1 of a workflow at version 1", x)
		}
	}
	if got := l.execOutcomesLocked(kidID); got != "complete" {
		t.Errorf("child's executions ended %q, want complete", got)
	}

	// Attempts: the failure decided a retry, the success did not.
	if len(l.tries) != 2 {
		t.Fatalf("attempts %+v, want 2", l.tries)
	}
	first, second := l.tries[0], l.tries[1]
	if first.Key != "flaky@v1" || first.Attempt != 1 || first.Err == nil || !first.Retry || first.RetryAt.Before(first.Ended) || first.Ended.Before(first.Started) {
		t.Errorf("first attempt %+v: want attempt 1 failed, a retry after it ended", first)
	}
	if second.Attempt != 2 || second.Err != nil || second.Retry || !second.RetryAt.IsZero() {
		t.Errorf("second attempt %+v: want attempt 2 succeeded, no retry", second)
	}

	// Waits: the sleep with its wake time, the event, the child.
	kinds := []string{}
	for _, w := range l.waits {
		kinds = append(kinds, fmt.Sprintf("%s:%s:%v", w.Kind, w.Key, w.Topics))
		if w.Kind == runtime.KindSleep && w.Until.IsZero() {
			t.Errorf("sleep %+v has no wake time", w)
		}
		if w.Kind == runtime.KindEvent && !w.Until.After(time.Now().Add(50*time.Minute)) {
			t.Errorf("event wait %+v: want its hour's timeout as Until", w)
		}
	}
	if want := fmt.Sprintf("[sleep:nap:[] event:go:[hooks.go] child:kid:[stem.child/%s]]", kidID); fmt.Sprint(kinds) != want {
		t.Errorf("waits %v, want %s", kinds, want)
	}

	// Store calls: every kind the run needed.
	for _, op := range []string{"CreateRuns", "Claim", "Checkpoint", "RecordAttempts", "Suspend", "Complete", "SendEvent", "PutWorker"} {
		if l.ops[op] == 0 {
			t.Errorf("no %s through the store hook (saw %v)", op, l.ops)
		}
	}

	// Nesting: the outer hook wraps the inner at every point.
	for _, pair := range [][2]string{
		{"outer start> hooks.life", "inner start> hooks.life"},
		{"inner start< hooks.life", "outer start< hooks.life"},
		{"outer exec> life", "inner exec> life"},
		{"outer try> flaky@v1 #1", "inner try> flaky@v1 #1"},
		{"inner try< flaky@v1 #1", "outer try< flaky@v1 #1"},
		{"outer wait nap", "inner wait nap"},
	} {
		i, j := slices.Index(l.lines, pair[0]), slices.Index(l.lines, pair[1])
		if i < 0 || j < 0 || i > j {
			t.Errorf("%q (at %d) should come before %q (at %d) in\n%s", pair[0], i, pair[1], j, strings.Join(l.lines, "\n"))
		}
	}
}

func (l *hookLog) waitsOf(topic string) []runtime.HookWait {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []runtime.HookWait
	for _, w := range l.waits {
		if slices.Contains(w.Topics, topic) {
			out = append(out, w)
		}
	}
	return out
}

func (l *hookLog) execOutcomes(runID string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.execOutcomesLocked(runID)
}

func (l *hookLog) execOutcomesLocked(runID string) string {
	var out []string
	for _, x := range l.execs {
		if x.RunID == runID {
			out = append(out, string(x.Outcome))
		}
	}
	return strings.Join(out, " ")
}

// A start hook may refuse a start, and headers out of bounds are refused
// by the store: either way nothing is created.
func TestStartHookRefusals(t *testing.T) {
	t.Parallel()
	f := setup(t)
	refuse := errors.New("not today")
	for _, tc := range []struct {
		name string
		hook func(ctx context.Context, s *runtime.HookStart, next func(context.Context) error) error
		want error
	}{
		{"refused", func(ctx context.Context, s *runtime.HookStart, next func(context.Context) error) error { return refuse }, refuse},
		{"bad header", func(ctx context.Context, s *runtime.HookStart, next func(context.Context) error) error {
			s.Runs[0].Headers = map[string]string{"trace parent": "x"}
			return next(ctx)
		}, runtime.ErrInvalidArgument},
	} {
		e := f.hookedEngine(time.Minute, []runtime.Hooks{{Start: tc.hook}}, func(e *runtime.Engine) {
			must(t, runtime.Register(e, "hooks.refused", func(c *runtime.WorkflowContext, in int) (int, error) { return in, nil }))
		})
		_, err := runtime.Start[int, int](waitCtx(t), e, "hooks.refused", 1, runtime.WithID(tc.name))
		if !errors.Is(err, tc.want) {
			t.Fatalf("%s: Start: %v, want %v", tc.name, err, tc.want)
		}
		if _, err := e.Get(waitCtx(t), tc.name); !errors.Is(err, runtime.ErrRunNotFound) {
			t.Fatalf("%s: the refused run exists: %v", tc.name, err)
		}
	}
}

// An execution hook learns how each execution ended: errored with the
// run's error, stopped by a termination, continued as new, paused.
func TestExecutionHookOutcomes(t *testing.T) {
	t.Parallel()
	f := setup(t)
	var mu sync.Mutex
	ended := map[string][]string{}
	hooks := runtime.Hooks{Execution: func(ctx context.Context, x *runtime.HookExecution, next func(context.Context)) {
		next(ctx)
		mu.Lock()
		defer mu.Unlock()
		what := string(x.Outcome)
		if x.Err != nil {
			what += ": " + x.Err.Error()
		}
		ended[x.RunID] = append(ended[x.RunID], fmt.Sprintf("%d %s", x.Execution, what))
	}}
	release := make(chan struct{})
	entered := make(chan string, 4)
	e := f.hookedEngine(time.Minute, []runtime.Hooks{hooks}, func(e *runtime.Engine) {
		must(t, runtime.Register(e, "hooks.outcomes", func(c *runtime.WorkflowContext, in string) (string, error) {
			switch in {
			case "fail":
				return "", errors.New("it broke")
			case "again":
				return "", runtime.ContinueAsNew(c, "fail")
			}
			return runtime.Step(c, "block@v1", runtime.StepOptions{}, func(sc runtime.StepContext) (string, error) {
				entered <- sc.RunID()
				select {
				case <-release:
				case <-sc.Done():
				}
				return "done", nil
			})
		}))
	})
	ctx := waitCtx(t)
	for _, id := range []string{"fail", "again", "term", "pause"} {
		_, err := runtime.Start[string, string](ctx, e, "hooks.outcomes", id, runtime.WithID(id))
		must(t, err)
	}
	start(t, e)
	for range 2 {
		<-entered
	}
	must(t, e.Terminate(ctx, "term", "enough"))
	must(t, e.Pause(ctx, "pause"))
	close(release)
	want := map[string]string{
		"fail":  "[1 errored: it broke]",
		"again": "[1 continued 2 errored: it broke]",
		"term":  "[1 stopped: stem: run terminated]",
		"pause": "[1 paused]",
	}
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		if t.Failed() {
			t.Logf("executions ended: %q", ended)
		}
	}()
	eventually(t, "every execution ends", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for id, w := range want {
			// In execution order: the run's next execution may end on
			// another worker before the hook of the one that continued it
			// has returned.
			if fmt.Sprint(slices.Sorted(slices.Values(ended[id]))) != w {
				return false
			}
		}
		return true
	})
}

// A running engine is listed among the workers, with what it serves and
// runs, until Run returns; a dead engine's record expires.
func TestWorkersListed(t *testing.T) {
	t.Parallel()
	f, clock := setupClock(t)
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	e, err := runtime.New(runtime.Config{Store: f.store, Workers: 4, PollInterval: 5 * time.Millisecond, Clock: clock, WorkerID: "worker-1", WorkerTTL: 3 * time.Second})
	must(t, err)
	must(t, runtime.Register(e, "hooks.busy", func(c *runtime.WorkflowContext, in int) (int, error) {
		return runtime.Step(c, "block@v1", runtime.StepOptions{}, func(sc runtime.StepContext) (int, error) {
			entered <- struct{}{}
			<-release
			return in, nil
		})
	}))
	must(t, e.RegisterQueue(runtime.Queue{Name: "busy"}))
	ctx := waitCtx(t)
	_, err = runtime.Start[int, int](ctx, e, "hooks.busy", 1)
	must(t, err)
	stop := start(t, e)
	<-entered
	var ws []runtime.Worker
	eventually(t, "the worker records its run in flight", func() bool {
		// The record is renewed every WorkerTTL/3 of real time.
		ws, err = e.Workers(ctx)
		must(t, err)
		return len(ws) == 1 && ws[0].InFlight == 1
	})
	host, _ := os.Hostname()
	w := ws[0]
	if w.ID != "worker-1" || w.Host != host || w.PID != os.Getpid() || !slices.Equal(w.Workflows, []string{"hooks.busy"}) ||
		!slices.Equal(w.Queues, []string{"busy", storage.DefaultQueue}) || !w.StartedAt.Equal(clock.Now()) ||
		!w.ExpiresAt.Equal(w.Heartbeat.Add(3*time.Second)) {
		t.Fatalf("worker %+v: want worker-1 on this host and process, serving hooks.busy on busy and default, expiring 3s after its heartbeat", w)
	}
	close(release)
	stop()
	if ws, err := e.Workers(ctx); err != nil || len(ws) != 0 {
		t.Fatalf("after Run returned: workers %+v, %v; want none", ws, err)
	}

	// A worker that dies keeps its record until it expires.
	dead := &probeStore{Store: f.store}
	d, err := runtime.New(runtime.Config{Store: dead, PollInterval: 5 * time.Millisecond, Clock: clock, WorkerID: "worker-dead", WorkerTTL: 3 * time.Second})
	must(t, err)
	must(t, runtime.Register(d, "hooks.busy", func(c *runtime.WorkflowContext, in int) (int, error) { return in, nil }))
	stopDead := start(t, d)
	eventually(t, "the doomed worker records itself", func() bool {
		ws, err := e.Workers(ctx)
		return err == nil && len(ws) == 1 && ws[0].ID == "worker-dead"
	})
	dead.kill()
	stopDead()
	if ws, err := e.Workers(ctx); err != nil || len(ws) != 1 {
		t.Fatalf("right after the worker died: %+v, %v; want its record until it expires", ws, err)
	}
	clock.Advance(3 * time.Second)
	if ws, err := e.Workers(ctx); err != nil || len(ws) != 0 {
		t.Fatalf("once its record expired: %+v, %v; want none", ws, err)
	}

	if _, err := runtime.New(runtime.Config{Store: f.store, WorkerTTL: time.Millisecond}); !errors.Is(err, runtime.ErrInvalidArgument) {
		t.Fatalf("a WorkerTTL under a second: %v, want ErrInvalidArgument", err)
	}
}

// sortedWords is s's space-separated words, sorted.
func sortedWords(s string) string {
	w := strings.Fields(s)
	slices.Sort(w)
	return strings.Join(w, " ")
}
