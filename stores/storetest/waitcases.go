package storetest

import (
	"reflect"
	"slices"
	"time"

	"github.com/stemflow/stem/storage"
)

// The cases of waits with several cases (Wait.Also): a select over events
// and child runs, or futures awaited together. They are event cases, kept
// in a file of their own beside events.go.
var waitCaseCases = []testCase{
	{"wait cases/a send to any case's topic delivers as that case's checkpoint and ends the whole wait", testCasesSend},
	{"wait cases/emit reaches a run waiting on the topic in any case, once", testCasesEmit},
	{"wait cases/the oldest buffered event of any case is delivered at suspend", testCasesBuffered},
	{"wait cases/a case whose key has a checkpoint is delivered at suspend", testCasesExisting},
	{"wait cases/a child case is delivered by the child's end with its kind", testCasesChild},
	{"wait cases/a refusal of a later case re-registers every case", testCasesRefuse},
	{"wait cases/cases sharing a key or a topic are ErrInvalidArgument and change nothing", testCasesInvalid},
}

// threeCases is a wait on "a", "b" and "c", keyed a@v1, b@v1, c@v1.
func threeCases() *storage.Wait {
	return &storage.Wait{Key: "a@v1", Topic: "a", Also: []storage.WaitCase{
		{Key: "b@v1", Topic: "b", Kind: storage.KindEvent},
		{Key: "c@v1", Topic: "c"},
	}}
}

func testCasesSend(f *fixture) {
	a := f.start("run-1", "")
	w := threeCases()
	w.Deadline = f.after(time.Hour)
	res := f.suspend(storage.SuspendRequest{Lease: a.Lease, Wait: w, ReadyAt: w.Deadline, SuspendState: []byte("state")})
	if res.Delivered != nil || res.Paused {
		f.t.Fatalf("Suspend = %+v, want parked", res)
	}
	rec := normRecord(f.wantStatus("run-1", storage.StatusWaiting))
	want := normRecord(storage.RunRecord{Wait: w}).Wait
	if !reflect.DeepEqual(rec.Wait, want) {
		f.t.Fatalf("registered wait %+v (also %+v), want %+v (also %+v)", rec.Wait, rec.Wait.Also, want, want.Also)
	}
	f.clock.Advance(time.Second)
	if !f.send("run-1", "c", "C") {
		f.t.Fatal("SendEvent to the wait's third topic reported not delivered")
	}
	cps := f.wantCheckpoints("run-1", "c@v1=C")
	if cps[0].Kind != storage.KindEvent {
		f.t.Fatalf("delivered checkpoint kind %q, want event", cps[0].Kind)
	}
	rec = f.wantStatus("run-1", storage.StatusQueued)
	if rec.Wait != nil {
		f.t.Fatalf("wait %+v still registered after a case was delivered", rec.Wait)
	}
	f.wantTimePtr("ReadyAt", rec.ReadyAt, f.now())
	for _, topic := range []string{"a", "b", "c"} {
		if f.send("run-1", topic, "late") {
			f.t.Fatalf("SendEvent on %q delivered after the wait ended", topic)
		}
	}
	f.wantCheckpoints("run-1", "c@v1=C")
	b := f.claimOne("worker-b")
	if b.Wait != nil {
		f.t.Fatalf("claim after delivery has wait %+v, want none", b.Wait)
	}
}

func testCasesEmit(f *fixture) {
	a := f.start("run-1", "")
	f.suspend(storage.SuspendRequest{Lease: a.Lease, Wait: threeCases()})
	f.create("run-2", wf, "")
	b := f.claimOne("worker-a")
	f.park(b.Lease, "only@v1", "b", "")

	if ids := f.emit("b", "B"); !slices.Equal(ids, []string{"run-1", "run-2"}) {
		f.t.Fatalf("Emit(b) = %v, want run-1 and run-2", ids)
	}
	f.wantCheckpoints("run-1", "b@v1=B")
	f.wantCheckpoints("run-2", "only@v1=B")
	for _, topic := range []string{"a", "b", "c"} {
		if ids := f.emit(topic, "again"); len(ids) != 0 {
			f.t.Fatalf("Emit(%s) after the deliveries reached %v, want nobody", topic, ids)
		}
	}
	f.wantCheckpoints("run-1", "b@v1=B")
	if rec := f.wantStatus("run-1", storage.StatusQueued); rec.Wait != nil {
		f.t.Fatalf("run-1 still waits on %+v", rec.Wait)
	}
}

func testCasesBuffered(f *fixture) {
	f.create("run-1", wf, "")
	f.send("run-1", "c", "C1")
	f.send("run-1", "b", "B1")
	f.send("run-1", "c", "C2")
	f.send("run-1", "zzz", "Z")
	a := f.claimOne("worker-a")
	res := f.suspend(storage.SuspendRequest{Lease: a.Lease, Wait: threeCases()})
	if d := res.Delivered; d == nil || d.Key != "c@v1" || string(d.Output) != "C1" || d.Kind != storage.KindEvent {
		f.t.Fatalf("Suspend delivered %+v, want the oldest buffered event of any case (c@v1=C1)", res.Delivered)
	}
	f.wantStatus("run-1", storage.StatusRunning)
	// The next wait, without c, takes b's buffered event; c's second one
	// stays buffered for a later wait.
	res = f.suspend(storage.SuspendRequest{Lease: a.Lease, Wait: &storage.Wait{Key: "a@v2", Topic: "a", Also: []storage.WaitCase{{Key: "b@v2", Topic: "b"}}}})
	if d := res.Delivered; d == nil || d.Key != "b@v2" || string(d.Output) != "B1" {
		f.t.Fatalf("second Suspend delivered %+v, want b@v2=B1", res.Delivered)
	}
	res = f.suspend(storage.SuspendRequest{Lease: a.Lease, Wait: &storage.Wait{Key: "c@v3", Topic: "c"}})
	if d := res.Delivered; d == nil || d.Key != "c@v3" || string(d.Output) != "C2" {
		f.t.Fatalf("third Suspend delivered %+v, want c@v3=C2", res.Delivered)
	}
	f.wantCheckpoints("run-1", "c@v1=C1", "b@v2=B1", "c@v3=C2")
}

func testCasesExisting(f *fixture) {
	a := f.start("run-1", "")
	f.checkpoint(a.Lease, "b@v1", "done")
	f.send("run-1", "c", "C")
	res := f.suspend(storage.SuspendRequest{Lease: a.Lease, Wait: threeCases()})
	if d := res.Delivered; d == nil || d.Key != "b@v1" || string(d.Output) != "done" {
		f.t.Fatalf("Suspend delivered %+v, want the existing checkpoint of b@v1", res.Delivered)
	}
	f.wantStatus("run-1", storage.StatusRunning)
	f.wantCheckpoints("run-1", "b@v1=done")
	// The buffered event was not consumed.
	res = f.suspend(storage.SuspendRequest{Lease: a.Lease, Wait: &storage.Wait{Key: "c@v1", Topic: "c"}})
	if d := res.Delivered; d == nil || string(d.Output) != "C" {
		f.t.Fatalf("Suspend on c delivered %+v, want the event still buffered", res.Delivered)
	}
}

func testCasesChild(f *fixture) {
	p := f.start("parent", "")
	childTopic := storage.ReservedTopicPrefix + "child/parent/kid"
	f.suspend(storage.SuspendRequest{Lease: p.Lease, Wait: &storage.Wait{Key: "a@v1", Topic: "a", Also: []storage.WaitCase{
		{Key: "kid/result", Topic: childTopic, Kind: storage.KindChild},
	}}})
	f.createRun(storage.NewRun{ID: "parent/kid", Workflow: "wf-kid", ParentID: "parent"})
	k := f.claimOne("worker-k", "wf-kid")
	if err := f.store.Complete(f.ctx, storage.CompleteRequest{Lease: k.Lease, Status: storage.StatusComplete, Output: []byte("out"),
		Notify: &storage.Event{RunID: "parent", Topic: childTopic, Payload: []byte("outcome")}}); err != nil {
		f.t.Fatalf("Complete(child): %v", err)
	}
	cps := f.wantCheckpoints("parent", "kid/result=outcome")
	if cps[0].Kind != storage.KindChild {
		f.t.Fatalf("child case delivered with kind %q, want child", cps[0].Kind)
	}
	if rec := f.wantStatus("parent", storage.StatusQueued); rec.Wait != nil {
		f.t.Fatalf("parent still waits on %+v", rec.Wait)
	}
}

func testCasesRefuse(f *fixture) {
	a := f.start("run-1", "")
	f.suspend(storage.SuspendRequest{Lease: a.Lease, Wait: threeCases()})
	f.send("run-1", "b", "garbage")
	b := f.claimOne("worker-b")
	f.wantCheckpoints("run-1", "b@v1=garbage")
	f.clock.Advance(time.Second)
	ref := refusal("b@v1", 1, "cannot decode payload", f.now())
	res := f.suspend(storage.SuspendRequest{Lease: b.Lease, Wait: threeCases(), Refuse: ref})
	if res.Delivered != nil || res.Paused {
		f.t.Fatalf("Suspend with a refusal of b@v1 = %+v, want parked", res)
	}
	f.wantCheckpoints("run-1")
	want := ref.Attempt
	want.Execution = 1
	f.wantAttempts("Pending after the refusal", f.replay("run-1").Pending, []storage.Attempt{want})
	if !f.send("run-1", "a", "A") {
		f.t.Fatal("SendEvent on the first case's topic not delivered after the refusal")
	}
	f.wantCheckpoints("run-1", "a@v1=A")
}

func testCasesInvalid(f *fixture) {
	a := f.start("run-1", "")
	before := f.snapshot()
	for _, w := range []*storage.Wait{
		{Key: "a@v1", Topic: "a", Also: []storage.WaitCase{{Key: "a@v1", Topic: "b"}}},
		{Key: "a@v1", Topic: "a", Also: []storage.WaitCase{{Key: "b@v1", Topic: "a"}}},
		{Key: "a@v1", Topic: "a", Also: []storage.WaitCase{{Key: "b@v1", Topic: ""}}},
		{Key: "a@v1", Topic: "a", Also: []storage.WaitCase{{Key: "b@v1", Topic: "b", Kind: storage.KindStep}}},
	} {
		_, err := f.store.Suspend(f.ctx, storage.SuspendRequest{Lease: a.Lease, LeaseFor: lease, Wait: w})
		f.wantErr(err, storage.ErrInvalidArgument, "Suspend with malformed cases")
	}
	f.wantUnchanged(before, "malformed wait cases")
}
