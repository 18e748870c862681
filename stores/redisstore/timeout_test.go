package redisstore

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stemflow/stem/internal/testserver"
	"github.com/stemflow/stem/storage"
)

// TestOpenSilentServer: against a server that accepts connections and never
// answers, Open fails once the connect timeout has passed, naming the
// server, instead of hanging.
func TestOpenSilentServer(t *testing.T) {
	t.Parallel()
	addr := testserver.Silent(t)
	for _, existing := range []bool{false, true} {
		err := testserver.Within(t, "Open", func() error {
			s, err := Open(context.Background(), "redis://:secret@"+addr+"/0", Options{ConnectTimeout: 200 * time.Millisecond, OpenExisting: existing, Logger: quietLogger()})
			if err == nil {
				s.Close()
			}
			return err
		})
		if err == nil {
			t.Fatal("Open of a silent server succeeded")
		}
		want := "redisstore: connect: server " + addr + ": no answer within 200ms"
		if !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "secret") {
			t.Errorf("OpenExisting %v: error %q should contain %q (and never the password)", existing, err, want)
		}
	}
}

// TestFrozenServer: while the server is frozen (SIGSTOP: connections are
// accepted, nothing answers), every call returns once its call timeout has
// passed, with an error naming the server, the operation and the timeout;
// the store logs "not answering" once for all of them, and "answering
// again" once when the server is back.
func TestFrozenServer(t *testing.T) {
	t.Parallel()
	rd := testserver.Redis(t)
	logs, logger := testserver.CaptureLogs(slog.LevelInfo)
	ctx := context.Background()
	s, err := Open(ctx, rd.URL(), Options{CallTimeout: 500 * time.Millisecond, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	// Should a call hang, thaw the server before the store closes.
	t.Cleanup(rd.Thaw)
	if _, err := s.CreateRuns(ctx, []storage.NewRun{{ID: "r1", Workflow: "wf"}}); err != nil {
		t.Fatal(err)
	}

	rd.Freeze()
	calls := []struct {
		op   string
		call func() error
	}{
		{`get "r1"`, func() error { _, err := s.GetRun(ctx, "r1"); return err }},
		{"list", func() error { _, err := s.ListRuns(ctx, storage.ListRunsQuery{}); return err }},
		{"claim", func() error {
			_, err := s.Claim(ctx, storage.ClaimRequest{Owner: "w", Workflows: []string{"wf"}, Limit: 1, LeaseFor: time.Minute})
			return err
		}},
		{"pause", func() error { return s.Pause(ctx, "r1") }},
	}
	for _, c := range calls {
		err := testserver.Within(t, c.op, c.call)
		want := "server " + rd.Addr() + ": no answer within 500ms"
		if err == nil || !strings.Contains(err.Error(), "redisstore: "+c.op) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s on a frozen server: %v, want an error naming the operation and %q", c.op, err, want)
		}
	}
	if n := logs.Count("not answering since"); n != 1 {
		t.Errorf(`%d "not answering" lines for %d failed calls, want 1:\n%s`, n, len(calls), logs)
	}
	if n := logs.Count(`level=WARN msg="redisstore: server at ` + rd.Addr() + " not answering"); n != 1 {
		t.Errorf("the warning does not name the server at warn level:\n%s", logs)
	}

	rd.Thaw()
	testserver.AnswersAgain(t, "get", func() error { _, err := s.GetRun(ctx, "r1"); return err })
	if _, err := s.ListRuns(ctx, storage.ListRunsQuery{}); err != nil {
		t.Fatal(err)
	}
	if n := logs.Count("answering again after"); n != 1 {
		t.Errorf(`%d "answering again" lines after the thaw, want 1:\n%s`, n, logs)
	}
	if n := logs.Count("not answering since"); n != 1 {
		t.Errorf(`%d "not answering" lines in all, want 1:\n%s`, n, logs)
	}
	t.Logf("the store's log:\n%s", logs)
}

// prefixKeys lists every key under prefix.
func prefixKeys(t *testing.T, c *redis.Client, prefix string) []string {
	t.Helper()
	keys, err := c.Keys(context.Background(), prefix+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// TestOpenExisting: with OpenExisting, a prefix that holds no store is
// refused with storage.ErrNotStore, naming the server and the prefix, and
// gets no key; a worker's Open marks its prefix as a store, which then
// opens; a prefix holding runs from before version keys is a store of
// layout 1, which OpenExisting refuses, saying how to upgrade it, and a
// worker's Open upgrades; a store of an unknown version is refused either
// way.
func TestOpenExisting(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := testClient(t)
	open := func(prefix string, existing bool) error {
		t.Helper()
		s, err := New(ctx, c, Options{Prefix: prefix, OpenExisting: existing, Logger: quietLogger()})
		if err == nil {
			s.Close()
		}
		return err
	}
	host := c.Options().Addr

	prefix := testPrefix(t)
	cleanupPrefix(t, c, prefix)
	err := open(prefix, true)
	if !errors.Is(err, storage.ErrNotStore) || !strings.Contains(err.Error(), host) || !strings.Contains(err.Error(), prefix) {
		t.Fatalf("OpenExisting of an empty prefix: %v, want ErrNotStore naming %s and %s", err, host, prefix)
	}
	if keys := prefixKeys(t, c, prefix); len(keys) != 0 {
		t.Fatalf("OpenExisting wrote %v", keys)
	}
	if err := open(prefix, false); err != nil {
		t.Fatal(err)
	}
	if err := open(prefix, true); err != nil {
		t.Fatalf("OpenExisting of a worker's prefix: %v", err)
	}

	legacy := testPrefix(t)
	cleanupPrefix(t, c, legacy)
	if err := c.ZAdd(ctx, legacy+"ia", redis.Z{Member: "r1"}).Err(); err != nil {
		t.Fatal(err)
	}
	if err := open(legacy, true); !errors.Is(err, storage.ErrNotStore) || !strings.Contains(err.Error(), "without OpenExisting") {
		t.Fatalf("OpenExisting of a store from before version keys: %v, want ErrNotStore saying how to upgrade it", err)
	}
	if keys := prefixKeys(t, c, legacy); len(keys) != 1 {
		t.Fatalf("OpenExisting wrote to a store: %v", keys)
	}
	if err := open(legacy, false); err != nil {
		t.Fatalf("a worker's Open of a store from before version keys: %v", err)
	}
	if err := open(legacy, true); err != nil {
		t.Fatalf("OpenExisting of a store a worker upgraded: %v", err)
	}

	if err := c.Set(ctx, prefix+"v", strconv.Itoa(storeVersion+1), 0).Err(); err != nil {
		t.Fatal(err)
	}
	for _, existing := range []bool{true, false} {
		if err := open(prefix, existing); !errors.Is(err, storage.ErrNotStore) || !strings.Contains(err.Error(), "upgrade the code") {
			t.Fatalf("OpenExisting %v of a newer store: %v, want ErrNotStore", existing, err)
		}
	}
}

// TestPolicyRechecked: a server switched to an evicting maxmemory-policy
// after Open is noticed within the re-check interval: Claim then refuses,
// naming the policy, with one error logged however often it refuses, while
// a run leased before may finish; back to noeviction, Claim works again.
func TestPolicyRechecked(t *testing.T) {
	t.Parallel()
	rd := testserver.Redis(t)
	admin := rd.Client()
	ctx := context.Background()
	logs, logger := testserver.CaptureLogs(slog.LevelInfo)
	s, err := Open(ctx, rd.URL(), Options{PolicyCheckInterval: 100 * time.Millisecond, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if _, err := s.CreateRuns(ctx, []storage.NewRun{{ID: "r1", Workflow: "wf"}, {ID: "r2", Workflow: "wf"}}); err != nil {
		t.Fatal(err)
	}
	claim := func() ([]storage.ClaimedRun, error) {
		return s.Claim(ctx, storage.ClaimRequest{Owner: "w", Workflows: []string{"wf"}, Limit: 1, LeaseFor: time.Minute})
	}
	got, err := claim()
	if err != nil || len(got) != 1 {
		t.Fatalf("claim: %v %v", got, err)
	}
	leased := got[0].Lease

	if err := admin.ConfigSet(ctx, "maxmemory-policy", "allkeys-lru").Err(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(150 * time.Millisecond) // more than the re-check interval
	_, refusal := claim()
	if refusal == nil || !strings.Contains(refusal.Error(), `maxmemory-policy "allkeys-lru"`) || !strings.Contains(refusal.Error(), rd.Addr()) {
		t.Fatalf("Claim on an evicting server: %v, want a refusal naming the policy and the server", refusal)
	}
	for range 3 {
		if _, err := claim(); err == nil {
			t.Fatal("Claim took work on an evicting server")
		}
	}
	if n := logs.Count("level=ERROR"); n != 1 || !strings.Contains(logs.String(), "allkeys-lru") {
		t.Fatalf("%d error lines for 4 refusals, want 1 naming the policy:\n%s", n, logs)
	}
	if err := s.Complete(ctx, storage.CompleteRequest{Lease: leased, Status: storage.StatusComplete}); err != nil {
		t.Fatalf("completing a run leased before the switch: %v", err)
	}

	if err := admin.ConfigSet(ctx, "maxmemory-policy", "noeviction").Err(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(150 * time.Millisecond)
	if got, err := claim(); err != nil || len(got) != 1 || got[0].Lease.RunID != "r2" {
		t.Fatalf("claim back on noeviction: %v %v", got, err)
	}
	if !strings.Contains(logs.String(), "claiming resumes") {
		t.Fatalf("no line says claiming resumes:\n%s", logs)
	}
}

// TestReadsWhenFull: on a server full under noeviction, which refuses every
// write, the read methods still answer, through a store opened with
// OpenExisting as an operator's tool opens it; ListWorkers too, whose
// script may delete.
func TestReadsWhenFull(t *testing.T) {
	t.Parallel()
	rd := testserver.Redis(t, "--maxmemory", "4mb", "--maxmemory-policy", "noeviction")
	admin := rd.Client()
	ctx := context.Background()
	worker, err := Open(ctx, rd.URL(), Options{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { worker.Close() })
	if _, err := worker.CreateRuns(ctx, []storage.NewRun{{ID: "r1", Workflow: "wf", Input: []byte(`{}`)}}); err != nil {
		t.Fatal(err)
	}
	got, err := worker.Claim(ctx, storage.ClaimRequest{Owner: "w", Workflows: []string{"wf"}, Limit: 1, LeaseFor: time.Minute})
	if err != nil || len(got) != 1 {
		t.Fatalf("claim: %v %v", got, err)
	}
	if _, err := worker.Checkpoint(ctx, storage.CheckpointRequest{Lease: got[0].Lease, LeaseFor: time.Minute,
		Checkpoint: storage.Checkpoint{Key: "step", Kind: storage.KindStep, Output: []byte(`1`)}}); err != nil {
		t.Fatal(err)
	}
	if err := worker.PutCatalog(ctx, storage.Catalog{Workflows: []storage.WorkflowType{{Name: "wf", Version: 1}}}); err != nil {
		t.Fatal(err)
	}
	if err := worker.PutWorker(ctx, storage.PutWorkerRequest{Worker: storage.Worker{ID: "w", StartedAt: time.Now()}, TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}

	// Fill the server with another application's keys until it refuses
	// even a small one (a big value counts against the limit while it is
	// being written, so the big ones fail first).
	n := 0
	for _, size := range []int{64 << 10, 4 << 10, 256, 16} {
		value := strings.Repeat("x", size)
		for ; ; n++ {
			err := admin.Set(ctx, "filler:"+strconv.Itoa(n), value, 0).Err()
			if err != nil {
				if !strings.Contains(err.Error(), "OOM") {
					t.Fatal(err)
				}
				break
			}
			if n > 100000 {
				t.Fatal("the server never filled up")
			}
		}
	}
	if _, err := worker.CreateRuns(ctx, []storage.NewRun{{ID: "r2", Workflow: "wf"}}); err == nil || !strings.Contains(err.Error(), "OOM") {
		t.Fatalf("a write on a full server: %v, want OOM", err)
	}

	tool, err := Open(ctx, rd.URL(), Options{OpenExisting: true, Logger: quietLogger()})
	if err != nil {
		t.Fatalf("OpenExisting on a full server: %v", err)
	}
	t.Cleanup(func() { tool.Close() })
	for _, s := range []*Store{tool, worker} {
		if r, err := s.GetRun(ctx, "r1"); err != nil || r.Status != storage.StatusRunning {
			t.Errorf("GetRun when full: %+v %v", r, err)
		}
		if p, err := s.ListRuns(ctx, storage.ListRunsQuery{}); err != nil || len(p.Runs) != 1 {
			t.Errorf("ListRuns when full: %+v %v", p, err)
		}
		if p, err := s.ListRuns(ctx, storage.ListRunsQuery{Workflow: "wf", Status: storage.StatusRunning}); err != nil || len(p.Runs) != 1 {
			t.Errorf("ListRuns by workflow and status when full: %+v %v", p, err)
		}
		if h, err := s.ListSteps(ctx, storage.StepsQuery{RunID: "r1"}); err != nil || len(h.Steps) != 1 {
			t.Errorf("ListSteps when full: %+v %v", h, err)
		}
		if r, err := s.LoadReplay(ctx, "r1"); err != nil || len(r.Checkpoints) != 1 {
			t.Errorf("LoadReplay when full: %+v %v", r, err)
		}
		if x, err := s.ListExecutions(ctx, "r1"); err != nil || len(x) != 1 {
			t.Errorf("ListExecutions when full: %+v %v", x, err)
		}
		if c, err := s.GetCatalog(ctx); err != nil || len(c.Workflows) != 1 {
			t.Errorf("GetCatalog when full: %+v %v", c, err)
		}
		if q, err := s.QueueStats(ctx, []string{storage.DefaultQueue}); err != nil || len(q) != 1 || q[0].Running != 1 {
			t.Errorf("QueueStats when full: %+v %v", q, err)
		}
		if ws, err := s.ListWorkers(ctx); err != nil || len(ws) != 1 {
			t.Errorf("ListWorkers when full: %+v %v", ws, err)
		}
	}
}

// TestDefaultTimeouts: Open's client dials within DefaultConnectTimeout
// unless the URL sets dial_timeout, and its socket timeouts are the call
// timeout unless the URL sets them.
func TestDefaultTimeouts(t *testing.T) {
	t.Parallel()
	url := redisURL(t)
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	for _, c := range []struct {
		url               string
		dial, read, write time.Duration
	}{
		{url, DefaultConnectTimeout, DefaultCallTimeout, DefaultCallTimeout},
		{url + sep + "dial_timeout=7s&read_timeout=3s", 7 * time.Second, 3 * time.Second, DefaultCallTimeout},
	} {
		prefix := testPrefix(t)
		cleanupPrefix(t, testClient(t), prefix)
		s, err := Open(context.Background(), c.url, Options{Prefix: prefix, Logger: quietLogger()})
		if err != nil {
			t.Fatal(err)
		}
		o := s.client.(*redis.Client).Options()
		if o.DialTimeout != c.dial || o.ReadTimeout != c.read || o.WriteTimeout != c.write || !o.ContextTimeoutEnabled {
			t.Errorf("%s: dial %v read %v write %v context %v, want %v %v %v true", c.url, o.DialTimeout, o.ReadTimeout, o.WriteTimeout, o.ContextTimeoutEnabled, c.dial, c.read, c.write)
		}
		s.Close()
	}
}
