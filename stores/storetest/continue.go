package storetest

import (
	"reflect"
	"time"

	"github.com/stemflow/stem/storage"
)

// The cases of continue-as-new (executions.go in stores), progress
// (checkpoint.go, lease.go) and deadlines (runs.go).
var continueCases = []testCase{
	{"continue/begins the next execution with the new input, an empty replay and the buffered events", testContinue},
	{"continue/a lease that no longer holds continues nothing", testContinueFenced},
	{"continue/a pause requested makes the next execution paused", testContinuePaused},
	{"continue/many executions leave the replay of the current one alone", testContinueMany},
	{"continue/with a child error the children meet their parent policy", testContinueChildren},
	{"progress/every fenced write publishes it, nil leaves it", testProgress},
	{"progress/a write whose lease no longer holds publishes nothing", testProgressFenced},
	{"progress/restart clears it, continue-as-new keeps it", testProgressRestart},
	{"pause/a busy checkpoint leaves the run running and reports the pause", testPauseBusy},
	{"deadline/is kept with the run, handed to claims, through restart and continue-as-new", testDeadline},
}

func (f *fixture) continueAsNew(l storage.Lease, input string) {
	f.t.Helper()
	if err := f.store.ContinueAsNew(f.ctx, storage.ContinueRequest{Lease: l, Input: []byte(input)}); err != nil {
		f.t.Fatalf("ContinueAsNew(%s): %v", l.RunID, err)
	}
}

func testContinue(f *fixture) {
	a := f.start("run-1", "in-1")
	f.checkpoint(a.Lease, "s@v1", "1")
	retry := storage.Attempt{Key: "t@v1", Number: 1, Started: f.now(), Ended: f.now(), Error: "down", RetryAt: f.after(time.Hour)}
	if err := f.store.RecordAttempts(f.ctx, storage.RecordAttemptsRequest{Lease: a.Lease, LeaseFor: lease, Attempts: []storage.Attempt{retry}}); err != nil {
		f.t.Fatalf("RecordAttempts: %v", err)
	}
	f.send("run-1", "later", "L")
	f.suspend(storage.SuspendRequest{Lease: a.Lease, ReadyAt: f.after(0), SuspendState: []byte("state")})
	a = f.claimOne("worker-a")
	if _, err := f.store.Heartbeat(f.ctx, storage.HeartbeatRequest{Lease: a.Lease, LeaseFor: lease, Step: &storage.ActiveStep{Key: "u@v1", Attempt: 1, Started: f.now()}}); err != nil {
		f.t.Fatalf("Heartbeat: %v", err)
	}

	f.clock.Advance(time.Second)
	f.continueAsNew(a.Lease, "in-2")
	rec := f.wantStatus("run-1", storage.StatusQueued)
	if rec.Execution != 2 || string(rec.Input) != "in-2" || rec.Wait != nil || rec.Active != nil || rec.Output != nil || rec.Error != nil || rec.EndedAt != nil || rec.Recoveries != 0 {
		f.t.Fatalf("record after ContinueAsNew = %+v, want execution 2 with input in-2 and nothing else", rec)
	}
	f.wantTime("StartedAt", rec.StartedAt, f.now())
	f.wantTimePtr("ReadyAt", rec.ReadyAt, f.now())
	if rec.LeaseUntil.After(f.now()) {
		f.t.Fatalf("lease until %v after ContinueAsNew, want released", rec.LeaseUntil)
	}
	if r := f.replay("run-1"); r.Execution != 2 || len(r.Checkpoints) != 0 || len(r.Pending) != 0 {
		f.t.Fatalf("LoadReplay after ContinueAsNew = %+v, want execution 2 and nothing else", r)
	}
	f.wantExecutions("run-1",
		storage.ExecutionRecord{Number: 1, StartedAt: Start, EndedAt: f.after(0), Status: storage.StatusContinued},
		storage.ExecutionRecord{Number: 2, StartedAt: f.now(), Status: storage.StatusQueued})
	if h := f.history("run-1", 1); len(h.Steps) != 1 || h.Steps[0].Key != "s@v1" || len(h.Pending) != 1 {
		f.t.Fatalf("ListSteps of execution 1 = %+v, want s@v1 and t@v1's pending attempt kept", h)
	}
	b := f.claimOne("worker-b")
	if string(b.Input) != "in-2" || b.SuspendState != nil || b.Wait != nil || b.Recoveries != 0 {
		f.t.Fatalf("claim after ContinueAsNew = %+v, want input in-2, no suspend state, wait or recovery", b)
	}
	if b.Lease.Token <= a.Lease.Token {
		f.t.Fatalf("token %d after ContinueAsNew, want more than %d", b.Lease.Token, a.Lease.Token)
	}
	// The first execution's write-once keys are free again.
	f.checkpoint(b.Lease, "s@v1", "2")
	f.wantCheckpoints("run-1", "s@v1=2")
	res := f.suspend(storage.SuspendRequest{Lease: b.Lease, Wait: &storage.Wait{Key: "w@v1", Topic: "later"}})
	if d := res.Delivered; d == nil || string(d.Output) != "L" {
		f.t.Fatalf("Suspend on a topic buffered before ContinueAsNew delivered %+v, want L", res.Delivered)
	}
	f.complete(b.Lease, "out")
	f.wantExecutions("run-1",
		storage.ExecutionRecord{Number: 1, StartedAt: Start, EndedAt: timePtr(Start.Add(time.Second)), Status: storage.StatusContinued},
		storage.ExecutionRecord{Number: 2, StartedAt: Start.Add(time.Second), EndedAt: f.after(0), Status: storage.StatusComplete})
}

func testContinueFenced(f *fixture) {
	a := f.start("run-1", "in")
	f.clock.Advance(lease + time.Second)
	b := f.claimOne("worker-b")
	before := f.snapshot()
	err := f.store.ContinueAsNew(f.ctx, storage.ContinueRequest{Lease: a.Lease, Input: []byte("stale")})
	f.wantErr(err, storage.ErrLeaseLost, "ContinueAsNew under a lease taken over")
	f.wantUnchanged(before, "a fenced ContinueAsNew")

	f.terminate(storage.TerminateRequest{RunID: "run-1", Error: storage.ErrorInfo{Message: "stop", Code: storage.CodeTerminated}})
	before = f.snapshot()
	err = f.store.ContinueAsNew(f.ctx, storage.ContinueRequest{Lease: b.Lease, Input: []byte("late")})
	f.wantErr(err, storage.ErrLeaseLost, "ContinueAsNew of a terminated run")
	f.wantUnchanged(before, "ContinueAsNew of a terminated run")

	f.wantErr(f.store.ContinueAsNew(f.ctx, storage.ContinueRequest{Input: []byte("x")}), storage.ErrInvalidArgument, "ContinueAsNew without a lease")
}

func testContinuePaused(f *fixture) {
	a := f.start("run-1", "in")
	f.pause("run-1")
	f.continueAsNew(a.Lease, "next")
	rec := f.wantStatus("run-1", storage.StatusPaused)
	if rec.Execution != 2 || rec.PauseRequested {
		f.t.Fatalf("record = %+v, want execution 2, paused, no pause pending", rec)
	}
	f.claimNone()
	f.resume("run-1")
	f.wantStatus("run-1", storage.StatusQueued)
	if b := f.claimOne("worker-b"); string(b.Input) != "next" {
		f.t.Fatalf("claimed input %q, want next", b.Input)
	}
}

func testContinueMany(f *fixture) {
	l := f.start("run-1", "0").Lease
	for i := 1; i <= 20; i++ {
		f.checkpoint(l, "s@v1", "x")
		f.continueAsNew(l, string(rune('a'+i)))
		c := f.claimOne("worker-a")
		l = c.Lease
		if r := f.replay("run-1"); r.Execution != i+1 || len(r.Checkpoints) != 0 {
			f.t.Fatalf("replay after %d continues = %+v, want execution %d with nothing", i, r, i+1)
		}
	}
	if n := len(f.executions("run-1")); n != 21 {
		f.t.Fatalf("%d executions, want 21", n)
	}
}

func testPauseBusy(f *fixture) {
	a := f.start("run-1", "")
	f.pause("run-1")
	req := stepReq(a.Lease, "s1@v1", "1")
	req.Busy = true
	res, err := f.store.Checkpoint(f.ctx, req)
	if err != nil || res.Paused || !res.PauseRequested {
		f.t.Fatalf("busy Checkpoint with a pause requested = %+v, %v; want PauseRequested, not Paused", res, err)
	}
	rec := f.wantStatus("run-1", storage.StatusRunning)
	if !rec.PauseRequested || !rec.LeaseUntil.After(f.now()) {
		f.t.Fatalf("record %+v, want the pause still requested and the lease held", rec)
	}
	res = f.checkpoint(a.Lease, "s2@v1", "2")
	if !res.Paused || res.PauseRequested {
		f.t.Fatalf("Checkpoint = %+v, want the pause taking effect", res)
	}
	f.wantStatus("run-1", storage.StatusPaused)
	f.wantCheckpoints("run-1", "s1@v1=1", "s2@v1=2")
}

func testProgress(f *fixture) {
	a := f.start("run-1", "")
	if p := f.get("run-1").Progress; p != nil {
		f.t.Fatalf("progress of a new run = %q, want none", p)
	}
	want := func(what, p string) {
		f.t.Helper()
		f.wantBytes("progress after "+what, f.get("run-1").Progress, p)
	}
	req := stepReq(a.Lease, "s1@v1", "1")
	req.Progress = []byte(`{"done":1}`)
	if _, err := f.store.Checkpoint(f.ctx, req); err != nil {
		f.t.Fatalf("Checkpoint: %v", err)
	}
	want("a checkpoint", `{"done":1}`)
	f.checkpoint(a.Lease, "s2@v1", "2")
	want("a checkpoint without progress", `{"done":1}`)
	req = stepReq(a.Lease, "s1@v1", "again")
	req.Progress = []byte(`{"done":"existing"}`)
	if res, err := f.store.Checkpoint(f.ctx, req); err != nil || res.Existing == nil {
		f.t.Fatalf("Checkpoint of a written key = %+v, %v; want Existing", res, err)
	}
	want("a checkpoint that existed", `{"done":"existing"}`)
	if _, err := f.store.Heartbeat(f.ctx, storage.HeartbeatRequest{Lease: a.Lease, LeaseFor: lease, Progress: []byte(`{"done":2}`)}); err != nil {
		f.t.Fatalf("Heartbeat: %v", err)
	}
	want("a heartbeat", `{"done":2}`)
	f.suspend(storage.SuspendRequest{Lease: a.Lease, ReadyAt: f.after(0), Progress: []byte(`{"done":3}`)})
	want("a suspend", `{"done":3}`)
	b := f.claimOne("worker-b")
	want("a claim", `{"done":3}`)
	if err := f.store.Complete(f.ctx, storage.CompleteRequest{Lease: b.Lease, Status: storage.StatusComplete, Output: []byte("o"), Progress: []byte(`{"done":4}`)}); err != nil {
		f.t.Fatalf("Complete: %v", err)
	}
	want("a complete", `{"done":4}`)
	if p := f.listAll(storage.ListRunsQuery{})[0].Progress; string(p) != `{"done":4}` {
		f.t.Fatalf("ListRuns progress %q, want the published value", p)
	}
}

func testProgressFenced(f *fixture) {
	a := f.start("run-1", "")
	req := stepReq(a.Lease, "s@v1", "1")
	req.Progress = []byte("first")
	if _, err := f.store.Checkpoint(f.ctx, req); err != nil {
		f.t.Fatalf("Checkpoint: %v", err)
	}
	f.clock.Advance(lease + time.Second)
	f.claimOne("worker-b")
	before := f.snapshot()
	req = stepReq(a.Lease, "s2@v1", "2")
	req.Progress = []byte("stale")
	_, err := f.store.Checkpoint(f.ctx, req)
	f.wantErr(err, storage.ErrLeaseLost, "Checkpoint with progress under a lost lease")
	_, err = f.store.Heartbeat(f.ctx, storage.HeartbeatRequest{Lease: a.Lease, LeaseFor: lease, Progress: []byte("stale")})
	f.wantErr(err, storage.ErrLeaseLost, "Heartbeat with progress under a lost lease")
	_, err = f.store.Suspend(f.ctx, storage.SuspendRequest{Lease: a.Lease, LeaseFor: lease, ReadyAt: f.after(0), Progress: []byte("stale")})
	f.wantErr(err, storage.ErrLeaseLost, "Suspend with progress under a lost lease")
	err = f.store.Complete(f.ctx, storage.CompleteRequest{Lease: a.Lease, Status: storage.StatusComplete, Progress: []byte("stale")})
	f.wantErr(err, storage.ErrLeaseLost, "Complete with progress under a lost lease")
	f.wantUnchanged(before, "writes with progress under a lost lease")
	f.wantBytes("progress", f.get("run-1").Progress, "first")
}

func testProgressRestart(f *fixture) {
	a := f.start("run-1", "")
	if _, err := f.store.Heartbeat(f.ctx, storage.HeartbeatRequest{Lease: a.Lease, LeaseFor: lease, Progress: []byte("p1")}); err != nil {
		f.t.Fatalf("Heartbeat: %v", err)
	}
	f.continueAsNew(a.Lease, "next")
	f.wantBytes("progress after ContinueAsNew", f.get("run-1").Progress, "p1")
	b := f.claimOne("worker-a")
	if err := f.store.ContinueAsNew(f.ctx, storage.ContinueRequest{Lease: b.Lease, Input: []byte("third"), Progress: []byte("p2")}); err != nil {
		f.t.Fatalf("ContinueAsNew: %v", err)
	}
	f.wantBytes("progress after ContinueAsNew with progress", f.get("run-1").Progress, "p2")
	f.restart("run-1", "")
	if p := f.get("run-1").Progress; p != nil {
		f.t.Fatalf("progress after Restart = %q, want none", p)
	}
}

func testDeadline(f *fixture) {
	deadline := Start.Add(time.Hour)
	rec := f.createRun(storage.NewRun{ID: "run-1", Workflow: wf, Input: []byte("in"), Deadline: &deadline})
	f.wantTimePtr("Deadline of the created record", rec.Deadline, deadline)
	f.wantTimePtr("Deadline", f.get("run-1").Deadline, deadline)
	a := f.claimOne("worker-a")
	f.wantTimePtr("claimed Deadline", a.Deadline, deadline)
	f.continueAsNew(a.Lease, "next")
	f.wantTimePtr("Deadline after ContinueAsNew", f.get("run-1").Deadline, deadline)
	f.restart("run-1", "")
	f.wantTimePtr("Deadline after Restart", f.get("run-1").Deadline, deadline)
	f.wantTimePtr("claimed Deadline after Restart", f.claimOne("worker-b").Deadline, deadline)

	f.create("run-2", wf, "")
	if d := f.claimOne("worker-a").Deadline; d != nil {
		f.t.Fatalf("claimed deadline %v of a run without one, want nil", d)
	}
	if d := f.get("run-2").Deadline; d != nil {
		f.t.Fatalf("deadline %v of a run without one, want nil", d)
	}
	_, err := f.store.CreateRuns(f.ctx, []storage.NewRun{{ID: "run-3", Workflow: wf, Deadline: &time.Time{}}})
	f.wantErr(err, storage.ErrInvalidArgument, "CreateRuns with a zero deadline")
}

// testContinueChildren continues a run that has a waiting child of each
// parent policy, and a waiting grandchild under the one that terminates
// with its parent: with ChildError the children meet their policy in the
// same change, as when the run completes; a refused ContinueAsNew and one
// without ChildError touch no child.
func testContinueChildren(f *fixture) {
	for _, withErr := range []bool{true, false} {
		p := "plain-"
		if withErr {
			p = "child-error-"
		}
		root := f.startAs(storage.NewRun{ID: p + "root"})
		waiting := func(id, parent string, policy storage.ParentPolicy) {
			f.t.Helper()
			c := f.startAs(storage.NewRun{ID: p + id, ParentID: p + parent, ParentPolicy: policy})
			f.park(c.Lease, "ev@v1", p+id+"-topic", storage.KindEvent)
		}
		waiting("term", "root", storage.ParentTerminate)
		waiting("term-kid", "term", storage.ParentTerminate)
		waiting("cancel", "root", storage.ParentCancel)
		waiting("free", "root", storage.ParentAbandon)
		children := func() map[string]storage.RunRecord {
			m := map[string]storage.RunRecord{}
			for _, id := range []string{"term", "term-kid", "cancel", "free"} {
				m[id] = normRecord(f.get(p + id))
			}
			return m
		}
		childErr := storage.ErrorInfo{Message: "parent continued as new", Code: storage.CodeTerminated}
		const why = "its parent continued as new"

		// Under a lease taken over: refused, nothing written.
		f.clock.Advance(lease + time.Millisecond)
		b := f.claimOne("worker-b", "wf-"+p+"root")
		if b.Lease.RunID != p+"root" {
			f.t.Fatalf("claimed %s, want %sroot", b.Lease.RunID, p)
		}
		snap := f.snapshot()
		err := f.store.ContinueAsNew(f.ctx, storage.ContinueRequest{Lease: root.Lease, Input: []byte("stale"),
			ChildError: &childErr, ChildCancel: why})
		f.wantErr(err, storage.ErrLeaseLost, "ContinueAsNew with a child error under a lease taken over")
		f.wantUnchanged(snap, "a refused ContinueAsNew with a child error")

		f.clock.Advance(time.Second)
		before := children()
		req := storage.ContinueRequest{Lease: b.Lease, Input: []byte("next")}
		if withErr {
			req.ChildError, req.ChildCancel = &childErr, why
		}
		if err := f.store.ContinueAsNew(f.ctx, req); err != nil {
			f.t.Fatalf("ContinueAsNew (child error %v): %v", withErr, err)
		}

		// The run itself begins its next execution as ever.
		rec := f.wantStatus(p+"root", storage.StatusQueued)
		if rec.Execution != 2 || string(rec.Input) != "next" {
			f.t.Fatalf("%sroot after ContinueAsNew: execution %d input %q, want 2 and next", p, rec.Execution, rec.Input)
		}
		f.wantTimePtr("ReadyAt of the continued run", rec.ReadyAt, f.now())
		if c := f.claimOne("worker-c", "wf-"+p+"root"); c.Lease.RunID != p+"root" || string(c.Input) != "next" {
			f.t.Fatalf("claim after ContinueAsNew = %s input %q, want %sroot with next", c.Lease.RunID, c.Input, p)
		}

		after := children()
		if !withErr {
			if !reflect.DeepEqual(before, after) {
				f.t.Fatalf("ContinueAsNew without a child error changed the children:\nbefore %+v\nafter  %+v", before, after)
			}
			continue
		}
		for _, id := range []string{"term", "term-kid"} {
			rec := f.wantStatus(p+id, storage.StatusTerminated)
			if rec.Error == nil || *rec.Error != childErr {
				f.t.Fatalf("%s%s error %+v, want %+v", p, id, rec.Error, childErr)
			}
			f.wantTimePtr("EndedAt of "+p+id, rec.EndedAt, f.now())
		}
		rec = f.wantCancel(p+"cancel", true, why)
		if rec.Status != storage.StatusQueued || rec.Wait == nil {
			f.t.Fatalf("the waiting child with the cancel policy is %s (wait %+v), want queued with its wait", rec.Status, rec.Wait)
		}
		f.wantTimePtr("ReadyAt of the child with the cancel policy", rec.ReadyAt, f.now())
		if !reflect.DeepEqual(before["free"], after["free"]) {
			f.t.Fatalf("the child that abandons its parent changed:\nbefore %+v\nafter  %+v", before["free"], after["free"])
		}
		if c := f.claimOne("worker-d", "wf-"+p+"cancel", "wf-"+p+"term", "wf-"+p+"term-kid", "wf-"+p+"free"); c.Lease.RunID != p+"cancel" || !c.CancelRequested {
			f.t.Fatalf("claim after ContinueAsNew = %s (cancel requested %v), want %scancel with the request", c.Lease.RunID, c.CancelRequested, p)
		}
	}
}
