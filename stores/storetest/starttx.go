package storetest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/stemflow/stem/storage"
)

// startTxCases are the writes a storage.TxStore makes in a transaction the
// application holds (CreateRunsTx, SendEventTx, EmitTx), which exist
// exactly when it commits, and the transactional steps of CheckpointTx,
// whose own writes and checkpoint commit together or not at all. Run
// registers them only for a store that implements storage.TxStore.
//
// A step's own write here is a "marker" run the step creates with
// CreateRunsTx on the step's transaction: whether the marker exists shows,
// for any store, whether the step's writes were committed.
var startTxCases = []testCase{
	{"start tx/a rolled-back create leaves nothing and wakes nobody", testTxCreateRollback},
	{"start tx/a committed create is visible and claimable", testTxCreateCommit},
	{"start tx/rolled-back sends and emits deliver and buffer nothing", testTxEventsRollback},
	{"start tx/committed sends and emits deliver", testTxEventsCommit},
	{"start tx/a transaction of the wrong type is invalid", testTxWrongType},
	{"start tx/checkpoint tx commits the step's writes with the checkpoint", testTxCheckpoint},
	{"start tx/checkpoint tx step error writes neither and is returned", testTxCheckpointStepError},
	{"start tx/checkpoint tx under a lost lease writes neither", testTxCheckpointLeaseLost},
	{"start tx/checkpoint tx of an existing key writes neither", testTxCheckpointExisting},
	{"start tx/checkpoint tx with a pause requested writes both and pauses", testTxCheckpointPaused},
}

// sample returns a store newStore makes, which the caller closes, to ask
// what the stores it returns implement and lack.
func sample(t *testing.T, newStore Factory) storage.Store {
	t.Helper()
	s := newStore(t, NewClock(Start))
	if s == nil {
		t.Fatal("factory returned a nil store")
	}
	return s
}

// txStore is the fixture's store as a storage.TxStore.
func (f *fixture) txStore() storage.TxStore {
	f.t.Helper()
	ts, ok := f.store.(storage.TxStore)
	if !ok {
		f.t.Fatalf("the store %T does not implement storage.TxStore", f.store)
	}
	return ts
}

// begin begins an application transaction, rolled back when the case ends
// unless committed (with a context of its own: the case's is done by
// then). While it is open a case only reads through the store: on SQLite
// the transaction holds the database's write lock.
func (f *fixture) begin(ts storage.TxStore) storage.AppTx {
	f.t.Helper()
	tx, err := ts.BeginTx(f.ctx)
	if err != nil {
		f.t.Fatalf("BeginTx: %v", err)
	}
	f.t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	return tx
}

// wantInvisible checks, by a read, that run id does not exist (yet).
func (f *fixture) wantInvisible(id, what string) {
	f.t.Helper()
	_, err := f.store.GetRun(f.ctx, id)
	f.wantErr(err, storage.ErrRunNotFound, "GetRun of "+id+" "+what)
}

// notifications subscribes to the store's hints that runs are ready, nil
// when it gives none, and drains what is pending.
func (f *fixture) notifications() <-chan struct{} {
	n, ok := f.store.(storage.Notifier)
	if !ok {
		return nil
	}
	ch := n.Notifications(f.ctx)
	for {
		select {
		case <-ch:
		case <-time.After(50 * time.Millisecond):
			return ch
		}
	}
}

// wantQuiet checks that no hint arrives on ch (nil: no check) for 300ms.
func (f *fixture) wantQuiet(ch <-chan struct{}, what string) {
	f.t.Helper()
	if ch == nil {
		return
	}
	select {
	case <-ch:
		f.t.Fatalf("%s woke the store's subscribers", what)
	case <-time.After(300 * time.Millisecond):
	}
}

// wantWoken checks that a hint arrives on ch (nil: no check) soon.
func (f *fixture) wantWoken(ch <-chan struct{}, what string) {
	f.t.Helper()
	if ch == nil {
		return
	}
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		f.t.Fatalf("%s woke nobody", what)
	}
}

// marker is the run a transactional step writes.
var marker = storage.NewRun{ID: "marker", Workflow: "wf-marker", Input: []byte("written by the step")}

// markerStep is a transactional step that creates marker in its
// transaction and returns output and fail. It refuses a transaction that is
// not of the store's TxType.
func markerStep(ts storage.TxStore, output string, fail error) func(context.Context, any) ([]byte, error) {
	return func(ctx context.Context, tx any) ([]byte, error) {
		if t := reflect.TypeOf(tx); t == nil || !t.AssignableTo(ts.TxType()) {
			return nil, fmt.Errorf("the step's transaction is a %T, want a %v", tx, ts.TxType())
		}
		res, err := ts.CreateRunsTx(ctx, tx, []storage.NewRun{marker})
		if err != nil {
			return nil, fmt.Errorf("the step's CreateRunsTx: %w", err)
		}
		if len(res) != 1 || !res[0].Created {
			return nil, fmt.Errorf("the step's CreateRunsTx = %+v, want the marker created", res)
		}
		return []byte(output), fail
	}
}

// wantMarker checks whether the marker run exists.
func (f *fixture) wantMarker(exists bool, what string) {
	f.t.Helper()
	_, err := f.store.GetRun(f.ctx, marker.ID)
	switch {
	case exists && err != nil:
		f.t.Fatalf("%s: the step's write is missing: GetRun(marker): %v", what, err)
	case !exists && !errors.Is(err, storage.ErrRunNotFound):
		f.t.Fatalf("%s: the step's write was kept: GetRun(marker) error %v, want ErrRunNotFound", what, err)
	}
}

func testTxCreateRollback(f *fixture) {
	ts := f.txStore()
	ch := f.notifications()
	tx := f.begin(ts)
	res, err := ts.CreateRunsTx(f.ctx, tx.Tx(), []storage.NewRun{{ID: "run-1", Workflow: wf, Input: []byte("in")}})
	if err != nil || len(res) != 1 || !res[0].Created || res[0].Run.ID != "run-1" {
		f.t.Fatalf("CreateRunsTx = %+v, %v; want run-1 created in the transaction", res, err)
	}
	f.wantInvisible("run-1", "before the rollback")
	if err := tx.Rollback(f.ctx); err != nil {
		f.t.Fatalf("Rollback: %v", err)
	}
	f.wantQuiet(ch, "a rolled-back create")
	f.wantGone("run-1")
	f.claimNone()
	f.wantRuns("after the rollback")
}

func testTxCreateCommit(f *fixture) {
	ts := f.txStore()
	ch := f.notifications()
	tx := f.begin(ts)
	res, err := ts.CreateRunsTx(f.ctx, tx.Tx(), []storage.NewRun{{ID: "run-1", Workflow: wf, Input: []byte("in")}})
	if err != nil || len(res) != 1 || !res[0].Created {
		f.t.Fatalf("CreateRunsTx = %+v, %v; want run-1 created in the transaction", res, err)
	}
	f.wantQuiet(ch, "a create not yet committed")
	f.wantInvisible("run-1", "before the commit")
	if err := tx.Commit(f.ctx); err != nil {
		f.t.Fatalf("Commit: %v", err)
	}
	f.wantWoken(ch, "a committed create")
	if err := tx.Rollback(f.ctx); err != nil {
		f.t.Fatalf("Rollback after Commit: %v, want nothing done", err)
	}
	f.wantBytes("input", f.wantStatus("run-1", storage.StatusQueued).Input, "in")
	if c := f.claimOne("worker-a"); c.Lease.RunID != "run-1" {
		f.t.Fatalf("claimed %s, want run-1", c.Lease.RunID)
	}
	// The policies hold in a transaction too.
	tx = f.begin(ts)
	res, err = ts.CreateRunsTx(f.ctx, tx.Tx(), []storage.NewRun{{ID: "run-1", Workflow: wf, OnExisting: storage.ExistingFail}})
	if err != nil || len(res) != 1 || res[0].Refused != storage.RefusedExists {
		f.t.Fatalf("CreateRunsTx of an existing ID with the fail policy = %+v, %v; want refused", res, err)
	}
}

// parkedPair starts run-1 parked on topic a and run-2 parked on topic b,
// and queues run-3.
func parkedPair(f *fixture) storage.ClaimedRun {
	f.t.Helper()
	a := f.startAs(storage.NewRun{ID: "run-1"})
	f.park(a.Lease, "a@v1", "a", storage.KindEvent)
	b := f.startAs(storage.NewRun{ID: "run-2"})
	f.park(b.Lease, "b@v1", "b", storage.KindEvent)
	f.createRun(storage.NewRun{ID: "run-3", Workflow: "wf-run-3"})
	return b
}

func testTxEventsRollback(f *fixture) {
	ts := f.txStore()
	parkedPair(f)
	ch := f.notifications()
	before := f.snapshot()
	tx := f.begin(ts)
	if delivered, err := ts.SendEventTx(f.ctx, tx.Tx(), storage.Event{RunID: "run-1", Topic: "a", Payload: []byte("A")}); err != nil || !delivered {
		f.t.Fatalf("SendEventTx to a waiting run = %v, %v; want delivered in the transaction", delivered, err)
	}
	if ids, err := ts.EmitTx(f.ctx, tx.Tx(), storage.EmitRequest{Topic: "b", Payload: []byte("B")}); err != nil || len(ids) != 1 || ids[0] != "run-2" {
		f.t.Fatalf("EmitTx = %v, %v; want run-2 in the transaction", ids, err)
	}
	if delivered, err := ts.SendEventTx(f.ctx, tx.Tx(), storage.Event{RunID: "run-3", Topic: "c", Payload: []byte("C")}); err != nil || delivered {
		f.t.Fatalf("SendEventTx to a queued run = %v, %v; want buffered in the transaction", delivered, err)
	}
	f.wantUnchanged(before, "sends and emits not yet committed")
	if err := tx.Rollback(f.ctx); err != nil {
		f.t.Fatalf("Rollback: %v", err)
	}
	f.wantQuiet(ch, "rolled-back sends and emits")
	f.wantUnchanged(before, "rolled-back sends and emits")
	c := f.claimOne("worker-c", "wf-run-3")
	f.wantNoEvents(c.Lease, "c")
}

func testTxEventsCommit(f *fixture) {
	ts := f.txStore()
	parkedPair(f)
	ch := f.notifications()
	tx := f.begin(ts)
	if delivered, err := ts.SendEventTx(f.ctx, tx.Tx(), storage.Event{RunID: "run-1", Topic: "a", Payload: []byte("A")}); err != nil || !delivered {
		f.t.Fatalf("SendEventTx to a waiting run = %v, %v; want delivered", delivered, err)
	}
	if ids, err := ts.EmitTx(f.ctx, tx.Tx(), storage.EmitRequest{Topic: "b", Payload: []byte("B")}); err != nil || len(ids) != 1 || ids[0] != "run-2" {
		f.t.Fatalf("EmitTx = %v, %v; want run-2", ids, err)
	}
	if delivered, err := ts.SendEventTx(f.ctx, tx.Tx(), storage.Event{RunID: "run-3", Topic: "c", Payload: []byte("C")}); err != nil || delivered {
		f.t.Fatalf("SendEventTx to a queued run = %v, %v; want buffered", delivered, err)
	}
	if err := tx.Commit(f.ctx); err != nil {
		f.t.Fatalf("Commit: %v", err)
	}
	f.wantWoken(ch, "committed deliveries")
	f.wantCheckpoints("run-1", "a@v1=A")
	f.wantCheckpoints("run-2", "b@v1=B")
	f.wantStatus("run-1", storage.StatusQueued)
	f.wantStatus("run-2", storage.StatusQueued)
	c := f.claimOne("worker-c", "wf-run-3")
	d := f.suspend(storage.SuspendRequest{Lease: c.Lease, Wait: &storage.Wait{Key: "c@v1", Topic: "c"}}).Delivered
	if d == nil || string(d.Output) != "C" {
		f.t.Fatalf("Suspend delivered %+v, want the committed buffered event", d)
	}
	f.wantClaimed("a claim after the committed deliveries", f.claim("worker-d", 10, "wf-run-1", "wf-run-2"), "run-1", "run-2")
}

func testTxWrongType(f *fixture) {
	ts := f.txStore()
	a := f.start("run-1", "")
	before := f.snapshot()
	for _, tx := range []any{"not a transaction", nil, 42} {
		_, err := ts.CreateRunsTx(f.ctx, tx, []storage.NewRun{{ID: "run-2", Workflow: wf}})
		f.wantErr(err, storage.ErrInvalidArgument, "CreateRunsTx with a transaction of the wrong type")
		_, err = ts.SendEventTx(f.ctx, tx, storage.Event{RunID: "run-1", Topic: "t", Payload: []byte("x")})
		f.wantErr(err, storage.ErrInvalidArgument, "SendEventTx with a transaction of the wrong type")
		_, err = ts.EmitTx(f.ctx, tx, storage.EmitRequest{Topic: "t", Payload: []byte("x")})
		f.wantErr(err, storage.ErrInvalidArgument, "EmitTx with a transaction of the wrong type")
	}
	tx := f.begin(ts)
	_, err := ts.CreateRunsTx(f.ctx, tx.Tx(), []storage.NewRun{{ID: "run-2", Workflow: wf, Lease: &storage.EagerLease{Owner: "worker-a", For: lease}}})
	f.wantErr(err, storage.ErrInvalidArgument, "CreateRunsTx of a leased run")
	_ = tx.Rollback(f.ctx)
	req := stepReq(a.Lease, "s1@v1", "")
	req.Complete = &storage.CompleteRequest{Status: storage.StatusComplete}
	_, err = ts.CheckpointTx(f.ctx, req, markerStep(ts, "out", nil))
	f.wantErr(err, storage.ErrInvalidArgument, "CheckpointTx with a completion")
	f.wantUnchanged(before, "refused transactional calls")
	f.wantMarker(false, "a refused CheckpointTx")
}

func testTxCheckpoint(f *fixture) {
	ts := f.txStore()
	a := f.start("run-1", "")
	f.checkpoint(a.Lease, "s0@v1", "zero")
	f.clock.Advance(time.Second)
	res, err := ts.CheckpointTx(f.ctx, stepReq(a.Lease, "s1@v1", "ignored"), markerStep(ts, "out", nil))
	if err != nil || res.Existing != nil || res.Paused || res.Completed {
		f.t.Fatalf("CheckpointTx = %+v, %v; want written", res, err)
	}
	cps := f.wantCheckpoints("run-1", "s0@v1=zero", "s1@v1=out")
	f.wantTime("CreatedAt of the transactional checkpoint", cps[1].CreatedAt, f.now())
	f.wantMarker(true, "a transactional step")
	f.wantLeaseUntil("run-1", f.now().Add(lease))
	f.checkpoint(a.Lease, "s2@v1", "two")
}

func testTxCheckpointStepError(f *fixture) {
	ts := f.txStore()
	a := f.start("run-1", "")
	before := f.snapshot()
	boom := errors.New("the step failed")
	_, err := ts.CheckpointTx(f.ctx, stepReq(a.Lease, "s1@v1", ""), markerStep(ts, "out", boom))
	if !errors.Is(err, boom) {
		f.t.Fatalf("CheckpointTx of a failing step: error %v, want the step's", err)
	}
	f.wantUnchanged(before, "a failed transactional step")
	f.wantMarker(false, "a failed transactional step")
	// The lease holds, and the step may run again.
	if res, err := ts.CheckpointTx(f.ctx, stepReq(a.Lease, "s1@v1", ""), markerStep(ts, "again", nil)); err != nil || res.Existing != nil {
		f.t.Fatalf("CheckpointTx again = %+v, %v; want written", res, err)
	}
	f.wantCheckpoints("run-1", "s1@v1=again")
	f.wantMarker(true, "a transactional step run again")
}

func testTxCheckpointLeaseLost(f *fixture) {
	ts := f.txStore()
	a := f.start("run-1", "")
	f.terminate(storage.TerminateRequest{RunID: "run-1", Error: storage.ErrorInfo{Message: "stop"}})
	before := f.snapshot()
	_, err := ts.CheckpointTx(f.ctx, stepReq(a.Lease, "s1@v1", ""), markerStep(ts, "out", nil))
	f.wantErr(err, storage.ErrLeaseLost, "CheckpointTx after a termination")
	f.wantUnchanged(before, "a transactional step under a lost lease")
	f.wantMarker(false, "a transactional step under a lost lease")
}

func testTxCheckpointExisting(f *fixture) {
	ts := f.txStore()
	a := f.start("run-1", "")
	f.checkpoint(a.Lease, "s1@v1", "first")
	before := f.snapshot()
	res, err := ts.CheckpointTx(f.ctx, stepReq(a.Lease, "s1@v1", ""), markerStep(ts, "second", nil))
	if err != nil || res.Existing == nil || res.Existing.Key != "s1@v1" || string(res.Existing.Output) != "first" {
		f.t.Fatalf("CheckpointTx of an existing key = %+v, %v; want the existing checkpoint", res, err)
	}
	f.wantUnchanged(before, "a transactional step of an existing key")
	f.wantMarker(false, "a transactional step of an existing key")
}

func testTxCheckpointPaused(f *fixture) {
	ts := f.txStore()
	a := f.start("run-1", "")
	f.pause("run-1")
	res, err := ts.CheckpointTx(f.ctx, stepReq(a.Lease, "s1@v1", ""), markerStep(ts, "out", nil))
	if err != nil || !res.Paused || res.Existing != nil {
		f.t.Fatalf("CheckpointTx with a pause requested = %+v, %v; want written and paused", res, err)
	}
	f.wantStatus("run-1", storage.StatusPaused)
	f.wantCheckpoints("run-1", "s1@v1=out")
	f.wantMarker(true, "a transactional step that paused its run")
	_, err = f.store.Checkpoint(f.ctx, stepReq(a.Lease, "s2@v1", ""))
	f.wantErr(err, storage.ErrLeaseLost, "a checkpoint after the pause took effect")
}
