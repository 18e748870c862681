package runtime_test

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stemflow/stem/runtime"
)

// A run parked at its one sleep before a deploy that puts the sleep in a
// loop goes on from it: the loop's first sleep keeps the bare key, so it
// finds the run's checkpoint, and the later ones sleep under cool-off#1
// and cool-off#2.
func TestSleepLoopKeepsTheFirstSleepsKey(t *testing.T) {
	t.Parallel()
	f := setup(t)
	var looped atomic.Bool
	var ticks atomic.Int32
	register := func(e *runtime.Engine) {
		must(t, runtime.Register(e, "cool", func(c *runtime.WorkflowContext, _ int) (int, error) {
			n := 1
			if looped.Load() {
				n = 3
			}
			for range n {
				if err := c.Sleep("cool-off", 30*time.Millisecond); err != nil {
					return 0, err
				}
				if err := runtime.Do(c, "tick@v1", runtime.StepOptions{Autoversion: true}, func(runtime.StepContext) error {
					ticks.Add(1)
					return nil
				}); err != nil {
					return 0, err
				}
			}
			return n, nil
		}))
	}
	old, _ := f.engine(5*time.Second, register)
	stopOld := start(t, old)
	_, err := runtime.Start[int, int](waitCtx(t), old, "cool", 0, runtime.WithID("r1"))
	must(t, err)
	eventually(t, "the run sleeps at cool-off", func() bool { return status(t, old, "r1") == runtime.StatusWaiting })
	stopOld()

	looped.Store(true)
	next, _ := f.engine(5*time.Second, register)
	start(t, next)
	out, err := mustGet[int](t, next, "cool", "r1").Result(waitCtx(t))
	must(t, err)
	if out != 3 || ticks.Load() != 3 {
		t.Fatalf("result %d after %d ticks, want 3 after 3", out, ticks.Load())
	}
	steps, err := next.ListSteps(waitCtx(t), "r1", 0)
	must(t, err)
	var keys []string
	for _, s := range steps {
		keys = append(keys, s.Key)
	}
	want := "cool-off tick@v1#0 cool-off#1 tick@v1#1 cool-off#2 tick@v1#2"
	if got := strings.Join(keys, " "); got != want {
		t.Fatalf("steps %s, want %s", got, want)
	}
}

// Sleeps and waits of one name share their numbering; a replay that
// reaches the run's suspension after another number of sleeps is
// non-deterministic, though every key it asks for has its checkpoint.
func TestRepeatedSleepCountIsChecked(t *testing.T) {
	t.Parallel()
	f := setup(t)
	var fewer atomic.Bool
	e, _ := f.engine(5*time.Second, func(e *runtime.Engine) {
		must(t, runtime.Register(e, "shared", func(c *runtime.WorkflowContext, _ int) (int, error) {
			if err := c.Sleep("pace", time.Millisecond); err != nil {
				return 0, err
			}
			return runtime.WaitForEvent[int](c, "pace", "go", 0)
		}))
		must(t, runtime.Register(e, "paced", func(c *runtime.WorkflowContext, _ int) (int, error) {
			n := 2
			if fewer.Load() {
				n = 1
			}
			for range n {
				if err := c.Sleep("pace", time.Millisecond); err != nil {
					return 0, err
				}
			}
			return runtime.WaitForEvent[int](c, "signal", "go", 0)
		}))
	})
	start(t, e)
	keysOf := func(id string) string {
		steps, err := e.ListSteps(waitCtx(t), id, 0)
		must(t, err)
		var keys []string
		for _, s := range steps {
			keys = append(keys, s.Key+"="+string(s.Kind))
		}
		return strings.Join(keys, " ")
	}
	for _, wf := range []string{"shared", "paced"} {
		_, err := runtime.Start[int, int](waitCtx(t), e, wf, 0, runtime.WithID(wf))
		must(t, err)
		eventually(t, wf+" waits", func() bool {
			info, err := e.Get(waitCtx(t), wf)
			must(t, err)
			return info.Status == runtime.StatusWaiting && info.WaitingFor == "go"
		})
	}
	must(t, e.SendEvent(waitCtx(t), "shared", "go", 7))
	if out, err := mustGet[int](t, e, "shared", "shared").Result(waitCtx(t)); err != nil || out != 7 {
		t.Fatalf("shared: %d, %v, want 7", out, err)
	}
	if got, want := keysOf("shared"), "pace=sleep pace#1=event"; got != want {
		t.Fatalf("shared: steps %s, want %s", got, want)
	}
	if got, want := keysOf("paced"), "pace=sleep pace#1=sleep signal=event"; got != want {
		t.Fatalf("paced: steps %s, want %s", got, want)
	}
	fewer.Store(true)
	must(t, e.SendEvent(waitCtx(t), "paced", "go", 7))
	var held *runtime.Hold
	eventually(t, "paced is held", func() bool {
		info, err := e.Get(waitCtx(t), "paced")
		must(t, err)
		if info.Status.Finished() {
			t.Fatalf("paced: %s (%v), want it held: the replay reached the wait after one sleep, the run after two", info.Status, info.Err)
		}
		held = info.Hold
		return held != nil
	})
	if held.Recorded != "pace#1" || !strings.Contains(held.Reason, "after pace 2 times") {
		t.Fatalf("paced: held %+v, want it to name pace#1, the second sleep the run recorded", *held)
	}
}

// ErrDuplicateStep names the fix that suits the call: a step marked
// autoversion, a child call its own name, and a sleep a name no
// call of another kind uses.
func TestDuplicateKeyHints(t *testing.T) {
	t.Parallel()
	f := setup(t)
	e, _ := f.engine(5*time.Second, func(e *runtime.Engine) {
		must(t, runtime.Register(e, "kid", func(c *runtime.WorkflowContext, n int) (int, error) { return n, nil }))
		must(t, runtime.Register(e, "step", func(c *runtime.WorkflowContext, _ int) (int, error) {
			for range 2 {
				if err := runtime.Do(c, "once@v1", runtime.StepOptions{}, func(runtime.StepContext) error { return nil }); err != nil {
					return 0, err
				}
			}
			return 0, nil
		}))
		must(t, runtime.Register(e, "child", func(c *runtime.WorkflowContext, _ int) (int, error) {
			for i := range 2 {
				if _, err := runtime.CallChild[int](c, "kid", "kid", i); err != nil {
					return 0, err
				}
			}
			return 0, nil
		}))
		must(t, runtime.Register(e, "sleep", func(c *runtime.WorkflowContext, _ int) (int, error) {
			// The timer takes nap#0 and nap#1; the second sleep's key is
			// nap#1.
			c.Timer("nap", time.Millisecond)
			c.Timer("nap", time.Millisecond)
			for range 2 {
				if err := c.Sleep("nap", time.Millisecond); err != nil {
					return 0, err
				}
			}
			return 0, nil
		}))
		must(t, runtime.Register(e, "collide", func(c *runtime.WorkflowContext, _ int) (int, error) {
			if err := c.Sleep("ping#0", time.Millisecond); err == nil {
				return 0, errors.New("a sleep named with '#' was accepted")
			}
			if err := runtime.Do(c, "ping", runtime.StepOptions{}, func(runtime.StepContext) error { return nil }); err != nil {
				return 0, err
			}
			if err := c.Sleep("ping", time.Millisecond); err != nil {
				return 0, err
			}
			return 0, nil
		}))
	})
	start(t, e)
	for wf, hint := range map[string]string{
		"step":    `"once@v1" is called more than once in run step-run; mark the step autoversion`,
		"child":   `"kid" names more than one child call in run child-run; give each call its own name`,
		"sleep":   `the sleep's key "nap#1" is used already in run sleep-run by a call of another kind; give the sleep a name of its own`,
		"collide": `the sleep's key "ping" is used already in run collide-run by a call of another kind; give the sleep a name of its own`,
	} {
		run, err := runtime.Start[int, int](waitCtx(t), e, wf, 0, runtime.WithID(wf+"-run"))
		must(t, err)
		_, err = run.Result(waitCtx(t))
		if !errors.Is(err, runtime.ErrDuplicateStep) || !strings.Contains(err.Error(), hint) {
			t.Errorf("%s: %v, want ErrDuplicateStep saying %s", wf, err, hint)
		}
	}
}

// A future that loses a select to a timer, and is selected again beside
// the next timer, waits again: the reminder loop sends reminders until the
// approval comes, which the future returns once.
func TestReleasedFutureSelectedAgainWaitsAgain(t *testing.T) {
	t.Parallel()
	f := setup(t)
	var reminders atomic.Int32
	e, _ := f.engine(5*time.Second, func(e *runtime.Engine) {
		must(t, runtime.Register(e, "remind", func(c *runtime.WorkflowContext, _ int) (string, error) {
			approval := runtime.OnEvent[string](c, "approval", "approvals")
			for {
				i, err := runtime.Select(c, "wait", approval, c.Timer("remind", 20*time.Millisecond))
				if err != nil {
					return "", err
				}
				if i == 0 {
					return approval.Await()
				}
				if err := runtime.Do(c, "reminder@v1", runtime.StepOptions{Autoversion: true}, func(runtime.StepContext) error {
					reminders.Add(1)
					return nil
				}); err != nil {
					return "", err
				}
			}
		}))
	})
	start(t, e)
	run, err := runtime.Start[int, string](waitCtx(t), e, "remind", 0, runtime.WithID("r1"))
	must(t, err)
	eventually(t, "two reminders sent", func() bool { return reminders.Load() >= 2 })
	must(t, e.SendEvent(waitCtx(t), "r1", "approvals", "yes"))
	out, err := run.Result(waitCtx(t))
	must(t, err)
	if out != "yes" {
		t.Fatalf("result %q, want yes", out)
	}
	steps, err := e.ListSteps(waitCtx(t), "r1", 0)
	must(t, err)
	var approvals int
	for _, s := range steps {
		if s.Kind == runtime.KindEvent {
			approvals++
			if s.Key != "approval#0" {
				t.Fatalf("the approval was delivered under %s, want the future's own key approval#0", s.Key)
			}
		}
	}
	if approvals != 1 {
		t.Fatalf("%d event checkpoints, want the approval's one", approvals)
	}
}
