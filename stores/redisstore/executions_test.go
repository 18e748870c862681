package redisstore

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stemflow/stem/storage"
)

// TestExecutionKeys: a restart renames the current execution's
// checkpoints and attempts to the ended execution's keys, records it in the
// executions list, and a fork copies the checkpoints before its key into
// the run's own checkpoints hash.
func TestExecutionKeys(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newClock()
	s, client := newTestStore(t, c)
	mustCreate(t, s, storage.NewRun{ID: "r", Workflow: "wf"})
	cl := mustClaimOne(t, s, "wf")
	now := c.Now()
	for _, key := range []string{"a", "b"} {
		if _, err := s.Checkpoint(ctx, storage.CheckpointRequest{
			Lease: cl.Lease, LeaseFor: time.Minute,
			Checkpoint: storage.Checkpoint{Key: key, Kind: storage.KindStep, Output: []byte(key + "\nout")},
			Attempts:   []storage.Attempt{{Key: key, Number: 1, Started: now, Ended: now}},
		}); err != nil {
			t.Fatal(err)
		}
	}
	retry := now.Add(time.Second)
	if err := s.RecordAttempts(ctx, storage.RecordAttemptsRequest{Lease: cl.Lease, LeaseFor: time.Minute,
		Attempts: []storage.Attempt{{Key: "c", Number: 1, Started: now, Ended: now, Error: "boom", RetryAt: &retry}}}); err != nil {
		t.Fatal(err)
	}
	c.Advance(time.Minute)
	if err := s.Restart(ctx, storage.RestartRequest{RunID: "r", FromKey: "b"}); err != nil {
		t.Fatal(err)
	}

	k := s.keys
	if n, err := client.HLen(ctx, k.pastCheckpoints(1, "r")).Result(); err != nil || n != 2 {
		t.Fatalf("ended execution's checkpoints: %d %v", n, err)
	}
	if n, err := client.LLen(ctx, k.pastAttempts(1, "r")).Result(); err != nil || n != 3 {
		t.Fatalf("ended execution's attempts: %d %v", n, err)
	}
	if n, err := client.Exists(ctx, k.attempts("r")).Result(); err != nil || n != 0 {
		t.Fatalf("the new execution has attempts: %d %v", n, err)
	}
	if n, err := client.LLen(ctx, k.executions("r")).Result(); err != nil || n != 1 {
		t.Fatalf("executions list: %d %v", n, err)
	}

	rec, err := s.GetRun(ctx, "r")
	if err != nil || rec.Execution != 2 || !rec.StartedAt.Equal(c.Now()) || rec.EndedAt != nil || !rec.CreatedAt.Equal(now) {
		t.Fatalf("run after restart: %v %+v", err, rec)
	}
	rp, err := s.LoadReplay(ctx, "r")
	if err != nil || rp.Execution != 2 || len(rp.Checkpoints) != 1 || len(rp.Pending) != 0 {
		t.Fatalf("replay: %v %+v", err, rp)
	}
	if cp := rp.Checkpoints[0]; cp.Key != "a" || string(cp.Output) != "a\nout" || cp.Execution != 2 || cp.ForkedFrom != 1 || cp.Seq != 3 || !cp.CreatedAt.Equal(now) {
		t.Fatalf("forked checkpoint: %+v", cp)
	}
	h, err := s.ListSteps(ctx, storage.StepsQuery{RunID: "r", Execution: 1})
	if err != nil || h.Execution != 1 || len(h.Steps) != 2 || len(h.Pending) != 1 {
		t.Fatalf("execution 1: %v %+v", err, h)
	}
	if p := h.Pending[0]; p.Key != "c" || p.Execution != 1 || p.RetryAt == nil || !p.RetryAt.Equal(retry) || p.Error != "boom" {
		t.Fatalf("pending attempt of execution 1: %+v", p)
	}
	execs, err := s.ListExecutions(ctx, "r")
	if err != nil || len(execs) != 2 {
		t.Fatalf("executions: %v %+v", err, execs)
	}
	if e := execs[0]; e.Number != 1 || !e.StartedAt.Equal(now) || e.EndedAt == nil || !e.EndedAt.Equal(c.Now()) || e.Status != storage.StatusRunning || e.ForkedFrom != 0 || e.FromKey != "" {
		t.Fatalf("execution 1: %+v", e)
	}
	if e := execs[1]; e.Number != 2 || !e.StartedAt.Equal(c.Now()) || e.EndedAt != nil || e.Status != storage.StatusQueued || e.ForkedFrom != 1 || e.FromKey != "b" {
		t.Fatalf("execution 2: %+v", e)
	}

	// A second restart from the top records how the second one began.
	if err := s.Restart(ctx, storage.RestartRequest{RunID: "r"}); err != nil {
		t.Fatal(err)
	}
	execs, err = s.ListExecutions(ctx, "r")
	if err != nil || len(execs) != 3 || execs[1].ForkedFrom != 1 || execs[1].FromKey != "b" || execs[2].ForkedFrom != 0 || execs[2].FromKey != "" {
		t.Fatalf("executions after a second restart: %v %+v", err, execs)
	}
	if h, err := s.ListSteps(ctx, storage.StepsQuery{RunID: "r", Execution: 2}); err != nil || len(h.Steps) != 1 || h.Steps[0].ForkedFrom != 1 {
		t.Fatalf("execution 2 after a second restart: %v %+v", err, h)
	}
}

// TestRepeatedRestart: a restart script the client sends again (same
// operation ID) begins one execution, not two, and answers as the first.
func TestRepeatedRestart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newTestStore(t, newClock())
	mustCreate(t, s, storage.NewRun{ID: "r", Workflow: "wf"})
	cl := mustClaimOne(t, s, "wf")
	if _, err := s.Checkpoint(ctx, storage.CheckpointRequest{Lease: cl.Lease, LeaseFor: time.Minute,
		Checkpoint: storage.Checkpoint{Key: "a", Kind: storage.KindStep}}); err != nil {
		t.Fatal(err)
	}
	keys := []string{s.keys.run("r"), s.keys.checkpoints("r"), s.keys.attempts("r"), s.keys.executions("r")}
	for i := range 2 {
		v, err := s.run(ctx, restartScript, keys, "r", "a", "op-restart", storage.UpdateTopicPrefix, "")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := status("restart", "r", v); err != nil {
			t.Fatalf("restart %d: %v", i, err)
		}
	}
	if execs, err := s.ListExecutions(ctx, "r"); err != nil || len(execs) != 2 {
		t.Fatalf("executions after a repeated restart: %v %+v", err, execs)
	}
}

// TestPendingFlag: LoadReplay reads the attempts only once some may lack
// their checkpoint (the run hash's pend field), and then finds them.
func TestPendingFlag(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newClock()
	s, client := newTestStore(t, c)
	mustCreate(t, s, storage.NewRun{ID: "r", Workflow: "wf"})
	cl := mustClaimOne(t, s, "wf")
	pend := func() bool {
		t.Helper()
		n, err := client.HExists(ctx, s.keys.run("r"), "pend").Result()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	att := func(key string, n int) storage.Attempt {
		return storage.Attempt{Key: key, Number: n, Started: c.Now(), Ended: c.Now()}
	}
	checkpoint := func(key string, atts ...storage.Attempt) {
		t.Helper()
		if _, err := s.Checkpoint(ctx, storage.CheckpointRequest{Lease: cl.Lease, LeaseFor: time.Minute,
			Checkpoint: storage.Checkpoint{Key: key, Kind: storage.KindStep}, Attempts: atts}); err != nil {
			t.Fatal(err)
		}
	}
	checkpoint("a", att("a", 1))
	if pend() {
		t.Fatal("a step that succeeded at once left attempts pending")
	}
	checkpoint("b", att("b", 1), att("x", 1))
	if !pend() {
		t.Fatal("an attempt of another key is not pending")
	}
	rp, err := s.LoadReplay(ctx, "r")
	if err != nil || len(rp.Checkpoints) != 2 || len(rp.Pending) != 1 || rp.Pending[0].Key != "x" || rp.Pending[0].Execution != 1 {
		t.Fatalf("replay: %v %+v", err, rp)
	}
	if err := s.Restart(ctx, storage.RestartRequest{RunID: "r"}); err != nil {
		t.Fatal(err)
	}
	if pend() {
		t.Fatal("a restart kept the pending flag")
	}
}

// TestListChildren: the parent filter reads the parent's children index
// and filters it by workflow and status in batches, paging by ID.
func TestListChildren(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newTestStore(t, newClock())
	var runs []storage.NewRun
	var wantA []string
	for i := range 250 {
		id := fmt.Sprintf("kid-%03d", i)
		wf := "b"
		if i%3 == 0 {
			wf = "a"
			wantA = append(wantA, id)
		}
		runs = append(runs, storage.NewRun{ID: id, Workflow: wf, ParentID: "p"})
	}
	runs = append(runs, storage.NewRun{ID: "other", Workflow: "a", ParentID: "q"}, storage.NewRun{ID: "p", Workflow: "a"})
	mustCreate(t, s, runs...)
	if _, err := s.Terminate(ctx, storage.TerminateRequest{RunID: "kid-248", Error: storage.ErrorInfo{Message: "x"}}); err != nil {
		t.Fatal(err)
	}
	list := func(q storage.ListRunsQuery) []string {
		t.Helper()
		var ids []string
		for {
			page, err := s.ListRuns(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range page.Runs {
				if r.ParentID != q.ParentID {
					t.Fatalf("run %s of parent %q listed for %q", r.ID, r.ParentID, q.ParentID)
				}
				ids = append(ids, r.ID)
			}
			if page.Next == "" {
				return ids
			}
			q.After = page.Next
		}
	}
	if got := list(storage.ListRunsQuery{ParentID: "p", Workflow: "a", Limit: 7}); !slices.Equal(got, wantA) {
		t.Fatalf("children of p in workflow a = %v, want %v", got, wantA)
	}
	if got := list(storage.ListRunsQuery{ParentID: "p", Limit: 100}); len(got) != 250 || !slices.IsSorted(got) {
		t.Fatalf("children of p: %d, sorted %v", len(got), slices.IsSorted(got))
	}
	if got := list(storage.ListRunsQuery{ParentID: "p", Status: storage.StatusTerminated}); !slices.Equal(got, []string{"kid-248"}) {
		t.Fatalf("terminated children of p = %v", got)
	}
	if got := list(storage.ListRunsQuery{ParentID: "p", Workflow: "a", Status: storage.StatusTerminated}); len(got) != 0 {
		t.Fatalf("terminated children of p in workflow a = %v", got)
	}
	if got := list(storage.ListRunsQuery{ParentID: "nobody"}); len(got) != 0 {
		t.Fatalf("children of an unknown run = %v", got)
	}
}

// TestTerminateCycle: runs that name each other as parents (possible with
// caller-chosen IDs) do not make the cascade loop.
func TestTerminateCycle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newTestStore(t, newClock())
	mustCreate(t, s,
		storage.NewRun{ID: "a", Workflow: "wf", ParentID: "b"},
		storage.NewRun{ID: "b", Workflow: "wf", ParentID: "a"},
		storage.NewRun{ID: "c", Workflow: "wf", ParentID: "b", ParentPolicy: storage.ParentAbandon},
		storage.NewRun{ID: "d", Workflow: "wf", ParentID: "c"})
	ids, err := s.Terminate(ctx, storage.TerminateRequest{RunID: "a", Error: storage.ErrorInfo{Message: "stop"},
		ChildError: &storage.ErrorInfo{Message: "parent stopped", Code: storage.CodeTerminated}})
	if err != nil || !slices.Equal(ids, []string{"a", "b"}) {
		t.Fatalf("terminate: %v %v", err, ids)
	}
	for id, want := range map[string]storage.RunStatus{"a": storage.StatusTerminated, "b": storage.StatusTerminated, "c": storage.StatusQueued, "d": storage.StatusQueued} {
		rec, err := s.GetRun(ctx, id)
		if err != nil || rec.Status != want {
			t.Fatalf("%s: %v %+v, want %s", id, err, rec, want)
		}
		if id == "b" && (rec.Error == nil || rec.Error.Message != "parent stopped" || rec.EndedAt == nil) {
			t.Fatalf("b: %+v", rec)
		}
	}
}

// TestCheckpointInput: a checkpoint keeps its call's input byte for byte
// (nil and empty apart), ListSteps returns it, a replay's Existing
// carries it, and a restart from a later key copies it with the
// checkpoints it keeps; an update's checkpoint copied so is still
// recognised as the delivery of its update.
func TestCheckpointInput(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newTestStore(t, newClock())
	mustCreate(t, s, storage.NewRun{ID: "r", Workflow: "wf"})
	cl := mustClaimOne(t, s, "wf")
	inputs := map[string][]byte{"a": []byte("in\n\x00\x02put"), "b": {}, "c": nil, "d": []byte("\x0212:x")}
	for _, key := range []string{"a", "b", "c", "d"} {
		if _, err := s.Checkpoint(ctx, storage.CheckpointRequest{Lease: cl.Lease, LeaseFor: time.Minute,
			Checkpoint: storage.Checkpoint{Key: key, Kind: storage.KindStep, Input: inputs[key], Output: []byte("out\n" + key)}}); err != nil {
			t.Fatal(err)
		}
	}
	check := func(what string, steps []storage.StepRecord) {
		t.Helper()
		for _, st := range steps {
			in := inputs[st.Key]
			if string(st.Input) != string(in) || (st.Input == nil) != (in == nil) || string(st.Output) != "out\n"+st.Key {
				t.Fatalf("%s: step %s: input %q, output %q", what, st.Key, st.Input, st.Output)
			}
		}
	}
	h, err := s.ListSteps(ctx, storage.StepsQuery{RunID: "r"})
	if err != nil || len(h.Steps) != 4 {
		t.Fatalf("ListSteps = %+v, %v", h, err)
	}
	check("ListSteps", h.Steps)
	res, err := s.Checkpoint(ctx, storage.CheckpointRequest{Lease: cl.Lease, LeaseFor: time.Minute,
		Checkpoint: storage.Checkpoint{Key: "a", Kind: storage.KindStep}})
	if err != nil || res.Existing == nil || string(res.Existing.Input) != string(inputs["a"]) {
		t.Fatalf("replayed Checkpoint = %+v, %v; want the stored input", res, err)
	}
	if err := s.Restart(ctx, storage.RestartRequest{RunID: "r", FromKey: "d"}); err != nil {
		t.Fatal(err)
	}
	h, err = s.ListSteps(ctx, storage.StepsQuery{RunID: "r"})
	if err != nil || len(h.Steps) != 3 || h.Execution != 2 {
		t.Fatalf("ListSteps after the restart = %+v, %v", h, err)
	}
	check("ListSteps after a restart", h.Steps)
}

// TestRestartIfExecution: a conditional restart of a run in another
// execution is ErrConflict with nothing written; in its execution it
// restarts.
func TestRestartIfExecution(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, c := newTestStore(t, newClock())
	mustCreate(t, s, storage.NewRun{ID: "r", Workflow: "wf"})
	before := snapshot(t, s, c)
	if err := s.Restart(ctx, storage.RestartRequest{RunID: "r", IfExecution: 2}); !errors.Is(err, storage.ErrConflict) {
		t.Fatalf("Restart of execution 2 of a run in 1: %v, want ErrConflict", err)
	}
	if after := snapshot(t, s, c); !maps.Equal(before, after) {
		t.Fatal("a conflicting restart wrote something")
	}
	if err := s.Restart(ctx, storage.RestartRequest{RunID: "r", IfExecution: 1}); err != nil {
		t.Fatal(err)
	}
	if err := s.Restart(ctx, storage.RestartRequest{RunID: "r", IfExecution: 1}); !errors.Is(err, storage.ErrConflict) {
		t.Fatalf("second Restart of execution 1: %v, want ErrConflict", err)
	}
	if err := s.Restart(ctx, storage.RestartRequest{RunID: "nope", IfExecution: 1}); !errors.Is(err, storage.ErrRunNotFound) {
		t.Fatalf("Restart of no run: %v, want ErrRunNotFound", err)
	}
	if rec, err := s.GetRun(ctx, "r"); err != nil || rec.Execution != 2 {
		t.Fatalf("GetRun = %+v, %v; want execution 2", rec, err)
	}
}

// snapshot returns every key under the store's prefix but the
// operations' replies (op:) with its value (DUMP), to tell whether a call
// wrote anything.
func snapshot(t *testing.T, s *Store, c *redis.Client) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, k := range storeKeys(t, s, c) {
		v, err := c.Dump(context.Background(), s.keys.prefix+k).Result()
		if err != nil {
			t.Fatal(err)
		}
		out[k] = v
	}
	return out
}
