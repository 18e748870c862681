package runtime_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/storage"
	"github.com/stemflow/stem/stores/memstore"
)

// readCounter counts an engine's reads of runs, the runs it claimed and
// its claim calls; it announces runs' ends as its memstore does.
type readCounter struct {
	*memstore.Store
	reads, claims, claimCalls atomic.Int64
}

func (c *readCounter) GetRun(ctx context.Context, id string) (storage.RunRecord, error) {
	c.reads.Add(1)
	return c.Store.GetRun(ctx, id)
}

func (c *readCounter) Claim(ctx context.Context, req storage.ClaimRequest) ([]storage.ClaimedRun, error) {
	got, err := c.Store.Claim(ctx, req)
	c.claimCalls.Add(1)
	c.claims.Add(int64(len(got)))
	return got, err
}

// A caller that starts a run on a working engine and awaits its result,
// one run at a time, makes the store neither claim nor read it: the run
// starts leased to the engine, and its outcome comes from the execution
// that ended it.
func TestOneRunAtATimeNeitherClaimedNorRead(t *testing.T) {
	t.Parallel()
	st := &readCounter{Store: memstore.New(memstore.Options{})}
	e, err := runtime.New(runtime.Config{Store: st, Workers: 1})
	must(t, err)
	t.Cleanup(func() { e.Close() })
	must(t, runtime.Register(e, "steps", func(c *runtime.WorkflowContext, n int) (int, error) {
		sum := 0
		for i := range n {
			v, err := runtime.Step(c, fmt.Sprintf("s%d@v1", i), runtime.StepOptions{}, func(runtime.StepContext) (int, error) { return i, nil })
			if err != nil {
				return 0, err
			}
			sum += v
		}
		return sum, nil
	}))
	start(t, e)
	ctx := waitCtx(t)
	run := func() {
		t.Helper()
		h, err := runtime.Start[int, int](ctx, e, "steps", 4)
		must(t, err)
		got, err := h.Result(ctx)
		must(t, err)
		if got != 6 {
			t.Fatalf("result %d, want 6", got)
		}
	}
	// The first Result begins the engine's watch of runs' ends. A run
	// started before the engine works goes through the queue, and the
	// claim that takes it, full, counts as a backlog that the next run
	// waits behind: two runs settle both.
	run()
	run()
	st.reads.Store(0)
	st.claims.Store(0)
	for range 20 {
		run()
	}
	if r, c := st.reads.Load(), st.claims.Load(); r != 0 || c != 0 {
		t.Fatalf("20 runs one at a time: %d reads, %d runs claimed; want none of either", r, c)
	}
}

// The callers of runs started in a batch, most of them queued, read none
// of them either: each run's end was listened for before it existed.
func TestBatchResultsNotRead(t *testing.T) {
	t.Parallel()
	st := &readCounter{Store: memstore.New(memstore.Options{})}
	e, err := runtime.New(runtime.Config{Store: st, Workers: 1})
	must(t, err)
	t.Cleanup(func() { e.Close() })
	must(t, runtime.Register(e, "double", func(c *runtime.WorkflowContext, n int) (int, error) {
		return runtime.Step(c, "double@v1", runtime.StepOptions{}, func(runtime.StepContext) (int, error) { return 2 * n, nil })
	}))
	start(t, e)
	ctx := waitCtx(t)
	warm, err := runtime.Start[int, int](ctx, e, "double", 0)
	must(t, err)
	_, err = warm.Result(ctx) // begins the engine's watch of runs' ends
	must(t, err)
	st.reads.Store(0)
	items := make([]runtime.BatchItem[int], 10)
	for i := range items {
		items[i].Input = i
	}
	runs, err := runtime.StartBatch[int, int](ctx, e, "double", items)
	must(t, err)
	for i, r := range runs {
		got, err := r.Result(ctx)
		must(t, err)
		if got != 2*i {
			t.Fatalf("run %d returned %d, want %d", i, got, 2*i)
		}
	}
	if n := st.reads.Load(); n != 0 {
		t.Fatalf("%d reads for the results of a batch, want none", n)
	}
}

// gatedCreates holds an engine's creates of one run ID until the gate
// opens, telling when one is held.
type gatedCreates struct {
	*memstore.Store
	id      string
	entered chan struct{}
	gate    chan struct{}
}

func (g *gatedCreates) CreateRuns(ctx context.Context, runs []storage.NewRun) ([]storage.CreateResult, error) {
	if len(runs) == 1 && runs[0].ID == g.id {
		close(g.entered)
		<-g.gate
	}
	return g.Store.CreateRuns(ctx, runs)
}

// A slot an eager start took and gave back, its ID existing already,
// wakes the engine's claims: a run queued meanwhile by another process
// runs, though no execution ended to free a slot.
func TestEagerSlotGivenBackWakesClaims(t *testing.T) {
	t.Parallel()
	mem := memstore.New(memstore.Options{})
	st := &gatedCreates{Store: mem, id: "dup", entered: make(chan struct{}), gate: make(chan struct{})}
	e, err := runtime.New(runtime.Config{Store: st, Workers: 1, PollInterval: time.Hour})
	must(t, err)
	t.Cleanup(func() { e.Close() })
	must(t, runtime.Register(e, "noop", func(c *runtime.WorkflowContext, n int) (int, error) { return n, nil }))
	start(t, e)
	ctx := waitCtx(t)
	if _, err := mem.CreateRuns(ctx, []storage.NewRun{{ID: "dup", Workflow: "noop", Input: []byte("1"), Version: 1}}); err != nil {
		t.Fatal(err)
	}
	first, err := runtime.Get[int](ctx, e, "noop", "dup")
	must(t, err)
	if _, err := first.Result(ctx); err != nil {
		t.Fatal(err)
	}
	// Twice: the first time, the end of dup's execution may have left
	// the engine's wake-up pending.
	for round := range 2 {
		st.entered, st.gate = make(chan struct{}), make(chan struct{})
		done := make(chan error, 1)
		go func() {
			_, err := runtime.Start[int, int](ctx, e, "noop", 2, runtime.WithID("dup"))
			done <- err
		}()
		<-st.entered // the start holds the engine's only slot
		id := fmt.Sprintf("other%d", round)
		if _, err := mem.CreateRuns(ctx, []storage.NewRun{{ID: id, Workflow: "noop", Input: []byte("3"), Version: 1}}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond) // let the engine look for a slot
		close(st.gate)
		must(t, <-done)
		other, err := runtime.Get[int](ctx, e, "noop", id)
		must(t, err)
		if got, err := other.Result(ctx); err != nil || got != 3 {
			t.Fatalf("run %s, queued meanwhile: %d, %v; want it run, 3", id, got, err)
		}
	}
}
