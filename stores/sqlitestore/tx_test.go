package sqlitestore_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/stemflow/stem/storage"

	"github.com/stemflow/stem/stores/sqlitestore"
)

// appDB opens the application's own database handle on the file at path,
// with the modernc "sqlite" driver, as an application would: busy_timeout,
// WAL, transactions that begin IMMEDIATE. It makes the application's table
// orders.
func appDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.Exec(`CREATE TABLE IF NOT EXISTS orders (id TEXT PRIMARY KEY, amount INTEGER NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	return db
}

// orderExists reports whether the application's table holds order id.
func orderExists(t *testing.T, db *sql.DB, id string) bool {
	t.Helper()
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM orders WHERE id = ?`, id).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n == 1
}

// runExists reports whether s has run id.
func runExists(t *testing.T, s storage.Store, id string) bool {
	t.Helper()
	_, err := s.GetRun(t.Context(), id)
	if err != nil && !errors.Is(err, storage.ErrRunNotFound) {
		t.Fatal(err)
	}
	return err == nil
}

// drain empties a notification channel.
func drain(ch <-chan struct{}) {
	for {
		select {
		case <-ch:
		default:
			return
		}
	}
}

// A run started through CreateRunsTx on the application's own *sql.Tx
// (its own database/sql handle on the store's file) and the application's
// row commit together, and roll back together. Nothing is visible, and no
// engine is woken, before the commit; after it, the store's writer hears
// the other connection's commit (data_version) and wakes its claimers,
// which claim the run.
func TestCreateRunsTxCommitsWithTheApplication(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := dbPath(t)
	s := open(t, path, sqlitestore.Options{})
	db := appDB(t, path)
	ready := s.Notifications(ctx)
	time.Sleep(200 * time.Millisecond) // the writer's first checks pass
	drain(ready)

	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(`INSERT INTO orders (id, amount) VALUES ('o1', 100)`); err != nil {
		t.Fatal(err)
	}
	res, err := s.CreateRunsTx(ctx, tx, []storage.NewRun{{ID: "o1", Workflow: "orders.fulfil", Input: []byte(`{"amount":100}`)}})
	if err != nil || len(res) != 1 || !res[0].Created || res[0].Run.Status != storage.StatusQueued {
		t.Fatalf("CreateRunsTx = %+v, %v; want o1 created, queued", res, err)
	}
	if runExists(t, s, "o1") {
		t.Fatal("the run is visible before the application's commit")
	}
	select {
	case <-ready:
		t.Fatal("a claimer was woken before the application's commit")
	case <-time.After(300 * time.Millisecond):
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ready:
	case <-time.After(5 * time.Second):
		t.Fatal("no claimer was woken within 5s of the application's commit")
	}
	cl := claimOne(t, s, "w", "orders.fulfil")
	if cl.Lease.RunID != "o1" || string(cl.Input) != `{"amount":100}` || !orderExists(t, db, "o1") {
		t.Fatalf("claimed %+v; want o1 with its input, beside its order", cl)
	}

	// Rolled back: neither the order nor the run.
	tx, err = db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(`INSERT INTO orders (id, amount) VALUES ('o2', 200)`); err != nil {
		t.Fatal(err)
	}
	if res, err := s.CreateRunsTx(ctx, tx, []storage.NewRun{{ID: "o2", Workflow: "orders.fulfil"}}); err != nil || !res[0].Created {
		t.Fatalf("CreateRunsTx(o2) = %+v, %v", res, err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if orderExists(t, db, "o2") || runExists(t, s, "o2") {
		t.Fatal("a rolled back transaction left its order or its run")
	}

	// A call that fails leaves the application's transaction as it was,
	// and the application may still commit its own writes.
	tx, err = db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(`INSERT INTO orders (id, amount) VALUES ('o3', 300)`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SendEventTx(ctx, tx, storage.Event{RunID: "nobody", Topic: "t", Payload: []byte("x")}); !errors.Is(err, storage.ErrRunNotFound) {
		t.Fatalf("SendEventTx(unknown run) = %v, want ErrRunNotFound", err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if !orderExists(t, db, "o3") {
		t.Fatal("the application's row was lost after a failed call in its transaction")
	}
}

// The start policies hold in the application's transaction too: a
// replacing create ends the run it replaces when, and only when, the
// transaction commits.
func TestCreateRunsTxPolicies(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := dbPath(t)
	s := open(t, path, sqlitestore.Options{})
	db := appDB(t, path)
	if _, err := s.CreateRuns(ctx, []storage.NewRun{{ID: "r", Workflow: "wf", Input: []byte("old")}}); err != nil {
		t.Fatal(err)
	}
	replace := storage.NewRun{ID: "r", Workflow: "wf", Input: []byte("new"), OnExisting: storage.ExistingReplace,
		Replace: &storage.ReplaceTerms{Error: storage.ErrorInfo{Message: "replaced"}}}
	for _, commit := range []bool{false, true} {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		res, err := s.CreateRunsTx(ctx, tx, []storage.NewRun{replace})
		if err != nil || !res[0].Created || !res[0].Replaced || res[0].ReplacedStatus != storage.StatusQueued || string(res[0].Run.Input) != "new" {
			t.Fatalf("CreateRunsTx(replace) = %+v, %v", res, err)
		}
		if commit {
			err = tx.Commit()
		} else {
			err = tx.Rollback()
		}
		if err != nil {
			t.Fatal(err)
		}
		rec, err := s.GetRun(ctx, "r")
		want := "old"
		if commit {
			want = "new"
		}
		if err != nil || string(rec.Input) != want || rec.Status != storage.StatusQueued {
			t.Fatalf("after commit=%v GetRun = %+v, %v; want input %q", commit, rec, err, want)
		}
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	lease := storage.NewRun{ID: "eager", Workflow: "wf", Lease: &storage.EagerLease{Owner: "w", For: time.Minute}}
	if _, err := s.CreateRunsTx(ctx, tx, []storage.NewRun{lease}); !errors.Is(err, storage.ErrInvalidArgument) {
		t.Fatalf("CreateRunsTx(leased run) = %v, want ErrInvalidArgument", err)
	}
}

// A transaction of BeginTx carries the application's writes, a start, an
// event sent and an event emitted; its commit wakes the store's claimers
// at once, and its rollback leaves nothing.
func TestBeginTx(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := dbPath(t)
	s := open(t, path, sqlitestore.Options{})
	db := appDB(t, path)
	if got := s.TxType(); got.String() != "*sql.Tx" {
		t.Fatalf("TxType = %v, want *sql.Tx", got)
	}
	// A run waiting on topic "paid", and one buffering events.
	if _, err := s.CreateRuns(ctx, []storage.NewRun{{ID: "waiter", Workflow: "wf"}, {ID: "idle", Workflow: "other"}}); err != nil {
		t.Fatal(err)
	}
	cl := claimOne(t, s, "w", "wf")
	if _, err := s.Suspend(ctx, storage.SuspendRequest{Lease: cl.Lease, SuspendState: []byte("{}"),
		Wait: &storage.Wait{Key: "paid@v1", Topic: "paid", Kind: storage.KindEvent}}); err != nil {
		t.Fatal(err)
	}
	ready := s.Notifications(ctx)
	drain(ready)

	for _, commit := range []bool{false, true} {
		atx, err := s.BeginTx(ctx)
		if err != nil {
			t.Fatal(err)
		}
		tx := atx.Tx().(*sql.Tx)
		if _, err := tx.Exec(`INSERT INTO orders (id, amount) VALUES ('b1', 1)`); err != nil {
			t.Fatal(err)
		}
		if res, err := s.CreateRunsTx(ctx, tx, []storage.NewRun{{ID: "b1", Workflow: "wf"}}); err != nil || !res[0].Created {
			t.Fatalf("CreateRunsTx = %+v, %v", res, err)
		}
		if ids, err := s.EmitTx(ctx, tx, storage.EmitRequest{Topic: "paid", Payload: []byte(`"yes"`)}); err != nil || len(ids) != 1 || ids[0] != "waiter" {
			t.Fatalf("EmitTx = %v, %v; want [waiter]", ids, err)
		}
		if delivered, err := s.SendEventTx(ctx, tx, storage.Event{RunID: "idle", Topic: "later", Payload: []byte("1")}); err != nil || delivered {
			t.Fatalf("SendEventTx = %v, %v; want buffered", delivered, err)
		}
		if !commit {
			if err := atx.Rollback(ctx); err != nil {
				t.Fatal(err)
			}
			rec, err := s.GetRun(ctx, "waiter")
			if orderExists(t, db, "b1") || runExists(t, s, "b1") || err != nil || rec.Status != storage.StatusWaiting {
				t.Fatalf("after a rollback: order or run b1 left, or waiter %+v (%v) not waiting", rec, err)
			}
			drain(ready)
			continue
		}
		if err := atx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case <-ready:
		default:
			t.Fatal("the commit of BeginTx's transaction woke no claimer at once")
		}
		if err := atx.Rollback(ctx); err != nil {
			t.Fatalf("Rollback after Commit = %v, want nil", err)
		}
	}
	rec, err := s.GetRun(ctx, "waiter")
	if err != nil || rec.Status != storage.StatusQueued || !orderExists(t, db, "b1") || !runExists(t, s, "b1") {
		t.Fatalf("after the commit: waiter %+v (%v), want queued, with order and run b1", rec, err)
	}
	rp, err := s.LoadReplay(ctx, "waiter")
	if err != nil || len(rp.Checkpoints) != 1 || string(rp.Checkpoints[0].Output) != `"yes"` {
		t.Fatalf("waiter's replay = %+v, %v; want the emitted payload", rp, err)
	}
}

// A transaction on another file, or not a *sql.Tx, is refused with
// ErrInvalidArgument, and nothing is written in it.
func TestTxOnAnotherFileIsRefused(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := open(t, dbPath(t), sqlitestore.Options{})
	otherPath := dbPath(t)
	other := open(t, otherPath, sqlitestore.Options{}) // a Stem store too: same tables
	db := appDB(t, otherPath)
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := s.CreateRunsTx(ctx, tx, []storage.NewRun{{ID: "r", Workflow: "wf"}}); !errors.Is(err, storage.ErrInvalidArgument) {
		t.Fatalf("CreateRunsTx on another file = %v, want ErrInvalidArgument", err)
	}
	if _, err := s.SendEventTx(ctx, tx, storage.Event{RunID: "r", Topic: "t"}); !errors.Is(err, storage.ErrInvalidArgument) {
		t.Fatalf("SendEventTx on another file = %v, want ErrInvalidArgument", err)
	}
	if _, err := s.EmitTx(ctx, tx, storage.EmitRequest{Topic: "t"}); !errors.Is(err, storage.ErrInvalidArgument) {
		t.Fatalf("EmitTx on another file = %v, want ErrInvalidArgument", err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if runExists(t, other, "r") {
		t.Fatal("a refused call wrote into the other file")
	}
	_, err = s.CreateRunsTx(ctx, "not a tx", []storage.NewRun{{ID: "r", Workflow: "wf"}})
	if !errors.Is(err, storage.ErrInvalidArgument) {
		t.Fatalf("CreateRunsTx(a string) = %v, want ErrInvalidArgument", err)
	}
	if _, err := s.CreateRunsTx(ctx, (*sql.Tx)(nil), []storage.NewRun{{ID: "r", Workflow: "wf"}}); !errors.Is(err, storage.ErrInvalidArgument) {
		t.Fatalf("CreateRunsTx(nil *sql.Tx) = %v, want ErrInvalidArgument", err)
	}
}

// CheckpointTx commits its step's writes with the checkpoint; a step's
// error, a checkpoint the key already has and a lost lease each roll the
// step's writes back.
func TestCheckpointTx(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := dbPath(t)
	s := open(t, path, sqlitestore.Options{})
	db := appDB(t, path)
	if _, err := s.CreateRuns(ctx, []storage.NewRun{{ID: "r", Workflow: "wf"}}); err != nil {
		t.Fatal(err)
	}
	cl := claimOne(t, s, "w", "wf")
	req := func(key string) storage.CheckpointRequest {
		return storage.CheckpointRequest{Lease: cl.Lease, LeaseFor: time.Minute, Checkpoint: storage.Checkpoint{Key: key, Kind: storage.KindStep}}
	}
	insert := func(id string) func(ctx context.Context, tx any) ([]byte, error) {
		return func(ctx context.Context, tx any) ([]byte, error) {
			_, err := tx.(*sql.Tx).ExecContext(ctx, `INSERT INTO orders (id, amount) VALUES (?, 1)`, id)
			return []byte(`"` + id + `"`), err
		}
	}

	res, err := s.CheckpointTx(ctx, req("charge@v1"), insert("c1"))
	if err != nil || res.Existing != nil || res.Paused {
		t.Fatalf("CheckpointTx = %+v, %v", res, err)
	}
	rp, err := s.LoadReplay(ctx, "r")
	if err != nil || len(rp.Checkpoints) != 1 || string(rp.Checkpoints[0].Output) != `"c1"` || !orderExists(t, db, "c1") {
		t.Fatalf("after CheckpointTx: replay %+v (%v), order c1 there: %v", rp, err, orderExists(t, db, "c1"))
	}

	// The step's error, as it is; nothing of the step, no checkpoint.
	boom := errors.New("boom")
	_, err = s.CheckpointTx(ctx, req("refund@v1"), func(ctx context.Context, tx any) ([]byte, error) {
		if _, err := insert("c2")(ctx, tx); err != nil {
			return nil, err
		}
		return nil, boom
	})
	if err != boom {
		t.Fatalf("CheckpointTx(failing step) = %v, want the step's error as it is", err)
	}
	if rp, _ := s.LoadReplay(ctx, "r"); orderExists(t, db, "c2") || len(rp.Checkpoints) != 1 {
		t.Fatalf("a failing step left its row or a checkpoint (%+v)", rp)
	}

	// The key has its checkpoint: Existing, the step's writes rolled back.
	res, err = s.CheckpointTx(ctx, req("charge@v1"), insert("c3"))
	if err != nil || res.Existing == nil || string(res.Existing.Output) != `"c1"` || orderExists(t, db, "c3") {
		t.Fatalf("CheckpointTx(written key) = %+v, %v, order c3 there: %v; want Existing c1, no c3", res, err, orderExists(t, db, "c3"))
	}

	// A completion cannot ride with it.
	done := req("ship@v1")
	done.Complete = &storage.CompleteRequest{Status: storage.StatusComplete}
	if _, err := s.CheckpointTx(ctx, done, insert("c4")); !errors.Is(err, storage.ErrInvalidArgument) || orderExists(t, db, "c4") {
		t.Fatalf("CheckpointTx(with Complete) = %v, want ErrInvalidArgument and no step run", err)
	}

	// The lease is lost (the run was terminated): ErrLeaseLost, rolled back.
	if _, err := s.Terminate(ctx, storage.TerminateRequest{RunID: "r", Error: storage.ErrorInfo{Message: "stop"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CheckpointTx(ctx, req("ship@v1"), insert("c5")); !errors.Is(err, storage.ErrLeaseLost) || orderExists(t, db, "c5") {
		t.Fatalf("CheckpointTx(lost lease) = %v, order c5 there: %v; want ErrLeaseLost, no c5", err, orderExists(t, db, "c5"))
	}
}

// A pause requested while a transactional step runs takes effect with its
// checkpoint, committed with the step's writes, as Checkpoint's would.
func TestCheckpointTxPause(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := dbPath(t)
	s := open(t, path, sqlitestore.Options{})
	db := appDB(t, path)
	if _, err := s.CreateRuns(ctx, []storage.NewRun{{ID: "r", Workflow: "wf"}}); err != nil {
		t.Fatal(err)
	}
	cl := claimOne(t, s, "w", "wf")
	if err := s.Pause(ctx, "r"); err != nil {
		t.Fatal(err)
	}
	res, err := s.CheckpointTx(ctx, storage.CheckpointRequest{Lease: cl.Lease, LeaseFor: time.Minute,
		Checkpoint: storage.Checkpoint{Key: "a@v1", Kind: storage.KindStep}}, func(ctx context.Context, tx any) ([]byte, error) {
		_, err := tx.(*sql.Tx).ExecContext(ctx, `INSERT INTO orders (id, amount) VALUES ('p', 1)`)
		return nil, err
	})
	if err != nil || !res.Paused {
		t.Fatalf("CheckpointTx = %+v, %v; want the pause taken", res, err)
	}
	rec, err := s.GetRun(ctx, "r")
	if err != nil || rec.Status != storage.StatusPaused || !orderExists(t, db, "p") {
		t.Fatalf("GetRun = %+v, %v; want paused, with the step's row", rec, err)
	}
}
