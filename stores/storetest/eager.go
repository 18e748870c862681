package storetest

import (
	"errors"
	"time"

	"github.com/stemflow/stem/storage"
)

// eagerCases are the runs created already leased (NewRun.Lease, an
// eager start) and the completions that ride with a run's last
// checkpoint (CheckpointRequest.Complete).
var eagerCases = []testCase{
	{"eager/a run created leased is running, held by its owner, and its writes hold", testEagerCreate},
	{"eager/an eager run whose lease expires is recovered by a claim", testEagerRecovered},
	{"eager/an existing ID is neither changed nor leased", testEagerExisting},
	{"eager/a batch mixes leased and queued runs", testEagerBatch},
	{"eager/an eager run holds its place in a limited queue and counts as a start", testEagerQueueLimits},
	{"eager/pause, cancel and terminate reach an eager run as a claimed one", testEagerControl},
	{"eager/a malformed lease is refused with nothing written", testEagerRefused},
	{"ride/a completion rides with the checkpoint in one write", testRideComplete},
	{"ride/an errored completion rides too, with its attempts", testRideErrored},
	{"ride/a requested pause keeps the completion back", testRidePaused},
	{"ride/an existing checkpoint keeps the completion back", testRideExisting},
	{"ride/a lost lease writes neither", testRideLeaseLost},
	{"ride/the completion tells the parent and ends the children", testRideFamily},
	{"ride/a malformed completion is refused with nothing written", testRideRefused},
}

// createLeased creates run id of workflow leased to owner for the suite's
// lease, and returns its lease.
func (f *fixture) createLeased(r storage.NewRun, owner string) storage.Lease {
	f.t.Helper()
	r.Lease = &storage.EagerLease{Owner: owner, For: lease}
	rec := f.createRun(r)
	if rec.Status != storage.StatusRunning || rec.Owner != owner || rec.Token <= 0 {
		f.t.Fatalf("created leased %s: status %s, owner %q, token %d; want running, held by %s with a token", r.ID, rec.Status, rec.Owner, rec.Token, owner)
	}
	return storage.Lease{RunID: r.ID, Owner: owner, Token: rec.Token}
}

func testEagerCreate(f *fixture) {
	res, err := f.store.CreateRuns(f.ctx, []storage.NewRun{{ID: "run-1", Workflow: wf, Input: []byte("in"),
		Lease: &storage.EagerLease{Owner: "worker-a", For: lease}}})
	if err != nil || len(res) != 1 || !res[0].Created {
		f.t.Fatalf("CreateRuns leased = %+v, %v; want one created run", res, err)
	}
	rec := res[0].Run
	if rec.Status != storage.StatusRunning || rec.Owner != "worker-a" || rec.Token <= 0 || rec.Execution != 1 || rec.Recoveries != 0 {
		f.t.Fatalf("created run %+v, want running in execution 1, held by worker-a with a token, no recoveries", rec)
	}
	f.wantTime("created LeaseUntil", rec.LeaseUntil, f.now().Add(lease))
	f.wantTime("created StartedAt", rec.StartedAt, f.now())
	got := f.wantStatus("run-1", storage.StatusRunning)
	if got.Owner != "worker-a" || got.Token != rec.Token {
		f.t.Fatalf("GetRun: owner %q token %d, want worker-a and the created token %d", got.Owner, got.Token, rec.Token)
	}
	f.wantBytes("input", got.Input, "in")
	f.wantLeaseUntil("run-1", f.now().Add(lease))
	f.claimNone()
	if r := f.replay("run-1"); r.Execution != 1 || len(r.Checkpoints) != 0 || len(r.Pending) != 0 {
		f.t.Fatalf("replay of a new leased run = %+v, want execution 1 and nothing else", r)
	}
	counts, err := f.store.CountRuns(f.ctx, storage.CountRunsQuery{})
	if err != nil || counts[storage.StatusRunning] != 1 || counts[storage.StatusQueued] != 0 {
		f.t.Fatalf("CountRuns = %v, %v; want one running run", counts, err)
	}
	if st := f.queueStats(storage.DefaultQueue); st[0].Running != 1 || st[0].Ready != 0 {
		f.t.Fatalf("queue stats %+v, want one running run and none ready", st[0])
	}

	l := storage.Lease{RunID: "run-1", Owner: "worker-a", Token: rec.Token}
	f.clock.Advance(time.Second)
	if res := f.checkpoint(l, "s1@v1", "one"); res.Existing != nil || res.Paused {
		f.t.Fatalf("Checkpoint under the created lease = %+v, want written", res)
	}
	f.wantLeaseUntil("run-1", f.now().Add(lease))
	f.complete(l, "done")
	done := f.wantStatus("run-1", storage.StatusComplete)
	f.wantBytes("output", done.Output, "done")
	f.wantCheckpoints("run-1", "s1@v1=one")
}

func testEagerRecovered(f *fixture) {
	a := f.createLeased(storage.NewRun{ID: "run-1", Workflow: wf}, "worker-a")
	f.wantWake(lease)
	f.clock.Advance(lease + time.Second)
	b := f.claimOne("worker-b")
	if b.Lease.RunID != "run-1" || b.Recoveries != 1 || b.Lease.Token <= a.Token {
		f.t.Fatalf("recovered %+v (token %d), want run-1 with one recovery and a token past %d", b, b.Lease.Token, a.Token)
	}
	_, err := f.store.Checkpoint(f.ctx, stepReq(a, "s1@v1", "late"))
	f.wantErr(err, storage.ErrLeaseLost, "a checkpoint under the expired created lease")
	f.checkpoint(b.Lease, "s1@v1", "b")
	f.wantCheckpoints("run-1", "s1@v1=b")
}

func testEagerExisting(f *fixture) {
	f.create("queued", wf, "first")
	held := f.startAs(storage.NewRun{ID: "held"})
	before := f.snapshot()
	res, err := f.store.CreateRuns(f.ctx, []storage.NewRun{
		{ID: "queued", Workflow: wf, Input: []byte("second"), Lease: &storage.EagerLease{Owner: "worker-b", For: lease}},
		{ID: "held", Workflow: "wf-held", Lease: &storage.EagerLease{Owner: "worker-b", For: lease}},
	})
	if err != nil || len(res) != 2 {
		f.t.Fatalf("CreateRuns = %+v, %v", res, err)
	}
	for i, want := range []storage.RunStatus{storage.StatusQueued, storage.StatusRunning} {
		if res[i].Created || res[i].Run.Status != want {
			f.t.Fatalf("result %d = created %v, status %s; want the existing run, %s", i, res[i].Created, res[i].Run.Status, want)
		}
	}
	if res[1].Run.Owner != "worker-a" || res[1].Run.Token != held.Lease.Token {
		f.t.Fatalf("existing held run reported owner %q token %d, want worker-a's lease", res[1].Run.Owner, res[1].Run.Token)
	}
	f.wantUnchanged(before, "creating existing IDs leased")
	if c := f.claimOne("worker-c"); c.Lease.RunID != "queued" || c.Recoveries != 0 {
		f.t.Fatalf("claimed %+v, want the queued run, as it was", c)
	}
}

func testEagerBatch(f *fixture) {
	res, err := f.store.CreateRuns(f.ctx, []storage.NewRun{
		{ID: "run-1", Workflow: wf, Lease: &storage.EagerLease{Owner: "worker-a", For: lease}},
		{ID: "run-2", Workflow: wf},
		{ID: "run-3", Workflow: wf, Lease: &storage.EagerLease{Owner: "worker-a", For: 2 * lease}},
	})
	if err != nil || len(res) != 3 {
		f.t.Fatalf("CreateRuns = %+v, %v", res, err)
	}
	for i, want := range []storage.RunStatus{storage.StatusRunning, storage.StatusQueued, storage.StatusRunning} {
		if !res[i].Created || res[i].Run.Status != want {
			f.t.Fatalf("result %d = created %v, status %s; want created, %s", i, res[i].Created, res[i].Run.Status, want)
		}
	}
	f.wantLeaseUntil("run-3", f.now().Add(2*lease))
	if c := f.claimOne("worker-b"); c.Lease.RunID != "run-2" {
		f.t.Fatalf("claimed %s, want run-2, the one not leased", c.Lease.RunID)
	}
	f.claimNone()
}

func testEagerQueueLimits(f *fixture) {
	one := []storage.Queue{{Name: "q", Concurrency: 1}}
	a := f.createLeased(storage.NewRun{ID: "a", Workflow: wf, Queue: "q"}, "worker-a")
	f.createOn("b", wf, "q", "", 0)
	f.wantClaimed("a claim while the leased run holds the queue's one place", f.claimFrom("worker-b", 10, one))
	if st := f.queueStats("q"); st[0].Running != 1 || st[0].Ready != 1 {
		f.t.Fatalf("queue stats %+v, want one running and one ready", st[0])
	}
	f.complete(a, "done")
	f.wantClaimed("a claim once the leased run ended", f.claimFrom("worker-b", 10, one), "b")

	rate := []storage.Queue{{Name: "r", Rate: 1, RatePeriod: 30 * time.Second}}
	f.createOn("other", "wf-other", "r", "", 0)
	f.wantClaimed("a first claim of the rated queue", f.claimFrom("worker-b", 10, rate))
	f.createLeased(storage.NewRun{ID: "c", Workflow: wf, Queue: "r"}, "worker-a")
	f.createOn("d", wf, "r", "", 0)
	f.wantClaimed("a claim within the period of the leased run's start", f.claimFrom("worker-b", 10, rate))
	f.clock.Advance(30 * time.Second)
	f.wantClaimed("a claim a period after the leased run's start", f.claimFrom("worker-b", 10, rate), "d")

	part := []storage.Queue{{Name: "p", PartitionConcurrency: 1}}
	f.createLeased(storage.NewRun{ID: "e", Workflow: wf, Queue: "p", Partition: "acme"}, "worker-a")
	f.createOn("g", wf, "p", "acme", 0)
	f.createOn("h", wf, "p", "other", 0)
	f.wantClaimed("a claim while the leased run holds its partition's place", f.claimFrom("worker-b", 10, part), "h")
}

func testEagerControl(f *fixture) {
	a := f.createLeased(storage.NewRun{ID: "paused", Workflow: wf}, "worker-a")
	f.pause("paused")
	if rec := f.wantStatus("paused", storage.StatusRunning); !rec.PauseRequested {
		f.t.Fatalf("a paused leased run: PauseRequested false, want true")
	}
	if res := f.checkpoint(a, "s1@v1", "x"); !res.Paused {
		f.t.Fatalf("checkpoint after a pause = %+v, want Paused", res)
	}
	f.wantStatus("paused", storage.StatusPaused)

	b := f.createLeased(storage.NewRun{ID: "cancelled", Workflow: wf}, "worker-a")
	f.cancel("cancelled", "enough")
	if res := f.checkpoint(b, "s1@v1", "x"); !res.CancelRequested {
		f.t.Fatalf("checkpoint after a cancel = %+v, want CancelRequested", res)
	}

	c := f.createLeased(storage.NewRun{ID: "terminated", Workflow: wf}, "worker-a")
	f.terminate(storage.TerminateRequest{RunID: "terminated", Error: storage.ErrorInfo{Message: "stop"}})
	_, err := f.store.Heartbeat(f.ctx, storage.HeartbeatRequest{Lease: c, LeaseFor: lease})
	f.wantLoss(err, storage.LossTerminated, "heartbeat of a terminated leased run")
}

func testEagerRefused(f *fixture) {
	f.create("existing", wf, "")
	before := f.snapshot()
	for _, r := range []storage.NewRun{
		{ID: "run-1", Workflow: wf, Lease: &storage.EagerLease{For: lease}},
		{ID: "run-1", Workflow: wf, Lease: &storage.EagerLease{Owner: "worker-a"}},
		{ID: "run-1", Workflow: wf, Lease: &storage.EagerLease{Owner: "worker-a", For: -time.Second}},
		{ID: "run-1", Workflow: wf, Lease: &storage.EagerLease{Owner: "worker-a", For: lease}, StartAt: f.after(time.Hour)},
	} {
		_, err := f.store.CreateRuns(f.ctx, []storage.NewRun{{ID: "ok", Workflow: wf}, r})
		f.wantErr(err, storage.ErrInvalidArgument, "CreateRuns with a malformed lease")
	}
	f.wantUnchanged(before, "refused leased creates")
}

// rideReq is a checkpoint of key that completes the run with output.
func rideReq(l storage.Lease, key, output, result string) storage.CheckpointRequest {
	req := stepReq(l, key, output)
	req.Complete = &storage.CompleteRequest{Status: storage.StatusComplete, Output: []byte(result)}
	return req
}

func testRideComplete(f *fixture) {
	var ended <-chan string
	if fn, ok := f.store.(storage.FinishNotifier); ok {
		ended = fn.Finished(f.ctx)
	}
	l := f.createLeased(storage.NewRun{ID: "run-1", Workflow: wf}, "worker-a")
	f.checkpoint(l, "s1@v1", "one")
	f.clock.Advance(time.Second)
	res, err := f.store.Checkpoint(f.ctx, rideReq(l, "s2@v1", "two", "result"))
	if err != nil || !res.Completed || res.Existing != nil || res.Paused {
		f.t.Fatalf("Checkpoint with a completion = %+v, %v; want written and completed", res, err)
	}
	rec := f.wantStatus("run-1", storage.StatusComplete)
	f.wantBytes("output", rec.Output, "result")
	f.wantTimePtr("EndedAt", rec.EndedAt, f.now())
	f.wantCheckpoints("run-1", "s1@v1=one", "s2@v1=two")
	if ex := f.executions("run-1"); len(ex) != 1 || ex[0].Status != storage.StatusComplete {
		f.t.Fatalf("executions %+v, want one, complete", ex)
	}
	if ended != nil {
		f.wantFinished(ended, "run-1")
	}
	_, err = f.store.Checkpoint(f.ctx, stepReq(l, "s3@v1", "late"))
	f.wantErr(err, storage.ErrLeaseLost, "a checkpoint after the riding completion")
	f.claimNone()
}

func testRideErrored(f *fixture) {
	a := f.start("run-1", "")
	req := stepReq(a.Lease, "s1@v1", "one")
	req.Attempts = []storage.Attempt{{Key: "s1@v1", Number: 1, Started: Start, Ended: Start, Error: "flaky"}, {Key: "s1@v1", Number: 2, Started: Start, Ended: Start}}
	req.Progress = []byte(`{"done":1}`)
	req.Complete = &storage.CompleteRequest{Lease: a.Lease, Status: storage.StatusErrored, Error: &storage.ErrorInfo{Message: "declined", Code: "card"}}
	res, err := f.store.Checkpoint(f.ctx, req)
	if err != nil || !res.Completed {
		f.t.Fatalf("Checkpoint with an errored completion = %+v, %v; want completed", res, err)
	}
	rec := f.wantStatus("run-1", storage.StatusErrored)
	if rec.Error == nil || rec.Error.Message != "declined" || rec.Error.Code != "card" || rec.Output != nil {
		f.t.Fatalf("errored run: error %+v, output %q; want the completion's error and no output", rec.Error, rec.Output)
	}
	f.wantBytes("progress", rec.Progress, `{"done":1}`)
	steps := f.steps("run-1")
	if len(steps) != 1 || len(steps[0].Attempts) != 2 || steps[0].Attempts[0].Error != "flaky" {
		f.t.Fatalf("steps = %+v, want s1@v1 with its two attempts", steps)
	}
}

func testRidePaused(f *fixture) {
	a := f.start("run-1", "")
	f.pause("run-1")
	res, err := f.store.Checkpoint(f.ctx, rideReq(a.Lease, "s1@v1", "one", "result"))
	if err != nil || !res.Paused || res.Completed {
		f.t.Fatalf("Checkpoint with a completion after a pause = %+v, %v; want paused, not completed", res, err)
	}
	rec := f.wantStatus("run-1", storage.StatusPaused)
	if rec.Output != nil || rec.EndedAt != nil {
		f.t.Fatalf("paused run has output %q, ended %v; want neither", rec.Output, rec.EndedAt)
	}
	f.wantCheckpoints("run-1", "s1@v1=one")
	f.resume("run-1")
	b := f.claimOne("worker-b")
	f.complete(b.Lease, "result")
	f.wantStatus("run-1", storage.StatusComplete)
}

func testRideExisting(f *fixture) {
	a := f.start("run-1", "")
	f.checkpoint(a.Lease, "s1@v1", "first")
	res, err := f.store.Checkpoint(f.ctx, rideReq(a.Lease, "s1@v1", "second", "result"))
	if err != nil || res.Completed || res.Existing == nil || string(res.Existing.Output) != "first" {
		f.t.Fatalf("Checkpoint with a completion of an existing key = %+v, %v; want the existing checkpoint, not completed", res, err)
	}
	rec := f.wantStatus("run-1", storage.StatusRunning)
	if rec.Output != nil {
		f.t.Fatalf("run output %q, want none", rec.Output)
	}
	f.wantCheckpoints("run-1", "s1@v1=first")
}

func testRideLeaseLost(f *fixture) {
	a := f.start("run-1", "")
	f.terminate(storage.TerminateRequest{RunID: "run-1", Error: storage.ErrorInfo{Message: "stop"}})
	before := f.snapshot()
	res, err := f.store.Checkpoint(f.ctx, rideReq(a.Lease, "s1@v1", "one", "result"))
	f.wantErr(err, storage.ErrLeaseLost, "a riding completion after a termination")
	if res.Completed {
		f.t.Fatalf("refused write reports Completed")
	}
	f.wantUnchanged(before, "a refused riding completion")
}

func testRideFamily(f *fixture) {
	c, done := f.childFamily()
	req := stepReq(c.Lease, "s1@v1", "one")
	req.Complete = &done
	if res, err := f.store.Checkpoint(f.ctx, req); err != nil || !res.Completed {
		f.t.Fatalf("Checkpoint with a family completion = %+v, %v; want completed", res, err)
	}
	f.wantFamilyEnded(done)
}

func testRideRefused(f *fixture) {
	a := f.start("run-1", "")
	other := a.Lease
	other.Token++
	before := f.snapshot()
	for what, req := range map[string]storage.CheckpointRequest{
		"busy": func() storage.CheckpointRequest {
			r := rideReq(a.Lease, "s1@v1", "one", "x")
			r.Busy = true
			return r
		}(),
		"another lease": func() storage.CheckpointRequest {
			r := rideReq(a.Lease, "s1@v1", "one", "x")
			r.Complete.Lease = other
			return r
		}(),
		"a status that does not finish": func() storage.CheckpointRequest {
			r := rideReq(a.Lease, "s1@v1", "one", "x")
			r.Complete.Status = storage.StatusRunning
			return r
		}(),
	} {
		res, err := f.store.Checkpoint(f.ctx, req)
		if !errors.Is(err, storage.ErrInvalidArgument) || res.Completed {
			f.t.Fatalf("a riding completion with %s = %+v, %v; want ErrInvalidArgument", what, res, err)
		}
	}
	f.wantUnchanged(before, "refused riding completions")
}
