package benchwork

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/storage"
)

// ParallelWorkflow is the durable name of the workflow that runs its input
// (a count) of 20 ms steps as futures and awaits them all.
const ParallelWorkflow = "bench.parallel"

// LoopWorkflow is the durable name of the workflow that runs one step and
// continues as new with its input plus one until it reaches loopEnd.
const LoopWorkflow = "bench.loop"

// StepWait is how long each of ParallelWorkflow's steps takes.
const StepWait = 20 * time.Millisecond

// registerFutures registers ParallelWorkflow and LoopWorkflow; loop, when
// not nil, is told the time each loop iteration's step ran.
func registerFutures(e *runtime.Engine, loop func(i int)) error {
	if err := runtime.Register(e, ParallelWorkflow, func(c *runtime.WorkflowContext, n int) (int, error) {
		fs := make([]runtime.Awaitable, n)
		for i := range fs {
			fs[i] = runtime.DoAsync(c, fmt.Sprintf("p%d@v1", i), runtime.StepOptions{}, func(runtime.StepContext) error {
				time.Sleep(StepWait)
				return nil
			})
		}
		return n, runtime.All(c, fs...)
	}); err != nil {
		return err
	}
	return runtime.Register(e, LoopWorkflow, func(c *runtime.WorkflowContext, in [2]int) (int, error) {
		i, end := in[0], in[1]
		if err := runtime.Do(c, "tick@v1", runtime.StepOptions{}, func(runtime.StepContext) error {
			if loop != nil {
				loop(i)
			}
			return nil
		}); err != nil {
			return 0, err
		}
		if i+1 < end {
			return 0, runtime.ContinueAsNew(c, [2]int{i + 1, end})
		}
		return i, nil
	})
}

// ParallelSteps runs one run at a time of ten 20 ms steps started as
// futures and awaited together, and reports p50 and p99 of its wall time
// from start to result in ms: what ten steps cost when they run side by
// side, against 200 ms one after another.
func ParallelSteps(b *testing.B, store storage.Store) {
	e, err := runtime.New(runtime.Config{Store: store, Workers: 4})
	if err != nil {
		b.Fatal(err)
	}
	if err := registerFutures(e, nil); err != nil {
		b.Fatal(err)
	}
	lat := oneAtATime(b, e, ParallelWorkflow, 10)
	b.ReportMetric(ms(percentile(lat, 0.50)), "p50-ms")
	b.ReportMetric(ms(percentile(lat, 0.99)), "p99-ms")
}

// ContinueLoop runs, per iteration, one run that continues as new
// `iterations` times (one step per execution), and reports the mean time
// of an iteration around the 100th and around the last, in ms: with
// continue-as-new the cost of an iteration does not grow with those before.
func ContinueLoop(b *testing.B, store storage.Store, iterations int) {
	var (
		mu    sync.Mutex
		ticks = make([]time.Time, iterations)
	)
	e, err := runtime.New(runtime.Config{Store: store, Workers: 4})
	if err != nil {
		b.Fatal(err)
	}
	if err := registerFutures(e, func(i int) {
		mu.Lock()
		ticks[i] = time.Now()
		mu.Unlock()
	}); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	defer func() { cancel(); <-done; e.Close() }()
	var early, late []time.Duration
	for b.Loop() {
		run, err := runtime.Start[[2]int, int](ctx, e, LoopWorkflow, [2]int{0, iterations})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := run.Result(ctx); err != nil {
			b.Fatal(err)
		}
		mu.Lock()
		const span = 100
		early = append(early, ticks[min(2*span, iterations-1)].Sub(ticks[span])/time.Duration(min(span, iterations-1-span)))
		late = append(late, ticks[iterations-1].Sub(ticks[iterations-1-span])/span)
		mu.Unlock()
	}
	b.ReportMetric(ms(percentile(early, 0.5)), "iter100-ms")
	b.ReportMetric(ms(percentile(late, 0.5)), "iterlast-ms")
}
