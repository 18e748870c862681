package runtime

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/stemflow/stem/storage"
)

// Store returns the engine's store, for packages that extend the engine
// (the schedule package keeps its records there).
func (e *Engine) Store() storage.Store { return e.store }

// Now tells the time on the engine's clock (Config.Clock).
func (e *Engine) Now() time.Time { return e.clock.Now() }

// Logger returns the engine's logger (Config.Logger).
func (e *Engine) Logger() *slog.Logger { return e.log }

// Ready tells the engine's workers that runs may be ready to claim, for
// packages that create runs through the store directly (a schedule's
// ticks): they claim at once instead of at their next poll.
func (e *Engine) Ready() { e.signal() }

// Starting runs create, which creates runs through the store by other
// means than CreateRuns (a schedule's ticks, through WriteSchedule),
// inside the engine's Hooks.Start, so those runs are traced and counted
// as other starts are: the hooks may add to runs' Headers before create
// is called with them, and create returns the store's results in their
// order. Without a start hook it calls create at once.
func (e *Engine) Starting(ctx context.Context, runs []storage.NewRun, create func(ctx context.Context, runs []storage.NewRun) ([]storage.CreateResult, error)) ([]storage.CreateResult, error) {
	return e.starting(ctx, "", runs, create)
}

// starting is Starting, for runs that parentID (or no run, "") starts.
func (e *Engine) starting(ctx context.Context, parentID string, runs []storage.NewRun, create func(ctx context.Context, runs []storage.NewRun) ([]storage.CreateResult, error)) ([]storage.CreateResult, error) {
	h := e.hooks.Start
	if h == nil || len(runs) == 0 {
		return create(ctx, runs)
	}
	s := &HookStart{Workflow: runs[0].Workflow, ParentID: parentID, Runs: runs}
	err := h(ctx, s, func(ctx context.Context) error {
		res, err := create(ctx, s.Runs)
		s.Results = res
		return err
	})
	if err == nil && len(s.Results) != len(runs) {
		err = fmt.Errorf("%w: a start hook returned without creating the runs", ErrInvalidState)
	}
	return s.Results, err
}

// StartDefaults gives a run created later than it was prepared (a
// schedule's tick) what a start now gives it, when the workflow is
// registered on this engine: its timeout=, counted from now, when the run
// has no deadline, and the newest registered version when it has none.
func (e *Engine) StartDefaults(r *storage.NewRun) {
	def, err := e.registered(r.Workflow)
	if err != nil {
		return
	}
	if r.Deadline == nil {
		r.Deadline = def.deadlineFrom(e.clock.Now(), time.Time{})
	}
	if r.Version == 0 {
		r.Version = def.version
	}
}

// StepsRunning reports how many step functions are executing on the engine
// now, abandoned ones (past their timeout) included: a test kit that moves
// a virtual clock does so only while none is.
func (e *Engine) StepsRunning() int { return int(e.stepsRunning.Load()) }

// ExecutionsWorking reports how many executions of claimed runs are at
// work on the engine now: not parked, and not waiting for a retry's time
// or on step futures (which StepsRunning counts while their functions
// run). A test kit that moves a virtual clock lets them finish what they
// do at the time they read first.
func (e *Engine) ExecutionsWorking() int { return int(e.working.Load()) }

// OverrideStep makes the engine call fn instead of the function of the step
// keyed key (its name@vN, without an autoversion iteration), for tests:
// generated mocks call it with fn typed as the step's function. nil removes
// the override. The step keeps its key, options, retries and checkpoints:
// only what runs in an attempt changes.
func OverrideStep(e *Engine, key string, fn any) {
	if fn == nil {
		e.overrides.Delete(key)
		return
	}
	e.overrides.Store(key, fn)
	e.overridden.Store(true)
}

// StepOverride returns the function OverrideStep put in place of the step
// keyed key on the run's engine, when there is one of type F. Generated
// step calls ask it before calling the step's own function.
func StepOverride[F any](c *WorkflowContext, key string) (F, bool) {
	e := c.exec.engine
	if !e.overridden.Load() {
		var zero F
		return zero, false
	}
	v, ok := e.overrides.Load(key)
	if !ok {
		var zero F
		return zero, false
	}
	f, ok := v.(F)
	return f, ok
}
