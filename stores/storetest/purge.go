package storetest

import (
	"fmt"
	"slices"
	"time"

	"github.com/stemflow/stem/storage"
)

// Purge is how a store stays small: finished runs go, in bounded batches,
// with everything they own, so an ID used again starts clean. A purge that
// touches an unfinished run loses work; one that leaves a run's parts
// behind hands them to the next run of that ID.
var purgeCases = []testCase{
	{"purge/deletes finished runs ended before the time with all they own; the ID starts clean again", testPurge},
	{"purge/never touches unfinished runs, however old", testPurgeUnfinished},
	{"purge/statuses, workflows and except filter", testPurgeFilters},
	{"purge/limit bounds a batch, oldest ended first; a dry run counts and deletes nothing", testPurgeBatches},
	{"purge/a child whose finished parent was purged still completes", testPurgeParent},
	{"purge/a purged child leaves its parent's children, and its ID used again is not a child", testPurgeChild},
	{"purge/malformed requests are invalid and delete nothing", testPurgeMalformed},
}

func (f *fixture) purge(req storage.PurgeRequest) storage.PurgeResult {
	f.t.Helper()
	res, err := f.store.Purge(f.ctx, req)
	if err != nil {
		f.t.Fatalf("Purge(%+v): %v", req, err)
	}
	return res
}

// wantPurged purges and checks what the purge reports.
func (f *fixture) wantPurged(req storage.PurgeRequest, runs, events int) {
	f.t.Helper()
	if got, want := f.purge(req), (storage.PurgeResult{Runs: runs, Events: events}); got != want {
		f.t.Fatalf("Purge(%+v) = %+v, want %+v", req, got, want)
	}
}

// finish creates a run of workflow, claims it, buffers an event for it on
// each of topics, and ends it with status.
func (f *fixture) finish(id, workflow string, status storage.RunStatus, topics ...string) {
	f.t.Helper()
	c := f.startAs(storage.NewRun{ID: id, Workflow: workflow, Input: []byte(id)})
	for _, topic := range topics {
		if f.send(id, topic, "for "+id) {
			f.t.Fatalf("event %s for %s delivered, want buffered", topic, id)
		}
	}
	switch status {
	case storage.StatusComplete:
		f.complete(c.Lease, "out")
	case storage.StatusErrored:
		err := f.store.Complete(f.ctx, storage.CompleteRequest{Lease: c.Lease, Status: storage.StatusErrored, Error: &storage.ErrorInfo{Message: "failed"}})
		if err != nil {
			f.t.Fatalf("Complete(%s, errored): %v", id, err)
		}
	case storage.StatusTerminated:
		f.terminate(storage.TerminateRequest{RunID: id, Error: storage.ErrorInfo{Message: "stop", Code: storage.CodeTerminated}})
	default:
		f.t.Fatalf("finish(%s) with status %s", id, status)
	}
}

// wantRuns checks the IDs of every run the store holds.
func (f *fixture) wantRuns(what string, want ...string) {
	f.t.Helper()
	if got := recordIDs(f.listAll(storage.ListRunsQuery{})); !slices.Equal(got, want) {
		f.t.Fatalf("runs %s = %v, want %v", what, got, want)
	}
}

// wantGone checks that nothing of the run is left to read.
func (f *fixture) wantGone(id string) {
	f.t.Helper()
	_, err := f.store.GetRun(f.ctx, id)
	f.wantErr(err, storage.ErrRunNotFound, "GetRun of purged "+id)
	_, err = f.store.LoadReplay(f.ctx, id)
	f.wantErr(err, storage.ErrRunNotFound, "LoadReplay of purged "+id)
	_, err = f.store.ListExecutions(f.ctx, id)
	f.wantErr(err, storage.ErrRunNotFound, "ListExecutions of purged "+id)
	_, err = f.store.ListSteps(f.ctx, storage.StepsQuery{RunID: id, Execution: 1})
	f.wantErr(err, storage.ErrRunNotFound, "ListSteps of purged "+id)
	_, err = f.store.SendEvent(f.ctx, storage.Event{RunID: id, Topic: "t", Payload: []byte("p")})
	f.wantErr(err, storage.ErrRunNotFound, "SendEvent to purged "+id)
}

func testPurge(f *fixture) {
	// A run with checkpoints, a pending attempt, two executions and
	// buffered events.
	a := f.startAs(storage.NewRun{ID: "done", Workflow: wf, Input: []byte("in")})
	f.checkpoint(a.Lease, "s@v1", "1")
	f.clock.Advance(lease + time.Second)
	f.restart("done", "")
	a = f.claimOne("worker-a")
	f.checkpoint(a.Lease, "s@v1", "2")
	retry := storage.Attempt{Key: "t@v1", Number: 1, Started: f.now(), Ended: f.now(), Error: "down", RetryAt: f.after(time.Hour)}
	if err := f.store.RecordAttempts(f.ctx, storage.RecordAttemptsRequest{Lease: a.Lease, LeaseFor: lease, Attempts: []storage.Attempt{retry}}); err != nil {
		f.t.Fatalf("RecordAttempts: %v", err)
	}
	f.send("done", "later", "L")
	f.send("done", "other", "O")
	f.clock.Advance(time.Second)
	f.complete(a.Lease, "out")
	f.finish("failed", "wf-failed", storage.StatusErrored, "later")
	f.clock.Advance(time.Second)
	f.create("stopped", "wf-stopped", "")
	f.terminate(storage.TerminateRequest{RunID: "stopped", Error: storage.ErrorInfo{Message: "stop", Code: storage.CodeTerminated}})
	f.clock.Advance(time.Second)
	cut := f.now()
	// Ended at the time, not before it: kept.
	f.finish("recent", "wf-recent", storage.StatusComplete, "later")
	f.create("queued", "wf-queued", "")
	f.clock.Advance(time.Hour)

	f.wantPurged(storage.PurgeRequest{FinishedBefore: cut, Limit: 100}, 3, 3)
	for _, id := range []string{"done", "failed", "stopped"} {
		f.wantGone(id)
	}
	f.wantRuns("after the purge", "queued", "recent")
	f.wantPurged(storage.PurgeRequest{FinishedBefore: cut, Limit: 100}, 0, 0)

	// The ID starts clean: no checkpoints, attempts, executions or events
	// of the run that had it.
	rec := f.create("done", wf, "again")
	if rec.Execution != 1 || rec.Status != storage.StatusQueued || len(rec.Output) != 0 || rec.EndedAt != nil {
		f.t.Fatalf("run created again = %+v, want a new run in execution 1", rec)
	}
	if r := f.replay("done"); r.Execution != 1 || len(r.Checkpoints) != 0 || len(r.Pending) != 0 {
		f.t.Fatalf("LoadReplay of the run created again = %+v, want execution 1 and nothing else", r)
	}
	f.wantExecutions("done", storage.ExecutionRecord{Number: 1, StartedAt: f.now(), Status: storage.StatusQueued})
	c := f.claimOne("worker-b")
	if c.Lease.RunID != "done" || c.Recoveries != 0 || c.SuspendState != nil || string(c.Input) != "again" {
		f.t.Fatalf("claim of the run created again = %+v, want done with its own input", c)
	}
	f.park(c.Lease, "ev@v1", "later", storage.KindEvent)
	f.wantCheckpoints("done")
	if h := f.history("done", 1); len(h.Steps) != 0 || len(h.Pending) != 0 {
		f.t.Fatalf("ListSteps of the run created again = %+v, want nothing", h)
	}
}

func testPurgeUnfinished(f *fixture) {
	f.create("queued", "wf-queued", "")
	f.startAs(storage.NewRun{ID: "running", Workflow: "wf-running"})
	f.startAs(storage.NewRun{ID: "stalled", Workflow: "wf-stalled"})
	f.sleep(f.startAs(storage.NewRun{ID: "sleeping", Workflow: "wf-sleeping"}).Lease, time.Hour)
	f.park(f.startAs(storage.NewRun{ID: "awaiting", Workflow: "wf-awaiting"}).Lease, "ev@v1", "t", storage.KindEvent)
	f.create("paused", "wf-paused", "")
	f.pause("paused")
	f.startAs(storage.NewRun{ID: "pausing", Workflow: "wf-pausing"})
	f.pause("pausing")
	// Restarted after it finished: its first execution ended long ago.
	f.finish("restarted", "wf-restarted", storage.StatusComplete, "later")
	f.restart("restarted", "")
	f.createRun(storage.NewRun{ID: "delayed", Workflow: "wf-delayed", StartAt: f.after(time.Hour)})
	f.clock.Advance(30 * 24 * time.Hour)
	if _, err := f.store.Heartbeat(f.ctx, storage.HeartbeatRequest{Lease: f.claimOne("worker-b", "wf-running").Lease, LeaseFor: lease}); err != nil {
		f.t.Fatalf("Heartbeat: %v", err)
	}
	before := f.snapshot()
	far := f.now().Add(365 * 24 * time.Hour)
	f.wantPurged(storage.PurgeRequest{FinishedBefore: far, Limit: storage.MaxPurgeBatch, DryRun: true}, 0, 0)
	f.wantPurged(storage.PurgeRequest{FinishedBefore: far, Limit: storage.MaxPurgeBatch}, 0, 0)
	f.wantPurged(storage.PurgeRequest{FinishedBefore: far, Limit: storage.MaxPurgeBatch, Statuses: []storage.RunStatus{storage.StatusTerminated}, Workflows: []string{"wf-restarted"}}, 0, 0)
	f.wantUnchanged(before, "a purge of a store without finished runs")
	// The restarted run kept its buffered event.
	c := f.claimOne("worker-c", "wf-restarted")
	if res := f.suspend(storage.SuspendRequest{Lease: c.Lease, Wait: &storage.Wait{Key: "ev@v1", Topic: "later"}}); res.Delivered == nil {
		f.t.Fatal("the restarted run lost its buffered event to a purge")
	}
}

func testPurgeFilters(f *fixture) {
	for _, r := range []struct {
		id, workflow string
		status       storage.RunStatus
	}{
		{"a-done", "alpha", storage.StatusComplete},
		{"a-err", "alpha", storage.StatusErrored},
		{"a-term", "alpha", storage.StatusTerminated},
		{"b-done", "beta", storage.StatusComplete},
		{"b-err", "beta", storage.StatusErrored},
		{"c-done", "gamma", storage.StatusComplete},
		{"c-term", "gamma", storage.StatusTerminated},
	} {
		f.finish(r.id, r.workflow, r.status)
	}
	f.clock.Advance(time.Second)
	all := storage.PurgeRequest{FinishedBefore: f.now(), Limit: 100}
	steps := []struct {
		req  func(r *storage.PurgeRequest)
		n    int
		left []string
	}{
		{func(r *storage.PurgeRequest) { r.Statuses = []storage.RunStatus{storage.StatusErrored} }, 2,
			[]string{"a-done", "a-term", "b-done", "c-done", "c-term"}},
		{func(r *storage.PurgeRequest) { r.Workflows = []string{"alpha"} }, 2,
			[]string{"b-done", "c-done", "c-term"}},
		{func(r *storage.PurgeRequest) {
			r.Statuses = []storage.RunStatus{storage.StatusComplete, storage.StatusTerminated}
			r.Except = []string{"beta"}
		}, 2, []string{"b-done"}},
		{func(r *storage.PurgeRequest) { r.Workflows = []string{"beta", "gamma"}; r.Except = []string{"beta"} }, 0,
			[]string{"b-done"}},
		{func(r *storage.PurgeRequest) {}, 1, nil},
	}
	for i, st := range steps {
		req := all
		st.req(&req)
		f.wantPurged(req, st.n, 0)
		f.wantRuns(fmt.Sprintf("after purge %d", i+1), st.left...)
	}
}

func testPurgeBatches(f *fixture) {
	// Ended in an order that is not their IDs'.
	for _, r := range []struct {
		id     string
		topics []string
	}{{"e-3", []string{"t1", "t2"}}, {"e-1", nil}, {"e-5", []string{"t1"}}, {"e-2", nil}, {"e-4", nil}} {
		f.finish(r.id, "wf-"+r.id, storage.StatusComplete, r.topics...)
		f.clock.Advance(time.Second)
	}
	f.create("queued", "wf-queued", "")
	req := storage.PurgeRequest{FinishedBefore: f.now(), Limit: 2}
	dry := req
	dry.DryRun = true
	before := f.snapshot()
	f.wantPurged(dry, 2, 2)
	dry.Limit = 10
	f.wantPurged(dry, 5, 3)
	f.wantUnchanged(before, "dry runs")

	f.wantPurged(req, 2, 2)
	f.wantRuns("after the first batch", "e-2", "e-4", "e-5", "queued")
	f.wantPurged(req, 2, 1)
	f.wantRuns("after the second batch", "e-4", "queued")
	f.wantPurged(req, 1, 0)
	f.wantPurged(req, 0, 0)
	f.wantRuns("after the last batch", "queued")
}

func testPurgeParent(f *fixture) {
	p := f.startAs(storage.NewRun{ID: "parent", Workflow: "wf-parent"})
	f.createRun(storage.NewRun{ID: "child", Workflow: "wf-child", ParentID: "parent", ParentPolicy: storage.ParentAbandon})
	f.complete(p.Lease, "")
	f.clock.Advance(time.Second)
	f.wantPurged(storage.PurgeRequest{FinishedBefore: f.now(), Limit: 10}, 1, 0)
	c := f.claimOne("worker-b", "wf-child")
	err := f.store.Complete(f.ctx, storage.CompleteRequest{Lease: c.Lease, Status: storage.StatusComplete, Output: []byte("o"),
		Notify: &storage.Event{RunID: "parent", Topic: "child:child", Payload: []byte("o")}})
	if err != nil {
		f.t.Fatalf("Complete of a child whose parent was purged: %v", err)
	}
	f.wantStatus("child", storage.StatusComplete)
	f.wantGone("parent")
	if kids := recordIDs(f.listAll(storage.ListRunsQuery{ParentID: "parent"})); !slices.Equal(kids, []string{"child"}) {
		f.t.Fatalf("children of the purged parent = %v, want child", kids)
	}
}

func testPurgeChild(f *fixture) {
	f.startAs(storage.NewRun{ID: "parent", Workflow: "wf-parent"})
	f.createRun(storage.NewRun{ID: "kid-done", Workflow: "wf-kid-done", ParentID: "parent"})
	f.complete(f.claimOne("worker-a", "wf-kid-done").Lease, "")
	f.createRun(storage.NewRun{ID: "kid-queued", Workflow: "wf-kid", ParentID: "parent"})
	f.clock.Advance(time.Second)
	f.wantPurged(storage.PurgeRequest{FinishedBefore: f.now(), Limit: 10}, 1, 0)
	if kids := recordIDs(f.listAll(storage.ListRunsQuery{ParentID: "parent"})); !slices.Equal(kids, []string{"kid-queued"}) {
		f.t.Fatalf("children of the parent after a purge = %v, want kid-queued", kids)
	}
	// The ID used again by a run of no parent: terminating the old
	// parent with its children leaves it alone.
	f.create("kid-done", "wf-other", "")
	ids := f.terminate(storage.TerminateRequest{RunID: "parent", Error: storage.ErrorInfo{Message: "stop", Code: storage.CodeTerminated}, ChildError: &storage.ErrorInfo{Message: "parent stopped", Code: storage.CodeTerminated}})
	if !slices.Equal(ids, []string{"parent", "kid-queued"}) {
		f.t.Fatalf("Terminate with children = %v, want parent and kid-queued", ids)
	}
	f.wantStatus("kid-done", storage.StatusQueued)
	if kids := recordIDs(f.listAll(storage.ListRunsQuery{ParentID: "parent"})); !slices.Equal(kids, []string{"kid-queued"}) {
		f.t.Fatalf("children of the parent = %v, want kid-queued", kids)
	}
}

func testPurgeMalformed(f *fixture) {
	f.finish("done", wf, storage.StatusComplete)
	f.clock.Advance(time.Second)
	ctx, s := f.ctx, f.store
	var calls []badCall
	for _, r := range []storage.PurgeRequest{
		{Limit: 10},
		{FinishedBefore: f.now()},
		{FinishedBefore: f.now(), Limit: -1},
		{FinishedBefore: f.now(), Limit: storage.MaxPurgeBatch + 1},
		{FinishedBefore: f.now(), Limit: 10, Statuses: []storage.RunStatus{storage.StatusComplete, storage.StatusQueued}},
		{FinishedBefore: f.now(), Limit: 10, Statuses: []storage.RunStatus{storage.StatusRunning}},
		{FinishedBefore: f.now(), Limit: 10, Statuses: []storage.RunStatus{storage.StatusContinued}},
		{FinishedBefore: f.now(), Limit: 10, Workflows: []string{"bad name"}},
		{FinishedBefore: f.now(), Limit: 10, Except: []string{""}},
	} {
		calls = append(calls, badCall{fmt.Sprintf("Purge %+v", r), r.Validate(), func() error {
			_, err := s.Purge(ctx, r)
			return err
		}})
	}
	f.wantRefused(calls)
}
