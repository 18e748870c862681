package runtime_test

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/stemflow/stem/runtime"
)

// RetryForever retries past any finite budget until an attempt succeeds.
func TestRetryForever(t *testing.T) {
	t.Parallel()
	f := setup(t)
	e, _ := f.engine(5*time.Second, func(e *runtime.Engine) {
		must(t, runtime.Register(e, "flaky", func(c *runtime.WorkflowContext, _ int) (int, error) {
			return runtime.Step(c, "call@v1", runtime.StepOptions{Retries: runtime.RetryForever, Backoff: time.Millisecond, MaxBackoff: time.Millisecond},
				func(sc runtime.StepContext) (int, error) {
					if sc.Attempt() < 20 {
						return 0, errors.New("unavailable")
					}
					return sc.Attempt(), nil
				})
		}))
	})
	start(t, e)
	run, err := runtime.Start[int, int](waitCtx(t), e, "flaky", 0)
	must(t, err)
	got, err := run.Result(waitCtx(t))
	must(t, err)
	if got != 20 {
		t.Fatalf("succeeded on attempt %d, want 20", got)
	}
}

// Options no step can run with fail the call with ErrInvalidArgument,
// synchronous or as a future, before any attempt.
func TestStepOptionsInvalid(t *testing.T) {
	t.Parallel()
	bad := []runtime.StepOptions{
		{Retries: -2},
		{Jitter: 1.5},
		{Jitter: -0.5},
		{Jitter: math.NaN()},
	}
	f := setup(t)
	attempts := 0
	e, _ := f.engine(5*time.Second, func(e *runtime.Engine) {
		must(t, runtime.Register(e, "bad", func(c *runtime.WorkflowContext, i int) (int, error) {
			fn := func(runtime.StepContext) (int, error) { attempts++; return 0, nil }
			if _, err := runtime.Step(c, "sync@v1", bad[i], fn); !errors.Is(err, runtime.ErrInvalidArgument) {
				t.Errorf("Step with %+v: %v, want ErrInvalidArgument", bad[i], err)
			}
			if _, err := runtime.StepAsync(c, "async@v1", bad[i], fn).Await(); !errors.Is(err, runtime.ErrInvalidArgument) {
				t.Errorf("StepAsync with %+v: %v, want ErrInvalidArgument", bad[i], err)
			}
			return 0, nil
		}))
	})
	start(t, e)
	for i := range bad {
		run, err := runtime.Start[int, int](waitCtx(t), e, "bad", i)
		must(t, err)
		_, err = run.Result(waitCtx(t))
		must(t, err)
	}
	if attempts != 0 {
		t.Fatalf("%d attempts ran with invalid options", attempts)
	}
}
