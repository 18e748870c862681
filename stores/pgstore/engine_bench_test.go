package pgstore

import (
	"context"
	"fmt"
	"testing"

	"github.com/stemflow/stem/internal/benchwork"
	"github.com/stemflow/stem/internal/crashtest"
	"github.com/stemflow/stem/storage"
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
	for _, workers := range []int{1, 8, 32} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			testURL(b)
			benchwork.TenSteps(b, func(b *testing.B) storage.Store { return benchStore(b) }, workers, 1000)
		})
	}
}

// BenchmarkStarts times 1000 ten-step runs from the first start to the last
// result on a running engine of 32 workers, started by one batch and by a
// goroutine per run. Run it beside the server's ceiling:
//
//	STEM_TEST_POSTGRES_URL=... go test -run '^$' -bench 'BenchmarkServerInsertCommits|BenchmarkStarts' ./stores/pgstore
func BenchmarkStarts(b *testing.B) {
	testURL(b)
	benchwork.Starts(b, func(b *testing.B) storage.Store { return benchStore(b) }, 32, 1000)
}

// BenchmarkEngineLatency measures one ten-step run at a time, from Start to
// its result, on a running engine: p50 and p99 in ms.
func BenchmarkEngineLatency(b *testing.B) {
	testURL(b)
	s := benchStore(b)
	defer s.Close()
	benchwork.Latency(b, s)
}

// BenchmarkEngineProcesses runs 1000 ten-step runs on four worker processes
// (the test binary re-executed) of 8 workers each, sharing one schema, and
// reports steps/s including the processes' start-up.
//
//	STEM_TEST_POSTGRES_URL=... go test -run '^$' -bench BenchmarkEngineProcesses ./stores/pgstore
func BenchmarkEngineProcesses(b *testing.B) {
	url := testURL(b)
	schema := freshSchema(b)
	crashtest.Throughput(b, crashtest.Config{
		Open: func(tb testing.TB) storage.Store {
			s, err := Open(context.Background(), crashURL(url), Options{Schema: schema, Logger: quietLogger()})
			if err != nil {
				tb.Fatal(err)
			}
			tb.Cleanup(func() { _ = s.Close() })
			return s
		},
		Env:         []string{envCrashSchema + "=" + schema},
		Runs:        1000,
		Processes:   4,
		Concurrency: 8,
	})
}

// BenchmarkSleep times one run at a time that sleeps 50 ms, with the
// default poll interval: p50, p99, and how late the p99 wakes.
//
//	STEM_TEST_POSTGRES_URL=... go test -run '^$' -bench 'BenchmarkSleep' ./stores/pgstore
func BenchmarkSleep(b *testing.B) {
	testURL(b)
	s := benchStore(b)
	defer s.Close()
	benchwork.SleepLatency(b, s)
}

// BenchmarkSleepers times 1000 runs that each sleep 1 s, started by one
// batch and by a goroutine per run: wall time in ms.
func BenchmarkSleepers(b *testing.B) {
	testURL(b)
	benchwork.Sleepers(b, func(b *testing.B) storage.Store { return benchStore(b) }, 1000)
}

// BenchmarkRemoteResult measures how late Result returns in a client
// engine on its own pool, after a worker engine on another pool completed
// the run: p50 and p99 in ms.
//
//	STEM_TEST_POSTGRES_URL=... go test -run '^$' -bench BenchmarkRemoteResult -benchtime 50x ./stores/pgstore
func BenchmarkRemoteResult(b *testing.B) {
	worker, client := twoPools(b)
	benchwork.RemoteResult(b, worker, client)
}

// BenchmarkParallelSteps times one run of ten 20 ms step futures awaited
// together (p50 and p99 in ms).
//
//	STEM_TEST_POSTGRES_URL=... go test -run '^$' -bench 'BenchmarkParallelSteps' ./stores/pgstore
func BenchmarkParallelSteps(b *testing.B) {
	testURL(b)
	s := benchStore(b)
	defer s.Close()
	benchwork.ParallelSteps(b, s)
}

// BenchmarkContinueAsNew times a 10 000-iteration continue-as-new loop:
// the mean iteration around the 100th and the last, in ms.
//
//	STEM_TEST_POSTGRES_URL=... go test -run '^$' -bench 'BenchmarkContinueAsNew' -benchtime 1x ./stores/pgstore
func BenchmarkContinueAsNew(b *testing.B) {
	testURL(b)
	s := benchStore(b)
	defer s.Close()
	benchwork.ContinueLoop(b, s, 10000)
}

// BenchmarkTxSteps times 1000 ten-step runs of plain steps and of
// transactional steps (each in a transaction of its own with its
// checkpoint) on 32 workers, started in one batch and from a goroutine
// per run. Run it beside the server's ceiling:
//
//	STEM_TEST_POSTGRES_URL=... go test -run '^$' -bench 'BenchmarkServerInsertCommits|BenchmarkTxSteps' ./stores/pgstore
func BenchmarkTxSteps(b *testing.B) {
	testURL(b)
	benchwork.TxSteps(b, func(b *testing.B) storage.Store { return benchStore(b) }, 32, 1000)
}

// BenchmarkInteract measures an update's round trip and a stream value's
// append-to-read latency, between a worker engine and a caller engine on
// pools of their own, beside the database's own commit (a pause or resume
// from the caller's pool), in one run: p50 and p99 in ms, and p50 over
// commit's.
//
//	STEM_TEST_POSTGRES_URL=... go test -run '^$' -bench BenchmarkInteract -benchtime 200x ./stores/pgstore
func BenchmarkInteract(b *testing.B) {
	worker, client := twoPools(b)
	benchwork.Interact(b, worker, client)
}

// twoPools opens two stores on one fresh schema, each with its own pool,
// as two processes would; the benchmark closes them.
func twoPools(b *testing.B) (worker, client *Store) {
	url := testURL(b)
	schema := freshSchema(b)
	open := func() *Store {
		s, err := Open(context.Background(), url, Options{Schema: schema, Logger: quietLogger()})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close() })
		return s
	}
	return open(), open()
}
