package enginetest

import (
	"errors"
	"strings"
	"time"

	"github.com/stemflow/stem/runtime"
)

// The children of an execution that continues as new meet their
// parent-close policy then, as when their parent ends: the next execution
// cannot await them.
var continueChildScenarios = []scenario{
	{"continuechildren/an execution that continues as new ends its children by their policy", testContinueChildren},
}

func testContinueChildren(f *fixture) {
	e := f.engine(config{}, func(e *runtime.Engine) {
		f.must(runtime.Register(e, "napper", func(c *runtime.WorkflowContext, _ int) (string, error) {
			return "", c.Sleep("nap", time.Hour)
		}))
		// Its input is its execution's number: the first starts a child of
		// each policy, leaves them running and continues as new; the
		// second returns.
		f.must(runtime.Register(e, "looper", func(c *runtime.WorkflowContext, n int) (string, error) {
			if n > 1 {
				return "done", nil
			}
			for _, p := range []struct {
				name   string
				policy runtime.ParentClosePolicy
			}{
				{"terminate", runtime.ParentCloseTerminate},
				{"cancel", runtime.ParentCloseCancel},
				{"abandon", runtime.ParentCloseAbandon},
			} {
				if _, err := runtime.StartChild[string](c, p.name, "napper", 0, runtime.ParentClose(p.policy)); err != nil {
					return "", err
				}
			}
			return "", runtime.ContinueAsNew(c, n+1)
		}))
	})
	f.start(e)
	_, err := runtime.Start[int, string](f.ctx, e, "looper", 1, runtime.WithID("looper-1"))
	f.must(err)
	info := f.waitStatus(e, "looper-1", runtime.StatusComplete)
	if info.Execution != 2 {
		f.t.Fatalf("looper-1 completed in execution %d, want 2", info.Execution)
	}

	if info := f.waitStatus(e, "looper-1/terminate", runtime.StatusTerminated); !errors.Is(info.Err, runtime.ErrTerminated) ||
		!strings.Contains(info.Err.Error(), "continued as new") {
		f.t.Fatalf("the child with the terminate policy: %v, want ErrTerminated saying its parent continued as new", info.Err)
	}
	const reason = "its parent looper-1 continued as new and the child's parent-close policy is cancel"
	info = f.waitStatus(e, "looper-1/cancel", runtime.StatusErrored)
	if !errors.Is(info.Err, runtime.ErrCanceled) || !info.CancelRequested || info.CancelReason != reason {
		f.t.Fatalf("the child with the cancel policy: %v (requested %v, reason %q), want ErrCanceled with the reason %q",
			info.Err, info.CancelRequested, info.CancelReason, reason)
	}
	info = f.waitStatus(e, "looper-1/abandon", runtime.StatusWaiting)
	if info.CancelRequested {
		f.t.Fatal("the abandoned child has a cancellation requested")
	}
}
