package pgstore

import (
	"context"
	"testing"
	"time"

	"github.com/stemflow/stem/storage"
)

// TestNodeStats: the server's transaction and row counts for the store's
// database grow with the store's writes, once they have had their lag to
// arrive.
func TestNodeStats(t *testing.T) {
	s := newTestStore(t, Options{})
	ctx := context.Background()
	before, err := s.NodeStats(ctx)
	if err != nil || len(before) != 1 || before[0].Node == "" || before[0].CallsAre != "transactions" {
		t.Fatalf("NodeStats = %+v, %v", before, err)
	}
	for i := range 20 {
		if _, err := s.CreateRuns(ctx, []storage.NewRun{{ID: "r" + string(rune('a'+i)), Workflow: "wf"}}); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		after, err := s.NodeStats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		d := after[0].Sub(before[0])
		if d.Calls >= 20 && d.Operations >= 20 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 20 creates the server counted %d transactions and %d rows", d.Calls, d.Operations)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
