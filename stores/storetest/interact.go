package storetest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/stemflow/stem/storage"
)

// Updates and streams (storage.Interactor): an update is recorded once per
// ID and reaches its run as an event on its reserved topic, buffered and
// delivered as SendEvent's; its reply, and a stream's values, are written
// with a checkpoint, in the same change and only when the checkpoint is,
// so a replay never replies or appends twice. Both live as long as their
// run, across its executions.
var interactCases = []testCase{
	{"update/sent updates are recorded pending in order and buffered; an ID sent again finds the first", testUpdateBuffered},
	{"update/an update to a run waiting on its topic is delivered and readies it; a paused run stays paused", testUpdateDelivered},
	{"update/take event takes a buffered update for an update case", testUpdateTake},
	{"update/unknown and finished runs and malformed requests are refused with nothing written", testUpdateRefused},
	{"update/a reply rides with its checkpoint, with a value or an error; the first reply stands", testUpdateReply},
	{"update/an existing checkpoint or a lost lease writes no reply", testUpdateReplyNotWritten},
	{"update/a reply to an update the run does not have is invalid and writes nothing", testUpdateReplyUnknown},
	{"update/a reply rides with a completion", testUpdateReplyComplete},
	{"update/concurrent sends get seqs 1..n, taken in seq order; one ID is created once", testUpdateConcurrent},
	{"update/list pages in seq order", testUpdateList},
	{"update/continue-as-new and restart keep updates; a buffered one reaches the next execution", testUpdateExecutions},
	{"update/a restart buffers again the pending updates the old execution took, in seq order, never a replied one", testUpdateRestart},
	{"update/a restart from a step buffers again only the pending updates whose delivery it did not copy", testUpdateRestartFrom},
	{"stream/values written with a checkpoint are read back by offset", testStreamRead},
	{"stream/an existing checkpoint or a lost lease appends nothing", testStreamNotWritten},
	{"stream/close, and a later write opens it again", testStreamClose},
	{"stream/list by name; unknown runs and malformed reads are refused", testStreamList},
	{"stream/many values over several checkpoints read back in pages", testStreamPages},
	{"stream/continue-as-new and restart keep streams; offsets go on", testStreamExecutions},
	{"interact/purge and a replacement delete updates and streams", testInteractDeleted},
	{"interact/replies and stream writes are announced", testInteractAnnounced},
}

// interactTxCases are the replies and stream writes of a transactional
// step (storage.TxStore's CheckpointTx); Run registers them only for a
// store that implements storage.TxStore.
var interactTxCases = []testCase{
	{"interact tx/checkpoint tx writes the reply and streams with the step's checkpoint, a failed step neither", testInteractTx},
}

// askTopic is the topic of the updates named ask the cases send.
var askTopic = storage.UpdateTopic("ask")

// updateWait is a wait of one update case on the updates named name.
func updateWait(key, name string) *storage.Wait {
	return &storage.Wait{Key: key, Topic: storage.UpdateTopic(name), Kind: storage.KindUpdate}
}

// ask is an update named ask.
func ask(run, id, payload string) storage.UpdateRequest {
	return storage.UpdateRequest{RunID: run, ID: id, Name: "ask", Payload: []byte(payload)}
}

func (f *fixture) sendUpdate(req storage.UpdateRequest) storage.UpdateResult {
	f.t.Helper()
	res, err := f.store.SendUpdate(f.ctx, req)
	if err != nil {
		f.t.Fatalf("SendUpdate(%s, %s): %v", req.RunID, req.ID, err)
	}
	return res
}

func (f *fixture) getUpdate(run, id string) storage.UpdateRecord {
	f.t.Helper()
	u, err := f.store.GetUpdate(f.ctx, run, id)
	if err != nil {
		f.t.Fatalf("GetUpdate(%s, %s): %v", run, id, err)
	}
	return u
}

func (f *fixture) listUpdates(q storage.UpdatesQuery) []storage.UpdateRecord {
	f.t.Helper()
	us, err := f.store.ListUpdates(f.ctx, q)
	if err != nil {
		f.t.Fatalf("ListUpdates(%+v): %v", q, err)
	}
	return us
}

// allUpdates pages through a run's updates.
func (f *fixture) allUpdates(run string) []storage.UpdateRecord {
	f.t.Helper()
	var all []storage.UpdateRecord
	q := storage.UpdatesQuery{RunID: run, Limit: 7}
	for range 10000 {
		page := f.listUpdates(q)
		if len(page) == 0 {
			return all
		}
		all = append(all, page...)
		q.After = page[len(page)-1].Seq
	}
	f.t.Fatal("ListUpdates never reached the end")
	return nil
}

// pending is the record of an update just sent, as the store holds it.
func pending(req storage.UpdateRequest, seq int64, at time.Time) storage.UpdateRecord {
	return storage.UpdateRecord{RunID: req.RunID, ID: req.ID, Name: req.Name, Payload: req.Payload, Headers: req.Headers,
		Seq: seq, State: storage.UpdatePending, CreatedAt: at}
}

// replied is u replied to with output and errInfo at.
func replied(u storage.UpdateRecord, output string, errInfo *storage.ErrorInfo, at time.Time) storage.UpdateRecord {
	u.State = storage.UpdateReplied
	u.Reply = []byte(output)
	u.Error = errInfo
	u.RepliedAt = &at
	return u
}

func normUpdate(u storage.UpdateRecord) storage.UpdateRecord {
	u.Payload, u.Reply = normBytes(u.Payload), normBytes(u.Reply)
	if len(u.Headers) == 0 {
		u.Headers = nil
	}
	u.CreatedAt, u.RepliedAt = ms(u.CreatedAt), msPtr(u.RepliedAt)
	return u
}

func fmtUpdate(u storage.UpdateRecord) string {
	replied := "nil"
	if u.RepliedAt != nil {
		replied = u.RepliedAt.Format(time.RFC3339Nano)
	}
	return fmt.Sprintf("{%s/%s name %q payload %q headers %v seq %d %s reply %q error %+v created %s replied %s}",
		u.RunID, u.ID, u.Name, u.Payload, u.Headers, u.Seq, u.State, u.Reply, u.Error, u.CreatedAt.Format(time.RFC3339Nano), replied)
}

// wantUpdate compares an update with want, times to the millisecond.
func (f *fixture) wantUpdate(what string, got, want storage.UpdateRecord) {
	f.t.Helper()
	if !reflect.DeepEqual(normUpdate(got), normUpdate(want)) {
		f.t.Fatalf("%s =\n  %s\nwant\n  %s", what, fmtUpdate(got), fmtUpdate(want))
	}
}

// wantUpdates checks every update of a run, read by GetUpdate and by
// ListUpdates.
func (f *fixture) wantUpdates(run string, want ...storage.UpdateRecord) {
	f.t.Helper()
	got := f.allUpdates(run)
	if len(got) != len(want) {
		var b strings.Builder
		for _, u := range got {
			b.WriteString("\n  " + fmtUpdate(u))
		}
		f.t.Fatalf("ListUpdates(%s) has %d updates, want %d:%s", run, len(got), len(want), b.String())
	}
	for i := range want {
		f.wantUpdate(fmt.Sprintf("update %d of ListUpdates(%s)", i, run), got[i], want[i])
		f.wantUpdate(fmt.Sprintf("GetUpdate(%s, %s)", run, want[i].ID), f.getUpdate(run, want[i].ID), want[i])
	}
}

// wantNoUpdate checks that GetUpdate finds no update id of run.
func (f *fixture) wantNoUpdate(run, id string) {
	f.t.Helper()
	_, err := f.store.GetUpdate(f.ctx, run, id)
	f.wantErr(err, storage.ErrUpdateNotFound, fmt.Sprintf("GetUpdate(%s, %s)", run, id))
}

// replyReq is the checkpoint of key, of kind reply, that replies output
// to update id.
func replyReq(l storage.Lease, key, id, output string) storage.CheckpointRequest {
	return storage.CheckpointRequest{
		Lease: l, LeaseFor: lease,
		Checkpoint: storage.Checkpoint{Key: key, Kind: storage.KindReply},
		Reply:      &storage.UpdateReply{ID: id, Output: []byte(output)},
	}
}

// streamReq is the checkpoint of key, of kind stream, that makes writes.
func streamReq(l storage.Lease, key string, writes ...storage.StreamWrite) storage.CheckpointRequest {
	return storage.CheckpointRequest{
		Lease: l, LeaseFor: lease,
		Checkpoint: storage.Checkpoint{Key: key, Kind: storage.KindStream},
		Streams:    writes,
	}
}

// values appends the values given to stream.
func values(stream string, vs ...string) storage.StreamWrite {
	w := storage.StreamWrite{Stream: stream}
	for _, v := range vs {
		w.Values = append(w.Values, []byte(v))
	}
	return w
}

// closing closes stream.
func closing(stream string) storage.StreamWrite {
	return storage.StreamWrite{Stream: stream, Close: true}
}

// written makes a checkpoint that must be written, and returns its result.
func (f *fixture) written(req storage.CheckpointRequest) storage.CheckpointResult {
	f.t.Helper()
	res, err := f.store.Checkpoint(f.ctx, req)
	if err != nil || res.Existing != nil {
		f.t.Fatalf("Checkpoint(%s, %s) = %+v, %v; want written", req.Lease.RunID, req.Checkpoint.Key, res, err)
	}
	return res
}

func (f *fixture) readStream(q storage.StreamQuery) storage.StreamPage {
	f.t.Helper()
	p, err := f.store.ReadStream(f.ctx, q)
	if err != nil {
		f.t.Fatalf("ReadStream(%+v): %v", q, err)
	}
	return p
}

// streamPage is what a case expects of a ReadStream: the values from
// offset from on, written at at (all of them: the cases check values
// written at one time per read).
type streamPage struct {
	from   int64
	values []string
	at     time.Time
	next   int64
	length int64
	closed bool
	status storage.RunStatus
}

// wantStream reads q and checks the page.
func (f *fixture) wantStream(q storage.StreamQuery, want streamPage) storage.StreamPage {
	f.t.Helper()
	p := f.readStream(q)
	got := make([]string, len(p.Values))
	for i, v := range p.Values {
		got[i] = string(v.Value)
		if v.Offset != want.from+int64(i) {
			f.t.Fatalf("ReadStream(%+v): value %d %q has offset %d, want %d", q, i, v.Value, v.Offset, want.from+int64(i))
		}
		f.wantTime(fmt.Sprintf("ReadStream(%+v): WrittenAt of offset %d", q, v.Offset), v.WrittenAt, want.at)
	}
	if !slices.Equal(got, want.values) || p.Next != want.next || p.Length != want.length || p.Closed != want.closed || p.RunStatus != want.status {
		f.t.Fatalf("ReadStream(%+v) = values %q next %d length %d closed %v run %s; want values %q next %d length %d closed %v run %s",
			q, got, p.Next, p.Length, p.Closed, p.RunStatus, want.values, want.next, want.length, want.closed, want.status)
	}
	return p
}

// wantStreamLength checks a stream's length and whether it is closed.
func (f *fixture) wantStreamLength(run, stream string, length int64, closed bool) {
	f.t.Helper()
	p := f.readStream(storage.StreamQuery{RunID: run, Stream: stream, From: length})
	if p.Length != length || p.Closed != closed || len(p.Values) != 0 {
		f.t.Fatalf("stream %s of %s: length %d closed %v (values past the end %d); want length %d closed %v",
			stream, run, p.Length, p.Closed, len(p.Values), length, closed)
	}
}

func (f *fixture) listStreams(run string) []storage.StreamInfo {
	f.t.Helper()
	ss, err := f.store.ListStreams(f.ctx, run)
	if err != nil {
		f.t.Fatalf("ListStreams(%s): %v", run, err)
	}
	return ss
}

// wantStreams checks a run's streams, times to the millisecond.
func (f *fixture) wantStreams(run string, want ...storage.StreamInfo) {
	f.t.Helper()
	got := f.listStreams(run)
	for i := range got {
		got[i].UpdatedAt = ms(got[i].UpdatedAt)
	}
	for i := range want {
		want[i].UpdatedAt = ms(want[i].UpdatedAt)
	}
	if len(got) == 0 && len(want) == 0 {
		return
	}
	if !reflect.DeepEqual(got, want) {
		f.t.Fatalf("ListStreams(%s) = %+v, want %+v", run, got, want)
	}
}

func testUpdateBuffered(f *fixture) {
	f.create("run-1", wf, "")
	f.clock.Advance(time.Second)
	req1 := storage.UpdateRequest{RunID: "run-1", ID: "u1", Name: "approve", Payload: []byte("p1"), Headers: map[string]string{"traceparent": "00-abc-01"}}
	res := f.sendUpdate(req1)
	if !res.Created || res.Delivered {
		f.t.Fatalf("SendUpdate(u1) = %+v, want created and buffered", res)
	}
	want1 := pending(req1, 1, f.now())
	f.wantUpdate("SendUpdate(u1)", res.Update, want1)
	f.wantUpdates("run-1", want1)

	f.clock.Advance(time.Second)
	req2 := storage.UpdateRequest{RunID: "run-1", ID: "u2", Name: "approve", Payload: []byte("p2")}
	res = f.sendUpdate(req2)
	want2 := pending(req2, 2, f.now())
	if !res.Created || res.Delivered {
		f.t.Fatalf("SendUpdate(u2) = %+v, want created and buffered", res)
	}
	f.wantUpdate("SendUpdate(u2)", res.Update, want2)

	// The same ID again finds the first update, whatever it says now.
	f.clock.Advance(time.Second)
	before := f.snapshot()
	res = f.sendUpdate(storage.UpdateRequest{RunID: "run-1", ID: "u1", Name: "other", Payload: []byte("changed")})
	if res.Created || res.Delivered {
		f.t.Fatalf("SendUpdate(u1) again = %+v, want neither created nor delivered", res)
	}
	f.wantUpdate("SendUpdate(u1) again", res.Update, want1)
	f.wantUnchanged(before, "an update sent again")
	f.wantUpdates("run-1", want1, want2)

	// The run's waits take them in order, each once, as checkpoints of
	// kind update.
	a := f.claimOne("worker-a")
	for _, w := range []struct{ key, want string }{{"approve@v1", "p1"}, {"approve@v2", "p2"}} {
		d := f.suspend(storage.SuspendRequest{Lease: a.Lease, Wait: updateWait(w.key, "approve")}).Delivered
		if d == nil || d.Key != w.key || d.Kind != storage.KindUpdate || string(d.Output) != w.want || d.Error != nil {
			f.t.Fatalf("Suspend(%s) delivered %+v, want %q of kind update", w.key, d, w.want)
		}
	}
	f.park(a.Lease, "approve@v3", storage.UpdateTopic("approve"), storage.KindUpdate)
	f.wantStatus("run-1", storage.StatusWaiting)
	f.wantCheckpoints("run-1", "approve@v1=p1", "approve@v2=p2")
	// A delivery is not a reply.
	f.wantUpdates("run-1", want1, want2)
}

func testUpdateDelivered(f *fixture) {
	a := f.start("run-1", "")
	f.park(a.Lease, "ask@v1", askTopic, storage.KindUpdate)
	ch := f.notifications()
	f.clock.Advance(time.Second)
	res := f.sendUpdate(ask("run-1", "u1", "q"))
	if !res.Created || !res.Delivered {
		f.t.Fatalf("SendUpdate to a run waiting on its topic = %+v, want created and delivered", res)
	}
	f.wantWoken(ch, "an update delivered to a waiting run")
	f.wantUpdate("SendUpdate(u1)", res.Update, pending(ask("run-1", "u1", "q"), 1, f.now()))
	cps := f.wantCheckpoints("run-1", "ask@v1=q")
	if cps[0].Kind != storage.KindUpdate || cps[0].Error != nil {
		f.t.Fatalf("delivered checkpoint %+v, want kind update without error", cps[0])
	}
	f.wantTime("delivered CreatedAt", cps[0].CreatedAt, f.now())
	rec := f.wantStatus("run-1", storage.StatusQueued)
	if rec.Wait != nil {
		f.t.Fatalf("wait %+v still registered after the delivery", rec.Wait)
	}
	f.wantTimePtr("ReadyAt", rec.ReadyAt, f.now())
	if b := f.claimOne("worker-b"); b.Wait != nil {
		f.t.Fatalf("claim after the delivery has wait %+v", b.Wait)
	}
	// The wait is gone: the next update is buffered.
	if res := f.sendUpdate(ask("run-1", "u2", "q2")); !res.Created || res.Delivered || res.Update.Seq != 2 {
		f.t.Fatalf("SendUpdate(u2) = %+v, want created with seq 2 and buffered", res)
	}

	// A paused run waiting on the topic, as one case of several, takes it
	// and stays paused, ready.
	c := f.startAs(storage.NewRun{ID: "run-2"})
	if res := f.suspend(storage.SuspendRequest{Lease: c.Lease, Wait: &storage.Wait{Key: "ev@v1", Topic: "other",
		Also: []storage.WaitCase{{Key: "ask@v1", Topic: askTopic, Kind: storage.KindUpdate}}}}); res.Delivered != nil || res.Paused {
		f.t.Fatalf("Suspend(run-2) = %+v, want parked", res)
	}
	f.pause("run-2")
	f.clock.Advance(time.Second)
	if res := f.sendUpdate(ask("run-2", "u1", "p")); !res.Created || !res.Delivered || res.Update.Seq != 1 {
		f.t.Fatalf("SendUpdate to a paused waiting run = %+v, want created with seq 1 and delivered", res)
	}
	rec = f.wantStatus("run-2", storage.StatusPaused)
	if rec.Wait != nil {
		f.t.Fatalf("wait %+v kept after the delivery", rec.Wait)
	}
	f.wantTimePtr("ReadyAt of the paused run", rec.ReadyAt, f.now())
	cps = f.wantCheckpoints("run-2", "ask@v1=p")
	if cps[0].Kind != storage.KindUpdate {
		f.t.Fatalf("delivered checkpoint kind %q, want update", cps[0].Kind)
	}
	f.claimNone("wf-run-2")
	f.resume("run-2")
	f.wantStatus("run-2", storage.StatusQueued)
	if d := f.claimOne("worker-c", "wf-run-2"); d.Lease.RunID != "run-2" {
		f.t.Fatalf("claimed %s, want run-2", d.Lease.RunID)
	}
}

func testUpdateTake(f *fixture) {
	a := f.start("run-1", "")
	if res := f.sendUpdate(ask("run-1", "u1", "q")); !res.Created || res.Delivered {
		f.t.Fatalf("SendUpdate to a running run = %+v, want created and buffered", res)
	}
	f.clock.Advance(10 * time.Second)
	cp := f.take(a.Lease, &storage.Wait{Key: "ev@v1", Topic: "other", Also: []storage.WaitCase{{Key: "ask@v1", Topic: askTopic, Kind: storage.KindUpdate}}})
	if cp == nil || cp.Key != "ask@v1" || cp.Kind != storage.KindUpdate || string(cp.Output) != "q" {
		f.t.Fatalf("TakeEvent = %+v, want ask@v1=q of kind update", cp)
	}
	if rec := f.wantStatus("run-1", storage.StatusRunning); rec.Wait != nil {
		f.t.Fatalf("TakeEvent registered the wait %+v", rec.Wait)
	}
	f.wantCheckpoints("run-1", "ask@v1=q")
	if cp := f.take(a.Lease, updateWait("ask@v2", "ask")); cp != nil {
		f.t.Fatalf("a second TakeEvent took %+v, want the update taken once", cp)
	}
	f.wantUpdates("run-1", pending(ask("run-1", "u1", "q"), 1, Start))
}

func testUpdateRefused(f *fixture) {
	_, err := f.store.SendUpdate(f.ctx, ask("nobody", "u1", "q"))
	f.wantErr(err, storage.ErrRunNotFound, "SendUpdate to an unknown run")
	f.wantUpdates("nobody")
	f.wantNoUpdate("nobody", "u1")

	a := f.start("run-1", "")
	kept := pending(ask("run-1", "kept", "k"), 1, f.now())
	f.sendUpdate(ask("run-1", "kept", "k"))
	f.complete(a.Lease, "done")
	f.clock.Advance(time.Second)
	before := f.snapshot()
	_, err = f.store.SendUpdate(f.ctx, ask("run-1", "late", "l"))
	f.wantErr(err, storage.ErrInvalidState, "SendUpdate to a finished run")
	// An ID the finished run has finds its update.
	res, err := f.store.SendUpdate(f.ctx, storage.UpdateRequest{RunID: "run-1", ID: "kept", Name: "other", Payload: []byte("changed")})
	if err != nil || res.Created || res.Delivered {
		f.t.Fatalf("SendUpdate of a known ID to a finished run = %+v, %v; want the update, neither created nor delivered", res, err)
	}
	f.wantUpdate("SendUpdate of a known ID to a finished run", res.Update, kept)
	f.wantUnchanged(before, "updates sent to a finished run")
	f.wantUpdates("run-1", kept)
	f.wantNoUpdate("run-1", "late")

	f.create("run-2", wf, "")
	before = f.snapshot()
	for _, req := range []storage.UpdateRequest{
		{ID: "u1", Name: "ask"},
		{RunID: "run-2\x00", ID: "u1", Name: "ask"},
		{RunID: "run-2", Name: "ask"},
		{RunID: "run-2", ID: "u\u202e1", Name: "ask"},
		{RunID: "run-2", ID: "u\x1f1", Name: "ask"},
		{RunID: "run-2", ID: "u\u200b1", Name: "ask"},
		{RunID: "run-2", ID: strings.Repeat("u", storage.MaxUpdateIDLen+1), Name: "ask"},
		{RunID: "run-2", ID: "u1"},
		{RunID: "run-2", ID: "u1", Name: "two words"},
		{RunID: "run-2", ID: "u1", Name: "a/b"},
		{RunID: "run-2", ID: "u1", Name: "ask", Headers: map[string]string{"bad name": "v"}},
		{RunID: "run-2", ID: "u1", Name: "ask", Headers: map[string]string{"h": "a\nb"}},
	} {
		_, err := f.store.SendUpdate(f.ctx, req)
		f.wantErr(err, storage.ErrInvalidArgument, fmt.Sprintf("SendUpdate(%+q, %+q, %+q, %v)", req.RunID, req.ID, req.Name, req.Headers))
	}
	f.wantUnchanged(before, "malformed updates")
	f.wantUpdates("run-2")
	for _, id := range []string{"", "u\u202e1", "u\x1f1"} {
		_, err := f.store.GetUpdate(f.ctx, "run-1", id)
		f.wantErr(err, storage.ErrInvalidArgument, fmt.Sprintf("GetUpdate(run-1, %+q)", id))
	}
	for _, q := range []storage.UpdatesQuery{
		{},
		{RunID: "run-1", After: -1},
		{RunID: "run-1", Limit: -1},
		{RunID: "run-1", Limit: storage.MaxUpdatesPage + 1},
	} {
		_, err := f.store.ListUpdates(f.ctx, q)
		f.wantErr(err, storage.ErrInvalidArgument, fmt.Sprintf("ListUpdates(%+v)", q))
	}
}

func testUpdateReply(f *fixture) {
	f.create("run-1", wf, "")
	var sent []storage.UpdateRecord
	for i, id := range []string{"u1", "u2", "u3", "u4"} {
		f.sendUpdate(ask("run-1", id, "q-"+id))
		sent = append(sent, pending(ask("run-1", id, "q-"+id), int64(i+1), f.now()))
	}
	a := f.claimOne("worker-a")
	f.clock.Advance(time.Second)
	f.written(replyReq(a.Lease, "reply-1@v1", "u1", "answer"))
	sent[0] = replied(sent[0], "answer", nil, f.now())
	cps := f.wantCheckpoints("run-1", "reply-1@v1=")
	if cps[0].Kind != storage.KindReply {
		f.t.Fatalf("reply checkpoint kind %q, want reply", cps[0].Kind)
	}
	f.wantUpdates("run-1", sent...)

	// A reply that is an error.
	f.clock.Advance(time.Second)
	failure := &storage.ErrorInfo{Message: "not allowed", Code: "denied", Detail: "detail"}
	req := replyReq(a.Lease, "reply-2@v1", "u2", "")
	req.Reply.Error = failure
	f.written(req)
	sent[1] = replied(sent[1], "", failure, f.now())
	f.wantUpdates("run-1", sent...)

	// Another checkpoint that replies to u1 is written, and the first
	// reply stands.
	f.clock.Advance(time.Second)
	f.written(replyReq(a.Lease, "reply-3@v1", "u1", "second"))
	f.wantCheckpoints("run-1", "reply-1@v1=", "reply-2@v1=", "reply-3@v1=")
	f.wantUpdates("run-1", sent...)

	// A step's checkpoint carries a reply too.
	req = stepReq(a.Lease, "step@v1", "out")
	req.Reply = &storage.UpdateReply{ID: "u3", Output: []byte("from a step")}
	f.written(req)
	sent[2] = replied(sent[2], "from a step", nil, f.now())
	f.wantUpdates("run-1", sent...)
	f.wantStatus("run-1", storage.StatusRunning)

	// A checkpoint that pauses the run is written, with its reply.
	f.pause("run-1")
	f.clock.Advance(time.Second)
	if res := f.written(replyReq(a.Lease, "reply-4@v1", "u4", "paused")); !res.Paused {
		f.t.Fatalf("Checkpoint with a reply and a pause requested = %+v, want paused", res)
	}
	sent[3] = replied(sent[3], "paused", nil, f.now())
	f.wantUpdates("run-1", sent...)
	f.wantStatus("run-1", storage.StatusPaused)
}

func testUpdateReplyNotWritten(f *fixture) {
	a := f.start("run-1", "")
	f.sendUpdate(ask("run-1", "u1", "q"))
	u1 := pending(ask("run-1", "u1", "q"), 1, f.now())
	f.checkpoint(a.Lease, "s1@v1", "one")
	res, err := f.store.Checkpoint(f.ctx, replyReq(a.Lease, "s1@v1", "u1", "late"))
	if err != nil || res.Existing == nil || res.Existing.Key != "s1@v1" || string(res.Existing.Output) != "one" {
		f.t.Fatalf("Checkpoint of an existing key with a reply = %+v, %v; want the existing checkpoint", res, err)
	}
	f.wantUpdates("run-1", u1)

	b, stale := f.takeOver(a)
	before := f.snapshot()
	for _, l := range stale {
		_, err := f.store.Checkpoint(f.ctx, replyReq(l, "reply@v1", "u1", "stale"))
		f.wantErr(err, storage.ErrLeaseLost, fmt.Sprintf("a reply under a stale lease (token %d)", l.Token))
	}
	f.wantUnchanged(before, "replies under stale leases")
	f.wantUpdates("run-1", u1)

	f.clock.Advance(time.Second)
	f.written(replyReq(b.Lease, "reply@v1", "u1", "live"))
	f.wantUpdates("run-1", replied(u1, "live", nil, f.now()))
	f.wantCheckpoints("run-1", "s1@v1=one", "reply@v1=")
}

func testUpdateReplyUnknown(f *fixture) {
	a := f.start("run-1", "")
	f.sendUpdate(ask("run-1", "u1", "q"))
	u1 := pending(ask("run-1", "u1", "q"), 1, f.now())
	f.create("run-2", wf, "")
	f.sendUpdate(ask("run-2", "theirs", "q"))
	f.clock.Advance(time.Second)
	before := f.snapshot()
	for _, id := range []string{"nope", "theirs"} {
		req := replyReq(a.Lease, "reply@v1", id, "x")
		req.Streams = []storage.StreamWrite{values("s", "v")}
		_, err := f.store.Checkpoint(f.ctx, req)
		f.wantErr(err, storage.ErrInvalidArgument, "a reply to update "+id+" the run does not have")
		req.Complete = &storage.CompleteRequest{Status: storage.StatusComplete, Output: []byte("result")}
		_, err = f.store.Checkpoint(f.ctx, req)
		f.wantErr(err, storage.ErrInvalidArgument, "a reply to update "+id+" the run does not have, with a completion")
	}
	for _, id := range []string{"", "u\u202e1", "u\x1f1"} {
		_, err := f.store.Checkpoint(f.ctx, replyReq(a.Lease, "reply@v1", id, "x"))
		f.wantErr(err, storage.ErrInvalidArgument, fmt.Sprintf("a reply to the malformed update ID %+q", id))
	}
	f.wantUnchanged(before, "refused replies")
	f.wantCheckpoints("run-1")
	if h := f.history("run-1", 0); len(h.Steps) != 0 {
		f.t.Fatalf("ListSteps after refused replies = %+v, want nothing", h)
	}
	f.wantUpdates("run-1", u1)
	f.wantStreams("run-1")
	f.wantStream(storage.StreamQuery{RunID: "run-1", Stream: "s"}, streamPage{status: storage.StatusRunning})
	f.wantStatus("run-1", storage.StatusRunning)
	// The lease holds.
	f.written(replyReq(a.Lease, "reply@v1", "u1", "x"))
}

func testUpdateReplyComplete(f *fixture) {
	var ended <-chan string
	if fn, ok := f.store.(storage.FinishNotifier); ok {
		ended = fn.Finished(f.ctx)
	}
	l := f.createLeased(storage.NewRun{ID: "run-1", Workflow: wf}, "worker-a")
	f.sendUpdate(ask("run-1", "u1", "q"))
	u1 := pending(ask("run-1", "u1", "q"), 1, f.now())
	f.clock.Advance(time.Second)
	req := replyReq(l, "reply@v1", "u1", "answer")
	req.Streams = []storage.StreamWrite{{Stream: "log", Values: [][]byte{[]byte("end")}, Close: true}}
	req.Complete = &storage.CompleteRequest{Status: storage.StatusComplete, Output: []byte("result")}
	if res := f.written(req); !res.Completed {
		f.t.Fatalf("Checkpoint with a reply and a completion = %+v, want completed", res)
	}
	rec := f.wantStatus("run-1", storage.StatusComplete)
	f.wantBytes("output", rec.Output, "result")
	f.wantUpdates("run-1", replied(u1, "answer", nil, f.now()))
	f.wantStream(storage.StreamQuery{RunID: "run-1", Stream: "log"},
		streamPage{values: []string{"end"}, at: f.now(), next: 1, length: 1, closed: true, status: storage.StatusComplete})
	f.wantCheckpoints("run-1", "reply@v1=")
	if ended != nil {
		f.wantAnnounced(ended, "run-1")
	}
}

func testUpdateConcurrent(f *fixture) {
	f.create("run-1", wf, "")
	const n = 100
	results := make([]storage.UpdateResult, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			res, err := f.store.SendUpdate(f.ctx, ask("run-1", fmt.Sprintf("u-%03d", i), fmt.Sprintf("p-%03d", i)))
			if err != nil {
				f.t.Errorf("SendUpdate(u-%03d): %v", i, err)
			}
			results[i] = res
		})
	}
	wg.Wait()
	if f.t.Failed() {
		return
	}
	seqs := make([]int64, n)
	for i, res := range results {
		if !res.Created || res.Delivered || res.Update.ID != fmt.Sprintf("u-%03d", i) {
			f.t.Fatalf("SendUpdate(u-%03d) = %+v, want created and buffered", i, res)
		}
		seqs[i] = res.Update.Seq
	}
	slices.Sort(seqs)
	for i, s := range seqs {
		if s != int64(i+1) {
			f.t.Fatalf("the concurrent updates' seqs are %v, want 1 to %d", seqs, n)
		}
	}
	all := f.allUpdates("run-1")
	if len(all) != n {
		f.t.Fatalf("ListUpdates has %d updates, want %d", len(all), n)
	}
	for i, u := range all {
		if u.Seq != int64(i+1) || !samePayload(u.Payload, results, u.ID) {
			f.t.Fatalf("update %d of ListUpdates = %s, want seq %d with its payload", i, fmtUpdate(u), i+1)
		}
	}
	a := f.claimOne("worker-a")
	for i, u := range all {
		key := fmt.Sprintf("ask-%03d@v1", i)
		d := f.suspend(storage.SuspendRequest{Lease: a.Lease, Wait: updateWait(key, "ask")}).Delivered
		if d == nil || d.Key != key || string(d.Output) != string(u.Payload) {
			f.t.Fatalf("Suspend(%s) delivered %+v, want %q, the update of seq %d", key, d, u.Payload, u.Seq)
		}
	}
	f.park(a.Lease, "ask-last@v1", askTopic, storage.KindUpdate)

	// One ID sent at once by many is created once.
	f.createRun(storage.NewRun{ID: "run-2", Workflow: "wf-run-2"})
	const m = 10
	same := make([]storage.UpdateResult, m)
	for i := range m {
		wg.Go(func() {
			res, err := f.store.SendUpdate(f.ctx, ask("run-2", "same", fmt.Sprintf("p-%d", i)))
			if err != nil {
				f.t.Errorf("SendUpdate(same) #%d: %v", i, err)
			}
			same[i] = res
		})
	}
	wg.Wait()
	if f.t.Failed() {
		return
	}
	created := -1
	for i, res := range same {
		if res.Created {
			if created >= 0 {
				f.t.Fatalf("SendUpdate(same) created by #%d and #%d", created, i)
			}
			created = i
		}
	}
	if created < 0 {
		f.t.Fatal("no SendUpdate(same) created the update")
	}
	winner := fmt.Sprintf("p-%d", created)
	for i, res := range same {
		if res.Update.Seq != 1 || string(res.Update.Payload) != winner {
			f.t.Fatalf("SendUpdate(same) #%d = %s, want the update #%d created (seq 1, payload %s)", i, fmtUpdate(res.Update), created, winner)
		}
	}
	if all := f.allUpdates("run-2"); len(all) != 1 {
		f.t.Fatalf("run-2 has %d updates, want 1", len(all))
	}
	b := f.claimOne("worker-b", "wf-run-2")
	if d := f.suspend(storage.SuspendRequest{Lease: b.Lease, Wait: updateWait("ask@v1", "ask")}).Delivered; d == nil || string(d.Output) != winner {
		f.t.Fatalf("Suspend delivered %+v, want %s", d, winner)
	}
	f.park(b.Lease, "ask@v2", askTopic, storage.KindUpdate)
}

// samePayload reports whether payload is the payload results sent for id.
func samePayload(payload []byte, results []storage.UpdateResult, id string) bool {
	for _, r := range results {
		if r.Update.ID == id {
			return string(r.Update.Payload) == string(payload)
		}
	}
	return false
}

func testUpdateList(f *fixture) {
	f.create("run-1", wf, "")
	ids := []string{"g", "a", "f", "b", "e", "c", "d"}
	var want []storage.UpdateRecord
	for i, id := range ids {
		f.clock.Advance(time.Millisecond)
		f.sendUpdate(ask("run-1", id, "q-"+id))
		want = append(want, pending(ask("run-1", id, "q-"+id), int64(i+1), f.now()))
	}
	check := func(q storage.UpdatesQuery, want ...storage.UpdateRecord) {
		f.t.Helper()
		got := f.listUpdates(q)
		if len(got) != len(want) {
			f.t.Fatalf("ListUpdates(%+v) returned %d updates, want %d", q, len(got), len(want))
		}
		for i := range want {
			f.wantUpdate(fmt.Sprintf("update %d of ListUpdates(%+v)", i, q), got[i], want[i])
		}
	}
	check(storage.UpdatesQuery{RunID: "run-1"}, want...)
	check(storage.UpdatesQuery{RunID: "run-1", Limit: 3}, want[:3]...)
	check(storage.UpdatesQuery{RunID: "run-1", After: 3, Limit: 3}, want[3:6]...)
	check(storage.UpdatesQuery{RunID: "run-1", After: 6, Limit: 3}, want[6:]...)
	check(storage.UpdatesQuery{RunID: "run-1", After: 2}, want[2:]...)
	check(storage.UpdatesQuery{RunID: "run-1", After: 7})
	check(storage.UpdatesQuery{RunID: "run-1", After: 100})
	check(storage.UpdatesQuery{RunID: "run-1", Limit: storage.MaxUpdatesPage}, want...)
	check(storage.UpdatesQuery{RunID: "nobody"})
	f.wantUpdates("run-1", want...)
}

func testUpdateExecutions(f *fixture) {
	a := f.start("run-1", "")
	f.sendUpdate(ask("run-1", "u1", "q1"))
	u1 := pending(ask("run-1", "u1", "q1"), 1, f.now())
	f.clock.Advance(time.Second)
	f.sendUpdate(ask("run-1", "u2", "q2"))
	u2 := pending(ask("run-1", "u2", "q2"), 2, f.now())
	if d := f.suspend(storage.SuspendRequest{Lease: a.Lease, Wait: updateWait("ask@v1", "ask")}).Delivered; d == nil || string(d.Output) != "q1" {
		f.t.Fatalf("Suspend delivered %+v, want q1", d)
	}
	f.clock.Advance(time.Second)
	f.written(replyReq(a.Lease, "reply@v1", "u1", "a1"))
	u1 = replied(u1, "a1", nil, f.now())

	// u2 is still buffered: the next execution takes it, and replies.
	f.continueAsNew(a.Lease, "next")
	f.wantUpdates("run-1", u1, u2)
	b := f.claimOne("worker-b")
	if d := f.suspend(storage.SuspendRequest{Lease: b.Lease, Wait: updateWait("ask@v1", "ask")}).Delivered; d == nil || d.Kind != storage.KindUpdate || string(d.Output) != "q2" {
		f.t.Fatalf("Suspend in the next execution delivered %+v, want q2 of kind update", d)
	}
	f.clock.Advance(time.Second)
	f.written(replyReq(b.Lease, "reply@v1", "u2", "a2"))
	u2 = replied(u2, "a2", nil, f.now())
	f.wantUpdates("run-1", u1, u2)
	f.wantCheckpoints("run-1", "ask@v1=q2", "reply@v1=")

	// A restart keeps them too, and an update sent now goes on from seq 3.
	f.restart("run-1", "")
	f.letGo(b.Lease)
	f.wantUpdates("run-1", u1, u2)
	c := f.claimOne("worker-c")
	if res := f.sendUpdate(ask("run-1", "u3", "q3")); !res.Created || res.Update.Seq != 3 {
		f.t.Fatalf("SendUpdate after the restart = %+v, want created with seq 3", res)
	}
	f.written(replyReq(c.Lease, "reply@v1", "u3", "a3"))
	if u := f.getUpdate("run-1", "u3"); u.State != storage.UpdateReplied || string(u.Reply) != "a3" {
		f.t.Fatalf("u3 after the restart = %s, want replied a3", fmtUpdate(u))
	}
}

func testStreamRead(f *fixture) {
	a := f.start("run-1", "")
	f.clock.Advance(time.Second)
	f.written(streamReq(a.Lease, "emit@v1", values("s", "a", "b", "c"), values("t", "x")))
	at := f.now()
	cps := f.wantCheckpoints("run-1", "emit@v1=")
	if cps[0].Kind != storage.KindStream {
		f.t.Fatalf("stream checkpoint kind %q, want stream", cps[0].Kind)
	}
	running := storage.StatusRunning
	s := storage.StreamQuery{RunID: "run-1", Stream: "s"}
	f.wantStream(s, streamPage{values: []string{"a", "b", "c"}, at: at, next: 3, length: 3, status: running})
	f.wantStream(storage.StreamQuery{RunID: "run-1", Stream: "s", From: 1, Limit: 1},
		streamPage{from: 1, values: []string{"b"}, at: at, next: 2, length: 3, status: running})
	f.wantStream(storage.StreamQuery{RunID: "run-1", Stream: "s", From: 2, Limit: 5},
		streamPage{from: 2, values: []string{"c"}, at: at, next: 3, length: 3, status: running})
	f.wantStream(storage.StreamQuery{RunID: "run-1", Stream: "s", From: 3},
		streamPage{from: 3, next: 3, length: 3, status: running})
	f.wantStream(storage.StreamQuery{RunID: "run-1", Stream: "s", From: 10},
		streamPage{from: 10, next: 10, length: 3, status: running})
	f.wantStream(storage.StreamQuery{RunID: "run-1", Stream: "t"}, streamPage{values: []string{"x"}, at: at, next: 1, length: 1, status: running})
	f.wantStream(storage.StreamQuery{RunID: "run-1", Stream: "never"}, streamPage{status: running})
	f.wantStream(storage.StreamQuery{RunID: "run-1", Stream: "never", From: 4}, streamPage{from: 4, next: 4, status: running})

	// A step's checkpoint carries stream writes too; the offsets go on.
	f.clock.Advance(time.Second)
	req := stepReq(a.Lease, "step@v1", "out")
	req.Streams = []storage.StreamWrite{values("s", "d")}
	f.written(req)
	f.wantStream(storage.StreamQuery{RunID: "run-1", Stream: "s", From: 3},
		streamPage{from: 3, values: []string{"d"}, at: f.now(), next: 4, length: 4, status: running})
	f.wantCheckpoints("run-1", "emit@v1=", "step@v1=out")

	// The page tells the run's status.
	f.complete(a.Lease, "done")
	f.wantStream(storage.StreamQuery{RunID: "run-1", Stream: "t"},
		streamPage{values: []string{"x"}, at: at, next: 1, length: 1, status: storage.StatusComplete})
}

func testStreamNotWritten(f *fixture) {
	a := f.start("run-1", "")
	f.written(streamReq(a.Lease, "emit@v1", values("s", "a")))
	at := f.now()
	f.clock.Advance(time.Second)
	res, err := f.store.Checkpoint(f.ctx, streamReq(a.Lease, "emit@v1", values("s", "again"), values("u", "again")))
	if err != nil || res.Existing == nil || res.Existing.Key != "emit@v1" {
		f.t.Fatalf("Checkpoint of an existing key with stream writes = %+v, %v; want the existing checkpoint", res, err)
	}
	running := storage.StatusRunning
	f.wantStream(storage.StreamQuery{RunID: "run-1", Stream: "s"}, streamPage{values: []string{"a"}, at: at, next: 1, length: 1, status: running})
	f.wantStreams("run-1", storage.StreamInfo{Name: "s", Length: 1, UpdatedAt: at})

	b, stale := f.takeOver(a)
	before := f.snapshot()
	for _, l := range stale {
		_, err := f.store.Checkpoint(f.ctx, streamReq(l, "emit@v2", values("s", "stale"), values("u", "stale")))
		f.wantErr(err, storage.ErrLeaseLost, fmt.Sprintf("stream writes under a stale lease (token %d)", l.Token))
	}
	// Malformed writes are refused.
	for _, w := range []storage.StreamWrite{
		{Stream: "s"},
		{Stream: "", Values: [][]byte{[]byte("v")}},
		{Stream: "two words", Values: [][]byte{[]byte("v")}},
		{Stream: "a/b", Values: [][]byte{[]byte("v")}},
		{Stream: "s\u202e", Values: [][]byte{[]byte("v")}},
	} {
		_, err := f.store.Checkpoint(f.ctx, streamReq(b.Lease, "emit@v2", values("s", "ok"), w))
		f.wantErr(err, storage.ErrInvalidArgument, fmt.Sprintf("a malformed stream write %+q", w.Stream))
	}
	f.wantUnchanged(before, "refused stream writes")
	f.wantStream(storage.StreamQuery{RunID: "run-1", Stream: "s"}, streamPage{values: []string{"a"}, at: at, next: 1, length: 1, status: running})
	f.wantStreams("run-1", storage.StreamInfo{Name: "s", Length: 1, UpdatedAt: at})
	f.written(streamReq(b.Lease, "emit@v2", values("s", "live")))
	f.wantStream(storage.StreamQuery{RunID: "run-1", Stream: "s", From: 1}, streamPage{from: 1, values: []string{"live"}, at: f.now(), next: 2, length: 2, status: running})
}

func testStreamClose(f *fixture) {
	a := f.start("run-1", "")
	running := storage.StatusRunning
	f.written(streamReq(a.Lease, "w1@v1", values("s", "a", "b", "c")))
	at := f.now()
	f.clock.Advance(time.Second)
	f.written(streamReq(a.Lease, "w2@v1", closing("s")))
	f.wantStream(storage.StreamQuery{RunID: "run-1", Stream: "s"},
		streamPage{values: []string{"a", "b", "c"}, at: at, next: 3, length: 3, closed: true, status: running})
	f.wantStreams("run-1", storage.StreamInfo{Name: "s", Length: 3, Closed: true, UpdatedAt: f.now()})

	// Values open it again.
	f.clock.Advance(time.Second)
	f.written(streamReq(a.Lease, "w3@v1", values("s", "d")))
	f.wantStream(storage.StreamQuery{RunID: "run-1", Stream: "s", From: 3},
		streamPage{from: 3, values: []string{"d"}, at: f.now(), next: 4, length: 4, status: running})

	// Values and a close in one write: appended, then closed.
	f.clock.Advance(time.Second)
	f.written(streamReq(a.Lease, "w4@v1", storage.StreamWrite{Stream: "s", Values: [][]byte{[]byte("e")}, Close: true}))
	f.wantStream(storage.StreamQuery{RunID: "run-1", Stream: "s", From: 4},
		streamPage{from: 4, values: []string{"e"}, at: f.now(), next: 5, length: 5, closed: true, status: running})

	// Closing a stream never written makes it, empty and closed.
	f.written(streamReq(a.Lease, "w5@v1", closing("empty")))
	f.wantStream(storage.StreamQuery{RunID: "run-1", Stream: "empty"}, streamPage{closed: true, status: running})
	f.wantStreams("run-1",
		storage.StreamInfo{Name: "empty", Closed: true, UpdatedAt: f.now()},
		storage.StreamInfo{Name: "s", Length: 5, Closed: true, UpdatedAt: f.now()})

	// Writes to one stream in one checkpoint apply in order.
	f.written(streamReq(a.Lease, "w6@v1", values("o", "1"), closing("o"), values("o", "2")))
	f.wantStream(storage.StreamQuery{RunID: "run-1", Stream: "o"},
		streamPage{values: []string{"1", "2"}, at: f.now(), next: 2, length: 2, status: running})
}

func testStreamList(f *fixture) {
	a := f.start("run-1", "")
	f.wantStreams("run-1")
	f.clock.Advance(time.Second)
	f.written(streamReq(a.Lease, "w1@v1", values("zeta", "1"), values("alpha", "1", "2")))
	t1 := f.now()
	f.clock.Advance(time.Second)
	f.written(streamReq(a.Lease, "w2@v1", values("mid", "1"), closing("zeta")))
	t2 := f.now()
	f.wantStreams("run-1",
		storage.StreamInfo{Name: "alpha", Length: 2, UpdatedAt: t1},
		storage.StreamInfo{Name: "mid", Length: 1, UpdatedAt: t2},
		storage.StreamInfo{Name: "zeta", Length: 1, Closed: true, UpdatedAt: t2})
	// Streams are the run's own.
	f.create("run-2", wf, "")
	f.wantStreams("run-2")
	f.wantStream(storage.StreamQuery{RunID: "run-2", Stream: "alpha"}, streamPage{status: storage.StatusQueued})

	_, err := f.store.ReadStream(f.ctx, storage.StreamQuery{RunID: "nobody", Stream: "alpha"})
	f.wantErr(err, storage.ErrRunNotFound, "ReadStream of an unknown run")
	_, err = f.store.ListStreams(f.ctx, "nobody")
	f.wantErr(err, storage.ErrRunNotFound, "ListStreams of an unknown run")
	for _, q := range []storage.StreamQuery{
		{Stream: "alpha"},
		{RunID: "run-1\x00", Stream: "alpha"},
		{RunID: "run-1"},
		{RunID: "run-1", Stream: "two words"},
		{RunID: "run-1", Stream: "alpha", From: -1},
		{RunID: "run-1", Stream: "alpha", Limit: -1},
		{RunID: "run-1", Stream: "alpha", Limit: storage.MaxStreamPage + 1},
	} {
		_, err := f.store.ReadStream(f.ctx, q)
		f.wantErr(err, storage.ErrInvalidArgument, fmt.Sprintf("ReadStream(%+v)", q))
	}
}

func testStreamPages(f *fixture) {
	a := f.start("run-1", "")
	const n, per = 10000, 2500
	for c := range n / per {
		w := storage.StreamWrite{Stream: "big"}
		for i := c * per; i < (c+1)*per; i++ {
			w.Values = append(w.Values, fmt.Appendf(nil, "v%05d", i))
		}
		f.written(streamReq(a.Lease, fmt.Sprintf("w%d@v1", c), w))
	}
	read := func(limit int) {
		f.t.Helper()
		var next int64
		pages := 0
		for next < n {
			q := storage.StreamQuery{RunID: "run-1", Stream: "big", From: next, Limit: limit}
			p := f.readStream(q)
			if len(p.Values) == 0 || len(p.Values) > limit || p.Length != n || p.Closed {
				f.t.Fatalf("ReadStream(%+v): %d values, length %d, closed %v; want up to %d of %d values, open", q, len(p.Values), p.Length, p.Closed, limit, n)
			}
			for i, v := range p.Values {
				want := next + int64(i)
				if v.Offset != want || string(v.Value) != fmt.Sprintf("v%05d", want) {
					f.t.Fatalf("ReadStream(%+v): value %d is %q at %d, want v%05d at %d", q, i, v.Value, v.Offset, want, want)
				}
			}
			if p.Next != next+int64(len(p.Values)) {
				f.t.Fatalf("ReadStream(%+v): Next %d after %d values", q, p.Next, len(p.Values))
			}
			next = p.Next
			pages++
		}
		if want := (n + limit - 1) / limit; pages != want {
			f.t.Fatalf("read %d values in %d pages of %d, want %d pages", n, pages, limit, want)
		}
	}
	read(3000)
	read(storage.MaxStreamPage)
	// The default page.
	if p := f.readStream(storage.StreamQuery{RunID: "run-1", Stream: "big", From: 42}); len(p.Values) != storage.DefaultPageSize || p.Values[0].Offset != 42 || p.Next != 42+storage.DefaultPageSize {
		f.t.Fatalf("ReadStream with no limit from 42 read %d values, next %d; want %d from 42", len(p.Values), p.Next, storage.DefaultPageSize)
	}
}

func testStreamExecutions(f *fixture) {
	a := f.start("run-1", "")
	running := storage.StatusRunning
	f.written(streamReq(a.Lease, "w@v1", values("s", "a", "b")))
	f.continueAsNew(a.Lease, "next")
	f.wantStreamLength("run-1", "s", 2, false)
	b := f.claimOne("worker-b")
	f.clock.Advance(time.Second)
	// The same key in the new execution writes again, after the old values.
	f.written(streamReq(b.Lease, "w@v1", values("s", "c")))
	f.wantStream(storage.StreamQuery{RunID: "run-1", Stream: "s", From: 2},
		streamPage{from: 2, values: []string{"c"}, at: f.now(), next: 3, length: 3, status: running})

	f.restart("run-1", "")
	f.wantStreamLength("run-1", "s", 3, false)
	f.letGo(b.Lease)
	c := f.claimOne("worker-c")
	f.clock.Advance(time.Second)
	f.written(streamReq(c.Lease, "w@v1", values("s", "d")))
	f.wantStream(storage.StreamQuery{RunID: "run-1", Stream: "s", From: 3},
		streamPage{from: 3, values: []string{"d"}, at: f.now(), next: 4, length: 4, status: running})
	f.wantStreams("run-1", storage.StreamInfo{Name: "s", Length: 4, UpdatedAt: f.now()})
}

// interactions gives run, leased as l, an update u1 replied to and a
// stream s of one value, and buffers an update u2.
func (f *fixture) interactions(l storage.Lease) {
	f.t.Helper()
	f.sendUpdate(ask(l.RunID, "u1", "q1"))
	req := replyReq(l, "reply@v1", "u1", "a1")
	req.Streams = []storage.StreamWrite{values("s", "v")}
	f.written(req)
	f.sendUpdate(ask(l.RunID, "u2", "q2"))
}

// wantNoInteractions checks that run, which exists, has no updates and no
// streams.
func (f *fixture) wantNoInteractions(run string) {
	f.t.Helper()
	f.wantUpdates(run)
	f.wantNoUpdate(run, "u1")
	f.wantStreams(run)
	f.wantStreamLength(run, "s", 0, false)
}

func testInteractDeleted(f *fixture) {
	a := f.startAs(storage.NewRun{ID: "done"})
	f.interactions(a.Lease)
	f.complete(a.Lease, "out")
	f.clock.Advance(time.Hour)
	if res := f.purge(storage.PurgeRequest{FinishedBefore: f.now(), Limit: 10}); res.Runs != 1 {
		f.t.Fatalf("Purge = %+v, want one run", res)
	}
	f.wantNoUpdate("done", "u1")
	f.wantNoUpdate("done", "u2")
	f.wantUpdates("done")
	_, err := f.store.ReadStream(f.ctx, storage.StreamQuery{RunID: "done", Stream: "s"})
	f.wantErr(err, storage.ErrRunNotFound, "ReadStream of a purged run")
	_, err = f.store.ListStreams(f.ctx, "done")
	f.wantErr(err, storage.ErrRunNotFound, "ListStreams of a purged run")
	// The ID used again starts clean.
	f.createRun(storage.NewRun{ID: "done", Workflow: "wf-done"})
	f.wantNoInteractions("done")
	if res := f.sendUpdate(ask("done", "u1", "new")); !res.Created || res.Update.Seq != 1 {
		f.t.Fatalf("SendUpdate to the new run = %+v, want created with seq 1", res)
	}

	// A replacement deletes the old run's and its family's.
	p := f.startAs(storage.NewRun{ID: "p", Workflow: wf})
	f.interactions(p.Lease)
	c := f.startAs(storage.NewRun{ID: "p/c", Workflow: "wf-c", ParentID: "p"})
	f.interactions(c.Lease)
	f.clock.Advance(time.Second)
	res := f.createRes(storage.NewRun{ID: "p", Workflow: wf, Input: []byte("new"), OnExisting: storage.ExistingReplace, Replace: replaceTerms})
	f.wantReplaced("a replace of a run with updates and streams", res, storage.StatusRunning, "new")
	f.wantNoInteractions("p")
	f.wantNoUpdate("p/c", "u1")
	_, err = f.store.ReadStream(f.ctx, storage.StreamQuery{RunID: "p/c", Stream: "s"})
	f.wantErr(err, storage.ErrRunNotFound, "ReadStream of a replaced run's child")
	// The old run's buffered update went with it.
	b := f.claimOne("worker-b")
	f.park(b.Lease, "ask@v1", askTopic, storage.KindUpdate)
	if res := f.sendUpdate(ask("p", "u2", "new")); !res.Created || !res.Delivered || res.Update.Seq != 1 {
		f.t.Fatalf("SendUpdate(u2) to the new run = %+v, want created with seq 1 and delivered", res)
	}
	f.wantCheckpoints("p", "ask@v1=new")

	// So does a start that reuses an ended run's ID.
	e := f.startAs(storage.NewRun{ID: "ended"})
	f.interactions(e.Lease)
	f.complete(e.Lease, "out")
	res = f.createRes(storage.NewRun{ID: "ended", Workflow: "wf-ended", OnEnded: storage.EndedReuse, Replace: replaceTerms})
	if !res.Created || !res.Replaced {
		f.t.Fatalf("a reuse of an ended run's ID = %+v, want created, replacing it", res)
	}
	f.wantNoInteractions("ended")
}

// wantAnnounced waits for every one of want on a finished channel, in any
// order, passing over what else comes (other run ends and announcements,
// Missed), within a generous bound: announcements may travel through a
// server.
func (f *fixture) wantAnnounced(ch <-chan string, want ...string) {
	f.t.Helper()
	deadline := time.After(30 * time.Second)
	var got []string
	missing := slices.Clone(want)
	for len(missing) > 0 {
		select {
		case s, ok := <-ch:
			if !ok {
				f.t.Fatalf("finished channel closed after %q, want %q", got, want)
			}
			got = append(got, s)
			if i := slices.Index(missing, s); i >= 0 {
				missing = slices.Delete(missing, i, i+1)
			}
		case <-deadline:
			f.t.Fatalf("announced %q, want %q among them", got, want)
		}
	}
}

func testInteractAnnounced(f *fixture) {
	ch := f.finished()
	a := f.start("run-1", "")
	f.sendUpdate(ask("run-1", "u1", "q"))
	f.written(replyReq(a.Lease, "reply@v1", "u1", "a"))
	f.wantAnnounced(ch, storage.UpdateAnnouncement("run-1", "u1"))
	if kind, run, id := storage.Announced(storage.UpdateAnnouncement("run-1", "u1")); kind != "update" || run != "run-1" || id != "u1" {
		f.t.Fatalf("Announced(UpdateAnnouncement) = %q, %q, %q", kind, run, id)
	}
	f.written(streamReq(a.Lease, "w1@v1", values("s", "v")))
	f.wantAnnounced(ch, storage.StreamAnnouncement("run-1", "s"))
	f.written(streamReq(a.Lease, "w2@v1", closing("t")))
	f.wantAnnounced(ch, storage.StreamAnnouncement("run-1", "t"))
	// A reply and a stream write riding with a completion are announced
	// with the run's end.
	f.sendUpdate(ask("run-1", "u2", "q"))
	req := replyReq(a.Lease, "reply@v2", "u2", "a")
	req.Streams = []storage.StreamWrite{values("s", "last")}
	req.Complete = &storage.CompleteRequest{Status: storage.StatusComplete}
	f.written(req)
	f.wantAnnounced(ch, storage.UpdateAnnouncement("run-1", "u2"), storage.StreamAnnouncement("run-1", "s"), "run-1")
}

func testInteractTx(f *fixture) {
	ts := f.txStore()
	a := f.start("run-1", "")
	f.sendUpdate(ask("run-1", "u1", "q"))
	u1 := pending(ask("run-1", "u1", "q"), 1, f.now())
	f.clock.Advance(time.Second)
	req := stepReq(a.Lease, "s1@v1", "")
	req.Reply = &storage.UpdateReply{ID: "u1", Output: []byte("answer")}
	req.Streams = []storage.StreamWrite{values("s", "a", "b")}
	before := f.snapshot()
	boom := errors.New("the step failed")
	_, err := ts.CheckpointTx(f.ctx, req, markerStep(ts, "out", boom))
	if !errors.Is(err, boom) {
		f.t.Fatalf("CheckpointTx of a failing step: error %v, want the step's", err)
	}
	f.wantUnchanged(before, "a failed transactional step with a reply and streams")
	f.wantMarker(false, "a failed transactional step")
	f.wantUpdates("run-1", u1)
	f.wantStreams("run-1")

	res, err := ts.CheckpointTx(f.ctx, req, markerStep(ts, "out", nil))
	if err != nil || res.Existing != nil {
		f.t.Fatalf("CheckpointTx = %+v, %v; want written", res, err)
	}
	f.wantMarker(true, "a transactional step with a reply and streams")
	f.wantCheckpoints("run-1", "s1@v1=out")
	f.wantUpdates("run-1", replied(u1, "answer", nil, f.now()))
	f.wantStream(storage.StreamQuery{RunID: "run-1", Stream: "s"},
		streamPage{values: []string{"a", "b"}, at: f.now(), next: 2, length: 2, status: storage.StatusRunning})

	// The same key again is the existing checkpoint: nothing more.
	f.clock.Advance(time.Second)
	req.Streams = []storage.StreamWrite{values("s", "again")}
	res, err = ts.CheckpointTx(f.ctx, req, func(context.Context, any) ([]byte, error) { return []byte("other"), nil })
	if err != nil || res.Existing == nil {
		f.t.Fatalf("CheckpointTx of an existing key = %+v, %v; want the existing checkpoint", res, err)
	}
	f.wantStreamLength("run-1", "s", 2, false)

	// A reply to an update the run does not have writes nothing.
	before = f.snapshot()
	req = stepReq(a.Lease, "s2@v1", "")
	req.Reply = &storage.UpdateReply{ID: "nope"}
	_, err = ts.CheckpointTx(f.ctx, req, func(context.Context, any) ([]byte, error) { return []byte("x"), nil })
	f.wantErr(err, storage.ErrInvalidArgument, "CheckpointTx replying to an update the run does not have")
	f.wantUnchanged(before, "a transactional step replying to an update the run does not have")
}

// deliverUpdate suspends on one case of the updates named ask under key
// and checks that it delivered want, of kind update, at once.
func (f *fixture) deliverUpdate(l storage.Lease, key, want string) {
	f.t.Helper()
	res := f.suspend(storage.SuspendRequest{Lease: l, Wait: updateWait(key, "ask")})
	if d := res.Delivered; d == nil || d.Key != key || d.Kind != storage.KindUpdate || string(d.Output) != want || d.Error != nil {
		f.t.Fatalf("Suspend(%s) delivered %+v, want %q of kind update", key, d, want)
	}
}

// takenUpdates sets up run-1 for the restart cases: u3 sent first,
// delivered (ask@v1) and replied to (reply@v1); u1 delivered (ask@v2) and
// not replied to; a step (step@v1); an event on another topic buffered,
// then u2 buffered. It returns the lease and the updates as stored.
func (f *fixture) takenUpdates() (storage.Lease, []storage.UpdateRecord) {
	f.t.Helper()
	a := f.start("run-1", "")
	f.sendUpdate(ask("run-1", "u3", "q3"))
	u3 := pending(ask("run-1", "u3", "q3"), 1, f.now())
	f.deliverUpdate(a.Lease, "ask@v1", "q3")
	f.clock.Advance(time.Second)
	f.written(replyReq(a.Lease, "reply@v1", "u3", "a3"))
	u3 = replied(u3, "a3", nil, f.now())
	f.clock.Advance(time.Second)
	f.sendUpdate(ask("run-1", "u1", "q1"))
	u1 := pending(ask("run-1", "u1", "q1"), 2, f.now())
	f.deliverUpdate(a.Lease, "ask@v2", "q1")
	f.checkpoint(a.Lease, "step@v1", "s")
	f.send("run-1", "other", "e1")
	f.clock.Advance(time.Second)
	if res := f.sendUpdate(ask("run-1", "u2", "q2")); res.Delivered {
		f.t.Fatalf("SendUpdate(u2) = %+v, want buffered", res)
	}
	u2 := pending(ask("run-1", "u2", "q2"), 3, f.now())
	f.wantCheckpoints("run-1", "ask@v1=q3", "reply@v1=", "ask@v2=q1", "step@v1=s")
	f.wantUpdates("run-1", u3, u1, u2)
	return a.Lease, []storage.UpdateRecord{u3, u1, u2}
}

// wantUpdatesTaken checks that the run's waits on ask take nothing more
// from key on (the run parks) and that the event on the other topic is
// still buffered, once.
func (f *fixture) wantUpdatesTaken(l storage.Lease, key string) {
	f.t.Helper()
	if cp := f.take(l, &storage.Wait{Key: "other@v1", Topic: "other"}); cp == nil || string(cp.Output) != "e1" {
		f.t.Fatalf("TakeEvent(other) = %+v, want e1 still buffered", cp)
	}
	if cp := f.take(l, &storage.Wait{Key: "other@v2", Topic: "other"}); cp != nil {
		f.t.Fatalf("TakeEvent(other) again = %+v, want the event taken once", cp)
	}
	f.park(l, key, askTopic, storage.KindUpdate)
	f.wantStatus("run-1", storage.StatusWaiting)
}

func testUpdateRestart(f *fixture) {
	a, us := f.takenUpdates()

	// The new execution has no delivery: u1, taken by the old one and not
	// replied to, is buffered again before u2, in seq order; u3, replied
	// to, is not. Restarting again buffers nothing twice.
	f.restart("run-1", "")
	f.letGo(a)
	f.restart("run-1", "")
	b := f.claimOne("worker-b")
	f.wantCheckpoints("run-1")
	f.deliverUpdate(b.Lease, "ask@v1", "q1")
	f.deliverUpdate(b.Lease, "ask@v2", "q2")
	f.wantUpdatesTaken(b.Lease, "ask@v3")
	f.wantCheckpoints("run-1", "ask@v1=q1", "ask@v2=q2", "other@v1=e1")
	// A redelivery is not a reply, nor a new update.
	f.wantUpdates("run-1", us...)
}

func testUpdateRestartFrom(f *fixture) {
	a, us := f.takenUpdates()

	// From step@v1: the copies deliver u3 and u1 again; only u2, still
	// buffered, is left to take.
	f.restart("run-1", "step@v1")
	f.letGo(a)
	b := f.claimOne("worker-b")
	f.wantCheckpoints("run-1", "ask@v1=q3", "reply@v1=", "ask@v2=q1")
	f.deliverUpdate(b.Lease, "ask@v3", "q2")
	f.checkpoint(b.Lease, "step@v1", "s")

	// From ask@v3: u2's delivery is not copied, so u2 is buffered again.
	f.restart("run-1", "ask@v3")
	f.letGo(b.Lease)
	c := f.claimOne("worker-c")
	f.wantCheckpoints("run-1", "ask@v1=q3", "reply@v1=", "ask@v2=q1")
	f.deliverUpdate(c.Lease, "ask@v3", "q2")
	f.wantUpdatesTaken(c.Lease, "ask@v4")
	f.wantUpdates("run-1", us...)
}
