package redisstore

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stemflow/stem/storage"
)

// scriptShas records the SHA1 of each script a client runs.
type scriptShas struct {
	mu   sync.Mutex
	shas []string
}

func (h *scriptShas) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *scriptShas) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "evalsha" {
			h.mu.Lock()
			h.shas = append(h.shas, str(cmd.Args()[1]))
			h.mu.Unlock()
		}
		return next(ctx, cmd)
	}
}

func (h *scriptShas) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h *scriptShas) take() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := h.shas
	h.shas = nil
	return out
}

// heard reads n messages from a Finished channel.
func heard(t *testing.T, ch <-chan string, n int) []string {
	t.Helper()
	var got []string
	for range n {
		select {
		case m := <-ch:
			got = append(got, m)
		case <-time.After(5 * time.Second):
			t.Fatalf("Finished heard only %q, want %d messages", got, n)
		}
	}
	return got
}

// TestInteractScripts: a plain checkpoint runs checkpoint.lua and one with
// a completion ride.lua, as before; one with a reply or streams runs
// interact.lua, which writes them and announces each reply and stream
// written on the ended channel, before the run's end when it completes the
// run, and a replayed one writes and announces nothing.
func TestInteractScripts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, c := newTestStore(t, newClock())
	ended := s.Finished(ctx)
	shas := &scriptShas{}
	c.AddHook(shas)
	mustCreate(t, s, storage.NewRun{ID: "r", Workflow: "wf"})
	cl := mustClaimOne(t, s, "wf")
	up, err := s.SendUpdate(ctx, storage.UpdateRequest{RunID: "r", ID: "u1", Name: "add", Payload: []byte("p")})
	if err != nil || !up.Created || up.Delivered || up.Update.Seq != 1 {
		t.Fatalf("SendUpdate = %+v, %v", up, err)
	}
	step := func(key string) storage.CheckpointRequest {
		return storage.CheckpointRequest{Lease: cl.Lease, LeaseFor: time.Minute,
			Checkpoint: storage.Checkpoint{Key: key, Kind: storage.KindStep, Output: []byte("o")}}
	}
	shas.take()
	if _, err := s.Checkpoint(ctx, step("a@v1")); err != nil {
		t.Fatal(err)
	}
	if got := shas.take(); !slices.Equal(got, []string{checkpointScript.Hash()}) {
		t.Fatalf("a plain checkpoint ran %q, want checkpoint.lua only", got)
	}
	req := step("b@v1")
	req.Reply = &storage.UpdateReply{ID: "u1", Output: []byte("done")}
	req.Streams = []storage.StreamWrite{{Stream: "s", Values: [][]byte{[]byte("1"), nil, {}}}, {Stream: "t", Close: true}, {Stream: "s", Values: [][]byte{[]byte("4")}, Close: true}}
	if res, err := s.Checkpoint(ctx, req); err != nil || res.Existing != nil {
		t.Fatalf("Checkpoint with a reply = %+v, %v", res, err)
	}
	if got := shas.take(); !slices.Equal(got, []string{interactScript.Hash()}) {
		t.Fatalf("a checkpoint with a reply ran %q, want interact.lua only", got)
	}
	want := []string{storage.UpdateAnnouncement("r", "u1"), storage.StreamAnnouncement("r", "s"), storage.StreamAnnouncement("r", "t")}
	if got := heard(t, ended, 3); !slices.Equal(got, want) {
		t.Fatalf("Finished heard %q, want %q", got, want)
	}
	page, err := s.ReadStream(ctx, storage.StreamQuery{RunID: "r", Stream: "s"})
	if err != nil || page.Length != 4 || !page.Closed || page.Next != 4 || page.RunStatus != storage.StatusRunning || len(page.Values) != 4 {
		t.Fatalf("ReadStream = %+v, %v", page, err)
	}
	if v := page.Values; string(v[0].Value) != "1" || v[1].Value != nil || v[2].Value == nil || len(v[2].Value) != 0 || v[3].Offset != 3 {
		t.Fatalf("values %+v: nil and empty values do not read back as written", v)
	}

	// A replay finds the checkpoint: nothing more is written or announced.
	req.Reply.Output = []byte("again")
	if res, err := s.Checkpoint(ctx, req); err != nil || res.Existing == nil {
		t.Fatalf("replayed Checkpoint = %+v, %v; want Existing", res, err)
	}
	if n := c.LLen(ctx, s.keys.streamValues("r", "s")).Val(); n != 4 {
		t.Fatalf("a replay appended: %d values", n)
	}

	// An eager completion with a stream write: the stream's announcement
	// comes before the run's end.
	shas.take()
	req = step("c@v1")
	req.Streams = []storage.StreamWrite{{Stream: "t", Values: [][]byte{[]byte("x")}}}
	req.Complete = &storage.CompleteRequest{Status: storage.StatusComplete, Output: []byte("out")}
	if res, err := s.Checkpoint(ctx, req); err != nil || !res.Completed {
		t.Fatalf("Checkpoint with a stream and a completion = %+v, %v", res, err)
	}
	if got := shas.take(); !slices.Equal(got, []string{interactScript.Hash()}) {
		t.Fatalf("a completing checkpoint with a stream ran %q, want interact.lua only", got)
	}
	if got, want := heard(t, ended, 2), []string{storage.StreamAnnouncement("r", "t"), "r"}; !slices.Equal(got, want) {
		t.Fatalf("Finished heard %q, want %q", got, want)
	}
	if rec, err := s.GetRun(ctx, "r"); err != nil || rec.Status != storage.StatusComplete || string(rec.Output) != "out" {
		t.Fatalf("GetRun = %+v, %v; want complete", rec, err)
	}
	if n := c.Exists(ctx, s.keys.leases("wf")).Val(); n != 0 {
		t.Fatal("the completed run is left in the lease set")
	}
	infos, err := s.ListStreams(ctx, "r")
	if err != nil || len(infos) != 2 || infos[0].Name != "s" || infos[1].Name != "t" || infos[1].Length != 1 || infos[1].Closed {
		t.Fatalf("ListStreams = %+v, %v", infos, err)
	}
}

// TestReplyUnknownUpdate: a reply to an update the run does not have is
// refused with nothing written, after the lease: a holder that lost it
// hears that.
func TestReplyUnknownUpdate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, c := newTestStore(t, newClock())
	mustCreate(t, s, storage.NewRun{ID: "r", Workflow: "wf"})
	cl := mustClaimOne(t, s, "wf")
	before := storeKeys(t, s, c)
	req := storage.CheckpointRequest{Lease: cl.Lease, LeaseFor: time.Minute,
		Checkpoint: storage.Checkpoint{Key: "a@v1", Kind: storage.KindReply},
		Reply:      &storage.UpdateReply{ID: "nope"},
		Streams:    []storage.StreamWrite{{Stream: "s", Values: [][]byte{[]byte("1")}}}}
	if _, err := s.Checkpoint(ctx, req); !errors.Is(err, storage.ErrInvalidArgument) {
		t.Fatalf("reply to an unknown update: %v, want ErrInvalidArgument", err)
	}
	if got := storeKeys(t, s, c); !slices.Equal(got, before) {
		t.Fatalf("keys after the refused reply:\n%q\nbefore:\n%q", got, before)
	}
	req.Lease.Token++
	if _, err := s.Checkpoint(ctx, req); !errors.Is(err, storage.ErrLeaseLost) {
		t.Fatalf("reply to an unknown update under a lost lease: %v, want ErrLeaseLost", err)
	}
}

// TestLongStream: a write of more values than one RPUSH takes is appended
// whole and in order, and read back in pages.
func TestLongStream(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newTestStore(t, nil)
	mustCreate(t, s, storage.NewRun{ID: "r", Workflow: "wf"})
	cl := mustClaimOne(t, s, "wf")
	vals := make([][]byte, 2500)
	for i := range vals {
		vals[i] = []byte(strconv.Itoa(i))
	}
	if _, err := s.Checkpoint(ctx, storage.CheckpointRequest{Lease: cl.Lease, LeaseFor: time.Minute,
		Checkpoint: storage.Checkpoint{Key: "a@v1", Kind: storage.KindStream},
		Streams:    []storage.StreamWrite{{Stream: "s", Values: vals}}}); err != nil {
		t.Fatal(err)
	}
	var from int64
	for from < 2500 {
		page, err := s.ReadStream(ctx, storage.StreamQuery{RunID: "r", Stream: "s", From: from, Limit: 1000})
		if err != nil || page.Length != 2500 || len(page.Values) == 0 {
			t.Fatalf("ReadStream from %d = %d values, length %d, %v", from, len(page.Values), page.Length, err)
		}
		for i, v := range page.Values {
			if v.Offset != from+int64(i) || string(v.Value) != strconv.Itoa(int(v.Offset)) {
				t.Fatalf("value at %d = %+v", from+int64(i), v)
			}
		}
		from = page.Next
	}
	page, err := s.ReadStream(ctx, storage.StreamQuery{RunID: "r", Stream: "s", From: 1 << 62, Limit: storage.MaxStreamPage})
	if err != nil || len(page.Values) != 0 || page.Next != 1<<62 || page.Length != 2500 {
		t.Fatalf("ReadStream far past the end = %+v, %v", page, err)
	}
}

// TestInteractKeysDeleted: Purge and a replacement delete a run's
// updates, replies and streams with it.
func TestInteractKeysDeleted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := newClock()
	s, c := newTestStore(t, clock)
	fresh, fc := newTestStore(t, clock)
	fill := func(id string, complete bool) {
		t.Helper()
		mustCreate(t, s, storage.NewRun{ID: id, Workflow: "wf"})
		cl := mustClaimOne(t, s, "wf")
		for _, u := range []string{"u1", "u2"} {
			if _, err := s.SendUpdate(ctx, storage.UpdateRequest{RunID: id, ID: u, Name: "n", Payload: []byte("p")}); err != nil {
				t.Fatal(err)
			}
		}
		req := storage.CheckpointRequest{Lease: cl.Lease, LeaseFor: time.Minute,
			Checkpoint: storage.Checkpoint{Key: "a@v1", Kind: storage.KindReply},
			Reply:      &storage.UpdateReply{ID: "u1", Error: &storage.ErrorInfo{Message: "no"}},
			Streams:    []storage.StreamWrite{{Stream: "s", Values: [][]byte{[]byte("1")}}, {Stream: "t", Close: true}}}
		if complete {
			req.Complete = &storage.CompleteRequest{Status: storage.StatusComplete}
		}
		if res, err := s.Checkpoint(ctx, req); err != nil || res.Completed != complete {
			t.Fatalf("Checkpoint = %+v, %v", res, err)
		}
	}
	ours := func(keys []string) []string {
		return slices.DeleteFunc(keys, func(k string) bool {
			for _, p := range []string{"up:", "ur:", "ul:", "sv:", "sm:", "e:", "et:"} {
				if strings.HasPrefix(k, p) {
					return false
				}
			}
			return true
		})
	}
	fill("gone", true)
	if got := ours(storeKeys(t, s, c)); len(got) != 7 {
		t.Fatalf("keys of the updates, streams and buffered events: %q, want 7", got)
	}
	clock.Advance(time.Second)
	res, err := s.Purge(ctx, storage.PurgeRequest{FinishedBefore: clock.Now(), Limit: 10})
	if err != nil || res.Runs != 1 {
		t.Fatalf("Purge = %+v, %v", res, err)
	}
	if got := ours(storeKeys(t, s, c)); len(got) != 0 {
		t.Fatalf("keys left by Purge: %q", got)
	}
	if _, err := s.GetUpdate(ctx, "gone", "u1"); !errors.Is(err, storage.ErrUpdateNotFound) {
		t.Fatalf("GetUpdate of a purged run: %v", err)
	}

	fill("p", false)
	replacing := storage.NewRun{ID: "p", Workflow: "wf", OnExisting: storage.ExistingReplace,
		Replace: &storage.ReplaceTerms{Error: storage.ErrorInfo{Message: "replaced"}}}
	if res, err := s.CreateRuns(ctx, []storage.NewRun{replacing}); err != nil || !res[0].Created {
		t.Fatalf("replace = %+v, %v", res, err)
	}
	mustCreate(t, fresh, storage.NewRun{ID: "p", Workflow: "wf"})
	if got, want := storeKeys(t, s, c), storeKeys(t, fresh, fc); !slices.Equal(got, want) {
		t.Fatalf("keys after the replace:\n%q\nafter a fresh create:\n%q", got, want)
	}
	if ups, err := s.ListUpdates(ctx, storage.UpdatesQuery{RunID: "p"}); err != nil || len(ups) != 0 {
		t.Fatalf("ListUpdates of the new run = %+v, %v", ups, err)
	}
}

// TestUpdateDelivered: an update to a run waiting on its topic is written
// as the wait's checkpoint, of the wait's kind, by SendEvent's code, and
// the run is queued; sending its ID again returns it as it is.
func TestUpdateDelivered(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newTestStore(t, newClock())
	mustCreate(t, s, storage.NewRun{ID: "r", Workflow: "wf"})
	cl := mustClaimOne(t, s, "wf")
	wait := &storage.Wait{Key: "u@v1", Topic: storage.UpdateTopic("add"), Kind: storage.KindUpdate}
	if _, err := s.Suspend(ctx, storage.SuspendRequest{Lease: cl.Lease, LeaseFor: time.Minute, Wait: wait}); err != nil {
		t.Fatal(err)
	}
	req := storage.UpdateRequest{RunID: "r", ID: "u1", Name: "add", Payload: []byte("p"), Headers: map[string]string{"h": "v"}}
	up, err := s.SendUpdate(ctx, req)
	if err != nil || !up.Created || !up.Delivered || up.Update.State != storage.UpdatePending || up.Update.Headers["h"] != "v" {
		t.Fatalf("SendUpdate = %+v, %v", up, err)
	}
	rec, err := s.GetRun(ctx, "r")
	if err != nil || rec.Status != storage.StatusQueued || rec.Wait != nil {
		t.Fatalf("GetRun = %+v, %v; want queued without its wait", rec, err)
	}
	h, err := s.ListSteps(ctx, storage.StepsQuery{RunID: "r"})
	if err != nil || len(h.Steps) != 1 || h.Steps[0].Kind != storage.KindUpdate || string(h.Steps[0].Output) != "p" {
		t.Fatalf("ListSteps = %+v, %v; want the update's checkpoint", h, err)
	}
	req.Payload = []byte("other")
	again, err := s.SendUpdate(ctx, req)
	if err != nil || again.Created || again.Delivered || string(again.Update.Payload) != "p" || again.Update.Seq != 1 {
		t.Fatalf("SendUpdate again = %+v, %v; want the first", again, err)
	}
	got, err := s.GetUpdate(ctx, "r", "u1")
	if err != nil || got.Seq != 1 || !got.CreatedAt.Equal(up.Update.CreatedAt) || got.Name != "add" {
		t.Fatalf("GetUpdate = %+v, %v", got, err)
	}
}

// TestRepeatedSendUpdate: the update script run again with the same
// operation ID, as go-redis does when a reply is lost, reports the update
// created and delivered as the first run did; another call reports it
// existing.
func TestRepeatedSendUpdate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newTestStore(t, nil)
	mustCreate(t, s, storage.NewRun{ID: "r", Workflow: "wf"})
	keys := []string{s.keys.run("r"), s.keys.updates("r"), s.keys.replies("r"), s.keys.updateOrder("r")}
	call := func(op string) []any {
		t.Helper()
		v, err := s.run(ctx, updateScript, keys, "r", "u1", "n", storage.UpdateTopic("n"), mark([]byte("p")), "", op)
		if err != nil {
			t.Fatal(err)
		}
		return v.([]any)
	}
	first := call("op1")
	if again := call("op1"); first[1] != int64(1) || again[1] != int64(1) || again[2] != first[2] || again[3] != first[3] {
		t.Fatalf("repeated call = %q, first %q", again, first)
	}
	if other := call("op2"); other[1] != int64(0) || other[2] != int64(0) || other[3] != first[3] {
		t.Fatalf("another call = %q; want the update existing", other)
	}
	if ups, err := s.ListUpdates(ctx, storage.UpdatesQuery{RunID: "r"}); err != nil || len(ups) != 1 {
		t.Fatalf("ListUpdates = %+v, %v; want one update", ups, err)
	}
}
