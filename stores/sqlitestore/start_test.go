package sqlitestore_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stemflow/stem/storage"

	"github.com/stemflow/stem/stores/sqlitestore"
)

// A replacement deletes the replaced run's children; when the new run
// makes a child with a deleted child's ID, the deleted child's holder,
// which has not yet heard that its lease is gone, must not match the new
// child's lease: the new child's tokens go on from the deleted one's.
func TestReplacedChildHolderStaysFenced(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := open(t, dbPath(t), sqlitestore.Options{})
	if _, err := s.CreateRuns(ctx, []storage.NewRun{{ID: "p", Workflow: "parent"}}); err != nil {
		t.Fatal(err)
	}
	claimOne(t, s, "w", "parent")
	if _, err := s.CreateRuns(ctx, []storage.NewRun{{ID: "p/c", Workflow: "child", ParentID: "p"}}); err != nil {
		t.Fatal(err)
	}
	old := claimOne(t, s, "w", "child")

	res, err := s.CreateRuns(ctx, []storage.NewRun{{ID: "p", Workflow: "parent", OnExisting: storage.ExistingReplace,
		Replace: &storage.ReplaceTerms{Error: storage.ErrorInfo{Message: "replaced"}, ChildError: storage.ErrorInfo{Message: "parent replaced"}}}})
	if err != nil || !res[0].Replaced {
		t.Fatalf("CreateRuns(replace p) = %+v, %v", res, err)
	}
	if _, err := s.GetRun(ctx, "p/c"); !errors.Is(err, storage.ErrRunNotFound) {
		t.Fatalf("GetRun(p/c) after the replacement = %v, want ErrRunNotFound", err)
	}
	newParent := claimOne(t, s, "w", "parent")
	if newParent.Lease.Token <= 1 {
		t.Fatalf("the new parent's first claim has token %d, want it past the replaced run's 1", newParent.Lease.Token)
	}
	if _, err := s.CreateRuns(ctx, []storage.NewRun{{ID: "p/c", Workflow: "child", ParentID: "p"}}); err != nil {
		t.Fatal(err)
	}
	fresh := claimOne(t, s, "w", "child")
	if fresh.Lease.Token == old.Lease.Token {
		t.Fatalf("the new child's lease %+v has the deleted child's token", fresh.Lease)
	}
	_, err = s.Checkpoint(ctx, storage.CheckpointRequest{Lease: old.Lease, LeaseFor: time.Minute,
		Checkpoint: storage.Checkpoint{Key: "stale@v1", Kind: storage.KindStep}})
	if !errors.Is(err, storage.ErrLeaseLost) {
		t.Fatalf("Checkpoint by the deleted child's holder = %v, want ErrLeaseLost", err)
	}
	if _, err := s.Checkpoint(ctx, storage.CheckpointRequest{Lease: fresh.Lease, LeaseFor: time.Minute,
		Checkpoint: storage.Checkpoint{Key: "fresh@v1", Kind: storage.KindStep}}); err != nil {
		t.Fatalf("Checkpoint by the new child's holder: %v", err)
	}
}

// Creates of one ID in application transactions, racing one another and
// the store's own writer, agree: SQLite's write lock orders them, and
// exactly one creates the run.
func TestConcurrentCreatesInTransactions(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := open(t, dbPath(t), sqlitestore.Options{})
	const n = 8
	nr := storage.NewRun{ID: "once", Workflow: "wf", OnExisting: storage.ExistingFail}
	results := make([]storage.CreateResult, 2*n)
	errs := make([]error, 2*n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			tx, err := s.BeginTx(ctx)
			if err != nil {
				errs[i] = err
				return
			}
			defer tx.Rollback(ctx)
			res, err := s.CreateRunsTx(ctx, tx.Tx(), []storage.NewRun{nr})
			if err == nil {
				results[i] = res[0]
				err = tx.Commit(ctx)
			}
			errs[i] = err
		})
		wg.Go(func() {
			res, err := s.CreateRuns(ctx, []storage.NewRun{nr})
			if err == nil {
				results[n+i] = res[0]
			}
			errs[n+i] = err
		})
	}
	wg.Wait()
	created := 0
	for i, res := range results {
		switch {
		case errs[i] != nil:
			t.Fatalf("create %d: %v", i, errs[i])
		case res.Created:
			created++
		case res.Refused != storage.RefusedExists || res.Run.ID != "once":
			t.Fatalf("create %d = %+v, want created or refused as existing", i, res)
		}
	}
	if created != 1 {
		t.Fatalf("%d of %d creates made the run, want 1", created, 2*n)
	}
}
