package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stemflow/stem/storage"
	"github.com/stemflow/stem/stores/storetest"
)

// appTable creates the application's table "orders" in the store's schema
// (dropped with it) and returns a function that reports whether an order
// exists, read through the store's pool.
func appTable(t *testing.T, s *Store) func(id string) bool {
	t.Helper()
	ctx := context.Background()
	if _, err := s.pool.Exec(ctx, `CREATE TABLE `+s.schema+`.orders (id text PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	return func(id string) bool {
		t.Helper()
		var n int
		if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM `+s.schema+`.orders WHERE id = $1`, id).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 1
	}
}

// runExists reports whether the store has run id.
func runExists(t *testing.T, s *Store, id string) bool {
	t.Helper()
	_, err := s.GetRun(context.Background(), id)
	if err != nil && !errors.Is(err, storage.ErrRunNotFound) {
		t.Fatal(err)
	}
	return err == nil
}

// quiet checks that no hint arrives on ch for a while.
func quiet(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
		t.Fatalf("%s woke the store's subscribers", what)
	case <-time.After(300 * time.Millisecond):
	}
}

// woken checks that a hint arrives on ch soon.
func woken(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s woke nobody", what)
	}
}

// settle empties ch of the hints pending and of those arriving within
// 100ms (a NOTIFY reaches the listener a moment after its commit).
func settle(ch <-chan struct{}) {
	for {
		select {
		case <-ch:
		case <-time.After(100 * time.Millisecond):
			return
		}
	}
}

// TestCreateRunsTxWithAppRows: an application's row and the runs it starts
// with CreateRunsTx in the same transaction, a plain one and ones with a
// policy, an event and a key, commit together or roll back together, on a
// transaction BeginTx began and on one of a connection outside the store's
// pool; the ready notification is heard once the transaction commits, not
// before, and never when it rolls back.
func TestCreateRunsTxWithAppRows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newTestStore(t, Options{})
	order := appTable(t, s)
	ch := s.Notifications(ctx)
	settle(ch)
	own, err := pgx.Connect(ctx, testURL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { own.Close(context.Background()) })
	begins := map[string]func() (pgx.Tx, error){
		"BeginTx": func() (pgx.Tx, error) {
			tx, err := s.BeginTx(ctx)
			if err != nil {
				return nil, err
			}
			return tx.Tx().(pgx.Tx), nil
		},
		"own connection": func() (pgx.Tx, error) { return own.Begin(ctx) },
	}
	for name, begin := range begins {
		for _, commit := range []bool{false, true} {
			what := fmt.Sprintf("%s, commit %v", name, commit)
			id := fmt.Sprintf("%s-%v", strings.ReplaceAll(name, " ", "-"), commit)
			tx, err := begin()
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { tx.Rollback(context.Background()) })
			if _, err := tx.Exec(ctx, `INSERT INTO `+s.schema+`.orders (id) VALUES ($1)`, id); err != nil {
				t.Fatal(err)
			}
			runs := []storage.NewRun{
				{ID: id + "-plain", Workflow: "wf"},
				{ID: id + "-fail", Workflow: "wf", OnExisting: storage.ExistingFail, Event: &storage.Event{Topic: "t", Payload: []byte("x")}},
				{ID: id + "-key", Workflow: "wf", Key: &storage.StartKey{Key: id}},
			}
			res, err := s.CreateRunsTx(ctx, tx, runs)
			if err != nil || len(res) != 3 || !res[0].Created || !res[1].Created || !res[2].Created {
				t.Fatalf("%s: CreateRunsTx = %+v, %v; want three created", what, res, err)
			}
			// A plain create alone takes the creation statement.
			if res, err := s.CreateRunsTx(ctx, tx, []storage.NewRun{{ID: id + "-alone", Workflow: "wf"}}); err != nil || !res[0].Created {
				t.Fatalf("%s: CreateRunsTx of a plain run = %+v, %v", what, res, err)
			}
			if order(id) || runExists(t, s, id+"-plain") || runExists(t, s, id+"-key") {
				t.Fatalf("%s: the order or a run is visible before the commit", what)
			}
			quiet(t, ch, what+": creates not yet committed")
			if commit {
				err = tx.Commit(ctx)
			} else {
				err = tx.Rollback(ctx)
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range append(runs, storage.NewRun{ID: id + "-alone"}) {
				if runExists(t, s, r.ID) != commit {
					t.Fatalf("%s: run %s exists %v after the transaction, want %v", what, r.ID, !commit, commit)
				}
			}
			if order(id) != commit {
				t.Fatalf("%s: the order exists %v after the transaction, want %v", what, !commit, commit)
			}
			if commit {
				woken(t, ch, what)
				// The key is held by the committed run.
				res, err := s.CreateRuns(ctx, []storage.NewRun{{ID: id + "-again", Workflow: "wf", Key: &storage.StartKey{Key: id}}})
				if err != nil || !res[0].Joined || res[0].Run.ID != id+"-key" {
					t.Fatalf("%s: a keyed create after the commit = %+v, %v; want it joined", what, res, err)
				}
				settle(ch)
			} else {
				quiet(t, ch, what)
				res, err := s.CreateRuns(ctx, []storage.NewRun{{ID: id + "-again", Workflow: "wf", Key: &storage.StartKey{Key: id}}})
				if err != nil || !res[0].Created {
					t.Fatalf("%s: a keyed create after the rollback = %+v, %v; want it created", what, res, err)
				}
				settle(ch)
			}
		}
	}
}

// TestCheckpointTxWithAppRows: a transactional step's application row
// commits with its checkpoint, and is rolled back when the step fails,
// when the lease no longer holds, and when the key has a checkpoint
// already.
func TestCheckpointTxWithAppRows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newTestStore(t, Options{})
	order := appTable(t, s)
	start := func(id string) storage.Lease {
		t.Helper()
		if _, err := s.CreateRuns(ctx, []storage.NewRun{{ID: id, Workflow: "wf-" + id}}); err != nil {
			t.Fatal(err)
		}
		c, err := s.Claim(ctx, storage.ClaimRequest{Owner: "w", Workflows: []string{"wf-" + id}, Limit: 1, LeaseFor: time.Minute})
		if err != nil || len(c) != 1 {
			t.Fatalf("claim %s: %+v, %v", id, c, err)
		}
		return c[0].Lease
	}
	req := func(l storage.Lease, key string) storage.CheckpointRequest {
		return storage.CheckpointRequest{Lease: l, LeaseFor: time.Minute, Checkpoint: storage.Checkpoint{Key: key, Kind: storage.KindStep}}
	}
	step := func(order string, out []byte, fail error) func(context.Context, any) ([]byte, error) {
		return func(ctx context.Context, tx any) ([]byte, error) {
			if _, err := tx.(pgx.Tx).Exec(ctx, `INSERT INTO `+s.schema+`.orders (id) VALUES ($1)`, order); err != nil {
				return nil, err
			}
			return out, fail
		}
	}

	l := start("ok")
	res, err := s.CheckpointTx(ctx, req(l, "s@v1"), step("o-ok", []byte("out"), nil))
	if err != nil || res.Existing != nil {
		t.Fatalf("CheckpointTx = %+v, %v; want written", res, err)
	}
	cps, err := checkpointsOf(ctx, s, "ok")
	if err != nil || len(cps) != 1 || string(cps[0].Output) != "out" || !order("o-ok") {
		t.Fatalf("after a committed step: checkpoints %+v (%v), order %v; want both", cps, err, order("o-ok"))
	}

	l = start("fails")
	boom := errors.New("boom")
	if _, err := s.CheckpointTx(ctx, req(l, "s@v1"), step("o-fails", nil, boom)); err != boom {
		t.Fatalf("CheckpointTx of a failing step: %v, want the step's error as it is", err)
	}
	if cps, _ := checkpointsOf(ctx, s, "fails"); len(cps) != 0 || order("o-fails") {
		t.Fatalf("after a failed step: checkpoints %+v, order %v; want neither", cps, order("o-fails"))
	}

	l = start("lost")
	if _, err := s.Terminate(ctx, storage.TerminateRequest{RunID: "lost", Error: storage.ErrorInfo{Message: "stop"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CheckpointTx(ctx, req(l, "s@v1"), step("o-lost", []byte("out"), nil)); !errors.Is(err, storage.ErrLeaseLost) {
		t.Fatalf("CheckpointTx under a lost lease: %v, want ErrLeaseLost", err)
	}
	if cps, _ := checkpointsOf(ctx, s, "lost"); len(cps) != 0 || order("o-lost") {
		t.Fatalf("after a lost lease: checkpoints %+v, order %v; want neither", cps, order("o-lost"))
	}

	l = start("existing")
	if _, err := s.Checkpoint(ctx, storage.CheckpointRequest{Lease: l, LeaseFor: time.Minute,
		Checkpoint: storage.Checkpoint{Key: "s@v1", Kind: storage.KindStep, Output: []byte("first")}}); err != nil {
		t.Fatal(err)
	}
	res, err = s.CheckpointTx(ctx, req(l, "s@v1"), step("o-existing", []byte("second"), nil))
	if err != nil || res.Existing == nil || string(res.Existing.Output) != "first" || order("o-existing") {
		t.Fatalf("CheckpointTx of an existing key = %+v, %v, order %v; want the existing checkpoint and no order", res, err, order("o-existing"))
	}
}

// TestCheckpointTxStepHoldsNoRunLock: while a transactional step runs, the
// run's row is not locked: its heartbeat and a checkpoint of another key
// (through the writers' batches) go through at once.
func TestCheckpointTxStepHoldsNoRunLock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newTestStore(t, Options{})
	if _, err := s.CreateRuns(ctx, []storage.NewRun{{ID: "r", Workflow: "wf"}}); err != nil {
		t.Fatal(err)
	}
	c, err := s.Claim(ctx, storage.ClaimRequest{Owner: "w", Workflows: []string{"wf"}, Limit: 1, LeaseFor: time.Minute})
	if err != nil || len(c) != 1 {
		t.Fatalf("claim: %+v, %v", c, err)
	}
	l := c[0].Lease
	res, err := s.CheckpointTx(ctx, storage.CheckpointRequest{Lease: l, LeaseFor: time.Minute,
		Checkpoint: storage.Checkpoint{Key: "tx@v1", Kind: storage.KindStep}},
		func(_ context.Context, tx any) ([]byte, error) {
			bctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			if _, err := s.Heartbeat(bctx, storage.HeartbeatRequest{Lease: l, LeaseFor: time.Minute}); err != nil {
				return nil, fmt.Errorf("heartbeat during the step: %w", err)
			}
			if _, err := s.Checkpoint(bctx, storage.CheckpointRequest{Lease: l, LeaseFor: time.Minute,
				Checkpoint: storage.Checkpoint{Key: "other@v1", Kind: storage.KindStep, Output: []byte("o")}}); err != nil {
				return nil, fmt.Errorf("checkpoint during the step: %w", err)
			}
			return []byte("t"), nil
		})
	if err != nil || res.Existing != nil {
		t.Fatalf("CheckpointTx = %+v, %v", res, err)
	}
	cps, err := checkpointsOf(ctx, s, "r")
	if err != nil || len(cps) != 2 || cps[0].Key != "other@v1" || cps[1].Key != "tx@v1" {
		t.Fatalf("checkpoints %+v, %v; want other@v1 then tx@v1", cps, err)
	}
}

// rowOf is a run's row as JSON, without the columns a replacement keeps
// or that name the run.
func rowOf(t *testing.T, s *Store, id string) string {
	t.Helper()
	var row string
	if err := s.pool.QueryRow(context.Background(),
		`SELECT (to_jsonb(r) - 'id' - 'token')::text FROM `+s.schema+`.runs r WHERE id = $1`, id).Scan(&row); err != nil {
		t.Fatal(err)
	}
	return row
}

// TestReplaceResetsEveryColumn: the run a replacement leaves is, column
// for column, the run a create of the same request makes, however much
// the replaced run had written (a wait, progress, a cancellation, a pause
// request, checkpoints, attempts, events), leased or not; only its
// fencing token goes on from the replaced run's, and everything the
// replaced run owned is gone. A migration that adds a column to runs
// fails here until resetRun sets it.
func TestReplaceResetsEveryColumn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := storetest.NewClock(storetest.Start)
	s := newTestStore(t, Options{Clock: clock})
	deadline := storetest.Start.Add(time.Hour)
	newRun := func(id string) storage.NewRun {
		return storage.NewRun{ID: id, Workflow: "wf-new", Input: []byte("in"), Headers: map[string]string{"h": "v"},
			Queue: "q", Partition: "p", Priority: 3, Version: 7, Deadline: &deadline}
	}
	for _, leased := range []bool{false, true} {
		old, fresh := fmt.Sprintf("old-%v", leased), fmt.Sprintf("fresh-%v", leased)
		if _, err := s.CreateRuns(ctx, []storage.NewRun{{ID: old, Workflow: "wf-old", Input: []byte("old")}}); err != nil {
			t.Fatal(err)
		}
		c, err := s.Claim(ctx, storage.ClaimRequest{Owner: "w", Workflows: []string{"wf-old"}, Limit: 1, LeaseFor: time.Minute})
		if err != nil || len(c) != 1 {
			t.Fatalf("claim: %+v, %v", c, err)
		}
		l := c[0].Lease
		if _, err := s.Heartbeat(ctx, storage.HeartbeatRequest{Lease: l, LeaseFor: time.Minute, Progress: []byte(`"half"`),
			Step: &storage.ActiveStep{Key: "a@v1", Attempt: 1, Started: clock.Now()}}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Checkpoint(ctx, storage.CheckpointRequest{Lease: l, LeaseFor: time.Minute,
			Checkpoint: storage.Checkpoint{Key: "s@v1", Kind: storage.KindStep, Output: []byte("o")}}); err != nil {
			t.Fatal(err)
		}
		if err := s.RecordAttempts(ctx, storage.RecordAttemptsRequest{Lease: l, LeaseFor: time.Minute,
			Attempts: []storage.Attempt{{Key: "b@v1", Number: 1, Started: clock.Now(), Ended: clock.Now(), Error: "x"}}}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Suspend(ctx, storage.SuspendRequest{Lease: l, LeaseFor: time.Minute, SuspendState: []byte("st"),
			Wait: &storage.Wait{Key: "ev@v1", Topic: "t", Kind: storage.KindEvent}}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.SendEvent(ctx, storage.Event{RunID: old, Topic: "other", Payload: []byte("p")}); err != nil {
			t.Fatal(err)
		}
		if err := s.Cancel(ctx, storage.CancelRequest{RunID: old, Reason: "why"}); err != nil {
			t.Fatal(err)
		}
		r := newRun(old)
		r.OnExisting, r.Replace = storage.ExistingReplace, &storage.ReplaceTerms{Error: storage.ErrorInfo{Message: "replaced"}}
		f := newRun(fresh)
		if leased {
			if _, err := s.Terminate(ctx, storage.TerminateRequest{RunID: old, Error: storage.ErrorInfo{Message: "ended"}}); err != nil {
				t.Fatal(err)
			}
			r.OnExisting, r.OnEnded = storage.ExistingReturn, storage.EndedReuse
			r.Lease = &storage.EagerLease{Owner: "w2", For: time.Minute}
			f.Lease = r.Lease
		}
		clock.Advance(time.Second)
		res, err := s.CreateRuns(ctx, []storage.NewRun{r, f})
		if err != nil || !res[0].Replaced || !res[1].Created {
			t.Fatalf("replace and create: %+v, %v", res, err)
		}
		if got, want := rowOf(t, s, old), rowOf(t, s, fresh); got != want {
			t.Fatalf("leased %v: the replaced run's row\n%s\nwant the new run's\n%s", leased, got, want)
		}
		want := l.Token
		if leased {
			want++ // as a claim of the new run would take it
		}
		if res[0].Run.Token != want {
			t.Fatalf("leased %v: the new run's token %d, the replaced run's lease %d: want %d", leased, res[0].Run.Token, l.Token, want)
		}
		var owned int
		if err := s.pool.QueryRow(ctx, `SELECT
			(SELECT count(*) FROM `+s.schema+`.checkpoints WHERE run_id = $1) +
			(SELECT count(*) FROM `+s.schema+`.attempts WHERE run_id = $1) +
			(SELECT count(*) FROM `+s.schema+`.events WHERE run_id = $1) +
			(SELECT count(*) FROM `+s.schema+`.executions WHERE run_id = $1 AND number <> 1)`, old).Scan(&owned); err != nil || owned != 0 {
			t.Fatalf("leased %v: the replaced run's rows left: %d, %v", leased, owned, err)
		}
	}
}

// TestReplaceWaiterFindsNewRun: a SendEvent that waits for the lock of a
// run a create is replacing, in an application's transaction, delivers to
// the new run once the transaction commits (the row is updated in place,
// not deleted), and a concurrent create with the run's start key joins the
// new run.
func TestReplaceWaiterFindsNewRun(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := newTestStore(t, Options{})
	if _, err := s.CreateRuns(ctx, []storage.NewRun{{ID: "r", Workflow: "wf", Input: []byte("old")}}); err != nil {
		t.Fatal(err)
	}
	tx, err := s.BeginTx(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	res, err := s.CreateRunsTx(ctx, tx.Tx(), []storage.NewRun{{ID: "r", Workflow: "wf", Input: []byte("new"),
		OnExisting: storage.ExistingReplace, Replace: &storage.ReplaceTerms{}, Key: &storage.StartKey{Key: "k"}}})
	if err != nil || !res[0].Replaced {
		t.Fatalf("CreateRunsTx = %+v, %v; want replaced", res, err)
	}
	var (
		wg     sync.WaitGroup
		sent   error
		joined []storage.CreateResult
		jerr   error
	)
	wg.Go(func() {
		_, sent = s.SendEvent(ctx, storage.Event{RunID: "r", Topic: "t", Payload: []byte("p")})
	})
	waitBlocked(t, s, "FOR UPDATE")
	wg.Go(func() {
		joined, jerr = s.CreateRuns(ctx, []storage.NewRun{{ID: "other", Workflow: "wf", Key: &storage.StartKey{Key: "k"}}})
	})
	waitAdvisory(t, s)
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if sent != nil {
		t.Fatalf("SendEvent waiting for the replacement: %v, want the event buffered for the new run", sent)
	}
	if jerr != nil || !joined[0].Joined || joined[0].Run.ID != "r" {
		t.Fatalf("a keyed create waiting for the replacement = %+v, %v; want it joined to r", joined, jerr)
	}
	c, err := s.Claim(ctx, storage.ClaimRequest{Owner: "w", Workflows: []string{"wf"}, Limit: 1, LeaseFor: time.Minute})
	if err != nil || len(c) != 1 || string(c[0].Input) != "new" {
		t.Fatalf("claim: %+v, %v; want the new run", c, err)
	}
	sr, err := s.Suspend(ctx, storage.SuspendRequest{Lease: c[0].Lease, LeaseFor: time.Minute, Wait: &storage.Wait{Key: "t@v1", Topic: "t"}})
	if err != nil || sr.Delivered == nil || string(sr.Delivered.Output) != "p" {
		t.Fatalf("Suspend = %+v, %v; want the event sent while the replacement held the run", sr, err)
	}
}

// waitAdvisory waits until a statement waits for an advisory lock: a
// create waiting for a start key's lock.
func waitAdvisory(t *testing.T, s *Store) {
	t.Helper()
	for range 3000 {
		var n int
		err := s.pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND wait_event = 'advisory' AND query = $1`, s.q.lockKey).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("no create waited for the key's lock")
}

// TestReplaceRacesPlainCreates: plain creates of an ID, which ride the
// checkpoint writers' batches, racing creates that replace its ended run,
// see the run before or after the one replacement, never a missing run
// or a second replacement.
func TestReplaceRacesPlainCreates(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newTestStore(t, Options{})
	if _, err := s.CreateRuns(ctx, []storage.NewRun{{ID: "r", Workflow: "wf", Input: []byte("old")}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Terminate(ctx, storage.TerminateRequest{RunID: "r", Error: storage.ErrorInfo{Message: "ended"}}); err != nil {
		t.Fatal(err)
	}
	const n = 16
	results := make([]storage.CreateResult, 2*n)
	errs := make([]error, 2*n)
	var wg sync.WaitGroup
	for i := range 2 * n {
		wg.Go(func() {
			r := storage.NewRun{ID: "r", Workflow: "wf", Input: fmt.Appendf(nil, "new-%d", i)}
			if i%2 == 0 {
				r.OnEnded, r.Replace = storage.EndedReuse, &storage.ReplaceTerms{}
			}
			res, err := s.CreateRuns(ctx, []storage.NewRun{r})
			if err == nil {
				results[i] = res[0]
			}
			errs[i] = err
		})
	}
	wg.Wait()
	replaced := 0
	for i, res := range results {
		switch {
		case errs[i] != nil:
			t.Fatalf("create %d: %v", i, errs[i])
		case res.Replaced:
			replaced++
		case res.Created:
			t.Fatalf("create %d = %+v: created without replacing", i, res)
		case res.Run.Status != storage.StatusTerminated && res.Run.Status != storage.StatusQueued:
			t.Fatalf("create %d = %+v: want the ended run or the new one", i, res)
		}
	}
	if replaced != 1 {
		t.Fatalf("%d replacements, want 1: %+v", replaced, results)
	}
}
