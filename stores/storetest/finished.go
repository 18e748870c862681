package storetest

import (
	"slices"
	"time"

	"github.com/stemflow/stem/storage"
)

// A store that implements storage.FinishNotifier tells waiters in every
// process that a run ended, so that Result returns at once. These cases
// check that every way a run ends is announced, and that a write that ended
// nothing is not; a store without FinishNotifier skips them.
var finishedCases = []testCase{
	{"finished/completions, errors and terminations with their cascades are announced", testFinishedAnnounced},
	{"finished/a refused completion announces nothing, not even its cascade", testFinishedNotOnRefusal},
}

// finished subscribes to the store's finished runs, skipping the test when
// the store does not announce them.
func (f *fixture) finished() <-chan string {
	f.t.Helper()
	fn, ok := f.store.(storage.FinishNotifier)
	if !ok {
		f.t.Skip("the store does not implement storage.FinishNotifier")
	}
	return fn.Finished(f.ctx)
}

// wantFinished receives len(want) IDs from ch, in any order, within a
// generous bound (the announcement may travel through a server).
func (f *fixture) wantFinished(ch <-chan string, want ...string) {
	f.t.Helper()
	var got []string
	deadline := time.After(10 * time.Second)
	for len(got) < len(want) {
		select {
		case id, ok := <-ch:
			if !ok {
				f.t.Fatalf("finished channel closed after %v, want %v", got, want)
			}
			got = append(got, id)
		case <-deadline:
			f.t.Fatalf("finished runs announced %v, want %v", got, want)
		}
	}
	slices.Sort(got)
	want = slices.Sorted(slices.Values(want))
	if !slices.Equal(got, want) {
		f.t.Fatalf("finished runs announced %v, want %v", got, want)
	}
}

func testFinishedAnnounced(f *fixture) {
	ch := f.finished()
	a := f.start("run-1", "")
	f.complete(a.Lease, "done")
	f.wantFinished(ch, "run-1")

	b := f.start("run-2", "")
	if err := f.store.Complete(f.ctx, storage.CompleteRequest{Lease: b.Lease, Status: storage.StatusErrored, Error: &storage.ErrorInfo{Message: "failed"}}); err != nil {
		f.t.Fatalf("Complete(errored): %v", err)
	}
	f.wantFinished(ch, "run-2")

	f.create("parent", wf, "")
	f.createRun(storage.NewRun{ID: "parent/child", Workflow: wf, ParentID: "parent"})
	f.terminate(storage.TerminateRequest{RunID: "parent", Error: storage.ErrorInfo{Message: "stop"}, ChildError: &storage.ErrorInfo{Message: "parent stopped"}})
	f.wantFinished(ch, "parent", "parent/child")

	p := f.start("parent-2", "")
	f.createRun(storage.NewRun{ID: "parent-2/child", Workflow: wf, ParentID: "parent-2"})
	if err := f.store.Complete(f.ctx, storage.CompleteRequest{Lease: p.Lease, Status: storage.StatusComplete,
		ChildError: &storage.ErrorInfo{Message: "parent finished"}}); err != nil {
		f.t.Fatalf("Complete with a child error: %v", err)
	}
	f.wantFinished(ch, "parent-2", "parent-2/child")
}

func testFinishedNotOnRefusal(f *fixture) {
	ch := f.finished()
	a := f.start("run-1", "")
	f.clock.Advance(lease + time.Millisecond)
	f.claimOne("worker-b") // a's lease is lost
	f.createRun(storage.NewRun{ID: "run-1/child", Workflow: "wf-child", ParentID: "run-1"})
	err := f.store.Complete(f.ctx, storage.CompleteRequest{Lease: a.Lease, Status: storage.StatusComplete,
		ChildError: &storage.ErrorInfo{Message: "parent finished"}})
	f.wantErr(err, storage.ErrLeaseLost, "Complete with a child error under a lost lease")
	c := f.start("run-2", "")
	f.complete(c.Lease, "done")
	// Announcements arrive in commit order: had the refused completion of
	// run-1 been announced, it would come first.
	f.wantFinished(ch, "run-2")
}
