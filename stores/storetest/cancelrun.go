package storetest

import (
	"strings"
	"time"

	"github.com/stemflow/stem/storage"
)

// The cases of a run's cancellation (Store.Cancel): a request the
// workflow sees and handles, unlike Terminate, that wakes a parked run and
// reaches children by their parent-close policy when their parent ends.
var cancelRunCases = []testCase{
	{"cancelrun/a waiting or sleeping run becomes ready now and keeps its wait; the claim reports the request", testCancelWaiting},
	{"cancelrun/the first request wins; a finished, unknown or malformed one changes nothing", testCancelFirstWins},
	{"cancelrun/a paused run stays paused, ready when resumed; a queued one stays queued", testCancelPausedQueued},
	{"cancelrun/a running run learns of it by heartbeat and checkpoint; a park before it sees it is ready now", testCancelRunning},
	{"cancelrun/a restart clears the request; continue-as-new keeps it", testCancelRestart},
	{"cancelrun/a parent's end requests the cancellation of the children with the cancel policy", testCancelChildren},
}

// cancel requests the cancellation of run id.
func (f *fixture) cancel(id, reason string) {
	f.t.Helper()
	if err := f.store.Cancel(f.ctx, storage.CancelRequest{RunID: id, Reason: reason}); err != nil {
		f.t.Fatalf("Cancel(%s): %v", id, err)
	}
}

// wantCancel checks run id's recorded cancellation request.
func (f *fixture) wantCancel(id string, requested bool, reason string) storage.RunRecord {
	f.t.Helper()
	rec := f.get(id)
	if rec.CancelRequested != requested || rec.CancelReason != reason {
		f.t.Fatalf("run %s: CancelRequested %v, CancelReason %q; want %v, %q", id, rec.CancelRequested, rec.CancelReason, requested, reason)
	}
	return rec
}

func testCancelWaiting(f *fixture) {
	a := f.start("waiter", "")
	f.park(a.Lease, "ev@v1", "topic", storage.KindEvent)
	f.cancel("waiter", "customer left")
	rec := f.wantCancel("waiter", true, "customer left")
	if rec.Status != storage.StatusQueued || rec.ReadyAt == nil || rec.Wait == nil || rec.Wait.Key != "ev@v1" {
		f.t.Fatalf("a waiting run after Cancel = %+v (wait %+v), want queued, ready now, its wait kept", rec, rec.Wait)
	}
	f.wantTimePtr("ReadyAt of the cancelled waiter", rec.ReadyAt, f.now())
	c := f.claimOne("worker-b")
	if c.Lease.RunID != "waiter" || !c.CancelRequested || c.CancelReason != "customer left" {
		f.t.Fatalf("claim = %s, CancelRequested %v, CancelReason %q; want waiter with the request", c.Lease.RunID, c.CancelRequested, c.CancelReason)
	}

	s := f.startAs(storage.NewRun{ID: "sleeper"})
	f.sleep(s.Lease, time.Hour)
	f.cancel("sleeper", "")
	rec = f.wantCancel("sleeper", true, "")
	if rec.Status != storage.StatusQueued {
		f.t.Fatalf("a sleeping run after Cancel is %s, want queued", rec.Status)
	}
	f.wantTimePtr("ReadyAt of the cancelled sleeper", rec.ReadyAt, f.now())
	if w := f.nextWake("wf-sleeper"); !w.Found || w.After != 0 {
		f.t.Fatalf("NextWake of the cancelled sleeper = %+v, want due now", w)
	}
	c = f.claimOne("worker-b", "wf-sleeper")
	if !c.CancelRequested {
		f.t.Fatal("the claim of the cancelled sleeper does not report the request")
	}
	f.wantCheckpoints("sleeper", "nap@v1=wake")
}

func testCancelFirstWins(f *fixture) {
	a := f.start("run-1", "")
	f.cancel("run-1", "first")
	f.cancel("run-1", "second")
	f.wantCancel("run-1", true, "first")
	f.wantStatus("run-1", storage.StatusRunning)

	f.complete(a.Lease, "out")
	f.wantErr(f.store.Cancel(f.ctx, storage.CancelRequest{RunID: "run-1", Reason: "late"}), storage.ErrInvalidState, "Cancel of a complete run")
	f.wantErr(f.store.Cancel(f.ctx, storage.CancelRequest{RunID: "missing"}), storage.ErrRunNotFound, "Cancel of an unknown run")
	f.create("run-2", wf, "")
	before := f.snapshot()
	for what, req := range map[string]storage.CancelRequest{
		"an empty run ID":         {Reason: "x"},
		"a control character":     {RunID: "run-2", Reason: "bad\x00reason"},
		"invalid UTF-8":           {RunID: "run-2", Reason: "bad\xffreason"},
		"a reason over the limit": {RunID: "run-2", Reason: strings.Repeat("r", storage.MaxCancelReason+1)},
	} {
		f.wantErr(f.store.Cancel(f.ctx, req), storage.ErrInvalidArgument, "Cancel with "+what)
	}
	f.wantUnchanged(before, "refused Cancels")
	long := strings.Repeat("é", storage.MaxCancelReason/2)
	f.cancel("run-2", long)
	f.wantCancel("run-2", true, long)
}

func testCancelPausedQueued(f *fixture) {
	a := f.start("paused", "")
	f.sleep(a.Lease, time.Hour)
	f.pause("paused")
	f.cancel("paused", "stop")
	rec := f.wantCancel("paused", true, "stop")
	if rec.Status != storage.StatusPaused {
		f.t.Fatalf("a paused run after Cancel is %s, want paused", rec.Status)
	}
	f.claimNone()
	f.resume("paused")
	if rec := f.wantStatus("paused", storage.StatusQueued); !rec.CancelRequested {
		f.t.Fatal("a resumed run lost its cancellation request")
	}
	if c := f.claimOne("worker-b"); c.Lease.RunID != "paused" || !c.CancelRequested {
		f.t.Fatalf("claim = %s (CancelRequested %v), want the resumed run with the request", c.Lease.RunID, c.CancelRequested)
	}

	f.create("queued", "wf-queued", "")
	f.cancel("queued", "")
	f.wantStatus("queued", storage.StatusQueued)
	if c := f.claimOne("worker-b", "wf-queued"); !c.CancelRequested {
		f.t.Fatal("the claim of a queued run cancelled before it began does not report the request")
	}
}

func testCancelRunning(f *fixture) {
	a := f.start("run-1", "")
	res, err := f.store.Heartbeat(f.ctx, storage.HeartbeatRequest{Lease: a.Lease, LeaseFor: lease})
	if err != nil || res.CancelRequested {
		f.t.Fatalf("Heartbeat before Cancel = %+v, %v; want no request", res, err)
	}
	if cr := f.checkpoint(a.Lease, "before@v1", "1"); cr.CancelRequested {
		f.t.Fatal("a checkpoint before Cancel reports a request")
	}
	f.cancel("run-1", "enough")
	f.clock.Advance(time.Second)
	res, err = f.store.Heartbeat(f.ctx, storage.HeartbeatRequest{Lease: a.Lease, LeaseFor: lease})
	if err != nil || !res.CancelRequested {
		f.t.Fatalf("Heartbeat after Cancel = %+v, %v; want the request reported", res, err)
	}
	f.wantLeaseUntil("run-1", f.now().Add(lease))
	if cr := f.checkpoint(a.Lease, "after@v1", "2"); !cr.CancelRequested {
		f.t.Fatal("a checkpoint after Cancel does not report the request")
	}
	if cr := f.checkpoint(a.Lease, "after@v1", "again"); cr.Existing == nil || !cr.CancelRequested {
		f.t.Fatalf("a checkpoint of an existing key after Cancel = %+v, want the existing one and the request", cr)
	}

	// A park by a worker that has not seen the request: ready now.
	f.park(a.Lease, "ev@v1", "topic", storage.KindEvent)
	rec := f.wantStatus("run-1", storage.StatusQueued)
	f.wantTimePtr("ReadyAt of a run parked before its worker saw the cancellation", rec.ReadyAt, f.now())
	b := f.claimOne("worker-b")

	// The cancellation's marker is a checkpoint like any other.
	marker := storage.Checkpoint{Key: "#cancel", Kind: storage.KindCancel, Output: []byte(`"ev@v1"`)}
	if _, err := f.store.Checkpoint(f.ctx, storage.CheckpointRequest{Lease: b.Lease, LeaseFor: lease, Checkpoint: marker}); err != nil {
		f.t.Fatalf("Checkpoint of the cancellation's marker: %v", err)
	}
	cps := f.wantCheckpoints("run-1", "before@v1=1", "after@v1=2", `#cancel="ev@v1"`)
	if cps[2].Kind != storage.KindCancel || string(cps[2].Output) != `"ev@v1"` {
		f.t.Fatalf("the marker as stored = %+v, want kind %q and its output", cps[2], storage.KindCancel)
	}

	// Its worker has seen it: the cleanup may sleep, and a hold is kept.
	f.suspend(storage.SuspendRequest{Lease: b.Lease, ReadyAt: f.after(time.Hour), CancelSeen: true,
		Checkpoint: &storage.Checkpoint{Key: "cleanup-nap", Kind: storage.KindSleep, Output: []byte("t")}})
	rec = f.wantStatus("run-1", storage.StatusWaiting)
	f.wantTimePtr("ReadyAt of a cleanup's sleep", rec.ReadyAt, f.now().Add(time.Hour))
	f.claimNone()
	if !rec.CancelRequested {
		f.t.Fatal("the request was cleared by a park that saw it")
	}
}

func testCancelRestart(f *fixture) {
	a := f.start("run-1", "in")
	f.cancel("run-1", "why")
	f.continueAsNew(a.Lease, "in-2")
	f.wantCancel("run-1", true, "why")
	if c := f.claimOne("worker-b"); !c.CancelRequested {
		f.t.Fatal("the claim of the next execution after ContinueAsNew lost the request")
	}
	f.restart("run-1", "")
	f.wantCancel("run-1", false, "")
	f.clock.Advance(lease + time.Millisecond)
	if c := f.claimOne("worker-c"); c.CancelRequested || c.CancelReason != "" {
		f.t.Fatalf("the claim after Restart reports a request (%q)", c.CancelReason)
	}
}

func testCancelChildren(f *fixture) {
	for _, end := range []string{"complete", "terminate"} {
		p := end + "-"
		root := f.startAs(storage.NewRun{ID: p + "root"})
		kid := f.startAs(storage.NewRun{ID: p + "kid", ParentID: p + "root", ParentPolicy: storage.ParentCancel})
		f.park(kid.Lease, "ev@v1", p+"topic", storage.KindEvent)
		f.createRun(storage.NewRun{ID: p + "kid-kid", Workflow: "wf-" + p + "kid-kid", ParentID: p + "kid"})
		f.createRun(storage.NewRun{ID: p + "term", Workflow: "wf-" + p + "term", ParentID: p + "root"})
		f.createRun(storage.NewRun{ID: p + "term-kid", Workflow: "wf-" + p + "term-kid", ParentID: p + "term", ParentPolicy: storage.ParentCancel})
		f.createRun(storage.NewRun{ID: p + "gone", Workflow: "wf-" + p + "gone", ParentID: p + "root", ParentPolicy: storage.ParentCancel})
		f.terminate(storage.TerminateRequest{RunID: p + "gone", Error: storage.ErrorInfo{Message: "earlier"}})
		f.createRun(storage.NewRun{ID: p + "free", Workflow: "wf-" + p + "free", ParentID: p + "root", ParentPolicy: storage.ParentAbandon})
		gone := normRecord(f.get(p + "gone"))

		childErr := storage.ErrorInfo{Message: "parent ended", Code: storage.CodeTerminated}
		const why = "its parent ended"
		if end == "complete" {
			if err := f.store.Complete(f.ctx, storage.CompleteRequest{Lease: root.Lease, Status: storage.StatusComplete,
				Output: []byte("out"), ChildError: &childErr, ChildCancel: why}); err != nil {
				f.t.Fatalf("Complete: %v", err)
			}
		} else {
			ids := f.terminate(storage.TerminateRequest{RunID: p + "root", Error: storage.ErrorInfo{Message: "stop"}, ChildError: &childErr, ChildCancel: why})
			if len(ids) != 2 || ids[0] != p+"root" || ids[1] != p+"term" {
				f.t.Fatalf("Terminate returned %v, want the root and %sterm: a child cancelled is not terminated", ids, p)
			}
		}
		rec := f.wantCancel(p+"kid", true, why)
		if rec.Status != storage.StatusQueued || rec.Wait == nil {
			f.t.Fatalf("%s: the waiting child with the cancel policy is %s (wait %+v), want queued with its wait", end, rec.Status, rec.Wait)
		}
		f.wantStatus(p+"term", storage.StatusTerminated)
		if rec := f.wantCancel(p+"term-kid", true, why); rec.Status != storage.StatusQueued {
			f.t.Fatalf("%s: the child with the cancel policy of a terminated child is %s, want queued", end, rec.Status)
		}
		if rec := f.wantCancel(p+"kid-kid", false, ""); rec.Status != storage.StatusQueued {
			f.t.Fatalf("%s: a cancelled child's own child is %s, want it left to its parent's end", end, rec.Status)
		}
		f.wantCancel(p+"free", false, "")
		if after := normRecord(f.get(p + "gone")); after.CancelRequested || after.Status != gone.Status {
			f.t.Fatalf("%s: a finished child with the cancel policy changed: %+v", end, after)
		}
	}
}
