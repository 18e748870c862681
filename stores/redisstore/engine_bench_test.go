package redisstore

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stemflow/stem/runtime"
)

// benchEngine returns an engine with a ten-step workflow "bench.ten" on a
// fresh store, and a func that starts its workers and returns the func that
// stops them and closes both.
func benchEngine(b *testing.B, workers int) (*runtime.Engine, func() (stop func())) {
	b.Helper()
	ctx := context.Background()
	c := benchClient(b, workers+8)
	prefix := testPrefix(b)
	cleanupPrefix(b, c, prefix)
	store, err := New(ctx, c, Options{Prefix: prefix, Logger: quietLogger()})
	if err != nil {
		b.Fatal(err)
	}
	e, err := runtime.New(runtime.Config{Store: store, Workers: workers, PollInterval: 50 * time.Millisecond})
	if err != nil {
		b.Fatal(err)
	}
	if err := runtime.Register(e, "bench.ten", func(c *runtime.WorkflowContext, in int) (int, error) {
		sum := in
		for i := range 10 {
			v, err := runtime.Step(c, "s"+strconv.Itoa(i)+"@v1", runtime.StepOptions{}, func(runtime.StepContext) (int, error) {
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
	return e, func() func() {
		runCtx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- e.Run(runCtx) }()
		return func() {
			cancel()
			<-done
			_ = e.Close()
			_ = store.Close()
		}
	}
}

// BenchmarkEngine starts 1000 ten-step runs per iteration, then times a
// real engine on Redis from starting its workers until every result is in,
// as runtime's BenchmarkEngine does on memstore, and reports steps/s.
func BenchmarkEngine(b *testing.B) {
	const runs = 1000
	for _, workers := range []int{1, 32} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			ctx := context.Background()
			var steps int
			var elapsed time.Duration
			for b.Loop() {
				b.StopTimer()
				e, start := benchEngine(b, workers)
				items := make([]runtime.BatchItem[int], runs)
				for i := range items {
					items[i].Input = i
				}
				handles, err := runtime.StartBatch[int, int](ctx, e, "bench.ten", items)
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				began := time.Now()
				stop := start()
				for _, h := range handles {
					if _, err := h.Result(ctx); err != nil {
						b.Fatal(err)
					}
				}
				elapsed += time.Since(began)
				steps += runs * 10
				b.StopTimer()
				stop()
				b.StartTimer()
			}
			b.ReportMetric(float64(steps)/elapsed.Seconds(), "steps/s")
		})
	}
}

// BenchmarkEngineRunLatency starts one ten-step run at a time on an idle
// engine with 32 workers and reports the median time from Start to its
// result.
func BenchmarkEngineRunLatency(b *testing.B) {
	ctx := context.Background()
	e, start := benchEngine(b, 32)
	defer start()()
	var lat []time.Duration
	for b.Loop() {
		start := time.Now()
		run, err := runtime.Start[int, int](ctx, e, "bench.ten", 1)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := run.Result(ctx); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms/run")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms/run")
}
