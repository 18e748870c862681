package storetest

import (
	"errors"
	"time"

	"github.com/stemflow/stem/storage"
)

// The cases of cancellation: what a lease holder learns from a heartbeat,
// and a restart that never lets two executions run at once.
var cancelCases = []testCase{
	{"cancel/a heartbeat under a lost lease says why", testHeartbeatLoss},
	{"cancel/a heartbeat reports a requested pause and still extends the lease", testHeartbeatPause},
	{"cancel/a restart under a live lease waits until its holder lets go", testRestartWaitsForHolder},
	{"cancel/a restart under a live lease is claimable once the lease expires", testRestartFenceExpires},
	{"cancel/a restart without a live lease is ready at once", testRestartNoLiveLease},
	{"cancel/a restarted run paused meanwhile stays paused when its holder lets go", testRestartPausedLetGo},
}

// errOf returns the error of a call that also returns a value the caller
// does not need (Heartbeat's result, say).
func errOf[T any](_ T, err error) error { return err }

// letGo releases the run under l, the lease a Restart revoked while it was
// live, so the new execution may be claimed at once.
func (f *fixture) letGo(l storage.Lease) {
	f.t.Helper()
	f.suspend(storage.SuspendRequest{Lease: l, ReadyAt: f.after(0)})
}

// wantLoss checks that err is a lost lease that says why.
func (f *fixture) wantLoss(err error, want storage.LeaseLoss, what string) {
	f.t.Helper()
	f.wantErr(err, storage.ErrLeaseLost, what)
	var lost *storage.LeaseLostError
	if !errors.As(err, &lost) {
		f.t.Fatalf("%s: %v is not a *storage.LeaseLostError", what, err)
	}
	if lost.Loss != want {
		f.t.Fatalf("%s: lease lost because %q, want %q (%v)", what, lost.Loss, want, err)
	}
}

// heartbeatLoss is the loss a heartbeat under l reports, nothing written.
func (f *fixture) heartbeatLoss(l storage.Lease, want storage.LeaseLoss, what string) {
	f.t.Helper()
	before := f.snapshot()
	_, err := f.store.Heartbeat(f.ctx, storage.HeartbeatRequest{Lease: l, LeaseFor: lease,
		Step: &storage.ActiveStep{Key: "late@v1", Attempt: 1, Started: f.now()}})
	f.wantLoss(err, want, "Heartbeat "+what)
	f.wantUnchanged(before, "a Heartbeat "+what)
}

func testHeartbeatLoss(f *fixture) {
	a := f.startAs(storage.NewRun{ID: "terminated"})
	f.terminate(storage.TerminateRequest{RunID: "terminated", Error: storage.ErrorInfo{Message: "stop"}})
	f.heartbeatLoss(a.Lease, storage.LossTerminated, "after Terminate")

	a = f.startAs(storage.NewRun{ID: "restarted"})
	f.restart("restarted", "")
	f.heartbeatLoss(a.Lease, storage.LossRestarted, "after a Restart under the live lease")

	a = f.startAs(storage.NewRun{ID: "taken"})
	f.clock.Advance(lease + time.Millisecond)
	b := f.claimOne("worker-b", "wf-taken")
	f.heartbeatLoss(a.Lease, storage.LossTaken, "after another worker claimed the expired lease")
	// Terminated after another claim: terminated says more than taken.
	f.terminate(storage.TerminateRequest{RunID: "taken", Error: storage.ErrorInfo{Message: "stop"}})
	f.heartbeatLoss(a.Lease, storage.LossTerminated, "of an earlier holder after Terminate")
	f.heartbeatLoss(b.Lease, storage.LossTerminated, "after Terminate of a recovered run")

	c := f.startAs(storage.NewRun{ID: "completed"})
	f.complete(c.Lease, "out")
	f.heartbeatLoss(c.Lease, storage.LossEnded, "after Complete")

	d := f.startAs(storage.NewRun{ID: "released"})
	f.suspend(storage.SuspendRequest{Lease: d.Lease, ReadyAt: f.after(time.Hour)})
	f.heartbeatLoss(d.Lease, storage.LossEnded, "after Suspend")
	// A restart of a run nobody holds fences nothing.
	f.restart("released", "")
	f.heartbeatLoss(d.Lease, storage.LossEnded, "after Suspend and Restart")

	f.heartbeatLoss(storage.Lease{RunID: "missing", Owner: "worker-a", Token: 1}, storage.LossEnded, "of an unknown run")
}

func testHeartbeatPause(f *fixture) {
	a := f.start("run-1", "")
	beat := func(want bool, what string) {
		f.t.Helper()
		f.clock.Advance(time.Second)
		res, err := f.store.Heartbeat(f.ctx, storage.HeartbeatRequest{Lease: a.Lease, LeaseFor: lease})
		if err != nil {
			f.t.Fatalf("Heartbeat %s: %v", what, err)
		}
		if res.PauseRequested != want {
			f.t.Fatalf("Heartbeat %s: PauseRequested = %v, want %v", what, res.PauseRequested, want)
		}
		f.wantLeaseUntil("run-1", f.now().Add(lease))
	}
	beat(false, "with no pause requested")
	f.pause("run-1")
	beat(true, "after Pause of the running run")
	if rec := f.wantStatus("run-1", storage.StatusRunning); !rec.PauseRequested {
		f.t.Fatalf("record after the heartbeat = %+v, want the pause still requested", rec)
	}
	f.resume("run-1")
	beat(false, "after Resume")
}

func testRestartWaitsForHolder(f *fixture) {
	a := f.start("run-1", "in")
	f.checkpoint(a.Lease, "s1@v1", "1")
	f.clock.Advance(time.Second)
	until := f.get("run-1").LeaseUntil
	f.restart("run-1", "")

	rec := f.wantStatus("run-1", storage.StatusQueued)
	if rec.Execution != 2 || rec.Token != a.Lease.Token {
		f.t.Fatalf("restarted record = %+v, want execution 2 and the old lease's token", rec)
	}
	f.wantTimePtr("ReadyAt", rec.ReadyAt, until)
	f.wantTime("LeaseUntil", rec.LeaseUntil, until)
	f.claimNone()

	// The old holder writes nothing more but a release.
	_, err := f.store.Checkpoint(f.ctx, stepReq(a.Lease, "s2@v1", "2"))
	f.wantErr(err, storage.ErrLeaseLost, "Checkpoint under the restarted lease")
	before := f.snapshot()
	for what, req := range map[string]storage.SuspendRequest{
		"a sleep":                {Checkpoint: &storage.Checkpoint{Key: "nap@v1", Kind: storage.KindSleep}, ReadyAt: f.after(0)},
		"a wait":                 {Wait: &storage.Wait{Key: "ev@v1", Topic: "t"}, ReadyAt: f.after(0)},
		"a release for later":    {ReadyAt: f.after(time.Second)},
		"a release for an event": {},
	} {
		req.Lease, req.LeaseFor = a.Lease, lease
		_, err := f.store.Suspend(f.ctx, req)
		f.wantErr(err, storage.ErrLeaseLost, "Suspend with "+what+" under the restarted lease")
	}
	wrong := a.Lease
	wrong.Token++
	_, err = f.store.Suspend(f.ctx, storage.SuspendRequest{Lease: wrong, LeaseFor: lease, ReadyAt: f.after(0)})
	f.wantErr(err, storage.ErrLeaseLost, "a release under another token")
	f.wantUnchanged(before, "refused writes under the restarted lease")
	f.claimNone()

	// Its release lets go: the new execution is ready now.
	f.letGo(a.Lease)
	rec = f.wantStatus("run-1", storage.StatusQueued)
	f.wantTimePtr("ReadyAt after the release", rec.ReadyAt, f.now())
	if rec.LeaseUntil.After(f.now()) || rec.Execution != 2 {
		f.t.Fatalf("record after the release = %+v, want the old lease ended, execution 2", rec)
	}
	f.heartbeatLoss(a.Lease, storage.LossEnded, "after letting go")
	b := f.claimOne("worker-b")
	if b.Lease.Token <= a.Lease.Token || b.Recoveries != 0 {
		f.t.Fatalf("claim after the release = %+v, want a greater token and no recovery", b)
	}
	if r := f.replay("run-1"); r.Execution != 2 || len(r.Checkpoints) != 0 {
		f.t.Fatalf("LoadReplay = %+v, want execution 2 afresh", r)
	}
	_, err = f.store.Suspend(f.ctx, storage.SuspendRequest{Lease: a.Lease, LeaseFor: lease, ReadyAt: f.after(0)})
	f.wantLoss(err, storage.LossTaken, "a second release by the old holder")
	if rec := f.wantStatus("run-1", storage.StatusRunning); rec.Token != b.Lease.Token {
		f.t.Fatalf("record = %+v, want the new claim's", rec)
	}
}

func testRestartFenceExpires(f *fixture) {
	a := f.start("run-1", "")
	until := f.get("run-1").LeaseUntil
	f.clock.Advance(time.Second)
	f.restart("run-1", "")
	// A second restart keeps the fence: the lease is still live.
	f.restart("run-1", "")
	rec := f.wantStatus("run-1", storage.StatusQueued)
	if rec.Execution != 3 {
		f.t.Fatalf("record after two restarts = %+v, want execution 3", rec)
	}
	f.wantTimePtr("ReadyAt", rec.ReadyAt, until)
	f.heartbeatLoss(a.Lease, storage.LossRestarted, "after two restarts")
	f.clock.Set(until.Add(-time.Millisecond))
	f.claimNone()
	f.clock.Set(until)
	b := f.claimOne("worker-b")
	if b.Lease.Token <= a.Lease.Token || b.Recoveries != 0 {
		f.t.Fatalf("claim at the lease's expiry = %+v, want a greater token and no recovery", b)
	}
	_, err := f.store.Suspend(f.ctx, storage.SuspendRequest{Lease: a.Lease, LeaseFor: lease, ReadyAt: f.after(0)})
	f.wantLoss(err, storage.LossTaken, "a release by the old holder after another claim")
}

func testRestartNoLiveLease(f *fixture) {
	a := f.start("run-1", "")
	f.clock.Advance(lease + time.Second)
	f.restart("run-1", "")
	rec := f.wantStatus("run-1", storage.StatusQueued)
	f.wantTimePtr("ReadyAt after a restart past the lease", rec.ReadyAt, f.now())
	b := f.claimOne("worker-b")
	if b.Recoveries != 0 {
		f.t.Fatalf("claim = %+v, want no recovery", b)
	}
	_, err := f.store.Suspend(f.ctx, storage.SuspendRequest{Lease: a.Lease, LeaseFor: lease, ReadyAt: f.after(0)})
	f.wantErr(err, storage.ErrLeaseLost, "a release under the expired lease")

	// Nor does a parked run's earlier lease fence anything.
	f.suspend(storage.SuspendRequest{Lease: b.Lease, ReadyAt: f.after(time.Hour)})
	f.restart("run-1", "")
	f.wantTimePtr("ReadyAt after a restart of a waiting run", f.get("run-1").ReadyAt, f.now())
	f.claimOne("worker-c")
}

func testRestartPausedLetGo(f *fixture) {
	a := f.start("run-1", "")
	f.restart("run-1", "")
	f.pause("run-1")
	f.letGo(a.Lease)
	rec := f.wantStatus("run-1", storage.StatusPaused)
	f.wantTimePtr("ReadyAt", rec.ReadyAt, f.now())
	f.claimNone()
	f.resume("run-1")
	f.wantStatus("run-1", storage.StatusQueued)
	f.claimOne("worker-b")
}
