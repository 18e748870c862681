// Package benchwork holds the engine benchmarks every store runs, so their
// figures measure the same work: 10-step runs executed by one engine (or
// several processes' engines) until all complete. TenSteps times only the
// execution of runs started beforehand; Starts times what a user's program
// sees, from the first start to the last result, in both ways programs start
// runs: one StartBatch, and a goroutine per run that starts it and awaits
// its result.
package benchwork

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stemflow/stem/storage"

	"github.com/stemflow/stem/runtime"
)

// Workflow is the benchmark workflow's durable name.
const Workflow = "bench.ten"

// Steps is how many steps each benchmark run has.
const Steps = 10

// Register registers the benchmark workflow: Steps checkpointed steps that do
// no work of their own, so the figures are the framework's cost per step.
func Register(e *runtime.Engine) error {
	keys := make([]string, Steps)
	for i := range keys {
		keys[i] = fmt.Sprintf("s%d@v1", i)
	}
	return runtime.Register(e, Workflow, func(c *runtime.WorkflowContext, in int) (int, error) {
		sum := in
		for i, key := range keys {
			v, err := runtime.Step(c, key, runtime.StepOptions{}, func(runtime.StepContext) (int, error) {
				return sum + i, nil
			})
			if err != nil {
				return 0, err
			}
			sum = v
		}
		return sum, nil
	})
}

// NewEngine returns an engine on store with the benchmark workflow
// registered.
func NewEngine(tb testing.TB, store storage.Store, workers int) *runtime.Engine {
	tb.Helper()
	e, err := runtime.New(runtime.Config{Store: store, Workers: workers, PollInterval: 100 * time.Millisecond})
	if err != nil {
		tb.Fatal(err)
	}
	if err := Register(e); err != nil {
		tb.Fatal(err)
	}
	return e
}

// TenSteps runs `runs` 10-step runs per iteration on a fresh store from
// newStore, with one engine of `workers` workers, and reports steps/s over
// the time from the engine's start until every run completed. Starting the
// runs is not timed.
func TenSteps(b *testing.B, newStore func(b *testing.B) storage.Store, workers, runs int) {
	var handles []*runtime.Run[int]
	measure(b, newStore, workers, runs, false,
		func(ctx context.Context, e *runtime.Engine) { handles = StartRuns(b, ctx, e, runs) },
		func(ctx context.Context, e *runtime.Engine) error { return await(ctx, handles) })
}

// Starts runs `runs` 10-step runs per iteration on a fresh store from
// newStore with one running engine of `workers` workers, in two
// sub-benchmarks: start=batch starts them with StartBatch (500 a call) and
// awaits each result; start=goroutines starts each in its own goroutine
// with Start and awaits its result there. Each reports steps/s over the
// time from the first start call until the last result.
func Starts(b *testing.B, newStore func(b *testing.B) storage.Store, workers, runs int) {
	b.Run("start=batch", func(b *testing.B) {
		measure(b, newStore, workers, runs, true, nil, func(ctx context.Context, e *runtime.Engine) error {
			return await(ctx, StartRuns(b, ctx, e, runs))
		})
	})
	b.Run("start=goroutines", func(b *testing.B) {
		measure(b, newStore, workers, runs, true, nil, func(ctx context.Context, e *runtime.Engine) error {
			var wg sync.WaitGroup
			errs := make(chan error, runs)
			for i := range runs {
				wg.Go(func() {
					h, err := runtime.Start[int, int](ctx, e, Workflow, i)
					if err == nil {
						_, err = h.Result(ctx)
					}
					if err != nil {
						errs <- err
					}
				})
			}
			wg.Wait()
			close(errs)
			return <-errs
		})
	})
}

// measure reports steps/s of `runs` runs per iteration, each iteration on a
// fresh store and engine: prepare (when set) runs untimed, then timed runs
// with the timer on. The engine runs from before prepare when engineFirst,
// else from the start of the timed part, which then includes its start.
func measure(b *testing.B, newStore func(b *testing.B) storage.Store, workers, runs int, engineFirst bool,
	prepare func(ctx context.Context, e *runtime.Engine), timed func(ctx context.Context, e *runtime.Engine) error) {
	var steps int
	var elapsed time.Duration
	for b.Loop() {
		b.StopTimer()
		store := newStore(b)
		e := NewEngine(b, store, workers)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		run := func() { go func() { done <- e.Run(ctx) }() }
		if engineFirst {
			run()
		}
		if prepare != nil {
			prepare(ctx, e)
		}
		b.StartTimer()
		began := time.Now()
		if !engineFirst {
			run()
		}
		if err := timed(ctx, e); err != nil {
			b.Fatal(err)
		}
		elapsed += time.Since(began)
		steps += runs * Steps
		b.StopTimer()
		cancel()
		<-done
		e.Close()
		store.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(steps)/elapsed.Seconds(), "steps/s")
}

// await waits for every run's result.
func await(ctx context.Context, handles []*runtime.Run[int]) error {
	for _, h := range handles {
		if _, err := h.Result(ctx); err != nil {
			return err
		}
	}
	return nil
}

// StartRuns starts n benchmark runs in batches and returns their handles.
func StartRuns(tb testing.TB, ctx context.Context, e *runtime.Engine, n int) []*runtime.Run[int] {
	tb.Helper()
	items := make([]runtime.BatchItem[int], n)
	for i := range items {
		items[i].Input = i
	}
	var handles []*runtime.Run[int]
	for lo := 0; lo < n; lo += 500 {
		hs, err := runtime.StartBatch[int, int](ctx, e, Workflow, items[lo:min(lo+500, n)])
		if err != nil {
			tb.Fatal(err)
		}
		handles = append(handles, hs...)
	}
	return handles
}

// Latency measures the end-to-end latency of one 10-step run at a time
// (start to result, on a running engine) and reports p50 and p99 in ms.
func Latency(b *testing.B, store storage.Store) {
	e := NewEngine(b, store, 4)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	defer func() { cancel(); <-done; e.Close() }()
	var lat []time.Duration
	for b.Loop() {
		began := time.Now()
		run, err := runtime.Start[int, int](ctx, e, Workflow, 1)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := run.Result(ctx); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(began))
	}
	slices.Sort(lat)
	ms := func(q float64) float64 {
		return float64(lat[min(len(lat)-1, int(q*float64(len(lat))))].Microseconds()) / 1000
	}
	b.ReportMetric(ms(0.50), "p50-ms")
	b.ReportMetric(ms(0.99), "p99-ms")
}
