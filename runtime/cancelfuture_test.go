package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stemflow/stem/runtime"
)

// TestSelectCancelPickFirst: a pick-first over three step futures returns
// the first's value and the run completes while the losers still run —
// one waiting on its context, one ignoring it — with their contexts
// cancelled (cause ErrCanceled), their retries stopped, and Await of
// either an error matching ErrCanceled.
func TestSelectCancelPickFirst(t *testing.T) {
	t.Parallel()
	f := setup(t)
	var (
		mu         sync.Mutex
		causes     = map[string]error{}
		attempts   atomic.Int32
		started    = make(chan struct{}, 2)
		release    = make(chan struct{}) // the loser that ignores its context waits for it
		ignoredEnd = make(chan struct{})
	)
	e, _ := f.engine(time.Second, func(e *runtime.Engine) {
		must(t, runtime.Register(e, "pick", func(c *runtime.WorkflowContext, _ int) ([]string, error) {
			opts := runtime.StepOptions{Retries: 5, Backoff: time.Millisecond}
			polite := runtime.StepAsync(c, "polite@v1", opts, func(sc runtime.StepContext) (string, error) {
				attempts.Add(1)
				started <- struct{}{}
				<-sc.Done()
				mu.Lock()
				causes["polite"] = context.Cause(sc)
				mu.Unlock()
				return "", sc.Err()
			})
			deaf := runtime.StepAsync(c, "deaf@v1", opts, func(sc runtime.StepContext) (string, error) {
				attempts.Add(1)
				started <- struct{}{}
				<-release
				mu.Lock()
				causes["deaf"] = context.Cause(sc)
				mu.Unlock()
				close(ignoredEnd)
				return "late", nil
			})
			fast := runtime.StepAsync(c, "fast@v1", opts, func(sc runtime.StepContext) (string, error) {
				<-started
				<-started // both losers run before the winner ends
				return "first", nil
			})
			i, err := runtime.SelectCancel(c, "pick", polite, deaf, fast)
			if err != nil {
				return nil, err
			}
			v, err := fast.Await()
			if err != nil {
				return nil, err
			}
			out := []string{string(rune('0' + i)), v}
			for _, l := range []*runtime.Future[string]{polite, deaf} {
				if _, err := l.Await(); !errors.Is(err, runtime.ErrCanceled) {
					out = append(out, "loser: "+errString(err))
				}
			}
			return out, nil
		}))
	})
	start(t, e)
	run, err := runtime.Start[int, []string](waitCtx(t), e, "pick", 0)
	must(t, err)
	got, err := run.Result(waitCtx(t))
	must(t, err)
	if len(got) != 2 || got[0] != "2" || got[1] != "first" {
		t.Fatalf("result %q, want [2 first] (losers' Await matching ErrCanceled)", got)
	}
	// The run completed while the deaf loser still ran: let it end now.
	close(release)
	<-ignoredEnd
	eventually(t, "the polite loser saw its cancellation", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return causes["polite"] != nil
	})
	mu.Lock()
	for _, k := range []string{"polite", "deaf"} {
		if !errors.Is(causes[k], runtime.ErrCanceled) {
			t.Errorf("%s loser's context cause %v, want ErrCanceled", k, causes[k])
		}
	}
	mu.Unlock()
	if n := attempts.Load(); n != 2 {
		t.Errorf("losers made %d attempts, want 2 (no retry after the cancel)", n)
	}
	steps, err := e.ListSteps(waitCtx(t), run.ID(), 0)
	must(t, err)
	for _, s := range steps {
		if s.Key == "polite@v1" || s.Key == "deaf@v1" {
			if !errors.Is(s.Err, runtime.ErrCanceled) {
				t.Errorf("step %s checkpointed %v, want the cancellation", s.Key, s.Err)
			}
		}
	}
}

func errString(err error) string {
	if err == nil {
		return "nil"
	}
	return err.Error()
}

// TestCancelTimerAndEventFutures: a cancelled timer is ready at once with
// ErrCanceled (the run does not sleep out its hour), and a cancelled
// event future lets go of its topic, so the next event goes to the next
// future of the topic.
func TestCancelTimerAndEventFutures(t *testing.T) {
	t.Parallel()
	f := setup(t)
	e, _ := f.engine(time.Second, func(e *runtime.Engine) {
		must(t, runtime.Register(e, "cancels", func(c *runtime.WorkflowContext, _ int) (string, error) {
			timer := c.Timer("nap", time.Hour)
			timer.Cancel()
			if _, err := timer.Await(); !errors.Is(err, runtime.ErrCanceled) {
				return "", errors.New("timer Await: " + errString(err))
			}
			first := runtime.OnEvent[string](c, "first", "news")
			first.Cancel()
			second := runtime.OnEvent[string](c, "second", "news")
			v, err := second.Await()
			if err != nil {
				return "", err
			}
			if _, err := first.Await(); !errors.Is(err, runtime.ErrCanceled) {
				return "", errors.New("event Await: " + errString(err))
			}
			return v, nil
		}))
	})
	start(t, e)
	run, err := runtime.Start[int, string](waitCtx(t), e, "cancels", 0)
	must(t, err)
	eventually(t, "the run waits for its event", func() bool { return status(t, e, run.ID()) == runtime.StatusWaiting })
	must(t, e.SendEvent(waitCtx(t), run.ID(), "news", "hello"))
	got, err := run.Result(waitCtx(t))
	must(t, err)
	if got != "hello" {
		t.Fatalf("result %q, want the event for the second future", got)
	}
}

// TestCancelStepInBackoff: a step future cancelled while it waits for its
// retry makes no further attempt, and Await returns ErrCanceled.
func TestCancelStepInBackoff(t *testing.T) {
	t.Parallel()
	f := setup(t)
	var attempts atomic.Int32
	failed := make(chan struct{})
	e, _ := f.engine(time.Second, func(e *runtime.Engine) {
		must(t, runtime.Register(e, "backoff", func(c *runtime.WorkflowContext, _ int) (string, error) {
			fut := runtime.StepAsync(c, "flaky@v1", runtime.StepOptions{Retries: 5, Backoff: time.Hour, Jitter: runtime.NoJitter},
				func(sc runtime.StepContext) (string, error) {
					if attempts.Add(1) == 1 {
						close(failed)
					}
					return "", errors.New("not yet")
				})
			// Wait (in a step) until the first attempt failed: the future
			// then waits an hour for its retry.
			if err := runtime.Do(c, "wait@v1", runtime.StepOptions{}, func(runtime.StepContext) error {
				<-failed
				return nil
			}); err != nil {
				return "", err
			}
			fut.Cancel()
			_, err := fut.Await()
			return errString(err), nil
		}))
	})
	start(t, e)
	run, err := runtime.Start[int, string](waitCtx(t), e, "backoff", 0)
	must(t, err)
	got, err := run.Result(waitCtx(t))
	must(t, err)
	if !strings.Contains(got, runtime.ErrCanceled.Error()) {
		t.Fatalf("Await of the cancelled future: %q, want ErrCanceled", got)
	}
	if n := attempts.Load(); n != 1 {
		t.Fatalf("%d attempts, want 1: no retry after the cancel", n)
	}
}

// TestCancelChildFuture: a cancelled child future stops the parent
// waiting; the child then meets its parent-close policy when the parent
// ends: terminated by default, running on to its own end when abandoned.
func TestCancelChildFuture(t *testing.T) {
	t.Parallel()
	f := setup(t)
	e, _ := f.engine(time.Second, func(e *runtime.Engine) {
		must(t, runtime.Register(e, "child", func(c *runtime.WorkflowContext, _ int) (string, error) {
			return runtime.WaitForEvent[string](c, "go", "child.go", 0)
		}))
		must(t, runtime.Register(e, "parent", func(c *runtime.WorkflowContext, abandon bool) (string, error) {
			var opts []runtime.ChildOption
			if abandon {
				opts = append(opts, runtime.ParentClose(runtime.ParentCloseAbandon))
			}
			kid := runtime.CallChildAsync[string](c, "kid", "child", 0, opts...)
			kid.Cancel()
			_, err := kid.Await()
			return errString(err), nil
		}))
	})
	start(t, e)
	for _, abandon := range []bool{false, true} {
		id := fmt.Sprintf("parent-abandons-%v", abandon)
		run, err := runtime.Start[bool, string](waitCtx(t), e, "parent", abandon, runtime.WithID(id))
		must(t, err)
		got, err := run.Result(waitCtx(t))
		must(t, err)
		if !strings.Contains(got, runtime.ErrCanceled.Error()) {
			t.Fatalf("Await of the cancelled child future: %q, want ErrCanceled", got)
		}
		kid := id + "/kid"
		if !abandon {
			info, err := mustGet[string](t, e, "child", kid).Info(waitCtx(t))
			must(t, err)
			if info.Status != runtime.StatusTerminated || !errors.Is(info.Err, runtime.ErrTerminated) {
				t.Fatalf("the child of the default policy is %s (%v) after its parent completed, want terminated", info.Status, info.Err)
			}
			continue
		}
		eventually(t, "the abandoned child waits for its event", func() bool {
			st, err := e.Get(waitCtx(t), kid)
			return err == nil && st.Status == runtime.StatusWaiting
		})
		must(t, e.SendEvent(waitCtx(t), kid, "child.go", "done"))
		out, err := mustGet[string](t, e, "child", kid).Result(waitCtx(t))
		must(t, err)
		if out != "done" {
			t.Fatalf("child result %q, want done", out)
		}
	}
}

// TestCancelKeepsResult: cancel is a request: a step future whose result
// was written before the Cancel keeps it, also on replay.
func TestCancelKeepsResult(t *testing.T) {
	t.Parallel()
	f := setup(t)
	var runs atomic.Int32
	e, _ := f.engine(time.Second, func(e *runtime.Engine) {
		must(t, runtime.Register(e, "kept", func(c *runtime.WorkflowContext, _ int) (string, error) {
			fut := runtime.StepAsync(c, "quick@v1", runtime.StepOptions{}, func(runtime.StepContext) (string, error) {
				runs.Add(1)
				return "done", nil
			})
			if err := runtime.All(c, fut); err != nil { // its checkpoint is written
				return "", err
			}
			fut.Cancel()
			if err := c.Sleep("nap", time.Millisecond); err != nil { // a replay follows
				return "", err
			}
			return fut.Await()
		}))
	})
	start(t, e)
	run, err := runtime.Start[int, string](waitCtx(t), e, "kept", 0)
	must(t, err)
	got, err := run.Result(waitCtx(t))
	must(t, err)
	if got != "done" || runs.Load() != 1 {
		t.Fatalf("result %q after %d runs, want the step's own result from its one run", got, runs.Load())
	}
}
