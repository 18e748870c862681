package runtime_test

import (
	"fmt"
	"testing"

	"github.com/stemflow/stem/storage"

	"github.com/stemflow/stem/internal/benchwork"
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
