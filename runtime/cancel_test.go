package runtime_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stemflow/stem/runtime"
)

// waitFor polls cond until it holds, failing the test after a minute.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("never happened: %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestCancelCutReplaysAfterWakeTime: a sleep cut short by the run's
// cancellation is cut again by the replay of another worker that takes
// the run over after the sleep's wake time has passed; the cleanup that
// ran before the hand-over does not run again.
func TestCancelCutReplaysAfterWakeTime(t *testing.T) {
	f, clock := setupClock(t)
	var woke, cleaned, after atomic.Int32
	blocked := make(chan struct{}, 1)
	register := func(e *runtime.Engine) {
		must(t, runtime.Register(e, "napper", func(c *runtime.WorkflowContext, in int) (string, error) {
			err := c.Sleep("nap", time.Hour)
			if err == nil {
				woke.Add(1)
				return "woke", nil
			}
			if !errors.Is(err, runtime.ErrCanceled) {
				return "", err
			}
			d := c.Detached()
			if err := runtime.Do(d, "cleanup@v1", runtime.StepOptions{}, func(runtime.StepContext) error { cleaned.Add(1); return nil }); err != nil {
				return "", err
			}
			if err := runtime.Do(d, "after@v1", runtime.StepOptions{}, func(sc runtime.StepContext) error {
				if after.Add(1) == 1 {
					blocked <- struct{}{}
					<-sc.Done() // the first worker stops here
					return sc.Err()
				}
				return nil
			}); err != nil {
				return "", err
			}
			return "", err
		}))
	}
	first, _ := f.engine(time.Minute, register)
	stopFirst := start(t, first)
	ctx := t.Context()
	_, err := runtime.Start[int, string](ctx, first, "napper", 0, runtime.WithID("nap-1"))
	must(t, err)
	waitFor(t, "the run sleeps", func() bool {
		info, err := first.Get(ctx, "nap-1")
		return err == nil && info.Status == runtime.StatusWaiting
	})
	must(t, first.Cancel(ctx, "nap-1", "wake up"))
	<-blocked
	stopFirst()

	clock.Advance(2 * time.Hour) // the nap's wake time is long past
	second, _ := f.engine(time.Minute, register)
	start(t, second)
	waitFor(t, "the run ends", func() bool {
		info, err := second.Get(ctx, "nap-1")
		return err == nil && info.Status.Finished()
	})
	info, err := second.Get(ctx, "nap-1")
	must(t, err)
	if info.Status != runtime.StatusErrored || !errors.Is(info.Err, runtime.ErrCanceled) {
		t.Fatalf("the run: %s %v, want errored with ErrCanceled", info.Status, info.Err)
	}
	if woke.Load() != 0 || cleaned.Load() != 1 || after.Load() != 2 {
		t.Fatalf("the nap returned %d times, cleanup ran %d times, the step after it %d; want 0, 1, 2", woke.Load(), cleaned.Load(), after.Load())
	}

	// The replay of the finished run takes the same path.
	rep, err := second.Replay(ctx, runtime.ReplayOptions{RunIDs: []string{"nap-1"}})
	must(t, err)
	if len(rep.Divergences) != 0 || len(rep.Skipped) != 0 || rep.Replayed != 1 {
		t.Fatalf("replay of the cancelled run: %+v, want it replayed without divergence", rep)
	}
}

// TestCancelRequestedReported: the detached context's Context is not
// cancelled by the run's cancellation, and CancelRequested reports it.
func TestCancelRequestedReported(t *testing.T) {
	f := setup(t)
	type seen struct {
		reason              string
		requested, detached bool
		ctxErr, detachedErr error
	}
	got := make(chan seen, 1)
	e, _ := f.engine(time.Minute, func(e *runtime.Engine) {
		must(t, runtime.Register(e, "asker", func(c *runtime.WorkflowContext, in int) (string, error) {
			err := c.Sleep("nap", time.Hour)
			reason, requested := c.CancelRequested()
			d := c.Detached()
			got <- seen{reason, requested, d.IsDetached() && !c.IsDetached(), context.Cause(c.Context()), d.Context().Err()}
			return "", err
		}))
	})
	start(t, e)
	ctx := t.Context()
	_, err := runtime.Start[int, string](ctx, e, "asker", 0, runtime.WithID("ask-1"))
	must(t, err)
	waitFor(t, "the run sleeps", func() bool {
		info, err := e.Get(ctx, "ask-1")
		return err == nil && info.Status == runtime.StatusWaiting
	})
	must(t, e.Cancel(ctx, "ask-1", "why not"))
	s := <-got
	if s.reason != "why not" || !s.requested || !s.detached || !errors.Is(s.ctxErr, runtime.ErrCanceled) || s.detachedErr != nil {
		t.Fatalf("in the workflow: %+v; want the reason, requested, a detached context, the workflow's context cancelled with ErrCanceled and the detached one live", s)
	}
}
