package pgstore

import (
	"context"
	"fmt"
	"testing"

	"github.com/stemflow/stem/internal/benchwork"
	"github.com/stemflow/stem/runtime"
)

// benchStore opens a store that owns its pool (32 connections) on a fresh
// schema, dropped when the benchmark ends.
func benchStore(b *testing.B) *Store {
	b.Helper()
	s, err := Open(context.Background(), testURL(b), Options{Schema: freshSchema(b), Logger: quietLogger()})
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// BenchmarkEngine runs the shared ten-step engine benchmark on Postgres:
// 1000 runs per iteration, timed from the engine's start until all
// complete.
//
//	STEM_TEST_POSTGRES_URL=postgres://postgres@127.0.0.1:5432/test?sslmode=disable \
//	  go test -run '^$' -bench BenchmarkEngine ./stores/pgstore
func BenchmarkEngine(b *testing.B) {
	for _, workers := range []int{1, 32} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			testURL(b)
			benchwork.TenSteps(b, func(b *testing.B) runtime.Store { return benchStore(b) }, workers, 1000)
		})
	}
}

// BenchmarkEngineLatency measures one ten-step run at a time, from Start to
// its result, on a running engine: p50 and p99 in ms.
func BenchmarkEngineLatency(b *testing.B) {
	testURL(b)
	s := benchStore(b)
	defer s.Close()
	benchwork.Latency(b, s)
}
