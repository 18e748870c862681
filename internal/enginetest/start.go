package enginetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/storage"
)

// startScenarios are the starts that say what an existing or ended ID
// means, carry an event, hold a key, or go into the application's
// transaction, and the transactional steps.
var startScenarios = []scenario{
	{"start/a start whose policy fails on an existing run is refused, and the run is left alone", testStartExistingFail},
	{"start/replacing a running run stops it and runs the new input", testStartReplaceRunning},
	{"start/an ended run is started anew only as its policy says", testStartEnded},
	{"start/32 concurrent SendOrStart calls for one ID create one run that receives all 32 events", testSendOrStart32},
	{"start/a singleton key answers starts with its unfinished holder", testStartSingleton},
	{"start/starts within a debounce window run once with the last input", testStartDebounce},
	{"tx/a run started in a rolled-back transaction never exists; one in a committed transaction runs", testStartTx},
	{"tx/a transactional step's writes commit with its checkpoint, and a failed attempt's roll back", testTxStep},
}

// blockUntilEvent registers "hold": it waits for "go" and returns its
// input plus the event's payload.
func blockUntilEvent(f *fixture, e *runtime.Engine) {
	f.must(runtime.Register(e, "hold", func(c *runtime.WorkflowContext, in int) (int, error) {
		n, err := runtime.WaitForEvent[int](c, "go", "test.go", 0)
		return in + n, err
	}))
}

func testStartExistingFail(f *fixture) {
	e := f.engine(config{}, func(e *runtime.Engine) { blockUntilEvent(f, e) })
	f.start(e)
	_, err := runtime.Start[int, int](f.ctx, e, "hold", 1, runtime.WithID("r1"))
	f.must(err)
	f.waitStatus(e, "r1", runtime.StatusWaiting)
	_, err = runtime.Start[int, int](f.ctx, e, "hold", 2, runtime.WithID("r1"), runtime.IfExists(runtime.ExistingFail))
	var refused *runtime.RefusedError
	if !errors.Is(err, runtime.ErrStartRefused) || !errors.As(err, &refused) || refused.RunID != "r1" || refused.Refusal != storage.RefusedExists {
		f.t.Fatalf("start of an existing ID with ExistingFail: %v; want a *RefusedError for r1 (exists)", err)
	}
	if !strings.Contains(err.Error(), `"r1"`) {
		f.t.Errorf("refusal %q does not name the run", err)
	}
	if got := f.info(e, "r1"); string(got.Input) != "1" || got.Status != runtime.StatusWaiting {
		f.t.Fatalf("refused start changed the run: input %s, status %s", got.Input, got.Status)
	}
	// The default still returns the run.
	run, err := runtime.Start[int, int](f.ctx, e, "hold", 3, runtime.WithID("r1"))
	f.must(err)
	f.must(e.SendEvent(f.ctx, "r1", "test.go", 10))
	if got, err := run.Result(f.ctx); err != nil || got != 11 {
		f.t.Fatalf("result %d, %v; want 11 (the first start's input)", got, err)
	}
}

func testStartReplaceRunning(f *fixture) {
	stopped, began := make(chan struct{}), make(chan struct{})
	var once, beginOnce sync.Once
	e := f.engine(config{lease: 2 * time.Second}, func(e *runtime.Engine) {
		f.must(runtime.Register(e, "work", func(c *runtime.WorkflowContext, in int) (int, error) {
			return runtime.Step(c, "work", runtime.StepOptions{}, func(sc runtime.StepContext) (int, error) {
				if in == 1 {
					beginOnce.Do(func() { close(began) })
					<-sc.Done() // the first input blocks until its run is stopped
					once.Do(func() { close(stopped) })
					return 0, sc.Err()
				}
				return in * 10, nil
			})
		}))
	})
	f.start(e)
	_, err := runtime.Start[int, int](f.ctx, e, "work", 1, runtime.WithID("r1"))
	f.must(err)
	select {
	case <-began:
	case <-f.ctx.Done():
		f.t.Fatal("the first run's step never ran")
	}
	run, err := runtime.Start[int, int](f.ctx, e, "work", 2, runtime.WithID("r1"), runtime.IfExists(runtime.ExistingReplace))
	f.must(err)
	if got, err := run.Result(f.ctx); err != nil || got != 20 {
		f.t.Fatalf("replacement's result %d, %v; want 20", got, err)
	}
	select {
	case <-stopped:
	case <-f.ctx.Done():
		f.t.Fatal("the replaced run's step was never stopped")
	}
	info := f.info(e, "r1")
	if info.Execution != 1 || string(info.Input) != "2" {
		f.t.Fatalf("replacement is in execution %d with input %s; want 1 and 2", info.Execution, info.Input)
	}
	execs, err := e.ListExecutions(f.ctx, "r1")
	f.must(err)
	if len(execs) != 1 {
		f.t.Fatalf("replacement lists %d executions; want 1 (the replaced run is gone)", len(execs))
	}
}

func testStartEnded(f *fixture) {
	e := f.engine(config{}, func(e *runtime.Engine) {
		f.must(runtime.Register(e, "double", func(c *runtime.WorkflowContext, in int) (int, error) { return in * 2, nil }))
	})
	f.start(e)
	run, err := runtime.Start[int, int](f.ctx, e, "double", 1, runtime.WithID("r1"))
	f.must(err)
	if got, err := run.Result(f.ctx); err != nil || got != 2 {
		f.t.Fatalf("result %d, %v", got, err)
	}
	for _, p := range []runtime.EndedPolicy{runtime.EndedReject, runtime.EndedReuseFailed} {
		_, err := runtime.Start[int, int](f.ctx, e, "double", 5, runtime.WithID("r1"), runtime.IfEnded(p))
		if !errors.Is(err, runtime.ErrStartRefused) {
			f.t.Fatalf("IfEnded(%q) on a complete run: %v; want ErrStartRefused", p, err)
		}
	}
	// The default returns the ended run.
	again, err := runtime.Start[int, int](f.ctx, e, "double", 7, runtime.WithID("r1"))
	f.must(err)
	if got, err := again.Result(f.ctx); err != nil || got != 2 {
		f.t.Fatalf("default start of an ended ID: %d, %v; want the ended run's 2", got, err)
	}
	anew, err := runtime.Start[int, int](f.ctx, e, "double", 21, runtime.WithID("r1"), runtime.IfEnded(runtime.EndedReuse))
	f.must(err)
	if got, err := anew.Result(f.ctx); err != nil || got != 42 {
		f.t.Fatalf("reused ID: %d, %v; want 42", got, err)
	}
}

func testSendOrStart32(f *fixture) {
	const n = 32
	e := f.engine(config{}, func(e *runtime.Engine) {
		f.must(runtime.Register(e, "collect", func(c *runtime.WorkflowContext, in int) ([]int, error) {
			var got []int
			for i := range n {
				v, err := runtime.WaitForEvent[int](c, fmt.Sprintf("ev%d", i), "test.add", 0)
				if err != nil {
					return nil, err
				}
				got = append(got, v)
			}
			return got, nil
		}))
	})
	f.start(e)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	ids := make(chan string, n)
	for i := range n {
		wg.Go(func() {
			run, err := runtime.SendOrStart[int, []int](f.ctx, e, "collect", "c1", 0, "test.add", i)
			if err != nil {
				errs <- err
				return
			}
			ids <- run.ID()
		})
	}
	wg.Wait()
	close(errs)
	close(ids)
	for err := range errs {
		f.t.Fatal(err)
	}
	for id := range ids {
		if id != "c1" {
			f.t.Fatalf("SendOrStart returned run %q; want c1", id)
		}
	}
	run, err := runtime.Get[[]int](f.ctx, e, "collect", "c1")
	f.must(err)
	got, err := run.Result(f.ctx)
	f.must(err)
	slices.Sort(got)
	for i := range n {
		if i >= len(got) || got[i] != i {
			f.t.Fatalf("the run received %v; want each of 0..%d once", got, n-1)
		}
	}
	page, _, err := e.ListRuns(f.ctx, runtime.ListRunsQuery{Workflow: "collect"})
	f.must(err)
	if len(page) != 1 {
		f.t.Fatalf("%d runs of collect; want 1", len(page))
	}
}

func testStartSingleton(f *fixture) {
	e := f.engine(config{}, func(e *runtime.Engine) { blockUntilEvent(f, e) })
	f.start(e)
	first, err := runtime.Start[int, int](f.ctx, e, "hold", 1, runtime.WithID("a"), runtime.WithSingleton("nightly"))
	f.must(err)
	second, err := runtime.Start[int, int](f.ctx, e, "hold", 2, runtime.WithID("b"), runtime.WithSingleton("nightly"))
	f.must(err)
	if second.ID() != "a" {
		f.t.Fatalf("a second start of the singleton got run %q; want the holder a", second.ID())
	}
	if _, err := e.Get(f.ctx, "b"); !errors.Is(err, runtime.ErrRunNotFound) {
		f.t.Fatalf("run b: %v; want it never created", err)
	}
	f.must(e.SendEvent(f.ctx, "a", "test.go", 0))
	if got, err := first.Result(f.ctx); err != nil || got != 1 {
		f.t.Fatalf("holder's result %d, %v", got, err)
	}
	third, err := runtime.Start[int, int](f.ctx, e, "hold", 3, runtime.WithID("c"), runtime.WithSingleton("nightly"))
	f.must(err)
	if third.ID() != "c" {
		f.t.Fatalf("a start after the holder ended got run %q; want a new run c", third.ID())
	}
}

func testStartDebounce(f *fixture) {
	e := f.engine(config{}, func(e *runtime.Engine) {
		f.must(runtime.Register(e, "echo", func(c *runtime.WorkflowContext, in int) (int, error) { return in, nil }))
	})
	f.start(e)
	// Within a window of seconds, the starts join the first one's run;
	// one that a loaded machine delays past the window starts another.
	var joined []int
	var first string
	for i := 1; i <= 5; i++ {
		run, err := runtime.Start[int, int](f.ctx, e, "echo", i, runtime.WithID(fmt.Sprintf("d%d", i)), runtime.WithDebounce("k", 3*time.Second))
		f.must(err)
		if first == "" {
			first = run.ID()
		}
		if run.ID() == first {
			joined = append(joined, i)
		}
	}
	if len(joined) < 2 {
		f.t.Fatalf("only %v joined the window's run", joined)
	}
	run, err := runtime.Get[int](f.ctx, e, "echo", first)
	f.must(err)
	if got, err := run.Result(f.ctx); err != nil || got != joined[len(joined)-1] {
		f.t.Fatalf("the window's run returned %d, %v; want the last joined input %d", got, err, joined[len(joined)-1])
	}
}

// txOf is the fixture's store as a transactional one, or nil.
func (f *fixture) txOf() storage.TxStore {
	ts, _ := f.store.(storage.TxStore)
	return ts
}

func testStartTx(f *fixture) {
	e := f.engine(config{}, func(e *runtime.Engine) {
		f.must(runtime.Register(e, "double", func(c *runtime.WorkflowContext, in int) (int, error) { return in * 2, nil }))
	})
	f.start(e)
	ts := f.txOf()
	if ts == nil {
		// A store without transactions says so, and writes nothing.
		_, err := runtime.StartTx[int, int](f.ctx, e, "not a tx", "double", 1, runtime.WithID("t1"))
		if !errors.Is(err, runtime.ErrInvalidArgument) || !strings.Contains(err.Error(), "cannot write inside an application's transaction") {
			f.t.Fatalf("StartTx on %T: %v; want a refusal that says why", f.store, err)
		}
		if _, err := e.BeginTx(f.ctx); err == nil {
			f.t.Fatalf("BeginTx on %T succeeded", f.store)
		}
		if _, err := e.Get(f.ctx, "t1"); !errors.Is(err, runtime.ErrRunNotFound) {
			f.t.Fatalf("refused StartTx left run t1: %v", err)
		}
		return
	}
	tx, err := e.BeginTx(f.ctx)
	f.must(err)
	_, err = runtime.StartTx[int, int](f.ctx, e, tx.Tx(), "double", 1, runtime.WithID("rolled"))
	f.must(err)
	f.must(tx.Rollback(f.ctx))
	if _, err := e.Get(f.ctx, "rolled"); !errors.Is(err, runtime.ErrRunNotFound) {
		f.t.Fatalf("a run started in a rolled-back transaction: %v; want ErrRunNotFound", err)
	}
	tx, err = e.BeginTx(f.ctx)
	f.must(err)
	run, err := runtime.StartTx[int, int](f.ctx, e, tx.Tx(), "double", 4, runtime.WithID("kept"))
	f.must(err)
	f.must(tx.Commit(f.ctx))
	if got, err := run.Result(f.ctx); err != nil || got != 8 {
		f.t.Fatalf("a run started in a committed transaction: %d, %v; want 8", got, err)
	}
	// A wrong transaction type is refused with nothing written.
	if _, err := runtime.StartTx[int, int](f.ctx, e, 42, "double", 1, runtime.WithID("bad")); !errors.Is(err, runtime.ErrInvalidArgument) {
		f.t.Fatalf("StartTx with an int for a transaction: %v; want ErrInvalidArgument", err)
	}
}

func testTxStep(f *fixture) {
	var mu sync.Mutex
	attempts := 0
	var e *runtime.Engine
	e = f.engine(config{}, func(e *runtime.Engine) {
		f.must(runtime.Register(e, "marker", func(c *runtime.WorkflowContext, in int) (int, error) { return in, nil }))
		f.must(runtime.Register(e, "pay", func(c *runtime.WorkflowContext, in int) (int, error) {
			return runtime.TxStep(c, "pay", runtime.StepOptions{Retries: 2, Backoff: time.Millisecond}, func(sc runtime.StepContext, tx any) (int, error) {
				mu.Lock()
				attempts++
				n := attempts
				mu.Unlock()
				// The application's write, in the step's transaction.
				if _, err := runtime.StartTx[int, int](sc, e, tx, "marker", n, runtime.WithID(fmt.Sprintf("marker-%d", n))); err != nil {
					return 0, err
				}
				if n == 1 {
					return 0, errors.New("the first attempt fails after its write")
				}
				return in + n, nil
			})
		}))
	})
	f.start(e)
	run, err := runtime.Start[int, int](f.ctx, e, "pay", 100, runtime.WithID("p1"))
	f.must(err)
	got, err := run.Result(context.WithoutCancel(f.ctx))
	if f.txOf() == nil {
		if err == nil || !strings.Contains(err.Error(), "has no transactions") {
			f.t.Fatalf("a transactional step on %T: %d, %v; want the step refused, saying why", f.store, got, err)
		}
		return
	}
	if err != nil || got != 102 {
		f.t.Fatalf("result %d, %v; want 102 (the second attempt's)", got, err)
	}
	if _, err := e.Get(f.ctx, "marker-1"); !errors.Is(err, runtime.ErrRunNotFound) {
		f.t.Fatalf("the failed attempt's write: %v; want it rolled back", err)
	}
	if _, err := e.Get(f.ctx, "marker-2"); err != nil {
		f.t.Fatalf("the successful attempt's write: %v; want it committed with the checkpoint", err)
	}
	steps := f.steps(e, "p1", 0)
	if s := findStep(steps, "pay"); s == nil || len(s.Attempts) != 2 {
		f.t.Fatalf("step pay listed as %+v; want two attempts", s)
	}
}
