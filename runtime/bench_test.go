package runtime_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/stores/memstore"
)

// BenchmarkEngine runs 1000 runs of 10 steps each on memstore per iteration
// and reports steps per second.
//
//	go test -run '^$' -bench BenchmarkEngine ./runtime
func BenchmarkEngine(b *testing.B) {
	for _, workers := range []int{1, 32} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			RunTenStepBenchmark(b, func(b *testing.B) runtime.Store { return memstore.New(memstore.Options{}) }, workers, 1000)
		})
	}
}

// RunTenStepBenchmark starts runs × 10-step runs on a fresh store per
// iteration and measures the time until all complete.
func RunTenStepBenchmark(b *testing.B, newStore func(*testing.B) runtime.Store, workers, runs int) {
	var steps int
	var elapsed time.Duration
	for b.Loop() {
		b.StopTimer()
		store := newStore(b)
		e, err := runtime.New(runtime.Config{Store: store, Workers: workers, PollInterval: 50 * time.Millisecond})
		if err != nil {
			b.Fatal(err)
		}
		if err := runtime.Register(e, "bench.ten", func(c *runtime.WorkflowContext, in int) (int, error) {
			sum := in
			for i := range 10 {
				v, err := runtime.Step(c, fmt.Sprintf("s%d@v1", i), runtime.StepOptions{}, func(runtime.StepContext) (int, error) {
					return sum + i, nil
				})
				if err != nil {
					return 0, err
				}
				sum = v
			}
			return sum, nil
		}); err != nil {
			b.Fatal(err)
		}
		items := make([]runtime.BatchItem[int], runs)
		for i := range items {
			items[i].Input = i
		}
		ctx, cancel := context.WithCancel(context.Background())
		handles, err := runtime.StartBatch[int, int](ctx, e, "bench.ten", items)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		began := time.Now()
		done := make(chan error, 1)
		go func() { done <- e.Run(ctx) }()
		for _, h := range handles {
			if _, err := h.Result(ctx); err != nil {
				b.Fatal(err)
			}
		}
		elapsed += time.Since(began)
		steps += runs * 10
		b.StopTimer()
		cancel()
		<-done
		e.Close()
		store.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(steps)/elapsed.Seconds(), "steps/s")
}
