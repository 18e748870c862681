package storetest

import (
	"errors"
	"fmt"
	"strings"

	"github.com/stemflow/stem/storage"
)

var nameCases = []testCase{
	{"names/create runs refuses bad workflow names and run IDs and stores nothing", testNamesCreate},
	{"names/a run ID with '/' is a child's and needs its parent", testNamesChildIDs},
	{"names/claim refuses bad workflow names", testNamesClaim},
	{"names/checkpoint, attempt and heartbeat keys are checked", testNamesKeys},
	{"names/emit and send event refuse bad and reserved topics", testNamesEventTopics},
	{"names/suspend refuses bad wait keys and topics, not a child wait", testNamesWaits},
	{"names/filters, cursors and the catalog are checked alike", testNamesLookups},
}

// badName is a name every rule refuses.
type badName struct{ what, v string }

// badNames are refused as workflow names, run IDs, topics and keys:
// Postgres cannot store NUL or invalid UTF-8, and the others could not be
// shown or typed by an operator. over is the length one byte too long.
func badNames(over int) []badName {
	return []badName{
		{"empty", ""},
		{"NUL", "a\x00b"},
		{"invalid UTF-8", "a\xffb"},
		{"control character", "a\x1b[2Jb"},
		{"over-long", strings.Repeat("n", over)},
	}
}

// refused checks that a call was refused as its request type's Validate
// refuses it (rule), in the same words, with ErrInvalidArgument.
func (f *fixture) refused(what string, rule, err error) {
	f.t.Helper()
	if rule == nil || !errors.Is(rule, storage.ErrInvalidArgument) {
		f.t.Fatalf("%s: the request passes its own Validate (%v); the case is wrong", what, rule)
	}
	f.wantErr(err, storage.ErrInvalidArgument, what)
	if !strings.Contains(err.Error(), rule.Error()) {
		f.t.Fatalf("%s: error %q does not say what the contract says: %q", what, err, rule)
	}
}

func testNamesCreate(f *fixture) {
	f.create("run-1", wf, "")
	before := f.snapshot()
	create := func(what string, runs ...storage.NewRun) {
		f.t.Helper()
		_, err := f.store.CreateRuns(f.ctx, runs)
		f.refused("CreateRuns with "+what, storage.ValidateNewRuns(runs), err)
	}
	for _, b := range badNames(storage.MaxNameLen + 1) {
		if b.v != "" { // an empty ID is refused by the older case
			create("a run ID "+b.what, storage.NewRun{ID: b.v, Workflow: wf})
		}
		create("a workflow name "+b.what, storage.NewRun{ID: "run-2", Workflow: b.v})
		// One bad run in a batch: the good one is not created either.
		create("a batch with a workflow name "+b.what, storage.NewRun{ID: "run-3", Workflow: wf}, storage.NewRun{ID: "run-4", Workflow: b.v})
	}
	create("a workflow name with '/'", storage.NewRun{ID: "run-2", Workflow: "orders/fulfil"})
	f.wantUnchanged(before, "CreateRuns with bad names")
}

func testNamesChildIDs(f *fixture) {
	f.create("p1", wf, "")
	before := f.snapshot()
	for _, c := range []struct {
		what string
		run  storage.NewRun
	}{
		{"a child's ID without a parent", storage.NewRun{ID: "p1/child", Workflow: wf}},
		{"a child's ID under another parent", storage.NewRun{ID: "p1/child", Workflow: wf, ParentID: "p2"}},
		{"a child's ID without a call", storage.NewRun{ID: "p1/", Workflow: wf, ParentID: "p1"}},
		{"a parent ID with NUL", storage.NewRun{ID: "p\x00/child", Workflow: wf, ParentID: "p\x00"}},
		{"a child's call with a control character", storage.NewRun{ID: "p1/c\x1b", Workflow: wf, ParentID: "p1"}},
		{"an over-long child ID", storage.NewRun{ID: "p1/" + strings.Repeat("c", storage.MaxDerivedLen), Workflow: wf, ParentID: "p1"}},
	} {
		runs := []storage.NewRun{c.run}
		_, err := f.store.CreateRuns(f.ctx, runs)
		f.refused("CreateRuns with "+c.what, storage.ValidateNewRuns(runs), err)
	}
	f.wantUnchanged(before, "CreateRuns with bad child IDs")
	// The ID derived from its parent is taken, nested too, and the parent
	// lists its child.
	f.createRun(storage.NewRun{ID: "p1/child", Workflow: wf, ParentID: "p1"})
	f.createRun(storage.NewRun{ID: "p1/child/grand#0", Workflow: wf, ParentID: "p1/child"})
	if got := recordIDs(f.listAll(storage.ListRunsQuery{ParentID: "p1"})); len(got) != 1 || got[0] != "p1/child" {
		f.t.Fatalf("children of p1 = %v, want p1/child", got)
	}
}

func testNamesClaim(f *fixture) {
	f.create("run-1", wf, "")
	before := f.snapshot()
	for _, b := range badNames(storage.MaxNameLen + 1) {
		req := storage.ClaimRequest{Owner: "worker-a", Workflows: []string{wf, b.v}, Limit: 10, LeaseFor: lease}
		_, err := f.store.Claim(f.ctx, req)
		f.refused("Claim with a workflow name "+b.what, req.Validate(), err)
	}
	req := storage.ClaimRequest{Owner: "worker\x00", Workflows: []string{wf}, Limit: 10, LeaseFor: lease}
	_, err := f.store.Claim(f.ctx, req)
	f.refused("Claim with an owner with NUL", req.Validate(), err)
	f.wantUnchanged(before, "Claim with bad names")
	// The run is claimed by a good claim.
	f.claimOne("worker-a")
}

func testNamesKeys(f *fixture) {
	a := f.start("run-1", "")
	f.checkpoint(a.Lease, "s@v1", "1")
	before := f.snapshot()
	l := a.Lease
	for _, b := range badNames(storage.MaxDerivedLen + 1) {
		cp := storage.CheckpointRequest{Lease: l, LeaseFor: lease, Checkpoint: storage.Checkpoint{Key: b.v, Kind: storage.KindStep, Output: []byte("x")}}
		_, err := f.store.Checkpoint(f.ctx, cp)
		f.refused("Checkpoint with a key "+b.what, cp.Validate(), err)

		at := storage.Attempt{Key: b.v, Number: 1, Started: f.now(), Ended: f.now(), Error: "boom"}
		cpa := storage.CheckpointRequest{Lease: l, LeaseFor: lease, Checkpoint: storage.Checkpoint{Key: "t@v1", Kind: storage.KindStep}, Attempts: []storage.Attempt{at}}
		_, err = f.store.Checkpoint(f.ctx, cpa)
		f.refused("Checkpoint with an attempt's key "+b.what, cpa.Validate(), err)

		ra := storage.RecordAttemptsRequest{Lease: l, LeaseFor: lease, Attempts: []storage.Attempt{at}}
		f.refused("RecordAttempts with a key "+b.what, ra.Validate(), f.store.RecordAttempts(f.ctx, ra))

		if b.v != "" {
			hb := storage.HeartbeatRequest{Lease: l, LeaseFor: lease, Step: &storage.ActiveStep{Key: b.v, Attempt: 1, Started: f.now()}}
			f.refused("Heartbeat with a step key "+b.what, hb.Validate(), errOf(f.store.Heartbeat(f.ctx, hb)))
		}

		if b.v != "" {
			rr := storage.RestartRequest{RunID: "run-1", FromKey: b.v}
			f.refused("Restart from a key "+b.what, rr.Validate(), f.store.Restart(f.ctx, rr))
		}
	}
	f.wantUnchanged(before, "writes with bad keys")
	// The lease survived every refused write; an autoversion key is fine.
	f.checkpoint(l, "pack@v1#0", "2")
}

func testNamesEventTopics(f *fixture) {
	// A parent waits for its child on the runtime's reserved topic.
	p := f.start("p2", "")
	childTopic := "stem.child/p2/child"
	f.park(p.Lease, "child", childTopic, storage.KindChild)
	f.create("other", "wf-other", "")
	before := f.snapshot()
	topics := badNames(storage.MaxNameLen + 1)
	topics = append(topics, badName{"reserved for a child", childTopic}, badName{"reserved", "stem.anything"}, badName{"with a space", "a b"})
	for _, b := range topics {
		em := storage.EmitRequest{Topic: b.v, Payload: []byte(`"forged"`)}
		_, err := f.store.Emit(f.ctx, em)
		f.refused("Emit on a topic "+b.what, em.Validate(), err)
		for _, id := range []string{"p2", "other"} {
			ev := storage.Event{RunID: id, Topic: b.v, Payload: []byte(`"forged"`)}
			_, err = f.store.SendEvent(f.ctx, ev)
			f.refused(fmt.Sprintf("SendEvent to %s on a topic %s", id, b.what), ev.Validate(), err)
		}
	}
	// A run ID no store can hold is refused alike, not looked up.
	for _, b := range badNames(0)[1:3] {
		ev := storage.Event{RunID: b.v, Topic: "t", Payload: []byte(`"x"`)}
		_, err := f.store.SendEvent(f.ctx, ev)
		f.refused("SendEvent to a run ID "+b.what, ev.Validate(), err)
	}
	f.wantUnchanged(before, "events on bad or reserved topics")

	// The child's own outcome still reaches its parent on that topic.
	f.createRun(storage.NewRun{ID: "p2/child", Workflow: "kid", ParentID: "p2"})
	c := f.claimOne("worker-c", "kid")
	err := f.store.Complete(f.ctx, storage.CompleteRequest{Lease: c.Lease, Status: storage.StatusComplete, Output: []byte(`42`),
		Notify: &storage.Event{RunID: "p2", Topic: childTopic, Payload: []byte(`{"output":42}`)}})
	if err != nil {
		f.t.Fatalf("Complete with the child's notify: %v", err)
	}
	f.wantCheckpoints("p2", `child={"output":42}`)
	f.wantStatus("p2", storage.StatusQueued)
}

func testNamesWaits(f *fixture) {
	a := f.start("run-1", "")
	before := f.snapshot()
	l := a.Lease
	suspend := func(what string, w storage.Wait) {
		f.t.Helper()
		req := storage.SuspendRequest{Lease: l, LeaseFor: lease, Wait: &w, ReadyAt: f.after(0)}
		_, err := f.store.Suspend(f.ctx, req)
		f.refused("Suspend with "+what, req.Validate(), err)
	}
	for _, b := range badNames(storage.MaxNameLen + 1)[1:] { // an empty topic or key: the older case
		suspend("a wait topic "+b.what, storage.Wait{Key: "w", Topic: b.v})
	}
	for _, b := range badNames(storage.MaxDerivedLen + 1)[1:] {
		suspend("a wait key "+b.what, storage.Wait{Key: b.v, Topic: "t"})
		// A child's topic derives from its ID, which may be one stored
		// before the rules: only what no store can hold is refused.
		if b.what != "control character" {
			suspend("a child wait topic "+b.what, storage.Wait{Key: "w", Topic: "stem.child/" + b.v, Kind: storage.KindChild})
		}
	}
	suspend("an event wait on a reserved topic", storage.Wait{Key: "w", Topic: "stem.child/run-1/child"})
	suspend("an event wait on a reserved topic, kind given", storage.Wait{Key: "w", Topic: "stem.x", Kind: storage.KindEvent})
	f.wantUnchanged(before, "Suspend with bad waits")
	// The lease held; a child wait on the runtime's topic parks.
	f.park(l, "child", "stem.child/run-1/child", storage.KindChild)
	if w := f.get("run-1").Wait; w == nil || w.Topic != "stem.child/run-1/child" {
		f.t.Fatalf("run-1 waits on %+v, want its child's topic", w)
	}
}

func testNamesLookups(f *fixture) {
	f.create("run-1", wf, "")
	before := f.snapshot()
	for _, b := range []badName{{"NUL", "a\x00b"}, {"invalid UTF-8", "a\xffb"}} {
		for i, q := range []storage.ListRunsQuery{{Workflow: b.v}, {ParentID: b.v}, {After: b.v}} {
			_, err := f.store.ListRuns(f.ctx, q)
			f.refused(fmt.Sprintf("ListRuns with a %s %s", []string{"workflow filter", "parent filter", "cursor"}[i], b.what), q.Validate(), err)
		}
	}
	for _, b := range badNames(storage.MaxNameLen + 1)[1:] {
		for i, c := range []storage.Catalog{
			{Workflows: []storage.WorkflowType{{Name: "ok", Version: 1}, {Name: b.v, Version: 1}}},
			{Events: []storage.EventType{{Topic: "ok"}, {Topic: b.v}}},
		} {
			f.refused(fmt.Sprintf("PutCatalog with a %s %s", []string{"workflow name", "topic"}[i], b.what), c.Validate(), f.store.PutCatalog(f.ctx, c))
		}
	}
	c := storage.Catalog{Events: []storage.EventType{{Topic: "stem.child/x"}}}
	f.refused("PutCatalog with a reserved topic", c.Validate(), f.store.PutCatalog(f.ctx, c))
	f.wantUnchanged(before, "lookups and catalogs with bad names")
	// A filter that is only unusual finds nothing, and is no error.
	if got := f.listAll(storage.ListRunsQuery{Workflow: "a\x1bb"}); len(got) != 0 {
		f.t.Fatalf("ListRuns of an unusual workflow = %v", recordIDs(got))
	}
}
