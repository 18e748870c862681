package pgstore

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stemflow/stem/storage"
)

func createN(t *testing.T, s *Store, n int) []string {
	t.Helper()
	runs := make([]storage.NewRun, n)
	ids := make([]string, n)
	for i := range runs {
		ids[i] = fmt.Sprintf("run-%04d", i)
		runs[i] = storage.NewRun{ID: ids[i], Workflow: "wf"}
	}
	if _, err := s.CreateRuns(context.Background(), runs); err != nil {
		t.Fatal(err)
	}
	return ids
}

// TestConcurrentClaimsDisjoint: claimers racing over one backlog never lease
// a run twice, and together lease all of it.
func TestConcurrentClaimsDisjoint(t *testing.T) {
	t.Parallel()
	s := newTestStore(t, Options{})
	ids := createN(t, s, 300)
	var (
		mu   sync.Mutex
		seen = map[string]int{}
		wg   sync.WaitGroup
	)
	for w := range 8 {
		wg.Go(func() {
			for {
				got, err := s.Claim(context.Background(), storage.ClaimRequest{
					Owner: fmt.Sprintf("w%d", w), Workflows: []string{"wf", "other"}, Limit: 7, LeaseFor: time.Hour})
				if err != nil {
					t.Error(err)
					return
				}
				if len(got) == 0 {
					return
				}
				mu.Lock()
				for _, c := range got {
					seen[c.Lease.RunID]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(seen) != len(ids) {
		t.Fatalf("claimed %d distinct runs, want %d", len(seen), len(ids))
	}
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("run %s claimed %d times", id, n)
		}
	}
}

// TestClaimSkipsLockedRuns: a run locked by another transaction is skipped,
// not waited for.
func TestClaimSkipsLockedRuns(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := newTestStore(t, Options{})
	createN(t, s, 2)
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(ctx, `SELECT 1 FROM `+s.schema+`.runs WHERE id = 'run-0000' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	got, err := s.Claim(ctx, storage.ClaimRequest{Owner: "w", Workflows: []string{"wf"}, Limit: 10, LeaseFor: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Lease.RunID != "run-0001" {
		t.Fatalf("claimed %v, want only run-0001", got)
	}
}

// waitBlocked waits until a statement of this test's schema waits for a
// row lock. pg_stat_activity keeps only a statement's first 1024 bytes (by
// default), so fragment must come early in it.
func waitBlocked(t *testing.T, s *Store, fragment string) {
	t.Helper()
	for range 3000 {
		var n int
		err := s.pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND query LIKE '%' || $1 || '%' AND query LIKE '%' || $2 || '%'`,
			s.schema, fragment).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("statement never blocked")
}

// TestCheckpointAfterConcurrentDelivery: a Checkpoint that waited for the
// run's lock while another transaction wrote the same key reports that
// checkpoint as Existing, even though it was committed after the waiting
// statement's snapshot.
func TestCheckpointAfterConcurrentDelivery(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := newTestStore(t, Options{})
	createN(t, s, 1)
	got, err := s.Claim(ctx, storage.ClaimRequest{Owner: "w", Workflows: []string{"wf"}, Limit: 1, LeaseFor: time.Minute})
	if err != nil || len(got) != 1 {
		t.Fatalf("claim: %v %v", err, got)
	}
	l := got[0].Lease

	var (
		res  storage.CheckpointResult
		cerr error
		done = make(chan struct{})
	)
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT 1 FROM `+s.schema+`.runs WHERE id = $1 FOR UPDATE`, l.RunID); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, s.q.insertCkpt, nil, l.RunID, "k@v1", "event", []byte("delivered"), nil, 1, nil); err != nil {
			return err
		}
		go func() {
			defer close(done)
			res, cerr = s.Checkpoint(ctx, storage.CheckpointRequest{Lease: l, LeaseFor: time.Minute,
				Checkpoint: storage.Checkpoint{Key: "k@v1", Kind: storage.KindEvent, Output: []byte("timeout")}})
		}()
		waitBlocked(t, s, "f AS (") // either checkpoint statement
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	<-done
	if cerr != nil {
		t.Fatal(cerr)
	}
	if res.Existing == nil || string(res.Existing.Output) != "delivered" {
		t.Fatalf("Checkpoint = %+v, want the delivered checkpoint as Existing", res)
	}
	cps, err := checkpointsOf(ctx, s, l.RunID)
	if err != nil || len(cps) != 1 || string(cps[0].Output) != "delivered" {
		t.Fatalf("checkpoints %v %+v", err, cps)
	}
}

// TestConcurrentCreatesOverlapping: creates of overlapping ID sets in
// opposite orders, racing, create each run exactly once and all succeed.
func TestConcurrentCreatesOverlapping(t *testing.T) {
	t.Parallel()
	s := newTestStore(t, Options{})
	const n = 2000
	var wg sync.WaitGroup
	createdBy := make([][]storage.CreateResult, 6)
	for g := range createdBy {
		wg.Go(func() {
			runs := make([]storage.NewRun, n)
			for i := range runs {
				j := i
				if g%2 == 1 {
					j = n - 1 - i
				}
				runs[i] = storage.NewRun{ID: fmt.Sprintf("run-%03d", j), Workflow: "wf", Input: []byte(fmt.Sprint(g))}
			}
			res, err := s.CreateRuns(context.Background(), runs)
			if err != nil {
				t.Error(err)
			}
			createdBy[g] = res
		})
	}
	wg.Wait()
	created := map[string]int{}
	for _, res := range createdBy {
		for _, r := range res {
			if r.Created {
				created[r.Run.ID]++
			}
		}
	}
	if len(created) != n {
		t.Fatalf("%d runs created, want %d", len(created), n)
	}
	for id, c := range created {
		if c != 1 {
			t.Fatalf("run %s created %d times", id, c)
		}
	}
}
