package runtime_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stemflow/stem/storage"

	"github.com/stemflow/stem/internal/benchwork"
	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/stores/memstore"
)

// BenchmarkEngine runs 1000 runs × 10 steps on memstore per iteration and
// reports steps per second.
//
//	go test -run '^$' -bench BenchmarkEngine ./runtime
func BenchmarkEngine(b *testing.B) {
	for _, workers := range []int{1, 32} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			benchwork.TenSteps(b, func(*testing.B) storage.Store { return memstore.New(memstore.Options{}) }, workers, 1000)
		})
	}
}

// BenchmarkStarts times 1000 ten-step runs on memstore from the first start
// to the last result, started by one batch and by a goroutine per run.
func BenchmarkStarts(b *testing.B) {
	benchwork.Starts(b, func(*testing.B) storage.Store { return memstore.New(memstore.Options{}) }, 32, 1000)
}

// BenchmarkRunLatency reports p50/p99 of one 10-step run on memstore.
func BenchmarkRunLatency(b *testing.B) {
	benchwork.Latency(b, memstore.New(memstore.Options{}))
}

// BenchmarkSleep times one run at a time that sleeps 50 ms, on memstore and
// an engine with the default poll interval: p50, p99, and how late the p99
// wakes.
func BenchmarkSleep(b *testing.B) {
	benchwork.SleepLatency(b, memstore.New(memstore.Options{}))
}

// BenchmarkSleepers times 1000 runs that each sleep 1 s, started by one
// batch and by a goroutine per run, on memstore: wall time in ms.
func BenchmarkSleepers(b *testing.B) {
	benchwork.Sleepers(b, func(*testing.B) storage.Store { return memstore.New(memstore.Options{}) }, 1000)
}

// BenchmarkHooks is BenchmarkEngine's workload with no hooks and with
// hooks at every point that do nothing but call next: what the points
// cost an engine that uses them, and that one without costs nothing.
//
//	go test -run '^$' -bench BenchmarkHooks -count 6 ./runtime
func BenchmarkHooks(b *testing.B) {
	noop := runtime.Hooks{
		Start: func(ctx context.Context, _ *runtime.HookStart, next func(context.Context) error) error {
			return next(ctx)
		},
		Execution: func(ctx context.Context, _ *runtime.HookExecution, next func(context.Context)) {
			next(ctx)
		},
		Attempt: func(ctx context.Context, _ *runtime.HookAttempt, next func(context.Context)) { next(ctx) },
		Wait:    func(context.Context, runtime.HookWait) {},
		Store:   func(ctx context.Context, _ string, next func(context.Context) error) error { return next(ctx) },
	}
	for _, tc := range []struct {
		name  string
		hooks []runtime.Hooks
	}{{"hooks=none", nil}, {"hooks=noop", []runtime.Hooks{noop}}} {
		b.Run(tc.name, func(b *testing.B) {
			benchwork.TenStepsHooked(b, func(*testing.B) storage.Store { return memstore.New(memstore.Options{}) }, 32, 1000, tc.hooks)
		})
	}
}
