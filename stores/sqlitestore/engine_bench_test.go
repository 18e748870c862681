package sqlitestore_test

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stemflow/stem/internal/benchwork"
	"github.com/stemflow/stem/storage"
	"github.com/stemflow/stem/stores/sqlitestore"
)

// benchStore opens a fresh SQLite file with the given durability.
func benchStore(b *testing.B, mode sqlitestore.Synchronous) storage.Store {
	b.Helper()
	s, err := sqlitestore.Open(filepath.Join(b.TempDir(), "engine.db"), sqlitestore.Options{Synchronous: mode})
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// BenchmarkEngine runs the shared ten-step engine benchmark on a SQLite
// file: 1000 runs per iteration, timed from the engine's start until every
// result is in, and reports steps/s. Each step is one Checkpoint.
//
//	go test -run '^$' -bench 'BenchmarkInsertCeiling|BenchmarkEngine/sync=FULL/workers=1$' ./stores/sqlitestore
func BenchmarkEngine(b *testing.B) {
	for _, mode := range []sqlitestore.Synchronous{sqlitestore.SyncNormal, sqlitestore.SyncFull} {
		for _, workers := range []int{1, 32} {
			b.Run(fmt.Sprintf("sync=%s/workers=%d", mode, workers), func(b *testing.B) {
				benchwork.TenSteps(b, func(b *testing.B) storage.Store { return benchStore(b, mode) }, workers, 1000)
			})
		}
	}
}

// BenchmarkStarts times 1000 ten-step runs from the first start to the last
// result on a running engine of 32 workers, started by one batch and by a
// goroutine per run.
//
//	go test -run '^$' -bench 'BenchmarkInsertCeiling|BenchmarkStarts' ./stores/sqlitestore
func BenchmarkStarts(b *testing.B) {
	for _, mode := range []sqlitestore.Synchronous{sqlitestore.SyncNormal, sqlitestore.SyncFull} {
		b.Run("sync="+mode.String(), func(b *testing.B) {
			benchwork.Starts(b, func(b *testing.B) storage.Store { return benchStore(b, mode) }, 32, 1000)
		})
	}
}

// BenchmarkEngineLatency measures one ten-step run at a time, from Start to
// its result, on a running engine: p50 and p99 in ms. Put it beside the
// file's one-row commit (BenchmarkInsertCeiling): with SyncFull a run is a
// dozen commits, each waiting for its fsync.
//
//	go test -run '^$' -bench 'BenchmarkInsertCeiling|BenchmarkEngineLatency' ./stores/sqlitestore
func BenchmarkEngineLatency(b *testing.B) {
	for _, mode := range []sqlitestore.Synchronous{sqlitestore.SyncNormal, sqlitestore.SyncFull} {
		b.Run("sync="+mode.String(), func(b *testing.B) {
			s := benchStore(b, mode)
			defer s.Close()
			benchwork.Latency(b, s)
		})
	}
}

// BenchmarkSleep times one run at a time that sleeps 50 ms on a SQLite
// file, with the default poll interval: p50, p99, and how late the p99
// wakes.
//
//	go test -run '^$' -bench 'BenchmarkSleep' ./stores/sqlitestore
func BenchmarkSleep(b *testing.B) {
	s := benchStore(b, sqlitestore.SyncNormal)
	defer s.Close()
	benchwork.SleepLatency(b, s)
}

// BenchmarkSleepers times 1000 runs that each sleep 1 s, started by one
// batch and by a goroutine per run: wall time in ms.
func BenchmarkSleepers(b *testing.B) {
	benchwork.Sleepers(b, func(b *testing.B) storage.Store { return benchStore(b, sqlitestore.SyncNormal) }, 1000)
}

// BenchmarkParallelSteps times one run of ten 20 ms step futures awaited
// together (p50 and p99 in ms).
//
//	go test -run '^$' -bench 'BenchmarkParallelSteps' ./stores/sqlitestore
func BenchmarkParallelSteps(b *testing.B) {
	s := benchStore(b, sqlitestore.SyncNormal)
	defer s.Close()
	benchwork.ParallelSteps(b, s)
}

// BenchmarkContinueAsNew times a 10 000-iteration continue-as-new loop:
// the mean iteration around the 100th and the last, in ms.
//
//	go test -run '^$' -bench 'BenchmarkContinueAsNew' -benchtime 1x ./stores/sqlitestore
func BenchmarkContinueAsNew(b *testing.B) {
	s := benchStore(b, sqlitestore.SyncNormal)
	defer s.Close()
	benchwork.ContinueLoop(b, s, 10000)
}

// BenchmarkTxSteps times 1000 ten-step runs of plain steps and of
// transactional steps (each in a transaction of its own with its
// checkpoint) on 32 workers, started in one batch and from a goroutine
// per run.
func BenchmarkTxSteps(b *testing.B) {
	benchwork.TxSteps(b, func(b *testing.B) storage.Store { return benchStore(b, sqlitestore.SyncNormal) }, 32, 1000)
}

// BenchmarkInteract measures an update's round trip and a stream value's
// append-to-read latency beside the file's own commit (a pause or resume),
// in one run: p50 and p99 in ms, and p50 over commit's. procs=1 has the
// worker's and the caller's engines share one store, as in one process;
// procs=2 gives each its own, as two processes on the file would, which
// hear each other's commits on the writer's tick.
//
//	go test -run '^$' -bench BenchmarkInteract -benchtime 200x ./stores/sqlitestore
func BenchmarkInteract(b *testing.B) {
	for _, procs := range []int{1, 2} {
		b.Run(fmt.Sprintf("procs=%d", procs), func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "interact.db")
			open := func() storage.Store {
				s, err := sqlitestore.Open(path, sqlitestore.Options{})
				if err != nil {
					b.Fatal(err)
				}
				return s
			}
			worker := open()
			defer worker.Close()
			client := worker
			if procs == 2 {
				client = open()
				defer client.Close()
			}
			benchwork.Interact(b, worker, client)
		})
	}
}
