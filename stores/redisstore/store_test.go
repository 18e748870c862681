package redisstore

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stemflow/stem/internal/testserver"
	"github.com/stemflow/stem/storage"
	"github.com/stemflow/stem/stores/storetest"
)

// newClock returns the suite's manual clock at its start.
func newClock() *storetest.Clock { return storetest.NewClock(storetest.Start) }

var claimAll = func(owner string, wfs ...string) storage.ClaimRequest {
	return storage.ClaimRequest{Owner: owner, Workflows: wfs, Limit: 10, LeaseFor: time.Minute}
}

func mustCreate(t *testing.T, s *Store, runs ...storage.NewRun) {
	t.Helper()
	if _, err := s.CreateRuns(context.Background(), runs); err != nil {
		t.Fatal(err)
	}
}

func mustClaimOne(t *testing.T, s *Store, wf string) storage.ClaimedRun {
	t.Helper()
	got, err := s.Claim(context.Background(), claimAll("w", wf))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 {
		t.Fatalf("claimed %d runs, want 1: %+v", len(got), got)
	}
	return got[0]
}

// TestLifecycle walks one run through a step, a sleep, a recovery and its
// completion on a substituted clock.
func TestLifecycle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newClock()
	s, _ := newTestStore(t, c)

	res, err := s.CreateRuns(ctx, []storage.NewRun{{ID: "r1", Workflow: "wf", Input: []byte("in\nput")}})
	if err != nil || len(res) != 1 || !res[0].Created {
		t.Fatalf("create: %v %+v", err, res)
	}
	rec := res[0].Run
	if rec.Status != storage.StatusQueued || rec.ReadyAt == nil || !rec.ReadyAt.Equal(c.Now()) || !rec.CreatedAt.Equal(c.Now()) {
		t.Fatalf("new run: %+v", rec)
	}
	again, err := s.CreateRuns(ctx, []storage.NewRun{{ID: "r1", Workflow: "other", Input: []byte("x")}})
	if err != nil || again[0].Created || again[0].Run.Workflow != "wf" {
		t.Fatalf("second create: %v %+v", err, again)
	}

	cl := mustClaimOne(t, s, "wf")
	if string(cl.Input) != "in\nput" || cl.Lease.Token != 1 || !cl.LeaseUntil.Equal(c.Now().Add(time.Minute)) {
		t.Fatalf("claim: %+v", cl)
	}
	started := c.Now()
	cres, err := s.Checkpoint(ctx, storage.CheckpointRequest{
		Lease: cl.Lease, LeaseFor: time.Minute,
		Checkpoint: storage.Checkpoint{Key: "a@v1", Kind: storage.KindStep, Output: []byte{}},
		Attempts:   []storage.Attempt{{Key: "a@v1", Number: 1, Started: started, Ended: started.Add(time.Millisecond), Error: "line1\nline2"}},
	})
	if err != nil || cres.Existing != nil || cres.Paused {
		t.Fatalf("checkpoint: %v %+v", err, cres)
	}
	wake := c.Now().Add(time.Hour)
	sres, err := s.Suspend(ctx, storage.SuspendRequest{
		Lease: cl.Lease, LeaseFor: time.Minute,
		Checkpoint:   &storage.Checkpoint{Key: "nap", Kind: storage.KindSleep, Output: []byte(`"t"`)},
		ReadyAt:      &wake,
		SuspendState: []byte{0, 1, 2},
	})
	if err != nil || sres.Delivered != nil || sres.Paused {
		t.Fatalf("suspend: %v %+v", err, sres)
	}
	if got, _ := s.Claim(ctx, claimAll("w", "wf")); len(got) != 0 {
		t.Fatalf("claimed a sleeping run: %+v", got)
	}
	c.Advance(time.Hour)
	cl2 := mustClaimOne(t, s, "wf")
	if cl2.Lease.Token <= cl.Lease.Token || !bytes.Equal(cl2.SuspendState, []byte{0, 1, 2}) || cl2.Recoveries != 0 {
		t.Fatalf("claim after sleep: %+v", cl2)
	}
	if _, err := s.Heartbeat(ctx, storage.HeartbeatRequest{Lease: cl.Lease, LeaseFor: time.Minute}); !errors.Is(err, storage.ErrLeaseLost) {
		t.Fatalf("stale heartbeat: %v", err)
	}
	c.Advance(2 * time.Minute)
	cl3 := mustClaimOne(t, s, "wf")
	if cl3.Recoveries != 1 {
		t.Fatalf("recovered claim: %+v", cl3)
	}
	if err := s.Complete(ctx, storage.CompleteRequest{Lease: cl2.Lease, Status: storage.StatusComplete}); !errors.Is(err, storage.ErrLeaseLost) {
		t.Fatalf("complete with the old lease: %v", err)
	}
	if err := s.Complete(ctx, storage.CompleteRequest{Lease: cl3.Lease, Status: storage.StatusComplete, Output: []byte("out")}); err != nil {
		t.Fatal(err)
	}

	rec, err = s.GetRun(ctx, "r1")
	if err != nil || rec.Status != storage.StatusComplete || string(rec.Output) != "out" || rec.Wait != nil || rec.ReadyAt != nil {
		t.Fatalf("get: %v %+v", err, rec)
	}
	h, err := s.ListSteps(ctx, storage.StepsQuery{RunID: "r1"})
	steps := h.Steps
	if err != nil || len(steps) != 2 || h.Execution != 1 || len(h.Pending) != 0 {
		t.Fatalf("steps: %v %+v", err, h)
	}
	if steps[0].Key != "a@v1" || steps[0].Output == nil || len(steps[0].Output) != 0 || steps[0].Seq >= steps[1].Seq {
		t.Fatalf("first step: %+v", steps[0])
	}
	if len(steps[0].Attempts) != 1 || steps[0].Attempts[0].Error != "line1\nline2" || !steps[0].Attempts[0].Started.Equal(started) {
		t.Fatalf("attempts: %+v", steps[0].Attempts)
	}
	if steps[1].Key != "nap" || steps[1].Kind != storage.KindSleep || string(steps[1].Output) != `"t"` {
		t.Fatalf("second step: %+v", steps[1])
	}
}

// TestServerClock runs without a substituted clock: readiness and leases are
// judged on the server's TIME inside the scripts.
func TestServerClock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, c := newTestStore(t, nil)
	before := time.Now()
	mustCreate(t, s, storage.NewRun{ID: "r", Workflow: "wf"})
	cl := mustClaimOne(t, s, "wf")
	serverNow, err := c.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	// The lease runs a minute from the server's clock at claim time.
	if cl.LeaseUntil.Before(before.Add(time.Minute).Add(-time.Hour)) || cl.LeaseUntil.After(serverNow.Add(time.Minute)) {
		t.Fatalf("lease until %v, server time %v", cl.LeaseUntil, serverNow)
	}
	far := serverNow.Add(24 * time.Hour)
	if _, err := s.Suspend(ctx, storage.SuspendRequest{Lease: cl.Lease, ReadyAt: &far}); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Claim(ctx, claimAll("w", "wf")); err != nil || len(got) != 0 {
		t.Fatalf("claimed a run due tomorrow: %v %+v", err, got)
	}
	rec, err := s.GetRun(ctx, "r")
	if err != nil || rec.Status != storage.StatusWaiting {
		t.Fatalf("get: %v %+v", err, rec)
	}
	if err := s.Restart(ctx, storage.RestartRequest{RunID: "r"}); err != nil {
		t.Fatal(err)
	}
	if cl2 := mustClaimOne(t, s, "wf"); cl2.Lease.Token <= cl.Lease.Token {
		t.Fatalf("token did not grow: %+v", cl2)
	}
}

// TestPrefixIsolation: two stores on one server with different prefixes
// never see each other, and every key a store writes starts with its prefix.
func TestPrefixIsolation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newClock()
	a, client := newTestStore(t, c)
	b, _ := newTestStore(t, c)
	tag := strings.TrimSuffix(strings.TrimPrefix(testPrefix(t), "stemtest:"), ":")
	id, wf, topic := "run-"+tag, "wf-"+tag, "topic-"+tag

	mustCreate(t, a, storage.NewRun{ID: id, Workflow: wf}, storage.NewRun{ID: id + "-2", Workflow: wf})
	cl := mustClaimOneLimit(t, a, wf)
	if _, err := a.Suspend(ctx, storage.SuspendRequest{Lease: cl.Lease, Wait: &storage.Wait{Key: "ev", Topic: topic, Kind: storage.KindEvent}}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.SendEvent(ctx, storage.Event{RunID: id + "-2", Topic: topic + "-other", Payload: []byte("p")}); err != nil {
		t.Fatal(err)
	}

	if _, err := b.GetRun(ctx, id); !errors.Is(err, storage.ErrRunNotFound) {
		t.Fatalf("b sees a's run: %v", err)
	}
	if page, err := b.ListRuns(ctx, storage.ListRunsQuery{}); err != nil || len(page.Runs) != 0 {
		t.Fatalf("b lists: %v %+v", err, page)
	}
	if got, err := b.Claim(ctx, claimAll("w", wf)); err != nil || len(got) != 0 {
		t.Fatalf("b claims: %v %+v", err, got)
	}
	if ids, err := b.Emit(ctx, storage.EmitRequest{Topic: topic, Payload: nil}); err != nil || len(ids) != 0 {
		t.Fatalf("b emits to a's run: %v %v", err, ids)
	}
	if ids, err := a.Emit(ctx, storage.EmitRequest{Topic: topic, Payload: []byte("x")}); err != nil || len(ids) != 1 || ids[0] != id {
		t.Fatalf("a emits: %v %v", err, ids)
	}

	var keys []string
	iter := client.Scan(ctx, 0, "*"+tag+"*", 1000).Iterator()
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	if len(keys) == 0 {
		t.Fatal("found no keys of the test")
	}
	for _, k := range keys {
		if !strings.HasPrefix(k, a.keys.prefix) {
			t.Errorf("key %q is outside the prefix %q", k, a.keys.prefix)
		}
	}
	for _, bare := range []string{"ia", "is:queued", "is:waiting", "r:" + id, "q:" + wf, "w:" + topic} {
		if n, err := client.Exists(ctx, bare, DefaultPrefix+bare).Result(); err != nil || n != 0 {
			t.Errorf("unprefixed key %q exists (%d, %v)", bare, n, err)
		}
	}
}

func mustClaimOneLimit(t *testing.T, s *Store, wf string) storage.ClaimedRun {
	t.Helper()
	got, err := s.Claim(context.Background(), storage.ClaimRequest{Owner: "w", Workflows: []string{wf}, Limit: 1, LeaseFor: time.Minute})
	if err != nil || len(got) != 1 {
		t.Fatalf("claim: %v %+v", err, got)
	}
	return got[0]
}

func TestCheckPolicy(t *testing.T) {
	t.Parallel()
	if w, err := checkPolicy("noeviction", false); err != nil || w != "" {
		t.Fatalf("noeviction: %q %v", w, err)
	}
	for _, p := range []string{"allkeys-lru", "volatile-lru", "allkeys-random", "volatile-ttl", "allkeys-lfu"} {
		w, err := checkPolicy(p, false)
		if err == nil || w != "" || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "noeviction") {
			t.Fatalf("%s refused: %q %v", p, w, err)
		}
		w, err = checkPolicy(p, true)
		if err != nil || !strings.Contains(w, "noeviction") {
			t.Fatalf("%s allowed: %q %v", p, w, err)
		}
	}
}

// TestPolicyDecision: New refuses an evicting policy unless allowed, and
// then warns, as it warns when the policy cannot be read. The shared server
// keeps its configuration: other packages' tests may be opening stores on
// it at the same time.
func TestPolicyDecision(t *testing.T) {
	t.Parallel()
	logs, logger := testserver.CaptureLogs(slog.LevelInfo)
	s := &Store{logger: logger}
	if err := s.judgePolicy("noeviction", false); err != nil || logs.String() != "" {
		t.Fatalf("noeviction: %v, logged %q", err, logs.String())
	}
	if err := s.judgePolicy("allkeys-lru", false); err == nil || !strings.Contains(err.Error(), "allkeys-lru") {
		t.Fatalf("allkeys-lru refused: %v", err)
	}
	if err := s.judgePolicy("allkeys-lru", true); err != nil || !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "allkeys-lru") {
		t.Fatalf("allkeys-lru allowed: %v, logged %q", err, logs.String())
	}
	logs.Reset()
	if err := s.judgePolicy("", false); err != nil || !strings.Contains(logs.String(), "level=WARN") {
		t.Fatalf("unreadable policy: %v, logged %q", err, logs.String())
	}
}

// TestPolicyRead reads the real server's policy as New does.
func TestPolicyRead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, c := newTestStore(t, nil)
	want, err := c.ConfigGet(ctx, "maxmemory-policy").Result()
	if err != nil {
		t.Skipf("CONFIG not permitted: %v", err)
	}
	got, err := s.readPolicy(ctx)
	if err != nil || got == "" || got != want["maxmemory-policy"] {
		t.Fatalf("readPolicy = %q, %v; server has %q", got, err, want["maxmemory-policy"])
	}
}

// TestConfigNotPermitted connects as a user that may not run CONFIG, as on
// managed Redis: New warns and carries on.
func TestConfigNotPermitted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	admin := testClient(t)
	user := "stemtest-" + strings.TrimSuffix(strings.TrimPrefix(testPrefix(t), "stemtest:"), ":")
	if err := admin.Do(ctx, "ACL", "SETUSER", user, "on", ">secret", "~*", "&*", "+@all", "-config").Err(); err != nil {
		t.Skipf("ACL SETUSER not permitted: %v", err)
	}
	t.Cleanup(func() { admin.Do(context.Background(), "ACL", "DELUSER", user) })
	o, err := redis.ParseURL(redisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	o.Username, o.Password = user, "secret"
	c := redis.NewClient(o)
	defer c.Close()
	prefix := testPrefix(t)
	cleanupPrefix(t, admin, prefix)

	logs, logger := testserver.CaptureLogs(slog.LevelInfo)
	s, err := New(ctx, c, Options{Prefix: prefix, Logger: logger})
	if err != nil {
		t.Fatalf("New without CONFIG: %v", err)
	}
	defer s.Close()
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "maxmemory-policy") {
		t.Fatalf("no warning logged: %q", logs.String())
	}
	mustCreate(t, s, storage.NewRun{ID: "r", Workflow: "wf"})
}

func TestOpenOwnsClient(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := testClient(t)
	prefix := testPrefix(t)
	cleanupPrefix(t, c, prefix)
	s, err := Open(ctx, redisURL(t), Options{Prefix: prefix, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	mustCreate(t, s, storage.NewRun{ID: "r", Workflow: "wf"})
	if got := s.client.(*redis.Client).Options().PoolSize; got != defaultPoolSize {
		t.Errorf("pool size %d, want %d: 32 workers need a connection each", got, defaultPoolSize)
	}
	sep := "?"
	if strings.Contains(redisURL(t), "?") {
		sep = "&"
	}
	small, err := Open(ctx, redisURL(t)+sep+"pool_size=3", Options{Prefix: prefix, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if got := small.client.(*redis.Client).Options().PoolSize; got != 3 {
		t.Errorf("pool size %d with pool_size=3 in the URL", got)
	}
	_ = small.Close()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.client.Ping(ctx).Err(); !errors.Is(err, redis.ErrClosed) {
		t.Fatalf("owned client still open: %v", err)
	}
	if _, err := Open(ctx, "not a url", Options{}); err == nil {
		t.Fatal("Open of a bad URL succeeded")
	}
}

func TestClosed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, c := newTestStore(t, nil)
	mustCreate(t, s, storage.NewRun{ID: "r", Workflow: "wf"})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); !errors.Is(err, storage.ErrClosed) {
		t.Fatalf("second Close: %v", err)
	}
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("borrowed client closed by the store: %v", err)
	}
	lease := storage.Lease{RunID: "r", Owner: "w", Token: 1}
	checks := map[string]error{}
	_, checks["CreateRuns"] = s.CreateRuns(ctx, []storage.NewRun{{ID: "x", Workflow: "wf"}})
	_, checks["GetRun"] = s.GetRun(ctx, "r")
	_, checks["ListRuns"] = s.ListRuns(ctx, storage.ListRunsQuery{})
	_, checks["Claim"] = s.Claim(ctx, claimAll("w", "wf"))
	_, checks["LoadReplay"] = s.LoadReplay(ctx, "r")
	_, checks["Checkpoint"] = s.Checkpoint(ctx, storage.CheckpointRequest{Lease: lease, LeaseFor: time.Minute, Checkpoint: storage.Checkpoint{Key: "k", Kind: storage.KindStep}})
	checks["RecordAttempts"] = s.RecordAttempts(ctx, storage.RecordAttemptsRequest{Lease: lease, LeaseFor: time.Minute, Attempts: nil})
	_, checks["Heartbeat"] = s.Heartbeat(ctx, storage.HeartbeatRequest{Lease: lease, LeaseFor: time.Minute})
	_, checks["Suspend"] = s.Suspend(ctx, storage.SuspendRequest{Lease: lease})
	checks["Complete"] = s.Complete(ctx, storage.CompleteRequest{Lease: lease, Status: storage.StatusComplete})
	checks["Pause"] = s.Pause(ctx, "r")
	checks["Resume"] = s.Resume(ctx, "r")
	_, checks["Terminate"] = s.Terminate(ctx, storage.TerminateRequest{RunID: "r"})
	checks["Restart"] = s.Restart(ctx, storage.RestartRequest{RunID: "r"})
	_, checks["ListExecutions"] = s.ListExecutions(ctx, "r")
	checks["PutCatalog"] = s.PutCatalog(ctx, storage.Catalog{Workflows: []storage.WorkflowType{{Name: "wf"}}})
	_, checks["GetCatalog"] = s.GetCatalog(ctx)
	_, checks["Emit"] = s.Emit(ctx, storage.EmitRequest{Topic: "t", Payload: nil})
	_, checks["SendEvent"] = s.SendEvent(ctx, storage.Event{RunID: "r", Topic: "t"})
	_, checks["ListSteps"] = s.ListSteps(ctx, storage.StepsQuery{RunID: "r"})
	for name, err := range checks {
		if !errors.Is(err, storage.ErrClosed) {
			t.Errorf("%s after Close: %v", name, err)
		}
	}
	if _, ok := <-s.Notifications(ctx); ok {
		t.Fatal("Notifications after Close delivered a value")
	}
}

func TestShardedClientNeedsHashTag(t *testing.T) {
	t.Parallel()
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}})
	defer cc.Close()
	_, err := New(context.Background(), cc, Options{Logger: quietLogger()})
	if !errors.Is(err, storage.ErrInvalidArgument) || !strings.Contains(err.Error(), "hash tag") {
		t.Fatalf("cluster client with prefix %q: %v", DefaultPrefix, err)
	}
	for key, want := range map[string]bool{"{stem}:": true, "a{b}c": true, "{}": false, "stem:": false, "x{": false} {
		if hasHashTag(key) != want {
			t.Errorf("hasHashTag(%q) = %v", key, !want)
		}
	}
}

func TestNotifications(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	s, _ := newTestStore(t, nil)
	ch := s.Notifications(ctx)
	mustCreate(t, s, storage.NewRun{ID: "r", Workflow: "wf"})
	<-ch // a hint arrives once the run is ready
	cancel()
	for range ch {
	}
	// A second subscriber ends with the store.
	ch2 := s.Notifications(context.Background())
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for range ch2 {
	}
}

// TestScriptCacheFlushed: a server that lost its script cache (restart,
// failover, SCRIPT FLUSH) is sent the scripts again.
func TestScriptCacheFlushed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, c := newTestStore(t, nil)
	if err := c.ScriptFlush(ctx).Err(); err != nil {
		t.Skipf("SCRIPT FLUSH not permitted: %v", err)
	}
	mustCreate(t, s, storage.NewRun{ID: "r", Workflow: "wf"})
	mustClaimOne(t, s, "wf")
}

// TestBadInputWritesNothing: a rejected call leaves no key behind.
func TestBadInputWritesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, c := newTestStore(t, nil)
	if _, err := s.CreateRuns(ctx, []storage.NewRun{{ID: "ok", Workflow: "wf"}, {ID: "", Workflow: "wf"}}); !errors.Is(err, storage.ErrInvalidArgument) {
		t.Fatalf("create with an empty ID: %v", err)
	}
	if _, err := s.SendEvent(ctx, storage.Event{RunID: "nope", Topic: "t"}); !errors.Is(err, storage.ErrRunNotFound) {
		t.Fatalf("send to unknown run: %v", err)
	}
	if _, err := s.Checkpoint(ctx, storage.CheckpointRequest{Lease: storage.Lease{RunID: "nope", Token: 1}, LeaseFor: time.Minute, Checkpoint: storage.Checkpoint{Key: "k", Kind: storage.KindStep}}); !errors.Is(err, storage.ErrLeaseLost) {
		t.Fatalf("checkpoint of unknown run: %v", err)
	}
	if _, err := s.Terminate(ctx, storage.TerminateRequest{RunID: "nope"}); !errors.Is(err, storage.ErrRunNotFound) {
		t.Fatalf("terminate unknown run: %v", err)
	}
	n, err := c.Keys(ctx, s.keys.prefix+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if n = slices.DeleteFunc(n, func(k string) bool { return k == s.keys.version() }); len(n) != 0 {
		t.Fatalf("keys written by rejected calls: %v", n)
	}
}

func TestCodec(t *testing.T) {
	t.Parallel()
	for _, b := range [][]byte{nil, {}, {0}, []byte("a\nb"), {1, 1}} {
		got := unmark(mark(b))
		if (got == nil) != (b == nil) || !bytes.Equal(got, b) {
			t.Errorf("mark round trip of %q gave %q", b, got)
		}
	}
	retry := time.Date(2030, 1, 1, 0, 0, 1, 5, time.UTC)
	for _, at := range []storage.Attempt{
		{Key: "k\n#1", Number: 3, Started: time.Date(2030, 1, 1, 0, 0, 0, 123456789, time.UTC), Ended: time.Time{}, Error: "boom\nagain"},
		{Key: "k", Number: 1, Started: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC), Ended: time.Date(2030, 1, 1, 0, 0, 0, 1, time.UTC), Error: "x", RetryAt: &retry},
		{Key: "", Number: 0},
	} {
		enc, err := encodeAttempt(at)
		if err != nil {
			t.Fatal(err)
		}
		dec, err := decodeAttempt(enc, 4)
		if err != nil || dec.Key != at.Key || dec.Number != at.Number || !dec.Started.Equal(at.Started) || !dec.Ended.Equal(at.Ended) ||
			dec.Error != at.Error || dec.Execution != 4 || (dec.RetryAt == nil) != (at.RetryAt == nil) || dec.RetryAt != nil && !dec.RetryAt.Equal(*at.RetryAt) {
			t.Fatalf("attempt round trip of %+v: %v %+v", at, err, dec)
		}
	}
	if _, err := decodeAttempt("\xff", 1); err == nil {
		t.Fatal("decoded garbage")
	}
	cp, err := decodeCheckpoint("k", "7\n1000000\nstep\n{\"message\":\"m\"}\n3\n2\n"+mark([]byte("x\ny")))
	if err != nil || cp.Seq != 7 || cp.Kind != storage.KindStep || cp.Error == nil || cp.Error.Message != "m" || string(cp.Output) != "x\ny" ||
		!cp.CreatedAt.Equal(time.Unix(1, 0)) || cp.Execution != 3 || cp.ForkedFrom != 2 {
		t.Fatalf("checkpoint decode: %v %+v", err, cp)
	}
	if _, err := decodeCheckpoint("k", "7\n1000000\nstep\n\n"+mark([]byte("x"))); err == nil {
		t.Fatal("decoded a checkpoint without its execution")
	}
	for _, as := range []*storage.ActiveStep{nil, {Key: "k\n@v1#3", Attempt: 2, Started: time.Date(2030, 1, 1, 0, 0, 0, 7, time.UTC)}, {}} {
		enc, err := encodeActive(as)
		if err != nil {
			t.Fatal(err)
		}
		dec, err := decodeActive(enc)
		if err != nil || (dec == nil) != (as == nil) || dec != nil && (dec.Key != as.Key || dec.Attempt != as.Attempt || !dec.Started.Equal(as.Started)) {
			t.Fatalf("active step round trip of %+v: %v %+v", as, err, dec)
		}
	}
	if _, err := decodeActive("\x05ab"); err == nil {
		t.Fatal("decoded a truncated active step")
	}
}

// TestRepeatedEventCalls: a script the client sends again after losing its
// reply (same operation ID) delivers or buffers the event only once.
func TestRepeatedEventCalls(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newClock()
	s, _ := newTestStore(t, c)
	mustCreate(t, s, storage.NewRun{ID: "r", Workflow: "wf"}, storage.NewRun{ID: "w", Workflow: "wf"})

	for range 2 {
		v, err := s.run(ctx, sendScript, []string{s.keys.run("r")}, "r", "t", mark([]byte("once")), "op-send")
		if err != nil {
			t.Fatal(err)
		}
		if list, err := status("send", "r", v); err != nil || list[1].(int64) != 0 {
			t.Fatalf("send: %v %v", err, list)
		}
	}
	claimed, err := s.Claim(ctx, claimAll("w", "wf"))
	if err != nil || len(claimed) != 2 {
		t.Fatalf("claim: %v %+v", err, claimed)
	}
	byID := map[string]storage.Lease{}
	for _, cl := range claimed {
		byID[cl.Lease.RunID] = cl.Lease
	}
	res, err := s.Suspend(ctx, storage.SuspendRequest{Lease: byID["r"], LeaseFor: time.Minute, Wait: &storage.Wait{Key: "e1", Topic: "t"}})
	if err != nil || res.Delivered == nil || string(res.Delivered.Output) != "once" || res.Delivered.Kind != storage.KindEvent {
		t.Fatalf("first wait: %v %+v", err, res)
	}
	res, err = s.Suspend(ctx, storage.SuspendRequest{Lease: byID["r"], LeaseFor: time.Minute, Wait: &storage.Wait{Key: "e2", Topic: "t"}})
	if err != nil || res.Delivered != nil {
		t.Fatalf("second wait found a duplicate event: %v %+v", err, res)
	}

	if _, err := s.Suspend(ctx, storage.SuspendRequest{Lease: byID["w"], Wait: &storage.Wait{Key: "e", Topic: "t"}}); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		v, err := s.run(ctx, emitScript, []string{s.keys.waiting("t")}, "t", mark([]byte("x")), "op-emit")
		if err != nil {
			t.Fatal(err)
		}
		ids, _ := v.([]any)
		if len(ids) != 2 || ids[0] != "r" || ids[1] != "w" {
			t.Fatalf("emit %d delivered to %v, want [r w] both times", i, ids)
		}
	}
	rp, err := s.LoadReplay(ctx, "r")
	cps := rp.Checkpoints
	if err != nil || len(cps) != 2 || cps[1].Key != "e2" || string(cps[1].Output) != "x" {
		t.Fatalf("checkpoints of r: %v %+v", err, cps)
	}
}
