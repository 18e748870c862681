package runtime

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
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
// registered on this engine: its timeout=, counted from now (or from the
// run's StartAt, when it is delayed past now), when the run has no
// deadline, and the newest registered version when it has none.
func (e *Engine) StartDefaults(r *storage.NewRun) {
	def, err := e.registered(r.Workflow)
	if err != nil {
		return
	}
	if r.Deadline == nil {
		r.Deadline = def.deadlineFrom(startOf(r, e.clock.Now()), time.Time{})
	}
	if r.Version == 0 {
		r.Version = def.version
	}
}

// StartDefaultsFromCatalog is StartDefaults for runs of workflows this
// engine may not register (a schedule's ticks fired or triggered by an
// engine that does not run the workflow, such as the operator command's):
// a run of a registered workflow gets what StartDefaults gives it; a run
// of a workflow the store's catalog records gets the recorded timeout=,
// counted from now, when it has no deadline, and the recorded version
// when it has none, as StartJSON gives them. Either way the run gets the
// search attributes the workflow declares From its input (see
// WorkflowAttributes), under those it has already; a value of the wrong
// type is ErrInvalidArgument. The catalog is read once, and only when a
// run's workflow is not registered here; a run of a workflow it does not
// record either is left as it is.
func (e *Engine) StartDefaultsFromCatalog(ctx context.Context, runs []storage.NewRun) error {
	var cat queueCatalog
	for i := range runs {
		r := &runs[i]
		if def, err := e.registered(r.Workflow); err == nil {
			e.StartDefaults(r)
			if err := e.inputAttrsOf(r, def.attrs); err != nil {
				return err
			}
			continue
		}
		if err := cat.load(ctx, e); err != nil {
			return err
		}
		if w, ok := cat.workflows[r.Workflow]; ok {
			catalogDefaults(r, w, e.clock.Now())
			if err := e.inputAttrsOf(r, w.Attributes); err != nil {
				return err
			}
		}
	}
	return nil
}

// inputAttrsOf gives a run prepared earlier (a schedule's tick) the
// attributes decls take from its stored input, under those it has.
func (e *Engine) inputAttrsOf(r *storage.NewRun, decls []AttrDecl) error {
	if !slices.ContainsFunc(decls, func(d AttrDecl) bool { return d.From != "" }) {
		return nil
	}
	plain, err := e.payloads.raw("input of "+r.Workflow, r.Input)
	if err != nil {
		return err
	}
	from, err := inputAttrs(r.Workflow, decls, plain)
	if err != nil {
		return err
	}
	r.Attributes, err = storage.MergeAttrs(from, r.Attributes)
	return err
}

// catalogDefaults gives a run of a workflow known from the catalog only,
// started at now, what StartDefaults gives a run of a registered one: the
// workflow's timeout= when the run has no deadline, and its version when
// the run has none.
func catalogDefaults(r *storage.NewRun, w storage.WorkflowType, now time.Time) {
	if r.Deadline == nil && w.Timeout > 0 {
		d := startOf(r, now).Add(w.Timeout)
		r.Deadline = &d
	}
	if r.Version == 0 {
		r.Version = w.Version
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

// workflowOverride is a function OverrideWorkflow put in place of a
// workflow's, for the versions registered with its input and output types.
type workflowOverride struct {
	inType, outType reflect.Type
	run             func(c *WorkflowContext, input []byte) ([]byte, error)
}

// OverrideWorkflow makes the engine run fn instead of the function of the
// workflow registered as name, for tests: generated mocks call it with fn
// typed as the workflow's function. It applies to every version of name
// registered with fn's input and output types, from a run's next execution
// on; nil removes the override. The workflow keeps its name, versions,
// options and checkpoints: fn runs as a workflow function (re-run from the
// top when a run is replayed, so it must be deterministic like any), and a
// parent calling it as a child gets fn's output or error, checkpointed as
// a child's, so the parent's replays do not run it again.
//
// A name not registered on e is an error matching ErrUnknownWorkflow: to
// stand in for a workflow the test does not register (a child that lives
// in another service), Register fn under its name instead. Types other than
// the newest registered version's are ErrInvalidArgument.
func OverrideWorkflow[In, Out any](e *Engine, name string, fn func(c *WorkflowContext, in In) (Out, error)) error {
	def, err := e.registered(name)
	if err != nil {
		e.mu.Lock()
		names := slices.Clone(e.names)
		e.mu.Unlock()
		return fmt.Errorf("%w: OverrideWorkflow: %q is not registered with this engine, so there is nothing to override (register it first, or register a stand-in under its name with Register); it registers %s%s",
			ErrUnknownWorkflow, name, listOrNone(names), didYouMean(name, names))
	}
	if fn == nil {
		e.workflowOverrides.Delete(name)
		return nil
	}
	in, out := reflect.TypeFor[In](), reflect.TypeFor[Out]()
	if in != def.inType || out != def.outType {
		return invalidArg("OverrideWorkflow: workflow %q (version %d) takes %v and returns %v, not %v and %v", name, def.version, def.inType, def.outType, in, out)
	}
	e.workflowOverrides.Store(name, &workflowOverride{inType: in, outType: out, run: runFunc(name, fn)})
	e.workflowOverridden.Store(true)
	return nil
}

// runOf returns what runs def's runs: def's function, or the one
// OverrideWorkflow put in its place.
func (e *Engine) runOf(def *workflowDef) func(c *WorkflowContext, input []byte) ([]byte, error) {
	if !e.workflowOverridden.Load() {
		return def.run
	}
	v, ok := e.workflowOverrides.Load(def.name)
	if !ok {
		return def.run
	}
	if o := v.(*workflowOverride); o.inType == def.inType && o.outType == def.outType {
		return o.run
	}
	return def.run
}

// startOf is when a run created at now starts: its StartAt when it is
// delayed past now, else now. A workflow's timeout= counts from there, so a
// delayed run does not reach its deadline before it may start.
func startOf(r *storage.NewRun, now time.Time) time.Time {
	if r.StartAt != nil && r.StartAt.After(now) {
		return *r.StartAt
	}
	return now
}
