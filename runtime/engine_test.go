package runtime_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stemflow/stem/runtime"
)

// A step runs past most of its lease; its checkpoint extends the lease, so a
// second worker polling meanwhile never gets the run, and each step runs
// once.
func TestCheckpointExtendsLease(t *testing.T) {
	t.Parallel()
	f, clock := setupClock(t)
	const lease = 10 * time.Second
	var runsOfStep [2]atomic.Int64
	var probes [2]*probeStore
	register := func(me int) func(e *runtime.Engine) {
		return func(e *runtime.Engine) {
			must(t, runtime.Register(e, "lease.long", func(c *runtime.WorkflowContext, in int) (int, error) {
				for i := range 2 {
					_, err := runtime.Step(c, fmt.Sprintf("long%d@v1", i), runtime.StepOptions{}, func(sc runtime.StepContext) (int, error) {
						runsOfStep[i].Add(1)
						clock.Advance(lease * 8 / 10) // most of the lease passes
						// The other worker polls a few times meanwhile.
						other := probes[1-me]
						n := other.claims.Load()
						eventually(t, "other worker polls", func() bool { return other.claims.Load() >= n+3 })
						return i, nil
					})
					if err != nil {
						return 0, err
					}
				}
				return in, nil
			}))
		}
	}
	a, pa := f.engine(lease, register(0))
	b, pb := f.engine(lease, register(1))
	probes = [2]*probeStore{pa, pb}
	run, err := runtime.Start[int, int](waitCtx(t), a, "lease.long", 7)
	must(t, err)
	start(t, a)
	start(t, b)
	got, err := run.Result(waitCtx(t))
	must(t, err)
	if got != 7 {
		t.Fatalf("result %d, want 7", got)
	}
	for i := range runsOfStep {
		if n := runsOfStep[i].Load(); n != 1 {
			t.Errorf("step %d ran %d times, want 1: the checkpoint did not extend the lease", i, n)
		}
	}
}

// Sleep(200ms) suspends exactly once; after the wake time the run goes on
// without sleeping again, reading the persisted wake time.
func TestSleepResumeUsesPersistedWakeTime(t *testing.T) {
	t.Parallel()
	f := setup(t)
	var wakes []time.Time
	var mu sync.Mutex
	e, probe := f.engine(5*time.Second, func(e *runtime.Engine) {
		must(t, runtime.Register(e, "sleep.once", func(c *runtime.WorkflowContext, _ struct{}) (string, error) {
			if err := c.Sleep("nap", 200*time.Millisecond); err != nil {
				return "", err
			}
			return runtime.Step(c, "after@v1", runtime.StepOptions{}, func(sc runtime.StepContext) (string, error) {
				mu.Lock()
				wakes = append(wakes, time.Now())
				mu.Unlock()
				return "awake", nil
			})
		}))
	})
	start(t, e)
	began := time.Now()
	run, err := runtime.Start[struct{}, string](waitCtx(t), e, "sleep.once", struct{}{})
	must(t, err)
	got, err := run.Result(waitCtx(t))
	must(t, err)
	if got != "awake" {
		t.Fatalf("result %q", got)
	}
	if n := probe.suspends.Load(); n != 1 {
		t.Fatalf("%d suspensions, want exactly 1", n)
	}
	if len(wakes) != 1 || wakes[0].Sub(began) < 200*time.Millisecond {
		t.Fatalf("step after the sleep ran at %v (start %v), want once, at least 200ms after start", wakes, began)
	}
	steps, err := e.ListSteps(waitCtx(t), run.ID(), 0)
	must(t, err)
	if len(steps) != 2 || steps[0].Key != "nap" || steps[0].Kind != runtime.KindSleep {
		t.Fatalf("steps %+v, want the sleep checkpoint then the step", steps)
	}
	var wake time.Time
	must(t, jsonUnmarshal(steps[0].Output, &wake))
	if d := wake.Sub(began); d < 200*time.Millisecond || d > 10*time.Second {
		t.Fatalf("persisted wake time %v is %v after start", wake, d)
	}
}

type shipment struct {
	Tracking string `json:"tracking"`
}

// A run waits on shipment.ready; an emit resumes it; its worker dies right
// after the wait returns, before the next checkpoint; a new worker finishes.
// Each execution saw the payload once, from one stored checkpoint.
func TestAwaitedEventPayloadReplayedOnce(t *testing.T) {
	t.Parallel()
	f := setup(t)
	const lease = 300 * time.Millisecond
	var seen sync.Map // worker -> []payload
	killA := make(chan struct{})
	var aResumed atomic.Bool
	register := func(worker string, block bool) func(e *runtime.Engine) {
		return func(e *runtime.Engine) {
			must(t, runtime.Register(e, "ship.wait", func(c *runtime.WorkflowContext, _ int) (string, error) {
				ev, err := runtime.WaitForEvent[shipment](c, "ship", "shipment.ready", 0)
				if err != nil {
					return "", err
				}
				v, _ := seen.LoadOrStore(worker, &[]string{})
				*(v.(*[]string)) = append(*(v.(*[]string)), ev.Tracking)
				if block {
					aResumed.Store(true)
					<-killA // the worker dies here, before the next checkpoint
				}
				return runtime.Step(c, "use@v1", runtime.StepOptions{}, func(sc runtime.StepContext) (string, error) {
					return "used " + ev.Tracking, nil
				})
			}))
		}
	}
	a, probeA := f.engine(lease, register("a", true))
	start(t, a)
	run, err := runtime.Start[int, string](waitCtx(t), a, "ship.wait", 1)
	must(t, err)
	eventually(t, "run waits", func() bool { return status(t, a, run.ID()) == runtime.StatusWaiting })
	n, err := a.Emit(waitCtx(t), "shipment.ready", shipment{Tracking: "T-1"})
	must(t, err)
	if n != 1 {
		t.Fatalf("emit reached %d runs, want 1", n)
	}
	eventually(t, "worker a resumes", aResumed.Load)
	probeA.kill()
	close(killA)

	b, _ := f.engine(lease, register("b", false))
	start(t, b)
	got, err := run.Result(waitCtx(t))
	must(t, err)
	if got != "used T-1" {
		t.Fatalf("result %q", got)
	}
	for _, w := range []string{"a", "b"} {
		v, ok := seen.Load(w)
		if !ok || !slices.Equal(*(v.(*[]string)), []string{"T-1"}) {
			t.Fatalf("worker %s saw %v, want the payload exactly once", w, v)
		}
	}
	steps, err := b.ListSteps(waitCtx(t), run.ID(), 0)
	must(t, err)
	var events int
	for _, s := range steps {
		if s.Kind == runtime.KindEvent {
			events++
			var p shipment
			must(t, jsonUnmarshal(s.Output, &p))
			if s.Key != "ship" || p.Tracking != "T-1" {
				t.Fatalf("event checkpoint %+v", s)
			}
		}
	}
	if events != 1 {
		t.Fatalf("%d event checkpoints, want 1", events)
	}
	// A second emit after the run finished reaches nobody.
	n, err = b.Emit(waitCtx(t), "shipment.ready", shipment{Tracking: "T-2"})
	must(t, err)
	if n != 0 {
		t.Fatalf("late emit reached %d runs", n)
	}
}

// A step fails twice then succeeds: the idempotency key is the same all three
// times, and differs per autoversion iteration.
func TestIdempotencyKeyStableAcrossRetries(t *testing.T) {
	t.Parallel()
	f := setup(t)
	var mu sync.Mutex
	var keys []string
	var iterKeys []string
	e, _ := f.engine(5*time.Second, func(e *runtime.Engine) {
		must(t, runtime.Register(e, "orders.charge", func(c *runtime.WorkflowContext, _ int) (int, error) {
			_, err := runtime.Step(c, "charge@v2", runtime.StepOptions{Retries: 3, Backoff: time.Millisecond}, func(sc runtime.StepContext) (int, error) {
				mu.Lock()
				keys = append(keys, sc.IdempotencyKey("payment"))
				mu.Unlock()
				if sc.Attempt() < 3 {
					return 0, errors.New("payment service unavailable")
				}
				return 1, nil
			})
			if err != nil {
				return 0, err
			}
			for range 3 {
				if err := runtime.Do(c, "pack@v1", runtime.StepOptions{Autoversion: true}, func(sc runtime.StepContext) error {
					mu.Lock()
					iterKeys = append(iterKeys, sc.IdempotencyKey(""))
					mu.Unlock()
					return nil
				}); err != nil {
					return 0, err
				}
			}
			return 0, nil
		}))
	})
	start(t, e)
	run, err := runtime.Start[int, int](waitCtx(t), e, "orders.charge", 0)
	must(t, err)
	_, err = run.Result(waitCtx(t))
	must(t, err)
	want := "orders.charge/" + run.ID() + "/charge@v2/payment"
	if len(keys) != 3 || keys[0] != want || keys[1] != want || keys[2] != want {
		t.Fatalf("keys %q, want %q three times", keys, want)
	}
	if got := runtime.IdempotencyKey("orders.charge", run.ID(), "charge@v2", "payment"); got != want {
		t.Fatalf("IdempotencyKey outside the run = %q, want %q", got, want)
	}
	wantIter := []string{
		"orders.charge/" + run.ID() + "/pack@v1#0",
		"orders.charge/" + run.ID() + "/pack@v1#1",
		"orders.charge/" + run.ID() + "/pack@v1#2",
	}
	if !slices.Equal(iterKeys, wantIter) {
		t.Fatalf("iteration keys %q, want %q", iterKeys, wantIter)
	}
	steps, err := e.ListSteps(waitCtx(t), run.ID(), 0)
	must(t, err)
	if len(steps[0].Attempts) != 3 || steps[0].Attempts[0].Error == "" || steps[0].Attempts[2].Error != "" {
		t.Fatalf("charge attempts %+v, want two failures then a success", steps[0].Attempts)
	}
}

func jsonUnmarshal(b []byte, v any) error {
	return json.Unmarshal(b, v)
}
