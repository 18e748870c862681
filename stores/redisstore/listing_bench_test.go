package redisstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stemflow/stem/storage"
	"github.com/stemflow/stem/stores/storetest"
)

// benchRuns is how many runs BenchmarkListing seeds.
const benchRuns = 100_000

// BenchmarkListing measures a dashboard's reads over 100 000 runs, seeded
// once on a prefix of its own: a page of 50 newest first (ListRuns,
// Descending), unfiltered, by status, by ID prefix, by both and by a
// recent creation range, and CountRuns of all runs and of one workflow.
// The runs are run-000000 to run-099999, created a second apart in ID
// order over four workflows; every tenth is paused.
func BenchmarkListing(b *testing.B) {
	ctx := context.Background()
	c := testClient(b)
	prefix := testPrefix(b)
	cleanupPrefix(b, c, prefix)
	clock := storetest.NewClock(storetest.Start)
	s, err := New(ctx, c, Options{Prefix: prefix, Clock: clock, Logger: quietLogger()})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	const batch = 1000
	runs := make([]storage.NewRun, 0, batch)
	for i := range benchRuns {
		runs = append(runs, storage.NewRun{
			ID:       fmt.Sprintf("run-%06d", i),
			Workflow: fmt.Sprintf("bench-%d", i%4),
			Input:    []byte(`{"n":1}`),
		})
		if len(runs) == batch {
			if _, err := s.CreateRuns(ctx, runs); err != nil {
				b.Fatal(err)
			}
			runs = runs[:0]
		}
		clock.Advance(time.Second)
	}
	for i := 0; i < benchRuns; i += 10 {
		if err := s.Pause(ctx, fmt.Sprintf("run-%06d", i)); err != nil {
			b.Fatal(err)
		}
	}
	end := clock.Now()
	for _, tc := range []struct {
		name string
		q    storage.ListRunsQuery
	}{
		{"all", storage.ListRunsQuery{}},
		{"status", storage.ListRunsQuery{Status: storage.StatusPaused}},
		{"prefix", storage.ListRunsQuery{IDPrefix: "run-050"}},
		{"prefix+status", storage.ListRunsQuery{IDPrefix: "run-050", Status: storage.StatusPaused}},
		{"created-last-hour", storage.ListRunsQuery{CreatedFrom: end.Add(-time.Hour)}},
	} {
		b.Run("ListRuns/desc/"+tc.name, func(b *testing.B) {
			q := tc.q
			q.Descending, q.Limit = true, 50
			for b.Loop() {
				page, err := s.ListRuns(ctx, q)
				if err != nil {
					b.Fatal(err)
				}
				if len(page.Runs) != 50 {
					b.Fatalf("listed %d runs, want 50", len(page.Runs))
				}
			}
		})
	}
	for _, tc := range []struct {
		name, workflow string
		want           int64
	}{
		{"all", "", benchRuns},
		{"workflow", "bench-1", benchRuns / 4},
	} {
		b.Run("CountRuns/"+tc.name, func(b *testing.B) {
			for b.Loop() {
				counts, err := s.CountRuns(ctx, storage.CountRunsQuery{Workflow: tc.workflow})
				if err != nil {
					b.Fatal(err)
				}
				if counts.Total() != tc.want {
					b.Fatalf("counted %d runs, want %d", counts.Total(), tc.want)
				}
			}
		})
	}
}

// BenchmarkAttrListing measures listings filtered by search attributes
// over 100 000 runs, seeded once on a prefix of its own: a page of the
// 100 newest runs of a customer (equality, in creation order: one range
// read of the equality index), the same in ID order (descending), and
// pages of a number range and of a string prefix. The runs are
// run-000000 to run-099999, created a second apart in ID order, each
// with a customer (C-0 to C-99, so 1 000 runs each), a total (0 to 999)
// and an order number (O-<the run's number>).
func BenchmarkAttrListing(b *testing.B) {
	ctx := context.Background()
	c := testClient(b)
	prefix := testPrefix(b)
	cleanupPrefix(b, c, prefix)
	clock := storetest.NewClock(storetest.Start)
	s, err := New(ctx, c, Options{Prefix: prefix, Clock: clock, Logger: quietLogger()})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	const batch = 1000
	runs := make([]storage.NewRun, 0, batch)
	for i := range benchRuns {
		runs = append(runs, storage.NewRun{
			ID:       fmt.Sprintf("run-%06d", i),
			Workflow: fmt.Sprintf("bench-%d", i%4),
			Input:    []byte(`{"n":1}`),
			Attributes: []storage.Attr{
				storage.StringAttr("customer", fmt.Sprintf("C-%d", i%100)),
				storage.NumberAttr("total", float64(i%1000)),
				storage.StringAttr("order", fmt.Sprintf("O-%06d", i)),
			},
		})
		if len(runs) == batch {
			if _, err := s.CreateRuns(ctx, runs); err != nil {
				b.Fatal(err)
			}
			runs = runs[:0]
		}
		clock.Advance(time.Second)
	}
	// What the indexes of attributes and creation cost the server.
	for _, pattern := range []string{"ae:*", "an:*", "as:*", "ic*"} {
		var bytes int64
		keys, err := c.Keys(ctx, globEscape(prefix)+pattern).Result()
		if err != nil {
			b.Fatal(err)
		}
		for _, k := range keys {
			bytes += c.MemoryUsage(ctx, k).Val()
		}
		b.Logf("%-5s %4d keys, %6.1f bytes per run", pattern, len(keys), float64(bytes)/benchRuns)
	}
	customer := []storage.AttrFilter{{Op: storage.OpEq, Value: storage.StringAttr("customer", "C-7")}}
	for _, tc := range []struct {
		name string
		q    storage.ListRunsQuery
		want string
	}{
		{"eq/newest", storage.ListRunsQuery{Where: customer, Order: storage.OrderCreated}, "run-099907"},
		{"eq/by-id", storage.ListRunsQuery{Where: customer}, "run-099907"},
		{"eq+workflow/newest", storage.ListRunsQuery{Where: customer, Workflow: "bench-3", Order: storage.OrderCreated}, "run-099907"},
		{"range/newest", storage.ListRunsQuery{Where: []storage.AttrFilter{{Op: storage.OpGe, Value: storage.NumberAttr("total", 990)}}, Order: storage.OrderCreated}, "run-099999"},
		{"prefix/newest", storage.ListRunsQuery{Where: []storage.AttrFilter{{Op: storage.OpPrefix, Value: storage.StringAttr("order", "O-0999")}}, Order: storage.OrderCreated}, "run-099999"},
		{"created/newest", storage.ListRunsQuery{Order: storage.OrderCreated}, "run-099999"},
	} {
		b.Run("desc100/"+tc.name, func(b *testing.B) {
			q := tc.q
			q.Descending, q.Limit = true, 100
			script0 := scriptTime(b, c)
			defer func() {
				b.ReportMetric(float64((scriptTime(b, c)-script0).Nanoseconds())/1000/float64(b.N), "script-µs/op")
			}()
			for b.Loop() {
				page, err := s.ListRuns(ctx, q)
				if err != nil {
					b.Fatal(err)
				}
				if len(page.Runs) != 100 || page.Runs[0].ID != tc.want {
					b.Fatalf("listed %d runs from %v, want 100 from %s", len(page.Runs), page.Runs[0].ID, tc.want)
				}
			}
		})
	}
}
