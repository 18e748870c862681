package sqlitestore

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/stemflow/stem/storage"
)

// BenchmarkListing measures what a dashboard reads with every page, on a
// store of 100 000 and of 1 000 000 runs: a page of 50 runs newest first
// (ListRuns, Descending), alone, the next page, filtered by status, by
// workflow, by workflow and status, and by an ID prefix, a page oldest
// first, and the counts per status (CountRuns) of every run and of one
// workflow. The runs have UUIDv7 IDs, as the engine
// makes them, over four workflows; one in ten is paused, and some of one
// workflow are running, complete or errored. Each store is seeded once per
// run of BenchmarkListing, before its sub-benchmarks, never per iteration
// (seconds for 100 000 runs, a minute or more for 1 000 000): lengthen a
// measure with -benchtime rather than -count, which seeds again.
//
//	go test -run '^$' -bench 'BenchmarkListing/^runs=100000$' ./stores/sqlitestore
func BenchmarkListing(b *testing.B) {
	for _, runs := range []int{100_000, 1_000_000} {
		b.Run(fmt.Sprintf("runs=%d", runs), func(b *testing.B) {
			s, ids := seedListing(b, runs)
			// A prefix that 200 runs or more share, from the middle.
			prefix := commonPrefix(ids[len(ids)/2], ids[len(ids)/2+200])
			for _, c := range []struct {
				name string
				q    storage.ListRunsQuery
			}{
				{"list/newest", storage.ListRunsQuery{Descending: true, Limit: 50}},
				{"list/newest/page-2", storage.ListRunsQuery{Descending: true, Limit: 50, After: ids[len(ids)-51]}},
				{"list/newest/status=paused", storage.ListRunsQuery{Descending: true, Limit: 50, Status: storage.StatusPaused}},
				{"list/newest/workflow", storage.ListRunsQuery{Descending: true, Limit: 50, Workflow: "wf-1"}},
				{"list/newest/workflow+status=paused", storage.ListRunsQuery{Descending: true, Limit: 50, Workflow: "wf-2", Status: storage.StatusPaused}},
				{"list/newest/prefix", storage.ListRunsQuery{Descending: true, Limit: 50, IDPrefix: prefix}},
				{"list/oldest", storage.ListRunsQuery{Limit: 50}},
			} {
				b.Run(c.name, func(b *testing.B) {
					ctx := context.Background()
					for b.Loop() {
						page, err := s.ListRuns(ctx, c.q)
						if err != nil || len(page.Runs) != 50 {
							b.Fatalf("ListRuns(%+v) = %d runs, %v; want 50", c.q, len(page.Runs), err)
						}
					}
				})
			}
			for _, c := range []struct {
				name     string
				workflow string
				want     int
			}{
				{"count/all", "", runs},
				{"count/workflow", "wf-0", runs / 4},
			} {
				b.Run(c.name, func(b *testing.B) {
					ctx := context.Background()
					for b.Loop() {
						counts, err := s.CountRuns(ctx, storage.CountRunsQuery{Workflow: c.workflow})
						if err != nil || counts.Total() != int64(c.want) {
							b.Fatalf("CountRuns(%q) = %v, %v; want %d runs", c.workflow, counts, err, c.want)
						}
					}
				})
			}
		})
	}
}

// seedListing opens a store in b's temporary directory and creates n runs
// in it, in batches of 1000, as BenchmarkListing describes them. It
// returns the store and the runs' IDs in order.
func seedListing(b *testing.B, n int) (*Store, []string) {
	b.Helper()
	ctx := context.Background()
	start := time.Now()
	s, err := Open(filepath.Join(b.TempDir(), "listing.db"), Options{Synchronous: SyncNormal})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	ids := make([]string, n)
	batch := make([]storage.NewRun, 0, 1000)
	for i := range n {
		ids[i] = uuid.Must(uuid.NewV7()).String()
		batch = append(batch, storage.NewRun{ID: ids[i], Workflow: fmt.Sprintf("wf-%d", i%4), Input: []byte(`{"order":12345}`)})
		if len(batch) == cap(batch) || i == n-1 {
			if _, err := s.CreateRuns(ctx, batch); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	// One run in ten paused, by callers enough that the writer commits
	// them in groups.
	var wg sync.WaitGroup
	const callers = 32
	for c := range callers {
		wg.Go(func() {
			for i := c * 10; i < n; i += 10 * callers {
				if err := s.Pause(ctx, ids[i]); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	// Some runs of wf-0 running, some of those complete or errored.
	claimed, err := s.Claim(ctx, storage.ClaimRequest{Owner: "bench", Workflows: []string{"wf-0"}, Limit: 3000, LeaseFor: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	for i, cl := range claimed[:2000] {
		req := storage.CompleteRequest{Lease: cl.Lease, Status: storage.StatusComplete, Output: []byte(`"ok"`)}
		if i%4 == 0 {
			req = storage.CompleteRequest{Lease: cl.Lease, Status: storage.StatusErrored, Error: &storage.ErrorInfo{Message: "boom"}}
		}
		if err := s.Complete(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
	b.Logf("seeded %d runs in %v", n, time.Since(start).Round(time.Millisecond))
	return s, ids
}

// commonPrefix returns the longest prefix a and b share.
func commonPrefix(a, b string) string {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	return a[:i]
}
