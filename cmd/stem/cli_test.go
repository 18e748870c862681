package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/stores/sqlitestore"
)

// The operator command against a SQLite file that a worker is using: list,
// show, send an event, pause, resume, terminate, and clear errors for bad
// input.
func TestOperatorCommands(t *testing.T) {
	path := filepath.Join(t.TempDir(), "stem.db")
	store, err := sqlitestore.Open(path, sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	e, err := runtime.New(runtime.Config{Store: store, PollInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := runtime.Register(e, "approve", func(c *runtime.WorkflowContext, who string) (string, error) {
		if _, err := runtime.Step(c, "ask@v1", runtime.StepOptions{}, func(runtime.StepContext) (string, error) { return "asked " + who, nil }); err != nil {
			return "", err
		}
		ok, err := runtime.WaitForEvent[bool](c, "decision", "approval", 0)
		if err != nil || !ok {
			return "rejected", err
		}
		return "approved", nil
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() { defer close(done); e.Run(ctx) }()
	defer func() { cancel(); <-done }()

	a, err := runtime.Start[string, string](ctx, e, "approve", "ada", runtime.WithID("req-1"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := runtime.Start[string, string](ctx, e, "approve", "bob", runtime.WithID("req-2"))
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{a.ID(), b.ID()} {
		waitStatus(t, e, id, runtime.StatusWaiting)
	}

	cli := func(want int, args ...string) string {
		t.Helper()
		var out, errOut bytes.Buffer
		if code := run(append([]string{"--store", path}, args...), &out, &errOut); code != want {
			t.Fatalf("stem %v: exit %d, want %d\nstdout: %s\nstderr: %s", args, code, want, out.String(), errOut.String())
		}
		return out.String() + errOut.String()
	}

	if out := cli(0, "runs"); !strings.Contains(out, "req-1") || !strings.Contains(out, "waiting for approval") {
		t.Fatalf("runs:\n%s", out)
	}
	var listed struct {
		Runs []struct{ ID, Status string }
	}
	if err := json.Unmarshal([]byte(cli(0, "--json", "runs", "--status", "waiting", "--limit", "1")), &listed); err != nil || len(listed.Runs) != 1 || listed.Runs[0].ID != "req-1" {
		t.Fatalf("runs --json: %+v %v", listed, err)
	}
	if out := cli(0, "show", "req-1"); !strings.Contains(out, "ask@v1") || !strings.Contains(out, `"asked ada"`) || !strings.Contains(out, "attempt 1") {
		t.Fatalf("show:\n%s", out)
	}
	cli(0, "send", "req-1", "approval", "true")
	if got, err := a.Result(ctx); err != nil || got != "approved" {
		t.Fatalf("after send: %q %v", got, err)
	}
	cli(0, "pause", "req-2")
	waitStatus(t, e, "req-2", runtime.StatusPaused)
	cli(0, "resume", "req-2")
	if out := cli(0, "emit", "approval", "false"); !strings.Contains(out, "delivered to 1") {
		t.Fatalf("emit: %s", out)
	}
	if got, err := b.Result(ctx); err != nil || got != "rejected" {
		t.Fatalf("after emit: %q %v", got, err)
	}
	c, err := runtime.Start[string, string](ctx, e, "approve", "cy", runtime.WithID("req-3"))
	if err != nil {
		t.Fatal(err)
	}
	waitStatus(t, e, c.ID(), runtime.StatusWaiting)
	cli(0, "terminate", "req-3", "duplicate request")
	if _, err := c.Result(ctx); err == nil || !strings.Contains(err.Error(), "duplicate request") {
		t.Fatalf("terminated run's result: %v", err)
	}

	// Bad input: clear errors, non-zero exits, nothing changed.
	if out := cli(1, "show", "nope"); !strings.Contains(out, "run not found") {
		t.Fatalf("show unknown: %s", out)
	}
	if out := cli(2, "send", "req-1", "approval", "{not json"); !strings.Contains(out, "not valid JSON") {
		t.Fatalf("send bad json: %s", out)
	}
	if out := cli(1, "resume", "req-1"); !strings.Contains(out, "not allowed") {
		t.Fatalf("resume finished: %s", out)
	}
	if out := cli(2, "frobnicate"); !strings.Contains(out, `unknown command "frobnicate"`) {
		t.Fatalf("unknown command: %s", out)
	}
	if out := cli(2, "pause"); !strings.Contains(out, "want RUN_ID") {
		t.Fatalf("missing arg: %s", out)
	}
	if out := cli(1, "--store", "ftp://x", "runs"); !strings.Contains(out, "unknown store scheme") {
		t.Fatalf("bad store: %s", out)
	}
}

func waitStatus(t *testing.T, e *runtime.Engine, id string, want runtime.RunStatus) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		info, err := e.Get(context.Background(), id)
		if err == nil && info.Status == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s never became %s (now %s, %v)", id, want, info.Status, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
