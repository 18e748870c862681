package stemtest_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/stemtest"
)

// A workflow whose result carries the context's UUID and Random passes
// CrashEveryStep: the test kit seeds them, so each case's run of the same
// ID draws what the run without the crash drew, and each draw is a
// checkpoint a crash may fall after or before.
func TestCrashEveryStepWithHelpers(t *testing.T) {
	t.Parallel()
	stemtest.CrashEveryStep(t, func(e *runtime.Engine) error {
		return runtime.Register(e, "stamp", func(c *runtime.WorkflowContext, _ string) (string, error) {
			id := c.UUID()
			n := c.Random()
			_, err := runtime.Step(c, "s@v1", runtime.StepOptions{}, func(runtime.StepContext) (int, error) { return 1, nil })
			return fmt.Sprint(id, " ", n), err
		})
	}, "stamp", "x")
}

// A workflow whose result carries the context's Now, read before and
// after a step, passes CrashEveryStep: a crash costs no virtual time, so
// the resumed run reads the clock where the run without the crash did.
func TestCrashEveryStepWithNow(t *testing.T) {
	t.Parallel()
	stemtest.CrashEveryStep(t, func(e *runtime.Engine) error {
		return runtime.Register(e, "clock", func(c *runtime.WorkflowContext, _ string) (string, error) {
			before := c.Now()
			_, err := runtime.Step(c, "s@v1", runtime.StepOptions{}, func(runtime.StepContext) (int, error) { return 1, nil })
			if err != nil {
				return "", err
			}
			after := c.Now()
			if err := c.Sleep("nap", time.Hour); err != nil {
				return "", err
			}
			return fmt.Sprint(before.UnixNano(), " ", after.UnixNano(), " ", c.Now().Sub(before)), nil
		})
	}, "clock", "x")
}
