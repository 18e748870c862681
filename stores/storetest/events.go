package storetest

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/stemflow/stem/storage"
)

var eventCases = []testCase{
	{"event/send after the wait registers delivers and wakes", testSendAfterWait},
	{"event/emit after the wait registers delivers to every waiting run", testEmitAfterWait},
	{"event/send before the wait registers is delivered at suspend", testSendBeforeWait},
	{"event/buffered events are consumed oldest first per topic", testBufferedOrder},
	{"event/emit does not buffer", testEmitDoesNotBuffer},
	{"event/concurrent emits deliver once", testConcurrentEmits},
	{"event/payload exactly once across a crash after delivery", testDeliveryCrash},
	{"event/timeout is distinguishable from a first wait", testTimeout},
	{"event/timeout checkpoint after a delivery returns the event", testTimeoutAfterDelivery},
	{"refuse/a refused event is taken back, its attempt kept, and the run waits again", testRefuse},
	{"refuse/a buffered event behind the refused one is delivered at once", testRefuseBuffered},
	{"refuse/a key without an event checkpoint is ErrInvalidState and changes nothing", testRefuseInvalid},
}

func testSendAfterWait(f *fixture) {
	a := f.start("run-1", "")
	res := f.suspend(storage.SuspendRequest{
		Lease:        a.Lease,
		Wait:         &storage.Wait{Key: "approve@v1", Topic: "approval"},
		SuspendState: []byte("state"),
	})
	if res.Delivered != nil || res.Paused {
		f.t.Fatalf("Suspend = %+v, want parked", res)
	}
	rec := f.wantStatus("run-1", storage.StatusWaiting)
	if rec.ReadyAt != nil || rec.Wait == nil || rec.Wait.Key != "approve@v1" || rec.Wait.Topic != "approval" || rec.Wait.Deadline != nil {
		f.t.Fatalf("record = %+v (wait %+v), want no ReadyAt and the registered wait", rec, rec.Wait)
	}
	f.clock.Advance(24 * time.Hour)
	f.claimNone()

	if !f.send("run-1", "approval", "yes") {
		f.t.Fatal("SendEvent to a waiting run reported not delivered")
	}
	cps := f.wantCheckpoints("run-1", "approve@v1=yes")
	if cps[0].Kind != storage.KindEvent || cps[0].Error != nil {
		f.t.Fatalf("delivered checkpoint %+v, want kind event (the default) without error", cps[0])
	}
	f.wantTime("delivered CreatedAt", cps[0].CreatedAt, f.now())
	rec = f.wantStatus("run-1", storage.StatusQueued)
	if rec.Wait != nil {
		f.t.Fatalf("wait %+v still registered after delivery", rec.Wait)
	}
	f.wantTimePtr("ReadyAt", rec.ReadyAt, f.now())
	b := f.claimOne("worker-b")
	if b.Wait != nil || b.Recoveries != 0 {
		f.t.Fatalf("claim after delivery = %+v, want no wait and no recovery", b)
	}
	f.wantBytes("SuspendState", b.SuspendState, "state")
	if f.send("run-1", "approval", "again") {
		f.t.Fatal("second SendEvent delivered: the wait was not removed")
	}
	f.wantCheckpoints("run-1", "approve@v1=yes")
}

func testEmitAfterWait(f *fixture) {
	for _, w := range []struct {
		id, topic string
		kind      storage.CheckpointKind
	}{{"run-1", "price", storage.KindEvent}, {"run-2", "price", ""}, {"run-3", "other", storage.KindEvent}} {
		a := f.start(w.id, "")
		f.park(a.Lease, "quote@v1", w.topic, w.kind)
	}
	f.create("run-4", wf, "")

	if ids := f.emit("price", "42"); !slices.Equal(ids, []string{"run-1", "run-2"}) {
		f.t.Fatalf("Emit(price) = %v, want run-1 and run-2", ids)
	}
	for _, id := range []string{"run-1", "run-2"} {
		cps := f.wantCheckpoints(id, "quote@v1=42")
		if cps[0].Kind != storage.KindEvent {
			f.t.Fatalf("checkpoint kind %q, want event", cps[0].Kind)
		}
		rec := f.wantStatus(id, storage.StatusQueued)
		if rec.Wait != nil {
			f.t.Fatalf("%s still waits on %+v", id, rec.Wait)
		}
		f.wantTimePtr("ReadyAt of "+id, rec.ReadyAt, f.now())
	}
	f.wantStatus("run-3", storage.StatusWaiting)
	f.wantCheckpoints("run-3")
	f.wantCheckpoints("run-4")
	if ids := f.emit("price", "43"); len(ids) != 0 {
		f.t.Fatalf("second Emit reached %v, want nobody", ids)
	}
	got := claimedIDs(f.claim("worker-b", 10))
	slices.Sort(got)
	if !slices.Equal(got, []string{"run-1", "run-2", "run-4"}) {
		f.t.Fatalf("claimed %v, want run-1, run-2, run-4", got)
	}
}

func testSendBeforeWait(f *fixture) {
	f.create("run-1", wf, "")
	if f.send("run-1", "approval", "early") {
		f.t.Fatal("SendEvent to a run not waiting reported delivered")
	}
	f.wantCheckpoints("run-1")
	a := f.claimOne("worker-a")
	f.clock.Advance(time.Second)
	res := f.suspend(storage.SuspendRequest{
		Lease: a.Lease, LeaseFor: 2 * lease,
		Wait:         &storage.Wait{Key: "approve@v1", Topic: "approval"},
		SuspendState: []byte("state"),
	})
	d := res.Delivered
	if d == nil || res.Paused || d.Key != "approve@v1" || d.Kind != storage.KindEvent || string(d.Output) != "early" {
		f.t.Fatalf("Suspend = %+v (delivered %+v), want the buffered event as approve@v1", res, d)
	}
	rec := f.wantStatus("run-1", storage.StatusRunning)
	if rec.Token != a.Lease.Token || rec.Owner != "worker-a" || rec.Wait != nil {
		f.t.Fatalf("record = %+v, want still leased to worker-a with no wait", rec)
	}
	f.wantLeaseUntil("run-1", f.now().Add(2*lease))
	f.wantCheckpoints("run-1", "approve@v1=early")
	f.checkpoint(a.Lease, "next@v1", "")
	// A Suspend on the delivered key again gets the same checkpoint.
	res = f.suspend(storage.SuspendRequest{Lease: a.Lease, Wait: &storage.Wait{Key: "approve@v1", Topic: "approval"}})
	if res.Delivered == nil || string(res.Delivered.Output) != "early" || res.Delivered.Seq != d.Seq {
		f.t.Fatalf("repeated Suspend = %+v, want the stored checkpoint", res)
	}
	f.wantCheckpoints("run-1", "approve@v1=early", "next@v1=")
}

func testBufferedOrder(f *fixture) {
	f.create("run-1", wf, "")
	f.send("run-1", "t", "a")
	f.send("run-1", "other", "x")
	f.send("run-1", "t", "b")
	a := f.claimOne("worker-a")
	for _, w := range []struct{ key, topic, want string }{{"k1", "t", "a"}, {"k2", "t", "b"}, {"k3", "other", "x"}} {
		res := f.suspend(storage.SuspendRequest{Lease: a.Lease, Wait: &storage.Wait{Key: w.key, Topic: w.topic, Kind: storage.KindEvent}})
		if res.Delivered == nil || res.Delivered.Key != w.key || string(res.Delivered.Output) != w.want {
			f.t.Fatalf("Suspend(%s on %s) = %+v, want %q delivered", w.key, w.topic, res.Delivered, w.want)
		}
	}
	f.park(a.Lease, "k4", "t", storage.KindEvent)
	f.wantStatus("run-1", storage.StatusWaiting)
	f.wantCheckpoints("run-1", "k1=a", "k2=b", "k3=x")
}

func testEmitDoesNotBuffer(f *fixture) {
	f.create("run-1", wf, "")
	if ids := f.emit("t", "lost"); len(ids) != 0 {
		f.t.Fatalf("Emit reached %v, want nobody", ids)
	}
	a := f.claimOne("worker-a")
	f.park(a.Lease, "ev@v1", "t", storage.KindEvent)
	f.wantStatus("run-1", storage.StatusWaiting)
	f.wantCheckpoints("run-1")
}

func testConcurrentEmits(f *fixture) {
	const runs = 20
	for i := range runs {
		a := f.start(runID(i), "")
		f.park(a.Lease, "ev@v1", fmt.Sprintf("topic-%d", i), storage.KindEvent)
	}
	type result struct {
		payload string
		ids     []string
	}
	results := make([][2]result, runs)
	var wg sync.WaitGroup
	for i := range runs {
		for e := range 2 {
			wg.Go(func() {
				payload := fmt.Sprintf("emit-%d", e)
				ids, err := f.store.Emit(f.ctx, storage.EmitRequest{Topic: fmt.Sprintf("topic-%d", i), Payload: []byte(payload)})
				if err != nil {
					f.t.Errorf("Emit: %v", err)
				}
				results[i][e] = result{payload, ids}
			})
		}
	}
	wg.Wait()
	if f.t.Failed() {
		return
	}
	for i := range runs {
		var winner string
		for _, r := range results[i] {
			switch {
			case len(r.ids) == 1 && r.ids[0] == runID(i) && winner == "":
				winner = r.payload
			case len(r.ids) != 0:
				f.t.Fatalf("run %d: emits reported %+v, want exactly one delivery", i, results[i])
			}
		}
		if winner == "" {
			f.t.Fatalf("run %d: neither emit delivered: %+v", i, results[i])
		}
		f.wantCheckpoints(runID(i), "ev@v1="+winner)
		f.wantStatus(runID(i), storage.StatusQueued)
	}
}

func testDeliveryCrash(f *fixture) {
	a := f.start("run-1", "")
	f.park(a.Lease, "approve@v1", "approval", storage.KindEvent)
	if !f.send("run-1", "approval", "yes") {
		f.t.Fatal("SendEvent not delivered")
	}
	b := f.claimOne("worker-b")
	// worker-b dies without writing anything.
	f.clock.Advance(lease + time.Millisecond)
	c := f.claimOne("worker-c")
	if c.Recoveries != 1 || c.Wait != nil {
		f.t.Fatalf("claim after the crash = %+v, want a recovery and no wait", c)
	}
	f.wantCheckpoints("run-1", "approve@v1=yes")
	res := f.suspend(storage.SuspendRequest{Lease: c.Lease, Wait: &storage.Wait{Key: "approve@v1", Topic: "approval"}})
	if res.Delivered == nil || res.Delivered.Key != "approve@v1" || string(res.Delivered.Output) != "yes" || res.Paused {
		f.t.Fatalf("re-Suspend on the delivered key = %+v, want the stored payload", res)
	}
	rec := f.wantStatus("run-1", storage.StatusRunning)
	if rec.Owner != "worker-c" || rec.Token != c.Lease.Token || rec.Wait != nil {
		f.t.Fatalf("record = %+v, want leased to worker-c, no wait", rec)
	}
	f.wantCheckpoints("run-1", "approve@v1=yes")
	_, err := f.store.Suspend(f.ctx, storage.SuspendRequest{Lease: b.Lease, LeaseFor: lease, Wait: &storage.Wait{Key: "approve@v1", Topic: "approval"}})
	f.wantErr(err, storage.ErrLeaseLost, "Suspend by the crashed worker")
}

// timedWait parks run-1 on an event wait with a deadline a minute away and
// returns the claim after the deadline.
func timedWait(f *fixture) (deadline time.Time, claimed storage.ClaimedRun) {
	f.t.Helper()
	a := f.start("run-1", "")
	if a.Wait != nil {
		f.t.Fatalf("first claim has wait %+v", a.Wait)
	}
	deadline = f.now().Add(time.Minute)
	f.suspend(storage.SuspendRequest{
		Lease:        a.Lease,
		Wait:         &storage.Wait{Key: "approve@v1", Topic: "approval", Kind: storage.KindEvent, Deadline: &deadline},
		ReadyAt:      &deadline,
		SuspendState: []byte("state"),
	})
	rec := f.wantStatus("run-1", storage.StatusWaiting)
	f.wantTimePtr("ReadyAt", rec.ReadyAt, deadline)
	if rec.Wait == nil {
		f.t.Fatal("wait not registered")
	}
	f.wantTimePtr("Wait.Deadline", rec.Wait.Deadline, deadline)
	f.clock.Advance(time.Minute - time.Millisecond)
	f.claimNone()
	f.clock.Advance(time.Millisecond)
	b := f.claimOne("worker-b")
	w := b.Wait
	if w == nil || w.Key != "approve@v1" || w.Topic != "approval" || w.Kind != storage.KindEvent {
		f.t.Fatalf("claim after the deadline has wait %+v, want the timed-out wait", w)
	}
	f.wantTimePtr("claimed Wait.Deadline", w.Deadline, deadline)
	f.wantBytes("SuspendState", b.SuspendState, "state")
	if b.Recoveries != 0 {
		f.t.Fatalf("Recoveries = %d, want 0", b.Recoveries)
	}
	return deadline, b
}

func timeoutReq(l storage.Lease) storage.CheckpointRequest {
	return storage.CheckpointRequest{
		Lease: l, LeaseFor: lease,
		Checkpoint: storage.Checkpoint{
			Key: "approve@v1", Kind: storage.KindEvent,
			Error: &storage.ErrorInfo{Message: "event wait timed out", Code: storage.CodeEventTimeout},
		},
	}
}

func testTimeout(f *fixture) {
	_, b := timedWait(f)
	if rec := f.wantStatus("run-1", storage.StatusRunning); rec.Wait == nil {
		f.t.Fatal("wait dropped by the claim; the worker could not tell a timeout")
	}
	res, err := f.store.Checkpoint(f.ctx, timeoutReq(b.Lease))
	if err != nil || res.Existing != nil {
		f.t.Fatalf("timeout Checkpoint = %+v, %v; want written", res, err)
	}
	if rec := f.get("run-1"); rec.Wait != nil {
		f.t.Fatalf("wait %+v still registered after the timeout checkpoint", rec.Wait)
	}
	cps := f.wantCheckpoints("run-1", "approve@v1=")
	if cps[0].Error == nil || cps[0].Error.Code != storage.CodeEventTimeout {
		f.t.Fatalf("timeout checkpoint %+v, want error code %s", cps[0], storage.CodeEventTimeout)
	}
	if f.send("run-1", "approval", "late") {
		f.t.Fatal("an event after the timeout was delivered to the removed wait")
	}
	f.wantCheckpoints("run-1", "approve@v1=")
	f.suspend(storage.SuspendRequest{Lease: b.Lease, ReadyAt: f.after(0)})
	if c := f.claimOne("worker-c"); c.Wait != nil {
		f.t.Fatalf("claim after the timeout was handled has wait %+v", c.Wait)
	}
}

func testTimeoutAfterDelivery(f *fixture) {
	_, b := timedWait(f)
	if !f.send("run-1", "approval", "just in time") {
		f.t.Fatal("SendEvent to a running run with a registered wait not delivered")
	}
	rec := f.wantStatus("run-1", storage.StatusRunning)
	if rec.Wait != nil || rec.Owner != "worker-b" || rec.Token != b.Lease.Token {
		f.t.Fatalf("record = %+v, want still leased to worker-b with no wait", rec)
	}
	res, err := f.store.Checkpoint(f.ctx, timeoutReq(b.Lease))
	if err != nil {
		f.t.Fatalf("timeout Checkpoint: %v", err)
	}
	ex := res.Existing
	if ex == nil || ex.Key != "approve@v1" || string(ex.Output) != "just in time" || ex.Error != nil {
		f.t.Fatalf("timeout Checkpoint Existing = %+v, want the delivered event", ex)
	}
	f.wantCheckpoints("run-1", "approve@v1=just in time")
}

func refusal(key string, number int, why string, at time.Time) *storage.Refusal {
	return &storage.Refusal{Key: key, Attempt: storage.Attempt{Key: key, Number: number, Started: at, Ended: at, Error: why}}
}

func testRefuse(f *fixture) {
	a := f.start("run-1", "")
	f.checkpoint(a.Lease, "before@v1", "B")
	f.park(a.Lease, "approve@v1", "approval", storage.KindEvent)
	if !f.send("run-1", "approval", "garbage") {
		f.t.Fatal("SendEvent not delivered")
	}
	b := f.claimOne("worker-b")
	f.wantCheckpoints("run-1", "before@v1=B", "approve@v1=garbage")

	f.clock.Advance(time.Second)
	ref := refusal("approve@v1", 1, "cannot decode payload", f.now())
	res := f.suspend(storage.SuspendRequest{
		Lease:        b.Lease,
		Wait:         &storage.Wait{Key: "approve@v1", Topic: "approval", Kind: storage.KindEvent},
		SuspendState: []byte("state"),
		Refuse:       ref,
	})
	if res.Delivered != nil || res.Paused {
		f.t.Fatalf("Suspend with a refusal = %+v, want parked", res)
	}
	rec := f.wantStatus("run-1", storage.StatusWaiting)
	if rec.Wait == nil || rec.Wait.Key != "approve@v1" || rec.Wait.Topic != "approval" {
		f.t.Fatalf("wait after the refusal = %+v, want approve@v1 on approval", rec.Wait)
	}
	want := ref.Attempt
	want.Execution = 1
	r := f.replay("run-1")
	f.wantCheckpoints("run-1", "before@v1=B")
	f.wantAttempts("LoadReplay Pending after the refusal", r.Pending, []storage.Attempt{want})
	h := f.history("run-1", 0)
	if len(h.Steps) != 1 {
		f.t.Fatalf("ListSteps after the refusal = %+v, want before@v1 only", h)
	}
	f.wantAttempts("ListSteps Pending after the refusal", h.Pending, []storage.Attempt{want})

	// A second event is delivered as to any waiting run.
	if !f.send("run-1", "approval", "yes") {
		f.t.Fatal("second SendEvent not delivered")
	}
	cps := f.wantCheckpoints("run-1", "before@v1=B", "approve@v1=yes")
	if cps[1].Kind != storage.KindEvent {
		f.t.Fatalf("second delivery kind %q, want event", cps[1].Kind)
	}
	c := f.claimOne("worker-c")
	f.wantBytes("SuspendState", c.SuspendState, "state")
	h = f.history("run-1", 0)
	if len(h.Pending) != 0 || len(h.Steps) != 2 || h.Steps[1].Key != "approve@v1" {
		f.t.Fatalf("ListSteps after the second event = %+v, want approve@v1 with nothing pending", h)
	}
	f.wantAttempts("attempts of approve@v1", h.Steps[1].Attempts, []storage.Attempt{want})
	if r := f.replay("run-1"); len(r.Pending) != 0 {
		f.t.Fatalf("LoadReplay Pending = %+v, want none", r.Pending)
	}
}

func testRefuseBuffered(f *fixture) {
	a := f.start("run-1", "")
	f.park(a.Lease, "approve@v1", "approval", storage.KindEvent)
	if !f.send("run-1", "approval", "garbage") {
		f.t.Fatal("SendEvent not delivered")
	}
	// The run is queued, not waiting: the next event is buffered.
	if f.send("run-1", "approval", "yes") {
		f.t.Fatal("SendEvent to a run no longer waiting reported delivered")
	}
	b := f.claimOne("worker-b")
	f.clock.Advance(time.Second)
	ref := refusal("approve@v1", 1, "cannot decode payload", f.now())
	res := f.suspend(storage.SuspendRequest{
		Lease: b.Lease, LeaseFor: 2 * lease,
		Wait:   &storage.Wait{Key: "approve@v1", Topic: "approval"},
		Refuse: ref,
	})
	d := res.Delivered
	if d == nil || res.Paused || d.Key != "approve@v1" || d.Kind != storage.KindEvent || string(d.Output) != "yes" {
		f.t.Fatalf("Suspend with a refusal = %+v (delivered %+v), want the buffered event as approve@v1", res, d)
	}
	rec := f.wantStatus("run-1", storage.StatusRunning)
	if rec.Token != b.Lease.Token || rec.Wait != nil {
		f.t.Fatalf("record = %+v, want still leased to worker-b with no wait", rec)
	}
	f.wantLeaseUntil("run-1", f.now().Add(2*lease))
	f.wantCheckpoints("run-1", "approve@v1=yes")
	want := ref.Attempt
	want.Execution = 1
	h := f.history("run-1", 0)
	if len(h.Pending) != 0 || len(h.Steps) != 1 {
		f.t.Fatalf("ListSteps = %+v, want approve@v1 with nothing pending", h)
	}
	f.wantAttempts("attempts of approve@v1", h.Steps[0].Attempts, []storage.Attempt{want})
	// The buffer is empty now.
	f.checkpoint(b.Lease, "next@v1", "")
	f.park(b.Lease, "again@v1", "approval", storage.KindEvent)
}

func testRefuseInvalid(f *fixture) {
	a := f.start("run-1", "")
	f.checkpoint(a.Lease, "step@v1", "S")
	f.send("run-1", "approval", "buffered")
	before := f.snapshot()
	for _, key := range []string{"step@v1", "absent@v1"} {
		_, err := f.store.Suspend(f.ctx, storage.SuspendRequest{
			Lease: a.Lease, LeaseFor: lease,
			Wait:         &storage.Wait{Key: key, Topic: "approval"},
			SuspendState: []byte("state"),
			Refuse:       refusal(key, 1, "bad", f.now()),
		})
		f.wantErr(err, storage.ErrInvalidState, "Suspend refusing "+key)
	}
	f.wantUnchanged(before, "a Suspend refusing a key without an event checkpoint")
	// The buffered event was not consumed and the lease holds.
	res := f.suspend(storage.SuspendRequest{Lease: a.Lease, Wait: &storage.Wait{Key: "ev@v1", Topic: "approval"}})
	if res.Delivered == nil || string(res.Delivered.Output) != "buffered" {
		f.t.Fatalf("Suspend = %+v, want the buffered event", res)
	}
	// A refusal of an event checkpoint of an earlier execution is refused
	// too: only the current execution's count.
	f.restart("run-1", "")
	f.letGo(a.Lease)
	b := f.claimOne("worker-b")
	before = f.snapshot()
	_, err := f.store.Suspend(f.ctx, storage.SuspendRequest{
		Lease: b.Lease, LeaseFor: lease,
		Wait:   &storage.Wait{Key: "ev@v1", Topic: "approval"},
		Refuse: refusal("ev@v1", 1, "bad", f.now()),
	})
	f.wantErr(err, storage.ErrInvalidState, "Suspend refusing an event of an earlier execution")
	f.wantUnchanged(before, "a Suspend refusing an event of an earlier execution")
}
