package redisstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stemflow/stem/internal/slots"
	"github.com/stemflow/stem/storage"
	"github.com/stemflow/stem/stores/storetest"
)

// newTestCluster opens a Cluster store of n shards on a fresh prefix of
// the shared server; it is closed and its keys deleted at cleanup.
func newTestCluster(tb testing.TB, clock storage.Clock, n int) *Cluster {
	tb.Helper()
	c := testClient(tb)
	prefix := testPrefix(tb)
	cleanupPrefix(tb, c, prefix)
	s, err := NewCluster(context.Background(), c, ClusterOptions{Shards: n, Options: Options{Prefix: prefix, Clock: clock, Logger: quietLogger()}})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = s.Close() })
	return s
}

// TestClusterLayoutConformance runs the suite against the sharded layout
// on one server: four shards, so that families, locators, merged listings
// and claims in turn are all exercised without a cluster.
func TestClusterLayoutConformance(t *testing.T) {
	redisURL(t)
	storetest.Run(t, func(t *testing.T, clock storage.Clock) storage.Store {
		return newTestCluster(t, clock, 4)
	})
}

// idsOnShards returns two IDs whose homes are different shards of c.
func idsOnShards(t *testing.T, c *Cluster, a, b string) (string, string) {
	t.Helper()
	for i := range 1000 {
		id := fmt.Sprintf("%s-%d", b, i)
		if c.home(id) != c.home(a) {
			return a, id
		}
	}
	t.Fatal("no ID found on another shard")
	return "", ""
}

// TestClusterChildLivesWithItsParent: a child whose ID hashes to another
// shard is created on its parent's shard, with a locator on its home, so
// that a store with nothing remembered (another process) finds it, lists
// it among the parent's children and terminates it with the parent; the
// ID created again without a parent stays where its locator says.
func TestClusterChildLivesWithItsParent(t *testing.T) {
	redisURL(t)
	ctx := context.Background()
	c := newTestCluster(t, nil, 4)
	parent, child := idsOnShards(t, c, "parent", "child")
	if _, err := c.CreateRuns(ctx, []storage.NewRun{{ID: parent, Workflow: "p"}, {ID: child, Workflow: "c", ParentID: parent}}); err != nil {
		t.Fatal(err)
	}
	other, err := NewCluster(ctx, testClient(t), ClusterOptions{Options: Options{Prefix: c.prefix, Logger: quietLogger()}})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if other.Shards() != 4 {
		t.Fatalf("reopened with %d shards, want the recorded 4", other.Shards())
	}
	rec, err := other.GetRun(ctx, child)
	if err != nil || rec.ParentID != parent {
		t.Fatalf("GetRun(child) from another process = %+v, %v", rec, err)
	}
	if at, _ := other.locate(ctx, child); at != other.home(parent) {
		t.Fatalf("child located on shard %d, want its parent's %d", at, other.home(parent))
	}
	page, err := other.ListRuns(ctx, storage.ListRunsQuery{ParentID: parent})
	if err != nil || len(page.Runs) != 1 || page.Runs[0].ID != child {
		t.Fatalf("children of the parent = %+v, %v", page.Runs, err)
	}
	if _, err := other.Terminate(ctx, storage.TerminateRequest{RunID: parent, Error: storage.ErrorInfo{Message: "test"}, ChildError: &storage.ErrorInfo{Message: "parent ended"}}); err != nil {
		t.Fatal(err)
	}
	if rec, err := other.GetRun(ctx, child); err != nil || rec.Status != storage.StatusTerminated {
		t.Fatalf("child after its parent's Terminate = %s, %v; want terminated with it", rec.Status, err)
	}
	if _, err := other.Purge(ctx, storage.PurgeRequest{FinishedBefore: time.Now().Add(time.Hour), Limit: 100}); err != nil {
		t.Fatal(err)
	}
	if _, err := other.CreateRuns(ctx, []storage.NewRun{{ID: child, Workflow: "c"}}); err != nil {
		t.Fatal(err)
	}
	if at, _ := c.locate(ctx, child); at != c.home(parent) {
		t.Fatalf("the ID created again lives on shard %d, want %d where its locator points", at, c.home(parent))
	}
}

// TestClusterOutboxSweep: a run's end whose event goes to another shard
// and whose process died before sending it is sent by a sweep, once,
// however many sweeps run; an entry whose end never happened is dropped
// without sending.
func TestClusterOutboxSweep(t *testing.T) {
	redisURL(t)
	ctx := context.Background()
	clock := storetest.NewClock(storetest.Start)
	c := newTestCluster(t, clock, 4)
	parent, child := idsOnShards(t, c, "parent", "child")
	ghost := ""
	for i := 0; ghost == ""; i++ {
		if id := fmt.Sprintf("ghost-%d", i); c.home(id) == c.home(child) {
			ghost = id
		}
	}
	for _, id := range []string{parent, child, ghost} {
		if _, err := c.CreateRuns(ctx, []storage.NewRun{{ID: id, Workflow: "wf-" + id}}); err != nil {
			t.Fatal(err)
		}
	}
	claim := func(wf string) storage.Lease {
		t.Helper()
		got, err := c.Claim(ctx, storage.ClaimRequest{Owner: "w", Workflows: []string{wf}, Limit: 1, LeaseFor: time.Minute})
		if err != nil || len(got) != 1 {
			t.Fatalf("claim %s = %v, %v", wf, got, err)
		}
		return got[0].Lease
	}
	pl := claim("wf-" + parent)
	if _, err := c.Suspend(ctx, storage.SuspendRequest{Lease: pl, Wait: &storage.Wait{Key: "call@v1", Topic: "child:" + child, Kind: storage.KindChild}}); err != nil {
		t.Fatal(err)
	}
	cs, _ := c.of(ctx, child)
	ev := storage.Event{RunID: parent, Topic: "child:" + child, Payload: []byte(`"done"`)}
	// The process wrote the entry and the end, and died.
	put := func(op, run string, st storage.RunStatus) {
		b, _ := json.Marshal(outboxEntry{Run: run, Status: st, Event: ev, At: time.Now().Add(-time.Minute).UnixMilli()})
		if err := cs.client.HSet(ctx, cs.keys.outbox(), op, b).Err(); err != nil {
			t.Fatal(err)
		}
	}
	put("ob:done", child, storage.StatusComplete)
	if err := cs.Complete(ctx, storage.CompleteRequest{Lease: claim("wf-" + child), Status: storage.StatusComplete, Output: []byte(`"done"`)}); err != nil {
		t.Fatal(err)
	}
	put("ob:never", ghost, storage.StatusComplete)
	i := slices.Index(c.shards, cs)
	for range 3 {
		if err := c.sweep(ctx, i, time.Now()); err != nil {
			t.Fatal(err)
		}
		// An entry the sweep has taken must stay taken.
		put("ob:done", child, storage.StatusComplete)
	}
	replay, err := c.LoadReplay(ctx, parent)
	if err != nil {
		t.Fatal(err)
	}
	if len(replay.Checkpoints) != 1 || string(replay.Checkpoints[0].Output) != `"done"` {
		t.Fatalf("parent's checkpoints = %+v, want the child's result once", replay.Checkpoints)
	}
	ps, _ := c.of(ctx, parent)
	n, err := ps.client.LLen(ctx, ps.keys.events(parent, ev.Topic)).Result()
	if err != nil || n != 0 {
		t.Fatalf("events buffered for the parent after repeated sweeps = %d, %v; want none", n, err)
	}
	left, err := cs.client.HKeys(ctx, cs.keys.outbox()).Result()
	if err != nil || !slices.Equal(left, []string{"ob:done"}) {
		t.Fatalf("outbox after the sweeps = %v, %v; want only the entry written after the last", left, err)
	}
	if rec, _ := c.GetRun(ctx, ghost); rec.Status != storage.StatusQueued {
		t.Fatalf("ghost = %s, want still queued", rec.Status)
	}
}

// TestClusterShards: the shard count is recorded and a different one is
// refused; a prefix with a brace is refused; OpenExisting needs a store;
// the shards' tags spread over the slot ranges and share the channels.
func TestClusterShards(t *testing.T) {
	redisURL(t)
	ctx := context.Background()
	c := newTestCluster(t, nil, 3)
	_, err := NewCluster(ctx, testClient(t), ClusterOptions{Shards: 5, Options: Options{Prefix: c.prefix, Logger: quietLogger()}})
	if !errors.Is(err, storage.ErrInvalidArgument) || !strings.Contains(err.Error(), "has 3 shards, not 5") {
		t.Fatalf("reopen with 5 shards: %v", err)
	}
	_, err = NewCluster(ctx, testClient(t), ClusterOptions{Options: Options{Prefix: "stemtest:{x}:", Logger: quietLogger()}})
	if !errors.Is(err, storage.ErrInvalidArgument) {
		t.Fatalf("prefix with a hash tag: %v", err)
	}
	_, err = NewCluster(ctx, testClient(t), ClusterOptions{Options: Options{Prefix: testPrefix(t), OpenExisting: true, Logger: quietLogger()}})
	if !errors.Is(err, storage.ErrNotStore) {
		t.Fatalf("OpenExisting of an empty prefix: %v", err)
	}
	for _, n := range []int{1, 3, 16, 1024} {
		for i := range n {
			p := shardPrefix("stem:", i, n)
			tag := p[strings.IndexByte(p, '{')+1 : strings.IndexByte(p, '}')]
			if slot := slots.Of(tag); slot < i*16384/n || slot >= (i+1)*16384/n {
				t.Fatalf("shard %d of %d: tag %q is in slot %d, outside its range", i, n, tag, slot)
			}
			if channelPrefix(p) != "stem:" {
				t.Fatalf("channel prefix of %q = %q", p, channelPrefix(p))
			}
		}
	}
	for _, p := range []string{"stem:", "{stem}:", "a{1.2}:b:", "x{1.}:", "x{.2}:"} {
		if channelPrefix(p) != p {
			t.Fatalf("channel prefix of %q = %q, want itself", p, channelPrefix(p))
		}
	}
	// The scripts name the same channels.
	src := assemble("local function main() return {channel_prefix(), wake_channel(), ended_channel()} end")
	for _, p := range []string{shardPrefix("q:", 2, 7), "{stem}:", "a{1.2}:b:"} {
		v, err := testClient(t).Eval(ctx, src, nil, p, "").StringSlice()
		if err != nil {
			t.Fatal(err)
		}
		if want := []string{channelPrefix(p), channelPrefix(p) + "wake", channelPrefix(p) + "ended"}; !slices.Equal(v, want) {
			t.Fatalf("Lua channels of %q = %q, want %q", p, v, want)
		}
	}
}

// TestClusterURL: the URL's forms and its mistakes.
func TestClusterURL(t *testing.T) {
	o, p, err := parseClusterURL("redis+cluster://u:secret@h1:7000,h2:7001/?shards=8&pool_size=7&wait_replicas=1")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(o.Addrs, []string{"h1:7000", "h2:7001"}) || p.shards != 8 || p.wait != 1 || o.PoolSize != 7 || o.Password != "secret" || o.Username != "u" {
		t.Fatalf("parsed %+v, %+v", o, p)
	}
	for _, bad := range []string{
		"redis://h1:7000",
		"redis+cluster://",
		"redis+cluster://h1:7000?shards=0",
		"redis+cluster://h1:7000?shards=many",
		"redis+cluster://h1:7000?shards=2000",
		"redis+cluster://u:secret@h1:7000?pool_sise=3",
		"redis+cluster://h1:7000?wait_replicas=-1",
	} {
		_, _, err := parseClusterURL(bad)
		if !errors.Is(err, storage.ErrInvalidArgument) {
			t.Errorf("%q: %v, want ErrInvalidArgument", bad, err)
		}
		if err != nil && strings.Contains(err.Error(), "secret") {
			t.Errorf("%q: the error shows the password: %v", bad, err)
		}
	}
}

// TestClusterAndSingleLayoutsDoNotMix: a prefix that holds a store of one
// server's layout is refused by a cluster store, and the other way round,
// each naming the URL that opens it; neither writes a key.
func TestClusterAndSingleLayoutsDoNotMix(t *testing.T) {
	redisURL(t)
	ctx := context.Background()
	single, c := newTestStore(t, nil)
	_, err := NewCluster(ctx, c, ClusterOptions{Options: Options{Prefix: single.keys.prefix, Logger: quietLogger()}})
	if !errors.Is(err, storage.ErrNotStore) || !strings.Contains(err.Error(), "redis://") {
		t.Fatalf("a cluster store on a single store's prefix: %v", err)
	}
	if n, _ := c.Exists(ctx, single.keys.prefix+"shards").Result(); n != 0 {
		t.Fatal("the refused cluster store recorded a shard count")
	}
	cl := newTestCluster(t, nil, 2)
	_, err = New(ctx, c, Options{Prefix: cl.prefix, Logger: quietLogger()})
	if !errors.Is(err, storage.ErrNotStore) || !strings.Contains(err.Error(), "redis+cluster://") {
		t.Fatalf("a single store on a cluster store's prefix: %v", err)
	}
	if n, _ := c.Exists(ctx, cl.prefix+"v").Result(); n != 0 {
		t.Fatal("the refused single store wrote its version key")
	}
}

// TestClusterStartKeys: runs created with a start key live on the key's
// shard, whatever their IDs, so a second start with the key joins the
// first; a keyed create under an ID that lives elsewhere already is
// refused with nothing written.
func TestClusterStartKeys(t *testing.T) {
	redisURL(t)
	ctx := context.Background()
	c := newTestCluster(t, nil, 8)
	key := &storage.StartKey{Key: "nightly"}
	k := keyShard(8, "wf", "nightly")
	var ids []string
	for i := 0; len(ids) < 2; i++ {
		if id := fmt.Sprintf("r%d", i); c.home(id) != k {
			ids = append(ids, id)
		}
	}
	res, err := c.CreateRuns(ctx, []storage.NewRun{{ID: ids[0], Workflow: "wf", Key: key}})
	if err != nil || !res[0].Created {
		t.Fatalf("first keyed create = %+v, %v", res, err)
	}
	res, err = c.CreateRuns(ctx, []storage.NewRun{{ID: ids[1], Workflow: "wf", Key: key}})
	if err != nil || res[0].Created || res[0].Run.ID != ids[0] {
		t.Fatalf("second keyed create = %+v, %v; want the first run, holding the key", res, err)
	}
	if at, _ := c.locate(ctx, ids[0]); at != k {
		t.Fatalf("the keyed run lives on shard %d, want the key's %d", at, k)
	}
	plain := ""
	for i := 0; plain == ""; i++ {
		if id := fmt.Sprintf("p%d", i); c.home(id) != k {
			plain = id
		}
	}
	if _, err := c.CreateRuns(ctx, []storage.NewRun{{ID: plain, Workflow: "wf"}}); err != nil {
		t.Fatal(err)
	}
	_, err = c.CreateRuns(ctx, []storage.NewRun{{ID: plain, Workflow: "wf", Key: &storage.StartKey{Key: "nightly"}}})
	if !errors.Is(err, storage.ErrUnsupported) || !strings.Contains(err.Error(), plain) {
		t.Fatalf("a keyed create under an ID living elsewhere: %v", err)
	}
	if rec, err := c.GetRun(ctx, plain); err != nil || rec.Status != storage.StatusQueued {
		t.Fatalf("the run of that ID = %+v, %v; want it untouched", rec, err)
	}
}
