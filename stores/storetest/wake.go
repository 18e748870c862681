package storetest

import (
	"time"

	"github.com/stemflow/stem/storage"
)

// NextWake is how an idle engine knows how long to sleep: until the
// earliest ReadyAt or lease expiry among the runs it could claim. A store
// that answers later than the truth makes sleeps oversleep; one that
// counts a paused run or an event wait without a deadline wakes engines
// for nothing.
var wakeCases = []testCase{
	{"wake/nothing to wake for", testWakeNothing},
	{"wake/a queued run is due now", testWakeQueued},
	{"wake/the earliest sleeping run, measured from the store's now", testWakeSleepers},
	{"wake/a lease expiry is a wake time", testWakeLease},
	{"wake/paused runs and event waits without a deadline are not", testWakeNotByTime},
	{"wake/only the named workflows", testWakeWorkflows},
}

// nextWake asks the store about workflows (wf when none are named).
func (f *fixture) nextWake(workflows ...string) storage.NextWake {
	f.t.Helper()
	if len(workflows) == 0 {
		workflows = []string{wf}
	}
	w, err := f.store.NextWake(f.ctx, storage.NextWakeRequest{Workflows: workflows})
	if err != nil {
		f.t.Fatalf("NextWake(%v): %v", workflows, err)
	}
	return w
}

// wantWake checks NextWake for workflows: none when after is negative.
func (f *fixture) wantWake(after time.Duration, workflows ...string) {
	f.t.Helper()
	got := f.nextWake(workflows...)
	if after < 0 {
		if got.Found {
			f.t.Fatalf("NextWake(%v) = %+v, want none", workflows, got)
		}
		return
	}
	if !got.Found || got.After != after {
		f.t.Fatalf("NextWake(%v) = %+v, want found after %v", workflows, got, after)
	}
}

// sleep parks a claimed run asleep until now+d.
func (f *fixture) sleep(l storage.Lease, d time.Duration) {
	f.t.Helper()
	res := f.suspend(storage.SuspendRequest{
		Lease:      l,
		Checkpoint: &storage.Checkpoint{Key: "nap@v1", Kind: storage.KindSleep, Output: []byte("wake")},
		ReadyAt:    f.after(d),
	})
	if res.Delivered != nil || res.Paused {
		f.t.Fatalf("Suspend(%s) = %+v, want asleep", l.RunID, res)
	}
}

func testWakeNothing(f *fixture) {
	f.wantWake(-1)
	f.create("other-1", "other", "")
	f.wantWake(-1)
	if w, err := f.store.NextWake(f.ctx, storage.NextWakeRequest{}); err != nil || w.Found {
		f.t.Fatalf("NextWake of no workflows = %+v, %v; want none", w, err)
	}
	before := f.snapshot()
	_, err := f.store.NextWake(f.ctx, storage.NextWakeRequest{Workflows: []string{"bad name"}})
	f.wantErr(err, storage.ErrInvalidArgument, "NextWake of a malformed workflow name")
	f.wantUnchanged(before, "NextWake")
}

func testWakeQueued(f *fixture) {
	f.create("run-1", wf, "")
	f.wantWake(0)
	f.clock.Advance(time.Minute) // long overdue is still now, never negative
	f.wantWake(0)
}

func testWakeSleepers(f *fixture) {
	a := f.start("run-1", "")
	f.sleep(a.Lease, 10*time.Second)
	b := f.start("run-2", "")
	f.sleep(b.Lease, 5*time.Second)
	f.wantWake(5 * time.Second)
	f.clock.Advance(2 * time.Second)
	f.wantWake(3 * time.Second)
	f.clock.Advance(3 * time.Second)
	f.wantWake(0)
	f.claimOne("worker-b") // run-2 wakes; run-1 sleeps on
	// run-2 is now leased until now+lease, later than run-1's wake.
	f.wantWake(5 * time.Second)
}

func testWakeLease(f *fixture) {
	a := f.start("run-1", "")
	f.wantWake(lease)
	f.clock.Advance(20 * time.Second)
	f.wantWake(lease - 20*time.Second)
	// A fenced write extends the lease, and the wake time with it.
	f.checkpoint(a.Lease, "step@v1", "x")
	f.wantWake(lease)
	f.complete(a.Lease, "done")
	f.wantWake(-1)
}

func testWakeNotByTime(f *fixture) {
	a := f.start("run-1", "")
	f.park(a.Lease, "approval", "approved", storage.KindEvent)
	f.wantWake(-1)

	// An event wait with a deadline wakes at the deadline.
	b := f.start("run-2", "")
	f.suspend(storage.SuspendRequest{Lease: b.Lease, Wait: &storage.Wait{Key: "ship", Topic: "shipped", Kind: storage.KindEvent}, ReadyAt: f.after(time.Hour)})
	f.wantWake(time.Hour)

	// Paused, it waits for a resume, not a clock.
	f.pause("run-2")
	f.wantWake(-1)
	f.resume("run-2")
	f.wantWake(time.Hour)

	c := f.start("run-3", "")
	f.sleep(c.Lease, time.Minute)
	f.wantWake(time.Minute)
	f.pause("run-3")
	f.wantWake(time.Hour)
}

func testWakeWorkflows(f *fixture) {
	a := f.start("run-1", "")
	f.sleep(a.Lease, 5*time.Second)
	o := f.startAs(storage.NewRun{ID: "run-2", Workflow: "other"})
	f.sleep(o.Lease, time.Second)
	f.wantWake(5 * time.Second)
	f.wantWake(time.Second, wf, "other")
	f.wantWake(time.Second, "other")
	f.wantWake(-1, "unknown")
}
