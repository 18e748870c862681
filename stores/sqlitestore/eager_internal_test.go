package sqlitestore

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stemflow/stem/storage"
)

// A run created leased and finished by its last step's checkpoint costs a
// commit per write: its creation (no claim) and one per step, the last
// one carrying the completion.
func TestEagerRunCommits(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := openTemp(t)
	before := s.stats.batches // the writer has committed nothing yet
	res, err := s.CreateRuns(ctx, []storage.NewRun{{ID: "run-1", Workflow: "wf",
		Lease: &storage.EagerLease{Owner: "w", For: time.Hour}}})
	if err != nil || !res[0].Created {
		t.Fatalf("CreateRuns = %+v, %v", res, err)
	}
	l := storage.Lease{RunID: "run-1", Owner: "w", Token: res[0].Run.Token}
	const steps = 10
	for i := range steps {
		req := storage.CheckpointRequest{Lease: l, LeaseFor: time.Hour,
			Checkpoint: storage.Checkpoint{Key: fmt.Sprintf("s%d@v1", i), Kind: storage.KindStep, Output: []byte(`1`)}}
		if i == steps-1 {
			req.Complete = &storage.CompleteRequest{Status: storage.StatusComplete, Output: []byte(`"done"`)}
		}
		got, err := s.Checkpoint(ctx, req)
		if err != nil || got.Completed != (i == steps-1) {
			t.Fatalf("Checkpoint %d = %+v, %v", i, got, err)
		}
	}
	// Each call returned after its batch committed: the count is settled.
	if got := s.stats.batches - before; got != 1+steps {
		t.Errorf("%d commits, want %d: the creation and one per step", got, 1+steps)
	}
	rec, err := s.GetRun(ctx, "run-1")
	if err != nil || rec.Status != storage.StatusComplete || string(rec.Output) != `"done"` || rec.Recoveries != 0 {
		t.Fatalf("GetRun = %+v, %v; want complete", rec, err)
	}
}

// A run created leased logs its start on a queue a claim has counted the
// starts of for a rate (rateMark), and on no other.
func TestEagerStartLogged(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := openTemp(t)
	starts := func(queue string) (n int) {
		t.Helper()
		if err := s.rdb.QueryRowContext(ctx, `SELECT count(*) FROM queue_starts WHERE queue = ?1 AND at < ?2`, queue, int64(rateMark)).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	eager := func(id, queue string) {
		t.Helper()
		if _, err := s.CreateRuns(ctx, []storage.NewRun{{ID: id, Workflow: "wf", Queue: queue,
			Lease: &storage.EagerLease{Owner: "w", For: time.Hour}}}); err != nil {
			t.Fatal(err)
		}
	}
	eager("plain", "")
	eager("early", "r")
	if a, b := starts(storage.DefaultQueue), starts("r"); a != 0 || b != 0 {
		t.Fatalf("starts logged before any claim with a rate: default %d, r %d; want none", a, b)
	}
	// A claim with a rate counts the queue's starts and marks it.
	rate := []storage.Queue{{Name: "r", Rate: 1, RatePeriod: time.Minute}}
	if _, err := s.CreateRuns(ctx, []storage.NewRun{{ID: "other", Workflow: "wf-other", Queue: "r"}}); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Claim(ctx, storage.ClaimRequest{Owner: "w", Workflows: []string{"wf"}, Limit: 1, LeaseFor: time.Hour, Queues: rate}); err != nil || len(got) != 0 {
		t.Fatalf("Claim = %v, %v; want nothing", got, err)
	}
	eager("late", "r")
	eager("plain-2", "")
	if a, b := starts(storage.DefaultQueue), starts("r"); a != 0 || b != 1 {
		t.Fatalf("starts logged: default %d, r %d; want the late start on r alone", a, b)
	}
	if _, err := s.CreateRuns(ctx, []storage.NewRun{{ID: "ready", Workflow: "wf", Queue: "r"}}); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Claim(ctx, storage.ClaimRequest{Owner: "w", Workflows: []string{"wf"}, Limit: 1, LeaseFor: time.Hour, Queues: rate}); err != nil || len(got) != 0 {
		t.Fatalf("Claim within the late start's period = %v, %v; want nothing", got, err)
	}
}

// openTemp opens a store on a file of the test's own, closed when the test
// ends.
func openTemp(t *testing.T) *Store {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "stem.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}
