package storetest

import (
	"fmt"

	"github.com/stemflow/stem/storage"
)

var invisibleCases = []testCase{
	{"invisible/names with invisible characters are refused and write nothing", testInvisibleNames},
}

// invisibleChars are characters that do not show or that reorder the text
// around them (storage.Invisible), so a name holding one could pass for
// another: a bidirectional override and isolate, a zero-width space and
// joiner, a byte order mark, a no-break space, a Hangul filler and a
// variation selector.
var invisibleChars = []struct{ what, v string }{
	{"RIGHT-TO-LEFT OVERRIDE", "\u202e"},
	{"LEFT-TO-RIGHT ISOLATE", "\u2066"},
	{"ZERO WIDTH SPACE", "\u200b"},
	{"ZERO WIDTH JOINER", "\u200d"},
	{"WORD JOINER", "\u2060"},
	{"ZERO WIDTH NO-BREAK SPACE", "\ufeff"},
	{"NO-BREAK SPACE", "\u00a0"},
	{"HANGUL FILLER", "\u3164"},
	{"VARIATION SELECTOR-16", "\ufe0f"},
}

// testInvisibleNames: run IDs (a caller's and a child's), partition keys,
// workflow names, event topics, queue names, schedule IDs, checkpoint and
// wait keys holding an invisible character are refused with
// ErrInvalidArgument, as their request's Validate words it, and the store
// is unchanged; the same names without it are taken.
func testInvisibleNames(f *fixture) {
	p := f.start("p1", "")
	f.create("run-1", wf, "")
	before := f.snapshot()
	l := p.Lease
	for _, c := range invisibleChars {
		bad := func(name string) string { return name[:2] + c.v + name[2:] }
		create := func(what string, runs ...storage.NewRun) {
			f.t.Helper()
			_, err := f.store.CreateRuns(f.ctx, runs)
			f.refused(fmt.Sprintf("CreateRuns with %s holding %s", what, c.what), storage.ValidateNewRuns(runs), err)
		}
		create("a run ID", storage.NewRun{ID: bad("run-2"), Workflow: wf})
		create("a run ID in a batch", storage.NewRun{ID: "run-3", Workflow: wf}, storage.NewRun{ID: bad("run-4"), Workflow: wf})
		create("a child's call key", storage.NewRun{ID: "p1/" + bad("call"), Workflow: wf, ParentID: "p1"})
		create("a partition key", storage.NewRun{ID: "run-5", Workflow: wf, Queue: "q", Partition: bad("tenant")})
		create("a workflow name", storage.NewRun{ID: "run-6", Workflow: bad("orders")})
		create("a queue name", storage.NewRun{ID: "run-7", Workflow: wf, Queue: bad("queue")})

		for _, id := range []string{"p1", "run-1"} {
			ev := storage.Event{RunID: id, Topic: bad("order.paid"), Payload: []byte(`"x"`)}
			_, err := f.store.SendEvent(f.ctx, ev)
			f.refused(fmt.Sprintf("SendEvent to %s on a topic holding %s", id, c.what), ev.Validate(), err)
		}
		em := storage.EmitRequest{Topic: bad("order.paid"), Payload: []byte(`"x"`)}
		_, err := f.store.Emit(f.ctx, em)
		f.refused("Emit on a topic holding "+c.what, em.Validate(), err)

		cp := storage.CheckpointRequest{Lease: l, LeaseFor: lease, Checkpoint: storage.Checkpoint{Key: bad("step@v1"), Kind: storage.KindStep, Output: []byte("1")}}
		_, err = f.store.Checkpoint(f.ctx, cp)
		f.refused("Checkpoint with a key holding "+c.what, cp.Validate(), err)

		for _, w := range []storage.Wait{{Key: bad("wait"), Topic: "order.paid"}, {Key: "wait", Topic: bad("order.paid")}} {
			req := storage.SuspendRequest{Lease: l, LeaseFor: lease, Wait: &w, ReadyAt: f.after(0)}
			_, err = f.store.Suspend(f.ctx, req)
			f.refused(fmt.Sprintf("Suspend with a wait %+q holding %s", w.Key+" "+w.Topic, c.what), req.Validate(), err)
		}

		sc := f.schedule(bad("nightly"))
		sw := storage.ScheduleWrite{Schedule: sc}
		_, err = f.store.WriteSchedule(f.ctx, sw)
		f.refused("WriteSchedule with an ID holding "+c.what, sw.Validate(), err)
		tick := storage.ScheduleWrite{Schedule: f.schedule("nightly"), Runs: []storage.NewRun{{ID: bad("tick-1"), Workflow: wf}}}
		_, err = f.store.WriteSchedule(f.ctx, tick)
		f.refused("WriteSchedule with a tick's run ID holding "+c.what, tick.Validate(), err)
	}
	f.wantUnchanged(before, "writes of names with invisible characters")

	// The lease held, and the same names without the character are taken.
	f.createRun(storage.NewRun{ID: "run-2", Workflow: wf})
	f.createRun(storage.NewRun{ID: "p1/call", Workflow: wf, ParentID: "p1"})
	f.createRun(storage.NewRun{ID: "run-5", Workflow: wf, Queue: "q", Partition: "tenant"})
	f.checkpoint(l, "step@v1", "1")
}
