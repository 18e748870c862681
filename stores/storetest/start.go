package storetest

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/stemflow/stem/storage"
)

// startCases are the policies of a create whose ID has a run
// (NewRun.OnExisting, OnEnded and the replacement on Replace's terms), the
// event a create delivers to the run it leaves (signal-with-start), and
// the start keys that make a run a singleton or debounce its starts. A
// store judges them all in the create's one atomic change, so concurrent
// creates of one ID or one key agree.
var startCases = []testCase{
	{"start/existing default returns it unchanged", testStartExistingReturn},
	{"start/existing fail refuses", testStartExistingFail},
	{"start/existing replace of a running run fences its holder and starts anew", testStartReplaceRunning},
	{"start/existing replace keeps the old holder fenced after the new run is claimed", testStartReplaceFenced},
	{"start/existing replace deletes the children that end with the run", testStartReplaceFamily},
	{"start/existing replace keeps a deleted child's holder fenced from a new child of its ID", testStartReplaceChildFenced},
	{"start/existing replace refused by an unfinished abandon or cancel descendant", testStartReplaceRefused},
	{"start/ended default returns it", testStartEndedReturn},
	{"start/ended reject refuses", testStartEndedReject},
	{"start/ended reuse replaces a completed run", testStartEndedReuse},
	{"start/ended reuse-failed replaces an errored or terminated run, refuses a completed one", testStartEndedReuseFailed},
	{"start/concurrent fail creates of a new ID create it once", testStartConcurrentFail},
	{"start/concurrent reuse of one ended ID replaces it once", testStartConcurrentReuse},
	{"start/event is buffered for a new run", testStartEventNew},
	{"start/event is delivered to an existing run as SendEvent would", testStartEventExisting},
	{"start/event to an ended run is refused with the default policy", testStartEventEnded},
	{"start/event of concurrent creates all reach the one run", testStartEventConcurrent},
	{"start/key singleton joins its unfinished holder", testStartKeySingleton},
	{"start/key a replaced holder no longer holds its key", testStartKeyReplaced},
	{"start/key concurrent singleton creates make one run", testStartKeyConcurrent},
	{"start/key debounce joins the window and takes the last input", testStartKeyDebounce(false)},
	{"start/key debounce with keep first keeps the first input", testStartKeyDebounce(true)},
	{"start/key is per workflow", testStartKeyPerWorkflow},
	{"start/malformed policies, events and keys are invalid with nothing written", testStartInvalid},
}

// createRes makes one create and returns its result.
func (f *fixture) createRes(r storage.NewRun) storage.CreateResult {
	f.t.Helper()
	res, err := f.store.CreateRuns(f.ctx, []storage.NewRun{r})
	if err != nil {
		f.t.Fatalf("CreateRuns(%s): %v", r.ID, err)
	}
	if len(res) != 1 {
		f.t.Fatalf("CreateRuns(%s) = %+v, want one result", r.ID, res)
	}
	return res[0]
}

// wantStartRefused checks that a create was refused for why, reporting the run
// id with status.
func (f *fixture) wantStartRefused(what string, res storage.CreateResult, why storage.StartRefusal, id string, status storage.RunStatus) {
	f.t.Helper()
	if res.Refused != why || res.Created || res.Replaced || res.Joined || res.Delivered || res.Run.ID != id || res.Run.Status != status {
		f.t.Fatalf("%s = %+v, want refused %q reporting %s, %s", what, res, why, id, status)
	}
}

// wantReplaced checks that a create replaced a run that was in status old
// with a new run of input, queued in execution 1, created now.
func (f *fixture) wantReplaced(what string, res storage.CreateResult, old storage.RunStatus, input string) {
	f.t.Helper()
	if !res.Created || !res.Replaced || res.ReplacedStatus != old || res.Refused != "" || res.Joined {
		f.t.Fatalf("%s = %+v, want created, replacing a run that was %s", what, res, old)
	}
	rec := res.Run
	if rec.Status != storage.StatusQueued || rec.Execution != 1 || rec.Error != nil || rec.Output != nil || rec.EndedAt != nil || rec.Recoveries != 0 {
		f.t.Fatalf("%s: new record %+v, want queued in execution 1 with no end", what, rec)
	}
	f.wantBytes(what+": input", rec.Input, input)
	f.wantTime(what+": CreatedAt", rec.CreatedAt, f.now())
	f.wantTimePtr(what+": ReadyAt", rec.ReadyAt, f.now())
	got := f.wantStatus(rec.ID, storage.StatusQueued)
	f.wantBytes(what+": stored input", got.Input, input)
	f.wantTime(what+": stored CreatedAt", got.CreatedAt, f.now())
	if h := f.history(rec.ID, 0); len(h.Steps) != 0 || len(h.Pending) != 0 || h.Execution != 1 {
		f.t.Fatalf("%s: ListSteps of the new run = %+v, want execution 1 with nothing in it", what, h)
	}
	if r := f.replay(rec.ID); r.Execution != 1 || len(r.Checkpoints) != 0 || len(r.Pending) != 0 {
		f.t.Fatalf("%s: LoadReplay of the new run = %+v, want execution 1 with nothing in it", what, r)
	}
	f.wantExecutions(rec.ID, storage.ExecutionRecord{Number: 1, StartedAt: f.now(), Status: storage.StatusQueued})
}

// replaceTerms are the terms the cases replace runs on.
var replaceTerms = &storage.ReplaceTerms{
	Error:       storage.ErrorInfo{Message: "replaced by a new start", Code: storage.CodeTerminated},
	ChildError:  storage.ErrorInfo{Message: "parent replaced", Code: storage.CodeTerminated},
	ChildCancel: "parent replaced",
}

// wantNoEvents checks that run id, claimed as l, has no buffered event on
// topic: a wait on it parks.
func (f *fixture) wantNoEvents(l storage.Lease, topic string) {
	f.t.Helper()
	f.park(l, "none@v1", topic, storage.KindEvent)
}

func testStartExistingReturn(f *fixture) {
	a := f.start("run-1", "first")
	f.checkpoint(a.Lease, "s1@v1", "one")
	f.clock.Advance(time.Second)
	before := f.snapshot()
	res := f.createRes(storage.NewRun{ID: "run-1", Workflow: wf, Input: []byte("second")})
	if res.Created || res.Refused != "" || res.Replaced || res.Joined || res.Run.Status != storage.StatusRunning || res.Run.Token != a.Lease.Token {
		f.t.Fatalf("create of a running ID = %+v, want the running run returned", res)
	}
	f.wantBytes("returned input", res.Run.Input, "first")
	f.wantUnchanged(before, "a create of an existing ID with the default policy")
	f.checkpoint(a.Lease, "s2@v1", "two")
}

func testStartExistingFail(f *fixture) {
	f.create("queued", wf, "first")
	a := f.startAs(storage.NewRun{ID: "running", Input: []byte("first")})
	f.send("running", "t", "buffered")
	f.clock.Advance(time.Second)
	before := f.snapshot()
	for id, status := range map[string]storage.RunStatus{"queued": storage.StatusQueued, "running": storage.StatusRunning} {
		res := f.createRes(storage.NewRun{ID: id, Workflow: "wf-" + id, Input: []byte("second"), OnExisting: storage.ExistingFail,
			Event: &storage.Event{Topic: "t", Payload: []byte("refused")}})
		f.wantStartRefused("a fail create of "+id, res, storage.RefusedExists, id, status)
		f.wantBytes("refused create's input of "+id, res.Run.Input, "first")
	}
	f.wantUnchanged(before, "refused fail creates")
	// The refused event was not buffered: the one buffered before is the
	// only one.
	res := f.suspend(storage.SuspendRequest{Lease: a.Lease, Wait: &storage.Wait{Key: "ev@v1", Topic: "t"}})
	if res.Delivered == nil || string(res.Delivered.Output) != "buffered" {
		f.t.Fatalf("Suspend = %+v, want the event buffered before", res)
	}
	f.wantNoEvents(a.Lease, "t")
}

func testStartReplaceRunning(f *fixture) {
	var ended <-chan string
	if fn, ok := f.store.(storage.FinishNotifier); ok {
		ended = fn.Finished(f.ctx)
	}
	a := f.start("run-1", "first")
	f.checkpoint(a.Lease, "s1@v1", "one")
	if err := f.store.RecordAttempts(f.ctx, storage.RecordAttemptsRequest{Lease: a.Lease, LeaseFor: lease,
		Attempts: []storage.Attempt{{Key: "s2@v1", Number: 1, Started: f.now(), Ended: f.now(), Error: "flaky"}}}); err != nil {
		f.t.Fatalf("RecordAttempts: %v", err)
	}
	f.send("run-1", "t", "old event")
	f.clock.Advance(time.Second)
	res := f.createRes(storage.NewRun{ID: "run-1", Workflow: wf, Input: []byte("second"), OnExisting: storage.ExistingReplace, Replace: replaceTerms})
	f.wantReplaced("a replace of a running run", res, storage.StatusRunning, "second")
	_, err := f.store.Checkpoint(f.ctx, stepReq(a.Lease, "s2@v1", "late"))
	f.wantErr(err, storage.ErrLeaseLost, "a checkpoint by the replaced run's holder")
	f.wantErr(errOf(f.store.Heartbeat(f.ctx, storage.HeartbeatRequest{Lease: a.Lease, LeaseFor: lease})), storage.ErrLeaseLost, "a heartbeat by the replaced run's holder")
	if ended != nil {
		f.wantFinished(ended, "run-1")
	}
	b := f.claimOne("worker-b")
	if b.Lease.RunID != "run-1" || b.Recoveries != 0 || b.Wait != nil || len(b.SuspendState) != 0 {
		f.t.Fatalf("claim of the new run = %+v, want run-1 fresh", b)
	}
	f.wantBytes("claimed input", b.Input, "second")
	// The old run's buffered event went with it.
	f.wantNoEvents(b.Lease, "t")
	f.wantCheckpoints("run-1")
}

func testStartReplaceFenced(f *fixture) {
	a := f.start("run-1", "first")
	f.clock.Advance(time.Second)
	res := f.createRes(storage.NewRun{ID: "run-1", Workflow: wf, Input: []byte("second"), OnExisting: storage.ExistingReplace, Replace: replaceTerms})
	f.wantReplaced("a replace of a running run", res, storage.StatusRunning, "second")
	// The new run's first claim, by the same worker, must not hand out a
	// lease the old holder's still matches.
	b := f.claimOne("worker-a")
	if b.Lease == a.Lease {
		f.t.Fatalf("the new run's claim %+v equals the replaced run's lease", b.Lease)
	}
	_, err := f.store.Checkpoint(f.ctx, stepReq(a.Lease, "s1@v1", "stale"))
	f.wantErr(err, storage.ErrLeaseLost, "a checkpoint by the replaced run's holder after the new run's claim")
	f.wantCheckpoints("run-1")
	f.checkpoint(b.Lease, "s1@v1", "fresh")
	f.wantCheckpoints("run-1", "s1@v1=fresh")
}

func testStartReplaceChildFenced(f *fixture) {
	f.startAs(storage.NewRun{ID: "p", Workflow: wf})
	old := f.startAs(storage.NewRun{ID: "p/c", Workflow: "wf-c", ParentID: "p"})
	f.clock.Advance(time.Second)
	res := f.createRes(storage.NewRun{ID: "p", Workflow: wf, Input: []byte("new"), OnExisting: storage.ExistingReplace, Replace: replaceTerms})
	f.wantReplaced("a replace of a parent", res, storage.StatusRunning, "new")
	f.wantGone("p/c")
	// The new parent starts its child under the same ID, and a worker
	// claims it: the deleted child's holder must not match that lease.
	fresh := f.startAs(storage.NewRun{ID: "p/c", Workflow: "wf-c", ParentID: "p"})
	if fresh.Lease.Token == old.Lease.Token {
		f.t.Fatalf("the new child's lease %+v has the deleted child's token", fresh.Lease)
	}
	_, err := f.store.Checkpoint(f.ctx, stepReq(old.Lease, "stale@v1", "stale"))
	f.wantErr(err, storage.ErrLeaseLost, "a checkpoint by the deleted child's holder after the new child's claim")
	f.checkpoint(fresh.Lease, "fresh@v1", "fresh")
	f.wantCheckpoints("p/c", "fresh@v1=fresh")
}

func testStartReplaceFamily(f *fixture) {
	var ended <-chan string
	if fn, ok := f.store.(storage.FinishNotifier); ok {
		ended = fn.Finished(f.ctx)
	}
	p := f.startAs(storage.NewRun{ID: "p", Workflow: wf})
	c := f.startAs(storage.NewRun{ID: "p/c", Workflow: "wf-c", ParentID: "p"})
	f.park(c.Lease, "ev@v1", "topic", storage.KindEvent)
	f.createRun(storage.NewRun{ID: "p/c/g", Workflow: "wf-g", ParentID: "p/c"})
	d := f.startAs(storage.NewRun{ID: "p/done", Workflow: "wf-done", ParentID: "p"})
	f.complete(d.Lease, "out")
	f.createRun(storage.NewRun{ID: "p/done/kid", Workflow: "wf-kid", ParentID: "p/done"})
	f.createRun(storage.NewRun{ID: "other", Workflow: "wf-other"})
	f.clock.Advance(time.Second)
	res := f.createRes(storage.NewRun{ID: "p", Workflow: wf, Input: []byte("new"), OnExisting: storage.ExistingReplace, Replace: replaceTerms})
	f.wantReplaced("a replace of a parent", res, storage.StatusRunning, "new")
	for _, id := range []string{"p/c", "p/c/g", "p/done", "p/done/kid"} {
		f.wantGone(id)
	}
	if ended != nil {
		f.wantFinished(ended, "p/done", "p", "p/c", "p/c/g", "p/done/kid")
	}
	_, err := f.store.Checkpoint(f.ctx, stepReq(p.Lease, "late@v1", ""))
	f.wantErr(err, storage.ErrLeaseLost, "a checkpoint by the replaced parent's holder")
	_, err = f.store.Checkpoint(f.ctx, stepReq(c.Lease, "late@v1", ""))
	f.wantErr(err, storage.ErrLeaseLost, "a checkpoint by the deleted child's holder")
	if ids := f.emit("topic", "x"); len(ids) != 0 {
		f.t.Fatalf("Emit reached %v: the deleted child kept its wait", ids)
	}
	if got := recordIDs(f.listAll(storage.ListRunsQuery{ParentID: "p"})); len(got) != 0 {
		f.t.Fatalf("children of the new p = %v, want none", got)
	}
	f.wantRuns("after the replace", "other", "p")
	// The old children's IDs are free for the new run's children.
	f.createRun(storage.NewRun{ID: "p/c", Workflow: "wf-c2", ParentID: "p", Input: []byte("new child")})
	f.createRun(storage.NewRun{ID: "p/done", Workflow: "wf-done2", ParentID: "p"})
	if got := recordIDs(f.listAll(storage.ListRunsQuery{ParentID: "p"})); !slices.Equal(got, []string{"p/c", "p/done"}) {
		f.t.Fatalf("children of the new p = %v, want p/c and p/done", got)
	}
	n := f.claimOne("worker-b", "wf-c2")
	f.wantBytes("new child's input", n.Input, "new child")
	f.wantCheckpoints("p/c")
	f.wantExecutions("p/c", storage.ExecutionRecord{Number: 1, StartedAt: f.now(), Status: storage.StatusRunning})
}

func testStartReplaceRefused(f *fixture) {
	for _, tc := range []struct {
		name string
		kids []storage.NewRun
	}{
		{"an abandon child", []storage.NewRun{
			{ID: "p/a", Workflow: "wf-a", ParentID: "p", ParentPolicy: storage.ParentAbandon},
		}},
		{"a cancel grandchild under a terminate child", []storage.NewRun{
			{ID: "p/t", Workflow: "wf-t", ParentID: "p"},
			{ID: "p/t/x", Workflow: "wf-x", ParentID: "p/t", ParentPolicy: storage.ParentCancel},
		}},
		{"an abandon grandchild under a finished child", []storage.NewRun{
			{ID: "p/f", Workflow: "wf-f", ParentID: "p"},
			{ID: "p/f/x", Workflow: "wf-x2", ParentID: "p/f", ParentPolicy: storage.ParentAbandon},
		}},
	} {
		p := f.startAs(storage.NewRun{ID: "p", Workflow: "wf-p", Input: []byte("first")})
		for _, k := range tc.kids {
			f.createRun(k)
		}
		if tc.kids[0].ID == "p/f" { // the child ends before the replace
			fk := f.claimOne("worker-f", "wf-f")
			f.complete(fk.Lease, "out")
		}
		f.clock.Advance(time.Second)
		before := f.snapshot()
		for _, r := range []storage.NewRun{
			{ID: "p", Workflow: wf, Input: []byte("second"), OnExisting: storage.ExistingReplace, Replace: replaceTerms},
			{ID: "p", Workflow: wf, Input: []byte("second"), OnExisting: storage.ExistingReplace, Replace: replaceTerms,
				Event: &storage.Event{Topic: "t", Payload: []byte("refused")}},
		} {
			res := f.createRes(r)
			f.wantStartRefused("a replace of a parent with "+tc.name, res, storage.RefusedFamily, "p", storage.StatusRunning)
			f.wantBytes("refused replace's input", res.Run.Input, "first")
		}
		f.wantUnchanged(before, "a replace refused for "+tc.name)
		f.checkpoint(p.Lease, "s1@v1", "still held")
		f.wantNoEvents(p.Lease, "t")
		// Clear the tree for the next round.
		f.terminate(storage.TerminateRequest{RunID: "p", Error: storage.ErrorInfo{Message: "done"}})
		for _, k := range tc.kids {
			if !f.get(k.ID).Status.Finished() {
				f.terminate(storage.TerminateRequest{RunID: k.ID, Error: storage.ErrorInfo{Message: "done"}})
			}
		}
		f.clock.Advance(time.Second)
		f.purge(storage.PurgeRequest{FinishedBefore: f.now(), Limit: 100})
		f.wantRuns("after clearing " + tc.name)
	}
}

func testStartEndedReturn(f *fixture) {
	f.finish("run-1", wf, storage.StatusComplete)
	f.clock.Advance(time.Second)
	before := f.snapshot()
	res := f.createRes(storage.NewRun{ID: "run-1", Workflow: wf, Input: []byte("second")})
	if res.Created || res.Refused != "" || res.Replaced || res.Joined || res.Run.Status != storage.StatusComplete {
		f.t.Fatalf("create of an ended ID = %+v, want the ended run returned", res)
	}
	f.wantBytes("returned output", res.Run.Output, "out")
	f.wantUnchanged(before, "a create of an ended ID with the default policy")
}

func testStartEndedReject(f *fixture) {
	f.finish("done", wf, storage.StatusComplete)
	f.finish("failed", "wf-failed", storage.StatusErrored)
	f.clock.Advance(time.Second)
	before := f.snapshot()
	for id, status := range map[string]storage.RunStatus{"done": storage.StatusComplete, "failed": storage.StatusErrored} {
		res := f.createRes(storage.NewRun{ID: id, Workflow: wf, Input: []byte("second"), OnEnded: storage.EndedReject,
			OnExisting: storage.ExistingReplace, Replace: replaceTerms})
		f.wantStartRefused("a reject create of "+id, res, storage.RefusedEnded, id, status)
	}
	f.wantUnchanged(before, "refused reject creates")
}

func testStartEndedReuse(f *fixture) {
	f.finish("run-1", wf, storage.StatusComplete, "t")
	f.clock.Advance(time.Second)
	res := f.createRes(storage.NewRun{ID: "run-1", Workflow: wf, Input: []byte("second"), OnEnded: storage.EndedReuse, Replace: replaceTerms})
	f.wantReplaced("a reuse of a completed run", res, storage.StatusComplete, "second")
	if res.Run.Output != nil {
		f.t.Fatalf("the new run has the old one's output %q", res.Run.Output)
	}
	b := f.claimOne("worker-b")
	f.wantBytes("claimed input", b.Input, "second")
	f.wantNoEvents(b.Lease, "t")
	// An unfinished run is returned by a reuse create: reuse is for ended
	// runs only.
	res = f.createRes(storage.NewRun{ID: "run-1", Workflow: wf, Input: []byte("third"), OnEnded: storage.EndedReuse, Replace: replaceTerms})
	if res.Created || res.Replaced || res.Refused != "" || res.Run.Status != storage.StatusWaiting {
		f.t.Fatalf("reuse create of an unfinished run = %+v, want it returned", res)
	}
}

func testStartEndedReuseFailed(f *fixture) {
	f.finish("failed", wf, storage.StatusErrored, "t")
	f.finish("gone", wf, storage.StatusTerminated)
	f.finish("done", wf, storage.StatusComplete)
	f.clock.Advance(time.Second)
	for id, status := range map[string]storage.RunStatus{"failed": storage.StatusErrored, "gone": storage.StatusTerminated} {
		res := f.createRes(storage.NewRun{ID: id, Workflow: wf, Input: []byte("again " + id), OnEnded: storage.EndedReuseFailed, Replace: replaceTerms})
		f.wantReplaced("a reuse-failed of the "+string(status)+" run", res, status, "again "+id)
		if res.Run.Error != nil {
			f.t.Fatalf("the new %s has the old one's error %+v", id, res.Run.Error)
		}
	}
	before := f.snapshot()
	res := f.createRes(storage.NewRun{ID: "done", Workflow: wf, Input: []byte("again"), OnEnded: storage.EndedReuseFailed, Replace: replaceTerms})
	f.wantStartRefused("a reuse-failed of a completed run", res, storage.RefusedEnded, "done", storage.StatusComplete)
	f.wantUnchanged(before, "a refused reuse-failed create")
}

// createConcurrently makes n creates at once, the g-th of run(g), and
// returns their results in order; nil when a create failed (the test has
// failed then).
func (f *fixture) createConcurrently(n int, run func(g int) storage.NewRun) []storage.CreateResult {
	results := make([]storage.CreateResult, n)
	var wg sync.WaitGroup
	for g := range n {
		wg.Go(func() {
			res, err := f.store.CreateRuns(f.ctx, []storage.NewRun{run(g)})
			if err != nil || len(res) != 1 {
				f.t.Errorf("CreateRuns = %+v, %v", res, err)
				return
			}
			results[g] = res[0]
		})
	}
	wg.Wait()
	if f.t.Failed() {
		return nil
	}
	return results
}

func testStartConcurrentFail(f *fixture) {
	const goroutines = 16
	results := f.createConcurrently(goroutines, func(g int) storage.NewRun {
		return storage.NewRun{ID: "run-1", Workflow: wf, Input: fmt.Appendf(nil, "from-%02d", g), OnExisting: storage.ExistingFail}
	})
	if results == nil {
		return
	}
	winner := ""
	for _, res := range results {
		switch {
		case res.Created && res.Refused == "" && winner == "":
			winner = string(res.Run.Input)
		case !res.Created && res.Refused == storage.RefusedExists:
		default:
			f.t.Fatalf("concurrent fail creates = %+v, want one created and the others refused %q", results, storage.RefusedExists)
		}
	}
	if winner == "" {
		f.t.Fatalf("concurrent fail creates = %+v, want one created", results)
	}
	for _, res := range results {
		f.wantBytes("input reported", res.Run.Input, winner)
	}
	f.wantBytes("stored input", f.get("run-1").Input, winner)
	f.wantRuns("after the concurrent creates", "run-1")
}

func testStartConcurrentReuse(f *fixture) {
	f.finish("run-1", wf, storage.StatusComplete)
	f.clock.Advance(time.Second)
	const goroutines = 16
	results := f.createConcurrently(goroutines, func(g int) storage.NewRun {
		return storage.NewRun{ID: "run-1", Workflow: wf, Input: fmt.Appendf(nil, "from-%02d", g),
			OnEnded: storage.EndedReuse, Replace: replaceTerms}
	})
	if results == nil {
		return
	}
	winner := ""
	for _, res := range results {
		switch {
		case res.Created && res.Replaced && res.ReplacedStatus == storage.StatusComplete && winner == "":
			winner = string(res.Run.Input)
		case !res.Created && !res.Replaced && res.Refused == "" && res.Run.Status == storage.StatusQueued:
		default:
			f.t.Fatalf("concurrent reuse creates = %+v, want one replaced and the others returned the new run", results)
		}
	}
	if winner == "" {
		f.t.Fatalf("concurrent reuse creates = %+v, want one replaced", results)
	}
	for _, res := range results {
		f.wantBytes("input reported", res.Run.Input, winner)
	}
	f.wantBytes("stored input", f.wantStatus("run-1", storage.StatusQueued).Input, winner)
	f.wantExecutions("run-1", storage.ExecutionRecord{Number: 1, StartedAt: f.now(), Status: storage.StatusQueued})
	f.wantRuns("after the concurrent creates", "run-1")
}

func testStartEventNew(f *fixture) {
	res := f.createRes(storage.NewRun{ID: "run-1", Workflow: wf, Input: []byte("in"),
		Event: &storage.Event{RunID: "ignored", Topic: "approval", Payload: []byte("yes")}})
	if !res.Created || res.Delivered || res.Refused != "" || res.Run.ID != "run-1" {
		f.t.Fatalf("create with an event = %+v, want created with the event buffered", res)
	}
	if _, err := f.store.GetRun(f.ctx, "ignored"); err == nil {
		f.t.Fatal("the event's RunID was created")
	}
	a := f.claimOne("worker-a")
	d := f.suspend(storage.SuspendRequest{Lease: a.Lease, Wait: &storage.Wait{Key: "approve@v1", Topic: "approval"}}).Delivered
	if d == nil || d.Key != "approve@v1" || string(d.Output) != "yes" {
		f.t.Fatalf("Suspend delivered %+v, want the create's event", d)
	}
	f.wantNoEvents(a.Lease, "approval")
}

func testStartEventExisting(f *fixture) {
	a := f.start("run-1", "first")
	f.park(a.Lease, "approve@v1", "approval", storage.KindEvent)
	f.clock.Advance(time.Second)
	res := f.createRes(storage.NewRun{ID: "run-1", Workflow: wf, Input: []byte("second"),
		Event: &storage.Event{Topic: "approval", Payload: []byte("yes")}})
	if res.Created || !res.Delivered || res.Refused != "" || res.Run.ID != "run-1" {
		f.t.Fatalf("create with an event of a waiting run = %+v, want Created false and Delivered", res)
	}
	f.wantCheckpoints("run-1", "approve@v1=yes")
	rec := f.wantStatus("run-1", storage.StatusQueued)
	f.wantTimePtr("ReadyAt after the delivery", rec.ReadyAt, f.now())
	f.wantBytes("input", rec.Input, "first")
	b := f.claimOne("worker-b")

	// A run not waiting on the topic has it buffered.
	res = f.createRes(storage.NewRun{ID: "run-1", Workflow: wf, Event: &storage.Event{Topic: "later", Payload: []byte("buffered")}})
	if res.Created || res.Delivered || res.Refused != "" {
		f.t.Fatalf("create with an event of a running run = %+v, want Created false and the event buffered", res)
	}
	d := f.suspend(storage.SuspendRequest{Lease: b.Lease, Wait: &storage.Wait{Key: "later@v1", Topic: "later"}}).Delivered
	if d == nil || string(d.Output) != "buffered" {
		f.t.Fatalf("Suspend delivered %+v, want the buffered event", d)
	}
}

func testStartEventEnded(f *fixture) {
	f.finish("run-1", wf, storage.StatusComplete)
	f.clock.Advance(time.Second)
	before := f.snapshot()
	res := f.createRes(storage.NewRun{ID: "run-1", Workflow: wf, Event: &storage.Event{Topic: "t", Payload: []byte("lost")}})
	f.wantStartRefused("a create with an event of an ended run", res, storage.RefusedEnded, "run-1", storage.StatusComplete)
	f.wantUnchanged(before, "a refused create with an event")
	// Nothing was buffered for the ended run: a purge finds no event.
	f.wantPurged(storage.PurgeRequest{FinishedBefore: f.now().Add(time.Hour), Limit: 10}, 1, 0)

	// With reuse, the new run takes the event.
	f.finish("run-2", wf, storage.StatusErrored)
	f.clock.Advance(time.Second)
	res = f.createRes(storage.NewRun{ID: "run-2", Workflow: wf, OnEnded: storage.EndedReuse, Replace: replaceTerms,
		Event: &storage.Event{Topic: "t", Payload: []byte("kept")}})
	if !res.Created || !res.Replaced || res.Delivered {
		f.t.Fatalf("reuse create with an event = %+v, want replaced with the event buffered", res)
	}
	a := f.claimOne("worker-b")
	d := f.suspend(storage.SuspendRequest{Lease: a.Lease, Wait: &storage.Wait{Key: "t@v1", Topic: "t"}}).Delivered
	if d == nil || string(d.Output) != "kept" {
		f.t.Fatalf("Suspend delivered %+v, want the create's event", d)
	}
}

func testStartEventConcurrent(f *fixture) {
	const goroutines = 32
	results := f.createConcurrently(goroutines, func(g int) storage.NewRun {
		return storage.NewRun{ID: "run-1", Workflow: wf,
			Event: &storage.Event{Topic: "t", Payload: fmt.Appendf(nil, "p-%02d", g)}}
	})
	if results == nil {
		return
	}
	created := 0
	for _, res := range results {
		if res.Refused != "" || res.Delivered || res.Run.ID != "run-1" {
			f.t.Fatalf("concurrent creates with events = %+v, want every event buffered for run-1", results)
		}
		if res.Created {
			created++
		}
	}
	if created != 1 {
		f.t.Fatalf("%d of the concurrent creates created run-1, want 1", created)
	}
	a := f.claimOne("worker-a")
	var got, want []string
	for i := range goroutines {
		want = append(want, fmt.Sprintf("p-%02d", i))
		d := f.suspend(storage.SuspendRequest{Lease: a.Lease, Wait: &storage.Wait{Key: fmt.Sprintf("ev-%02d@v1", i), Topic: "t"}}).Delivered
		if d == nil {
			f.t.Fatalf("Suspend %d parked, want a buffered event (got %v so far)", i, got)
		}
		got = append(got, string(d.Output))
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		f.t.Fatalf("events delivered %v, want %v", got, want)
	}
	f.wantNoEvents(a.Lease, "t")
}

// keyed is a create of id in workflow w with the singleton key k.
func keyed(id, w, k, input string) storage.NewRun {
	return storage.NewRun{ID: id, Workflow: w, Input: []byte(input), Key: &storage.StartKey{Key: k}}
}

// wantJoined checks that a create joined the run holder.
func (f *fixture) wantJoined(what string, res storage.CreateResult, holder string) {
	f.t.Helper()
	if !res.Joined || res.Created || res.Refused != "" || res.Replaced || res.Run.ID != holder {
		f.t.Fatalf("%s = %+v, want joined to %s", what, res, holder)
	}
}

func testStartKeySingleton(f *fixture) {
	if res := f.createRes(keyed("a", wf, "k", "1")); !res.Created || res.Joined {
		f.t.Fatalf("first keyed create = %+v, want created", res)
	}
	f.clock.Advance(time.Second)
	before := f.snapshot()
	f.wantJoined("a keyed create while the holder is queued", f.createRes(keyed("b", wf, "k", "2")), "a")
	f.wantUnchanged(before, "a joining create")
	f.wantGone("b")
	a := f.claimOne("worker-a")
	res := f.createRes(storage.NewRun{ID: "c", Workflow: wf, Key: &storage.StartKey{Key: "k"},
		Event: &storage.Event{Topic: "t", Payload: []byte("to the holder")}})
	f.wantJoined("a keyed create with an event while the holder runs", res, "a")
	if res.Delivered {
		f.t.Fatalf("the joining create's event was delivered, want it buffered for the holder")
	}
	f.wantGone("c")
	d := f.suspend(storage.SuspendRequest{Lease: a.Lease, Wait: &storage.Wait{Key: "t@v1", Topic: "t"}}).Delivered
	if d == nil || string(d.Output) != "to the holder" {
		f.t.Fatalf("Suspend delivered %+v, want the joining create's event", d)
	}
	f.complete(a.Lease, "out")
	res = f.createRes(keyed("d", wf, "k", "4"))
	if !res.Created || res.Joined || res.Run.ID != "d" {
		f.t.Fatalf("a keyed create after the holder completed = %+v, want d created", res)
	}
	f.wantJoined("a keyed create while the new holder is queued", f.createRes(keyed("e", wf, "k", "5")), "d")
	f.wantRuns("after the keyed creates", "a", "d")
}

func testStartKeyReplaced(f *fixture) {
	f.createRun(keyed("a", wf, "k", "1"))
	f.clock.Advance(time.Second)
	// The replacing create has no key: the new run a holds none.
	res := f.createRes(storage.NewRun{ID: "a", Workflow: wf, Input: []byte("2"), OnExisting: storage.ExistingReplace, Replace: replaceTerms})
	f.wantReplaced("a replace of a key's holder", res, storage.StatusQueued, "2")
	res = f.createRes(keyed("b", wf, "k", "3"))
	if !res.Created || res.Joined || res.Run.ID != "b" {
		f.t.Fatalf("a keyed create after its holder was replaced = %+v, want b created", res)
	}
	f.wantRuns("after the replace", "a", "b")
}

func testStartKeyConcurrent(f *fixture) {
	const goroutines = 16
	results := f.createConcurrently(goroutines, func(g int) storage.NewRun {
		return keyed(runID(g), wf, "k", runID(g))
	})
	if results == nil {
		return
	}
	winner := ""
	for _, res := range results {
		if res.Created && !res.Joined && winner == "" {
			winner = res.Run.ID
		} else if !res.Joined || res.Created {
			f.t.Fatalf("concurrent keyed creates = %+v, want one created and the others joined", results)
		}
	}
	if winner == "" {
		f.t.Fatalf("concurrent keyed creates = %+v, want one created", results)
	}
	for _, res := range results {
		if res.Run.ID != winner {
			f.t.Fatalf("a keyed create reported %s, want the holder %s", res.Run.ID, winner)
		}
	}
	f.wantRuns("after the concurrent keyed creates", winner)
}

func testStartKeyDebounce(keepFirst bool) func(f *fixture) {
	return func(f *fixture) {
		const window = 10 * time.Second
		debounced := func(id, input string) storage.NewRun {
			return storage.NewRun{ID: id, Workflow: wf, Input: []byte(input), Headers: map[string]string{"from": id},
				Key: &storage.StartKey{Key: "k", Debounce: window, KeepFirst: keepFirst}}
		}
		res := f.createRes(debounced("a", "1"))
		if !res.Created || res.Joined || res.Run.Status != storage.StatusQueued {
			f.t.Fatalf("first debounced create = %+v, want created queued", res)
		}
		opened := f.now()
		f.wantTimePtr("ReadyAt of the window's run", res.Run.ReadyAt, opened.Add(window))
		f.wantTimePtr("stored ReadyAt of the window's run", f.get("a").ReadyAt, opened.Add(window))
		f.claimNone()
		f.wantWake(window)

		f.clock.Advance(window / 2)
		res = f.createRes(debounced("b", "2"))
		f.wantJoined("a debounced create within the window", res, "a")
		f.wantGone("b")
		rec := f.wantStatus("a", storage.StatusQueued)
		f.wantTimePtr("ReadyAt after a join (the window does not move)", rec.ReadyAt, opened.Add(window))
		wantInput, wantFrom, updated := "2", "b", f.now()
		if keepFirst {
			wantInput, wantFrom, updated = "1", "a", opened
		}
		f.wantBytes("input after a join", rec.Input, wantInput)
		f.wantHeaders("headers after a join", rec.Headers, map[string]string{"from": wantFrom})
		f.wantTime("UpdatedAt after a join", rec.UpdatedAt, updated)
		f.claimNone()

		f.clock.Advance(window/2 - time.Millisecond)
		f.claimNone()
		f.clock.Advance(time.Millisecond)
		c := f.claimOne("worker-a")
		if c.Lease.RunID != "a" {
			f.t.Fatalf("claimed %s, want a", c.Lease.RunID)
		}
		f.wantBytes("claimed input", c.Input, wantInput)

		// The window's run is claimed: the next create opens a new window.
		res = f.createRes(debounced("c", "3"))
		if !res.Created || res.Joined || res.Run.ID != "c" {
			f.t.Fatalf("a debounced create after the claim = %+v, want c created", res)
		}
		f.wantTimePtr("ReadyAt of the new window's run", res.Run.ReadyAt, f.now().Add(window))
		f.wantJoined("a debounced create within the new window", f.createRes(debounced("d", "4")), "c")
		f.wantRuns("after the debounced creates", "a", "c")
	}
}

func testStartKeyPerWorkflow(f *fixture) {
	for _, w := range []string{"wf-1", "wf-2"} {
		if res := f.createRes(keyed("run-"+w, w, "k", "")); !res.Created || res.Joined {
			f.t.Fatalf("keyed create in %s = %+v, want created", w, res)
		}
	}
	f.wantJoined("a keyed create in wf-2", f.createRes(keyed("run-3", "wf-2", "k", "")), "run-wf-2")
	f.wantRuns("after the keyed creates", "run-wf-1", "run-wf-2")
}

func testStartInvalid(f *fixture) {
	f.create("existing", wf, "")
	before := f.snapshot()
	later := f.now().Add(time.Hour)
	for what, r := range map[string]storage.NewRun{
		"an unknown policy for an existing run": {OnExisting: "overwrite"},
		"an unknown policy for an ended run":    {OnEnded: "recycle"},
		"replace without terms":                 {OnExisting: storage.ExistingReplace},
		"reuse without terms":                   {OnEnded: storage.EndedReuse},
		"reuse-failed without terms":            {OnEnded: storage.EndedReuseFailed},
		"a key with a lease":                    {Key: &storage.StartKey{Key: "k"}, Lease: &storage.EagerLease{Owner: "worker-a", For: lease}},
		"a debounce with a start time":          {Key: &storage.StartKey{Key: "k", Debounce: time.Second}, StartAt: &later},
		"keep first without a debounce":         {Key: &storage.StartKey{Key: "k", KeepFirst: true}},
		"a negative debounce":                   {Key: &storage.StartKey{Key: "k", Debounce: -time.Second}},
		"an empty key":                          {Key: &storage.StartKey{}},
		"an event with an empty topic":          {Event: &storage.Event{Payload: []byte("x")}},
		"an event with a reserved topic":        {Event: &storage.Event{Topic: storage.ReservedTopicPrefix + "child", Payload: []byte("x")}},
	} {
		r.Workflow = wf
		for _, id := range []string{"run-1", "existing"} {
			r.ID = id
			_, err := f.store.CreateRuns(f.ctx, []storage.NewRun{{ID: "ok", Workflow: wf}, r})
			f.wantErr(err, storage.ErrInvalidArgument, "CreateRuns of "+id+" with "+what)
		}
	}
	f.wantUnchanged(before, "invalid creates")
	f.wantGone("run-1")
	f.wantGone("ok")
}
