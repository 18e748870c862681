package storetest

import (
	"errors"

	"github.com/stemflow/stem/runtime"
)

var inputCases = []testCase{
	{"bad input/unknown run is ErrRunNotFound and changes nothing", testUnknownRun},
	{"bad input/send event to a finished run is ErrInvalidState and changes nothing", testSendToFinished},
	{"close/calls after Close return ErrClosed", testClose},
}

func testUnknownRun(f *fixture) {
	a := f.start("run-1", "in")
	f.checkpoint(a.Lease, "s@v1", "1")
	f.create("run-2", wf, "")
	before := f.snapshot()
	const id = "no-such-run"
	_, err := f.store.GetRun(f.ctx, id)
	f.wantErr(err, runtime.ErrRunNotFound, "GetRun")
	f.wantErr(f.store.Pause(f.ctx, id), runtime.ErrRunNotFound, "Pause")
	f.wantErr(f.store.Resume(f.ctx, id), runtime.ErrRunNotFound, "Resume")
	err = f.store.Terminate(f.ctx, runtime.TerminateRequest{RunID: id, Error: runtime.ErrorInfo{Message: "stop"},
		Notify: &runtime.Event{RunID: "run-2", Topic: "t", Payload: []byte("p")}})
	f.wantErr(err, runtime.ErrRunNotFound, "Terminate")
	f.wantErr(f.store.Restart(f.ctx, id), runtime.ErrRunNotFound, "Restart")
	_, err = f.store.SendEvent(f.ctx, runtime.Event{RunID: id, Topic: "t", Payload: []byte("p")})
	f.wantErr(err, runtime.ErrRunNotFound, "SendEvent")
	_, err = f.store.LoadCheckpoints(f.ctx, id)
	f.wantErr(err, runtime.ErrRunNotFound, "LoadCheckpoints")
	_, err = f.store.ListSteps(f.ctx, id)
	f.wantErr(err, runtime.ErrRunNotFound, "ListSteps")
	f.wantUnchanged(before, "calls naming an unknown run")
	// The rejected Terminate delivered nothing to run-2.
	b := f.claimOne("worker-b")
	if res := f.suspend(runtime.SuspendRequest{Lease: b.Lease, Wait: &runtime.Wait{Key: "ev@v1", Topic: "t"}}); res.Delivered != nil {
		f.t.Fatalf("a rejected Terminate buffered its Notify: %+v", res.Delivered)
	}
}

func testSendToFinished(f *fixture) {
	a := f.start("run-1", "")
	f.complete(a.Lease, "out")
	f.create("run-2", wf, "")
	if err := f.store.Terminate(f.ctx, runtime.TerminateRequest{RunID: "run-2", Error: runtime.ErrorInfo{Message: "stop"}}); err != nil {
		f.t.Fatalf("Terminate: %v", err)
	}
	before := f.snapshot()
	for _, id := range []string{"run-1", "run-2"} {
		_, err := f.store.SendEvent(f.ctx, runtime.Event{RunID: id, Topic: "t", Payload: []byte("p")})
		f.wantErr(err, runtime.ErrInvalidState, "SendEvent to finished "+id)
	}
	f.wantUnchanged(before, "SendEvent to a finished run")
	// Nothing was buffered either: after a restart the run waits.
	if err := f.store.Restart(f.ctx, "run-1"); err != nil {
		f.t.Fatalf("Restart: %v", err)
	}
	b := f.claimOne("worker-b")
	f.park(b.Lease, "ev@v1", "t", runtime.KindEvent)
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
			_, err := s.CreateRuns(ctx, []runtime.NewRun{{ID: "run-2", Workflow: wf}})
			return err
		},
		"GetRun":          func() error { _, err := s.GetRun(ctx, "run-1"); return err },
		"ListRuns":        func() error { _, err := s.ListRuns(ctx, runtime.ListRunsQuery{}); return err },
		"Claim":           func() error { _, err := s.Claim(ctx, claimReq("worker-b")); return err },
		"LoadCheckpoints": func() error { _, err := s.LoadCheckpoints(ctx, "run-1"); return err },
		"Checkpoint":      func() error { _, err := s.Checkpoint(ctx, stepReq(l, "s@v1", "")); return err },
		"RecordAttempts": func() error {
			return s.RecordAttempts(ctx, l, lease, []runtime.Attempt{{Key: "s@v1", Number: 1}})
		},
		"Heartbeat": func() error { return s.Heartbeat(ctx, l, lease) },
		"Suspend": func() error {
			_, err := s.Suspend(ctx, runtime.SuspendRequest{Lease: l, LeaseFor: lease, ReadyAt: f.after(0)})
			return err
		},
		"Complete": func() error {
			return s.Complete(ctx, runtime.CompleteRequest{Lease: l, Status: runtime.StatusComplete})
		},
		"Pause":  func() error { return s.Pause(ctx, "run-1") },
		"Resume": func() error { return s.Resume(ctx, "run-1") },
		"Terminate": func() error {
			return s.Terminate(ctx, runtime.TerminateRequest{RunID: "run-1", Error: runtime.ErrorInfo{Message: "x"}})
		},
		"Restart":   func() error { return s.Restart(ctx, "run-1") },
		"Emit":      func() error { _, err := s.Emit(ctx, "t", nil); return err },
		"SendEvent": func() error { _, err := s.SendEvent(ctx, runtime.Event{RunID: "run-1", Topic: "t"}); return err },
		"ListSteps": func() error { _, err := s.ListSteps(ctx, "run-1"); return err },
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, runtime.ErrClosed) {
			f.t.Errorf("%s after Close: %v, want ErrClosed", name, err)
		}
	}
}

func claimReq(owner string) runtime.ClaimRequest {
	return runtime.ClaimRequest{Owner: owner, Workflows: []string{wf}, Limit: 10, LeaseFor: lease}
}
