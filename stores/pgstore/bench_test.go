package pgstore

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stemflow/stem/storage"
)

var benchConcurrency = []int{1, 8, 32}

// runConcurrent calls fn b.N times in total from workers goroutines and
// reports the rate as unit per second.
func runConcurrent(b *testing.B, workers int, unit string, fn func(worker int, i int64) error) {
	b.Helper()
	var (
		next atomic.Int64
		wg   sync.WaitGroup
		fail atomic.Pointer[error]
	)
	b.ResetTimer()
	start := time.Now()
	for w := range workers {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(b.N) || fail.Load() != nil {
					return
				}
				if err := fn(w, i); err != nil {
					fail.CompareAndSwap(nil, &err)
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if err := fail.Load(); err != nil {
		b.Fatal(*err)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), unit+"/s")
}

// BenchmarkServerInsertCommits is the server's ceiling: autocommitted
// single-row inserts, each its own durable commit. Compare it with
// BenchmarkCheckpoint at the same concurrency:
//
//	STEM_TEST_POSTGRES_URL=postgres://postgres@127.0.0.1:5432/test?sslmode=disable \
//	  go test -run '^$' -bench 'ServerInsertCommits|Checkpoint' -benchtime 3s ./stores/pgstore
func BenchmarkServerInsertCommits(b *testing.B) {
	for _, c := range benchConcurrency {
		b.Run(fmt.Sprintf("conc=%d", c), func(b *testing.B) {
			ctx := context.Background()
			s, err := Open(ctx, testURL(b), Options{Schema: freshSchema(b), SkipMigrate: true})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			if _, err := s.pool.Exec(ctx, `CREATE SCHEMA `+s.schema+`;
				CREATE TABLE `+s.schema+`.bench (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, v bytea)`); err != nil {
				b.Fatal(err)
			}
			q := `INSERT INTO ` + s.schema + `.bench (v) VALUES ($1)`
			payload := []byte(`{"ok":true}`)
			runConcurrent(b, c, "commits", func(_ int, _ int64) error {
				_, err := s.pool.Exec(ctx, q, payload)
				return err
			})
		})
	}
}

// BenchmarkCheckpoint measures store-level checkpoint throughput: each of
// conc callers owns one claimed run and writes step after step to it (with
// one attempt each, as the engine does). checkpoints/batch is how many
// checkpoints one statement carried on average.
func BenchmarkCheckpoint(b *testing.B) {
	for _, c := range benchConcurrency {
		b.Run(fmt.Sprintf("conc=%d", c), func(b *testing.B) {
			ctx := context.Background()
			s, err := Open(ctx, testURL(b), Options{Schema: freshSchema(b)})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			runs := make([]storage.NewRun, c)
			for i := range runs {
				runs[i] = storage.NewRun{ID: fmt.Sprintf("run-%03d", i), Workflow: "wf", Input: []byte(`{}`)}
			}
			if _, err := s.CreateRuns(ctx, runs); err != nil {
				b.Fatal(err)
			}
			claimed, err := s.Claim(ctx, storage.ClaimRequest{Owner: "bench", Workflows: []string{"wf"}, Limit: c, LeaseFor: time.Hour})
			if err != nil || len(claimed) != c {
				b.Fatalf("claim: %v (%d runs)", err, len(claimed))
			}
			output := []byte(`{"value":42,"note":"a typical small step result"}`)
			now := time.Now()
			defer func() {
				if n := s.batches.Load(); n > 0 {
					b.ReportMetric(float64(s.batched.Load())/float64(n), "checkpoints/batch")
				}
			}()
			runConcurrent(b, c, "checkpoints", func(w int, i int64) error {
				_, err := s.Checkpoint(ctx, storage.CheckpointRequest{
					Lease:      claimed[w].Lease,
					LeaseFor:   time.Hour,
					Checkpoint: storage.Checkpoint{Key: fmt.Sprintf("step@v1#%d", i), Kind: storage.KindStep, Output: output},
					Attempts:   []storage.Attempt{{Key: fmt.Sprintf("step@v1#%d", i), Number: 1, Started: now, Ended: now}},
				})
				return err
			})
		})
	}
}

// BenchmarkClaimBacklog times one claim of 32 runs with 1 000 and with
// 100 000 runs queued: the claim walks the ready index in order and stops
// at its limit, so its cost should not grow with the backlog. Each claimed
// batch is handed back (untimed) so the backlog stays the same size. The
// ",versions" cases claim as the runtime does, with a versions filter
// entry for the workflow; in ",stuck=1000" 1 000 runs of a version the
// claim does not take are ready ahead of the backlog, and every claim
// reads them and passes over.
//
//	STEM_TEST_POSTGRES_URL=... go test -run '^$' -bench BenchmarkClaimBacklog ./stores/pgstore
func BenchmarkClaimBacklog(b *testing.B) {
	ctx := context.Background()
	for _, backlog := range []int{1000, 100000} {
		for _, c := range []struct {
			name     string
			versions map[string][]int
			stuck    int
		}{
			{"", nil, 0},
			{",versions", map[string][]int{"bench": {0, 1}}, 0},
			{",versions,stuck=1000", map[string][]int{"bench": {0, 1}}, 1000},
		} {
			b.Run(fmt.Sprintf("queued=%d%s", backlog, c.name), func(b *testing.B) {
				testURL(b)
				s := benchStore(b)
				defer s.Close()
				for lo := -c.stuck; lo < backlog; lo += 1000 {
					runs := make([]storage.NewRun, 0, 1000)
					for i := lo; i < lo+1000; i++ {
						r := storage.NewRun{ID: fmt.Sprintf("r%07d", i), Workflow: "bench", Version: 1}
						if i < 0 {
							// Created first, so ready first, at a version
							// the claim does not take.
							r.ID, r.Version = fmt.Sprintf("stuck%07d", -i), 2
						}
						runs = append(runs, r)
					}
					if _, err := s.CreateRuns(ctx, runs); err != nil {
						b.Fatal(err)
					}
				}
				if _, err := s.pool.Exec(ctx, "ANALYZE "+s.schema+".runs"); err != nil {
					b.Fatal(err)
				}
				req := storage.ClaimRequest{Owner: "bench", Workflows: []string{"bench"}, Limit: 32, LeaseFor: time.Minute, Versions: c.versions}
				for b.Loop() {
					got, err := s.Claim(ctx, req)
					if err != nil || len(got) != 32 {
						b.Fatalf("Claim = %d runs, %v; want 32", len(got), err)
					}
					b.StopTimer()
					now := time.Now()
					for _, c := range got {
						// Hand back, ready now: the backlog keeps its size.
						if _, err := s.Suspend(ctx, storage.SuspendRequest{Lease: c.Lease, LeaseFor: time.Minute, ReadyAt: &now}); err != nil {
							b.Fatal(err)
						}
					}
					b.StartTimer()
				}
			})
		}
	}
}

// BenchmarkListRuns times a dashboard's reads of 100 000 runs (see
// seedListing), vacuumed and analyzed as autovacuum leaves a table: a page
// of 50 runs newest first, of every run, of a status (one run in twenty),
// of an ID prefix (1 000 runs) and of both, and the counts per status of
// every run and of one workflow (a quarter of them).
//
//	STEM_TEST_POSTGRES_URL=... go test -run '^$' -bench BenchmarkListRuns ./stores/pgstore
func BenchmarkListRuns(b *testing.B) {
	testURL(b)
	ctx := context.Background()
	s := benchStore(b)
	defer s.Close()
	seedListing(b, s, 100000)
	if _, err := s.pool.Exec(ctx, "VACUUM ANALYZE "+s.schema+".runs"); err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		q    storage.ListRunsQuery
	}{
		{"newest", storage.ListRunsQuery{}},
		{"newest,status", storage.ListRunsQuery{Status: storage.StatusErrored}},
		{"newest,prefix", storage.ListRunsQuery{IDPrefix: "r-042"}},
		{"newest,status,prefix", storage.ListRunsQuery{Status: storage.StatusErrored, IDPrefix: "r-04"}},
	} {
		c.q.Descending, c.q.Limit = true, 50
		b.Run("list="+c.name, func(b *testing.B) {
			for b.Loop() {
				page, err := s.ListRuns(ctx, c.q)
				if err != nil || len(page.Runs) != 50 {
					b.Fatalf("ListRuns(%+v) = %d runs, %v; want 50", c.q, len(page.Runs), err)
				}
			}
		})
	}
	for _, c := range []struct{ name, workflow string }{{"all", ""}, {"workflow", "wf-1"}} {
		b.Run("count="+c.name, func(b *testing.B) {
			for b.Loop() {
				counts, err := s.CountRuns(ctx, storage.CountRunsQuery{Workflow: c.workflow})
				if err != nil || counts.Total() == 0 {
					b.Fatalf("CountRuns(%q) = %v, %v", c.workflow, counts, err)
				}
			}
		})
	}
}
