package storetest

import (
	"time"

	"github.com/stemflow/stem/storage"
)

// The cases of TakeEvent: a worker whose select still runs steps resolves
// its event and child cases without parking, as Suspend's delivery would.
var takeEventCases = []testCase{
	{"take event/a buffered event of a case is consumed as its checkpoint, the run keeps running", testTakeBuffered},
	{"take event/a child case is taken with its kind", testTakeChild},
	{"take event/an existing case checkpoint is returned and nothing consumed", testTakeExisting},
	{"take event/nothing buffered returns nil and changes nothing", testTakeNothing},
	{"take event/a stale lease is ErrLeaseLost and the event stays buffered", testTakeStale},
	{"take event/an event of another topic is not taken", testTakeOtherTopic},
	{"take event/no wait, or cases sharing a key or a topic, is ErrInvalidArgument and changes nothing", testTakeInvalid},
}

// twoCases is a wait on "a" and "b", keyed a@v<n> and b@v<n>.
func twoCases(n string) *storage.Wait {
	return &storage.Wait{Key: "a@v" + n, Topic: "a", Also: []storage.WaitCase{{Key: "b@v" + n, Topic: "b"}}}
}

func (f *fixture) take(l storage.Lease, w *storage.Wait) *storage.Checkpoint {
	f.t.Helper()
	cp, err := f.store.TakeEvent(f.ctx, storage.TakeEventRequest{Lease: l, LeaseFor: lease, Wait: w})
	if err != nil {
		f.t.Fatalf("TakeEvent(%s): %v", l.RunID, err)
	}
	return cp
}

func testTakeBuffered(f *fixture) {
	a := f.start("run-1", "")
	if f.send("run-1", "b", "B") {
		f.t.Fatal("SendEvent to a running run without a wait reported delivered")
	}
	f.clock.Advance(10 * time.Second)
	cp := f.take(a.Lease, twoCases("1"))
	if cp == nil || cp.Key != "b@v1" || cp.Kind != storage.KindEvent || string(cp.Output) != "B" {
		f.t.Fatalf("TakeEvent = %+v, want b@v1=B of kind event", cp)
	}
	rec := f.wantStatus("run-1", storage.StatusRunning)
	if rec.Wait != nil {
		f.t.Fatalf("TakeEvent registered the wait %+v", rec.Wait)
	}
	f.wantTime("LeaseUntil after TakeEvent", rec.LeaseUntil, f.now().Add(lease))
	f.wantCheckpoints("run-1", "b@v1=B")
	// The event is gone from the buffer: the next wait on the same topics
	// parks, and a send reaches it.
	f.park(a.Lease, "b@v2", "b", "")
	if !f.send("run-1", "b", "B2") {
		f.t.Fatal("SendEvent to the parked wait not delivered")
	}
	f.wantCheckpoints("run-1", "b@v1=B", "b@v2=B2")
}

func testTakeChild(f *fixture) {
	p := f.start("parent", "")
	childTopic := storage.ReservedTopicPrefix + "child/parent/kid"
	f.createRun(storage.NewRun{ID: "parent/kid", Workflow: "wf-kid", ParentID: "parent"})
	k := f.claimOne("worker-k", "wf-kid")
	if err := f.store.Complete(f.ctx, storage.CompleteRequest{Lease: k.Lease, Status: storage.StatusComplete, Output: []byte("out"),
		Notify: &storage.Event{RunID: "parent", Topic: childTopic, Payload: []byte("outcome")}}); err != nil {
		f.t.Fatalf("Complete(child): %v", err)
	}
	f.wantCheckpoints("parent")
	cp := f.take(p.Lease, &storage.Wait{Key: "a@v1", Topic: "a", Also: []storage.WaitCase{
		{Key: "kid/result", Topic: childTopic, Kind: storage.KindChild},
	}})
	if cp == nil || cp.Key != "kid/result" || cp.Kind != storage.KindChild || string(cp.Output) != "outcome" {
		f.t.Fatalf("TakeEvent = %+v, want kid/result=outcome of kind child", cp)
	}
	f.wantStatus("parent", storage.StatusRunning)
	f.wantCheckpoints("parent", "kid/result=outcome")
}

func testTakeExisting(f *fixture) {
	a := f.start("run-1", "")
	f.checkpoint(a.Lease, "b@v1", "done")
	f.send("run-1", "a", "A")
	cp := f.take(a.Lease, twoCases("1"))
	if cp == nil || cp.Key != "b@v1" || string(cp.Output) != "done" {
		f.t.Fatalf("TakeEvent = %+v, want the existing checkpoint of b@v1", cp)
	}
	f.wantCheckpoints("run-1", "b@v1=done")
	// The buffered event was not consumed.
	res := f.suspend(storage.SuspendRequest{Lease: a.Lease, Wait: &storage.Wait{Key: "a@v2", Topic: "a"}})
	if d := res.Delivered; d == nil || string(d.Output) != "A" {
		f.t.Fatalf("Suspend on a delivered %+v, want the event still buffered", res.Delivered)
	}
}

func testTakeNothing(f *fixture) {
	a := f.start("run-1", "")
	f.clock.Advance(10 * time.Second)
	before := f.snapshot()
	if cp := f.take(a.Lease, twoCases("1")); cp != nil {
		f.t.Fatalf("TakeEvent with nothing buffered = %+v, want nil", cp)
	}
	f.wantUnchanged(before, "TakeEvent with nothing buffered")
	if rec := f.wantStatus("run-1", storage.StatusRunning); rec.Wait != nil {
		f.t.Fatalf("TakeEvent registered the wait %+v", rec.Wait)
	}
	if f.send("run-1", "a", "A") {
		f.t.Fatal("SendEvent after an empty TakeEvent was delivered: the take registered a wait")
	}
	f.wantCheckpoints("run-1")
	if cp := f.take(a.Lease, twoCases("1")); cp == nil || cp.Key != "a@v1" || string(cp.Output) != "A" {
		f.t.Fatalf("TakeEvent after the send = %+v, want a@v1=A", cp)
	}
}

func testTakeStale(f *fixture) {
	a := f.start("run-1", "")
	f.send("run-1", "a", "A")
	b, stale := f.takeOver(a)
	before := f.snapshot()
	for _, l := range stale {
		cp, err := f.store.TakeEvent(f.ctx, storage.TakeEventRequest{Lease: l, LeaseFor: lease, Wait: twoCases("1")})
		f.wantErr(err, storage.ErrLeaseLost, "TakeEvent under a stale lease")
		if cp != nil {
			f.t.Fatalf("TakeEvent under a stale lease returned %+v", cp)
		}
	}
	f.wantUnchanged(before, "TakeEvent under a stale lease")
	if cp := f.take(b.Lease, twoCases("1")); cp == nil || cp.Key != "a@v1" || string(cp.Output) != "A" {
		f.t.Fatalf("TakeEvent under the live lease = %+v, want the event still buffered (a@v1=A)", cp)
	}
}

func testTakeOtherTopic(f *fixture) {
	a := f.start("run-1", "")
	f.send("run-1", "zzz", "Z")
	before := f.snapshot()
	if cp := f.take(a.Lease, twoCases("1")); cp != nil {
		f.t.Fatalf("TakeEvent took %+v, an event of another topic", cp)
	}
	f.wantUnchanged(before, "TakeEvent with an event of another topic buffered")
	res := f.suspend(storage.SuspendRequest{Lease: a.Lease, Wait: &storage.Wait{Key: "z@v1", Topic: "zzz"}})
	if d := res.Delivered; d == nil || string(d.Output) != "Z" {
		f.t.Fatalf("Suspend on zzz delivered %+v, want the event still buffered", res.Delivered)
	}
}

func testTakeInvalid(f *fixture) {
	a := f.start("run-1", "")
	f.send("run-1", "a", "A")
	before := f.snapshot()
	for _, w := range []*storage.Wait{
		nil,
		{Key: "a@v1", Topic: "a", Also: []storage.WaitCase{{Key: "a@v1", Topic: "b"}}},
		{Key: "a@v1", Topic: "a", Also: []storage.WaitCase{{Key: "b@v1", Topic: "a"}}},
	} {
		_, err := f.store.TakeEvent(f.ctx, storage.TakeEventRequest{Lease: a.Lease, LeaseFor: lease, Wait: w})
		f.wantErr(err, storage.ErrInvalidArgument, "TakeEvent with a malformed wait")
	}
	f.wantUnchanged(before, "TakeEvent with a malformed wait")
	if cp := f.take(a.Lease, twoCases("1")); cp == nil || cp.Key != "a@v1" {
		f.t.Fatalf("TakeEvent after the refused ones = %+v, want the event still buffered (a@v1=A)", cp)
	}
}
