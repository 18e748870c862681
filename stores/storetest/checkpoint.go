package storetest

import (
	"fmt"
	"slices"
	"time"

	"github.com/stemflow/stem/storage"
)

var checkpointCases = []testCase{
	{"checkpoint/written once, a second write reports the first", testWriteOnce},
	{"checkpoint/empty output is a checkpoint", testEmptyOutput},
	{"checkpoint/execution order, not key order", testExecutionOrder},
	{"checkpoint/attempts recorded in order with the step", testAttempts},
	{"checkpoint/step error round-trips", testCheckpointError},
	{"checkpoint/an error's detail round-trips byte for byte, in checkpoints, the run, its executions and a fork", testErrorDetail},
	{"attempts/pending attempts survive a hand-over, then belong to their step", testPendingAttempts},
	{"attempts/pending attempts of an earlier execution are not pending after Restart", testPendingAfterRestart},
	{"sleep/wake time stored once, run claimable at the wake time", testSleep},
	{"sleep/a wake time already come parks the run queued, claimable at once", testSleepPast},
	{"bytes/caller buffers are copied in and out", testBuffersCopied},
}

func testWriteOnce(f *fixture) {
	a := f.start("run-1", "")
	first := storage.CheckpointRequest{
		Lease: a.Lease, LeaseFor: lease,
		Checkpoint: storage.Checkpoint{Key: "charge@v1", Kind: storage.KindStep, Output: []byte("first")},
		Attempts:   []storage.Attempt{{Key: "charge@v1", Number: 1, Started: Start, Ended: Start}},
	}
	res, err := f.store.Checkpoint(f.ctx, first)
	if err != nil || res.Existing != nil || res.Paused {
		f.t.Fatalf("first Checkpoint = %+v, %v; want written", res, err)
	}
	stored := f.wantCheckpoints("run-1", "charge@v1=first")[0]

	f.clock.Advance(time.Second)
	second := storage.CheckpointRequest{
		Lease: a.Lease, LeaseFor: 2 * lease,
		Checkpoint: storage.Checkpoint{Key: "charge@v1", Kind: storage.KindStep, Output: []byte("second"), Error: &storage.ErrorInfo{Message: "other"}},
		Attempts:   []storage.Attempt{{Key: "charge@v1", Number: 2, Started: f.now(), Ended: f.now(), Error: "again"}},
	}
	res, err = f.store.Checkpoint(f.ctx, second)
	if err != nil {
		f.t.Fatalf("second Checkpoint: %v", err)
	}
	ex := res.Existing
	if ex == nil || ex.Key != "charge@v1" || ex.Kind != storage.KindStep || string(ex.Output) != "first" || ex.Error != nil || ex.Seq != stored.Seq {
		f.t.Fatalf("second Checkpoint Existing = %+v, want the first (seq %d, output first)", ex, stored.Seq)
	}
	f.wantTime("Existing CreatedAt", ex.CreatedAt, Start)
	f.wantCheckpoints("run-1", "charge@v1=first")
	steps := f.steps("run-1")
	if len(steps) != 1 || len(steps[0].Attempts) != 1 || steps[0].Attempts[0].Number != 1 {
		f.t.Fatalf("steps = %+v, want one step with only the first write's attempt", steps)
	}
	// Only the lease extension of the second write lands.
	f.wantLeaseUntil("run-1", f.now().Add(2*lease))
}

func testEmptyOutput(f *fixture) {
	a := f.start("run-1", "")
	for _, cp := range []storage.Checkpoint{
		{Key: "void@v1", Kind: storage.KindStep, Output: nil},
		{Key: "empty@v1", Kind: storage.KindStep, Output: []byte{}},
	} {
		res, err := f.store.Checkpoint(f.ctx, storage.CheckpointRequest{Lease: a.Lease, LeaseFor: lease, Checkpoint: cp})
		if err != nil || res.Existing != nil {
			f.t.Fatalf("Checkpoint(%s) = %+v, %v; want written", cp.Key, res, err)
		}
	}
	cps := f.wantCheckpoints("run-1", "void@v1=", "empty@v1=")
	for _, cp := range cps {
		if cp.Kind != storage.KindStep || cp.Error != nil {
			f.t.Fatalf("checkpoint %+v, want a successful step", cp)
		}
	}
	res := f.checkpoint(a.Lease, "void@v1", "not empty")
	if res.Existing == nil || res.Existing.Key != "void@v1" || len(res.Existing.Output) != 0 {
		f.t.Fatalf("rewrite of an empty checkpoint = %+v, want the stored empty one in Existing", res)
	}
	f.wantCheckpoints("run-1", "void@v1=", "empty@v1=")
	if steps := f.steps("run-1"); len(steps) != 2 || steps[0].Key != "void@v1" || steps[1].Key != "empty@v1" {
		f.t.Fatalf("steps = %+v, want void@v1 and empty@v1", steps)
	}
}

func testExecutionOrder(f *fixture) {
	a := f.start("run-1", "")
	var want []string
	for i := range 12 {
		key := fmt.Sprintf("pack@v1#%d", i)
		f.checkpoint(a.Lease, key, fmt.Sprint(i))
		want = append(want, fmt.Sprintf("%s=%d", key, i))
	}
	f.checkpoint(a.Lease, "after@v1", "x")
	want = append(want, "after@v1=x")
	cps := f.wantCheckpoints("run-1", want...)
	for i := 1; i < len(cps); i++ {
		if cps[i].Seq <= cps[i-1].Seq {
			f.t.Fatalf("Seq of %s = %d, not above %s's %d", cps[i].Key, cps[i].Seq, cps[i-1].Key, cps[i-1].Seq)
		}
	}
	steps := f.steps("run-1")
	var got []string
	for i, s := range steps {
		got = append(got, s.Key)
		if s.Seq != cps[i].Seq {
			f.t.Fatalf("step %s Seq %d, checkpoint Seq %d", s.Key, s.Seq, cps[i].Seq)
		}
	}
	wantKeys := make([]string, len(cps))
	for i, cp := range cps {
		wantKeys[i] = cp.Key
	}
	if !slices.Equal(got, wantKeys) {
		f.t.Fatalf("ListSteps keys = %v, want %v", got, wantKeys)
	}
}

func testAttempts(f *fixture) {
	a := f.start("run-1", "")
	at := func(sec int) time.Time { return Start.Add(time.Duration(sec) * time.Second) }
	want := []storage.Attempt{
		{Key: "charge@v1", Number: 1, Started: at(0), Ended: at(1), Error: "card reader offline"},
		{Key: "charge@v1", Number: 2, Started: at(2), Ended: at(3), Error: "timeout"},
		{Key: "charge@v1", Number: 3, Started: at(4), Ended: at(5)},
	}
	for _, att := range want[:2] {
		if err := f.store.RecordAttempts(f.ctx, storage.RecordAttemptsRequest{Lease: a.Lease, LeaseFor: lease, Attempts: []storage.Attempt{att}}); err != nil {
			f.t.Fatalf("RecordAttempts: %v", err)
		}
		f.clock.Advance(time.Second)
	}
	res, err := f.store.Checkpoint(f.ctx, storage.CheckpointRequest{
		Lease: a.Lease, LeaseFor: lease,
		Checkpoint: storage.Checkpoint{Key: "charge@v1", Kind: storage.KindStep, Output: []byte(`"ok"`)},
		Attempts:   want[2:],
	})
	if err != nil || res.Existing != nil {
		f.t.Fatalf("Checkpoint = %+v, %v", res, err)
	}
	other := storage.Attempt{Key: "ship@v1", Number: 1, Started: at(6), Ended: at(7)}
	if _, err := f.store.Checkpoint(f.ctx, storage.CheckpointRequest{
		Lease: a.Lease, LeaseFor: lease,
		Checkpoint: storage.Checkpoint{Key: "ship@v1", Kind: storage.KindStep},
		Attempts:   []storage.Attempt{other},
	}); err != nil {
		f.t.Fatalf("Checkpoint(ship): %v", err)
	}

	steps := f.steps("run-1")
	if len(steps) != 2 || steps[0].Key != "charge@v1" || steps[1].Key != "ship@v1" {
		f.t.Fatalf("steps = %+v, want charge@v1 then ship@v1", steps)
	}
	f.wantBytes("charge output", steps[0].Output, `"ok"`)
	for i, tc := range []struct {
		got, want []storage.Attempt
	}{{steps[0].Attempts, want}, {steps[1].Attempts, []storage.Attempt{other}}} {
		if len(tc.got) != len(tc.want) {
			f.t.Fatalf("step %d attempts = %+v, want %+v", i, tc.got, tc.want)
		}
		for j, g := range tc.got {
			w := tc.want[j]
			if g.Key != w.Key || g.Number != w.Number || g.Error != w.Error || !ms(g.Started).Equal(w.Started) || !ms(g.Ended).Equal(w.Ended) {
				f.t.Fatalf("step %d attempt %d = %+v, want %+v", i, j, g, w)
			}
		}
	}
}

func testCheckpointError(f *fixture) {
	a := f.start("run-1", "")
	info := storage.ErrorInfo{Message: "card declined", Code: storage.CodePermanent}
	if _, err := f.store.Checkpoint(f.ctx, storage.CheckpointRequest{
		Lease: a.Lease, LeaseFor: lease,
		Checkpoint: storage.Checkpoint{Key: "charge@v1", Kind: storage.KindStep, Error: &info},
	}); err != nil {
		f.t.Fatalf("Checkpoint: %v", err)
	}
	cps := f.checkpoints("run-1")
	if len(cps) != 1 || cps[0].Error == nil || *cps[0].Error != info || len(cps[0].Output) != 0 {
		f.t.Fatalf("checkpoints = %+v, want charge@v1 with error %+v", cps, info)
	}
	if steps := f.steps("run-1"); len(steps) != 1 || steps[0].Error == nil || *steps[0].Error != info {
		f.t.Fatalf("steps = %+v, want charge@v1 with error %+v", steps, info)
	}
}

// testErrorDetail: the runtime records the declared errors a failure
// matched in ErrorInfo.Detail; a store returns it as written wherever the
// error is read back, or errors.Is stops matching after a replay.
func testErrorDetail(f *fixture) {
	a := f.start("run-1", "in")
	declined := storage.ErrorInfo{Message: "card declined:\nlimit 100", Code: storage.CodePermanent,
		Detail: `{"errors":[{"name":"bank.limit","fields":{"Limit":100,"Note":"line one\nline two ✓"}}],"permanent":true}` + "\nraw newline, \x01 and \"quotes\""}
	if _, err := f.store.Checkpoint(f.ctx, storage.CheckpointRequest{
		Lease: a.Lease, LeaseFor: lease,
		Checkpoint: storage.Checkpoint{Key: "charge@v1", Kind: storage.KindStep, Error: &declined},
	}); err != nil {
		f.t.Fatalf("Checkpoint: %v", err)
	}
	f.checkpoint(a.Lease, "notify@v1", "sent")
	final := storage.ErrorInfo{Message: "not shipped", Detail: `{"errors":[{"name":"orders.not_shipped"}]}`}
	if err := f.store.Complete(f.ctx, storage.CompleteRequest{Lease: a.Lease, Status: storage.StatusErrored, Error: &final}); err != nil {
		f.t.Fatalf("Complete: %v", err)
	}
	wantInfo := func(what string, got *storage.ErrorInfo, want storage.ErrorInfo) {
		f.t.Helper()
		if got == nil || *got != want {
			f.t.Fatalf("%s = %+v, want %+v", what, got, want)
		}
	}
	cps := f.wantCheckpoints("run-1", "charge@v1=", "notify@v1=sent")
	wantInfo("checkpoint charge@v1's error", cps[0].Error, declined)
	wantInfo("the run's error", f.wantStatus("run-1", storage.StatusErrored).Error, final)
	es := f.executions("run-1")
	if len(es) != 1 {
		f.t.Fatalf("executions = %s, want one", fmtExecutions(es))
	}
	wantInfo("execution 1's error", es[0].Error, final)

	// A fork from a later step copies the failed step with its detail.
	f.restart("run-1", "notify@v1")
	cps = f.wantCheckpoints("run-1", "charge@v1=")
	wantInfo("the forked checkpoint charge@v1's error", cps[0].Error, declined)
	es = f.executions("run-1")
	if len(es) != 2 {
		f.t.Fatalf("executions after the fork = %s, want two", fmtExecutions(es))
	}
	wantInfo("execution 1's error after the fork", es[0].Error, final)
}

func testSleep(f *fixture) {
	a := f.start("run-1", "")
	wake := Start.Add(time.Hour)
	res := f.suspend(storage.SuspendRequest{
		Lease:        a.Lease,
		Checkpoint:   &storage.Checkpoint{Key: "nap@v1", Kind: storage.KindSleep, Output: []byte("wake-1")},
		ReadyAt:      &wake,
		SuspendState: []byte("state-1"),
	})
	if res.Delivered != nil || res.Paused {
		f.t.Fatalf("Suspend = %+v, want parked", res)
	}
	rec := f.wantStatus("run-1", storage.StatusWaiting)
	f.wantTimePtr("ReadyAt", rec.ReadyAt, wake)
	if rec.Wait != nil {
		f.t.Fatalf("sleeping run has wait %+v", rec.Wait)
	}
	cps := f.wantCheckpoints("run-1", "nap@v1=wake-1")
	if cps[0].Kind != storage.KindSleep {
		f.t.Fatalf("sleep checkpoint kind %q, want %q", cps[0].Kind, storage.KindSleep)
	}
	f.wantErr(errOf(f.store.Heartbeat(f.ctx, storage.HeartbeatRequest{Lease: a.Lease, LeaseFor: lease})), storage.ErrLeaseLost, "Heartbeat of a sleeping run")

	f.claimNone()
	f.clock.Advance(time.Hour - time.Millisecond)
	f.claimNone()
	f.clock.Advance(time.Millisecond)
	b := f.claimOne("worker-b")
	if b.Recoveries != 0 || b.Wait != nil {
		f.t.Fatalf("claim after the sleep = %+v, want no recovery and no wait", b)
	}
	f.wantBytes("SuspendState", b.SuspendState, "state-1")

	// Suspending again with another wake time for the same key keeps the
	// first: the wake time is read back, never recomputed.
	wake2 := f.now().Add(2 * time.Hour)
	res = f.suspend(storage.SuspendRequest{
		Lease:        b.Lease,
		Checkpoint:   &storage.Checkpoint{Key: "nap@v1", Kind: storage.KindSleep, Output: []byte("wake-2")},
		ReadyAt:      &wake2,
		SuspendState: []byte("state-2"),
	})
	if res.Delivered != nil || res.Paused {
		f.t.Fatalf("second Suspend = %+v, want parked", res)
	}
	f.wantCheckpoints("run-1", "nap@v1=wake-1")
	rec = f.wantStatus("run-1", storage.StatusWaiting)
	f.wantTimePtr("ReadyAt", rec.ReadyAt, wake2)
	f.clock.Advance(2 * time.Hour)
	c := f.claimOne("worker-c")
	f.wantBytes("SuspendState", c.SuspendState, "state-2")
}

func testBuffersCopied(f *fixture) {
	input := []byte("input")
	if _, err := f.store.CreateRuns(f.ctx, []storage.NewRun{{ID: "run-1", Workflow: wf, Input: input}}); err != nil {
		f.t.Fatalf("CreateRuns: %v", err)
	}
	copy(input, "XXXXX")
	rec := f.get("run-1")
	f.wantBytes("Input", rec.Input, "input")
	copy(rec.Input, "YYYYY")
	f.wantBytes("Input after changing a returned copy", f.get("run-1").Input, "input")

	a := f.claimOne("worker-a")
	copy(a.Input, "ZZZZZ")
	out := []byte("output")
	f.checkpoint(a.Lease, "one@v1", "")
	if _, err := f.store.Checkpoint(f.ctx, storage.CheckpointRequest{Lease: a.Lease, LeaseFor: lease, Checkpoint: storage.Checkpoint{Key: "two@v1", Kind: storage.KindStep, Output: out}}); err != nil {
		f.t.Fatalf("Checkpoint: %v", err)
	}
	copy(out, "XXXXXX")
	cps := f.wantCheckpoints("run-1", "one@v1=", "two@v1=output")
	cps[0].Output = append(cps[0].Output, "appended"...)
	copy(cps[1].Output, "YYYYYY")
	f.wantCheckpoints("run-1", "one@v1=", "two@v1=output")

	payload := []byte("payload")
	if _, err := f.store.SendEvent(f.ctx, storage.Event{RunID: "run-1", Topic: "t", Payload: payload}); err != nil {
		f.t.Fatalf("SendEvent: %v", err)
	}
	copy(payload, "XXXXXXX")
	state := []byte("state")
	res := f.suspend(storage.SuspendRequest{Lease: a.Lease, Wait: &storage.Wait{Key: "ev@v1", Topic: "t"}})
	if res.Delivered == nil {
		f.t.Fatal("buffered event not delivered")
	}
	f.wantBytes("delivered payload", res.Delivered.Output, "payload")
	copy(res.Delivered.Output, "YYYYYYY")
	f.suspend(storage.SuspendRequest{Lease: a.Lease, ReadyAt: f.after(0), SuspendState: state})
	copy(state, "XXXXX")
	b := f.claimOne("worker-b")
	f.wantBytes("SuspendState", b.SuspendState, "state")
	f.wantBytes("Input", b.Input, "input")
	f.wantCheckpoints("run-1", "one@v1=", "two@v1=output", "ev@v1=payload")
}

func testPendingAttempts(f *fixture) {
	a := f.start("run-1", "")
	at := func(sec int) time.Time { return Start.Add(time.Duration(sec) * time.Second) }
	k1 := storage.Attempt{Key: "k@v1", Number: 1, Started: at(0), Ended: at(1), Error: "timeout", RetryAt: timePtr(at(3))}
	j1 := storage.Attempt{Key: "j@v1", Number: 1, Started: at(0), Ended: at(1), Error: "refused", RetryAt: timePtr(at(2).Add(250 * time.Millisecond))}
	k2 := storage.Attempt{Key: "k@v1", Number: 2, Started: at(3), Ended: at(4), Error: "timeout again", RetryAt: timePtr(at(8))}
	done := storage.Attempt{Key: "done@v1", Number: 1, Started: at(0), Ended: at(0)}
	if _, err := f.store.Checkpoint(f.ctx, storage.CheckpointRequest{
		Lease: a.Lease, LeaseFor: lease,
		Checkpoint: storage.Checkpoint{Key: "done@v1", Kind: storage.KindStep},
		Attempts:   []storage.Attempt{done},
	}); err != nil {
		f.t.Fatalf("Checkpoint: %v", err)
	}
	for _, batch := range [][]storage.Attempt{{k1, j1}, {k2}} {
		if err := f.store.RecordAttempts(f.ctx, storage.RecordAttemptsRequest{Lease: a.Lease, LeaseFor: lease, Attempts: batch}); err != nil {
			f.t.Fatalf("RecordAttempts: %v", err)
		}
	}
	for _, att := range []*storage.Attempt{&k1, &j1, &k2, &done} {
		att.Execution = 1
	}
	// worker-a dies; worker-b takes over and sees the attempts so far.
	f.clock.Advance(lease + time.Millisecond)
	b := f.claimOne("worker-b")
	r := f.replay("run-1")
	if r.Execution != 1 || len(r.Checkpoints) != 1 || r.Checkpoints[0].Key != "done@v1" {
		f.t.Fatalf("LoadReplay = %+v, want execution 1 with done@v1", r)
	}
	f.wantAttempts("LoadReplay Pending", r.Pending, []storage.Attempt{k1, j1, k2})
	h := f.history("run-1", 0)
	f.wantAttempts("ListSteps Pending", h.Pending, []storage.Attempt{k1, j1, k2})
	if len(h.Steps) != 1 {
		f.t.Fatalf("ListSteps = %+v, want done@v1 only", h)
	}
	f.wantAttempts("attempts of done@v1", h.Steps[0].Attempts, []storage.Attempt{done})

	// k's third attempt succeeds: k's attempts are no longer pending but
	// listed with its step; j's still are.
	k3 := storage.Attempt{Key: "k@v1", Number: 3, Started: f.now(), Ended: f.now()}
	if _, err := f.store.Checkpoint(f.ctx, storage.CheckpointRequest{
		Lease: b.Lease, LeaseFor: lease,
		Checkpoint: storage.Checkpoint{Key: "k@v1", Kind: storage.KindStep, Output: []byte("K")},
		Attempts:   []storage.Attempt{k3},
	}); err != nil {
		f.t.Fatalf("Checkpoint: %v", err)
	}
	k3.Execution = 1
	r = f.replay("run-1")
	f.wantAttempts("LoadReplay Pending after k's checkpoint", r.Pending, []storage.Attempt{j1})
	h = f.history("run-1", 0)
	f.wantAttempts("ListSteps Pending after k's checkpoint", h.Pending, []storage.Attempt{j1})
	if len(h.Steps) != 2 || h.Steps[1].Key != "k@v1" {
		f.t.Fatalf("ListSteps = %+v, want done@v1 then k@v1", h)
	}
	f.wantAttempts("attempts of k@v1", h.Steps[1].Attempts, []storage.Attempt{k1, k2, k3})
}

func testPendingAfterRestart(f *fixture) {
	a := f.start("run-1", "")
	k1 := storage.Attempt{Key: "k@v1", Number: 1, Started: f.now(), Ended: f.now(), Error: "x", RetryAt: f.after(time.Second)}
	if err := f.store.RecordAttempts(f.ctx, storage.RecordAttemptsRequest{Lease: a.Lease, LeaseFor: lease, Attempts: []storage.Attempt{k1}}); err != nil {
		f.t.Fatalf("RecordAttempts: %v", err)
	}
	f.restart("run-1", "")
	if r := f.replay("run-1"); r.Execution != 2 || len(r.Pending) != 0 {
		f.t.Fatalf("LoadReplay after Restart = %+v, want execution 2 with no pending attempts", r)
	}
	if h := f.history("run-1", 0); len(h.Pending) != 0 {
		f.t.Fatalf("ListSteps after Restart = %+v, want no pending attempts", h)
	}
	k1.Execution = 1
	f.wantAttempts("pending of execution 1", f.history("run-1", 1).Pending, []storage.Attempt{k1})

	// The new execution counts k's attempts afresh, and its checkpoint of k
	// takes none of execution 1's.
	f.letGo(a.Lease)
	b := f.claimOne("worker-b")
	k1b := storage.Attempt{Key: "k@v1", Number: 1, Started: f.now(), Ended: f.now()}
	if _, err := f.store.Checkpoint(f.ctx, storage.CheckpointRequest{
		Lease: b.Lease, LeaseFor: lease,
		Checkpoint: storage.Checkpoint{Key: "k@v1", Kind: storage.KindStep},
		Attempts:   []storage.Attempt{k1b},
	}); err != nil {
		f.t.Fatalf("Checkpoint: %v", err)
	}
	k1b.Execution = 2
	h := f.history("run-1", 0)
	if len(h.Steps) != 1 || len(h.Pending) != 0 {
		f.t.Fatalf("ListSteps = %+v, want k@v1 and nothing pending", h)
	}
	f.wantAttempts("attempts of k@v1 in execution 2", h.Steps[0].Attempts, []storage.Attempt{k1b})
	f.wantAttempts("pending of execution 1", f.history("run-1", 1).Pending, []storage.Attempt{k1})
}

func testSleepPast(f *fixture) {
	a := f.start("run-1", "")
	for _, wake := range []time.Time{f.now(), f.now().Add(-time.Minute)} {
		res := f.suspend(storage.SuspendRequest{
			Lease:      a.Lease,
			Checkpoint: &storage.Checkpoint{Key: "nap@v1", Kind: storage.KindSleep, Output: []byte("wake")},
			ReadyAt:    &wake,
		})
		if res.Delivered != nil || res.Paused {
			f.t.Fatalf("Suspend = %+v, want parked", res)
		}
		rec := f.wantStatus("run-1", storage.StatusQueued)
		f.wantTimePtr("ReadyAt", rec.ReadyAt, wake)
		a = f.claimOne("worker-b")
	}
	f.wantCheckpoints("run-1", "nap@v1=wake")
}
