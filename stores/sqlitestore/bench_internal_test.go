package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stemflow/stem/storage"
)

var syncModes = []Synchronous{SyncNormal, SyncFull}

// BenchmarkInsertCeiling measures this machine's ceiling for one-row
// transactions: each iteration is a single INSERT committed on its own, on a
// file opened with the store's pragmas. It bounds what any store that
// commits every write separately could do; group commit is how the store
// goes past it.
func BenchmarkInsertCeiling(b *testing.B) {
	for _, mode := range syncModes {
		b.Run("sync="+mode.String(), func(b *testing.B) {
			st, done := ceilingInsert(b, filepath.Join(b.TempDir(), "ceiling.db"), mode)
			defer done()
			b.ResetTimer()
			start := time.Now()
			for i := 0; b.Loop(); i++ {
				if _, err := st.Exec("run-1", ceilingPayload); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "commits/s")
		})
	}
}

// ceilingPayload is what each ceiling commit writes.
var ceilingPayload = []byte(`{"result":"0123456789abcdef"}`)

// ceilingInsert opens a fresh file at path with the store's pragmas in mode
// and returns its one-row INSERT of a table of its own, each Exec a commit,
// and what closes the statement and the file.
func ceilingInsert(b *testing.B, path string, mode Synchronous) (*sql.Stmt, func()) {
	b.Helper()
	db, err := sql.Open("sqlite", dsn(path, Options{Synchronous: mode, BusyTimeout: 10 * time.Second}, false))
	if err != nil {
		b.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(`CREATE TABLE t (id INTEGER PRIMARY KEY, run_id TEXT NOT NULL, payload BLOB) STRICT`); err != nil {
		db.Close()
		b.Fatal(err)
	}
	st, err := db.Prepare(`INSERT INTO t (run_id, payload) VALUES (?1, ?2)`)
	if err != nil {
		db.Close()
		b.Fatal(err)
	}
	return st, func() { st.Close(); db.Close() }
}

// BenchmarkCheckpoint measures Checkpoint throughput through the writer:
// callers goroutines, each on its own claimed run, each checkpoint with the
// one attempt that produced it, as a worker writes a step.
func BenchmarkCheckpoint(b *testing.B) {
	for _, mode := range syncModes {
		for _, callers := range []int{1, 32} {
			b.Run(fmt.Sprintf("sync=%s/callers=%d", mode, callers), func(b *testing.B) {
				benchCheckpoint(b, mode, callers)
			})
		}
	}
}

func benchCheckpoint(b *testing.B, mode Synchronous, callers int) {
	ctx := context.Background()
	s, err := Open(filepath.Join(b.TempDir(), "bench.db"), Options{Synchronous: mode})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	runs := make([]storage.NewRun, callers)
	for i := range runs {
		runs[i] = storage.NewRun{ID: fmt.Sprintf("run-%03d", i), Workflow: "bench", Input: []byte(`{"n":1}`)}
	}
	if _, err := s.CreateRuns(ctx, runs); err != nil {
		b.Fatal(err)
	}
	claimed, err := s.Claim(ctx, storage.ClaimRequest{Owner: "bench", Workflows: []string{"bench"}, Limit: callers, LeaseFor: time.Hour})
	if err != nil || len(claimed) != callers {
		b.Fatalf("Claim: %d runs, %v", len(claimed), err)
	}
	output := []byte(`{"result":"0123456789abcdef"}`)
	b.ResetTimer()
	before := s.stats // the writer is idle: every call above has returned
	cpu0 := cpuTime()
	start := time.Now()
	var wg sync.WaitGroup
	per := b.N / callers
	for i, cl := range claimed {
		n := per
		if i < b.N%callers {
			n++
		}
		wg.Go(func() {
			for k := range n {
				key := fmt.Sprintf("step@v1#%d", k)
				now := time.Now()
				if _, err := s.Checkpoint(ctx, storage.CheckpointRequest{
					Lease:      cl.Lease,
					LeaseFor:   time.Hour,
					Checkpoint: storage.Checkpoint{Key: key, Kind: storage.KindStep, Output: output},
					Attempts:   []storage.Attempt{{Key: key, Number: 1, Started: now, Ended: now}},
				}); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "checkpoints/s")
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
	b.StopTimer()
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	reportWriter(b, before, s.stats)
}

// reportWriter reports the writer's average batch and the commit time per
// request, between two snapshots of its stats.
func reportWriter(b *testing.B, before, after writerStats) {
	batches, reqs := after.batches-before.batches, after.requests-before.requests
	if batches == 0 || reqs == 0 {
		return
	}
	b.ReportMetric(float64(reqs)/float64(batches), "reqs/batch")
	b.ReportMetric(float64((after.commit-before.commit).Microseconds())/float64(reqs), "commit-µs/req")
	b.ReportMetric(float64((after.busy-before.busy).Microseconds())/float64(reqs), "writer-µs/req")
}

// cpuTime returns the CPU time (user and system) the process has used: a
// cost per operation that other processes on the machine disturb less than
// throughput.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkClaim measures claims through the writer from a backlog of
// ready runs of one workflow on the default queue: each op is one Claim
// of limit runs, as an engine's claim loop makes them, with its lease's
// commit. versions=none claims without a Versions filter;
// versions=listed with an entry that lists the runs' version (as the
// runtime claims); versions=passed-over with an entry that leaves out the
// backlog's 100 oldest runs, of another version, which every claim reads
// past. Before each op's timing the backlog holds enough runs for every
// claim.
//
//	go test -run '^$' -bench BenchmarkClaim -count 3 ./stores/sqlitestore
func BenchmarkClaim(b *testing.B) {
	for _, c := range []struct {
		name     string
		versions map[string][]int
		skipped  int
	}{
		{"versions=none", nil, 0},
		{"versions=listed", map[string][]int{"bench": {0, 1}}, 0},
		{"versions=passed-over", map[string][]int{"bench": {0, 1}}, 100},
	} {
		for _, limit := range []int{1, 32} {
			b.Run(fmt.Sprintf("%s/limit=%d", c.name, limit), func(b *testing.B) {
				benchClaim(b, c.versions, c.skipped, limit)
			})
		}
	}
}

func benchClaim(b *testing.B, versions map[string][]int, skipped, limit int) {
	ctx := context.Background()
	s, err := Open(filepath.Join(b.TempDir(), "bench.db"), Options{Synchronous: SyncNormal})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	// The runs passed over first, so that they are the oldest, then one
	// run a microsecond apart for every run the claims take.
	start := time.Now().Add(-time.Hour)
	total := skipped + b.N*limit
	batch := make([]storage.NewRun, 0, 1000)
	for i := range total {
		r := storage.NewRun{ID: fmt.Sprintf("run-%09d", i), Workflow: "bench", Input: []byte(`{"n":1}`), Version: 1}
		if i < skipped {
			r.Version = 2
		}
		at := start.Add(time.Duration(i) * time.Microsecond)
		r.StartAt = &at
		batch = append(batch, r)
		if len(batch) == cap(batch) || i == total-1 {
			if _, err := s.CreateRuns(ctx, batch); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	req := storage.ClaimRequest{Owner: "bench", Workflows: []string{"bench"}, Limit: limit, LeaseFor: time.Hour, Versions: versions}
	b.ResetTimer()
	cpu0 := cpuTime()
	for range b.N {
		got, err := s.Claim(ctx, req)
		if err != nil || len(got) != limit {
			b.Fatalf("Claim: %d runs, %v", len(got), err)
		}
	}
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
}
