package stemtest_test

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/stemtest"
)

type ready struct{ Dock string }

// A month's sleep, a three-day wait that times out and five retries an hour
// apart take virtual time only.
func TestVirtualTime(t *testing.T) {
	t.Parallel()
	var attempts atomic.Int64
	env := stemtest.New(t, func(e *runtime.Engine) error {
		return runtime.Register(e, "slow", func(c *runtime.WorkflowContext, in string) (string, error) {
			if err := c.Sleep("a month", 30*24*time.Hour); err != nil {
				return "", err
			}
			_, err := runtime.WaitForEvent[ready](c, "dock", "slow.ready", 72*time.Hour)
			if !errors.Is(err, runtime.ErrEventTimeout) {
				return "", err
			}
			return runtime.Step(c, "flaky@v1", runtime.StepOptions{Retries: 5, Backoff: time.Hour, MaxBackoff: time.Hour},
				func(runtime.StepContext) (string, error) {
					if attempts.Add(1) <= 5 {
						return "", errors.New("not yet")
					}
					return "done " + in, nil
				})
		})
	})
	wall := time.Now()
	run, err := runtime.Start[string, string](env.Context(), env.Engine, "slow", "x")
	if err != nil {
		t.Fatal(err)
	}
	out, err := run.Result(env.Context())
	took := time.Since(wall)
	if err != nil || out != "done x" {
		t.Fatalf("result %q, %v", out, err)
	}
	// 30 days, 3 days, and five backoffs of half to one hour each.
	min, max := 33*24*time.Hour+150*time.Minute, 33*24*time.Hour+5*time.Hour+time.Minute
	if got := env.Elapsed(); got < min || got > max {
		t.Errorf("virtual time %s, want between %s and %s", got, min, max)
	}
	if n := attempts.Load(); n != 6 {
		t.Errorf("%d attempts, want 6", n)
	}
	t.Logf("virtual time reached: %s (%s after the start), in %s of wall time", env.Now().Format(time.RFC3339), env.Elapsed(), took)
}
