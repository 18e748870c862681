package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	gort "runtime"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/stemflow/stem/storage"
)

// StartOption configures one Start.
type StartOption func(*startOptions)

type startOptions struct {
	id       string
	at       time.Time
	deadline time.Time
	// delay and timeout are WithDelay's and WithTimeout's, counted from
	// the start on the engine's clock (resolve).
	delay, timeout time.Duration
	// queue, partition and priority place the run (OnQueue,
	// WithPartition, WithPriority).
	queue     string
	partition string
	priority  int
	// existing and ended are IfExists's and IfEnded's, nil when not set
	// (the workflow's own apply); key is WithSingleton's or WithDebounce's.
	existing *ExistingPolicy
	ended    *EndedPolicy
	key      *StartKey
	// attrs are WithAttributes's, set over those taken from the input.
	attrs []Attr
	// err is an option's refusal, returned by the start with nothing
	// written.
	err error
}

// WithID starts the run under a caller-chosen ID. Starting an ID that exists
// returns the existing run and never creates a second one. An ID is 1 to
// 128 bytes of UTF-8 without control characters or '/' ('/' is reserved
// for child runs, whose IDs are <parent>/<call>); another is
// ErrInvalidArgument, with nothing written.
func WithID(id string) StartOption {
	return func(o *startOptions) { o.id = id }
}

// WithStartAt delays the run until t: it is created at once, stays queued
// (RunInfo.ReadyAt says until when) and no worker takes it before t; then
// it runs without waiting for a poll. A t already past starts it at once.
// The zero time is ErrInvalidArgument, with nothing written.
func WithStartAt(t time.Time) StartOption {
	return func(o *startOptions) {
		if t.IsZero() {
			o.err = fmt.Errorf("%w: WithStartAt: the zero time", ErrInvalidArgument)
		}
		o.at, o.delay = t, 0
	}
}

// WithDelay delays the run by d from the start, on the engine's clock (see
// WithStartAt). A negative d is ErrInvalidArgument, with nothing written.
func WithDelay(d time.Duration) StartOption {
	return func(o *startOptions) {
		if d < 0 {
			o.err = fmt.Errorf("%w: WithDelay(%v): a negative delay", ErrInvalidArgument, d)
		}
		o.at, o.delay = time.Time{}, max(d, time.Nanosecond)
	}
}

// WithTimeout gives the run a deadline d after the call: past it, the run
// ends with an error matching ErrDeadline, whatever it is doing (a running
// step's context is cancelled; a sleep or a wait is cut short). It
// replaces the workflow's own timeout= for this run. d must be above zero.
func WithTimeout(d time.Duration) StartOption {
	return func(o *startOptions) {
		if d <= 0 {
			o.err = fmt.Errorf("%w: WithTimeout(%v): the timeout must be above zero", ErrInvalidArgument, d)
		}
		o.deadline, o.timeout = time.Time{}, d
	}
}

// resolve counts WithDelay and WithTimeout from now, the start's time on
// the engine's clock.
func (o *startOptions) resolve(now time.Time) {
	if o.delay > 0 {
		o.at = now.Add(o.delay)
	}
	if o.timeout > 0 {
		o.deadline = now.Add(o.timeout)
	}
}

// WithDeadline gives the run the deadline t; see WithTimeout. A t already
// past is ErrInvalidArgument and nothing is started.
func WithDeadline(t time.Time) StartOption {
	return func(o *startOptions) {
		if t.IsZero() {
			o.err = fmt.Errorf("%w: WithDeadline: the zero time", ErrInvalidArgument)
		}
		o.deadline, o.timeout = t, 0
	}
}

// deadlineFrom is the deadline of a run started at now: the start's own
// (given, when not zero), else now plus the workflow's timeout, else none.
func (def *workflowDef) deadlineFrom(now, given time.Time) *time.Time {
	switch {
	case !given.IsZero():
		return &given
	case def.timeout > 0:
		d := now.Add(def.timeout)
		return &d
	}
	return nil
}

// RunInfo is a run's state as the client sees it.
type RunInfo struct {
	ID       string
	Workflow string
	// ParentID is the run that started this one as a child, or "".
	ParentID string
	// ParentClose is what becomes of this child run when its parent ends:
	// ParentCloseTerminate (the default), ParentCloseAbandon or
	// ParentCloseCancel. "" means ParentCloseTerminate too, and is all a
	// run that is no child has.
	ParentClose ParentClosePolicy
	Status      RunStatus
	// Input is the run's JSON input. When it cannot be opened with this
	// engine's codec, Input is nil and InputErr (a *SealedError) says why.
	Input    json.RawMessage
	InputErr error
	// Output is the JSON result of a complete run.
	Output json.RawMessage
	// Err is the error of an errored or terminated run. If its text is
	// sealed and cannot be opened, Err is a *SealedError (matching
	// ErrSealed and the error's own sentinel).
	Err error
	// OpenErr, when not nil, says why the run's output or error could not be
	// opened with this engine's codec: a *SealedError, matching ErrSealed,
	// naming the run and the key ID it needs. Output is then nil.
	OpenErr error
	// PauseRequested is true while a pause waits for the next step boundary.
	PauseRequested bool
	// CancelRequested is set once the run's cancellation was requested
	// (Engine.Cancel, or its parent's end under ParentCloseCancel), until
	// a restart; CancelReason is the first request's reason.
	CancelRequested bool
	CancelReason    string
	// ReadyAt is when a waiting run wakes (a sleep's end or a wait's
	// deadline); nil when only an event wakes it.
	ReadyAt *time.Time
	// WaitingFor is the event topic a waiting run waits on, or "": the
	// first, when it waits on several (WaitTopics lists them all).
	WaitingFor string
	WaitTopics []string
	// Deadline is when the run must have ended (WithTimeout, WithDeadline,
	// or its workflow's timeout=); nil when never.
	Deadline *time.Time
	// Progress is the JSON value the run last published (SetProgress), nil
	// when none.
	Progress json.RawMessage
	// Recoveries counts recoveries from dead workers since the last step.
	Recoveries int
	// Queue, Partition and Priority say where the run is claimed from
	// (OnQueue, WithPartition, WithPriority, or its workflow's queue).
	Queue     string
	Partition string
	Priority  int
	// Version is the workflow version the run started under, 0 when it was
	// stored before versions were recorded.
	Version int
	// Execution is the number of the run's current execution: 1 from its
	// start, one more per restart. StartedAt is when that execution began;
	// EndedAt when it finished (nil while it has not).
	Execution int
	StartedAt time.Time
	EndedAt   *time.Time
	// Hold, when not nil, says why an engine held the run rather than
	// execute it: the workflow's code no longer makes the calls the run's
	// history recorded. The run is ready again after Config.HoldRetry,
	// for a build that matches it; terminate, restart or fork it to act
	// sooner.
	Hold *Hold
	// Attributes are the run's search attributes, sorted by name: those
	// its start took from its input (or WithAttributes gave), as the
	// workflow has set them since (SetAttributes).
	Attributes []Attr
	CreatedAt  time.Time
	UpdatedAt  time.Time
}

func (e *Engine) runInfo(r storage.RunRecord) RunInfo {
	info := RunInfo{
		ID: r.ID, Workflow: r.Workflow, ParentID: r.ParentID, ParentClose: r.ParentPolicy, Status: r.Status,
		PauseRequested: r.PauseRequested, ReadyAt: r.ReadyAt, Recoveries: r.Recoveries,
		CancelRequested: r.CancelRequested, CancelReason: r.CancelReason,
		Execution: r.Execution, StartedAt: r.StartedAt, EndedAt: r.EndedAt,
		CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, Attributes: r.Attributes,
		Queue: r.Queue, Partition: r.Partition, Priority: r.Priority, Version: r.Version,
		Hold: r.Hold.Clone(),
	}
	if r.Wait != nil {
		info.WaitingFor = r.Wait.Topic
		info.WaitTopics = r.Wait.Topics()
	}
	info.Deadline = r.Deadline
	if r.Progress != nil {
		p, err := e.payloads.raw("progress of run "+r.ID, r.Progress)
		if err != nil && info.OpenErr == nil {
			info.OpenErr = err
		}
		info.Progress = p
	}
	if r.Error != nil {
		info.Err = e.payloads.errorOf("error text of run "+r.ID, "", r.Error)
		if errors.Is(info.Err, ErrSealed) {
			info.OpenErr = info.Err
		}
	}
	if len(r.Input) > 0 {
		info.Input, info.InputErr = e.payloads.raw("input of run "+r.ID, r.Input)
	}
	if len(r.Output) > 0 {
		out, err := e.payloads.raw("output of run "+r.ID, r.Output)
		if err != nil {
			info.OpenErr = err
		}
		info.Output = out
	}
	return info
}

// Run is a typed handle on one run whose workflow returns Out. Start,
// StartBatch and Get return one.
type Run[Out any] struct {
	id       string
	workflow string
	engine   *Engine
	// pre, for a handle of a run this engine created, is its caller's
	// registration to hear of the run's end, made before the run existed:
	// its first Result need not read the run to learn whether it ended.
	pre *preWait
}

// preWait is a registration with the engine's waiters made before a run
// was created, taken once: by Result, or by the handle's cleanup.
type preWait struct {
	rw *runWaiters
	// heard says the store's announcements of runs' ends were watched
	// already when it was made (see Engine.hearing).
	heard bool
	taken atomic.Bool
}

// ID returns the run's ID.
func (r *Run[Out]) ID() string { return r.id }

// Workflow returns the durable name of the run's workflow.
func (r *Run[Out]) Workflow() string { return r.workflow }

// Info returns the run's current state: status, output or error, what it
// waits for, and when it changed.
func (r *Run[Out]) Info(ctx context.Context) (RunInfo, error) { return r.engine.Get(ctx, r.id) }

// Status returns the run's current status.
func (r *Run[Out]) Status(ctx context.Context) (RunStatus, error) {
	info, err := r.engine.Get(ctx, r.id)
	return info.Status, err
}

// IdempotencyKey returns the idempotency key that the step with checkpoint
// key stepKey saw in this run, with scope ("" for none): what
// StepContext.IdempotencyKey(scope) returned inside the step. For an
// autoversion step, pass IterationKey(key, i). Use it to reconcile with the
// services the step called.
func (r *Run[Out]) IdempotencyKey(stepKey, scope string) string {
	return IdempotencyKey(r.workflow, r.id, stepKey, scope)
}

// Result waits until the run finishes and returns its output, or its error
// (an errored or terminated run), or ctx's error. An output or error this
// engine's codec cannot open is an error matching ErrSealed, never a zero
// value.
func (r *Run[Out]) Result(ctx context.Context) (Out, error) {
	var zero Out
	info, err := r.engine.wait(ctx, r.id, true, r.pre)
	if err != nil {
		return zero, err
	}
	if info.Err != nil {
		return zero, info.Err
	}
	if info.OpenErr != nil {
		return zero, info.OpenErr
	}
	var out Out
	if err := decodeJSON("output of run "+r.id, info.Output, r.engine.cfg.MaxPayloadBytes, &out); err != nil {
		return zero, err
	}
	return out, nil
}

// Pause pauses the run at its next step boundary; see Engine.Pause.
func (r *Run[Out]) Pause(ctx context.Context) error { return r.engine.Pause(ctx, r.id) }

// Resume resumes a paused run; see Engine.Resume.
func (r *Run[Out]) Resume(ctx context.Context) error { return r.engine.Resume(ctx, r.id) }

// Cancel requests the run's cancellation, which its workflow handles; see
// Engine.Cancel.
func (r *Run[Out]) Cancel(ctx context.Context, reason string) error {
	return r.engine.Cancel(ctx, r.id, reason)
}

// Terminate ends the run; see Engine.Terminate.
func (r *Run[Out]) Terminate(ctx context.Context, reason string) error {
	return r.engine.Terminate(ctx, r.id, reason)
}

// Restart begins a new execution of the run, from the top or FromStep; see
// Engine.Restart.
func (r *Run[Out]) Restart(ctx context.Context, opts ...RestartOption) error {
	return r.engine.Restart(ctx, r.id, opts...)
}

// typedWorkflow checks that name is registered with the given types.
func typedWorkflow[In, Out any](e *Engine, name string) (*workflowDef, error) {
	def, err := e.workflow(name)
	if err != nil {
		return nil, err
	}
	if def.inType != reflect.TypeFor[In]() || def.outType != reflect.TypeFor[Out]() {
		return nil, fmt.Errorf("%w: workflow %q takes %v and returns %v, not %v and %v",
			ErrInvalidArgument, name, def.inType, def.outType, reflect.TypeFor[In](), reflect.TypeFor[Out]())
	}
	return def, nil
}

// Start starts a run of the workflow registered as name with input in.
// A start its policy refuses (IfExists, IfEnded) is a *RefusedError,
// matching ErrStartRefused, with nothing written.
func Start[In, Out any](ctx context.Context, e *Engine, name string, in In, opts ...StartOption) (*Run[Out], error) {
	return start[In, Out](ctx, e, name, in, opts, startHow{})
}

// BatchItem is one run of a StartBatch: an optional caller-chosen ID (as
// for WithID), the input, and an optional start time (as for WithStartAt;
// the zero time starts the run at once).
type BatchItem[In any] struct {
	ID      string
	Input   In
	StartAt time.Time
	// Deadline, when not zero, is the run's deadline (as for
	// WithDeadline); zero gives it the workflow's timeout=, if any,
	// counted from StartAt when that is later than now.
	Deadline time.Time
	// Queue, Partition and Priority place the run as OnQueue, WithPartition
	// and WithPriority do; "" is the workflow's queue.
	Queue     string
	Partition string
	Priority  int
	// IfExists and IfEnded are the item's start policies (see IfExists
	// and IfEnded); "" is the workflow's own (its annotation's existing=
	// and ended=), else return the existing run.
	IfExists ExistingPolicy
	IfEnded  EndedPolicy
	// Key, when set, makes the run a singleton or a debounced run (see
	// WithSingleton and WithDebounce).
	Key *StartKey
	// Attributes are set at the run's start over those its workflow takes
	// from the input, as WithAttributes sets them.
	Attributes []Attr
}

// StartBatch starts many runs of one workflow in one store call. Items with
// an ID that exists return the existing run, unless their policies say
// otherwise (IfExists, IfEnded). Every input is checked before anything is
// written: one bad item fails the batch and stores nothing. Items that
// their policy refuses are left out: their runs are nil and the error,
// returned with the others, joins a *RefusedError (matching
// ErrStartRefused) for each.
func StartBatch[In, Out any](ctx context.Context, e *Engine, name string, items []BatchItem[In]) ([]*Run[Out], error) {
	return startRuns[In, Out](ctx, e, name, items, startHow{})
}

// startHow is what a start adds to its items: the options of a Start
// (set), an event delivered with the run (SendOrStart), and the
// application's transaction (tx, for StartTx).
type startHow struct {
	set   *startOptions
	event *storage.Event
	tx    any
}

// startRuns starts items as StartBatch does, as how says.
func startRuns[In, Out any](ctx context.Context, e *Engine, name string, items []BatchItem[In], how startHow) ([]*Run[Out], error) {
	def, err := typedWorkflow[In, Out](e, name)
	if err != nil {
		return nil, err
	}
	now := e.clock.Now()
	runs := make([]storage.NewRun, len(items))
	var cat queueCatalog
	for i, it := range items {
		what := "input of " + name
		plain, err := json.Marshal(it.Input)
		if err != nil {
			return nil, fmt.Errorf("stem: encode %s: %w", what, err)
		}
		in, err := e.payloads.encodeRaw(what, plain)
		if err != nil {
			return nil, err
		}
		attrs, err := startAttrs(name, def.attrs, plain, it.Attributes)
		if err != nil {
			if len(items) > 1 {
				err = fmt.Errorf("run %d of the batch: %w", i, err)
			}
			return nil, err
		}
		runs[i] = storage.NewRun{ID: it.ID, Workflow: name, Input: in, Attributes: attrs,
			Queue: it.Queue, Partition: it.Partition, Priority: it.Priority, Version: def.version, Key: it.Key, Event: how.event}
		if err := e.startPolicies(def, &runs[i], it.IfExists, it.IfEnded, how.set); err != nil {
			return nil, err
		}
		if !it.StartAt.IsZero() {
			runs[i].StartAt = &it.StartAt
		}
		// The workflow's timeout= counts from when the run may start, as
		// it does for StartJSON and a schedule's ticks.
		runs[i].Deadline = def.deadlineFrom(startOf(&runs[i], now), it.Deadline)
		if err := e.place(ctx, &runs[i], &cat); err != nil {
			return nil, err
		}
		if d := runs[i].Deadline; d != nil && !d.After(now) {
			return nil, fmt.Errorf("%w: run %d of the batch: deadline %s is already past", ErrInvalidArgument, i, d.Format(time.RFC3339Nano))
		}
		if d := runs[i].Deadline; d != nil && runs[i].StartAt != nil && !d.After(*runs[i].StartAt) {
			return nil, fmt.Errorf("%w: run %d of the batch: deadline %s is not after its start time %s", ErrInvalidArgument, i, d.Format(time.RFC3339Nano), runs[i].StartAt.Format(time.RFC3339Nano))
		}
	}
	// Each run's end is listened for before the run exists, so its first
	// Result need not read it (see wait): by this engine, which wakes the
	// run's callers as it ends it, and, once the watch of the store's
	// announcements has begun, by every other. An engine whose Run works
	// runs begins the watch at its first start (one round trip, once): its
	// callers await runs it works, as a rule. An engine that only starts
	// runs begins it at its first Result, so that a program that never
	// awaits holds no listener.
	e.mu.Lock()
	working := e.running
	e.mu.Unlock()
	if working {
		e.watchFinished()
	}
	heard := e.hearing()
	pre := make([]*preWait, len(runs))
	for i := range runs {
		if runs[i].ID == "" {
			runs[i].ID = newRunID()
		}
		if how.tx == nil {
			pre[i] = &preWait{rw: e.waiters.add(runs[i].ID), heard: heard}
		}
	}
	unregister := func(i int) {
		if pre[i] != nil {
			e.waiters.remove(runs[i].ID, pre[i].rw)
		}
	}
	var results []storage.CreateResult
	if how.tx != nil {
		results, err = e.createTx(ctx, how.tx, runs)
	} else {
		results, err = e.create(ctx, runs)
	}
	if err != nil {
		for i := range runs {
			unregister(i)
		}
		return nil, err
	}
	out := make([]*Run[Out], len(results))
	var refused []error
	for i, r := range results {
		if r.Refused != "" {
			unregister(i)
			refused = append(refused, &RefusedError{RunID: r.Run.ID, Status: r.Run.Status, Refusal: r.Refused})
			continue
		}
		id := r.Run.ID
		out[i] = &Run[Out]{id: id, workflow: name, engine: e}
		if !r.Created || r.Replaced || pre[i] == nil {
			// It may have ended long ago, or replaced a run whose end
			// was announced: Result reads it.
			unregister(i)
			continue
		}
		out[i].pre = pre[i]
		gort.AddCleanup(out[i], func(p *preWait) {
			if !p.taken.Swap(true) {
				e.waiters.remove(id, p.rw)
			}
		}, pre[i])
	}
	if len(refused) > 0 {
		return out, errors.Join(refused...)
	}
	return out, nil
}

func (e *Engine) create(ctx context.Context, runs []storage.NewRun) ([]storage.CreateResult, error) {
	if err := e.checkOpen(); err != nil {
		return nil, err
	}
	for i := range runs {
		if runs[i].ID == "" {
			runs[i].ID = newRunID()
		} else if err := validRunID(runs[i].ID); err != nil {
			return nil, err
		}
	}
	pool, leased := e.eagerSlots(runs)
	res, err := e.createRuns(ctx, "", runs)
	if err != nil {
		dropEager(pool, leased, runs)
		return nil, err
	}
	if len(leased) > 0 {
		e.startEager(pool, leased, res)
	}
	if pool != nil && len(leased) < len(runs) {
		pool.noteQueued(runs)
	}
	if err := e.created(runs, res); err != nil {
		return nil, err
	}
	if len(leased) < len(runs) {
		e.signal()
	}
	return res, nil
}

// created checks what the store did with runs (res): an ID taken by a run
// of another workflow is ErrInvalidArgument (a Start the run's existence
// answered, with nothing written); the callers of a run a replacement
// ended are woken, to await the run that replaced it.
func (e *Engine) created(runs []storage.NewRun, res []storage.CreateResult) error {
	for i, r := range res {
		if !r.Created && r.Refused == "" && r.Run.Workflow != runs[i].Workflow {
			return fmt.Errorf("%w: run %q exists as a run of %q, not %q", ErrInvalidArgument, r.Run.ID, r.Run.Workflow, runs[i].Workflow)
		}
		if r.Replaced && !r.ReplacedStatus.Finished() {
			// The replaced run's holder learns of its end from its next
			// write or heartbeat, as of any termination.
			e.waiters.wake(r.Run.ID)
		}
	}
	return nil
}

// createRuns creates runs of one workflow in the store, through
// Hooks.Start when one is set; parentID is the run starting them as its
// children, or "".
func (e *Engine) createRuns(ctx context.Context, parentID string, runs []storage.NewRun) ([]storage.CreateResult, error) {
	if e.hooks.Start == nil {
		return e.store.CreateRuns(ctx, runs)
	}
	return e.starting(ctx, parentID, runs, e.store.CreateRuns)
}

// validRunID checks a run ID a caller chose (storage.CheckRunID): at most
// storage.MaxNameLen bytes of UTF-8 without control characters, and no
// '/', which is reserved for child runs' IDs.
func validRunID(id string) error {
	return storage.CheckRunID(id)
}

// Get returns a typed handle on an existing run of the workflow registered
// as name: ErrRunNotFound if there is no such run, ErrInvalidArgument if it
// belongs to another workflow.
func Get[Out any](ctx context.Context, e *Engine, name, id string) (*Run[Out], error) {
	info, err := e.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	if info.Workflow != name {
		return nil, fmt.Errorf("%w: run %q is a run of %q, not %q", ErrInvalidArgument, id, info.Workflow, name)
	}
	return &Run[Out]{id: id, workflow: name, engine: e}, nil
}

// Get returns a run's state.
func (e *Engine) Get(ctx context.Context, id string) (RunInfo, error) {
	if err := e.checkOpen(); err != nil {
		return RunInfo{}, err
	}
	r, err := e.store.GetRun(ctx, id)
	if err != nil {
		return RunInfo{}, err
	}
	return e.runInfo(r), nil
}

// Wait blocks until the run finishes (complete, errored or terminated) and
// returns its final state, or ctx's error.
func (e *Engine) Wait(ctx context.Context, id string) (RunInfo, error) {
	return e.wait(ctx, id, false, nil)
}

// heardPollMost is the longest a caller awaiting a run waits between two
// reads of it where the store announces every run's end.
const heardPollMost = 30 * time.Second

// wait is Wait; with outcome, only the run's status, output and error are
// wanted (Run.Result): a run this engine executes is not read while it
// runs, and its end here hands them over without a read. pre, when not
// nil and not taken, is a registration made before the run was created:
// whenever the run ends it wakes it, so the run is not read first.
func (e *Engine) wait(ctx context.Context, id string, outcome bool, pre *preWait) (RunInfo, error) {
	// Where the store announces every run's end, polling is only a safety
	// net against a lost announcement; elsewhere it is how the end of a
	// run in another process is learnt, and starts soon (see newPoll).
	p := e.newPoll()
	if pre != nil {
		// Only the handle's first wait may trust the registration: once
		// it returns, the registration is released, and a later wait (after
		// a restart, say) reads the run.
		defer func() {
			if !pre.taken.Swap(true) {
				e.waiters.remove(id, pre.rw)
			}
		}()
	}
	for first := true; ; first = false {
		// A run executing here is not read: its execution's end wakes the
		// callers, with the outcome when it completed the run, else to
		// read it. It is read after a poll interval all the same, in case
		// the execution is stuck and another engine ended the run. Nor is
		// one whose end was listened for since before it existed.
		wait := p.delay
		var rw *runWaiters
		if first && outcome && pre != nil && !pre.heard {
			// Not heard from elsewhere, but ended here already: this
			// engine handed it its outcome.
			select {
			case <-pre.rw.done:
				if pre.rw.ended != nil && !pre.taken.Swap(true) {
					e.waiters.remove(id, pre.rw)
					return e.runInfo(*pre.rw.ended), nil
				}
			default:
			}
		}
		switch {
		case first && pre != nil && pre.heard && !pre.taken.Swap(true):
			rw = pre.rw
			if e.executing(id) {
				wait = e.cfg.PollInterval
			}
		case outcome && first && e.executing(id):
			rw = e.waiters.addLocal(id)
			wait = e.cfg.PollInterval
		default:
			rw = e.waiters.add(id)
			info, err := e.waitRead(ctx, id)
			if err != nil || info.Status.Finished() {
				e.waiters.remove(id, rw)
				return info, err
			}
		}
		var err error
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			err = ctx.Err()
		case <-rw.done:
		case <-t.C:
			p.delay = min(p.delay*2, p.most)
		}
		t.Stop()
		e.waiters.remove(id, rw)
		if err != nil {
			return RunInfo{}, err
		}
		if outcome && rw.ended != nil {
			return e.runInfo(*rw.ended), nil
		}
		if pre != nil && !pre.taken.Swap(true) {
			e.waiters.remove(id, pre.rw) // not trusted: made before the watch began
		}
	}
}

// Pause pauses a run: a queued or waiting run at once, a running one at its
// next step boundary. A paused run stays paused across engine restarts until
// Resume. A finished run: ErrInvalidState.
func (e *Engine) Pause(ctx context.Context, id string) error {
	if err := e.checkOpen(); err != nil {
		return err
	}
	return e.store.Pause(ctx, id)
}

// Resume resumes a paused run. A run that is not paused: ErrInvalidState.
func (e *Engine) Resume(ctx context.Context, id string) error {
	if err := e.checkOpen(); err != nil {
		return err
	}
	if err := e.store.Resume(ctx, id); err != nil {
		return err
	}
	e.signal()
	return nil
}

// Terminate ends an unfinished run with reason. The running step's context
// is cancelled (at once on this engine, within a heartbeat elsewhere) and no
// later write of the run lands. A parent waiting on the run gets an error
// matching ErrTerminated. The run's unfinished children are terminated with
// it, and theirs, in the same store change, except children started with
// Abandon. A finished run: ErrInvalidState.
func (e *Engine) Terminate(ctx context.Context, id, reason string) error {
	if err := e.checkOpen(); err != nil {
		return err
	}
	r, err := e.store.GetRun(ctx, id)
	if err != nil {
		return err
	}
	if reason == "" {
		reason = "terminated"
	}
	info := storage.ErrorInfo{Message: e.payloads.sealText("stem: run terminated: " + reason), Code: storage.CodeTerminated}
	childInfo := storage.ErrorInfo{Message: e.payloads.sealText(fmt.Sprintf("stem: run terminated: parent %s terminated: %s", id, reason)), Code: storage.CodeTerminated}
	req := storage.TerminateRequest{RunID: id, Error: info, ChildError: &childInfo,
		ChildCancel: cancelReason(fmt.Sprintf("its parent %s was terminated: %s", id, reason))}
	req.Notify = parentNotice(r.ParentID, id, childOutcome{Error: &info})
	ids, err := e.store.Terminate(ctx, req)
	if err != nil {
		return err
	}
	for _, id := range ids {
		e.stopLocal(id, ErrTerminated)
	}
	e.waiters.wake(ids...)
	if r.ParentID != "" {
		e.arrivals.wake(r.ParentID)
	}
	e.signal()
	return nil
}

// Cancel requests the cancellation of an unfinished run, with reason (at
// most storage.MaxCancelReason bytes of text, possibly empty). Unlike
// Terminate, the workflow sees it and ends itself: its context is
// cancelled (a running step's too, which is not retried) with a cause
// matching ErrCanceled, and its next durable call that would run a step,
// begin a sleep or a wait, start a child or wait on futures fails with an
// error matching ErrCanceled, as do its calls after it, but for those
// made on the detached context (WorkflowContext.Detached), where its
// cleanup runs and checkpoints as usual. A sleeping or waiting run wakes
// for it at once; a paused run sees it when resumed; a held run when its
// code is fixed. A workflow that returns the error ends errored with it
// (RunInfo.Err matches ErrCanceled); one that handles it may complete.
// The first request wins: cancelling again succeeds and changes nothing.
// The run's children meet their parent-close policy when it ends. A
// finished run: ErrInvalidState; an unknown one: ErrRunNotFound.
func (e *Engine) Cancel(ctx context.Context, id, reason string) error {
	if err := e.checkOpen(); err != nil {
		return err
	}
	if err := e.store.Cancel(ctx, storage.CancelRequest{RunID: id, Reason: reason}); err != nil {
		return err
	}
	e.mu.Lock()
	x := e.active[id]
	e.mu.Unlock()
	if x != nil {
		x.noteCancel("", true) // the reason is the first request's, from the store
	}
	e.signal()
	return nil
}

// cancelReason is s cut to the longest reason a cancellation records, on
// a rune boundary.
func cancelReason(s string) string {
	if len(s) <= storage.MaxCancelReason {
		return s
	}
	s = s[:storage.MaxCancelReason]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}

// RestartOption configures one Restart.
type RestartOption func(*restartOptions)

// restartOptions is what the RestartOptions of one Restart set.
type restartOptions struct {
	fromKey     string
	ifExecution int
}

// FromStep restarts the run from the step with checkpoint key key (an
// expanded key for an autoversion step, "pack@v1#3"): the new execution
// keeps the checkpoints written before that step's, so the steps before it
// do not run again, and runs that step and everything after it anew. The
// key must have a checkpoint in the run's current execution; restarting an
// errored run from its failed step is the common use.
func FromStep(key string) RestartOption {
	return func(o *restartOptions) { o.fromKey = key }
}

// IfExecution makes the restart conditional: it happens only while the
// run's current execution is n (as RunInfo.Execution read it), and is
// otherwise an error matching storage.ErrConflict, with nothing written.
// A caller that read the run before restarting it so never restarts it
// twice, also when it acts again after a crash (bulk actions do). n <= 0
// sets no condition.
func IfExecution(n int) RestartOption {
	return func(o *restartOptions) { o.ifExecution = max(n, 0) }
}

// Restart begins a new execution of the run with the same ID and input:
// from the top, or from a step with FromStep. The previous execution, its
// steps and attempts stay readable (ListExecutions, ListSteps). A worker
// holding the run stops without writing: its running step's context is
// cancelled with cause ErrRestarted (at once on this engine, within a
// heartbeat elsewhere), and the new execution starts once that step has
// returned, or when the old lease expires, so two executions never run at
// once.
func (e *Engine) Restart(ctx context.Context, id string, opts ...RestartOption) error {
	if err := e.checkOpen(); err != nil {
		return err
	}
	var o restartOptions
	for _, opt := range opts {
		opt(&o)
	}
	if err := e.store.Restart(ctx, storage.RestartRequest{RunID: id, FromKey: o.fromKey, IfExecution: o.ifExecution}); err != nil {
		return err
	}
	e.stopLocal(id, fmt.Errorf("run %s: %w", id, ErrRestarted))
	e.signal()
	return nil
}

// stopLocal cancels the execution of a run on this engine, if any.
func (e *Engine) stopLocal(id string, cause error) {
	e.mu.Lock()
	x := e.active[id]
	e.mu.Unlock()
	if x != nil {
		x.cancel(cause)
	}
}

// Emit delivers payload (encoded as JSON) to every run waiting on topic and
// returns how many it reached. Runs not waiting are not affected. A payload
// of the wrong shape for the topic is refused as by SendEvent, with
// nothing delivered.
func (e *Engine) Emit(ctx context.Context, topic string, payload any) (int, error) {
	if err := e.checkOpen(); err != nil {
		return 0, err
	}
	b, err := e.checkedPayload(ctx, topic, payload)
	if err != nil {
		return 0, err
	}
	return e.emit(ctx, topic, b)
}

// emit delivers an encoded payload to the runs waiting on topic.
func (e *Engine) emit(ctx context.Context, topic string, b []byte) (int, error) {
	ids, err := e.store.Emit(ctx, storage.EmitRequest{Topic: topic, Payload: b})
	if err != nil {
		return 0, err
	}
	if len(ids) > 0 {
		e.signal()
	}
	return len(ids), nil
}

// SendEvent delivers payload (encoded as JSON) to one run. If the run is not
// waiting on topic yet, the event is kept for it and delivered when it
// waits, so an early event is never lost. An unknown run: ErrRunNotFound; a
// finished run: ErrInvalidState.
//
// A payload that a run waiting on topic would refuse is ErrInvalidArgument
// (matching ErrDecode too), naming the topic and what is wrong, with
// nothing written: one that does not decode into the Go type this engine
// registers the topic with (RegisterEvent), or, for a topic registered by
// another engine sharing the store, one that does not match the JSON Schema
// it recorded in the catalog. A topic neither registers nor records is not
// checked: a workflow may wait on a topic nobody declared.
func (e *Engine) SendEvent(ctx context.Context, runID, topic string, payload any) error {
	if err := e.checkOpen(); err != nil {
		return err
	}
	b, err := e.checkedPayload(ctx, topic, payload)
	if err != nil {
		return err
	}
	return e.sendEvent(ctx, runID, topic, b)
}

// checkedPayload checks an event's topic and payload as SendEvent and
// Emit do, and encodes the payload for the store.
func (e *Engine) checkedPayload(ctx context.Context, topic string, payload any) ([]byte, error) {
	if err := validTopic(topic); err != nil {
		return nil, err
	}
	return e.eventPayload(ctx, topic, payload)
}

// sendEvent delivers an encoded payload to one run.
func (e *Engine) sendEvent(ctx context.Context, runID, topic string, b []byte) error {
	delivered, err := e.store.SendEvent(ctx, storage.Event{RunID: runID, Topic: topic, Payload: b})
	if err != nil {
		return err
	}
	if delivered {
		e.signal()
	} else {
		e.arrivals.wake(runID) // buffered: a select of it that runs steps here takes it
	}
	return nil
}

// ListRuns returns a page of runs, ordered by ID or by creation time
// (q.Order), filtered by q: its Where filters by search attribute
// (ParseWhere reads them from text), TopLevel leaves children out. The
// cursor of the next page is "" at the end.
func (e *Engine) ListRuns(ctx context.Context, q ListRunsQuery) ([]RunInfo, string, error) {
	if err := e.checkOpen(); err != nil {
		return nil, "", err
	}
	if q.Status != "" && !q.Status.Valid() {
		return nil, "", invalidArg("unknown run status %q", q.Status)
	}
	page, err := e.store.ListRuns(ctx, q)
	if err != nil {
		return nil, "", err
	}
	out := make([]RunInfo, len(page.Runs))
	for i, r := range page.Runs {
		out[i] = e.runInfo(r)
	}
	return out, page.Next, nil
}

// CountRuns counts the runs in each status, of every workflow or of the
// one named ("" for all), finished ones included.
func (e *Engine) CountRuns(ctx context.Context, workflow string) (RunCounts, error) {
	if err := e.checkOpen(); err != nil {
		return nil, err
	}
	return e.store.CountRuns(ctx, storage.CountRunsQuery{Workflow: workflow})
}
