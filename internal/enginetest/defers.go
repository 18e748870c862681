package enginetest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/storage"
)

var deferScenarios = []scenario{
	{"DeferredStepAtPark", testDeferredStepAtPark},
	{"SagaWithDefers", testSagaWithDefers},
	{"SagaWithDefersAcrossCrash", testSagaWithDefersAcrossCrash},
}

// sideEffects counts the runs of each step function, by run and step.
type sideEffects struct {
	mu sync.Mutex
	n  map[string]map[string]int
}

func (s *sideEffects) add(run, step string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n == nil {
		s.n = map[string]map[string]int{}
	}
	if s.n[run] == nil {
		s.n[run] = map[string]int{}
	}
	s.n[run][step]++
}

func (s *sideEffects) of(run string) map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.n[run])
}

// testDeferredStepAtPark: a step deferred before a sleep runs once, when
// the run really ends, not also when it parks at the sleep (parking
// unwinds the workflow goroutine, which runs its defers).
func testDeferredStepAtPark(f *fixture) {
	var seen sideEffects
	e := f.engine(config{}, func(e *runtime.Engine) {
		f.must(runtime.Register(e, "deferpark", func(c *runtime.WorkflowContext, _ int) (int, error) {
			defer runtime.Do(c, "cleanup@v1", runtime.StepOptions{}, func(sc runtime.StepContext) error {
				seen.add(sc.RunID(), "cleanup")
				return nil
			})
			if err := c.Sleep("nap", 50*time.Millisecond); err != nil {
				return 0, err
			}
			return 1, nil
		}))
	})
	f.start(e)
	_, err := runtime.Start[int, int](f.ctx, e, "deferpark", 0, runtime.WithID("r1"))
	f.must(err)
	f.waitStatus(e, "r1", runtime.StatusComplete)
	if got := seen.of("r1")["cleanup"]; got != 1 {
		f.t.Fatalf("the deferred cleanup step ran %d times, want 1: a durable call made while the run parks must not run", got)
	}
	if s := findStep(f.steps(e, "r1", 0), "cleanup@v1"); s == nil || s.Status != runtime.StepComplete {
		f.t.Fatalf("cleanup@v1 = %+v, want a completed checkpoint", s)
	}
}

// sagaTopic is the topic the saga waits on for its approval.
const sagaTopic = "enginetest.saga.approve"

// registerSaga registers, as name, a transfer written as Go sagas are:
// each compensation deferred once its action succeeded, one form keyed on
// a done flag and one on the named error result, and an unconditional
// deferred audit. The run parks at a sleep and at an approval wait; a
// false approval declines the transfer.
func registerSaga(f *fixture, e *runtime.Engine, name string, seen *sideEffects) {
	f.must(runtime.Register(e, name, func(c *runtime.WorkflowContext, _ int) (out string, err error) {
		step := func(key string) error {
			return runtime.Do(c, key+"@v1", runtime.StepOptions{}, func(sc runtime.StepContext) error {
				seen.add(sc.RunID(), key)
				return nil
			})
		}
		defer step("audit")
		done := false
		if err := step("debit"); err != nil {
			return "", err
		}
		defer func() {
			if !done {
				_ = step("refund-debit")
			}
		}()
		if err = step("credit"); err != nil {
			return "", err
		}
		defer func() {
			if err != nil {
				_ = step("refund-credit")
			}
		}()
		if err = c.Sleep("settle", 10*time.Millisecond); err != nil {
			return "", err
		}
		approved, err := runtime.WaitForEvent[bool](c, "approval", sagaTopic, 0)
		if err != nil {
			return "", err
		}
		if !approved {
			return "", errors.New("declined")
		}
		done = true
		return "paid", nil
	}))
}

// sagaWant is what each step function of the saga ran, approved or not.
func sagaWant(approved bool) map[string]int {
	if approved {
		return map[string]int{"debit": 1, "credit": 1, "audit": 1}
	}
	return map[string]int{"debit": 1, "credit": 1, "audit": 1, "refund-debit": 1, "refund-credit": 1}
}

// checkSaga checks a saga run's outcome and that each of its step
// functions ran exactly as often as sagaWant says.
func checkSaga(f *fixture, e *runtime.Engine, id string, approved bool, seen *sideEffects, where string) {
	f.t.Helper()
	want := runtime.StatusComplete
	if !approved {
		want = runtime.StatusErrored
	}
	info := f.waitStatus(e, id, want)
	if !approved && (info.Err == nil || info.Err.Error() == "") {
		f.t.Errorf("%s: run %s errored without its error", where, id)
	}
	if got := seen.of(id); !maps.Equal(got, sagaWant(approved)) {
		f.t.Errorf("%s: run %s (approved %v) ran its steps %v, want %v: each refund exactly once, and only when the transfer failed",
			where, id, approved, got, sagaWant(approved))
	}
}

// testSagaWithDefers: the saga pays each refund exactly once, and none
// when it succeeds, though it parks twice with its compensations deferred.
func testSagaWithDefers(f *fixture) {
	var seen sideEffects
	e := f.engine(config{}, func(e *runtime.Engine) { registerSaga(f, e, "saga", &seen) })
	f.start(e)
	for _, approved := range []bool{true, false} {
		id := fmt.Sprintf("approved-%v", approved)
		_, err := runtime.Start[int, string](f.ctx, e, "saga", 0, runtime.WithID(id))
		f.must(err)
		f.eventually(id+" waits for its approval", func() bool {
			return findStep(f.steps(e, id, 0), "approval") != nil
		})
		f.must(e.SendEvent(f.ctx, id, sagaTopic, approved))
	}
	for _, approved := range []bool{true, false} {
		checkSaga(f, e, fmt.Sprintf("approved-%v", approved), approved, &seen, "no crash")
	}
}

// writeDyingStore is a worker's store whose process dies right after its
// nth write (a checkpoint, a suspension, an event taken or a completion)
// lands: the write is kept, the worker hears an error, and every later
// call fails.
type writeDyingStore struct {
	dyingStore
	after  int32
	writes atomic.Int32
}

func (d *writeDyingStore) landed(err error) error {
	if err == nil && d.writes.Add(1) == d.after {
		d.dead.Store(true)
		return errDead
	}
	return err
}

func (d *writeDyingStore) Checkpoint(ctx context.Context, req storage.CheckpointRequest) (storage.CheckpointResult, error) {
	res, err := d.dyingStore.Checkpoint(ctx, req)
	return res, d.landed(err)
}

func (d *writeDyingStore) Suspend(ctx context.Context, req storage.SuspendRequest) (storage.SuspendResult, error) {
	res, err := d.dyingStore.Suspend(ctx, req)
	return res, d.landed(err)
}

func (d *writeDyingStore) TakeEvent(ctx context.Context, req storage.TakeEventRequest) (*storage.Checkpoint, error) {
	cp, err := d.dyingStore.TakeEvent(ctx, req)
	if cp == nil {
		return cp, err // nothing written
	}
	return cp, d.landed(err)
}

func (d *writeDyingStore) Complete(ctx context.Context, req storage.CompleteRequest) error {
	return d.landed(d.dyingStore.Complete(ctx, req))
}

// testSagaWithDefersAcrossCrash: the worker dies right after each write
// of the saga in turn, approved and declined, and another takes the run
// over; each refund is still paid exactly once (and none on success), in
// neither process at the crash.
func testSagaWithDefersAcrossCrash(f *fixture) {
	const writes = 9 // more than a saga makes: the last cases do not crash
	var seen sideEffects
	type crashCase struct {
		id, workflow string
		approved     bool
		dying        *writeDyingStore
		engine       *runtime.Engine
		stop         func()
	}
	var cases []*crashCase
	for n := 1; n <= writes; n++ {
		for _, approved := range []bool{true, false} {
			c := &crashCase{id: fmt.Sprintf("crash-%d-%v", n, approved), workflow: fmt.Sprintf("saga.%d.%v", n, approved), approved: approved}
			c.dying = &writeDyingStore{dyingStore: dyingStore{Store: f.store}, after: int32(n)}
			// A lease long enough that a loaded machine does not let it
			// lapse while the worker lives: a lapsed lease lets a step run
			// twice by design, which is not what this scenario tests.
			c.engine = f.engine(config{lease: time.Second, store: c.dying}, func(e *runtime.Engine) { registerSaga(f, e, c.workflow, &seen) })
			_, err := runtime.Start[int, string](f.ctx, c.engine, c.workflow, 0, runtime.WithID(c.id))
			f.must(err)
			f.must(c.engine.SendEvent(f.ctx, c.id, sagaTopic, approved))
			c.stop = f.start(c.engine)
			cases = append(cases, c)
		}
	}
	// Each first worker dies at its write, or finishes the run when it
	// makes fewer writes; only then does the second worker start.
	for _, c := range cases {
		f.eventually(c.id+"'s first worker died or finished", func() bool {
			return c.dying.dead.Load() || f.info(c.engine, c.id).Status.Finished()
		})
		c.stop()
	}
	survivor := f.engine(config{}, func(e *runtime.Engine) {
		for _, c := range cases {
			registerSaga(f, e, c.workflow, &seen)
		}
	})
	f.start(survivor)
	for _, c := range cases {
		checkSaga(f, survivor, c.id, c.approved, &seen, fmt.Sprintf("worker died after write %d", c.dying.after))
	}
}
