package runtime

import (
	"context"
	"time"

	"github.com/stemflow/stem/storage"
)

// Hooks intercept what an engine does, for tracing, metrics and logs: the
// start of runs, each execution of a run, each step attempt, each wait and
// each store call. Package stemotel builds them for OpenTelemetry; any
// other observer is a Hooks of its own. Every field is optional, and an
// engine pays for a point only when a hook is set there: without hooks,
// each point costs one nil check.
//
// Config.Hooks takes a list: at each point the first wraps the second,
// and so on, the last wrapping the engine's own work. A hook that is given
// next calls it exactly once, on the goroutine it was called on, with the
// context it was given or one derived from it (a span's, say): the engine
// does its work inside that call, under that context, and the step
// function of an attempt sees it as its StepContext. Hooks are called from
// many goroutines at once and should return quickly.
type Hooks struct {
	// Start wraps the creation of runs: Start, StartBatch, StartJSON, a
	// workflow starting its child, and a schedule's tick (through
	// Engine.Starting). The hook may add to each run's
	// Headers before calling next (a trace context, for the runs' later
	// work to join its trace); next creates the runs and fills
	// s.Results. An error returned without calling next refuses the start
	// and creates nothing; next's error is the start's.
	Start func(ctx context.Context, s *HookStart, next func(context.Context) error) error
	// Execution wraps each execution of a claimed run by this engine,
	// from its claim until it is parked, handed back, stopped or finished;
	// x.Outcome and x.Err say which once next returns.
	Execution func(ctx context.Context, x *HookExecution, next func(context.Context))
	// Attempt wraps each attempt of a step function; a.Err, a.Retry and
	// a.RetryAt say how it ended once next returns.
	Attempt func(ctx context.Context, a *HookAttempt, next func(context.Context))
	// Wait is told of each sleep and wait as the run begins it, before it
	// parks: the run's goroutine ends when it parks, so there is no next
	// to wrap.
	Wait func(ctx context.Context, w HookWait)
	// Store wraps every call the engine makes to its store; op is the
	// method's name ("Claim", "Checkpoint", ...). An error returned
	// without calling next fails the call as a store error would.
	Store func(ctx context.Context, op string, next func(context.Context) error) error
	// Update wraps each update this engine sends (SendUpdate, CallUpdate,
	// UpdateOrStart, SendUpdateJSON). The hook may add to u.Headers before
	// calling next (a trace context): they travel with the update to the
	// workflow's reply (see Reply). next records the update and sets
	// u.Created. An error returned without calling next refuses the
	// update and writes nothing.
	Update func(ctx context.Context, u *HookUpdate, next func(context.Context) error) error
	// Reply is told of each reply a workflow of this engine writes to an
	// update, with the headers the update was sent with, once the reply
	// is written.
	Reply func(ctx context.Context, u HookUpdate)
}

// HookUpdate is an update, as Hooks.Update and Hooks.Reply see it.
type HookUpdate struct {
	RunID string
	// ID and Name are the update's ID and durable name.
	ID, Name string
	// Workflow is the run's workflow, when known (Reply).
	Workflow string
	// Headers are the sender's propagated context: a hook of Update may
	// add to them; Reply sees them as sent.
	Headers map[string]string
	// Created is false when the run had an update of the ID already (set
	// by next, for Update).
	Created bool
	// Err is the error the workflow replied with (Fail), for Reply.
	Err error
}

// HookStart is a start of runs, as Hooks.Start sees it.
type HookStart struct {
	// Workflow is the runs' workflow.
	Workflow string
	// ParentID is the starting run when a workflow starts its child, or
	// "".
	ParentID string
	// Runs are the runs to create. A hook may set or add to each one's
	// Headers (within storage.ValidateHeaders' bounds); the rest is the
	// engine's.
	Runs []storage.NewRun
	// Results are the store's answers, in the order of Runs, once next
	// returned without error: Created is false for an ID that existed.
	Results []storage.CreateResult
}

// HookExecution is an execution of a claimed run, as Hooks.Execution sees
// it.
type HookExecution struct {
	RunID    string
	Workflow string
	// Version is the workflow version the run started under, 0 when
	// unknown.
	Version  int
	ParentID string
	// Headers are the run's headers (storage.NewRun.Headers), as its start
	// stored them: the starter's trace context.
	Headers map[string]string
	// Recoveries counts the claims of the run from dead workers since its
	// last progress: above 0, a crashed worker's run is resumed.
	Recoveries int
	// Execution is the run's execution number (1, then one more per
	// restart or continue-as-new), known once the run's checkpoints are
	// loaded; 0 if the execution ended before that.
	Execution int
	// Outcome and Err say how the execution ended, once next returned.
	Outcome Outcome
	// Err is the run's error when it ended errored, or why it stopped
	// (ErrTerminated, ErrRestarted, ErrLeaseLost, a store's error) or was
	// handed back; nil otherwise.
	Err error
}

// Outcome is how an execution of a run on this engine ended.
type Outcome string

// The outcomes of an execution.
const (
	// OutcomeComplete: the run completed.
	OutcomeComplete Outcome = "complete"
	// OutcomeErrored: the run ended with an error.
	OutcomeErrored Outcome = "errored"
	// OutcomeParked: the run sleeps or waits in the store until its wake
	// time or an event.
	OutcomeParked Outcome = "parked"
	// OutcomeContinued: the run continued as new; its next execution is
	// queued.
	OutcomeContinued Outcome = "continued"
	// OutcomePaused: an operator's pause took effect.
	OutcomePaused Outcome = "paused"
	// OutcomeReleased: the engine handed the run back for another worker
	// (shutting down, or unable to open or run it).
	OutcomeReleased Outcome = "released"
	// OutcomeStopped: the engine stopped executing the run and wrote
	// nothing more: it was terminated or restarted, or its lease was lost
	// (Err says which), or a store write failed.
	OutcomeStopped Outcome = "stopped"
	// OutcomeHeld: the workflow's code no longer makes the calls the run's
	// history recorded, so the engine held the run, untouched, for a build
	// that matches it; Err is a *HeldError that says where.
	OutcomeHeld Outcome = "held"
)

// HookAttempt is one attempt of a step function, as Hooks.Attempt sees
// it.
type HookAttempt struct {
	RunID    string
	Workflow string
	// Key is the step's checkpoint key ("reserve@v1", "pack@v1#2").
	Key string
	// Attempt is the attempt's number, from 1; attempts recorded before
	// a hand-over count.
	Attempt int
	// Async is set for an attempt of a step future (StepAsync and the
	// typed ...Async forms).
	Async bool
	// Started and Ended bound the attempt on the engine's clock; Ended is
	// set once next returned.
	Started, Ended time.Time
	// Err is the attempt's error, nil when it succeeded, once next
	// returned.
	Err error
	// Retry says, once next returned, that the step will be attempted
	// again at RetryAt; a failed attempt without Retry failed the step for
	// good (a permanent error, or its retries used up).
	Retry   bool
	RetryAt time.Time
}

// HookWait is a sleep or a wait a run begins, as Hooks.Wait sees it.
type HookWait struct {
	RunID    string
	Workflow string
	// Key is the checkpoint key of the sleep or wait.
	Key string
	// Kind is KindSleep for a sleep or timer, KindEvent for an event wait,
	// KindChild for a wait on a child run, KindSelect for a select.
	Kind StepKind
	// Topics are the event topics waited on (a child's result is an event
	// too), in the order of the wait's cases.
	Topics []string
	// Until is when the run wakes if nothing arrives first (a sleep's
	// wake time, a wait's timeout); zero for none.
	Until time.Time
}

// hooks are the engine's Config.Hooks composed: each field set only when
// some hook sets it.
type hooks Hooks

// composeHooks composes hs, the first outermost.
func composeHooks(hs []Hooks) hooks {
	var h hooks
	for i := len(hs) - 1; i >= 0; i-- {
		o := hs[i]
		if f := o.Start; f != nil {
			if inner := h.Start; inner != nil {
				h.Start = func(ctx context.Context, s *HookStart, next func(context.Context) error) error {
					return f(ctx, s, func(ctx context.Context) error { return inner(ctx, s, next) })
				}
			} else {
				h.Start = f
			}
		}
		if f := o.Execution; f != nil {
			if inner := h.Execution; inner != nil {
				h.Execution = func(ctx context.Context, x *HookExecution, next func(context.Context)) {
					f(ctx, x, func(ctx context.Context) { inner(ctx, x, next) })
				}
			} else {
				h.Execution = f
			}
		}
		if f := o.Attempt; f != nil {
			if inner := h.Attempt; inner != nil {
				h.Attempt = func(ctx context.Context, a *HookAttempt, next func(context.Context)) {
					f(ctx, a, func(ctx context.Context) { inner(ctx, a, next) })
				}
			} else {
				h.Attempt = f
			}
		}
		if f := o.Wait; f != nil {
			if inner := h.Wait; inner != nil {
				h.Wait = func(ctx context.Context, w HookWait) {
					f(ctx, w)
					inner(ctx, w)
				}
			} else {
				h.Wait = f
			}
		}
		if f := o.Update; f != nil {
			if inner := h.Update; inner != nil {
				h.Update = func(ctx context.Context, u *HookUpdate, next func(context.Context) error) error {
					return f(ctx, u, func(ctx context.Context) error { return inner(ctx, u, next) })
				}
			} else {
				h.Update = f
			}
		}
		if f := o.Reply; f != nil {
			if inner := h.Reply; inner != nil {
				h.Reply = func(ctx context.Context, u HookUpdate) {
					f(ctx, u)
					inner(ctx, u)
				}
			} else {
				h.Reply = f
			}
		}
		if f := o.Store; f != nil {
			if inner := h.Store; inner != nil {
				h.Store = func(ctx context.Context, op string, next func(context.Context) error) error {
					return f(ctx, op, func(ctx context.Context) error { return inner(ctx, op, next) })
				}
			} else {
				h.Store = f
			}
		}
	}
	return h
}
