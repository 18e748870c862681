package ui_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/ui"
)

// An event wait that timed out, which the workflow handled, is shown as
// timed out, not as a failure.
func TestTimedOutWaitIsNotAFailure(t *testing.T) {
	t.Parallel()
	d := newDash(t, false, nil)
	e, err := runtime.New(runtime.Config{Store: d.store, PollInterval: 5 * time.Millisecond})
	must(t, err)
	must(t, runtime.Register(e, "patient", func(c *runtime.WorkflowContext, _ int) (string, error) {
		_, err := runtime.WaitForEvent[string](c, "reply", "patient.reply", time.Millisecond)
		if errors.Is(err, runtime.ErrEventTimeout) {
			return "no reply", nil
		}
		return "replied", err
	}))
	t.Cleanup(func() { e.Close() })
	runEngine(t, e)
	ctx := context.Background()
	_, err = e.StartJSON(ctx, "patient", "p-1", []byte(`1`))
	must(t, err)
	d.h = ui.New(e, ui.Options{Authorize: d.authorize, AllowedHosts: testHosts})
	d.waitStatus("p-1", "complete")
	d.get("/"+runPath("p-1")).contains(t, `data-key="reply" data-status="timed_out"`, `<span class="status st-timed_out">timed_out</span>`).lacks(t, `data-key="reply" data-status="failed"`)
}
