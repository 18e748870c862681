package stemtest_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/stemtest"
	"github.com/stemflow/stem/storage"
	"github.com/stemflow/stem/stores/memstore"
	"github.com/stemflow/stem/stores/sqlitestore"
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
	if got := ended(t, env, run.ID()); got < min || got > max {
		t.Errorf("virtual time %s, want between %s and %s", got, min, max)
	}
	if n := attempts.Load(); n != 6 {
		t.Errorf("%d attempts, want 6", n)
	}
	t.Logf("virtual time reached: %s (%s after the start), in %s of wall time", env.Now().Format(time.RFC3339), env.Elapsed(), took)
}

// fulfil is a small order workflow: three steps around a day's sleep.
func registerFulfil(e *runtime.Engine) error {
	step := func(c *runtime.WorkflowContext, key, out string) (string, error) {
		return runtime.Step(c, key, runtime.StepOptions{}, func(runtime.StepContext) (string, error) { return out, nil })
	}
	return runtime.Register(e, "fulfil", func(c *runtime.WorkflowContext, in string) (string, error) {
		a, err := step(c, "reserve@v1", "held "+in)
		if err != nil {
			return "", err
		}
		if err := c.Sleep("cool-off", 24*time.Hour); err != nil {
			return "", err
		}
		b, err := step(c, "charge@v1", "paid")
		if err != nil {
			return "", err
		}
		d, err := step(c, "ship@v1", "shipped")
		return a + ", " + b + ", " + d, err
	})
}

func TestCrashEveryStep(t *testing.T) {
	t.Parallel()
	stemtest.CrashEveryStep(t, registerFulfil, "fulfil", "order-7")
}

// calls counts the calls of the nondeterministic workflow's function in
// this process: what a workflow that keeps state outside its run sees.
var calls atomic.Int64

// registerFlaky registers a workflow that is not deterministic: the key of
// its second step depends on whether its function was called before in
// this process, so a replay after a crash takes another step.
func registerFlaky(e *runtime.Engine) error {
	return runtime.Register(e, "flaky", func(c *runtime.WorkflowContext, in string) (string, error) {
		n := calls.Add(1)
		a, err := runtime.Step(c, "first@v1", runtime.StepOptions{}, func(runtime.StepContext) (string, error) { return in, nil })
		if err != nil {
			return "", err
		}
		key := "first-call@v1"
		if n > 1 {
			key = "later-call@v1"
		}
		return runtime.Step(c, key, runtime.StepOptions{}, func(runtime.StepContext) (string, error) { return a + " " + key, nil })
	})
}

// TestCrashEveryStepCatchesNondeterminism runs the crash test of the
// nondeterministic workflow in a child process, where it must fail, naming
// the step after whose crash the run went otherwise.
func TestCrashEveryStepCatchesNondeterminism(t *testing.T) {
	if os.Getenv("STEMTEST_FLAKY") == "1" {
		stemtest.CrashEveryStep(t, registerFlaky, "flaky", "x")
		return
	}
	t.Parallel()
	cmd := exec.Command(os.Args[0], "-test.run", "^TestCrashEveryStepCatchesNondeterminism$", "-test.v")
	cmd.Env = append(os.Environ(), "STEMTEST_FLAKY=1")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("the crash test of a nondeterministic workflow passed:\n%s", out)
	}
	for _, want := range []string{
		"--- FAIL: TestCrashEveryStepCatchesNondeterminism/after_first@v1",
		`workflow flaky, killed after the checkpoint of step first@v1: the run ended with output "x later-call@v1", not output "x first-call@v1" as without the crash; its checkpoints differ from the run without the crash: missing [first-call@v1], new [later-call@v1]`,
		"--- FAIL: TestCrashEveryStepCatchesNondeterminism/after_first-call@v1",
		"workflow flaky ran otherwise than the first time, with the same input: it ended (output \"x later-call@v1\") without reaching step first-call@v1, which the first run took",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the failing crash test does not say %q:\n%s", want, out)
		}
	}
}

// A step that hangs is cut off by its timeout, and a delayed start waits,
// on the virtual clock.
func TestStepTimeoutAndDelayedStart(t *testing.T) {
	t.Parallel()
	env := stemtest.New(t, func(e *runtime.Engine) error {
		return runtime.Register(e, "hang", func(c *runtime.WorkflowContext, in string) (string, error) {
			return runtime.Step(c, "hang@v1", runtime.StepOptions{Timeout: 2 * time.Hour}, func(sc runtime.StepContext) (string, error) {
				<-sc.Done()
				return "", sc.Err()
			})
		})
	})
	wall := time.Now()
	run, err := runtime.Start[string, string](env.Context(), env.Engine, "hang", "x", runtime.WithDelay(10*24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	_, err = run.Result(env.Context())
	if !errors.Is(err, context.DeadlineExceeded) && (err == nil || !strings.Contains(err.Error(), "deadline exceeded")) {
		t.Fatalf("a step past its timeout: %v", err)
	}
	if got, want := ended(t, env, run.ID()), 10*24*time.Hour+2*time.Hour; got < want || got > want+time.Minute {
		t.Errorf("virtual time %s, want %s: ten days' delay and the step's two hours", got, want)
	}
	t.Logf("virtual time %s in %s", env.Elapsed(), time.Since(wall))
}

// The kit runs on a store the test names: here a SQLite file, judged on
// the virtual clock.
func TestVirtualTimeOnSQLite(t *testing.T) {
	t.Parallel()
	env := stemtest.New(t, func(e *runtime.Engine) error {
		return runtime.Register(e, "nap", func(c *runtime.WorkflowContext, in string) (string, error) {
			if err := c.Sleep("a week", 7*24*time.Hour); err != nil {
				return "", err
			}
			return runtime.Step(c, "wake@v1", runtime.StepOptions{}, func(runtime.StepContext) (string, error) { return "awake " + in, nil })
		})
	}, stemtest.WithStore(func(clock storage.Clock) storage.Store {
		st, err := sqlitestore.Open(filepath.Join(t.TempDir(), "stem.db"), sqlitestore.Options{Clock: clock})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}))
	run, err := runtime.Start[string, string](env.Context(), env.Engine, "nap", "x")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := run.Result(env.Context()); err != nil || out != "awake x" {
		t.Fatalf("result %q, %v", out, err)
	}
	if got := ended(t, env, run.ID()); got < 7*24*time.Hour || got > 7*24*time.Hour+time.Minute {
		t.Errorf("virtual time %s, want a week", got)
	}
}

// slowStore is a store whose checkpoints take real time, as a loaded
// disk's do.
type slowStore struct {
	*memstore.Store
	delay time.Duration
}

func (s slowStore) Checkpoint(ctx context.Context, req storage.CheckpointRequest) (storage.CheckpointResult, error) {
	time.Sleep(s.delay)
	return s.Store.Checkpoint(ctx, req)
}

// The clock does not run on to the next timer (a heartbeat's, a quarter of
// an hour on) while the engine is at work: a store call that takes longer
// than the kit's patience for a step, or workflow code between two steps
// that takes real time without reading the clock. The runs end at the
// virtual time they started.
func TestClockWaitsForWork(t *testing.T) {
	t.Parallel()
	two := func(c *runtime.WorkflowContext, pause time.Duration) (string, error) {
		if _, err := runtime.Step(c, "one@v1", runtime.StepOptions{}, func(runtime.StepContext) (int, error) { return 1, nil }); err != nil {
			return "", err
		}
		time.Sleep(pause) // the workflow computes, in real time
		return runtime.Step(c, "two@v1", runtime.StepOptions{}, func(runtime.StepContext) (string, error) { return "done", nil })
	}
	for _, tc := range []struct {
		name         string
		write, pause time.Duration
	}{
		{"slow checkpoints", 120 * time.Millisecond, 0},
		{"workflow code between steps", 0, 30 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env := stemtest.New(t, func(e *runtime.Engine) error {
				return runtime.Register(e, "two", func(c *runtime.WorkflowContext, _ string) (string, error) { return two(c, tc.pause) })
			}, stemtest.WithStore(func(clock storage.Clock) storage.Store {
				return slowStore{memstore.New(memstore.Options{Clock: clock}), tc.write}
			}))
			run, err := runtime.Start[string, string](env.Context(), env.Engine, "two", "x")
			if err != nil {
				t.Fatal(err)
			}
			if out, err := run.Result(env.Context()); err != nil || out != "done" {
				t.Fatalf("result %q, %v", out, err)
			}
			if got := ended(t, env, run.ID()); got != 0 {
				t.Errorf("the run ended %s of virtual time after it started, want 0: the clock moved while the engine was at work", got)
			}
		})
	}
}

// ended is how long after the start, in virtual time, the run ended, as
// the store recorded it. The clock may move on after that while the test
// reads the result, so the run's own end is what a test measures.
func ended(t *testing.T, env *stemtest.Env, runID string) time.Duration {
	t.Helper()
	info, err := env.Engine.Get(env.Context(), runID)
	if err != nil || info.EndedAt == nil {
		t.Fatalf("run %s: %+v, %v; want it ended", runID, info, err)
	}
	return info.EndedAt.Sub(stemtest.Epoch)
}

// registerSaga registers a transfer written as Go sagas are: each
// compensation deferred once its action succeeded, one keyed on a done
// flag and one on the named error, both across a park.
func registerSaga(e *runtime.Engine) error {
	return runtime.Register(e, "transfer", func(c *runtime.WorkflowContext, amount int) (out string, err error) {
		step := func(key string) error {
			return runtime.Do(c, key+"@v1", runtime.StepOptions{}, func(runtime.StepContext) error { return nil })
		}
		defer step("audit")
		done := false
		if err := step("debit"); err != nil {
			return "", err
		}
		defer func() {
			if !done {
				_ = step("refund-debit")
			}
		}()
		if err = step("credit"); err != nil {
			return "", err
		}
		defer func() {
			if err != nil {
				_ = step("refund-credit")
			}
		}()
		if err = c.Sleep("settle", time.Hour); err != nil {
			return "", err
		}
		if amount > 100 {
			return "", errors.New("over the limit")
		}
		done = true
		return "sent", nil
	})
}

// TestCrashEveryStepSaga: the crash test of a saga whose compensations
// are deferred across a park passes, approved and declined: no refund
// runs at the park, none twice, and none for a transfer that succeeds.
func TestCrashEveryStepSaga(t *testing.T) {
	t.Parallel()
	stemtest.CrashEveryStep(t, registerSaga, "transfer", 50)
	stemtest.CrashEveryStep(t, registerSaga, "transfer", 500)
}
