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

func TestDuplicateStepIsAnError(t *testing.T) {
	t.Parallel()
	f := setup(t)
	e, _ := f.engine(5*time.Second, func(e *runtime.Engine) {
		must(t, runtime.Register(e, "dup", func(c *runtime.WorkflowContext, _ int) (int, error) {
			for range 2 {
				if _, err := runtime.Step(c, "once@v1", runtime.StepOptions{}, func(runtime.StepContext) (int, error) { return 1, nil }); err != nil {
					return 0, err
				}
			}
			return 0, nil
		}))
	})
	start(t, e)
	run, err := runtime.Start[int, int](waitCtx(t), e, "dup", 0)
	must(t, err)
	_, err = run.Result(waitCtx(t))
	if !errors.Is(err, runtime.ErrDuplicateStep) || !strings.Contains(err.Error(), "once@v1") {
		t.Fatalf("err %v, want ErrDuplicateStep naming the key", err)
	}
}

// Pause takes effect at the next step boundary and survives an engine
// restart; Resume lets the run finish.
func TestPauseAtStepBoundarySurvivesRestart(t *testing.T) {
	t.Parallel()
	f := setup(t)
	release := make(chan struct{})
	inStep := make(chan struct{}, 1)
	var second atomic.Int64
	register := func(e *runtime.Engine) {
		must(t, runtime.Register(e, "pausable", func(c *runtime.WorkflowContext, _ int) (string, error) {
			if err := runtime.Do(c, "first@v1", runtime.StepOptions{}, func(runtime.StepContext) error {
				select {
				case inStep <- struct{}{}:
				default:
				}
				<-release
				return nil
			}); err != nil {
				return "", err
			}
			return runtime.Step(c, "second@v1", runtime.StepOptions{}, func(runtime.StepContext) (string, error) {
				second.Add(1)
				return "done", nil
			})
		}))
	}
	a, _ := f.engine(5*time.Second, register)
	stopA := start(t, a)
	run, err := runtime.Start[int, string](waitCtx(t), a, "pausable", 0)
	must(t, err)
	<-inStep
	must(t, run.Pause(waitCtx(t)))
	info, err := run.Info(waitCtx(t))
	must(t, err)
	if info.Status != runtime.StatusRunning || !info.PauseRequested {
		t.Fatalf("status %s pauseRequested %v, want running with a pause requested", info.Status, info.PauseRequested)
	}
	close(release)
	eventually(t, "run pauses", func() bool { return status(t, a, run.ID()) == runtime.StatusPaused })
	stopA()
	must(t, a.Close())

	b, probeB := f.engine(5*time.Second, register)
	start(t, b)
	eventually(t, "new engine polls", func() bool { return probeB.claims.Load() >= 5 })
	if st := status(t, b, run.ID()); st != runtime.StatusPaused || second.Load() != 0 {
		t.Fatalf("after restart: status %s, second step ran %d times; want paused, 0", st, second.Load())
	}
	must(t, b.Resume(waitCtx(t), run.ID()))
	got, err := mustGet[string](t, b, "pausable", run.ID()).Result(waitCtx(t))
	must(t, err)
	if got != "done" || second.Load() != 1 {
		t.Fatalf("result %q, second ran %d times", got, second.Load())
	}
	if err := b.Resume(waitCtx(t), run.ID()); !errors.Is(err, runtime.ErrInvalidState) {
		t.Fatalf("resume of a finished run: %v, want ErrInvalidState", err)
	}
	if err := b.Pause(waitCtx(t), run.ID()); !errors.Is(err, runtime.ErrInvalidState) {
		t.Fatalf("pause of a finished run: %v, want ErrInvalidState", err)
	}
}

// Terminate cancels the running step's context and no later write lands.
func TestTerminateCancelsStep(t *testing.T) {
	t.Parallel()
	f := setup(t)
	inStep := make(chan struct{})
	causes := make(chan error, 1)
	e, probe := f.engine(5*time.Second, func(e *runtime.Engine) {
		must(t, runtime.Register(e, "forever", func(c *runtime.WorkflowContext, _ int) (int, error) {
			return runtime.Step(c, "block@v1", runtime.StepOptions{Retries: 5}, func(sc runtime.StepContext) (int, error) {
				close(inStep)
				<-sc.Done()
				causes <- context.Cause(sc)
				return 0, sc.Err()
			})
		}))
	})
	start(t, e)
	run, err := runtime.Start[int, int](waitCtx(t), e, "forever", 0)
	must(t, err)
	<-inStep
	must(t, run.Terminate(waitCtx(t), "operator said so"))
	if cause := <-causes; !errors.Is(cause, runtime.ErrTerminated) {
		t.Fatalf("step context cause %v, want ErrTerminated", cause)
	}
	_, err = run.Result(waitCtx(t))
	if !errors.Is(err, runtime.ErrTerminated) || !strings.Contains(err.Error(), "operator said so") {
		t.Fatalf("result err %v", err)
	}
	// Let the worker finish with the run, then check nothing landed.
	eventually(t, "worker lets go", func() bool { return probe.claims.Load() > 3 })
	for _, c := range probe.checkpointCalls() {
		if c.err == nil {
			t.Fatalf("checkpoint %q landed after terminate", c.key)
		}
	}
	steps, err := e.ListSteps(waitCtx(t), run.ID(), 0)
	must(t, err)
	if len(steps) != 0 {
		t.Fatalf("steps after terminate: %+v", steps)
	}
	if err := run.Terminate(waitCtx(t), "again"); !errors.Is(err, runtime.ErrInvalidState) {
		t.Fatalf("second terminate: %v, want ErrInvalidState", err)
	}
}

// Restart re-runs a finished run from the top with the same ID and input.
func TestRestartRunsFromTop(t *testing.T) {
	t.Parallel()
	f := setup(t)
	var mu sync.Mutex
	var inputs []string
	e, _ := f.engine(5*time.Second, func(e *runtime.Engine) {
		must(t, runtime.Register(e, "again", func(c *runtime.WorkflowContext, in string) (int, error) {
			return runtime.Step(c, "note@v1", runtime.StepOptions{}, func(sc runtime.StepContext) (int, error) {
				mu.Lock()
				defer mu.Unlock()
				inputs = append(inputs, sc.RunID()+":"+in)
				return len(inputs), nil
			})
		}))
	})
	start(t, e)
	run, err := runtime.Start[string, int](waitCtx(t), e, "again", "x", runtime.WithID("order-1"))
	must(t, err)
	first, err := run.Result(waitCtx(t))
	must(t, err)
	must(t, run.Restart(waitCtx(t)))
	eventually(t, "restarted run finishes again", func() bool {
		info, err := run.Info(context.Background())
		return err == nil && info.Status == runtime.StatusComplete && string(info.Output) == "2"
	})
	second, err := run.Result(waitCtx(t))
	must(t, err)
	if first != 1 || second != 2 || len(inputs) != 2 || inputs[0] != "order-1:x" || inputs[1] != "order-1:x" {
		t.Fatalf("first %d second %d inputs %q", first, second, inputs)
	}
}

// StartBatch starts many runs in one call; IDs that exist return the existing
// runs; starting one ID from many goroutines creates one run.
func TestStartBatchAndIdempotentIDs(t *testing.T) {
	t.Parallel()
	f := setup(t)
	var executions atomic.Int64
	e, _ := f.engine(5*time.Second, func(e *runtime.Engine) {
		must(t, runtime.Register(e, "double", func(c *runtime.WorkflowContext, in int) (int, error) {
			return runtime.Step(c, "double@v1", runtime.StepOptions{}, func(runtime.StepContext) (int, error) {
				executions.Add(1)
				return in * 2, nil
			})
		}))
	})
	ctx := waitCtx(t)
	var items []runtime.BatchItem[int]
	for i := range 50 {
		items = append(items, runtime.BatchItem[int]{ID: fmt.Sprintf("b-%02d", i), Input: i})
	}
	items = append(items, runtime.BatchItem[int]{Input: 100}) // generated ID
	runs, err := runtime.StartBatch[int, int](ctx, e, "double", items)
	must(t, err)
	// Starting the same IDs again, concurrently, creates nothing new.
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			again, err := runtime.StartBatch[int, int](ctx, e, "double", items[:50])
			if err != nil {
				t.Error(err)
				return
			}
			for i, r := range again {
				if r.ID() != runs[i].ID() {
					t.Errorf("restart of %s returned %s", runs[i].ID(), r.ID())
				}
			}
		})
	}
	wg.Wait()
	start(t, e)
	for i, r := range runs {
		got, err := r.Result(ctx)
		must(t, err)
		if want := items[i].Input * 2; got != want {
			t.Fatalf("run %s: %d, want %d", r.ID(), got, want)
		}
	}
	if n := executions.Load(); n != 51 {
		t.Fatalf("%d executions, want 51", n)
	}
	list, next, err := e.ListRuns(ctx, runtime.ListRunsQuery{Workflow: "double", Limit: 20})
	must(t, err)
	total := len(list)
	for next != "" {
		list, next, err = e.ListRuns(ctx, runtime.ListRunsQuery{Workflow: "double", Limit: 20, After: next})
		must(t, err)
		total += len(list)
	}
	if total != 51 {
		t.Fatalf("%d runs listed, want 51", total)
	}
}

// A parent calling a child resumes when the child ends; replays of the parent
// never start the child twice.
func TestChildWorkflow(t *testing.T) {
	t.Parallel()
	f := setup(t)
	var childRuns, parentStarts atomic.Int64
	e, _ := f.engine(5*time.Second, func(e *runtime.Engine) {
		must(t, runtime.Register(e, "child.square", func(c *runtime.WorkflowContext, in int) (int, error) {
			return runtime.Step(c, "square@v1", runtime.StepOptions{}, func(runtime.StepContext) (int, error) {
				childRuns.Add(1)
				return in * in, nil
			})
		}))
		must(t, runtime.Register(e, "parent.sum", func(c *runtime.WorkflowContext, in int) (int, error) {
			parentStarts.Add(1)
			if err := c.Sleep("before", 10*time.Millisecond); err != nil {
				return 0, err
			}
			sq, err := runtime.CallChild[int](c, "square", "child.square", in)
			if err != nil {
				return 0, err
			}
			if err := c.Sleep("after", 10*time.Millisecond); err != nil {
				return 0, err
			}
			failed, err := runtime.CallChild[int](c, "square-bad", "child.square", "not a number")
			if err == nil || !errors.Is(err, runtime.ErrDecode) {
				return 0, fmt.Errorf("child with bad input: %v, %v", failed, err)
			}
			return sq + 1, nil
		}))
	})
	start(t, e)
	run, err := runtime.Start[int, int](waitCtx(t), e, "parent.sum", 7)
	must(t, err)
	got, err := run.Result(waitCtx(t))
	must(t, err)
	if got != 50 {
		t.Fatalf("result %d, want 50", got)
	}
	if parentStarts.Load() < 4 {
		t.Fatalf("parent executed %d times; the test needs replays", parentStarts.Load())
	}
	if n := childRuns.Load(); n != 1 {
		t.Fatalf("child step ran %d times, want 1", n)
	}
	runs, _, err := e.ListRuns(waitCtx(t), runtime.ListRunsQuery{Workflow: "child.square"})
	must(t, err)
	if len(runs) != 2 || runs[0].ParentID != run.ID() {
		t.Fatalf("child runs %+v, want two children of %s", runs, run.ID())
	}
}

// A waited-for event that does not come times out with ErrEventTimeout, once,
// and the timeout is checkpointed: a later event does not re-arm the wait.
func TestEventTimeout(t *testing.T) {
	t.Parallel()
	f := setup(t)
	var waits atomic.Int64
	e, _ := f.engine(5*time.Second, func(e *runtime.Engine) {
		must(t, runtime.Register(e, "timeout", func(c *runtime.WorkflowContext, _ int) (string, error) {
			waits.Add(1)
			_, err := runtime.WaitForEvent[shipment](c, "ship", "never.comes", 30*time.Millisecond)
			if !errors.Is(err, runtime.ErrEventTimeout) {
				return "", fmt.Errorf("want a timeout, got %v", err)
			}
			if err := c.Sleep("linger", 30*time.Millisecond); err != nil {
				return "", err
			}
			return "timed out", nil
		}))
	})
	start(t, e)
	run, err := runtime.Start[int, string](waitCtx(t), e, "timeout", 0)
	must(t, err)
	got, err := run.Result(waitCtx(t))
	must(t, err)
	if got != "timed out" {
		t.Fatalf("result %q", got)
	}
	steps, err := e.ListSteps(waitCtx(t), run.ID(), 0)
	must(t, err)
	if len(steps) != 2 || !errors.Is(steps[0].Err, runtime.ErrEventTimeout) {
		t.Fatalf("steps %+v, want the timeout checkpoint then the sleep", steps)
	}
}

// An event sent before the run waits for it is kept and delivered.
func TestEarlyEventIsNotLost(t *testing.T) {
	t.Parallel()
	f := setup(t)
	e, _ := f.engine(5*time.Second, func(e *runtime.Engine) {
		must(t, runtime.Register(e, "late.waiter", func(c *runtime.WorkflowContext, _ int) (string, error) {
			if err := c.Sleep("first", 30*time.Millisecond); err != nil {
				return "", err
			}
			ev, err := runtime.WaitForEvent[shipment](c, "ship", "shipment.ready", time.Minute)
			return ev.Tracking, err
		}))
	})
	start(t, e)
	run, err := runtime.Start[int, string](waitCtx(t), e, "late.waiter", 0)
	must(t, err)
	must(t, e.SendEvent(waitCtx(t), run.ID(), "shipment.ready", shipment{Tracking: "early"}))
	got, err := run.Result(waitCtx(t))
	must(t, err)
	if got != "early" {
		t.Fatalf("result %q", got)
	}
}

// A panic in a step is a failed attempt with its stack, retried; the worker
// lives on.
func TestStepPanicIsAFailedAttempt(t *testing.T) {
	t.Parallel()
	f := setup(t)
	e, _ := f.engine(5*time.Second, func(e *runtime.Engine) {
		must(t, runtime.Register(e, "panicky", func(c *runtime.WorkflowContext, _ int) (int, error) {
			return runtime.Step(c, "boom@v1", runtime.StepOptions{Retries: 1, Backoff: time.Millisecond}, func(sc runtime.StepContext) (int, error) {
				if sc.Attempt() == 1 {
					var m map[string]int
					m["x"] = 1 // panics
				}
				return 5, nil
			})
		}))
	})
	start(t, e)
	run, err := runtime.Start[int, int](waitCtx(t), e, "panicky", 0)
	must(t, err)
	got, err := run.Result(waitCtx(t))
	must(t, err)
	steps, err := e.ListSteps(waitCtx(t), run.ID(), 0)
	must(t, err)
	if got != 5 || len(steps) != 1 || len(steps[0].Attempts) != 2 ||
		!strings.Contains(steps[0].Attempts[0].Error, "panicked") || !strings.Contains(steps[0].Attempts[0].Error, "goroutine") {
		t.Fatalf("result %d steps %+v, want a panicked first attempt with its stack", got, steps)
	}
}

// A step that exhausts its retries ends the run as errored, and a replay
// returns the same error.
func TestExhaustedRetriesErrorTheRun(t *testing.T) {
	t.Parallel()
	f := setup(t)
	var attempts atomic.Int64
	e, _ := f.engine(5*time.Second, func(e *runtime.Engine) {
		must(t, runtime.Register(e, "hopeless", func(c *runtime.WorkflowContext, _ int) (int, error) {
			return runtime.Step(c, "try@v1", runtime.StepOptions{Retries: 2, Backoff: time.Millisecond}, func(runtime.StepContext) (int, error) {
				attempts.Add(1)
				return 0, errors.New("still down")
			})
		}))
	})
	start(t, e)
	run, err := runtime.Start[int, int](waitCtx(t), e, "hopeless", 0)
	must(t, err)
	_, err = run.Result(waitCtx(t))
	if err == nil || err.Error() != "still down" {
		t.Fatalf("err %v", err)
	}
	if st := status(t, e, run.ID()); st != runtime.StatusErrored || attempts.Load() != 3 {
		t.Fatalf("status %s after %d attempts, want errored after 3", st, attempts.Load())
	}
}

// A step that completes while its engine shuts down keeps its result: the
// checkpoint is written before the run is released, so the next engine does
// not run the step again.
func TestShutdownKeepsACompletedStep(t *testing.T) {
	t.Parallel()
	f := setup(t)
	inStep := make(chan struct{}, 1)
	var firstRuns, secondRuns atomic.Int64
	register := func(e *runtime.Engine) {
		must(t, runtime.Register(e, "graceful", func(c *runtime.WorkflowContext, _ int) (int, error) {
			a, err := runtime.Step(c, "slow@v1", runtime.StepOptions{}, func(sc runtime.StepContext) (int, error) {
				if firstRuns.Add(1) == 1 {
					inStep <- struct{}{}
					<-sc.Done() // the engine is stopping; the step finishes its work anyway
				}
				return 20, nil
			})
			if err != nil {
				return 0, err
			}
			return runtime.Step(c, "next@v1", runtime.StepOptions{}, func(runtime.StepContext) (int, error) {
				secondRuns.Add(1)
				return a + 1, nil
			})
		}))
	}
	a, _ := f.engine(5*time.Second, register)
	stopA := start(t, a)
	run, err := runtime.Start[int, int](waitCtx(t), a, "graceful", 0)
	must(t, err)
	<-inStep
	stopA()
	if st := status(t, a, run.ID()); st != runtime.StatusQueued {
		t.Fatalf("after shutdown the run is %s, want queued (released)", st)
	}

	b, _ := f.engine(5*time.Second, register)
	start(t, b)
	got, err := mustGet[int](t, b, "graceful", run.ID()).Result(waitCtx(t))
	must(t, err)
	if got != 21 || firstRuns.Load() != 1 || secondRuns.Load() != 1 {
		t.Fatalf("result %d; slow step ran %d times, next %d; want 21, 1, 1", got, firstRuns.Load(), secondRuns.Load())
	}
}

// Stopping an engine lets running steps finish within Config.ShutdownGrace:
// a step that honours its context is not cut short, keeps its checkpoint,
// and the next engine does not run it again. Without a grace it is
// cancelled and runs again.
func TestShutdownGraceLetsStepsFinish(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		grace    time.Duration
		wantRuns int64
	}{{5 * time.Second, 1}, {-1, 2}} {
		t.Run(fmt.Sprintf("grace=%v", c.grace), func(t *testing.T) {
			t.Parallel()
			f := setup(t)
			inStep := make(chan struct{}, 2)
			var runs atomic.Int64
			register := func(e *runtime.Engine) {
				must(t, runtime.Register(e, "careful", func(wc *runtime.WorkflowContext, _ int) (int, error) {
					v, err := runtime.Step(wc, "work@v1", runtime.StepOptions{Retries: 3, Backoff: time.Millisecond}, func(sc runtime.StepContext) (int, error) {
						runs.Add(1)
						inStep <- struct{}{}
						select {
						case <-sc.Done(): // honours cancellation
							return 0, sc.Err()
						case <-time.After(200 * time.Millisecond):
							return 7, nil
						}
					})
					if err != nil {
						return 0, err
					}
					// The next step boundary hands the run back.
					return runtime.Step(wc, "after@v1", runtime.StepOptions{}, func(runtime.StepContext) (int, error) { return v, nil })
				}))
			}
			a, err := runtime.New(runtime.Config{Store: f.store, PollInterval: 5 * time.Millisecond, ShutdownGrace: c.grace})
			must(t, err)
			register(a)
			stopA := start(t, a)
			run, err := runtime.Start[int, int](waitCtx(t), a, "careful", 0)
			must(t, err)
			<-inStep
			stopA() // returns once the run is handed back
			if st := status(t, a, run.ID()); st != runtime.StatusQueued {
				t.Fatalf("after shutdown the run is %s, want queued", st)
			}
			b, _ := f.engine(5*time.Second, register)
			start(t, b)
			got, err := mustGet[int](t, b, "careful", run.ID()).Result(waitCtx(t))
			must(t, err)
			if got != 7 || runs.Load() != c.wantRuns {
				t.Fatalf("result %d after %d executions of the step, want 7 after %d", got, runs.Load(), c.wantRuns)
			}
		})
	}
}
