package pgstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stemflow/stem/storage"
	"github.com/stemflow/stem/stores/storetest"
)

// interactCall is a checkpoint call of key carrying reply (nil: none) and
// stream writes, as Checkpoint builds it.
func interactCall(t *testing.T, s *Store, l storage.Lease, key string, reply *storage.UpdateReply, writes ...storage.StreamWrite) *ckptCall {
	t.Helper()
	call, err := s.checkpointCall(storage.CheckpointRequest{Lease: l, LeaseFor: time.Minute,
		Checkpoint: storage.Checkpoint{Key: key, Kind: storage.KindStep, Output: []byte(`"out"`)},
		Reply:      reply, Streams: writes})
	if err != nil {
		t.Fatal(err)
	}
	return call
}

// values are strings as stream values.
func values(vs ...string) [][]byte {
	out := make([][]byte, len(vs))
	for i, v := range vs {
		out[i] = []byte(v)
	}
	return out
}

// streamOf reads a run's whole stream as strings, with its length and
// whether it is closed.
func streamOf(t *testing.T, s *Store, run, stream string) (vals []string, length int64, closed bool) {
	t.Helper()
	page, err := s.ReadStream(context.Background(), storage.StreamQuery{RunID: run, Stream: stream, Limit: storage.MaxStreamPage})
	if err != nil {
		t.Fatalf("ReadStream(%s, %s): %v", run, stream, err)
	}
	for i, v := range page.Values {
		if v.Offset != int64(i) {
			t.Fatalf("ReadStream(%s, %s): value %d at offset %d", run, stream, i, v.Offset)
		}
		vals = append(vals, string(v.Value))
	}
	return vals, page.Length, page.Closed
}

// sendUpdate sends update id named name to run and fails the test on an
// error.
func sendUpdate(t *testing.T, s *Store, run, id string) storage.UpdateResult {
	t.Helper()
	res, err := s.SendUpdate(context.Background(), storage.UpdateRequest{RunID: run, ID: id, Name: "ask", Payload: []byte(`"q"`)})
	if err != nil {
		t.Fatalf("SendUpdate(%s, %s): %v", run, id, err)
	}
	return res
}

// TestInteractBatch: one writers' batch carrying a checkpoint with a reply
// and stream writes, one with stream writes whose checkpoint exists
// already, one under a lease taken over and a plain checkpoint writes the
// first's reply and values, at the offsets its writes take in order, and
// nothing for the others; a second batch goes on from the lengths the
// first left.
func TestInteractBatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := storetest.NewClock(storetest.Start)
	s := newTestStore(t, Options{Clock: clock})
	runs := claimAll(t, s, 4, "old")
	a, b, c, d := runs[0].Lease, runs[1].Lease, runs[2].Lease, runs[3].Lease
	sendUpdate(t, s, a.RunID, "u1")
	if _, err := s.Checkpoint(ctx, storage.CheckpointRequest{Lease: b, LeaseFor: time.Minute,
		Checkpoint: storage.Checkpoint{Key: "k@v1", Kind: storage.KindStep, Output: []byte(`"first"`)}}); err != nil {
		t.Fatal(err)
	}
	clock.Advance(30 * time.Second)
	for _, l := range []storage.Lease{a, b, d} {
		if _, err := s.Heartbeat(ctx, storage.HeartbeatRequest{Lease: l, LeaseFor: time.Minute}); err != nil {
			t.Fatal(err)
		}
	}
	clock.Advance(31 * time.Second)
	if stolen, err := s.Claim(ctx, storage.ClaimRequest{Owner: "new", Workflows: []string{"wf"}, Limit: 10, LeaseFor: time.Minute}); err != nil || len(stolen) != 1 || stolen[0].Lease.RunID != c.RunID {
		t.Fatalf("takeover: %v %+v", err, stolen)
	}

	calls := []*ckptCall{
		interactCall(t, s, a, "k@v1", &storage.UpdateReply{ID: "u1", Output: []byte(`"yes"`)},
			storage.StreamWrite{Stream: "out", Values: values("a", "b")},
			storage.StreamWrite{Stream: "log", Values: values("x")},
			storage.StreamWrite{Stream: "out", Values: values("c"), Close: true},
			storage.StreamWrite{Stream: "done", Close: true}),
		interactCall(t, s, b, "k@v1", nil, storage.StreamWrite{Stream: "out", Values: values("again")}),
		interactCall(t, s, c, "k@v1", nil, storage.StreamWrite{Stream: "out", Values: values("stale")}),
		stepCall(d, "k@v1", "plain"),
	}
	s.writeBatch(calls)
	if err := calls[0].err; err != nil || calls[0].res.Existing != nil {
		t.Fatalf("the interacting checkpoint: %+v, %v", calls[0].res, err)
	}
	if err := calls[1].err; err != nil || calls[1].res.Existing == nil {
		t.Fatalf("the existing checkpoint: %+v, %v; want Existing", calls[1].res, err)
	}
	if err := calls[2].err; !errors.Is(err, storage.ErrLeaseLost) {
		t.Fatalf("the stale checkpoint: %v, want ErrLeaseLost", err)
	}
	if err := calls[3].err; err != nil {
		t.Fatalf("the plain checkpoint: %v", err)
	}
	u, err := s.GetUpdate(ctx, a.RunID, "u1")
	if err != nil || u.State != storage.UpdateReplied || string(u.Reply) != `"yes"` || u.RepliedAt == nil || !u.RepliedAt.Equal(clock.Now()) {
		t.Fatalf("the update replied to: %+v, %v", u, err)
	}
	for _, want := range []struct {
		stream string
		vals   []string
		closed bool
	}{{"out", []string{"a", "b", "c"}, true}, {"log", []string{"x"}, false}, {"done", nil, true}} {
		vals, length, closed := streamOf(t, s, a.RunID, want.stream)
		if !slices.Equal(vals, want.vals) || length != int64(len(want.vals)) || closed != want.closed {
			t.Fatalf("stream %s: %q, length %d, closed %v; want %q, closed %v", want.stream, vals, length, closed, want.vals, want.closed)
		}
	}
	for _, l := range []storage.Lease{b, c, d} {
		if got, err := s.ListStreams(ctx, l.RunID); err != nil || len(got) != 0 {
			t.Fatalf("streams of %s: %+v, %v; want none", l.RunID, got, err)
		}
	}

	// A second batch appends after what the first wrote, and opens the
	// closed stream again; a second reply to u1 leaves the first.
	calls = []*ckptCall{
		interactCall(t, s, a, "k2@v1", &storage.UpdateReply{ID: "u1", Output: []byte(`"no"`)},
			storage.StreamWrite{Stream: "out", Values: values("d")}),
		interactCall(t, s, d, "k2@v1", nil, storage.StreamWrite{Stream: "out", Values: values("e", "f")}),
	}
	s.writeBatch(calls)
	for _, c := range calls {
		if c.err != nil || c.res.Existing != nil {
			t.Fatalf("second batch: %+v, %v", c.res, c.err)
		}
	}
	if vals, length, closed := streamOf(t, s, a.RunID, "out"); !slices.Equal(vals, []string{"a", "b", "c", "d"}) || length != 4 || closed {
		t.Fatalf("stream out after the second batch: %q, length %d, closed %v; want a b c d, open", vals, length, closed)
	}
	if vals, _, _ := streamOf(t, s, d.RunID, "out"); !slices.Equal(vals, []string{"e", "f"}) {
		t.Fatalf("stream out of %s: %q, want e f", d.RunID, vals)
	}
	if u, err := s.GetUpdate(ctx, a.RunID, "u1"); err != nil || string(u.Reply) != `"yes"` {
		t.Fatalf("the update after a second reply: %+v, %v; want the first reply", u, err)
	}
	infos, err := s.ListStreams(ctx, a.RunID)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, in := range infos {
		names = append(names, in.Name)
	}
	if !slices.Equal(names, []string{"done", "log", "out"}) {
		t.Fatalf("ListStreams: %+v, want done, log, out", infos)
	}
}

// TestInteractReplyUnknown: a checkpoint replying to an update its run
// does not have is ErrInvalidArgument and writes nothing, by the writers
// and in a transactional step, whose writes roll back; the same checkpoint
// under a lease that no longer holds is a lost lease.
func TestInteractReplyUnknown(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newTestStore(t, Options{})
	runs := claimAll(t, s, 1, "w")
	l := runs[0].Lease
	req := storage.CheckpointRequest{Lease: l, LeaseFor: time.Minute,
		Checkpoint: storage.Checkpoint{Key: "k@v1", Kind: storage.KindReply},
		Reply:      &storage.UpdateReply{ID: "nope", Output: []byte(`1`)},
		Streams:    []storage.StreamWrite{{Stream: "out", Values: values("v")}}}
	if _, err := s.Checkpoint(ctx, req); !errors.Is(err, storage.ErrInvalidArgument) {
		t.Fatalf("Checkpoint replying to no update: %v, want ErrInvalidArgument", err)
	}
	if _, err := s.pool.Exec(ctx, `CREATE TABLE `+s.schema+`.app (v text)`); err != nil {
		t.Fatal(err)
	}
	_, err := s.CheckpointTx(ctx, req, func(ctx context.Context, tx any) ([]byte, error) {
		_, err := tx.(pgx.Tx).Exec(ctx, `INSERT INTO `+s.schema+`.app VALUES ('step')`)
		return []byte(`1`), err
	})
	if !errors.Is(err, storage.ErrInvalidArgument) {
		t.Fatalf("CheckpointTx replying to no update: %v, want ErrInvalidArgument", err)
	}
	var n int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM `+s.schema+`.app`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("the step's rows: %d, %v; want rolled back", n, err)
	}
	if cps, err := checkpointsOf(ctx, s, l.RunID); err != nil || len(cps) != 0 {
		t.Fatalf("checkpoints: %+v, %v; want none", cps, err)
	}
	if got, err := s.ListStreams(ctx, l.RunID); err != nil || len(got) != 0 {
		t.Fatalf("streams: %+v, %v; want none", got, err)
	}
	stale := req
	stale.Lease.Token++
	if _, err := s.Checkpoint(ctx, stale); !errors.Is(err, storage.ErrLeaseLost) {
		t.Fatalf("Checkpoint under a stale lease replying to no update: %v, want ErrLeaseLost", err)
	}
}

// TestInteractTx: a transactional step's checkpoint carries its reply and
// stream writes, committed with the step's writes; a step whose key has a
// checkpoint already writes neither; a checkpoint carrying a completion
// that notifies its parent writes them in its transaction too.
func TestInteractTx(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newTestStore(t, Options{})
	runs := claimAll(t, s, 1, "w")
	l := runs[0].Lease
	sendUpdate(t, s, l.RunID, "u1")
	sendUpdate(t, s, l.RunID, "u2")
	req := storage.CheckpointRequest{Lease: l, LeaseFor: time.Minute,
		Checkpoint: storage.Checkpoint{Key: "tx@v1", Kind: storage.KindStep},
		Reply:      &storage.UpdateReply{ID: "u1", Error: &storage.ErrorInfo{Message: "refused"}},
		Streams:    []storage.StreamWrite{{Stream: "out", Values: values("a", "b")}, {Stream: "out", Close: true}}}
	step := func(ctx context.Context, tx any) ([]byte, error) { return []byte(`1`), nil }
	if res, err := s.CheckpointTx(ctx, req, step); err != nil || res.Existing != nil {
		t.Fatalf("CheckpointTx: %+v, %v", res, err)
	}
	u, err := s.GetUpdate(ctx, l.RunID, "u1")
	if err != nil || u.State != storage.UpdateReplied || u.Error == nil || u.Error.Message != "refused" || u.Reply != nil {
		t.Fatalf("u1: %+v, %v; want replied with the error", u, err)
	}
	if vals, length, closed := streamOf(t, s, l.RunID, "out"); !slices.Equal(vals, []string{"a", "b"}) || length != 2 || !closed {
		t.Fatalf("stream out: %q, %d, %v; want a b, closed", vals, length, closed)
	}
	again := req
	again.Reply = &storage.UpdateReply{ID: "u2", Output: []byte(`2`)}
	again.Streams = []storage.StreamWrite{{Stream: "out", Values: values("c")}}
	if res, err := s.CheckpointTx(ctx, again, step); err != nil || res.Existing == nil {
		t.Fatalf("CheckpointTx of an existing key: %+v, %v; want Existing", res, err)
	}
	if u, err := s.GetUpdate(ctx, l.RunID, "u2"); err != nil || u.State != storage.UpdatePending {
		t.Fatalf("u2 after an existing checkpoint: %+v, %v; want pending", u, err)
	}
	if vals, _, closed := streamOf(t, s, l.RunID, "out"); len(vals) != 2 || !closed {
		t.Fatalf("stream out after an existing checkpoint: %q, closed %v", vals, closed)
	}

	// A child that replies and completes with a notification of its
	// parent: the checkpoint's own transaction (checkpointNotify).
	if _, err := s.CreateRuns(ctx, []storage.NewRun{{ID: "child", Workflow: "kid", ParentID: l.RunID}}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Claim(ctx, storage.ClaimRequest{Owner: "w", Workflows: []string{"kid"}, Limit: 1, LeaseFor: time.Minute})
	if err != nil || len(got) != 1 {
		t.Fatalf("claim child: %+v, %v", got, err)
	}
	cl := got[0].Lease
	sendUpdate(t, s, "child", "cu")
	res, err := s.Checkpoint(ctx, storage.CheckpointRequest{Lease: cl, LeaseFor: time.Minute,
		Checkpoint: storage.Checkpoint{Key: "last@v1", Kind: storage.KindReply},
		Reply:      &storage.UpdateReply{ID: "cu", Output: []byte(`3`)},
		Streams:    []storage.StreamWrite{{Stream: "s", Values: values("z")}},
		Complete: &storage.CompleteRequest{Status: storage.StatusComplete, Output: []byte(`4`),
			Notify: &storage.Event{RunID: l.RunID, Topic: "child-done", Payload: []byte(`4`)}}})
	if err != nil || !res.Completed {
		t.Fatalf("completing checkpoint: %+v, %v", res, err)
	}
	if u, err := s.GetUpdate(ctx, "child", "cu"); err != nil || u.State != storage.UpdateReplied {
		t.Fatalf("the child's update: %+v, %v; want replied", u, err)
	}
	if vals, _, _ := streamOf(t, s, "child", "s"); !slices.Equal(vals, []string{"z"}) {
		t.Fatalf("the child's stream: %q", vals)
	}
}

// TestInteractAnnounced: a reply and each stream a checkpoint writes are
// announced on the ended channel, heard by another store on the schema
// as by another process; a checkpoint that existed announces nothing.
func TestInteractAnnounced(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newTestStore(t, Options{})
	other := newTestStore(t, Options{Schema: unquote(s.schema)})
	heard := other.Finished(ctx)
	runs := claimAll(t, s, 1, "w")
	l := runs[0].Lease
	sendUpdate(t, s, l.RunID, "u1")
	req := storage.CheckpointRequest{Lease: l, LeaseFor: time.Minute,
		Checkpoint: storage.Checkpoint{Key: "k@v1", Kind: storage.KindReply},
		Reply:      &storage.UpdateReply{ID: "u1", Output: []byte(`1`)},
		Streams:    []storage.StreamWrite{{Stream: "a", Values: values("1")}, {Stream: "b", Close: true}, {Stream: "a", Values: values("2")}}}
	if _, err := s.Checkpoint(ctx, req); err != nil {
		t.Fatal(err)
	}
	want := []string{storage.UpdateAnnouncement(l.RunID, "u1"), storage.StreamAnnouncement(l.RunID, "a"), storage.StreamAnnouncement(l.RunID, "b")}
	var got []string
	for len(got) < len(want) {
		select {
		case a := <-heard:
			got = append(got, a)
		case <-time.After(30 * time.Second):
			t.Fatalf("heard %q, want %q", got, want)
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("heard %q, want %q", got, want)
	}
	if res, err := s.Checkpoint(ctx, req); err != nil || res.Existing == nil {
		t.Fatalf("the checkpoint again: %+v, %v; want Existing", res, err)
	}
	// A run's end, announced after: the next thing heard.
	if err := s.Complete(ctx, storage.CompleteRequest{Lease: l, Status: storage.StatusComplete}); err != nil {
		t.Fatal(err)
	}
	select {
	case a := <-heard:
		if a != l.RunID {
			t.Fatalf("heard %q after the existing checkpoint, want the run's end", a)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the run's end is not heard")
	}
}

// TestInteractDeleted: Purge and a replacement delete the updates and
// streams of the runs they delete, and leave the other runs' alone.
func TestInteractDeleted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := storetest.NewClock(storetest.Start)
	s := newTestStore(t, Options{Clock: clock})
	runs := claimAll(t, s, 3, "w")
	for i, c := range runs {
		sendUpdate(t, s, c.Lease.RunID, "u")
		if _, err := s.Checkpoint(ctx, storage.CheckpointRequest{Lease: c.Lease, LeaseFor: time.Minute,
			Checkpoint: storage.Checkpoint{Key: "k@v1", Kind: storage.KindStream},
			Streams:    []storage.StreamWrite{{Stream: "out", Values: values("1", "2")}, {Stream: "more", Values: values("3")}}}); err != nil {
			t.Fatal(err)
		}
		if i < 2 {
			if err := s.Complete(ctx, storage.CompleteRequest{Lease: c.Lease, Status: storage.StatusComplete}); err != nil {
				t.Fatal(err)
			}
		}
	}
	count := func() (n [3]int) {
		t.Helper()
		for i, table := range []string{"updates", "streams", "stream_values"} {
			if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM `+s.schema+`.`+table).Scan(&n[i]); err != nil {
				t.Fatal(err)
			}
		}
		return n
	}
	if got := count(); got != [3]int{3, 6, 9} {
		t.Fatalf("rows of updates, streams, values: %v", got)
	}
	clock.Advance(time.Hour)
	if pr, err := s.Purge(ctx, storage.PurgeRequest{FinishedBefore: clock.Now(), Limit: 1}); err != nil || pr.Runs != 1 {
		t.Fatalf("Purge: %+v, %v", pr, err)
	}
	if got := count(); got != [3]int{2, 4, 6} {
		t.Fatalf("rows after the purge of one run: %v", got)
	}
	replaced := runs[2].Lease.RunID
	if _, err := s.CreateRuns(ctx, []storage.NewRun{{ID: replaced, Workflow: "wf", OnExisting: storage.ExistingReplace,
		Replace: &storage.ReplaceTerms{Error: storage.ErrorInfo{Message: "replaced"}}}}); err != nil {
		t.Fatal(err)
	}
	if got := count(); got != [3]int{1, 2, 3} {
		t.Fatalf("rows after the replacement: %v", got)
	}
	if got, err := s.ListStreams(ctx, replaced); err != nil || len(got) != 0 {
		t.Fatalf("streams of the new run: %+v, %v; want none", got, err)
	}
	if _, err := s.GetUpdate(ctx, replaced, "u"); !errors.Is(err, storage.ErrUpdateNotFound) {
		t.Fatalf("the replaced run's update: %v, want ErrUpdateNotFound", err)
	}
	if res := sendUpdate(t, s, replaced, "u"); !res.Created || res.Update.Seq != 1 {
		t.Fatalf("an update of the new run: %+v; want created, seq 1", res)
	}
}

// TestInteractManyRuns: concurrent checkpoints of many runs, each
// appending to its stream, ride the writers' batches and leave every
// stream whole and in order; on a store that sends no notifications, whose
// statements announce nothing.
func TestInteractManyRuns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newTestStore(t, Options{DisableNotify: true})
	runs := claimAll(t, s, 16, "w")
	const steps = 20
	errs := make(chan error, len(runs))
	for _, c := range runs {
		go func() {
			for i := range steps {
				_, err := s.Checkpoint(ctx, storage.CheckpointRequest{Lease: c.Lease, LeaseFor: time.Minute,
					Checkpoint: storage.Checkpoint{Key: fmt.Sprintf("s%d@v1", i), Kind: storage.KindStream},
					Streams:    []storage.StreamWrite{{Stream: "out", Values: values(fmt.Sprint(2*i), fmt.Sprint(2*i+1))}}})
				if err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range runs {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range runs {
		vals, length, _ := streamOf(t, s, c.Lease.RunID, "out")
		if length != 2*steps {
			t.Fatalf("stream of %s: length %d, want %d", c.Lease.RunID, length, 2*steps)
		}
		for i, v := range vals {
			if v != fmt.Sprint(i) {
				t.Fatalf("stream of %s: %q", c.Lease.RunID, vals)
			}
		}
	}
}
