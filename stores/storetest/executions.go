package storetest

import (
	"time"

	"github.com/stemflow/stem/storage"
)

var executionCases = []testCase{
	{"execution/new run is execution 1 started now, ended by Complete", testExecutionNew},
	{"execution/errored and terminated runs end their execution with their error", testExecutionEndedWithError},
	{"execution/restart keeps the old execution readable, replay sees only the new", testExecutionRestart},
	{"execution/write-once is per execution", testExecutionWriteOnce},
	{"execution/an execution the run never had is ErrInvalidArgument", testExecutionUnknown},
	{"restart from step/copies the checkpoints before the key, in order", testForkCopies},
	{"restart from step/unknown key is ErrInvalidArgument and changes nothing", testForkUnknownKey},
	{"restart from step/from the first key keeps nothing", testForkFirstKey},
	{"restart from step/errored run from its failed step", testForkErrored},
}

func testExecutionNew(f *fixture) {
	rec := f.create("run-1", wf, "in")
	check := func(rec storage.RunRecord) {
		f.t.Helper()
		if rec.Execution != 1 || rec.EndedAt != nil || rec.Active != nil {
			f.t.Fatalf("new record = %+v, want execution 1, not ended, no active step", rec)
		}
		f.wantTime("StartedAt", rec.StartedAt, Start)
	}
	check(rec)
	check(f.get("run-1"))
	f.wantExecutions("run-1", storage.ExecutionRecord{Number: 1, StartedAt: Start, Status: storage.StatusQueued})
	if r := f.replay("run-1"); r.Execution != 1 || len(r.Checkpoints) != 0 || len(r.Pending) != 0 {
		f.t.Fatalf("LoadReplay of a new run = %+v, want execution 1 and nothing else", r)
	}
	if h := f.history("run-1", 0); h.Execution != 1 || len(h.Steps) != 0 || len(h.Pending) != 0 {
		f.t.Fatalf("ListSteps of a new run = %+v, want execution 1 and nothing else", h)
	}

	f.clock.Advance(time.Second)
	a := f.claimOne("worker-a")
	f.wantExecutions("run-1", storage.ExecutionRecord{Number: 1, StartedAt: Start, Status: storage.StatusRunning})
	att := storage.Attempt{Key: "s@v1", Number: 1, Started: f.now(), Ended: f.now()}
	if _, err := f.store.Checkpoint(f.ctx, storage.CheckpointRequest{
		Lease: a.Lease, LeaseFor: lease,
		Checkpoint: storage.Checkpoint{Key: "s@v1", Kind: storage.KindStep, Output: []byte("1")},
		Attempts:   []storage.Attempt{att},
	}); err != nil {
		f.t.Fatalf("Checkpoint: %v", err)
	}
	cps := f.wantCheckpoints("run-1", "s@v1=1")
	if cps[0].Execution != 1 || cps[0].ForkedFrom != 0 {
		f.t.Fatalf("checkpoint %+v, want execution 1, not forked", cps[0])
	}
	h := f.history("run-1", 0)
	if h.Execution != 1 || len(h.Steps) != 1 || h.Steps[0].Execution != 1 {
		f.t.Fatalf("ListSteps = %+v, want execution 1 with its step stamped 1", h)
	}
	att.Execution = 1
	f.wantAttempts("attempts of s@v1", h.Steps[0].Attempts, []storage.Attempt{att})
	if one := f.history("run-1", 1); len(one.Steps) != 1 || one.Execution != 1 {
		f.t.Fatalf("ListSteps of execution 1 = %+v, want the current one", one)
	}

	f.clock.Advance(time.Second)
	f.complete(a.Lease, "out")
	rec = f.wantStatus("run-1", storage.StatusComplete)
	if rec.Execution != 1 {
		f.t.Fatalf("Execution = %d after Complete, want 1", rec.Execution)
	}
	f.wantTime("StartedAt", rec.StartedAt, Start)
	f.wantTimePtr("EndedAt", rec.EndedAt, f.now())
	f.wantExecutions("run-1", storage.ExecutionRecord{Number: 1, StartedAt: Start, EndedAt: f.after(0), Status: storage.StatusComplete})
}

func testExecutionEndedWithError(f *fixture) {
	a := f.start("run-1", "")
	f.clock.Advance(time.Second)
	boom := storage.ErrorInfo{Message: "boom", Code: storage.CodePermanent}
	if err := f.store.Complete(f.ctx, storage.CompleteRequest{Lease: a.Lease, Status: storage.StatusErrored, Error: &boom}); err != nil {
		f.t.Fatalf("Complete: %v", err)
	}
	f.wantTimePtr("EndedAt of the errored run", f.get("run-1").EndedAt, f.now())
	f.wantExecutions("run-1", storage.ExecutionRecord{Number: 1, StartedAt: Start, EndedAt: f.after(0), Status: storage.StatusErrored, Error: &boom})

	f.create("run-2", wf, "")
	f.clock.Advance(time.Second)
	stop := storage.ErrorInfo{Message: "stop", Code: storage.CodeTerminated}
	f.terminate(storage.TerminateRequest{RunID: "run-2", Error: stop})
	f.wantTimePtr("EndedAt of the terminated run", f.get("run-2").EndedAt, f.now())
	f.wantExecutions("run-2", storage.ExecutionRecord{Number: 1, StartedAt: Start.Add(time.Second), EndedAt: f.after(0), Status: storage.StatusTerminated, Error: &stop})
}

func testExecutionRestart(f *fixture) {
	a := f.start("run-1", "in")
	at := func(sec int) time.Time { return Start.Add(time.Duration(sec) * time.Second) }
	failed := storage.Attempt{Key: "s1@v1", Number: 1, Started: at(0), Ended: at(0), Error: "flaky", RetryAt: timePtr(at(1))}
	ok := storage.Attempt{Key: "s1@v1", Number: 2, Started: at(1), Ended: at(1)}
	retrying := storage.Attempt{Key: "s2@v1", Number: 1, Started: at(1), Ended: at(1), Error: "down", RetryAt: timePtr(at(9))}
	if err := f.store.RecordAttempts(f.ctx, storage.RecordAttemptsRequest{Lease: a.Lease, LeaseFor: lease, Attempts: []storage.Attempt{failed}}); err != nil {
		f.t.Fatalf("RecordAttempts: %v", err)
	}
	if _, err := f.store.Checkpoint(f.ctx, storage.CheckpointRequest{
		Lease: a.Lease, LeaseFor: lease,
		Checkpoint: storage.Checkpoint{Key: "s1@v1", Kind: storage.KindStep, Output: []byte("1")},
		Attempts:   []storage.Attempt{ok},
	}); err != nil {
		f.t.Fatalf("Checkpoint: %v", err)
	}
	if err := f.store.RecordAttempts(f.ctx, storage.RecordAttemptsRequest{Lease: a.Lease, LeaseFor: lease, Attempts: []storage.Attempt{retrying}}); err != nil {
		f.t.Fatalf("RecordAttempts: %v", err)
	}
	f.clock.Advance(2 * time.Second)
	boom := storage.ErrorInfo{Message: "boom"}
	if err := f.store.Complete(f.ctx, storage.CompleteRequest{Lease: a.Lease, Status: storage.StatusErrored, Error: &boom}); err != nil {
		f.t.Fatalf("Complete: %v", err)
	}
	ended := f.now()

	// The execution ended when the run finished, not when it was restarted.
	f.clock.Advance(time.Minute)
	f.restart("run-1", "")
	rec := f.wantStatus("run-1", storage.StatusQueued)
	if rec.Execution != 2 || rec.EndedAt != nil || rec.Error != nil || len(rec.Output) != 0 {
		f.t.Fatalf("restarted record = %+v, want execution 2, not ended, no error", rec)
	}
	f.wantTime("StartedAt", rec.StartedAt, f.now())
	f.wantTime("CreatedAt", rec.CreatedAt, Start)
	f.wantExecutions("run-1",
		storage.ExecutionRecord{Number: 1, StartedAt: Start, EndedAt: &ended, Status: storage.StatusErrored, Error: &boom},
		storage.ExecutionRecord{Number: 2, StartedAt: f.now(), Status: storage.StatusQueued},
	)

	// The old execution keeps its steps, attempts and pending attempts.
	for _, a := range []*storage.Attempt{&failed, &ok, &retrying} {
		a.Execution = 1
	}
	old := f.history("run-1", 1)
	if old.Execution != 1 || len(old.Steps) != 1 || old.Steps[0].Key != "s1@v1" || string(old.Steps[0].Output) != "1" || old.Steps[0].Execution != 1 {
		f.t.Fatalf("ListSteps of execution 1 = %+v, want s1@v1=1 stamped execution 1", old)
	}
	f.wantAttempts("attempts of s1@v1 in execution 1", old.Steps[0].Attempts, []storage.Attempt{failed, ok})
	f.wantAttempts("pending of execution 1", old.Pending, []storage.Attempt{retrying})

	// The current one is empty, and the replay sees only it.
	for _, n := range []int{0, 2} {
		if h := f.history("run-1", n); h.Execution != 2 || len(h.Steps) != 0 || len(h.Pending) != 0 {
			f.t.Fatalf("ListSteps(execution %d) = %+v, want execution 2, empty", n, h)
		}
	}
	if r := f.replay("run-1"); r.Execution != 2 || len(r.Checkpoints) != 0 || len(r.Pending) != 0 {
		f.t.Fatalf("LoadReplay after Restart = %+v, want execution 2 and nothing else", r)
	}

	// The new execution's writes are stamped with it.
	b := f.claimOne("worker-b")
	f.checkpoint(b.Lease, "s2@v1", "2")
	cps := f.wantCheckpoints("run-1", "s2@v1=2")
	if cps[0].Execution != 2 || cps[0].ForkedFrom != 0 {
		f.t.Fatalf("checkpoint %+v, want execution 2, not forked", cps[0])
	}
	if h := f.history("run-1", 1); len(h.Steps) != 1 || h.Steps[0].Key != "s1@v1" {
		f.t.Fatalf("ListSteps of execution 1 after a new write = %+v, want only s1@v1", h)
	}

	// A restart of a queued run ends its execution at the restart, with the
	// status it had.
	f.suspend(storage.SuspendRequest{Lease: b.Lease, ReadyAt: f.after(0)})
	f.clock.Advance(time.Second)
	f.restart("run-1", "")
	started2 := Start.Add(time.Minute + 2*time.Second)
	f.wantExecutions("run-1",
		storage.ExecutionRecord{Number: 1, StartedAt: Start, EndedAt: &ended, Status: storage.StatusErrored, Error: &boom},
		storage.ExecutionRecord{Number: 2, StartedAt: started2, EndedAt: f.after(0), Status: storage.StatusQueued},
		storage.ExecutionRecord{Number: 3, StartedAt: f.now(), Status: storage.StatusQueued},
	)
	if h := f.history("run-1", 2); len(h.Steps) != 1 || h.Steps[0].Key != "s2@v1" || h.Steps[0].Execution != 2 {
		f.t.Fatalf("ListSteps of execution 2 = %+v, want s2@v1", h)
	}
}

func testExecutionWriteOnce(f *fixture) {
	a := f.start("run-1", "")
	f.checkpoint(a.Lease, "k@v1", "first")
	f.restart("run-1", "")
	f.letGo(a.Lease)
	b := f.claimOne("worker-b")
	if res := f.checkpoint(b.Lease, "k@v1", "second"); res.Existing != nil {
		f.t.Fatalf("Checkpoint of k@v1 in execution 2 = %+v, want written (write-once is per execution)", res)
	}
	cps := f.wantCheckpoints("run-1", "k@v1=second")
	if cps[0].Execution != 2 {
		f.t.Fatalf("checkpoint %+v, want execution 2", cps[0])
	}
	res := f.checkpoint(b.Lease, "k@v1", "third")
	if res.Existing == nil || string(res.Existing.Output) != "second" || res.Existing.Execution != 2 {
		f.t.Fatalf("second Checkpoint of k@v1 in execution 2 = %+v, want Existing = execution 2's", res)
	}
	if h := f.history("run-1", 1); len(h.Steps) != 1 || string(h.Steps[0].Output) != "first" || h.Steps[0].Execution != 1 {
		f.t.Fatalf("ListSteps of execution 1 = %+v, want k@v1=first", h)
	}
	// Suspend's write-once is per execution too.
	res2 := f.suspend(storage.SuspendRequest{Lease: b.Lease, Checkpoint: &storage.Checkpoint{Key: "nap@v1", Kind: storage.KindSleep, Output: []byte("t1")}, ReadyAt: f.after(0)})
	if res2.Delivered != nil {
		f.t.Fatalf("Suspend = %+v, want parked", res2)
	}
	f.restart("run-1", "")
	c := f.claimOne("worker-c")
	f.suspend(storage.SuspendRequest{Lease: c.Lease, Checkpoint: &storage.Checkpoint{Key: "nap@v1", Kind: storage.KindSleep, Output: []byte("t2")}, ReadyAt: f.after(0)})
	f.wantCheckpoints("run-1", "nap@v1=t2")
}

func testExecutionUnknown(f *fixture) {
	a := f.start("run-1", "")
	f.checkpoint(a.Lease, "s@v1", "1")
	_, err := f.store.ListSteps(f.ctx, storage.StepsQuery{RunID: "run-1", Execution: 2})
	f.wantErr(err, storage.ErrInvalidArgument, "ListSteps of execution 2 of a run in execution 1")
	f.restart("run-1", "")
	_, err = f.store.ListSteps(f.ctx, storage.StepsQuery{RunID: "run-1", Execution: 3})
	f.wantErr(err, storage.ErrInvalidArgument, "ListSteps of execution 3 of a run in execution 2")
	f.restart("run-1", "")
	before := f.snapshot()
	_, err = f.store.ListSteps(f.ctx, storage.StepsQuery{RunID: "run-1", Execution: 4})
	f.wantErr(err, storage.ErrInvalidArgument, "ListSteps of execution 4 of a run in execution 3")
	f.wantUnchanged(before, "ListSteps of an unknown execution")
	if h := f.history("run-1", 1); len(h.Steps) != 1 || h.Execution != 1 {
		f.t.Fatalf("ListSteps of execution 1 = %+v", h)
	}
}

// fork runs run-1 through checkpoints a, b (an event that timed out), c
// and d in execution 1 and returns them as LoadReplay shows them.
func fork(f *fixture) (storage.ClaimedRun, []storage.Checkpoint) {
	f.t.Helper()
	a := f.start("run-1", "in")
	f.checkpoint(a.Lease, "a@v1", "A")
	if _, err := f.store.Checkpoint(f.ctx, timeoutReq(a.Lease)); err != nil {
		f.t.Fatalf("Checkpoint(b): %v", err)
	}
	if _, err := f.store.Checkpoint(f.ctx, storage.CheckpointRequest{
		Lease: a.Lease, LeaseFor: lease,
		Checkpoint: storage.Checkpoint{Key: "c@v1", Kind: storage.KindChild, Output: []byte("C")},
		Attempts:   []storage.Attempt{{Key: "c@v1", Number: 1, Started: f.now(), Ended: f.now()}},
	}); err != nil {
		f.t.Fatalf("Checkpoint(c): %v", err)
	}
	f.checkpoint(a.Lease, "d@v1", "D")
	return a, f.wantCheckpoints("run-1", "a@v1=A", "approve@v1=", "c@v1=C", "d@v1=D")
}

func testForkCopies(f *fixture) {
	a, old := fork(f)
	f.clock.Advance(time.Second)
	f.restart("run-1", "c@v1")
	rec := f.wantStatus("run-1", storage.StatusQueued)
	if rec.Execution != 2 {
		f.t.Fatalf("Execution = %d, want 2", rec.Execution)
	}
	_, err := f.store.Checkpoint(f.ctx, stepReq(a.Lease, "e@v1", ""))
	f.wantErr(err, storage.ErrLeaseLost, "Checkpoint under the lease from before the fork")

	r := f.replay("run-1")
	if r.Execution != 2 || len(r.Pending) != 0 {
		f.t.Fatalf("LoadReplay = %+v, want execution 2 with no pending attempts", r)
	}
	cps := f.wantCheckpoints("run-1", "a@v1=A", "approve@v1=")
	for i, cp := range cps {
		o := old[i]
		if cp.Kind != o.Kind || !errorsEqual(cp.Error, o.Error) || cp.Execution != 2 || cp.ForkedFrom != 1 {
			f.t.Fatalf("copy %d = %+v (error %+v), want %+v (error %+v) in execution 2 forked from 1", i, cp, cp.Error, o, o.Error)
		}
	}
	if cps[0].Seq >= cps[1].Seq {
		f.t.Fatalf("copies' Seq %d, %d: not in the original order", cps[0].Seq, cps[1].Seq)
	}
	h := f.history("run-1", 0)
	if h.Execution != 2 || len(h.Steps) != 2 || h.Steps[0].Key != "a@v1" || h.Steps[1].Key != "approve@v1" || h.Steps[1].ForkedFrom != 1 {
		f.t.Fatalf("ListSteps = %+v, want the two copies", h)
	}
	// Execution 1 is as it was.
	h1 := f.history("run-1", 1)
	if len(h1.Steps) != 4 {
		f.t.Fatalf("ListSteps of execution 1 = %+v, want its four checkpoints", h1)
	}
	for i, s := range h1.Steps {
		if s.Key != old[i].Key || s.Seq != old[i].Seq || s.Execution != 1 || s.ForkedFrom != 0 {
			f.t.Fatalf("execution 1 step %d = %+v, want %+v", i, s.Checkpoint, old[i])
		}
	}
	f.wantExecutions("run-1",
		storage.ExecutionRecord{Number: 1, StartedAt: Start, EndedAt: f.after(0), Status: storage.StatusRunning},
		storage.ExecutionRecord{Number: 2, StartedAt: f.now(), Status: storage.StatusQueued, ForkedFrom: 1, FromKey: "c@v1"},
	)

	// The new execution runs on from c: the copies count as written.
	f.letGo(a.Lease)
	b := f.claimOne("worker-b")
	if res := f.checkpoint(b.Lease, "a@v1", "again"); res.Existing == nil || string(res.Existing.Output) != "A" || res.Existing.ForkedFrom != 1 {
		f.t.Fatalf("Checkpoint of a copied key = %+v, want the copy in Existing", res)
	}
	if res := f.checkpoint(b.Lease, "c@v1", "C2"); res.Existing != nil {
		f.t.Fatalf("Checkpoint of c@v1 after the fork = %+v, want written", res)
	}
	cps = f.wantCheckpoints("run-1", "a@v1=A", "approve@v1=", "c@v1=C2")
	if cps[2].Seq <= cps[1].Seq || cps[2].ForkedFrom != 0 || cps[2].Execution != 2 {
		f.t.Fatalf("new checkpoint %+v, want after the copies, in execution 2, not forked", cps[2])
	}
}

func errorsEqual(a, b *storage.ErrorInfo) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

func testForkUnknownKey(f *fixture) {
	a, _ := fork(f)
	if err := f.store.RecordAttempts(f.ctx, storage.RecordAttemptsRequest{Lease: a.Lease, LeaseFor: lease, Attempts: []storage.Attempt{{Key: "e@v1", Number: 1, Error: "x"}}}); err != nil {
		f.t.Fatalf("RecordAttempts: %v", err)
	}
	before := f.snapshot()
	for _, key := range []string{"nope@v1", "e@v1", "a@v2"} {
		err := f.store.Restart(f.ctx, storage.RestartRequest{RunID: "run-1", FromKey: key})
		f.wantErr(err, storage.ErrInvalidArgument, "Restart from "+key)
	}
	f.wantUnchanged(before, "Restart from an unknown key")
	f.checkpoint(a.Lease, "f@v1", "F") // the lease survived
}

func testForkFirstKey(f *fixture) {
	fork(f)
	f.restart("run-1", "a@v1")
	if r := f.replay("run-1"); r.Execution != 2 || len(r.Checkpoints) != 0 {
		f.t.Fatalf("LoadReplay after a fork from the first key = %+v, want execution 2, empty", r)
	}
	f.wantExecutions("run-1",
		storage.ExecutionRecord{Number: 1, StartedAt: Start, EndedAt: f.after(0), Status: storage.StatusRunning},
		storage.ExecutionRecord{Number: 2, StartedAt: f.now(), Status: storage.StatusQueued, ForkedFrom: 1, FromKey: "a@v1"},
	)
	// Execution 2 has no d@v1: a fork from it is refused.
	before := f.snapshot()
	err := f.store.Restart(f.ctx, storage.RestartRequest{RunID: "run-1", FromKey: "d@v1"})
	f.wantErr(err, storage.ErrInvalidArgument, "Restart from a key of an earlier execution only")
	f.wantUnchanged(before, "Restart from a key of an earlier execution only")
}

// testForkErrored is the common use: a run failed at a step; the operator
// fixes the cause and restarts from that step, keeping what came before.
func testForkErrored(f *fixture) {
	a := f.start("run-1", "in")
	f.checkpoint(a.Lease, "reserve@v1", "R")
	declined := storage.ErrorInfo{Message: "card declined", Code: storage.CodePermanent}
	if _, err := f.store.Checkpoint(f.ctx, storage.CheckpointRequest{
		Lease: a.Lease, LeaseFor: lease,
		Checkpoint: storage.Checkpoint{Key: "charge@v1", Kind: storage.KindStep, Error: &declined},
		Attempts:   []storage.Attempt{{Key: "charge@v1", Number: 1, Started: f.now(), Ended: f.now(), Error: "card declined"}},
	}); err != nil {
		f.t.Fatalf("Checkpoint: %v", err)
	}
	f.clock.Advance(time.Second)
	if err := f.store.Complete(f.ctx, storage.CompleteRequest{Lease: a.Lease, Status: storage.StatusErrored, Error: &declined}); err != nil {
		f.t.Fatalf("Complete: %v", err)
	}
	ended := f.now()
	f.clock.Advance(time.Hour)
	f.restart("run-1", "charge@v1")
	rec := f.wantStatus("run-1", storage.StatusQueued)
	if rec.Error != nil || rec.EndedAt != nil || rec.Execution != 2 {
		f.t.Fatalf("record after the fork = %+v, want execution 2 without error, not ended", rec)
	}
	f.wantBytes("Input", rec.Input, "in")
	f.wantExecutions("run-1",
		storage.ExecutionRecord{Number: 1, StartedAt: Start, EndedAt: &ended, Status: storage.StatusErrored, Error: &declined},
		storage.ExecutionRecord{Number: 2, StartedAt: f.now(), Status: storage.StatusQueued, ForkedFrom: 1, FromKey: "charge@v1"},
	)
	b := f.claimOne("worker-b")
	f.wantBytes("claimed Input", b.Input, "in")
	f.wantCheckpoints("run-1", "reserve@v1=R")
	f.checkpoint(b.Lease, "charge@v1", "paid")
	f.complete(b.Lease, "done")
	f.wantCheckpoints("run-1", "reserve@v1=R", "charge@v1=paid")
	if h := f.history("run-1", 1); len(h.Steps) != 2 || !errorsEqual(h.Steps[1].Error, &declined) {
		f.t.Fatalf("ListSteps of execution 1 = %+v, want the failed charge kept", h)
	}
	f.wantExecutions("run-1",
		storage.ExecutionRecord{Number: 1, StartedAt: Start, EndedAt: &ended, Status: storage.StatusErrored, Error: &declined},
		storage.ExecutionRecord{Number: 2, StartedAt: f.now(), EndedAt: f.after(0), Status: storage.StatusComplete, ForkedFrom: 1, FromKey: "charge@v1"},
	)
}
