package storetest

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/stemflow/stem/storage"
)

var inputCases = []testCase{
	{"bad input/malformed requests are refused in the contract's words and change nothing", testMalformed},
	{"bad input/unknown run is ErrRunNotFound and changes nothing", testUnknownRun},
	{"bad input/send event to a finished run is ErrInvalidState and changes nothing", testSendToFinished},
	{"close/calls after Close return ErrClosed", testClose},
}

// testMalformed sends one malformed request to every method that takes one:
// each is ErrInvalidArgument, says what its request type's Validate says
// (so all stores word it alike), and writes nothing.
func testMalformed(f *fixture) {
	a := f.start("run-1", "in")
	f.checkpoint(a.Lease, "s@v1", "1")
	f.create("run-2", wf, "")
	before := f.snapshot()
	ctx, s, l := f.ctx, f.store, a.Lease
	noRun := storage.Lease{Owner: l.Owner, Token: l.Token}
	cp := func(key string, kind storage.CheckpointKind) storage.Checkpoint {
		return storage.Checkpoint{Key: key, Kind: kind, Output: []byte("x")}
	}
	type call struct {
		name string
		// rule is the Validate error the store must report.
		rule error
		do   func() error
	}
	newRuns := []storage.NewRun{{ID: "run-3", Workflow: wf}, {ID: "run-4"}}
	orphan := []storage.NewRun{{ID: "run-3", Workflow: wf}, {ID: "run-4", Workflow: wf, ParentID: "run-1", ParentPolicy: "orphan"}}
	calls := []call{
		{"CreateRuns with a run without a workflow", storage.ValidateNewRuns(newRuns), func() error {
			_, err := s.CreateRuns(ctx, newRuns)
			return err
		}},
		{"CreateRuns with an unknown parent policy", storage.ValidateNewRuns(orphan), func() error {
			_, err := s.CreateRuns(ctx, orphan)
			return err
		}},
		{"ListRuns with an unknown status", storage.ListRunsQuery{Status: "done"}.Validate(), func() error {
			_, err := s.ListRuns(ctx, storage.ListRunsQuery{Status: "done"})
			return err
		}},
		{"Claim without an owner", storage.ClaimRequest{Workflows: []string{wf}, Limit: 1, LeaseFor: lease}.Validate(), func() error {
			_, err := s.Claim(ctx, storage.ClaimRequest{Workflows: []string{wf}, Limit: 1, LeaseFor: lease})
			return err
		}},
		{"Claim without a lease length", storage.ClaimRequest{Owner: "w", Workflows: []string{wf}, Limit: 1}.Validate(), func() error {
			_, err := s.Claim(ctx, storage.ClaimRequest{Owner: "w", Workflows: []string{wf}, Limit: 1})
			return err
		}},
	}
	for _, r := range []storage.CheckpointRequest{
		{Lease: l, LeaseFor: lease, Checkpoint: cp("", storage.KindStep)},
		{Lease: l, LeaseFor: lease, Checkpoint: cp("t@v1", "stepp")},
		{Lease: l, Checkpoint: cp("t@v1", storage.KindStep)},
		{Lease: noRun, LeaseFor: lease, Checkpoint: cp("t@v1", storage.KindStep)},
	} {
		calls = append(calls, call{fmt.Sprintf("Checkpoint %+v", r), r.Validate(), func() error {
			_, err := s.Checkpoint(ctx, r)
			return err
		}})
	}
	ra := storage.RecordAttemptsRequest{Lease: l, Attempts: []storage.Attempt{{Key: "t@v1", Number: 1}}}
	hb := storage.HeartbeatRequest{Lease: noRun, LeaseFor: lease}
	calls = append(calls,
		call{"RecordAttempts without a lease length", ra.Validate(), func() error { return s.RecordAttempts(ctx, ra) }},
		call{"Heartbeat without a run", hb.Validate(), func() error { return errOf(s.Heartbeat(ctx, hb)) }},
	)
	empty := cp("", storage.KindSleep)
	for _, r := range []storage.SuspendRequest{
		{Lease: l, LeaseFor: lease, Checkpoint: &empty, ReadyAt: f.after(time.Hour)},
		{Lease: l, LeaseFor: lease, Wait: &storage.Wait{Key: "ev@v1"}},
		{Lease: l, LeaseFor: lease, Wait: &storage.Wait{Key: "ev@v1", Topic: "t", Kind: "evnt"}},
		// Refusals: without a wait, of another key than the wait's, with an
		// attempt of another key, with an attempt that does not say why.
		{Lease: l, LeaseFor: lease, ReadyAt: f.after(0), Refuse: refusal("s@v1", 1, "bad", Start)},
		{Lease: l, LeaseFor: lease, Wait: &storage.Wait{Key: "ev@v1", Topic: "t"}, Refuse: refusal("s@v1", 1, "bad", Start)},
		{Lease: l, LeaseFor: lease, Wait: &storage.Wait{Key: "s@v1", Topic: "t"}, Refuse: &storage.Refusal{Key: "s@v1", Attempt: storage.Attempt{Key: "ev@v1", Number: 1, Error: "bad"}}},
		{Lease: l, LeaseFor: lease, Wait: &storage.Wait{Key: "s@v1", Topic: "t"}, Refuse: &storage.Refusal{Key: "s@v1", Attempt: storage.Attempt{Key: "s@v1", Number: 1}}},
	} {
		calls = append(calls, call{fmt.Sprintf("Suspend %+v", r), r.Validate(), func() error {
			_, err := s.Suspend(ctx, r)
			return err
		}})
	}
	for _, r := range []storage.CompleteRequest{
		{Lease: l, Status: storage.StatusQueued},
		{Lease: l, Status: storage.StatusComplete, Notify: &storage.Event{RunID: "run-2"}},
	} {
		calls = append(calls, call{fmt.Sprintf("Complete %+v", r), r.Validate(), func() error { return s.Complete(ctx, r) }})
	}
	term := storage.TerminateRequest{RunID: "run-2", Error: storage.ErrorInfo{Message: "x"}, Notify: &storage.Event{Topic: "t"}}
	calls = append(calls,
		call{"Terminate with a notify without a run", term.Validate(), func() error { _, err := s.Terminate(ctx, term); return err }},
		call{"Emit without a topic", storage.EmitRequest{}.Validate(), func() error {
			_, err := s.Emit(ctx, storage.EmitRequest{Payload: []byte("p")})
			return err
		}},
	)
	for _, r := range []storage.RestartRequest{{}, {FromKey: "s@v1"}, {RunID: "run-1", FromKey: "s@v1\nx"}} {
		calls = append(calls, call{fmt.Sprintf("Restart %+v", r), r.Validate(), func() error { return s.Restart(ctx, r) }})
	}
	for _, q := range []storage.StepsQuery{{}, {Execution: 1}, {RunID: "run-1", Execution: -1}} {
		calls = append(calls, call{fmt.Sprintf("ListSteps %+v", q), q.Validate(), func() error {
			_, err := s.ListSteps(ctx, q)
			return err
		}})
	}
	for _, c := range []storage.Catalog{
		{Workflows: []storage.WorkflowType{{Name: "ok", Version: 1}, {Version: 1}}},
		{Workflows: []storage.WorkflowType{{Name: "bad", InputSchema: []byte(`{"type":`)}}},
		{Workflows: []storage.WorkflowType{{Name: "bad", OutputSchema: []byte(`not json`)}}},
		{Workflows: []storage.WorkflowType{{Name: "ok"}}, Events: []storage.EventType{{Topic: "ok"}, {}}},
		{Events: []storage.EventType{{Topic: "bad", PayloadSchema: []byte(`{`)}}},
	} {
		calls = append(calls, call{fmt.Sprintf("PutCatalog %+v", c), c.Validate(), func() error { return s.PutCatalog(ctx, c) }})
	}
	for _, ev := range []storage.Event{{RunID: "run-2", Payload: []byte("p")}, {Topic: "t", Payload: []byte("p")}} {
		calls = append(calls, call{fmt.Sprintf("SendEvent %+v", ev), ev.Validate(), func() error {
			_, err := s.SendEvent(ctx, ev)
			return err
		}})
	}
	for _, c := range calls {
		if c.rule == nil {
			f.t.Fatalf("%s: the request is valid by its own Validate; the case is wrong", c.name)
		}
		err := c.do()
		f.wantErr(err, storage.ErrInvalidArgument, c.name)
		if err != nil && !strings.Contains(err.Error(), c.rule.Error()) {
			f.t.Errorf("%s: error %q does not say what the contract says: %q", c.name, err, c.rule)
		}
	}
	f.wantUnchanged(before, "malformed requests")
	// The lease survived every rejected write.
	f.checkpoint(l, "after@v1", "2")
}

func testUnknownRun(f *fixture) {
	a := f.start("run-1", "in")
	f.checkpoint(a.Lease, "s@v1", "1")
	f.create("run-2", wf, "")
	before := f.snapshot()
	const id = "no-such-run"
	_, err := f.store.GetRun(f.ctx, id)
	f.wantErr(err, storage.ErrRunNotFound, "GetRun")
	f.wantErr(f.store.Pause(f.ctx, id), storage.ErrRunNotFound, "Pause")
	f.wantErr(f.store.Resume(f.ctx, id), storage.ErrRunNotFound, "Resume")
	_, err = f.store.Terminate(f.ctx, storage.TerminateRequest{RunID: id, Error: storage.ErrorInfo{Message: "stop"},
		Notify: &storage.Event{RunID: "run-2", Topic: "t", Payload: []byte("p")}})
	f.wantErr(err, storage.ErrRunNotFound, "Terminate")
	f.wantErr(f.store.Restart(f.ctx, storage.RestartRequest{RunID: id}), storage.ErrRunNotFound, "Restart")
	_, err = f.store.SendEvent(f.ctx, storage.Event{RunID: id, Topic: "t", Payload: []byte("p")})
	f.wantErr(err, storage.ErrRunNotFound, "SendEvent")
	_, err = f.store.LoadReplay(f.ctx, id)
	f.wantErr(err, storage.ErrRunNotFound, "LoadReplay")
	_, err = f.store.ListSteps(f.ctx, storage.StepsQuery{RunID: id})
	f.wantErr(err, storage.ErrRunNotFound, "ListSteps")
	_, err = f.store.ListExecutions(f.ctx, id)
	f.wantErr(err, storage.ErrRunNotFound, "ListExecutions")
	f.wantErr(f.store.Restart(f.ctx, storage.RestartRequest{RunID: id, FromKey: "s@v1"}), storage.ErrRunNotFound, "Restart from a step")
	_, err = f.store.Terminate(f.ctx, storage.TerminateRequest{RunID: id, Error: storage.ErrorInfo{Message: "stop"}, ChildError: &storage.ErrorInfo{Message: "parent gone"}})
	f.wantErr(err, storage.ErrRunNotFound, "Terminate with a child error")
	f.wantUnchanged(before, "calls naming an unknown run")
	// The rejected Terminate delivered nothing to run-2.
	b := f.claimOne("worker-b")
	if res := f.suspend(storage.SuspendRequest{Lease: b.Lease, Wait: &storage.Wait{Key: "ev@v1", Topic: "t"}}); res.Delivered != nil {
		f.t.Fatalf("a rejected Terminate buffered its Notify: %+v", res.Delivered)
	}
}

func testSendToFinished(f *fixture) {
	a := f.start("run-1", "")
	f.complete(a.Lease, "out")
	f.create("run-2", wf, "")
	if _, err := f.store.Terminate(f.ctx, storage.TerminateRequest{RunID: "run-2", Error: storage.ErrorInfo{Message: "stop"}}); err != nil {
		f.t.Fatalf("Terminate: %v", err)
	}
	before := f.snapshot()
	for _, id := range []string{"run-1", "run-2"} {
		_, err := f.store.SendEvent(f.ctx, storage.Event{RunID: id, Topic: "t", Payload: []byte("p")})
		f.wantErr(err, storage.ErrInvalidState, "SendEvent to finished "+id)
	}
	f.wantUnchanged(before, "SendEvent to a finished run")
	// Nothing was buffered either: after a restart the run waits.
	if err := f.store.Restart(f.ctx, storage.RestartRequest{RunID: "run-1"}); err != nil {
		f.t.Fatalf("Restart: %v", err)
	}
	b := f.claimOne("worker-b")
	f.park(b.Lease, "ev@v1", "t", storage.KindEvent)
	f.wantCheckpoints("run-1")
}

func testClose(f *fixture) {
	a := f.start("run-1", "")
	if err := f.store.Close(); err != nil {
		f.t.Fatalf("Close: %v", err)
	}
	ctx, l := f.ctx, a.Lease
	s := f.store
	calls := map[string]func() error{
		"CreateRuns": func() error {
			_, err := s.CreateRuns(ctx, []storage.NewRun{{ID: "run-2", Workflow: wf}})
			return err
		},
		"GetRun":     func() error { _, err := s.GetRun(ctx, "run-1"); return err },
		"ListRuns":   func() error { _, err := s.ListRuns(ctx, storage.ListRunsQuery{}); return err },
		"Claim":      func() error { _, err := s.Claim(ctx, claimReq("worker-b")); return err },
		"LoadReplay": func() error { _, err := s.LoadReplay(ctx, "run-1"); return err },
		"Checkpoint": func() error { _, err := s.Checkpoint(ctx, stepReq(l, "s@v1", "")); return err },
		"RecordAttempts": func() error {
			return s.RecordAttempts(ctx, storage.RecordAttemptsRequest{Lease: l, LeaseFor: lease, Attempts: []storage.Attempt{{Key: "s@v1", Number: 1}}})
		},
		"Heartbeat": func() error { return errOf(s.Heartbeat(ctx, storage.HeartbeatRequest{Lease: l, LeaseFor: lease})) },
		"Suspend": func() error {
			_, err := s.Suspend(ctx, storage.SuspendRequest{Lease: l, LeaseFor: lease, ReadyAt: f.after(0)})
			return err
		},
		"Complete": func() error {
			return s.Complete(ctx, storage.CompleteRequest{Lease: l, Status: storage.StatusComplete})
		},
		"Pause":  func() error { return s.Pause(ctx, "run-1") },
		"Resume": func() error { return s.Resume(ctx, "run-1") },
		"Terminate": func() error {
			_, err := s.Terminate(ctx, storage.TerminateRequest{RunID: "run-1", Error: storage.ErrorInfo{Message: "x"}})
			return err
		},
		"Restart":        func() error { return s.Restart(ctx, storage.RestartRequest{RunID: "run-1"}) },
		"Emit":           func() error { _, err := s.Emit(ctx, storage.EmitRequest{Topic: "t", Payload: nil}); return err },
		"SendEvent":      func() error { _, err := s.SendEvent(ctx, storage.Event{RunID: "run-1", Topic: "t"}); return err },
		"ListSteps":      func() error { _, err := s.ListSteps(ctx, storage.StepsQuery{RunID: "run-1"}); return err },
		"ListExecutions": func() error { _, err := s.ListExecutions(ctx, "run-1"); return err },
		"Restart from a step": func() error {
			return s.Restart(ctx, storage.RestartRequest{RunID: "run-1", FromKey: "s@v1"})
		},
		"Heartbeat with a step": func() error {
			return errOf(s.Heartbeat(ctx, storage.HeartbeatRequest{Lease: l, LeaseFor: lease, Step: &storage.ActiveStep{Key: "s@v1", Attempt: 1}}))
		},
		"PutCatalog": func() error {
			return s.PutCatalog(ctx, storage.Catalog{Workflows: []storage.WorkflowType{{Name: wf, Version: 1}}})
		},
		"GetCatalog": func() error { _, err := s.GetCatalog(ctx); return err },
		"QueueStats": func() error { _, err := s.QueueStats(ctx, []string{storage.DefaultQueue}); return err },
		"WriteSchedule": func() error {
			_, err := s.WriteSchedule(ctx, storage.ScheduleWrite{Schedule: f.schedule("every.five")})
			return err
		},
		"GetSchedule":    func() error { _, err := s.GetSchedule(ctx, "every.five"); return err },
		"ListSchedules":  func() error { _, err := s.ListSchedules(ctx, storage.ScheduleQuery{}); return err },
		"DeleteSchedule": func() error { return s.DeleteSchedule(ctx, "every.five") },
		"Purge": func() error {
			_, err := s.Purge(ctx, storage.PurgeRequest{FinishedBefore: f.now(), Limit: 10})
			return err
		},
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, storage.ErrClosed) {
			f.t.Errorf("%s after Close: %v, want ErrClosed", name, err)
		}
	}
}

func claimReq(owner string) storage.ClaimRequest {
	return storage.ClaimRequest{Owner: owner, Workflows: []string{wf}, Limit: 10, LeaseFor: lease}
}
