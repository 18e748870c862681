package storetest

import (
	"errors"
	"reflect"
	"strings"
	"time"

	"github.com/stemflow/stem/storage"
)

var holdCases = []testCase{
	{"HoldRecordedUntilNextClaim", testHoldRecordedUntilNextClaim},
	{"HoldKeepsWaitAndHistory", testHoldKeepsWaitAndHistory},
	{"HoldFencedAndChecked", testHoldFencedAndChecked},
}

// hold is a hold as an engine records one, at the fixture's now.
func (f *fixture) hold(execution int) *storage.Hold {
	return &storage.Hold{
		Reason:    "the code called step b@v1 where the history has a@v1",
		Recorded:  "a@v1",
		Called:    "b@v1",
		Position:  1,
		Execution: execution,
		Since:     f.now(),
	}
}

// wantHold checks a run's hold, to the second.
func (f *fixture) wantHold(id string, want *storage.Hold) {
	f.t.Helper()
	got := f.get(id).Hold
	if (got == nil) != (want == nil) {
		f.t.Fatalf("run %s hold = %+v, want %+v", id, got, want)
	}
	if got == nil {
		return
	}
	g, w := *got, *want
	if !g.Since.Equal(w.Since) {
		f.t.Fatalf("run %s held since %v, want %v", id, g.Since, w.Since)
	}
	g.Since, w.Since = time.Time{}, time.Time{}
	if !reflect.DeepEqual(g, w) {
		f.t.Fatalf("run %s hold = %+v, want %+v", id, g, w)
	}
}

// testHoldRecordedUntilNextClaim: a Suspend with a hold records it on the
// run, seen by GetRun and ListRuns, until the run is claimed again; the
// run is ready again at ReadyAt, not before, and its suspension state is
// handed back.
func testHoldRecordedUntilNextClaim(f *fixture) {
	c := f.start("r1", `"in"`)
	f.checkpoint(c.Lease, "a@v1", `"A"`)
	h := f.hold(1)
	f.suspend(storage.SuspendRequest{Lease: c.Lease, ReadyAt: f.after(time.Minute), SuspendState: []byte(`{"key":"a@v1"}`), Hold: h})
	rec := f.wantStatus("r1", storage.StatusWaiting)
	if rec.Owner != c.Lease.Owner || rec.Token != c.Lease.Token {
		f.t.Fatalf("held run's lease = %s/%d, want the last one kept (%s/%d)", rec.Owner, rec.Token, c.Lease.Owner, c.Lease.Token)
	}
	f.wantHold("r1", h)
	page, err := f.store.ListRuns(f.ctx, storage.ListRunsQuery{Workflow: wf})
	if err != nil {
		f.t.Fatal(err)
	}
	if len(page.Runs) != 1 || page.Runs[0].Hold == nil || page.Runs[0].Hold.Called != "b@v1" {
		f.t.Fatalf("ListRuns = %+v, want r1 with its hold", page.Runs)
	}
	f.claimNone()
	f.clock.Advance(time.Minute)
	again := f.claimOne("worker-b")
	if string(again.SuspendState) != `{"key":"a@v1"}` {
		f.t.Fatalf("claim after the hold brought suspension state %q, want the one stored with the hold", again.SuspendState)
	}
	f.wantHold("r1", nil)
	if rp := f.replay("r1"); len(rp.Checkpoints) != 1 || rp.Checkpoints[0].Key != "a@v1" {
		f.t.Fatalf("replay after the hold = %+v, want the checkpoint a@v1 kept", rp)
	}
	// A later suspension without a hold leaves none.
	f.suspend(storage.SuspendRequest{Lease: again.Lease, ReadyAt: f.after(time.Hour)})
	f.wantHold("r1", nil)
}

// testHoldKeepsWaitAndHistory: holding a run parked on an event wait
// keeps the wait: an event sent while it is held is delivered to it, and
// the hold, cleared by the claim the delivery makes possible, is gone.
func testHoldKeepsWaitAndHistory(f *fixture) {
	c := f.start("r1", `"in"`)
	deadline := f.after(time.Minute)
	f.suspend(storage.SuspendRequest{Lease: c.Lease, Wait: &storage.Wait{Key: "ship", Topic: "ship.ready", Kind: storage.KindEvent, Deadline: deadline}, ReadyAt: deadline})
	// The wait's timeout claims it; the engine diverges and holds it for
	// an hour.
	f.clock.Advance(time.Minute)
	c = f.claimOne("worker-a")
	h := f.hold(1)
	f.suspend(storage.SuspendRequest{Lease: c.Lease, ReadyAt: f.after(time.Hour), Hold: h})
	rec := f.wantStatus("r1", storage.StatusWaiting)
	if rec.Wait == nil || rec.Wait.Key != "ship" || rec.Wait.Topic != "ship.ready" {
		f.t.Fatalf("held run's wait = %+v, want ship on ship.ready kept", rec.Wait)
	}
	f.wantHold("r1", h)
	if _, err := f.store.SendEvent(f.ctx, storage.Event{RunID: "r1", Topic: "ship.ready", Payload: []byte(`"T-1"`)}); err != nil {
		f.t.Fatal(err)
	}
	got := f.claimOne("worker-b")
	rp := f.replay("r1")
	if len(rp.Checkpoints) != 1 || rp.Checkpoints[0].Key != "ship" || string(rp.Checkpoints[0].Output) != `"T-1"` {
		f.t.Fatalf("replay = %+v, want the event delivered to the held run's wait", rp)
	}
	f.wantHold("r1", nil)
	f.complete(got.Lease, `"done"`)
}

// testHoldFencedAndChecked: a hold under a stale lease writes nothing, and
// a malformed hold is ErrInvalidArgument with nothing written.
func testHoldFencedAndChecked(f *fixture) {
	c := f.start("r1", `"in"`)
	stale := c.Lease
	stale.Token--
	_, err := f.store.Suspend(f.ctx, storage.SuspendRequest{Lease: stale, LeaseFor: lease, ReadyAt: f.after(time.Hour), Hold: f.hold(1)})
	if !errors.Is(err, storage.ErrLeaseLost) {
		f.t.Fatalf("hold under a stale lease: %v, want ErrLeaseLost", err)
	}
	cp := storage.Checkpoint{Key: "a@v1", Kind: storage.KindStep}
	for name, req := range map[string]storage.SuspendRequest{
		"no reason":       {Hold: &storage.Hold{Execution: 1, Since: f.now()}},
		"a long reason":   {Hold: &storage.Hold{Reason: strings.Repeat("x", storage.MaxHoldReason+1), Execution: 1, Since: f.now()}},
		"no execution":    {Hold: &storage.Hold{Reason: "diverged", Since: f.now()}},
		"a checkpoint":    {Hold: f.hold(1), Checkpoint: &cp},
		"a wait":          {Hold: f.hold(1), Wait: &storage.Wait{Key: "w", Topic: "t", Kind: storage.KindEvent}},
		"negative places": {Hold: &storage.Hold{Reason: "diverged", Execution: 1, Position: -1, Since: f.now()}},
		"no time":         {Hold: &storage.Hold{Reason: "diverged", Execution: 1}},
	} {
		req.Lease, req.LeaseFor, req.ReadyAt = c.Lease, lease, f.after(time.Hour)
		if _, err := f.store.Suspend(f.ctx, req); !errors.Is(err, storage.ErrInvalidArgument) {
			f.t.Fatalf("hold with %s: %v, want ErrInvalidArgument", name, err)
		}
	}
	f.wantStatus("r1", storage.StatusRunning)
	f.wantHold("r1", nil)
	if rp := f.replay("r1"); len(rp.Checkpoints) != 0 {
		f.t.Fatalf("refused holds wrote %+v", rp.Checkpoints)
	}
}
