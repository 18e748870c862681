package redisstore

import (
	"context"
	"fmt"
	"testing"

	"github.com/stemflow/stem/storage"

	"github.com/stemflow/stem/internal/benchwork"
)

// benchStore opens a store on a fresh prefix with a client pool that fits
// conc callers; the prefix's keys are deleted when the benchmark ends.
func benchStore(b *testing.B, conc int) *Store {
	b.Helper()
	c := benchClient(b, conc+8)
	prefix := testPrefix(b)
	cleanupPrefix(b, c, prefix)
	s, err := New(context.Background(), c, Options{Prefix: prefix, Logger: quietLogger()})
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// BenchmarkEngine runs the shared ten-step engine benchmark on Redis: 1000
// runs per iteration, timed from the engine's start until all complete.
//
//	STEM_TEST_REDIS_URL=redis://127.0.0.1:6379/0 go test -run '^$' -bench BenchmarkEngine ./stores/redisstore
func BenchmarkEngine(b *testing.B) {
	for _, workers := range []int{1, 32} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			redisURL(b)
			benchwork.TenSteps(b, func(b *testing.B) storage.Store { return benchStore(b, workers) }, workers, 1000)
		})
	}
}

// BenchmarkStarts times 1000 ten-step runs from the first start to the last
// result on a running engine of 32 workers, started by one batch and by a
// goroutine per run. Run it beside the server's ceiling:
//
//	STEM_TEST_REDIS_URL=redis://127.0.0.1:6379/0 go test -run '^$' -bench 'BenchmarkServerCeiling|BenchmarkStarts' ./stores/redisstore
func BenchmarkStarts(b *testing.B) {
	redisURL(b)
	benchwork.Starts(b, func(b *testing.B) storage.Store { return benchStore(b, 96) }, 32, 1000)
}

// BenchmarkEngineLatency measures one ten-step run at a time, from Start to
// its result, on a running engine: p50 and p99 in ms.
func BenchmarkEngineLatency(b *testing.B) {
	redisURL(b)
	s := benchStore(b, 4)
	defer s.Close()
	benchwork.Latency(b, s)
}

// BenchmarkSleep times one run at a time that sleeps 50 ms, with the
// default poll interval: p50, p99, and how late the p99 wakes.
//
//	STEM_TEST_REDIS_URL=redis://127.0.0.1:6379/0 go test -run '^$' -bench 'BenchmarkSleep' ./stores/redisstore
func BenchmarkSleep(b *testing.B) {
	redisURL(b)
	s := benchStore(b, 4)
	defer s.Close()
	benchwork.SleepLatency(b, s)
}

// BenchmarkSleepers times 1000 runs that each sleep 1 s, started by one
// batch and by a goroutine per run: wall time in ms.
func BenchmarkSleepers(b *testing.B) {
	redisURL(b)
	benchwork.Sleepers(b, func(b *testing.B) storage.Store { return benchStore(b, 96) }, 1000)
}

// BenchmarkRemoteResult measures how late Result returns in a client
// engine on its own connections, after a worker engine on others completed
// the run: p50 and p99 in ms.
//
//	STEM_TEST_REDIS_URL=redis://127.0.0.1:6379/0 go test -run '^$' -bench BenchmarkRemoteResult -benchtime 50x ./stores/redisstore
func BenchmarkRemoteResult(b *testing.B) {
	worker, client := twoClients(b)
	benchwork.RemoteResult(b, worker, client)
}

// BenchmarkParallelSteps times one run of ten 20 ms step futures awaited
// together (p50 and p99 in ms).
//
//	STEM_TEST_REDIS_URL=... go test -run '^$' -bench 'BenchmarkParallelSteps' ./stores/redisstore
func BenchmarkParallelSteps(b *testing.B) {
	redisURL(b)
	s := benchStore(b, 16)
	defer s.Close()
	benchwork.ParallelSteps(b, s)
}

// BenchmarkContinueAsNew times a 10 000-iteration continue-as-new loop:
// the mean iteration around the 100th and the last, in ms.
//
//	STEM_TEST_REDIS_URL=... go test -run '^$' -bench 'BenchmarkContinueAsNew' -benchtime 1x ./stores/redisstore
func BenchmarkContinueAsNew(b *testing.B) {
	redisURL(b)
	s := benchStore(b, 16)
	defer s.Close()
	benchwork.ContinueLoop(b, s, 10000)
}

// BenchmarkInteract measures an update's round trip and a stream value's
// append-to-read latency, between a worker engine and a caller engine on
// clients of their own, beside the server's own write round trip (a pause
// or resume from the caller's client), in one run: p50 and p99 in ms, and
// p50 over the write's.
//
//	STEM_TEST_REDIS_URL=redis://127.0.0.1:6379/0 go test -run '^$' -bench BenchmarkInteract -benchtime 500x ./stores/redisstore
func BenchmarkInteract(b *testing.B) {
	worker, client := twoClients(b)
	benchwork.Interact(b, worker, client)
}

// twoClients opens two stores on one fresh prefix, each with its own
// client, as two processes would; the benchmark closes them.
func twoClients(b *testing.B) (worker, client *Store) {
	redisURL(b)
	prefix := testPrefix(b)
	open := func() *Store {
		c := benchClient(b, 16)
		cleanupPrefix(b, c, prefix)
		s, err := New(context.Background(), c, Options{Prefix: prefix, Logger: quietLogger()})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close() })
		return s
	}
	return open(), open()
}
