package storetest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/stemflow/stem/storage"
)

var claimCases = []testCase{
	{"claim/bounded by limit", testClaimLimit},
	{"claim/only the named workflows", testClaimWorkflows},
	{"claim/skips not-yet-ready, paused and finished runs", testClaimSkipsUnready},
	{"claim/token grows on every claim", testClaimTokenGrows},
	{"claim/concurrent claims never share a run", testClaimConcurrent},
	{"lease/expired lease is reclaimed with a recovery", testLeaseExpired},
	{"lease/stale token writes nothing", testFencedWrites},
	{"lease/parked or finished run fences its old lease", testFencedAfterPark},
	{"lease/checkpoint extends the lease", testLeaseExtendedBy(extendByCheckpoint)},
	{"lease/heartbeat extends the lease", testLeaseExtendedBy(extendByHeartbeat)},
	{"lease/record attempts extends the lease", testLeaseExtendedBy(extendByAttempts)},
	{"active step/heartbeat with a step sets it, without one keeps it", testActiveStep},
	{"active step/every later write of the run clears it", testActiveCleared},
	{"active step/stale heartbeat with a step writes nothing", testActiveStale},
	{"suspend/release with ready now is claimable at once", testSuspendRelease},
	{"complete/output", testComplete},
	{"complete/errored with error info", testCompleteErrored},
	{"complete/notify wakes a waiting parent", testNotifyWaitingParent},
	{"complete/notify buffers for a parent not yet waiting", testNotifyBuffered},
	{"complete/notify to a finished or unknown parent is dropped", testNotifyGone},
}

func testClaimLimit(f *fixture) {
	for i := range 5 {
		f.create(runID(i), wf, "")
	}
	seen := map[string]bool{}
	for _, want := range []int{2, 2, 1, 0} {
		got := f.claim("worker-a", 2)
		if len(got) != want {
			f.t.Fatalf("Claim(limit 2) leased %v, want %d runs", claimedIDs(got), want)
		}
		for _, c := range got {
			if seen[c.Lease.RunID] {
				f.t.Fatalf("run %s claimed twice", c.Lease.RunID)
			}
			seen[c.Lease.RunID] = true
			if c.Lease.Owner != "worker-a" {
				f.t.Fatalf("lease owner %q, want worker-a", c.Lease.Owner)
			}
			f.wantTime("claimed LeaseUntil", c.LeaseUntil, Start.Add(lease))
			rec := f.wantStatus(c.Lease.RunID, storage.StatusRunning)
			if rec.Owner != "worker-a" || rec.Token != c.Lease.Token {
				f.t.Fatalf("record of %s has owner %q token %d, want worker-a token %d", rec.ID, rec.Owner, rec.Token, c.Lease.Token)
			}
			f.wantTime("LeaseUntil", rec.LeaseUntil, Start.Add(lease))
		}
	}
	if len(seen) != 5 {
		f.t.Fatalf("claimed %d distinct runs, want 5", len(seen))
	}
}

func testClaimWorkflows(f *fixture) {
	f.create("a-1", "alpha", "")
	f.create("b-1", "beta", "")
	f.create("c-1", "gamma", "")
	f.create("a-2", "alpha", "")
	got := f.claim("worker-a", 10, "alpha", "gamma")
	ids := claimedIDs(got)
	slices.Sort(ids)
	if !slices.Equal(ids, []string{"a-1", "a-2", "c-1"}) {
		f.t.Fatalf("Claim(alpha, gamma) leased %v, want a-1 a-2 c-1", ids)
	}
	for _, c := range got {
		if want := map[string]string{"a": "alpha", "c": "gamma"}[c.Lease.RunID[:1]]; c.Workflow != want {
			f.t.Fatalf("claimed %s with workflow %q, want %q", c.Lease.RunID, c.Workflow, want)
		}
	}
	f.wantStatus("b-1", storage.StatusQueued)
	if c := f.claimOne("worker-b", "beta"); c.Lease.RunID != "b-1" || c.Workflow != "beta" {
		f.t.Fatalf("Claim(beta) = %+v, want b-1", c)
	}
}

func testClaimSkipsUnready(f *fixture) {
	// Each run is created and claimed alone, then put in its state.
	c := f.start("sleeping", "")
	f.suspend(storage.SuspendRequest{Lease: c.Lease, ReadyAt: f.after(time.Hour)})
	c = f.start("awaiting", "")
	f.park(c.Lease, "ev@v1", "topic", storage.KindEvent)
	f.create("paused", wf, "")
	if err := f.store.Pause(f.ctx, "paused"); err != nil {
		f.t.Fatalf("Pause: %v", err)
	}
	c = f.start("complete", "")
	f.complete(c.Lease, "out")
	c = f.start("errored", "")
	if err := f.store.Complete(f.ctx, storage.CompleteRequest{Lease: c.Lease, Status: storage.StatusErrored, Error: &storage.ErrorInfo{Message: "boom"}}); err != nil {
		f.t.Fatalf("Complete(errored): %v", err)
	}
	f.create("terminated", wf, "")
	if _, err := f.store.Terminate(f.ctx, storage.TerminateRequest{RunID: "terminated", Error: storage.ErrorInfo{Message: "stop"}}); err != nil {
		f.t.Fatalf("Terminate: %v", err)
	}
	f.create("ready", wf, "")

	got := f.claim("worker-b", 100)
	if ids := claimedIDs(got); !slices.Equal(ids, []string{"ready"}) {
		f.t.Fatalf("Claim leased %v, want only the ready run", ids)
	}
	if err := f.store.Complete(f.ctx, storage.CompleteRequest{Lease: got[0].Lease, Status: storage.StatusComplete}); err != nil {
		f.t.Fatalf("Complete: %v", err)
	}
	f.clock.Advance(time.Hour - time.Millisecond)
	f.claimNone()
	f.clock.Advance(time.Millisecond)
	got = f.claim("worker-b", 100)
	if ids := claimedIDs(got); !slices.Equal(ids, []string{"sleeping"}) {
		f.t.Fatalf("Claim at the wake time leased %v, want only the sleeping run", ids)
	}
	f.clock.Advance(30 * 24 * time.Hour)
	got = f.claim("worker-c", 100)
	if ids := claimedIDs(got); !slices.Equal(ids, []string{"sleeping"}) {
		f.t.Fatalf("Claim a month later leased %v, want only the sleeping run (its lease expired)", ids)
	}
	for id, want := range map[string]storage.RunStatus{
		"awaiting": storage.StatusWaiting, "paused": storage.StatusPaused, "complete": storage.StatusComplete,
		"errored": storage.StatusErrored, "terminated": storage.StatusTerminated,
	} {
		f.wantStatus(id, want)
	}
}

func testClaimTokenGrows(f *fixture) {
	c := f.start("run-1", "")
	tokens := []int64{c.Lease.Token}
	check := func(c storage.ClaimedRun, how string) {
		f.t.Helper()
		if last := tokens[len(tokens)-1]; c.Lease.Token <= last {
			f.t.Fatalf("token after %s = %d, want more than %d", how, c.Lease.Token, last)
		}
		if rec := f.get("run-1"); rec.Token != c.Lease.Token {
			f.t.Fatalf("stored token %d, want the lease's %d", rec.Token, c.Lease.Token)
		}
		tokens = append(tokens, c.Lease.Token)
	}
	f.suspend(storage.SuspendRequest{Lease: c.Lease, ReadyAt: f.after(0)})
	c = f.claimOne("worker-a")
	check(c, "a release")
	f.clock.Advance(lease + time.Millisecond)
	c = f.claimOne("worker-b")
	check(c, "an expired lease")
	if err := f.store.Restart(f.ctx, storage.RestartRequest{RunID: "run-1"}); err != nil {
		f.t.Fatalf("Restart: %v", err)
	}
	f.letGo(c.Lease)
	c = f.claimOne("worker-c")
	check(c, "a restart")
	f.suspend(storage.SuspendRequest{Lease: c.Lease, ReadyAt: f.after(time.Second)})
	f.clock.Advance(time.Second)
	c = f.claimOne("worker-c")
	check(c, "a sleep")
}

func testClaimConcurrent(f *fixture) {
	const runs, workers = 200, 8
	var batch []storage.NewRun
	for i := range runs {
		batch = append(batch, storage.NewRun{ID: runID(i), Workflow: wf})
	}
	if _, err := f.store.CreateRuns(f.ctx, batch); err != nil {
		f.t.Fatalf("CreateRuns: %v", err)
	}
	var (
		mu      sync.Mutex
		claimed = map[string][]storage.ClaimedRun{}
		wg      sync.WaitGroup
	)
	for w := range workers {
		wg.Go(func() {
			owner := fmt.Sprintf("worker-%d", w)
			for range runs { // bounded: each round that leases nothing ends the loop
				got, err := f.store.Claim(f.ctx, storage.ClaimRequest{Owner: owner, Workflows: []string{wf}, Limit: 7, LeaseFor: time.Hour})
				if err != nil {
					f.t.Errorf("Claim(%s): %v", owner, err)
					return
				}
				if len(got) == 0 {
					return
				}
				if len(got) > 7 {
					f.t.Errorf("Claim(limit 7) leased %d runs", len(got))
				}
				mu.Lock()
				for _, c := range got {
					claimed[c.Lease.RunID] = append(claimed[c.Lease.RunID], c)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if f.t.Failed() {
		return
	}
	if len(claimed) != runs {
		f.t.Fatalf("claimed %d distinct runs, want %d", len(claimed), runs)
	}
	for id, cs := range claimed {
		if len(cs) != 1 {
			f.t.Fatalf("run %s handed to %d claimers: %+v", id, len(cs), cs)
		}
		rec := f.get(id)
		if rec.Status != storage.StatusRunning || rec.Owner != cs[0].Lease.Owner || rec.Token != cs[0].Lease.Token {
			f.t.Fatalf("run %s: status %s owner %q token %d, want running under %+v", id, rec.Status, rec.Owner, rec.Token, cs[0].Lease)
		}
	}
}

func testLeaseExpired(f *fixture) {
	a := f.start("run-1", "in")
	f.clock.Advance(lease - time.Millisecond)
	f.claimNone()
	f.clock.Advance(2 * time.Millisecond)
	b := f.claimOne("worker-b")
	if b.Lease.RunID != "run-1" || b.Lease.Owner != "worker-b" || b.Lease.Token <= a.Lease.Token || b.Recoveries != 1 {
		f.t.Fatalf("reclaim = %+v, want run-1 for worker-b, a greater token than %d and Recoveries 1", b, a.Lease.Token)
	}
	f.wantBytes("reclaimed Input", b.Input, "in")
	rec := f.wantStatus("run-1", storage.StatusRunning)
	if rec.Owner != "worker-b" || rec.Token != b.Lease.Token || rec.Recoveries != 1 {
		f.t.Fatalf("record = %+v, want owner worker-b, token %d, Recoveries 1", rec, b.Lease.Token)
	}
	_, err := f.store.Checkpoint(f.ctx, stepReq(a.Lease, "step@v1", "from a"))
	f.wantErr(err, storage.ErrLeaseLost, "Checkpoint under the expired lease")
	f.wantErr(errOf(f.store.Heartbeat(f.ctx, storage.HeartbeatRequest{Lease: a.Lease, LeaseFor: lease})), storage.ErrLeaseLost, "Heartbeat under the expired lease")

	f.clock.Advance(lease + time.Millisecond)
	c := f.claimOne("worker-c")
	if c.Recoveries != 2 || c.Lease.Token <= b.Lease.Token {
		f.t.Fatalf("second reclaim = %+v, want Recoveries 2 and a token above %d", c, b.Lease.Token)
	}
	f.checkpoint(c.Lease, "step@v1", "from c")
	if rec := f.get("run-1"); rec.Recoveries != 0 {
		f.t.Fatalf("Recoveries after a checkpoint = %d, want 0", rec.Recoveries)
	}
	f.wantCheckpoints("run-1", "step@v1=from c")
}

// takeOver lets a's lease expire and has worker-b claim the run: it
// returns b's claim and the leases that no longer hold, a's and one
// forged with a token above b's.
func (f *fixture) takeOver(a storage.ClaimedRun) (storage.ClaimedRun, []storage.Lease) {
	f.t.Helper()
	f.clock.Advance(lease + time.Millisecond)
	b := f.claimOne("worker-b")
	if b.Lease.RunID != a.Lease.RunID {
		f.t.Fatalf("worker-b claimed %s, want %s", b.Lease.RunID, a.Lease.RunID)
	}
	forged := b.Lease
	forged.Token = b.Lease.Token + 1
	return b, []storage.Lease{a.Lease, forged}
}

func testFencedWrites(f *fixture) {
	a := f.start("run-1", "")
	f.checkpoint(a.Lease, "one@v1", "1")
	b, stale := f.takeOver(a)
	before := f.snapshot()

	for _, l := range stale {
		what := fmt.Sprintf("token %d (current %d)", l.Token, b.Lease.Token)
		_, err := f.store.Checkpoint(f.ctx, storage.CheckpointRequest{
			Lease: l, LeaseFor: lease,
			Checkpoint: storage.Checkpoint{Key: "two@v1", Kind: storage.KindStep, Output: []byte("2")},
			Attempts:   []storage.Attempt{{Key: "two@v1", Number: 1, Started: f.now(), Ended: f.now()}},
		})
		f.wantErr(err, storage.ErrLeaseLost, "Checkpoint with "+what)
		err = f.store.RecordAttempts(f.ctx, storage.RecordAttemptsRequest{Lease: l, LeaseFor: lease, Attempts: []storage.Attempt{{Key: "one@v1", Number: 2, Error: "x"}}})
		f.wantErr(err, storage.ErrLeaseLost, "RecordAttempts with "+what)
		f.wantErr(errOf(f.store.Heartbeat(f.ctx, storage.HeartbeatRequest{Lease: l, LeaseFor: time.Hour})), storage.ErrLeaseLost, "Heartbeat with "+what)
		_, err = f.store.Suspend(f.ctx, storage.SuspendRequest{
			Lease: l, LeaseFor: lease,
			Checkpoint:   &storage.Checkpoint{Key: "nap@v1", Kind: storage.KindSleep, Output: []byte("t")},
			Wait:         &storage.Wait{Key: "ev@v1", Topic: "topic", Kind: storage.KindEvent},
			ReadyAt:      f.after(time.Hour),
			SuspendState: []byte("state"),
		})
		f.wantErr(err, storage.ErrLeaseLost, "Suspend with "+what)
		err = f.store.Complete(f.ctx, storage.CompleteRequest{Lease: l, Status: storage.StatusComplete, Output: []byte("out")})
		f.wantErr(err, storage.ErrLeaseLost, "Complete with "+what)
	}
	f.wantUnchanged(before, "writes under a stale lease")
	if ids := f.emit("topic", "p"); len(ids) != 0 {
		f.t.Fatalf("Emit reached %v: a fenced Suspend registered its wait", ids)
	}
	f.checkpoint(b.Lease, "two@v1", "from b")
	f.wantCheckpoints("run-1", "one@v1=1", "two@v1=from b")
}

func testFencedAfterPark(f *fixture) {
	a := f.start("run-1", "")
	f.suspend(storage.SuspendRequest{Lease: a.Lease, ReadyAt: f.after(time.Hour)})
	f.wantStatus("run-1", storage.StatusWaiting)
	_, err := f.store.Checkpoint(f.ctx, stepReq(a.Lease, "late@v1", ""))
	f.wantErr(err, storage.ErrLeaseLost, "Checkpoint after Suspend")
	f.wantErr(errOf(f.store.Heartbeat(f.ctx, storage.HeartbeatRequest{Lease: a.Lease, LeaseFor: lease})), storage.ErrLeaseLost, "Heartbeat after Suspend")

	b := f.start("run-2", "")
	f.complete(b.Lease, "done")
	_, err = f.store.Checkpoint(f.ctx, stepReq(b.Lease, "late@v1", ""))
	f.wantErr(err, storage.ErrLeaseLost, "Checkpoint after Complete")
	err = f.store.Complete(f.ctx, storage.CompleteRequest{Lease: b.Lease, Status: storage.StatusErrored, Error: &storage.ErrorInfo{Message: "again"}})
	f.wantErr(err, storage.ErrLeaseLost, "second Complete")
	if rec := f.get("run-2"); rec.Status != storage.StatusComplete || string(rec.Output) != "done" || rec.Error != nil {
		f.t.Fatalf("run-2 = %+v, want complete with output done", rec)
	}
	f.wantCheckpoints("run-1")
	f.wantCheckpoints("run-2")
}

type extender func(f *fixture, l storage.Lease, leaseFor time.Duration, i int)

func extendByCheckpoint(f *fixture, l storage.Lease, leaseFor time.Duration, i int) {
	f.t.Helper()
	req := stepReq(l, fmt.Sprintf("step@v1#%d", i), "")
	req.LeaseFor = leaseFor
	if _, err := f.store.Checkpoint(f.ctx, req); err != nil {
		f.t.Fatalf("Checkpoint: %v", err)
	}
}

func extendByHeartbeat(f *fixture, l storage.Lease, leaseFor time.Duration, _ int) {
	f.t.Helper()
	if _, err := f.store.Heartbeat(f.ctx, storage.HeartbeatRequest{Lease: l, LeaseFor: leaseFor}); err != nil {
		f.t.Fatalf("Heartbeat: %v", err)
	}
}

func extendByAttempts(f *fixture, l storage.Lease, leaseFor time.Duration, i int) {
	f.t.Helper()
	err := f.store.RecordAttempts(f.ctx, storage.RecordAttemptsRequest{Lease: l, LeaseFor: leaseFor, Attempts: []storage.Attempt{{Key: "step@v1", Number: i + 1, Started: f.now(), Ended: f.now(), Error: "retry"}}})
	if err != nil {
		f.t.Fatalf("RecordAttempts: %v", err)
	}
}

// testLeaseExtendedBy claims with lease L and extends it at 0.8L, twice:
// nobody else may claim the run in between, and once the holder stops
// extending, the lease runs out exactly L after the last extension.
func testLeaseExtendedBy(extend extender) func(f *fixture) {
	return func(f *fixture) {
		const l = 10 * time.Second
		f.create("run-1", wf, "")
		got, err := f.store.Claim(f.ctx, storage.ClaimRequest{Owner: "worker-a", Workflows: []string{wf}, Limit: 1, LeaseFor: l})
		if err != nil || len(got) != 1 {
			f.t.Fatalf("Claim = %v, %v", got, err)
		}
		a := got[0]
		for i := range 2 {
			f.clock.Advance(l * 8 / 10)
			extend(f, a.Lease, l, i)
			f.wantLeaseUntil("run-1", f.now().Add(l))
		}
		f.clock.Advance(l * 8 / 10)
		f.claimNone()
		f.clock.Advance(l*2/10 - time.Millisecond)
		f.claimNone()
		f.clock.Advance(time.Millisecond)
		if b := f.claimOne("worker-b"); b.Recoveries != 1 {
			f.t.Fatalf("claim after the extended lease ran out = %+v, want a recovery", b)
		}
	}
}

func testSuspendRelease(f *fixture) {
	a := f.start("run-1", "in")
	res := f.suspend(storage.SuspendRequest{Lease: a.Lease, ReadyAt: f.after(0), SuspendState: []byte("iterations")})
	if res.Delivered != nil || res.Paused {
		f.t.Fatalf("Suspend = %+v, want parked", res)
	}
	rec := f.wantStatus("run-1", storage.StatusQueued)
	f.wantTimePtr("ReadyAt", rec.ReadyAt, Start)
	f.wantErr(errOf(f.store.Heartbeat(f.ctx, storage.HeartbeatRequest{Lease: a.Lease, LeaseFor: lease})), storage.ErrLeaseLost, "Heartbeat after release")
	b := f.claimOne("worker-b")
	if b.Lease.Token <= a.Lease.Token || b.Recoveries != 0 || b.Wait != nil {
		f.t.Fatalf("claim after release = %+v, want a greater token, no recovery, no wait", b)
	}
	f.wantBytes("SuspendState", b.SuspendState, "iterations")
	f.wantBytes("Input", b.Input, "in")
}
func testComplete(f *fixture) {
	a := f.start("run-1", "")
	f.checkpoint(a.Lease, "s@v1", "")
	f.complete(a.Lease, `{"total":3}`)
	rec := f.wantStatus("run-1", storage.StatusComplete)
	f.wantBytes("Output", rec.Output, `{"total":3}`)
	if rec.Error != nil || rec.Wait != nil || rec.PauseRequested {
		f.t.Fatalf("complete record = %+v", rec)
	}
	f.wantErr(errOf(f.store.Heartbeat(f.ctx, storage.HeartbeatRequest{Lease: a.Lease, LeaseFor: lease})), storage.ErrLeaseLost, "Heartbeat after Complete")
	f.clock.Advance(lease + time.Millisecond)
	f.claimNone()
	f.wantCheckpoints("run-1", "s@v1=")
}

func testCompleteErrored(f *fixture) {
	a := f.start("run-1", "")
	info := storage.ErrorInfo{Message: "card declined", Code: storage.CodePermanent}
	if err := f.store.Complete(f.ctx, storage.CompleteRequest{Lease: a.Lease, Status: storage.StatusErrored, Error: &info}); err != nil {
		f.t.Fatalf("Complete: %v", err)
	}
	rec := f.wantStatus("run-1", storage.StatusErrored)
	if rec.Error == nil || *rec.Error != info || len(rec.Output) != 0 {
		f.t.Fatalf("errored record = %+v (error %+v), want error %+v", rec, rec.Error, info)
	}
	f.clock.Advance(lease + time.Millisecond)
	f.claimNone()
}

func testNotifyWaitingParent(f *fixture) {
	p := f.start("parent", "")
	f.park(p.Lease, "call@v1", "child:run-1", storage.KindChild)
	f.create("run-1", "child", "")
	c := f.claimOne("worker-c", "child")
	err := f.store.Complete(f.ctx, storage.CompleteRequest{Lease: c.Lease, Status: storage.StatusComplete, Output: []byte(`"child result"`), Notify: childNotify("parent")})
	if err != nil {
		f.t.Fatalf("Complete: %v", err)
	}
	f.wantStatus("run-1", storage.StatusComplete)
	cps := f.wantCheckpoints("parent", `call@v1="child result"`)
	if cps[0].Kind != storage.KindChild {
		f.t.Fatalf("parent's checkpoint kind %q, want child", cps[0].Kind)
	}
	rec := f.wantStatus("parent", storage.StatusQueued)
	if rec.Wait != nil {
		f.t.Fatalf("parent still waits on %+v", rec.Wait)
	}
	f.wantTimePtr("parent ReadyAt", rec.ReadyAt, f.now())
	if got := f.claimOne("worker-p"); got.Lease.RunID != "parent" {
		f.t.Fatalf("claimed %s, want parent", got.Lease.RunID)
	}
}

func testNotifyBuffered(f *fixture) {
	p := f.start("parent", "")
	f.create("run-1", "child", "")
	c := f.claimOne("worker-c", "child")
	err := f.store.Complete(f.ctx, storage.CompleteRequest{Lease: c.Lease, Status: storage.StatusComplete, Output: []byte(`"child result"`), Notify: childNotify("parent")})
	if err != nil {
		f.t.Fatalf("Complete: %v", err)
	}
	rec := f.wantStatus("parent", storage.StatusRunning)
	if rec.Token != p.Lease.Token {
		f.t.Fatalf("parent token %d, want %d", rec.Token, p.Lease.Token)
	}
	f.wantCheckpoints("parent")
	res := f.suspend(storage.SuspendRequest{Lease: p.Lease, Wait: &storage.Wait{Key: "call@v1", Topic: "child:run-1", Kind: storage.KindChild}})
	d := res.Delivered
	if d == nil || d.Key != "call@v1" || d.Kind != storage.KindChild || string(d.Output) != `"child result"` {
		f.t.Fatalf("parent's Suspend = %+v (delivered %+v), want the child's result as a child checkpoint", res, d)
	}
	f.wantStatus("parent", storage.StatusRunning)
}

// testNotifyGone: a child's completion is never refused because its parent
// cannot take the notification.
func testNotifyGone(f *fixture) {
	f.create("parent", wf, "")
	if _, err := f.store.Terminate(f.ctx, storage.TerminateRequest{RunID: "parent", Error: storage.ErrorInfo{Message: "stop"}}); err != nil {
		f.t.Fatalf("Terminate: %v", err)
	}
	f.create("run-1", "child", "")
	f.create("run-2", "child", "")
	claimed := f.claim("worker-c", 2, "child")
	if len(claimed) != 2 {
		f.t.Fatalf("claimed %v, want run-1 and run-2", claimedIDs(claimed))
	}
	parents := map[string]string{"run-1": "parent", "run-2": "no-such-run"}
	for _, c := range claimed {
		err := f.store.Complete(f.ctx, storage.CompleteRequest{Lease: c.Lease, Status: storage.StatusComplete, Output: []byte("r"), Notify: childNotify(parents[c.Lease.RunID])})
		if err != nil {
			f.t.Fatalf("Complete of %s notifying %s: %v", c.Lease.RunID, parents[c.Lease.RunID], err)
		}
		f.wantStatus(c.Lease.RunID, storage.StatusComplete)
	}
	f.wantStatus("parent", storage.StatusTerminated)
	f.wantCheckpoints("parent")
	if _, err := f.store.GetRun(f.ctx, "no-such-run"); !errors.Is(err, storage.ErrRunNotFound) {
		f.t.Fatalf("GetRun(no-such-run): %v, want ErrRunNotFound", err)
	}
}

// heartbeatStep reports the step attempt running under the lease.
func (f *fixture) heartbeatStep(l storage.Lease, key string, attempt int) storage.ActiveStep {
	f.t.Helper()
	step := storage.ActiveStep{Key: key, Attempt: attempt, Started: f.now().Add(-1500 * time.Millisecond)}
	if _, err := f.store.Heartbeat(f.ctx, storage.HeartbeatRequest{Lease: l, LeaseFor: lease, Step: &step}); err != nil {
		f.t.Fatalf("Heartbeat(%s, step %s): %v", l.RunID, key, err)
	}
	return step
}

func (f *fixture) wantActive(id string, want *storage.ActiveStep) {
	f.t.Helper()
	got := f.get(id).Active
	switch {
	case want == nil && got != nil:
		f.t.Fatalf("Active of %s = %+v, want none", id, *got)
	case want == nil:
	case got == nil:
		f.t.Fatalf("Active of %s = nil, want %+v", id, *want)
	case got.Key != want.Key || got.Attempt != want.Attempt || !ms(got.Started).Equal(ms(want.Started)):
		f.t.Fatalf("Active of %s = %+v, want %+v", id, *got, *want)
	}
}

func testActiveStep(f *fixture) {
	a := f.start("run-1", "")
	f.wantActive("run-1", nil)
	f.clock.Advance(time.Second)
	step := f.heartbeatStep(a.Lease, "charge@v1", 3)
	f.wantActive("run-1", &step)
	f.wantLeaseUntil("run-1", f.now().Add(lease))
	if cps := f.wantCheckpoints("run-1"); len(cps) != 0 {
		f.t.Fatalf("a heartbeat wrote checkpoints %+v", cps)
	}
	// A heartbeat without a step extends the lease and keeps the step.
	f.clock.Advance(time.Second)
	if _, err := f.store.Heartbeat(f.ctx, storage.HeartbeatRequest{Lease: a.Lease, LeaseFor: lease}); err != nil {
		f.t.Fatalf("Heartbeat: %v", err)
	}
	f.wantActive("run-1", &step)
	f.wantLeaseUntil("run-1", f.now().Add(lease))
	// A later step replaces it.
	next := f.heartbeatStep(a.Lease, "charge@v1", 4)
	f.wantActive("run-1", &next)
	if r := f.replay("run-1"); len(r.Pending) != 0 {
		f.t.Fatalf("a heartbeat recorded attempts: %+v", r.Pending)
	}
}

// testActiveCleared gives each clearing write its own run (and workflow,
// so claims do not mix them up).
func testActiveCleared(f *fixture) {
	for _, tc := range []struct {
		name  string
		clear func(l storage.Lease)
	}{
		{"Checkpoint", func(l storage.Lease) { f.checkpoint(l, "charge@v1", "ok") }},
		{"RecordAttempts", func(l storage.Lease) {
			err := f.store.RecordAttempts(f.ctx, storage.RecordAttemptsRequest{Lease: l, LeaseFor: lease, Attempts: []storage.Attempt{{Key: "charge@v1", Number: 1, Started: f.now(), Ended: f.now(), Error: "x"}}})
			if err != nil {
				f.t.Fatalf("RecordAttempts: %v", err)
			}
		}},
		{"Suspend", func(l storage.Lease) { f.suspend(storage.SuspendRequest{Lease: l, ReadyAt: f.after(time.Hour)}) }},
		{"Suspend delivering at once", func(l storage.Lease) {
			f.send(l.RunID, "t", "p")
			if res := f.suspend(storage.SuspendRequest{Lease: l, Wait: &storage.Wait{Key: "ev@v1", Topic: "t"}}); res.Delivered == nil {
				f.t.Fatalf("Suspend = %+v, want the buffered event delivered", res)
			}
		}},
		{"Complete", func(l storage.Lease) { f.complete(l, "out") }},
		{"Claim", func(l storage.Lease) {
			f.clock.Advance(lease + time.Millisecond)
			if c := f.claimOne("worker-b", "wf-"+l.RunID); c.Recoveries != 1 {
				f.t.Fatalf("reclaim = %+v, want a recovery", c)
			}
		}},
		{"Terminate", func(l storage.Lease) {
			f.terminate(storage.TerminateRequest{RunID: l.RunID, Error: storage.ErrorInfo{Message: "stop"}})
		}},
		{"Restart", func(l storage.Lease) { f.restart(l.RunID, "") }},
		{"Restart from a step", func(l storage.Lease) {
			f.checkpoint(l, "first@v1", "")
			f.heartbeatStep(l, "charge@v1", 1)
			f.restart(l.RunID, "first@v1")
		}},
	} {
		id := strings.ReplaceAll(strings.ToLower(tc.name), " ", "-")
		a := f.startAs(storage.NewRun{ID: id})
		step := f.heartbeatStep(a.Lease, "charge@v1", 2)
		f.wantActive(id, &step)
		tc.clear(a.Lease)
		if got := f.get(id).Active; got != nil {
			f.t.Fatalf("Active after %s = %+v, want cleared", tc.name, *got)
		}
	}
}

func testActiveStale(f *fixture) {
	a := f.start("run-1", "")
	f.heartbeatStep(a.Lease, "charge@v1", 1)
	f.clock.Advance(lease + time.Millisecond)
	b := f.claimOne("worker-b")
	f.wantActive("run-1", nil)
	before := f.snapshot()
	stale := storage.ActiveStep{Key: "charge@v1", Attempt: 2, Started: f.now()}
	_, err := f.store.Heartbeat(f.ctx, storage.HeartbeatRequest{Lease: a.Lease, LeaseFor: lease, Step: &stale})
	f.wantErr(err, storage.ErrLeaseLost, "Heartbeat with a step under a stale lease")
	f.wantUnchanged(before, "a stale Heartbeat with a step")
	f.heartbeatStep(b.Lease, "charge@v1", 2)
	f.complete(b.Lease, "")
	before = f.snapshot()
	_, err = f.store.Heartbeat(f.ctx, storage.HeartbeatRequest{Lease: b.Lease, LeaseFor: lease, Step: &stale})
	f.wantErr(err, storage.ErrLeaseLost, "Heartbeat with a step after Complete")
	f.wantUnchanged(before, "a Heartbeat with a step after Complete")
}
