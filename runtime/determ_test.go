package runtime_test

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/stores/memstore"
)

// detValues is what one invocation of the helpers' workflow saw.
type detValues struct {
	Now0, Now1 time.Time
	Random     uint64
	UUID       string
	Side       int
	SideErr    string
}

// The helpers record their values: the workflow runs from the top again
// after its sleep, and sees what it saw the first time; SideEffect's
// function runs once, also when it failed.
func TestDeterministicHelpersReplay(t *testing.T) {
	t.Parallel()
	f := setup(t)
	var mu sync.Mutex
	var seen []detValues
	var sideRuns, failRuns atomic.Int32
	e, _ := f.engine(5*time.Second, func(e *runtime.Engine) {
		must(t, runtime.Register(e, "det", func(c *runtime.WorkflowContext, _ int) (detValues, error) {
			var v detValues
			v.Now0 = c.Now()
			v.Random = c.Random()
			v.UUID = c.UUID()
			var err error
			v.Side, err = runtime.SideEffect(c, "side", func() (int, error) {
				return int(sideRuns.Add(1)) * 7, nil
			})
			if err != nil {
				return v, err
			}
			_, err = runtime.SideEffect(c, "fail", func() (int, error) {
				failRuns.Add(1)
				return 0, errors.New("no luck")
			})
			if err != nil {
				v.SideErr = err.Error()
			}
			v.Now1 = c.Now()
			mu.Lock()
			seen = append(seen, v)
			mu.Unlock()
			if err := c.Sleep("nap", 20*time.Millisecond); err != nil {
				return v, err
			}
			return v, nil
		}))
	})
	start(t, e)
	run, err := runtime.Start[int, detValues](waitCtx(t), e, "det", 0, runtime.WithID("d1"))
	must(t, err)
	out, err := run.Result(waitCtx(t))
	must(t, err)
	mu.Lock()
	defer mu.Unlock()
	if len(seen) < 2 {
		t.Fatalf("the workflow ran %d times, want at least 2", len(seen))
	}
	for i, v := range seen {
		if !v.Now0.Equal(out.Now0) || !v.Now1.Equal(out.Now1) || v.Random != out.Random || v.UUID != out.UUID || v.Side != out.Side || v.SideErr != out.SideErr {
			t.Errorf("invocation %d saw %+v, the result is %+v", i, v, out)
		}
	}
	if n := sideRuns.Load(); n != 1 || out.Side != 7 {
		t.Errorf("side effect ran %d times and gave %d, want once and 7", n, out.Side)
	}
	if n := failRuns.Load(); n != 1 || !strings.Contains(out.SideErr, "no luck") {
		t.Errorf("failing side effect ran %d times and gave %q, want once and its error", n, out.SideErr)
	}
	if !regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`).MatchString(out.UUID) {
		t.Errorf("UUID %q is not a version 4 UUID", out.UUID)
	}
	if out.Now1.Before(out.Now0) || out.Now0.IsZero() {
		t.Errorf("times %v then %v", out.Now0, out.Now1)
	}
	steps, err := e.ListSteps(waitCtx(t), "d1", 0)
	must(t, err)
	var keys []string
	for _, s := range steps {
		keys = append(keys, s.Key)
	}
	want := "#now#0 #random#0 #uuid#0 #side/side#0 #side/fail#0 #now#1 nap"
	if got := strings.Join(keys, " "); got != want {
		t.Errorf("steps %s, want %s", got, want)
	}
	for _, k := range keys {
		if runtime.IsHelperKey(k) == (k == "nap") {
			t.Errorf("IsHelperKey(%q) = %v", k, !(k == "nap"))
		}
	}
}

// A side effect's name follows the rules of a step's key.
func TestSideEffectNameChecked(t *testing.T) {
	t.Parallel()
	f := setup(t)
	e, _ := f.engine(5*time.Second, func(e *runtime.Engine) {
		must(t, runtime.Register(e, "bad", func(c *runtime.WorkflowContext, _ int) (string, error) {
			_, err := runtime.SideEffect(c, "a#b", func() (int, error) { return 1, nil })
			if err == nil {
				return "", errors.New("no error")
			}
			return err.Error(), nil
		}))
	})
	start(t, e)
	run, err := runtime.Start[int, string](waitCtx(t), e, "bad", 0)
	must(t, err)
	out, err := run.Result(waitCtx(t))
	must(t, err)
	if !strings.Contains(out, "'#'") {
		t.Fatalf("error %q does not name the reserved character", out)
	}
}

// A helper's call is part of the run's history like a step: a build that
// drops a recorded Now before the run's wait holds the run, naming the
// recorded call, instead of handing the code another value.
func TestHelperCallsAreHistory(t *testing.T) {
	t.Parallel()
	f := setup(t)
	var dropped atomic.Bool
	e, _ := f.engine(5*time.Second, func(e *runtime.Engine) {
		must(t, runtime.Register(e, "stamped", func(c *runtime.WorkflowContext, _ int) (int, error) {
			if !dropped.Load() {
				_ = c.Now()
			}
			return runtime.WaitForEvent[int](c, "signal", "go", 0)
		}))
	})
	start(t, e)
	_, err := runtime.Start[int, int](waitCtx(t), e, "stamped", 0, runtime.WithID("s1"))
	must(t, err)
	eventually(t, "s1 waits", func() bool {
		info, err := e.Get(waitCtx(t), "s1")
		must(t, err)
		return info.Status == runtime.StatusWaiting && info.WaitingFor == "go"
	})
	dropped.Store(true)
	must(t, e.SendEvent(waitCtx(t), "s1", "go", 7))
	var held *runtime.Hold
	eventually(t, "s1 is held", func() bool {
		info, err := e.Get(waitCtx(t), "s1")
		must(t, err)
		if info.Status.Finished() {
			t.Fatalf("s1: %s (%v), want it held: the code no longer calls the Now the run recorded", info.Status, info.Err)
		}
		held = info.Hold
		return held != nil
	})
	if held.Recorded != "#now#0" {
		t.Fatalf("held %+v, want it to name #now#0", *held)
	}
}

// With Config.RandomSeed, runs of one ID draw the same values on separate
// stores; without it, they do not.
func TestRandomSeed(t *testing.T) {
	t.Parallel()
	draw := func(seed []byte) string {
		st := memstore.New(memstore.Options{})
		defer st.Close()
		e, err := runtime.New(runtime.Config{Store: st, PollInterval: 5 * time.Millisecond, RandomSeed: seed})
		must(t, err)
		defer e.Close()
		must(t, runtime.Register(e, "draw", func(c *runtime.WorkflowContext, _ int) (string, error) {
			return fmt.Sprint(c.UUID(), c.Random(), c.Random()), nil
		}))
		stop := start(t, e)
		defer stop()
		run, err := runtime.Start[int, string](waitCtx(t), e, "draw", 0, runtime.WithID("same"))
		must(t, err)
		out, err := run.Result(waitCtx(t))
		must(t, err)
		return out
	}
	a, b := draw([]byte("s")), draw([]byte("s"))
	if a != b {
		t.Errorf("seeded runs drew %q and %q", a, b)
	}
	if c := draw([]byte("t")); c == a {
		t.Errorf("another seed drew the same %q", c)
	}
	if c, d := draw(nil), draw(nil); c == d {
		t.Errorf("unseeded runs drew the same %q", c)
	}
}
