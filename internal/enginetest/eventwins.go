package enginetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/storage"
)

var eventWinsScenarios = []scenario{
	{"eventwins/an event case wins SelectCancel while the step case runs, and cancels it", testEventWinsOverStep},
	{"eventwins/a child case wins SelectCancel while the step case runs, and cancels it", testChildWinsOverStep},
	{"eventwins/a worker that dies once it took the event hands over to the same branch", testEventWinsAcrossCrash},
	{"eventwins/a lone Await of an event returns while another step of the run runs", testAwaitEventWhileStepRuns},
}

const stopTopic = "enginetest.eventwins.stop"

// longStep is a workflow's step that runs until its context is
// cancelled: how often it began, and the causes its contexts were
// cancelled with.
type longStep struct {
	mu      sync.Mutex
	runs    int
	causes  []error
	started chan struct{}
}

func newLongStep() *longStep { return &longStep{started: make(chan struct{}, 8)} }

func (l *longStep) run(sc runtime.StepContext) (string, error) {
	l.mu.Lock()
	l.runs++
	l.mu.Unlock()
	l.started <- struct{}{}
	<-sc.Done()
	l.mu.Lock()
	l.causes = append(l.causes, context.Cause(sc))
	l.mu.Unlock()
	return "", sc.Err()
}

func (l *longStep) stats() (runs int, causes []error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.runs, append([]error(nil), l.causes...)
}

// registerStopper registers the workflow name: SelectCancel of an event
// future of stopTopic against the long step, returning the branch taken.
func registerStopper(f *fixture, e *runtime.Engine, name string, l *longStep) {
	f.must(runtime.Register(e, name, func(c *runtime.WorkflowContext, _ int) (string, error) {
		stop := runtime.OnEvent[string](c, "stop", stopTopic)
		long := runtime.StepAsync(c, "long@v1", runtime.StepOptions{}, l.run)
		i, err := runtime.SelectCancel(c, "pick", stop, long)
		if err != nil {
			return "", err
		}
		if i != 0 {
			v, err := long.Await()
			return "step branch: " + v, err
		}
		v, err := stop.Await()
		if err != nil {
			return "", err
		}
		_, lerr := long.Await()
		return fmt.Sprintf("event branch: %s; step canceled %v", v, errors.Is(lerr, runtime.ErrCanceled)), nil
	}))
}

const stopperWant = "event branch: stop; step canceled true"

// check checks that the step began at least once and at most most
// times, that every beginning saw its context cancelled, at least
// canceled of them with ErrCanceled as the cause (a dead worker's step is
// cancelled by its stop instead), and that the step's cancellation is
// checkpointed.
func (l *longStep) check(f *fixture, e *runtime.Engine, id string, most, canceled int) {
	f.t.Helper()
	f.eventually("every beginning of the step saw its context cancelled", func() bool {
		runs, causes := l.stats()
		return runs > 0 && len(causes) == runs
	})
	runs, causes := l.stats()
	if runs > most {
		f.t.Errorf("the step began %d times, want at most %d", runs, most)
	}
	n := 0
	for _, c := range causes {
		if errors.Is(c, runtime.ErrCanceled) {
			n++
		}
	}
	if n < canceled {
		f.t.Errorf("the step's contexts were cancelled with %v, want at least %d ErrCanceled", causes, canceled)
	}
	if s := findStep(f.steps(e, id, 0), "long@v1"); s == nil || !errors.Is(s.Err, runtime.ErrCanceled) {
		f.t.Errorf("long@v1 = %+v, want the cancellation checkpointed", s)
	}
}

// testEventWinsOverStep: the event, sent while the step runs, wins; the
// step, which only a cancel ends, is cancelled by the select.
func testEventWinsOverStep(f *fixture) {
	l := newLongStep()
	e := f.engine(config{}, func(e *runtime.Engine) { registerStopper(f, e, "stopper", l) })
	f.start(e)
	run, err := runtime.Start[int, string](f.ctx, e, "stopper", 0, runtime.WithID("r1"))
	f.must(err)
	f.await(l.started, "the step began")
	f.must(e.SendEvent(f.ctx, "r1", stopTopic, "stop"))
	out, err := run.Result(f.ctx)
	f.must(err)
	if out != stopperWant {
		f.t.Fatalf("result %q, want %q", out, stopperWant)
	}
	l.check(f, e, "r1", 1, 1)
	replaysClean(f, e, "r1")
}

// testChildWinsOverStep: a child that ends as soon as the step began
// wins over the step.
func testChildWinsOverStep(f *fixture) {
	l := newLongStep()
	e := f.engine(config{}, func(e *runtime.Engine) {
		f.must(runtime.Register(e, "quick", func(c *runtime.WorkflowContext, n int) (int, error) {
			// Once the parent's step runs, so that the select cancels it
			// running, not before it began.
			return runtime.Step(c, "after-step@v1", runtime.StepOptions{}, func(sc runtime.StepContext) (int, error) {
				select {
				case <-l.started:
				case <-sc.Done():
					return 0, sc.Err()
				}
				return n + 1, nil
			})
		}))
		f.must(runtime.Register(e, "parent", func(c *runtime.WorkflowContext, _ int) (string, error) {
			long := runtime.StepAsync(c, "long@v1", runtime.StepOptions{}, l.run)
			kid := runtime.CallChildAsync[int](c, "kid", "quick", 41)
			i, err := runtime.SelectCancel(c, "pick", long, kid)
			if err != nil {
				return "", err
			}
			n, err := kid.Await()
			if err != nil {
				return "", err
			}
			_, lerr := long.Await()
			return fmt.Sprintf("case %d: %d; step canceled %v", i, n, errors.Is(lerr, runtime.ErrCanceled)), nil
		}))
	})
	f.start(e)
	run, err := runtime.Start[int, string](f.ctx, e, "parent", 0, runtime.WithID("p1"))
	f.must(err)
	out, err := run.Result(f.ctx)
	f.must(err)
	if want := "case 1: 42; step canceled true"; out != want {
		f.t.Fatalf("result %q, want %q", out, want)
	}
	l.check(f, e, "p1", 1, 1)
	replaysClean(f, e, "p1")
}

// takeDyingStore is a worker's store whose process dies right after a
// TakeEvent that took a case lands.
type takeDyingStore struct {
	dyingStore
}

func (d *takeDyingStore) TakeEvent(ctx context.Context, req storage.TakeEventRequest) (*storage.Checkpoint, error) {
	cp, err := d.dyingStore.TakeEvent(ctx, req)
	if err == nil && cp != nil {
		d.dead.Store(true)
		return nil, errDead
	}
	return cp, err
}

// testEventWinsAcrossCrash: the first worker dies right after it took
// the event while the step ran; another takes the run over and finishes
// it with the event branch, the event read from the checkpoint the take
// wrote. The step began at most once more, on the second worker, and was
// cancelled there.
func testEventWinsAcrossCrash(f *fixture) {
	l := newLongStep()
	dying := &takeDyingStore{dyingStore: dyingStore{Store: f.store}}
	a := f.engine(config{lease: 300 * time.Millisecond, store: dying}, func(e *runtime.Engine) { registerStopper(f, e, "stopper", l) })
	stopA := f.start(a)
	run, err := runtime.Start[int, string](f.ctx, a, "stopper", 0, runtime.WithID("r1"))
	f.must(err)
	f.await(l.started, "the step began")
	f.must(a.SendEvent(f.ctx, "r1", stopTopic, "stop"))
	f.eventually("the first worker died after taking the event", dying.dead.Load)
	stopA()
	if s := findStep(f.steps(a, "r1", 0), "stop#0"); s == nil {
		f.t.Fatal("the event the dead worker took is not the run's checkpoint")
	}
	b := f.engine(config{lease: 300 * time.Millisecond}, func(e *runtime.Engine) { registerStopper(f, e, "stopper", l) })
	f.start(b)
	out, err := run.Result(f.ctx)
	f.must(err)
	if out != stopperWant {
		f.t.Fatalf("result %q, want %q", out, stopperWant)
	}
	runs, _ := l.stats()
	l.check(f, b, "r1", 2, runs-1)
	replaysClean(f, b, "r1")
}

// await waits for a value on ch, failing the scenario when its context
// ends first.
func (f *fixture) await(ch <-chan struct{}, what string) {
	f.t.Helper()
	select {
	case <-ch:
	case <-f.ctx.Done():
		f.t.Fatalf("%s: never happened", what)
	}
}

// testAwaitEventWhileStepRuns: Await of an event future alone returns as
// soon as the event comes while another step future of the run still
// runs, which is cancelled only after (and by) the workflow.
func testAwaitEventWhileStepRuns(f *fixture) {
	l := newLongStep()
	var once sync.Once
	var atAwait string // the step's state when the Await returned, live
	e := f.engine(config{}, func(e *runtime.Engine) {
		f.must(runtime.Register(e, "awaiter", func(c *runtime.WorkflowContext, _ int) (string, error) {
			long := runtime.StepAsync(c, "long@v1", runtime.StepOptions{}, l.run)
			stop := runtime.OnEvent[string](c, "stop", stopTopic)
			v, err := stop.Await()
			if err != nil {
				return "", err
			}
			once.Do(func() {
				runs, causes := l.stats()
				atAwait = fmt.Sprintf("began %d, ended %d", runs, len(causes))
			})
			long.Cancel()
			return v, nil
		}))
	})
	f.start(e)
	run, err := runtime.Start[int, string](f.ctx, e, "awaiter", 0, runtime.WithID("a1"))
	f.must(err)
	f.await(l.started, "the step began")
	f.must(e.SendEvent(f.ctx, "a1", stopTopic, "stop"))
	out, err := run.Result(f.ctx)
	f.must(err)
	if out != "stop" || atAwait != "began 1, ended 0" {
		f.t.Fatalf("result %q, the step %s when the Await returned; want stop, while the step ran (began 1, ended 0)", out, atAwait)
	}
	l.check(f, e, "a1", 1, 1)
	replaysClean(f, e, "a1")
}
