package pgstore

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/stemflow/stem/storage"
	"github.com/stemflow/stem/stores/storetest"
)

// TestHeadersByteForByte: header values that JSON escapes (markup,
// backslashes, line and paragraph separators, characters outside the
// basic plane) come back from GetRun and the claim as they went in, and
// the column holds one JSON object of them, its names sorted.
func TestHeadersByteForByte(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newTestStore(t, Options{})
	h := map[string]string{
		"markup":    `<a href="x?a=1&b=2">'it'</a>`,
		"slashes":   `C:\path\to\file /and/back \u00e9 \"`,
		"separator": "line\u2028paragraph\u2029end",
		"astral":    "🚀 𝄞 \U0010FFFD",
		"spaces":    "  leading and trailing  ",
	}
	if _, err := s.CreateRuns(ctx, []storage.NewRun{{ID: "r", Workflow: "wf", Headers: h}}); err != nil {
		t.Fatal(err)
	}
	rec, err := s.GetRun(ctx, "r")
	if err != nil || !maps.Equal(rec.Headers, h) {
		t.Fatalf("GetRun: headers %q, %v; want %q", rec.Headers, err, h)
	}
	got, err := s.Claim(ctx, storage.ClaimRequest{Owner: "w", Workflows: []string{"wf"}, Limit: 1, LeaseFor: time.Minute})
	if err != nil || len(got) != 1 || !maps.Equal(got[0].Headers, h) {
		t.Fatalf("Claim = %+v, %v; want the run with headers %q", got, err, h)
	}
	var text string
	if err := s.pool.QueryRow(ctx, `SELECT headers FROM `+s.schema+`.runs WHERE id = 'r'`).Scan(&text); err != nil {
		t.Fatal(err)
	}
	var stored map[string]string
	if err := json.Unmarshal([]byte(text), &stored); err != nil || !maps.Equal(stored, h) {
		t.Fatalf("the headers column holds %s (%v), want a JSON object of %q", text, err, h)
	}
	if want, _ := json.Marshal(h); text != string(want) {
		t.Fatalf("the headers column holds %s, want %s", text, want)
	}
}

// TestWorkersConcurrent: engines putting their records, listing and
// removing them at once, while the clock expires records under them, all
// succeed; the records of the engines that removed themselves are gone.
func TestWorkersConcurrent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := storetest.NewClock(storetest.Start)
	s := newTestStore(t, Options{Clock: clock})
	var wg sync.WaitGroup
	for e := range 8 {
		wg.Go(func() {
			for i := range 20 {
				w := storage.Worker{ID: fmt.Sprintf("engine-%d/%d", e, i%3), Host: "host", PID: e, StartedAt: storetest.Start}
				if err := s.PutWorker(ctx, storage.PutWorkerRequest{Worker: w, TTL: time.Second}); err != nil {
					t.Errorf("PutWorker(%s): %v", w.ID, err)
					return
				}
				if _, err := s.ListWorkers(ctx); err != nil {
					t.Errorf("ListWorkers: %v", err)
					return
				}
				if e == 0 {
					clock.Advance(300 * time.Millisecond)
				}
			}
			for i := range 3 {
				if err := s.RemoveWorker(ctx, fmt.Sprintf("engine-%d/%d", e, i)); err != nil {
					t.Errorf("RemoveWorker: %v", err)
				}
			}
		})
	}
	wg.Wait()
	if ws, err := s.ListWorkers(ctx); err != nil || len(ws) != 0 {
		t.Fatalf("ListWorkers after every engine removed itself = %+v, %v; want none", ws, err)
	}
	var rows int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM `+s.schema+`.workers`).Scan(&rows); err != nil || rows != 0 {
		t.Fatalf("%d worker rows left, %v", rows, err)
	}
}
