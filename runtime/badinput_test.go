package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/storage"
)

// Bad input gets a sentinel error from the call that caused it, and nothing
// already stored is lost or changed.
func TestBadInputIsRejectedAndChangesNothing(t *testing.T) {
	t.Parallel()
	f := setup(t)
	e, err := runtime.New(runtime.Config{Store: f.store, MaxPayloadBytes: 1024, PollInterval: 5 * time.Millisecond})
	must(t, err)
	must(t, runtime.Register(e, "greet", func(c *runtime.WorkflowContext, name string) (string, error) {
		return runtime.WaitForEvent[string](c, "reply", "reply", 0)
	}))
	ctx := waitCtx(t)
	start(t, e)
	existing, err := runtime.Start[string, string](ctx, e, "greet", "ada", runtime.WithID("keep-me"))
	must(t, err)
	eventually(t, "run waits", func() bool { return status(t, e, existing.ID()) == runtime.StatusWaiting })
	before, _, err := e.ListRuns(ctx, runtime.ListRunsQuery{})
	must(t, err)

	checks := []struct {
		name string
		call func() error
		want error
		says string
	}{
		{"unknown workflow", func() error {
			_, err := runtime.Start[string, string](ctx, e, "greet.typo", "x")
			return err
		}, runtime.ErrUnknownWorkflow, `"greet.typo"`},
		{"wrong types for the workflow", func() error {
			_, err := runtime.Start[int, string](ctx, e, "greet", 1)
			return err
		}, runtime.ErrInvalidArgument, "takes string"},
		{"oversize input", func() error {
			_, err := runtime.Start[string, string](ctx, e, "greet", strings.Repeat("x", 2000))
			return err
		}, runtime.ErrPayloadTooLarge, "limit 1024"},
		{"oversize event", func() error {
			return e.SendEvent(ctx, existing.ID(), "reply", strings.Repeat("x", 2000))
		}, runtime.ErrPayloadTooLarge, "payload of event reply"},
		{"oversize emit", func() error {
			_, err := e.Emit(ctx, "reply", strings.Repeat("x", 2000))
			return err
		}, runtime.ErrPayloadTooLarge, "limit 1024"},
		{"event to an unknown run", func() error {
			return e.SendEvent(ctx, "nobody", "reply", "hi")
		}, runtime.ErrRunNotFound, ""},
		{"empty topic", func() error {
			return e.SendEvent(ctx, existing.ID(), "", "hi")
		}, runtime.ErrInvalidArgument, "topic"},
		{"pause an unknown run", func() error { return e.Pause(ctx, "nobody") }, runtime.ErrRunNotFound, ""},
		{"resume a run that is not paused", func() error { return e.Resume(ctx, existing.ID()) }, runtime.ErrInvalidState, ""},
		{"existing ID of another workflow", func() error {
			must(t, runtime.Register(e, "other", func(c *runtime.WorkflowContext, s string) (string, error) { return s, nil }))
			_, err := runtime.Start[string, string](ctx, e, "other", "x", runtime.WithID("keep-me"))
			return err
		}, runtime.ErrInvalidArgument, `exists as a run of "greet"`},
		{"get as another workflow", func() error {
			_, err := runtime.Get[string](ctx, e, "other", "keep-me")
			return err
		}, runtime.ErrInvalidArgument, ""},
	}
	for _, c := range checks {
		err := c.call()
		if !errors.Is(err, c.want) || !strings.Contains(fmtErr(err), c.says) {
			t.Errorf("%s: got %v, want %v saying %q", c.name, err, c.want, c.says)
		}
	}
	after, _, err := e.ListRuns(ctx, runtime.ListRunsQuery{})
	must(t, err)
	if len(after) != len(before) || after[0].ID != "keep-me" || after[0].Status != runtime.StatusWaiting {
		t.Fatalf("runs changed by rejected calls: before %+v after %+v", before, after)
	}
	// The run still works.
	must(t, e.SendEvent(ctx, existing.ID(), "reply", "hello"))
	got, err := existing.Result(ctx)
	must(t, err)
	if got != "hello" {
		t.Fatalf("result %q", got)
	}
	if err := e.SendEvent(ctx, existing.ID(), "reply", "late"); !errors.Is(err, runtime.ErrInvalidState) {
		t.Fatalf("event to a finished run: %v, want ErrInvalidState", err)
	}

	must(t, e.Close())
	if _, err := runtime.Start[string, string](ctx, e, "greet", "x"); !errors.Is(err, runtime.ErrClosed) {
		t.Fatalf("start on a closed engine: %v", err)
	}
	if err := e.Run(context.Background()); !errors.Is(err, runtime.ErrClosed) {
		t.Fatalf("run on a closed engine: %v", err)
	}
}

func fmtErr(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// Payloads and error texts encrypted at rest with the AES-GCM codec still
// round-trip: inputs, outputs, checkpoints, a child's outcome, a failed
// attempt's error, a step's final error and the run's error.
func TestAESGCMCodec(t *testing.T) {
	t.Parallel()
	f := setup(t)
	codec, err := runtime.NewAESGCMCodec([]byte("0123456789abcdef0123456789abcdef"))
	must(t, err)
	e, err := runtime.New(runtime.Config{Store: f.store, Codec: codec, PollInterval: 5 * time.Millisecond})
	must(t, err)
	must(t, runtime.Register(e, "secret.child", func(c *runtime.WorkflowContext, in string) (string, error) {
		if strings.HasPrefix(in, "fail") {
			return "", errors.New("child refused " + in)
		}
		return in + "!", nil
	}))
	must(t, runtime.Register(e, "secret", func(c *runtime.WorkflowContext, in string) (string, error) {
		up, err := runtime.Step(c, "upper@v1", runtime.StepOptions{Retries: 1, Backoff: time.Millisecond}, func(sc runtime.StepContext) (string, error) {
			if sc.Attempt() == 1 {
				return "", errors.New("declined " + in)
			}
			return strings.ToUpper(in), nil
		})
		if err != nil {
			return "", err
		}
		shout, err := runtime.CallChild[string](c, "shout", "secret.child", up)
		if err != nil {
			return "", err
		}
		if _, err := runtime.CallChild[string](c, "refuse", "secret.child", "fail "+in); err != nil {
			return "", fmt.Errorf("after %s: %w", shout, err)
		}
		return shout, nil
	}))
	start(t, e)
	run, err := runtime.Start[string, string](waitCtx(t), e, "secret", "card 4242")
	must(t, err)
	_, err = run.Result(waitCtx(t))
	if want := "after CARD 4242!: child refused fail card 4242"; err == nil || err.Error() != want {
		t.Fatalf("result error %v, want %q", err, want)
	}
	steps, err := e.ListSteps(waitCtx(t), run.ID(), 0)
	must(t, err)
	if len(steps) != 3 || steps[0].Attempts[0].Error != "declined card 4242" || steps[2].Err == nil ||
		!strings.Contains(steps[2].Err.Error(), "child refused fail card 4242") {
		t.Fatalf("steps as read %+v: want the opened texts", steps)
	}
	raw, err := f.store.GetRun(waitCtx(t), run.ID())
	must(t, err)
	hist, err := f.store.ListSteps(waitCtx(t), storage.StepsQuery{RunID: run.ID()})
	must(t, err)
	stored := hist.Steps
	atRest := [][]byte{raw.Input, raw.Output, []byte(raw.Error.Message)}
	for _, s := range stored {
		atRest = append(atRest, s.Output)
		if s.Error != nil {
			atRest = append(atRest, []byte(s.Error.Message))
		}
		for _, a := range s.Attempts {
			atRest = append(atRest, []byte(a.Error))
		}
	}
	for _, b := range atRest {
		if strings.Contains(string(b), "4242") {
			t.Fatalf("plaintext at rest: %q", b)
		}
	}
}

// A run whose worker keeps dying stops after a bounded number of recoveries.
func TestPoisonRunStops(t *testing.T) {
	t.Parallel()
	f := setup(t)
	const lease = 50 * time.Millisecond
	hang := make(chan struct{})
	defer close(hang) // before the engines' cleanups wait for their runs
	register := func(e *runtime.Engine) {
		must(t, runtime.Register(e, "poison", func(c *runtime.WorkflowContext, _ int) (int, error) {
			return runtime.Step(c, "crash@v1", runtime.StepOptions{}, func(runtime.StepContext) (int, error) {
				<-hang // the worker "dies" here every time
				return 0, nil
			})
		}))
	}
	var run *runtime.Run[int]
	for i := range 4 {
		probe := &probeStore{Store: f.store}
		e, err := runtime.New(runtime.Config{Store: probe, LeaseDuration: lease, PollInterval: 5 * time.Millisecond, MaxRecoveries: 2})
		must(t, err)
		register(e)
		if i == 0 {
			run, err = runtime.Start[int, int](waitCtx(t), e, "poison", 0)
			must(t, err)
		}
		start(t, e)
		if i < 3 {
			eventually(t, "worker takes the run", func() bool {
				r, err := f.store.GetRun(context.Background(), run.ID())
				return err == nil && r.Status == runtime.StatusRunning && r.Owner == e.WorkerID()
			})
			probe.kill()
			continue
		}
		_, err = run.Result(waitCtx(t))
		if !errors.Is(err, runtime.ErrPoisonRun) {
			t.Fatalf("err %v, want ErrPoisonRun", err)
		}
	}
}
