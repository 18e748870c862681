package stemtest_test

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/stemtest"
)

// The ported retry sample: a step retrying with a one-hour backoff on an
// engine with one worker parks its run for the hour, so another run
// completes meanwhile, at once in virtual time; the retry then comes an
// hour after the failure and succeeds.
func TestOneHourBackoffFreesTheOneWorker(t *testing.T) {
	t.Parallel()
	var attempts atomic.Int32
	var quickDoneAt atomic.Int64
	env := stemtest.New(t, func(e *runtime.Engine) error {
		if err := runtime.Register(e, "retrying", func(c *runtime.WorkflowContext, _ int) (int, error) {
			return runtime.Step(c, "charge@v1", runtime.StepOptions{Retries: runtime.RetryForever, Backoff: time.Hour, MaxBackoff: time.Hour, Jitter: runtime.NoJitter},
				func(sc runtime.StepContext) (int, error) {
					if attempts.Add(1) == 1 {
						return 0, errors.New("the payment service is down")
					}
					return sc.Attempt(), nil
				})
		}); err != nil {
			return err
		}
		return runtime.Register(e, "quick", func(c *runtime.WorkflowContext, n int) (int, error) {
			return runtime.Step(c, "double@v1", runtime.StepOptions{}, func(sc runtime.StepContext) (int, error) { return 2 * n, nil })
		})
	}, stemtest.WithConfig(func(c *runtime.Config) { c.Workers = 1 }))
	ctx := env.Context()
	slow, err := runtime.Start[int, int](ctx, env.Engine, "retrying", 0, runtime.WithID("slow"))
	if err != nil {
		t.Fatal(err)
	}
	// Start the other run once the first attempt has failed, so it
	// competes with the backoff, not with the attempt.
	for attempts.Load() < 1 {
		time.Sleep(time.Millisecond)
	}
	quick, err := runtime.Start[int, int](ctx, env.Engine, "quick", 21, runtime.WithID("quick"))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := quick.Result(ctx); err != nil || got != 42 {
		t.Fatalf("quick = %d, %v", got, err)
	}
	quickDoneAt.Store(int64(env.Elapsed())) // virtual time: the clock jumps only when every run waits on time
	got, err := slow.Result(ctx)
	if err != nil || got != 2 {
		t.Fatalf("retrying = %d, %v; want its second attempt's success", got, err)
	}
	if d := time.Duration(quickDoneAt.Load()); d >= time.Hour {
		t.Errorf("quick completed %s in (virtual): it waited behind the backoff", d)
	}
	if env.Elapsed() < time.Hour {
		t.Errorf("the retry came %s in (virtual), before its hour", env.Elapsed())
	}
}
