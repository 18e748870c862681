package enginetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/storage"
)

var cancelFutureScenarios = []scenario{
	{"cancelfutures/a pick-first ends with the first step, cancels the others and waits for none", testCancelPickFirst},
	{"cancelfutures/a cancelled timer and event future let go of their waits", testCancelTimerEvent},
	{"cancelfutures/a cancellation recorded before a crash is replayed and no step runs again", testCancelAcrossCrash},
}

// pickFirst is a pick-first workflow's side of a scenario: how often each
// step function ran, the causes the losers' contexts were cancelled with,
// and what each execution of the workflow saw after its select.
type pickFirst struct {
	mu     sync.Mutex
	runs   map[string]int
	causes map[string]error
	seen   []string
	// started has a value for each loser that began; release lets the
	// loser that ignores its context return, and deafDone is closed when
	// it has.
	started  chan struct{}
	release  chan struct{}
	deafDone chan struct{}
}

func newPickFirst() *pickFirst {
	return &pickFirst{runs: map[string]int{}, causes: map[string]error{}, started: make(chan struct{}, 2),
		release: make(chan struct{}), deafDone: make(chan struct{})}
}

func (p *pickFirst) ran(step string) {
	p.mu.Lock()
	p.runs[step]++
	p.mu.Unlock()
}

func (p *pickFirst) caused(step string, err error) {
	p.mu.Lock()
	p.causes[step] = err
	p.mu.Unlock()
}

// register registers the workflow name on e: three step futures, of
// which "fast" ends once the other two have begun; "polite" returns when
// its context is cancelled; "deaf" ignores its context until the scenario
// releases it. Every step may retry. The run returns the winner's index
// and value and what each loser's Await returned; a step after the select
// gives a crash a write to land at.
func (p *pickFirst) register(f *fixture, e *runtime.Engine, name string) {
	f.must(runtime.Register(e, name, func(c *runtime.WorkflowContext, _ int) (string, error) {
		opts := runtime.StepOptions{Retries: 3, Backoff: time.Millisecond}
		polite := runtime.StepAsync(c, "polite@v1", opts, func(sc runtime.StepContext) (string, error) {
			p.ran("polite")
			p.started <- struct{}{}
			<-sc.Done()
			p.caused("polite", context.Cause(sc))
			return "", sc.Err()
		})
		deaf := runtime.StepAsync(c, "deaf@v1", opts, func(sc runtime.StepContext) (string, error) {
			p.ran("deaf")
			p.started <- struct{}{}
			<-p.release
			p.caused("deaf", context.Cause(sc))
			close(p.deafDone)
			return "late", nil
		})
		fast := runtime.StepAsync(c, "fast@v1", opts, func(sc runtime.StepContext) (string, error) {
			p.ran("fast")
			<-p.started
			<-p.started
			return "first", nil
		})
		i, err := runtime.SelectCancel(c, "pick", polite, deaf, fast)
		if err != nil {
			return "", err
		}
		v, err := fast.Await()
		if err != nil {
			return "", err
		}
		out := fmt.Sprintf("case %d: %s", i, v)
		for _, l := range []*runtime.Future[string]{polite, deaf} {
			_, err := l.Await()
			out += fmt.Sprintf("; %s canceled %v", l.Key(), errors.Is(err, runtime.ErrCanceled))
		}
		p.mu.Lock()
		p.seen = append(p.seen, out)
		p.mu.Unlock()
		if err := runtime.Do(c, "after@v1", runtime.StepOptions{}, func(sc runtime.StepContext) error {
			p.ran("after")
			return nil
		}); err != nil {
			return "", err
		}
		return out, nil
	}))
}

const pickFirstWant = "case 2: first; polite@v1 canceled true; deaf@v1 canceled true"

// check checks that each step function ran once, that the losers saw
// ErrCanceled as their contexts' cause, and that the losers' checkpoints
// hold the cancellation.
func (p *pickFirst) check(f *fixture, e *runtime.Engine, id string) {
	f.t.Helper()
	f.eventually("the polite loser saw its cancellation", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.causes["polite"] != nil
	})
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, step := range []string{"polite", "deaf"} {
		if !errors.Is(p.causes[step], runtime.ErrCanceled) {
			f.t.Errorf("%s's context was cancelled with %v, want ErrCanceled", step, p.causes[step])
		}
	}
	for _, step := range []string{"fast", "polite", "deaf", "after"} {
		if n := p.runs[step]; n != 1 {
			f.t.Errorf("step %s ran %d times, want 1 (no retry after a cancel, nothing run again)", step, n)
		}
	}
	steps := f.steps(e, id, 0)
	for _, key := range []string{"polite@v1", "deaf@v1"} {
		s := findStep(steps, key)
		if s == nil || !errors.Is(s.Err, runtime.ErrCanceled) {
			f.t.Errorf("%s = %+v, want the cancellation checkpointed", key, s)
		}
	}
}

// testCancelPickFirst: SelectCancel over three steps returns the first
// and the run completes while a loser still ignores its cancelled
// context; neither loser is retried.
func testCancelPickFirst(f *fixture) {
	p := newPickFirst()
	e := f.engine(config{}, func(e *runtime.Engine) { p.register(f, e, "pick") })
	f.start(e)
	run, err := runtime.Start[int, string](f.ctx, e, "pick", 0, runtime.WithID("r1"))
	f.must(err)
	out, err := run.Result(f.ctx)
	f.must(err)
	if out != pickFirstWant {
		f.t.Fatalf("result %q, want %q", out, pickFirstWant)
	}
	// The run completed while the deaf loser had not returned.
	select {
	case <-p.deafDone:
		f.t.Fatal("the deaf loser returned before the run completed")
	default:
	}
	close(p.release)
	<-p.deafDone
	p.check(f, e, "r1")
	replaysClean(f, e, "r1")
}

// replaysClean checks that the replayer follows run id's history to its
// result: the cancellations recorded replay as they ran.
func replaysClean(f *fixture, e *runtime.Engine, id string) {
	f.t.Helper()
	rep, err := e.Replay(f.ctx, runtime.ReplayOptions{RunIDs: []string{id}})
	f.must(err)
	if rep.Replayed != 1 || len(rep.Divergences) > 0 || len(rep.Skipped) > 0 {
		f.t.Fatalf("replay of %s: %+v, want it replayed without divergence", id, rep)
	}
}

// testCancelTimerEvent: a cancelled timer is ready at once with
// ErrCanceled, and a cancelled event future no longer waits with the run:
// an event of its topic sent while the run waits on another is not taken.
func testCancelTimerEvent(f *fixture) {
	const (
		dropped = "enginetest.cancel.dropped"
		goOn    = "enginetest.cancel.go"
	)
	e := f.engine(config{}, func(e *runtime.Engine) {
		f.must(runtime.Register(e, "letgo", func(c *runtime.WorkflowContext, _ int) (string, error) {
			timer := c.Timer("nap", time.Hour)
			ev := runtime.OnEvent[string](c, "dropped", dropped)
			timer.Cancel()
			ev.Cancel()
			var out []string
			if _, err := timer.Await(); !errors.Is(err, runtime.ErrCanceled) {
				out = append(out, fmt.Sprintf("timer: %v", err))
			}
			v, err := runtime.WaitForEvent[string](c, "go", goOn, 0)
			if err != nil {
				return "", err
			}
			out = append(out, v)
			if _, err := ev.Await(); !errors.Is(err, runtime.ErrCanceled) {
				out = append(out, fmt.Sprintf("event: %v", err))
			}
			return strings.Join(out, "; "), nil
		}))
	})
	f.start(e)
	run, err := runtime.Start[int, string](f.ctx, e, "letgo", 0, runtime.WithID("r1"))
	f.must(err)
	f.waitStatus(e, "r1", runtime.StatusWaiting)
	f.must(e.SendEvent(f.ctx, "r1", dropped, "not for the cancelled future"))
	f.must(e.SendEvent(f.ctx, "r1", goOn, "go"))
	out, err := run.Result(f.ctx)
	f.must(err)
	if out != "go" {
		f.t.Fatalf("result %q, want %q", out, "go")
	}
	if s := findStep(f.steps(e, "r1", 0), "dropped#0"); s != nil {
		f.t.Fatalf("the cancelled event future took an event: %+v", s)
	}
}

// cancelDyingStore is a worker's store whose process dies right after the
// checkpoint of key lands.
type cancelDyingStore struct {
	dyingStore
	key string
}

func (d *cancelDyingStore) Checkpoint(ctx context.Context, req storage.CheckpointRequest) (storage.CheckpointResult, error) {
	res, err := d.dyingStore.Checkpoint(ctx, req)
	if err == nil && req.Checkpoint.Key == d.key {
		d.dead.Store(true)
		return res, errDead
	}
	return res, err
}

// testCancelAcrossCrash: the worker dies once the pick-first's last
// cancellation landed, or the step after it, before completing; another
// worker replays the run to the same results, running no step again.
func testCancelAcrossCrash(f *fixture) {
	for i, key := range []string{"deaf@v1", "after@v1"} {
		p := newPickFirst()
		name, id := fmt.Sprintf("pick.%d", i), fmt.Sprintf("r%d", i)
		dying := &cancelDyingStore{dyingStore: dyingStore{Store: f.store}, key: key}
		a := f.engine(config{lease: 300 * time.Millisecond, store: dying}, func(e *runtime.Engine) { p.register(f, e, name) })
		stopA := f.start(a)
		run, err := runtime.Start[int, string](f.ctx, a, name, 0, runtime.WithID(id))
		f.must(err)
		f.eventually("the first worker died after writing "+key, dying.dead.Load)
		close(p.release) // the first worker's deaf loser may end now
		<-p.deafDone
		stopA()
		b := f.engine(config{lease: 300 * time.Millisecond}, func(e *runtime.Engine) { p.register(f, e, name) })
		f.start(b)
		out, err := run.Result(f.ctx)
		f.must(err)
		if out != pickFirstWant {
			f.t.Fatalf("%s: result %q, want %q", key, out, pickFirstWant)
		}
		p.mu.Lock()
		seen := p.seen
		p.mu.Unlock()
		want := 2 // the first worker saw the outcome before it died
		if key == "deaf@v1" {
			want = 1
		}
		if len(seen) != want || seen[len(seen)-1] != pickFirstWant {
			f.t.Fatalf("crash after %s: the executions saw %q, want %q %d time(s)", key, seen, pickFirstWant, want)
		}
		p.check(f, b, id)
		replaysClean(f, b, id)
	}
}
