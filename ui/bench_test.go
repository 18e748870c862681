package ui_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/storage"
	"github.com/stemflow/stem/stores/sqlitestore"
	"github.com/stemflow/stem/ui"
)

// benchStore opens the store the benchmarks seed and read: SQLite, the
// default, in a file of its own.
func benchStore(b *testing.B) storage.Store {
	b.Helper()
	st, err := sqlitestore.Open(filepath.Join(b.TempDir(), "stem.db"), sqlitestore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	return st
}

// benchWorkflows are the workflows seedRuns spreads runs over.
var benchWorkflows = []string{"order", "invoice", "report", "sync"}

// seedRuns creates n runs with generated (time-ordered) IDs, spread over
// benchWorkflows, and moves most of them on as workers would, the oldest
// first: about 70% complete, 5% errored, 3% waiting for an event, 1%
// running, then of the rest 2% terminated and 1% paused; the newest stay
// queued. It returns the IDs, oldest first.
func seedRuns(tb testing.TB, st storage.Store, n int) []string {
	tb.Helper()
	ctx := context.Background()
	ids := make([]string, n)
	const batch = 1000
	for lo := 0; lo < n; lo += batch {
		runs := make([]storage.NewRun, 0, batch)
		for i := lo; i < min(lo+batch, n); i++ {
			ids[i] = uuid.Must(uuid.NewV7()).String()
			runs = append(runs, storage.NewRun{ID: ids[i], Workflow: benchWorkflows[i%len(benchWorkflows)],
				Input: fmt.Appendf(nil, `{"customer":"c-%d","items":[{"sku":"A-%d","qty":%d}],"note":"seeded"}`, i%977, i%31, i%5+1)})
		}
		if _, err := st.CreateRuns(ctx, runs); err != nil {
			tb.Fatal(err)
		}
	}
	// Claim and finish the oldest 79%, in parallel, as a fleet of workers
	// would (so a store may batch the writes).
	moved := n * 79 / 100
	work := make(chan storage.ClaimedRun)
	var wg sync.WaitGroup
	errs := make(chan error, 1)
	var k atomic.Int64
	for range 16 {
		wg.Go(func() {
			for c := range work {
				i := k.Add(1)
				var err error
				switch p := i % 100; {
				case p < 89:
					err = st.Complete(ctx, storage.CompleteRequest{Lease: c.Lease, Status: storage.StatusComplete, Output: []byte(`{"ok":true,"total":4200}`)})
				case p < 95:
					err = st.Complete(ctx, storage.CompleteRequest{Lease: c.Lease, Status: storage.StatusErrored,
						Error: &storage.ErrorInfo{Message: "charge: card declined by the issuer (code 51)\ngoroutine 12 [running]:\nshop.charge()\n\t/src/shop/charge.go:42"}})
				case p < 99:
					_, err = st.Suspend(ctx, storage.SuspendRequest{Lease: c.Lease, LeaseFor: time.Hour,
						Wait: &storage.Wait{Key: "approved", Topic: "order.approved"}})
				}
				if err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		})
	}
	var failed error
	for claimed := 0; claimed < moved && len(errs) == 0; {
		cs, err := st.Claim(ctx, storage.ClaimRequest{Owner: "seeder", Workflows: benchWorkflows, Limit: min(500, moved-claimed), LeaseFor: time.Hour})
		if err != nil {
			failed = err
			break
		}
		if len(cs) == 0 {
			break
		}
		for _, c := range cs {
			work <- c
		}
		claimed += len(cs)
	}
	close(work)
	wg.Wait()
	if failed == nil && len(errs) > 0 {
		failed = <-errs
	}
	if failed != nil {
		tb.Fatal(failed)
	}
	// Of the runs still queued, the oldest: every third paused, the others
	// terminated.
	queued, err := st.ListRuns(ctx, storage.ListRunsQuery{Status: storage.StatusQueued, Limit: n * 3 / 100})
	if err != nil {
		tb.Fatal(err)
	}
	for i, r := range queued.Runs {
		var err error
		if i%3 == 0 {
			err = st.Pause(ctx, r.ID)
		} else {
			_, err = st.Terminate(ctx, storage.TerminateRequest{RunID: r.ID, Error: storage.ErrorInfo{Message: "stem: run terminated: seeded", Code: storage.CodeTerminated}})
		}
		if err != nil {
			tb.Fatal(err)
		}
	}
	return ids
}

// seedSteps creates the run id, of workflow "long", with n checkpointed
// steps: each with a JSON result and its attempts, every tenth after a
// failed attempt with a stack in its error; the run then waits for an
// event, so its page is live.
func seedSteps(tb testing.TB, st storage.Store, id string, n int) {
	tb.Helper()
	ctx := context.Background()
	if _, err := st.CreateRuns(ctx, []storage.NewRun{{ID: id, Workflow: "long", Input: []byte(`{"batch":"2025-01"}`)}}); err != nil {
		tb.Fatal(err)
	}
	cs, err := st.Claim(ctx, storage.ClaimRequest{Owner: "seeder", Workflows: []string{"long"}, Limit: 1, LeaseFor: time.Hour})
	if err != nil || len(cs) != 1 {
		tb.Fatalf("claiming the run to seed its steps: %v (%d claimed)", err, len(cs))
	}
	lease := cs[0].Lease
	t0 := time.Now().Add(-time.Hour)
	for i := range n {
		key := fmt.Sprintf("item-%04d@v1", i)
		start := t0.Add(time.Duration(i) * time.Second)
		attempts := []storage.Attempt{{Key: key, Number: 1, Started: start, Ended: start.Add(40 * time.Millisecond)}}
		if i%10 == 0 {
			retry := start.Add(100 * time.Millisecond)
			attempts = []storage.Attempt{
				{Key: key, Number: 1, Started: start, Ended: start.Add(30 * time.Millisecond), RetryAt: &retry,
					Error: "fetch item: connection reset by peer\ngoroutine 9 [running]:\nbatch.fetch()\n\t/src/batch/fetch.go:17 +0x2a"},
				{Key: key, Number: 2, Started: retry, Ended: retry.Add(35 * time.Millisecond)},
			}
		}
		_, err := st.Checkpoint(ctx, storage.CheckpointRequest{Lease: lease, LeaseFor: time.Hour, Attempts: attempts,
			Checkpoint: storage.Checkpoint{Key: key, Kind: storage.KindStep, Output: fmt.Appendf(nil, `{"item":%d,"sum":%d,"status":"done"}`, i, i*7)}})
		if err != nil {
			tb.Fatal(err)
		}
	}
	if _, err := st.Suspend(ctx, storage.SuspendRequest{Lease: lease, LeaseFor: time.Hour, Wait: &storage.Wait{Key: "approve", Topic: "batch.approved"}}); err != nil {
		tb.Fatal(err)
	}
}

// benchHandler is the dashboard over st, as an operator sees it.
func benchHandler(b *testing.B, st storage.Store) http.Handler {
	b.Helper()
	e, err := runtime.New(runtime.Config{Store: st})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { e.Close() })
	return ui.New(e, ui.Options{AllowedHosts: testHosts})
}

// serve benchmarks one page: its whole server time, from the request to
// the last byte written.
func serve(b *testing.B, h http.Handler, target string) {
	b.Helper()
	for b.Loop() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, target, nil))
		if rec.Code != http.StatusOK {
			b.Fatalf("GET %s: %d\n%s", target, rec.Code, rec.Body)
		}
	}
}

// BenchmarkRunsPage renders the runs page over 100 000 runs: the newest,
// filtered, deep in the pages, and within a time range.
func BenchmarkRunsPage(b *testing.B) {
	st := benchStore(b)
	start := time.Now()
	ids := seedRuns(b, st, 100_000)
	b.Logf("seeded 100 000 runs in %v", time.Since(start).Round(time.Millisecond))
	h := benchHandler(b, st)
	mid := ids[len(ids)/2]
	r, err := st.GetRun(context.Background(), mid)
	if err != nil {
		b.Fatal(err)
	}
	from := r.CreatedAt.UTC().Format(time.RFC3339Nano)
	for _, c := range []struct{ name, target string }{
		{"newest", "/runs"},
		{"oldest", "/runs?order=oldest"},
		{"workflow", "/runs?workflow=invoice"},
		{"workflow+errored", "/runs?workflow=invoice&status=errored"},
		{"waiting", "/runs?status=waiting"},
		{"prefix", "/runs?prefix=" + url.QueryEscape(mid[:11])},
		{"page after 50000", "/runs?after=" + url.QueryEscape(storage.CreatedCursor(r.CreatedAt, mid))},
		{"created since the middle", "/runs?from=" + url.QueryEscape(from)},
	} {
		b.Run(c.name, func(b *testing.B) { serve(b, h, c.target) })
	}
}

// BenchmarkRunPage renders the page of a run with 1 000 steps.
func BenchmarkRunPage(b *testing.B) {
	st := benchStore(b)
	seedRuns(b, st, 1000)
	seedSteps(b, st, "long-run", 1000)
	h := benchHandler(b, st)
	serve(b, h, "/runs/long-run")
}
