package storetest

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/stemflow/stem/storage"
)

var controlCases = []testCase{
	{"pause/queued run pauses and resumes", testPauseQueued},
	{"pause/waiting run keeps its wake time and wait", testPauseWaiting},
	{"pause/running run pauses at its next checkpoint", testPauseRunning},
	{"pause/resume cancels a pause request", testResumeCancelsRequest},
	{"pause/suspend with a pause requested parks paused", testPauseAtSuspend},
	{"pause/finished or unpaused runs are invalid", testPauseInvalid},
	{"race/terminate versus checkpoint", testTerminateRace},
	{"race/pause versus checkpoint", testPauseRace},
	{"terminate/fences the holder and notifies the parent", testTerminate},
	{"terminate/waiting run drops its wait", testTerminateWaiting},
	{"restart/drops progress, keeps input and events, revokes the lease", testRestart},
	{"terminate/child error terminates unfinished descendants, leaves abandoned and finished ones", testTerminateTree},
	{"terminate/without child error no child is touched", testTerminateNoChildError},
	{"complete/child error terminates unfinished descendants, leaves abandoned and finished ones", testCompleteTree(storage.StatusComplete)},
	{"complete/errored with a child error terminates descendants too", testCompleteTree(storage.StatusErrored)},
	{"complete/without child error no child is touched", testCompleteNoChildError},
	{"complete/refused under a lost lease terminates nothing", testCompleteTreeRefused},
	{"complete/child error and notify: the parent is told, the grandchild terminated", testCompleteChildNotify},
}

func (f *fixture) pause(id string) {
	f.t.Helper()
	if err := f.store.Pause(f.ctx, id); err != nil {
		f.t.Fatalf("Pause(%s): %v", id, err)
	}
}

func (f *fixture) resume(id string) {
	f.t.Helper()
	if err := f.store.Resume(f.ctx, id); err != nil {
		f.t.Fatalf("Resume(%s): %v", id, err)
	}
}

func testPauseQueued(f *fixture) {
	f.create("run-1", wf, "")
	f.pause("run-1")
	rec := f.wantStatus("run-1", storage.StatusPaused)
	f.wantTimePtr("ReadyAt", rec.ReadyAt, Start)
	f.pause("run-1") // a no-op
	f.wantStatus("run-1", storage.StatusPaused)
	f.clock.Advance(time.Hour)
	f.claimNone()
	f.resume("run-1")
	f.wantStatus("run-1", storage.StatusQueued)
	if c := f.claimOne("worker-a"); c.Lease.RunID != "run-1" {
		f.t.Fatalf("claimed %s", c.Lease.RunID)
	}
}

func testPauseWaiting(f *fixture) {
	a := f.start("sleeper", "")
	wake := f.now().Add(time.Hour)
	f.suspend(storage.SuspendRequest{Lease: a.Lease, ReadyAt: &wake})
	f.pause("sleeper")
	rec := f.wantStatus("sleeper", storage.StatusPaused)
	f.wantTimePtr("ReadyAt", rec.ReadyAt, wake)
	f.resume("sleeper") // before the wake time
	rec = f.wantStatus("sleeper", storage.StatusWaiting)
	f.wantTimePtr("ReadyAt", rec.ReadyAt, wake)
	f.claimNone()

	b := f.start("awaiter", "")
	f.park(b.Lease, "ev@v1", "topic", storage.KindEvent)
	f.pause("awaiter")
	rec = f.wantStatus("awaiter", storage.StatusPaused)
	if rec.Wait == nil || rec.Wait.Key != "ev@v1" {
		f.t.Fatalf("paused run's wait = %+v, want ev@v1 kept", rec.Wait)
	}
	if ids := f.emit("topic", "p"); len(ids) != 1 || ids[0] != "awaiter" {
		f.t.Fatalf("Emit to a paused waiting run reached %v, want awaiter", ids)
	}
	rec = f.wantStatus("awaiter", storage.StatusPaused)
	if rec.Wait != nil {
		f.t.Fatalf("wait %+v kept after delivery", rec.Wait)
	}
	f.wantTimePtr("ReadyAt after delivery", rec.ReadyAt, f.now())
	f.wantCheckpoints("awaiter", "ev@v1=p")
	f.claimNone()
	f.resume("awaiter")
	f.wantStatus("awaiter", storage.StatusQueued)
	c := f.claimOne("worker-b")
	if c.Lease.RunID != "awaiter" {
		f.t.Fatalf("claimed %s, want awaiter", c.Lease.RunID)
	}
	f.wantCheckpoints("awaiter", "ev@v1=p")
	f.complete(c.Lease, "")
	f.clock.Advance(time.Hour)
	if c := f.claimOne("worker-b"); c.Lease.RunID != "sleeper" {
		f.t.Fatalf("claimed %s, want sleeper", c.Lease.RunID)
	}
}

func testPauseRunning(f *fixture) {
	a := f.start("run-1", "")
	f.pause("run-1")
	rec := f.wantStatus("run-1", storage.StatusRunning)
	if !rec.PauseRequested {
		f.t.Fatal("PauseRequested not set on a running run")
	}
	f.pause("run-1")
	if _, err := f.store.Heartbeat(f.ctx, storage.HeartbeatRequest{Lease: a.Lease, LeaseFor: lease}); err != nil {
		f.t.Fatalf("Heartbeat with a pause requested: %v", err)
	}
	if err := f.store.RecordAttempts(f.ctx, storage.RecordAttemptsRequest{Lease: a.Lease, LeaseFor: lease, Attempts: []storage.Attempt{{Key: "one@v1", Number: 1, Error: "x"}}}); err != nil {
		f.t.Fatalf("RecordAttempts with a pause requested: %v", err)
	}
	f.wantStatus("run-1", storage.StatusRunning)
	res := f.checkpoint(a.Lease, "one@v1", "1")
	if !res.Paused || res.Existing != nil {
		f.t.Fatalf("Checkpoint = %+v, want Paused", res)
	}
	rec = f.wantStatus("run-1", storage.StatusPaused)
	if rec.PauseRequested {
		f.t.Fatal("PauseRequested still set on the paused run")
	}
	f.wantCheckpoints("run-1", "one@v1=1")
	_, err := f.store.Checkpoint(f.ctx, stepReq(a.Lease, "two@v1", "2"))
	f.wantErr(err, storage.ErrLeaseLost, "Checkpoint after the pause took effect")
	f.wantErr(errOf(f.store.Heartbeat(f.ctx, storage.HeartbeatRequest{Lease: a.Lease, LeaseFor: lease})), storage.ErrLeaseLost, "Heartbeat after the pause took effect")
	f.clock.Advance(2 * lease)
	f.claimNone()
	f.resume("run-1")
	f.wantStatus("run-1", storage.StatusQueued)
	b := f.claimOne("worker-b")
	if b.Lease.Token <= a.Lease.Token || b.Recoveries != 0 {
		f.t.Fatalf("claim after resume = %+v, want a greater token than %d and no recovery", b, a.Lease.Token)
	}
	f.wantCheckpoints("run-1", "one@v1=1")
	if res := f.checkpoint(b.Lease, "two@v1", "2"); res.Paused {
		f.t.Fatal("pause took effect twice")
	}
}

func testResumeCancelsRequest(f *fixture) {
	a := f.start("run-1", "")
	f.pause("run-1")
	f.resume("run-1")
	rec := f.wantStatus("run-1", storage.StatusRunning)
	if rec.PauseRequested || rec.Token != a.Lease.Token {
		f.t.Fatalf("record = %+v, want running under the same lease with no pause requested", rec)
	}
	if res := f.checkpoint(a.Lease, "one@v1", ""); res.Paused {
		f.t.Fatal("Checkpoint paused after the request was cancelled")
	}
	f.wantStatus("run-1", storage.StatusRunning)
}

func testPauseAtSuspend(f *fixture) {
	a := f.start("run-1", "")
	f.pause("run-1")
	wake := f.now().Add(time.Hour)
	res := f.suspend(storage.SuspendRequest{
		Lease:        a.Lease,
		Checkpoint:   &storage.Checkpoint{Key: "nap@v1", Kind: storage.KindSleep, Output: []byte("wake")},
		ReadyAt:      &wake,
		SuspendState: []byte("state"),
	})
	if !res.Paused || res.Delivered != nil {
		f.t.Fatalf("Suspend = %+v, want Paused", res)
	}
	rec := f.wantStatus("run-1", storage.StatusPaused)
	if rec.PauseRequested {
		f.t.Fatal("PauseRequested still set")
	}
	f.wantTimePtr("ReadyAt", rec.ReadyAt, wake)
	f.wantCheckpoints("run-1", "nap@v1=wake")
	f.clock.Advance(2 * time.Hour)
	f.claimNone()
	f.resume("run-1")
	f.wantStatus("run-1", storage.StatusQueued)
	b := f.claimOne("worker-b")
	f.wantBytes("SuspendState", b.SuspendState, "state")
}

func testPauseInvalid(f *fixture) {
	a := f.start("done", "")
	f.complete(a.Lease, "out")
	f.create("queued", wf, "")
	f.create("terminated", wf, "")
	if _, err := f.store.Terminate(f.ctx, storage.TerminateRequest{RunID: "terminated", Error: storage.ErrorInfo{Message: "stop"}}); err != nil {
		f.t.Fatalf("Terminate: %v", err)
	}
	before := f.snapshot()
	for _, id := range []string{"done", "terminated"} {
		f.wantErr(f.store.Pause(f.ctx, id), storage.ErrInvalidState, "Pause of the "+id+" run")
		f.wantErr(f.store.Resume(f.ctx, id), storage.ErrInvalidState, "Resume of the "+id+" run")
	}
	f.wantErr(f.store.Resume(f.ctx, "queued"), storage.ErrInvalidState, "Resume of a queued run")
	f.wantUnchanged(before, "rejected Pause and Resume")
}

// testTerminateRace runs Terminate against a worker checkpointing in a
// loop: every checkpoint either lands before the run is terminated or fails
// with ErrLeaseLost, and none succeeds once Terminate has returned.
func testTerminateRace(f *fixture) {
	const runs, steps = 20, 50
	raceRuns(f, runs, func(c storage.ClaimedRun) (stop func() error) {
		return func() error {
			_, err := f.store.Terminate(f.ctx, storage.TerminateRequest{RunID: c.Lease.RunID, Error: storage.ErrorInfo{Message: "stop", Code: storage.CodeTerminated}})
			return err
		}
	}, steps, storage.StatusTerminated)
}

// testPauseRace runs Pause against a worker checkpointing in a loop: the
// first checkpoint after Pause returned reports Paused at the latest, and
// nothing is written after it.
func testPauseRace(f *fixture) {
	const runs, steps = 20, 50
	raceRuns(f, runs, func(c storage.ClaimedRun) func() error {
		return func() error { return f.store.Pause(f.ctx, c.Lease.RunID) }
	}, steps, storage.StatusPaused)
}

func raceRuns(f *fixture, runs int, stopper func(storage.ClaimedRun) func() error, steps int, final storage.RunStatus) {
	var claimed []storage.ClaimedRun
	for i := range runs {
		claimed = append(claimed, f.start(runID(i), ""))
	}
	written := make([][]string, runs)
	var wg sync.WaitGroup
	for i, c := range claimed {
		stopped := make(chan struct{})
		stop := stopper(c)
		wg.Go(func() {
			defer close(stopped)
			if err := stop(); err != nil {
				f.t.Errorf("stopping %s: %v", c.Lease.RunID, err)
			}
		})
		wg.Go(func() {
			lost := false
			for s := range steps {
				after := false
				select {
				case <-stopped:
					after = true
				default:
				}
				key := fmt.Sprintf("step@v1#%d", s)
				res, err := f.store.Checkpoint(f.ctx, stepReq(c.Lease, key, key))
				switch {
				case errors.Is(err, storage.ErrLeaseLost):
					if final == storage.StatusPaused && !lost {
						f.t.Errorf("%s: Checkpoint(%s) lost the lease before a pause took effect", c.Lease.RunID, key)
						return
					}
					lost = true
				case err != nil:
					f.t.Errorf("Checkpoint(%s, %s): %v", c.Lease.RunID, key, err)
					return
				case lost:
					f.t.Errorf("%s: Checkpoint(%s) succeeded after the lease was gone", c.Lease.RunID, key)
					return
				case res.Existing != nil:
					f.t.Errorf("%s: Checkpoint(%s) reported Existing %+v", c.Lease.RunID, key, res.Existing)
					return
				default:
					written[i] = append(written[i], key+"="+key)
					switch {
					case res.Paused && final != storage.StatusPaused:
						f.t.Errorf("%s: Checkpoint(%s) reported Paused", c.Lease.RunID, key)
						return
					case res.Paused:
						lost = true // the lease was released with this write
					case after:
						f.t.Errorf("%s: Checkpoint(%s) succeeded without pausing after the %s returned", c.Lease.RunID, key, final)
						return
					}
				}
				if lost && after {
					return
				}
			}
			if !lost {
				<-stopped
				res, err := f.store.Checkpoint(f.ctx, stepReq(c.Lease, "final@v1", ""))
				switch {
				case errors.Is(err, storage.ErrLeaseLost) && final == storage.StatusTerminated:
				case err == nil && res.Paused && final == storage.StatusPaused:
					written[i] = append(written[i], "final@v1=")
				default:
					f.t.Errorf("%s: Checkpoint after the %s returned: %+v, %v", c.Lease.RunID, final, res, err)
				}
			}
		})
	}
	wg.Wait()
	if f.t.Failed() {
		return
	}
	for i := range claimed {
		rec := f.wantStatus(runID(i), final)
		if rec.PauseRequested {
			f.t.Fatalf("%s still has a pause requested", rec.ID)
		}
		f.wantCheckpoints(runID(i), written[i]...)
	}
}

func testTerminate(f *fixture) {
	p := f.start("parent", "")
	f.park(p.Lease, "child@v1", "child:run-1", storage.KindChild)
	f.create("run-1", "child", "")
	c := f.claimOne("worker-c", "child")
	f.checkpoint(c.Lease, "step@v1", "")
	info := storage.ErrorInfo{Message: "stopped by operator", Code: storage.CodeTerminated}
	f.clock.Advance(time.Second)
	ids, err := f.store.Terminate(f.ctx, storage.TerminateRequest{
		RunID: "run-1", Error: info,
		Notify: &storage.Event{RunID: "parent", Topic: "child:run-1", Payload: []byte("terminated")},
	})
	if err != nil {
		f.t.Fatalf("Terminate: %v", err)
	}
	if !slices.Equal(ids, []string{"run-1"}) {
		f.t.Fatalf("Terminate returned %v, want [run-1]", ids)
	}
	rec := f.wantStatus("run-1", storage.StatusTerminated)
	if rec.Error == nil || *rec.Error != info || rec.Wait != nil || rec.PauseRequested {
		f.t.Fatalf("terminated record = %+v, want error %+v and nothing pending", rec, info)
	}
	f.wantTimePtr("EndedAt", rec.EndedAt, f.now())
	_, err = f.store.Checkpoint(f.ctx, stepReq(c.Lease, "late@v1", ""))
	f.wantErr(err, storage.ErrLeaseLost, "Checkpoint after Terminate")
	f.wantErr(errOf(f.store.Heartbeat(f.ctx, storage.HeartbeatRequest{Lease: c.Lease, LeaseFor: lease})), storage.ErrLeaseLost, "Heartbeat after Terminate")
	err = f.store.Complete(f.ctx, storage.CompleteRequest{Lease: c.Lease, Status: storage.StatusComplete})
	f.wantErr(err, storage.ErrLeaseLost, "Complete after Terminate")
	f.wantCheckpoints("run-1", "step@v1=")

	cps := f.wantCheckpoints("parent", "child@v1=terminated")
	if cps[0].Kind != storage.KindChild {
		f.t.Fatalf("parent's checkpoint kind %q, want child", cps[0].Kind)
	}
	prec := f.wantStatus("parent", storage.StatusQueued)
	if prec.Wait != nil {
		f.t.Fatalf("parent still waits on %+v", prec.Wait)
	}
	f.clock.Advance(lease + time.Millisecond)
	f.claimNone("child")

	before := f.snapshot()
	_, err = f.store.Terminate(f.ctx, storage.TerminateRequest{RunID: "run-1", Error: storage.ErrorInfo{Message: "again"},
		Notify: &storage.Event{RunID: "parent", Topic: "x", Payload: []byte("y")}})
	f.wantErr(err, storage.ErrInvalidState, "Terminate of a terminated run")
	f.wantUnchanged(before, "a rejected Terminate")
	if got := f.claimOne("worker-p"); got.Lease.RunID != "parent" {
		f.t.Fatalf("claimed %s, want parent", got.Lease.RunID)
	}
}

func testTerminateWaiting(f *fixture) {
	a := f.start("run-1", "")
	f.park(a.Lease, "ev@v1", "topic", storage.KindEvent)
	f.create("run-2", wf, "")
	f.pause("run-2")
	for _, id := range []string{"run-1", "run-2"} {
		if _, err := f.store.Terminate(f.ctx, storage.TerminateRequest{RunID: id, Error: storage.ErrorInfo{Message: "stop"}}); err != nil {
			f.t.Fatalf("Terminate(%s): %v", id, err)
		}
		if rec := f.wantStatus(id, storage.StatusTerminated); rec.Wait != nil || rec.Error == nil || rec.Error.Message != "stop" {
			f.t.Fatalf("terminated record = %+v", rec)
		}
	}
	if ids := f.emit("topic", "p"); len(ids) != 0 {
		f.t.Fatalf("Emit reached %v after Terminate", ids)
	}
	f.wantCheckpoints("run-1")
	f.clock.Advance(time.Hour)
	f.claimNone()
}

func testRestart(f *fixture) {
	a := f.start("run-1", "in")
	if err := f.store.RecordAttempts(f.ctx, storage.RecordAttemptsRequest{Lease: a.Lease, LeaseFor: lease, Attempts: []storage.Attempt{{Key: "s1@v1", Number: 1, Error: "x"}}}); err != nil {
		f.t.Fatalf("RecordAttempts: %v", err)
	}
	f.checkpoint(a.Lease, "s1@v1", "1")
	f.send("run-1", "later", "kept")
	f.pause("run-1")
	f.clock.Advance(time.Second)

	if err := f.store.Restart(f.ctx, storage.RestartRequest{RunID: "run-1"}); err != nil {
		f.t.Fatalf("Restart: %v", err)
	}
	rec := f.wantStatus("run-1", storage.StatusQueued)
	if rec.Wait != nil || rec.PauseRequested || rec.Recoveries != 0 || rec.Workflow != wf || rec.Error != nil || len(rec.Output) != 0 {
		f.t.Fatalf("restarted record = %+v, want a clean queued run", rec)
	}
	if rec.Execution != 2 || rec.EndedAt != nil {
		f.t.Fatalf("restarted record in execution %d, ended %v; want execution 2, not ended", rec.Execution, rec.EndedAt)
	}
	f.wantTime("StartedAt", rec.StartedAt, f.now())
	f.wantBytes("Input", rec.Input, "in")
	// Ready at the live lease's expiry, unless its holder lets go first.
	f.wantTimePtr("ReadyAt", rec.ReadyAt, f.now().Add(lease-time.Second))
	f.wantCheckpoints("run-1")
	if steps := f.steps("run-1"); len(steps) != 0 {
		f.t.Fatalf("steps after Restart = %+v", steps)
	}
	_, err := f.store.Checkpoint(f.ctx, stepReq(a.Lease, "s2@v1", "2"))
	f.wantErr(err, storage.ErrLeaseLost, "Checkpoint under the lease from before Restart")
	err = f.store.RecordAttempts(f.ctx, storage.RecordAttemptsRequest{Lease: a.Lease, LeaseFor: lease, Attempts: []storage.Attempt{{Key: "s2@v1", Number: 1, Error: "x"}}})
	f.wantErr(err, storage.ErrLeaseLost, "RecordAttempts under the lease from before Restart")
	if h := f.history("run-1", 1); len(h.Steps) != 1 || h.Steps[0].Key != "s1@v1" || len(h.Pending) != 0 {
		f.t.Fatalf("execution 1 after fenced writes = %+v, want only s1@v1", h)
	}
	f.wantErr(errOf(f.store.Heartbeat(f.ctx, storage.HeartbeatRequest{Lease: a.Lease, LeaseFor: lease})), storage.ErrLeaseLost, "Heartbeat under the lease from before Restart")

	f.letGo(a.Lease)
	b := f.claimOne("worker-b")
	if b.Lease.Token <= a.Lease.Token || len(b.SuspendState) != 0 || b.Wait != nil || b.Recoveries != 0 {
		f.t.Fatalf("claim after Restart = %+v, want a greater token, no state, wait or recovery", b)
	}
	f.wantBytes("claimed Input", b.Input, "in")
	f.suspend(storage.SuspendRequest{Lease: b.Lease, Wait: &storage.Wait{Key: "ev@v1", Topic: "t"}, SuspendState: []byte("state")})

	// Restart of a waiting run drops its wait and SuspendState.
	if err := f.store.Restart(f.ctx, storage.RestartRequest{RunID: "run-1"}); err != nil {
		f.t.Fatalf("Restart: %v", err)
	}
	if rec := f.wantStatus("run-1", storage.StatusQueued); rec.Wait != nil || rec.Execution != 3 {
		f.t.Fatalf("record after the second Restart = %+v, want no wait, execution 3", rec)
	}
	if ids := f.emit("t", "p"); len(ids) != 0 {
		f.t.Fatalf("Emit reached %v after Restart", ids)
	}
	c := f.claimOne("worker-c")
	if len(c.SuspendState) != 0 || c.Wait != nil {
		f.t.Fatalf("claim after Restart = %+v, want no state and no wait", c)
	}
	// The buffered event survived both restarts.
	res := f.suspend(storage.SuspendRequest{Lease: c.Lease, Wait: &storage.Wait{Key: "ev2@v1", Topic: "later"}})
	if res.Delivered == nil || string(res.Delivered.Output) != "kept" {
		f.t.Fatalf("Suspend after Restart = %+v, want the buffered event", res)
	}

	// A finished run may be restarted too.
	err = f.store.Complete(f.ctx, storage.CompleteRequest{Lease: c.Lease, Status: storage.StatusErrored, Error: &storage.ErrorInfo{Message: "boom"}})
	if err != nil {
		f.t.Fatalf("Complete: %v", err)
	}
	if err := f.store.Restart(f.ctx, storage.RestartRequest{RunID: "run-1"}); err != nil {
		f.t.Fatalf("Restart of an errored run: %v", err)
	}
	if rec := f.wantStatus("run-1", storage.StatusQueued); rec.Error != nil || len(rec.Output) != 0 || rec.Execution != 4 || rec.EndedAt != nil {
		f.t.Fatalf("restarted errored run = %+v, want its error cleared, execution 4, not ended", rec)
	}
	if execs := f.executions("run-1"); len(execs) != 4 || execs[2].Status != storage.StatusErrored || execs[3].Number != 4 {
		f.t.Fatalf("executions = %+v, want four, the third errored", execs)
	}
	f.wantCheckpoints("run-1")
	if d := f.claimOne("worker-d"); d.Lease.Token <= c.Lease.Token {
		f.t.Fatalf("token %d, want more than %d", d.Lease.Token, c.Lease.Token)
	}
}

func childNotify(parent string) *storage.Event {
	return &storage.Event{RunID: parent, Topic: "child:run-1", Payload: []byte(`"child result"`)}
}

// family creates run-tree under root, a running run of wf:
//
//	root (running)
//	├── c-run (running) ── g-run (queued) ── gg-wait (waiting on an event)
//	├── c-paused (paused)
//	├── c-done (complete) ── d-kid (queued)
//	├── c-failed (errored)
//	├── c-gone (terminated)
//	└── c-abandon (abandon, queued) ── a-kid (queued) ── a-grandkid (queued)
//
// and a run outside it, stranger; each run but root has a workflow of its
// own. It returns the claims of root and c-run.
func family(f *fixture) (root, crun storage.ClaimedRun) {
	f.t.Helper()
	root = f.startAs(storage.NewRun{ID: "root", Workflow: wf})
	crun = f.startAs(storage.NewRun{ID: "c-run", ParentID: "root"})
	f.createRun(storage.NewRun{ID: "g-run", Workflow: "wf-g-run", ParentID: "c-run"})
	w := f.startAs(storage.NewRun{ID: "gg-wait", ParentID: "g-run"})
	f.park(w.Lease, "ev@v1", "topic", storage.KindEvent)
	f.createRun(storage.NewRun{ID: "c-paused", Workflow: "wf-c-paused", ParentID: "root"})
	f.pause("c-paused")
	d := f.startAs(storage.NewRun{ID: "c-done", ParentID: "root"})
	f.complete(d.Lease, "out")
	f.createRun(storage.NewRun{ID: "d-kid", Workflow: "wf-d-kid", ParentID: "c-done"})
	e := f.startAs(storage.NewRun{ID: "c-failed", ParentID: "root"})
	if err := f.store.Complete(f.ctx, storage.CompleteRequest{Lease: e.Lease, Status: storage.StatusErrored, Error: &storage.ErrorInfo{Message: "boom"}}); err != nil {
		f.t.Fatalf("Complete: %v", err)
	}
	f.createRun(storage.NewRun{ID: "c-gone", Workflow: "wf-c-gone", ParentID: "root"})
	f.terminate(storage.TerminateRequest{RunID: "c-gone", Error: storage.ErrorInfo{Message: "earlier"}})
	f.createRun(storage.NewRun{ID: "c-abandon", Workflow: "wf-c-abandon", ParentID: "root", ParentPolicy: storage.ParentAbandon})
	f.createRun(storage.NewRun{ID: "a-kid", Workflow: "wf-a-kid", ParentID: "c-abandon"})
	f.createRun(storage.NewRun{ID: "a-grandkid", Workflow: "wf-a-grandkid", ParentID: "a-kid"})
	f.createRun(storage.NewRun{ID: "stranger", Workflow: "wf-stranger"})
	return root, crun
}

// familyUntouched records the runs of family that a cascade from root
// leaves as they are: finished children, the abandoned branch and the
// stranger.
func familyUntouched(f *fixture) map[string]storage.RunRecord {
	f.t.Helper()
	untouched := map[string]storage.RunRecord{}
	for _, id := range []string{"c-done", "c-failed", "c-gone", "c-abandon", "a-kid", "a-grandkid", "stranger"} {
		untouched[id] = normRecord(f.get(id))
	}
	return untouched
}

// familyCascade is what a cascade from family's root terminates, in ID
// order: d-kid is reached through its finished parent, a descendant all
// the same.
var familyCascade = []string{"c-paused", "c-run", "d-kid", "g-run", "gg-wait"}

// wantFamilyCascade checks a family whose root ended now with its
// descendants terminated with childErr: familyCascade terminated, ended now
// and fenced (the holders of leases fail their fenced writes), their waits
// gone, the untouched runs as they were and the abandoned branch still
// claimable.
func wantFamilyCascade(f *fixture, childErr storage.ErrorInfo, untouched map[string]storage.RunRecord, leases ...storage.Lease) {
	f.t.Helper()
	for _, id := range familyCascade {
		rec := f.wantStatus(id, storage.StatusTerminated)
		if rec.Error == nil || *rec.Error != childErr || rec.Wait != nil || rec.PauseRequested {
			f.t.Fatalf("terminated child %s = %+v (error %+v), want error %+v and nothing pending", id, rec, rec.Error, childErr)
		}
		f.wantTimePtr("EndedAt of "+id, rec.EndedAt, f.now())
		f.wantExecutions(id, storage.ExecutionRecord{Number: 1, StartedAt: rec.StartedAt, EndedAt: f.after(0), Status: storage.StatusTerminated, Error: &childErr})
	}
	for id, before := range untouched {
		if after := normRecord(f.get(id)); !reflect.DeepEqual(after, before) {
			f.t.Fatalf("the cascade changed %s:\nbefore %+v\nafter  %+v", id, before, after)
		}
	}
	for _, l := range leases {
		_, err := f.store.Checkpoint(f.ctx, stepReq(l, "late@v1", ""))
		f.wantErr(err, storage.ErrLeaseLost, "Checkpoint by the holder of "+l.RunID)
		f.wantErr(errOf(f.store.Heartbeat(f.ctx, storage.HeartbeatRequest{Lease: l, LeaseFor: lease})), storage.ErrLeaseLost, "Heartbeat by the holder of "+l.RunID)
	}
	if ids := f.emit("topic", "p"); len(ids) != 0 {
		f.t.Fatalf("Emit reached %v: a terminated descendant kept its wait", ids)
	}
	// The abandoned branch still runs.
	f.clock.Advance(lease + time.Millisecond)
	if c := f.claimOne("worker-z", "wf-a-grandkid"); c.Lease.RunID != "a-grandkid" {
		f.t.Fatalf("claimed %s, want a-grandkid", c.Lease.RunID)
	}
	f.claimNone("wf-root", wf, "wf-c-run", "wf-g-run", "wf-gg-wait", "wf-c-paused", "wf-d-kid")
}

func testTerminateTree(f *fixture) {
	root, crun := family(f)
	f.clock.Advance(time.Second)
	untouched := familyUntouched(f)
	stop := storage.ErrorInfo{Message: "stopped by operator", Code: storage.CodeTerminated}
	childErr := storage.ErrorInfo{Message: "parent root terminated", Code: storage.CodeTerminated}
	ids := f.terminate(storage.TerminateRequest{RunID: "root", Error: stop, ChildError: &childErr})
	if len(ids) == 0 || ids[0] != "root" {
		f.t.Fatalf("Terminate returned %v, want root first", ids)
	}
	rest := slices.Clone(ids[1:])
	slices.Sort(rest)
	if !slices.Equal(rest, familyCascade) {
		f.t.Fatalf("Terminate returned %v, want root then %v in any order", ids, familyCascade)
	}
	rec := f.wantStatus("root", storage.StatusTerminated)
	if rec.Error == nil || *rec.Error != stop {
		f.t.Fatalf("root error %+v, want %+v", rec.Error, stop)
	}
	f.wantTimePtr("EndedAt of root", rec.EndedAt, f.now())
	// The holders of running descendants are fenced, and so is the root's.
	wantFamilyCascade(f, childErr, untouched, root.Lease, crun.Lease)
}

// othersUnchanged runs end, which ends family's root, and fails if any
// other run changed.
func othersUnchanged(f *fixture, what string, end func()) {
	f.t.Helper()
	others := func() []storage.RunRecord {
		var recs []storage.RunRecord
		for _, r := range f.listAll(storage.ListRunsQuery{}) {
			if r.ID != "root" {
				recs = append(recs, normRecord(r))
			}
		}
		return recs
	}
	before := others()
	end()
	if after := others(); !reflect.DeepEqual(before, after) {
		f.t.Fatalf("%s changed other runs:\nbefore %+v\nafter  %+v", what, before, after)
	}
}

func testTerminateNoChildError(f *fixture) {
	root, crun := family(f)
	f.clock.Advance(time.Second)
	othersUnchanged(f, "Terminate without a child error", func() {
		if ids := f.terminate(storage.TerminateRequest{RunID: "root", Error: storage.ErrorInfo{Message: "stop"}}); !slices.Equal(ids, []string{"root"}) {
			f.t.Fatalf("Terminate returned %v, want [root]", ids)
		}
	})
	f.wantStatus("root", storage.StatusTerminated)
	_, err := f.store.Checkpoint(f.ctx, stepReq(root.Lease, "late@v1", ""))
	f.wantErr(err, storage.ErrLeaseLost, "Checkpoint by the root's holder")
	f.checkpoint(crun.Lease, "s@v1", "child goes on")

	// A finished run with a child error: ErrInvalidState, nothing written.
	snap := f.snapshot()
	_, err = f.store.Terminate(f.ctx, storage.TerminateRequest{RunID: "root", Error: storage.ErrorInfo{Message: "again"}, ChildError: &storage.ErrorInfo{Message: "x"}})
	f.wantErr(err, storage.ErrInvalidState, "Terminate of a terminated run with a child error")
	f.wantUnchanged(snap, "a rejected Terminate with a child error")
}

// completeRoot completes family's root, holding l, with status (a result
// or an error) and childErr (nil: none).
func completeRoot(l storage.Lease, status storage.RunStatus, childErr *storage.ErrorInfo) storage.CompleteRequest {
	req := storage.CompleteRequest{Lease: l, Status: status, ChildError: childErr}
	if status == storage.StatusErrored {
		req.Error = &storage.ErrorInfo{Message: "root failed"}
	} else {
		req.Output = []byte("root result")
	}
	return req
}

// testCompleteTree completes family's root with status and a child error:
// the descendants are terminated as by Terminate, in the same change.
func testCompleteTree(status storage.RunStatus) func(*fixture) {
	return func(f *fixture) {
		root, crun := family(f)
		f.clock.Advance(time.Second)
		untouched := familyUntouched(f)
		childErr := storage.ErrorInfo{Message: "parent root finished", Code: storage.CodeTerminated}
		req := completeRoot(root.Lease, status, &childErr)
		if err := f.store.Complete(f.ctx, req); err != nil {
			f.t.Fatalf("Complete(%s) with a child error: %v", status, err)
		}
		rec := f.wantStatus("root", status)
		f.wantBytes("root's output", rec.Output, string(req.Output))
		if !reflect.DeepEqual(rec.Error, req.Error) {
			f.t.Fatalf("root error %+v, want %+v", rec.Error, req.Error)
		}
		f.wantTimePtr("EndedAt of root", rec.EndedAt, f.now())
		wantFamilyCascade(f, childErr, untouched, crun.Lease)
	}
}

func testCompleteNoChildError(f *fixture) {
	root, crun := family(f)
	f.clock.Advance(time.Second)
	othersUnchanged(f, "Complete without a child error", func() {
		f.complete(root.Lease, "done")
	})
	f.wantStatus("root", storage.StatusComplete)
	f.checkpoint(crun.Lease, "s@v1", "child goes on")
	f.wantErr(errOf(f.store.Heartbeat(f.ctx, storage.HeartbeatRequest{Lease: crun.Lease, LeaseFor: lease})), nil, "Heartbeat by c-run's holder")
}

func testCompleteTreeRefused(f *fixture) {
	root, _ := family(f)
	f.clock.Advance(lease + time.Millisecond)
	if c := f.claimOne("worker-b", wf); c.Lease.RunID != "root" {
		f.t.Fatalf("claimed %s, want root", c.Lease.RunID)
	}
	snap := f.snapshot()
	for _, status := range []storage.RunStatus{storage.StatusComplete, storage.StatusErrored} {
		err := f.store.Complete(f.ctx, completeRoot(root.Lease, status, &storage.ErrorInfo{Message: "parent root finished"}))
		f.wantErr(err, storage.ErrLeaseLost, "Complete("+string(status)+") with a child error under a lost lease")
	}
	f.wantUnchanged(snap, "a refused Complete with a child error")
}

// testCompleteChildNotify completes a child that has a child of its own,
// telling its waiting parent: the parent gets the event, the grandchild is
// terminated, in one change.
func testCompleteChildNotify(f *fixture) {
	c, done := f.childFamily()
	f.clock.Advance(time.Second)
	done.Lease = c.Lease
	if err := f.store.Complete(f.ctx, done); err != nil {
		f.t.Fatalf("Complete with a notify and a child error: %v", err)
	}
	f.wantFamilyEnded(done)
	f.claimNone("wf-grandchild")
}

// childFamily makes parent, waiting on its child run-1, which holds a
// lease and has a child of its own, grandchild; it returns run-1's claim
// and the completion that tells the parent and ends the grandchild.
func (f *fixture) childFamily() (storage.ClaimedRun, storage.CompleteRequest) {
	f.t.Helper()
	p := f.start("parent", "")
	f.park(p.Lease, "child@v1", "child:run-1", storage.KindChild)
	c := f.startAs(storage.NewRun{ID: "run-1", ParentID: "parent"})
	f.createRun(storage.NewRun{ID: "grandchild", Workflow: "wf-grandchild", ParentID: "run-1"})
	childErr := storage.ErrorInfo{Message: "parent run-1 finished", Code: storage.CodeTerminated}
	return c, storage.CompleteRequest{Status: storage.StatusComplete, Output: []byte("child result"),
		Notify: childNotify("parent"), ChildError: &childErr}
}

// wantFamilyEnded checks what childFamily's completion done did: run-1
// complete, grandchild terminated with its error, the parent queued with
// the child's result.
func (f *fixture) wantFamilyEnded(done storage.CompleteRequest) {
	f.t.Helper()
	f.wantStatus("run-1", storage.StatusComplete)
	rec := f.wantStatus("grandchild", storage.StatusTerminated)
	if rec.Error == nil || *rec.Error != *done.ChildError {
		f.t.Fatalf("grandchild error %+v, want %+v", rec.Error, *done.ChildError)
	}
	f.wantCheckpoints("parent", `child@v1="child result"`)
	f.wantStatus("parent", storage.StatusQueued)
}
