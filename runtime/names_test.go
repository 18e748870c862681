package runtime_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/storage"
)

// badNames are refused as workflow names, run IDs, step keys and topics
// alike: they would fail on one store (Postgres refuses NUL and invalid
// UTF-8) and not another, or garble an operator's terminal.
var badNames = map[string]string{
	"empty":         "",
	"NUL":           "a\x00b",
	"invalid UTF-8": "a\xffb",
	"escape":        "a\x1b[2Jb",
	"newline":       "a\nb",
	"over-long":     strings.Repeat("x", storage.MaxNameLen+1),
}

// A workflow registered under a bad name is refused at Register, naming
// it, so it never reaches a claim (where, on Postgres, it would fail every
// claim of the engine and so every other workflow's runs).
func TestBadWorkflowNameRefusedAtRegister(t *testing.T) {
	t.Parallel()
	f := setup(t)
	e, err := runtime.New(runtime.Config{Store: f.store, PollInterval: 5 * time.Millisecond})
	must(t, err)
	t.Cleanup(func() { e.Close() })
	echo := func(c *runtime.WorkflowContext, s string) (string, error) { return s, nil }
	names := map[string]string{"with a space": "a b", "with '/'": "orders/fulfil", "with '@'": "a@v1"}
	for what, name := range badNames {
		names[what] = name
	}
	for what, name := range names {
		err := runtime.Register(e, name, echo)
		if !errors.Is(err, runtime.ErrInvalidArgument) {
			t.Errorf("Register(%s name %q) = %v, want ErrInvalidArgument", what, name, err)
			continue
		}
		if name != "" && !strings.Contains(err.Error(), "workflow name") {
			t.Errorf("Register(%s name): error %q does not say it is the workflow name", what, err)
		}
	}
	// The engine claims and runs the good workflow registered beside them.
	must(t, runtime.Register(e, "good.echo", echo))
	start(t, e)
	ctx := waitCtx(t)
	run, err := runtime.Start[string, string](ctx, e, "good.echo", "hi")
	must(t, err)
	if got, err := run.Result(ctx); err != nil || got != "hi" {
		t.Fatalf("good workflow: %q, %v", got, err)
	}
}

// A run ID a caller chooses never holds '/', which is reserved for child
// runs (<parent>/<call>), nor a bad name; every start path says so and
// stores nothing.
func TestUserRunIDsAreCheckedOnEveryStart(t *testing.T) {
	t.Parallel()
	f := setup(t)
	e, err := runtime.New(runtime.Config{Store: f.store, PollInterval: 5 * time.Millisecond})
	must(t, err)
	t.Cleanup(func() { e.Close() })
	must(t, runtime.Register(e, "echo", func(c *runtime.WorkflowContext, s string) (string, error) { return s, nil }))
	ctx := waitCtx(t)
	ids := map[string]string{"child's": "p1/child"}
	for what, id := range badNames {
		if id != "" { // "" asks for a generated ID
			ids[what] = id
		}
	}
	for what, id := range ids {
		starts := map[string]func() error{
			"Start WithID": func() error {
				_, err := runtime.Start[string, string](ctx, e, "echo", "x", runtime.WithID(id))
				return err
			},
			"StartBatch": func() error {
				_, err := runtime.StartBatch[string, string](ctx, e, "echo", []runtime.BatchItem[string]{{ID: "fine", Input: "x"}, {ID: id, Input: "y"}})
				return err
			},
			"StartJSON": func() error {
				_, err := e.StartJSON(ctx, "echo", id, json.RawMessage(`"x"`))
				return err
			},
		}
		for how, call := range starts {
			err := call()
			if !errors.Is(err, runtime.ErrInvalidArgument) || !strings.Contains(err.Error(), "run ID") {
				t.Errorf("%s with the %s ID %q: %v, want ErrInvalidArgument naming the run ID", how, what, id, err)
			}
		}
	}
	_, err = runtime.Start[string, string](ctx, e, "echo", "x", runtime.WithID("p1/child"))
	if want := "run IDs may not contain '/': it is reserved for child runs, <parent>/<call>"; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Start with ID p1/child: %v, want it to say %q", err, want)
	}
	if runs, _, err := e.ListRuns(ctx, runtime.ListRunsQuery{}); err != nil || len(runs) != 0 {
		t.Fatalf("refused starts stored %d runs (%v)", len(runs), err)
	}
}

// Nobody forges a child's outcome: the topic a parent waits on for its
// child ("stem.child/<child ID>") is refused to Emit, SendEvent, their JSON
// forms, WaitForEvent and RegisterEvent, and the parent still waits for
// its real child.
func TestReservedTopicsCannotForgeAChild(t *testing.T) {
	t.Parallel()
	f := setup(t)
	release := make(chan struct{})
	e, err := runtime.New(runtime.Config{Store: f.store, PollInterval: 5 * time.Millisecond})
	must(t, err)
	t.Cleanup(func() { e.Close() })
	must(t, runtime.Register(e, "kid", func(c *runtime.WorkflowContext, n int) (int, error) {
		return runtime.Step(c, "work@v1", runtime.StepOptions{}, func(sc runtime.StepContext) (int, error) {
			select {
			case <-release:
				return n * 2, nil
			case <-sc.Done():
				return 0, sc.Err()
			}
		})
	}))
	must(t, runtime.Register(e, "parent", func(c *runtime.WorkflowContext, n int) (int, error) {
		return runtime.CallChild[int](c, "child", "kid", n)
	}))
	waitsReserved := make(chan error, 1)
	must(t, runtime.Register(e, "sneaky", func(c *runtime.WorkflowContext, _ int) (int, error) {
		_, err := runtime.WaitForEvent[int](c, "w", "stem.child/p2/child", 0)
		select {
		case waitsReserved <- err:
		default:
		}
		return 0, err
	}))
	if err := runtime.RegisterEvent[int](e, "stem.child/x"); !errors.Is(err, runtime.ErrInvalidArgument) {
		t.Errorf("RegisterEvent on a reserved topic: %v, want ErrInvalidArgument", err)
	}
	stop := start(t, e)
	defer func() { close(release); stop() }()
	ctx := waitCtx(t)
	parent, err := runtime.Start[int, int](ctx, e, "parent", 21, runtime.WithID("p2"))
	must(t, err)
	eventually(t, "parent waits for its child", func() bool { return status(t, e, "p2") == runtime.StatusWaiting })

	forged := `{"output":666}`
	for what, call := range map[string]func() error{
		"Emit":     func() error { _, err := e.Emit(ctx, "stem.child/p2/child", json.RawMessage(forged)); return err },
		"EmitJSON": func() error { _, err := e.EmitJSON(ctx, "stem.child/p2/child", json.RawMessage(forged)); return err },
		"SendEvent": func() error {
			return e.SendEvent(ctx, "p2", "stem.child/p2/child", json.RawMessage(forged))
		},
		"SendEventJSON": func() error { return e.SendEventJSON(ctx, "p2", "stem.child/p2/child", json.RawMessage(forged)) },
	} {
		if err := call(); !errors.Is(err, runtime.ErrInvalidArgument) || !strings.Contains(err.Error(), "are reserved") {
			t.Errorf("%s on the child's topic: %v, want ErrInvalidArgument saying the topic is reserved", what, err)
		}
	}
	if _, err := runtime.Start[int, int](ctx, e, "sneaky", 0); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-waitsReserved:
		if !errors.Is(err, runtime.ErrInvalidArgument) {
			t.Errorf("WaitForEvent on a reserved topic: %v, want ErrInvalidArgument", err)
		}
	case <-ctx.Done():
		t.Fatal("WaitForEvent on a reserved topic never returned")
	}
	if st := status(t, e, "p2"); st != runtime.StatusWaiting {
		t.Fatalf("parent is %s after the forgeries, want still waiting for its child", st)
	}
	release <- struct{}{}
	if got, err := parent.Result(ctx); err != nil || got != 42 {
		t.Fatalf("parent's result %d, %v; want its real child's 42", got, err)
	}
}

// A step, wait, child call or sleep under a bad key fails the call, naming
// the key, before anything is written.
func TestBadStepKeysAreRefused(t *testing.T) {
	t.Parallel()
	f := setup(t)
	e, err := runtime.New(runtime.Config{Store: f.store, PollInterval: 5 * time.Millisecond})
	must(t, err)
	t.Cleanup(func() { e.Close() })
	keys := map[string]string{"with '#'": "a#1"}
	for what, k := range badNames {
		keys[what] = k
	}
	got := make(chan error, 4*len(keys))
	must(t, runtime.Register(e, "keys", func(c *runtime.WorkflowContext, _ int) (int, error) {
		for _, k := range keys {
			_, err := runtime.Step(c, k, runtime.StepOptions{}, func(runtime.StepContext) (int, error) { return 1, nil })
			got <- err
			_, err = runtime.WaitForEvent[int](c, k, "t", 0)
			got <- err
			_, err = runtime.CallChild[int](c, k, "keys", 0)
			got <- err
			got <- c.Sleep(k, time.Hour)
		}
		return 0, nil
	}))
	start(t, e)
	ctx := waitCtx(t)
	run, err := runtime.Start[int, int](ctx, e, "keys", 0)
	must(t, err)
	if _, err := run.Result(ctx); err != nil {
		t.Fatal(err)
	}
	close(got)
	for err := range got {
		if !errors.Is(err, runtime.ErrInvalidArgument) || !strings.Contains(err.Error(), "step key") {
			t.Errorf("a call with a bad key: %v, want ErrInvalidArgument naming the step key", err)
		}
	}
	steps, err := e.ListSteps(ctx, run.ID(), 0)
	must(t, err)
	if len(steps) != 0 {
		t.Fatalf("refused calls stored steps: %+v", steps)
	}
}
