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
