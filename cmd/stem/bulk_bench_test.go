package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/stores/sqlitestore"
)

// BenchmarkBulkRestart measures stem bulk restart of N complete runs
// (10 000, or $STEM_BULK_BENCH_RUNS) on a SQLite file, as an operator runs
// it: the command counts them, starts the bulk action and carries it out
// in its own worker until done. No other worker runs, so the restarted
// runs wait queued and the figure is the bulk action's own pace: runs/s
// from the bulk action's creation to its end, as the store stamped them.
// The runs are created and completed by an engine first, outside the
// timing. Run it with
//
//	go test ./cmd/stem -run '^$' -bench BulkRestart -benchtime 1x
//
// rate=unbounded is --rate 0; rate=default is the default rate
// (runtime.DefaultBulkRate), which a bulk action keeps to so that live
// work is not starved.
func BenchmarkBulkRestart(b *testing.B) {
	n := 10_000
	if s := os.Getenv("STEM_BULK_BENCH_RUNS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 {
			b.Fatalf("$STEM_BULK_BENCH_RUNS %q: want a whole number above 0", s)
		}
		n = v
	}
	for _, c := range []struct {
		name string
		rate string
	}{
		{"rate=unbounded", "0"},
		{"rate=default", strconv.Itoa(runtime.DefaultBulkRate)},
	} {
		b.Run(c.name, func(b *testing.B) {
			for range b.N {
				b.StopTimer()
				path := seedComplete(b, n)
				b.StartTimer()
				var out, errOut bytes.Buffer
				start := time.Now()
				code := run([]string{"--store", path, "bulk", "restart", "--workflow", "bench.noop", "--yes", "--rate", c.rate}, strings.NewReader(""), &out, &errOut)
				wall := time.Since(start)
				b.StopTimer()
				if code != 0 {
					b.Fatalf("stem bulk restart: exit %d\n%s\n%s", code, out.String(), errOut.String())
				}
				m := bulkIDPattern.FindStringSubmatch(out.String())
				if m == nil || !strings.Contains(out.String(), fmt.Sprintf("  %d matched: %d restarted, 0 skipped, 0 failed done", n, n)) {
					b.Fatalf("stem bulk restart:\n%s", out.String())
				}
				took := bulkTook(b, path, m[1])
				b.ReportMetric(float64(n)/took.Seconds(), "runs/s")
				b.ReportMetric(wall.Seconds(), "command-s")
				b.Logf("%d runs restarted in %v (the command took %v)", n, took.Round(time.Millisecond), wall.Round(time.Millisecond))
			}
		})
	}
}

// seedComplete creates a SQLite store holding n complete runs of
// bench.noop (one step each), by an engine, and returns its path.
func seedComplete(b *testing.B, n int) string {
	b.Helper()
	path := filepath.Join(b.TempDir(), "stem.db")
	store, err := sqlitestore.Open(path, sqlitestore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	e, err := runtime.New(runtime.Config{Store: store, Workers: 64, PollInterval: 10 * time.Millisecond})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	if err := runtime.Register(e, "bench.noop", func(c *runtime.WorkflowContext, i int) (int, error) {
		return runtime.Step(c, "one@v1", runtime.StepOptions{}, func(runtime.StepContext) (int, error) { return i, nil })
	}); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); e.Run(ctx) }()
	defer func() { cancel(); <-done }()
	for from := 0; from < n; from += 1000 {
		items := make([]runtime.BatchItem[int], min(1000, n-from))
		for i := range items {
			items[i] = runtime.BatchItem[int]{ID: fmt.Sprintf("run-%06d", from+i), Input: from + i}
		}
		if _, err := runtime.StartBatch[int, int](ctx, e, "bench.noop", items); err != nil {
			b.Fatal(err)
		}
	}
	deadline := time.Now().Add(10 * time.Minute)
	for {
		counts, err := e.CountRuns(ctx, "bench.noop")
		if err != nil {
			b.Fatal(err)
		}
		if counts[runtime.StatusComplete] == int64(n) {
			return path
		}
		if time.Now().After(deadline) {
			b.Fatalf("the runs did not complete: %v", counts)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// bulkTook is how long bulk action id took, from its creation to its end.
func bulkTook(b *testing.B, path, id string) time.Duration {
	b.Helper()
	store, err := sqlitestore.Open(path, sqlitestore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	e, err := runtime.New(runtime.Config{Store: store})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	info, err := e.GetBulk(context.Background(), id)
	if err != nil || info.EndedAt == nil {
		b.Fatalf("bulk action %s: %+v %v", id, info, err)
	}
	return info.EndedAt.Sub(info.CreatedAt)
}
