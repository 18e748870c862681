package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"reflect"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stemflow/stem/storage"
)

// letGoTimeout bounds the release that hands a run back after a failed
// store write or a restart: when the store does not answer by then, the
// lease's expiry hands the run over instead.
const letGoTimeout = 2 * time.Second

// execution is one claimed run being executed by this worker.
type execution struct {
	engine   *Engine
	claim    storage.ClaimedRun
	lease    storage.Lease
	workflow string
	ctx      context.Context
	cancel   context.CancelCauseFunc
	// stopping is closed when the engine shuts down: the run is handed back
	// at its next step boundary.
	stopping chan struct{}

	// checkpoints holds the run's checkpoints by key, behind cpMu: the
	// goroutines of step futures write it too.
	cpMu        sync.Mutex
	checkpoints map[string]storage.Checkpoint
	// startedChild is set, behind cpMu, once this execution starts (or
	// starts again, idempotently) a child run: its completion then ends
	// the run's children per their parent-close policy.
	startedChild bool
	// pending holds, per key without a checkpoint, the last attempt
	// recorded in this execution (by this worker or one before it), so a
	// step's attempt numbers and retry budget go on across hand-overs.
	pending  map[string]storage.Attempt
	used     map[string]bool
	counters map[string]int
	// repeats counts the calls of each sleep's and wait's name (see
	// repeatKey); nil until the first.
	repeats map[string]int
	state   suspendState // from the last suspension

	mu         sync.Mutex
	lastExtend time.Time
	// holdUntil is when the lease must last until, at least, while a step
	// whose timeout is longer than the lease runs (zero otherwise).
	holdUntil time.Time
	outcome   outcome
	// sealedErr is why handBack handed the run back: what it could not
	// open (a *SealedError), for Hooks.Execution.
	sealedErr error
	// runErr is the error the run finished with (outcomeFinished).
	runErr error
	// execution is the run's execution number, once loaded.
	execution int
	log       *slog.Logger // see logger
	logOnce   sync.Once
	// active is the step attempt running now (the latest begun of those
	// running, in running), and reported whether the heartbeat has told
	// the store about it.
	active   *storage.ActiveStep
	running  []*storage.ActiveStep
	reported bool

	// The run's futures (see future.go), its deadline and its progress
	// (progress.go); inType is its workflow's input type.
	futures
	deadline *time.Time
	progress progress
	inType   reflect.Type

	// pauseSeen is closed when a heartbeat finds a pause requested: the
	// run parks at its next step boundary, a retry's wait included.
	pauseSeen chan struct{}
	pauseOnce sync.Once
	// steps counts the step functions running, an abandoned one (past its
	// timeout) included, so that a run is not handed over while one runs.
	steps stepCount
	// replay is set when the execution only replays the run (Engine.Replay):
	// it runs no step and writes nothing.
	replay *replayer
	// history is what the execution replays, checked call by call (see
	// drift.go); held is the hold it ended with, if any.
	history history
	held    *storage.Hold
	// canc is the run's cancellation, as this execution knows it.
	canc cancellation
	// deferred is a step's checkpoint not written yet (see deferStep);
	// flushMu is held while it is taken and written, so that it lands
	// before any later write of the run.
	deferred atomic.Pointer[deferredWrite]
	flushMu  sync.Mutex
	// ended is set once the run's completion is written, before its
	// waiters are woken (see Engine.wait); free gives the worker slot back.
	ended atomic.Bool
	free  func()
	// unwinding is set once the workflow goroutine began to unwind (the run
	// parked, paused, was handed back or stopped, or a replay ended): the
	// workflow's defers run then, and a durable call they make ends the
	// goroutine again without running or writing anything.
	unwinding atomic.Bool
}

type outcome int

const (
	outcomeNone      outcome = iota
	outcomeSuspended         // parked in the store
	outcomeStopped           // lease lost, terminated or paused: nothing more to write
	outcomeReleased          // handed back for another worker
	outcomeFinished          // completed or errored by the execution itself
	outcomeContinued         // continued as new
	outcomePaused            // parked paused at a checkpoint
	outcomeHeld              // held: the code parts from the run's history
)

// hookOutcome says how the execution ended, for Hooks.Execution.
func (x *execution) hookOutcome() (Outcome, error) {
	switch x.outcome {
	case outcomeFinished:
		if x.runErr != nil {
			return OutcomeErrored, x.runErr
		}
		return OutcomeComplete, nil
	case outcomeSuspended:
		return OutcomeParked, nil
	case outcomeContinued:
		return OutcomeContinued, nil
	case outcomePaused:
		return OutcomePaused, nil
	case outcomeHeld:
		return OutcomeHeld, &HeldError{RunID: x.lease.RunID, Hold: *x.held}
	case outcomeReleased:
		// Handed back after a restart or a failed write: stopped, as
		// the hook sees it.
		if cause := context.Cause(x.ctx); cause != nil && !errors.Is(cause, errShutdown) && !errors.Is(cause, context.Canceled) {
			return OutcomeStopped, cause
		}
		return OutcomeReleased, x.sealedErr
	}
	return OutcomeStopped, context.Cause(x.ctx)
}

// suspendState is what the engine stores with a suspension: the key it
// suspended at and the autoversion counters reached, so a replay that reaches
// that key with different counts is caught as non-deterministic. Counters
// holds the repeated calls of sleeps and waits too, as "name#" → n for a
// name last called as name#n (see repeatKey).
type suspendState struct {
	Key      string         `json:"key"`
	Counters map[string]int `json:"counters,omitempty"`
	// Futures are the keys of the futures created before the suspension,
	// in order, so a replay that creates them otherwise is caught.
	Futures []string `json:"futures,omitempty"`
	// Deadlines are the deadlines of the event waits registered so far, by
	// key: a wait woken by another case keeps its own.
	Deadlines map[string]time.Time `json:"deadlines,omitempty"`
}

// logger returns the execution's logger, which names the run, its
// workflow and (once loaded) its execution. It is built when first used,
// by the heartbeat or the workflow goroutine: most executions log nothing.
func (x *execution) logger() *slog.Logger {
	x.logOnce.Do(func() {
		if x.log != nil {
			return // given (a replay's)
		}
		if x.execution > 0 {
			x.log = x.engine.log.With("run", x.lease.RunID, "workflow", x.workflow, "execution", x.execution)
		} else {
			x.log = x.engine.log.With("run", x.lease.RunID, "workflow", x.workflow)
		}
	})
	return x.log
}

// execute runs one claimed run until it completes, suspends or stops,
// inside Hooks.Execution when one is set.
func (e *Engine) execute(parent context.Context, r storage.ClaimedRun, free func()) {
	if h := e.hooks.Execution; h != nil {
		e.executeHooked(h, parent, r, free)
		return
	}
	e.executeIn(parent, r, nil, free)
}

// executeHooked is execute inside Hooks.Execution h. (Apart, so that a
// claimed run executed without hooks is not moved to the heap for the
// closure.)
func (e *Engine) executeHooked(h func(context.Context, *HookExecution, func(context.Context)), parent context.Context, r storage.ClaimedRun, free func()) {
	hx := &HookExecution{RunID: r.Lease.RunID, Workflow: r.Workflow, Version: r.Version, ParentID: r.ParentID,
		Headers: r.Headers, Recoveries: r.Recoveries}
	h(parent, hx, func(ctx context.Context) { e.executeIn(ctx, r, hx, free) })
}

// executeIn is execute under parent, telling hx (when not nil) the
// execution's number and how it ended. free gives the execution's worker
// slot back; a completion calls it before it wakes the run's callers, so
// that a caller starting its next run finds the worker free.
func (e *Engine) executeIn(parent context.Context, r storage.ClaimedRun, hx *HookExecution, free func()) {
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(parent))
	x := &execution{
		engine:     e,
		claim:      r,
		lease:      r.Lease,
		workflow:   r.Workflow,
		ctx:        ctx,
		cancel:     cancel,
		stopping:   make(chan struct{}),
		pauseSeen:  make(chan struct{}),
		deadline:   r.Deadline,
		free:       free,
		used:       map[string]bool{},
		counters:   map[string]int{},
		lastExtend: e.clock.Now(),
	}
	x.canc.init(ctx)
	if hx != nil {
		defer func() {
			hx.Execution = x.execution
			hx.Outcome, hx.Err = x.hookOutcome()
		}()
	}
	defer cancel(nil)

	e.mu.Lock()
	e.active[r.Lease.RunID] = x
	delete(e.eager, r.Lease.RunID)
	e.mu.Unlock()
	defer func() {
		e.mu.Lock()
		if e.active[r.Lease.RunID] == x {
			delete(e.active, r.Lease.RunID)
		}
		e.mu.Unlock()
		if x.outcome != outcomeFinished {
			// Callers relying on this execution's end (see wait), or whose
			// announcement was skipped meanwhile (see watchFinished), read
			// the run again.
			e.waiters.executionEnded(r.Lease.RunID, e.hearing())
		}
	}()

	// The engine stopping hands the run back at its next step boundary; a
	// step still running when the grace runs out has its context cancelled.
	stop := context.AfterFunc(parent, func() {
		close(x.stopping)
		if grace := e.cfg.ShutdownGrace; grace > 0 {
			time.AfterFunc(grace, func() { cancel(errShutdown) })
		} else {
			cancel(errShutdown)
		}
	})
	defer stop()

	if r.Recoveries > e.cfg.MaxRecoveries {
		err := fmt.Errorf("%w: recovered %d times", ErrPoisonRun, r.Recoveries)
		x.logger().Error("stem: poison run", "err", err)
		x.finish(nil, err)
		return
	}
	def, err := e.registeredVersion(r.Workflow, r.Version)
	if err != nil {
		x.release()
		return
	}
	x.inType = def.inType
	replay, err := e.replayOf(ctx, r)
	if err != nil {
		x.logger().Error("stem: load checkpoints", "err", err)
		x.release()
		return
	}
	x.execution = replay.Execution
	// A run this engine cannot open (input or checkpoints sealed with a key
	// its codec lacks) is handed back untouched, before anything runs.
	input, err := e.payloads.raw(fmt.Sprintf("input of run %s (workflow %s)", r.Lease.RunID, r.Workflow), r.Input)
	if err != nil {
		x.handBack(err)
		return
	}
	if err := x.load(replay); err != nil {
		x.handBack(err)
		return
	}
	if x.deadline != nil {
		if !e.clock.Now().Before(*x.deadline) {
			x.finish(nil, x.deadlineError())
			return
		}
		stop := storage.AfterFunc(e.clock, x.deadline.Sub(e.clock.Now()), func() { cancel(x.deadlineError()) })
		defer stop()
	}

	hbDone := make(chan struct{})
	go x.heartbeat(hbDone)
	defer close(hbDone)

	out, runErr, returned := x.call(def, input)
	if !returned {
		// The workflow goroutine unwound: suspended or stopped.
		return
	}
	if cause := context.Cause(x.ctx); cause != nil && !errors.Is(cause, errShutdown) {
		// Terminated, restarted or lease lost while finishing: write
		// nothing, but let a restart's new execution go. (A run that
		// finished while the engine shuts down still completes.)
		x.onStopped()
		return
	}
	x.finish(out, runErr)
}

// load gives x the run's checkpoints, opened with the engine's codec (an
// error when one cannot be), its pending attempts and its suspension state.
func (x *execution) load(replay storage.Replay) error {
	e := x.engine
	x.checkpoints = make(map[string]storage.Checkpoint, len(replay.Checkpoints))
	for _, cp := range replay.Checkpoints {
		cp, err := e.payloads.openCheckpoint(x.lease.RunID, cp)
		if err != nil {
			return err
		}
		x.checkpoints[cp.Key] = cp
	}
	x.pending = make(map[string]storage.Attempt, len(replay.Pending))
	for _, a := range replay.Pending {
		if a.Number > x.pending[a.Key].Number {
			x.pending[a.Key] = a
		}
	}
	if len(x.claim.SuspendState) > 0 {
		_ = json.Unmarshal(x.claim.SuspendState, &x.state)
	}
	x.history.load(replay.Checkpoints, x.state)
	x.futures.init(e.cfg.MaxParallelSteps)
	x.initCancel()
	return nil
}

// call runs the workflow function on its own goroutine, the run's workflow
// goroutine, and reports whether the function returned (a panic returns a
// StepError) or its goroutine unwound: the run suspended or stopped, or a
// replay ended.
func (x *execution) call(def *workflowDef, input []byte) (out []byte, runErr error, returned bool) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() {
			if p := recover(); p != nil && !x.unwinding.Load() {
				runErr = &StepError{Message: fmt.Sprintf("workflow panicked: %v\n%s", p, debug.Stack()), Code: storage.CodePanic}
				returned = true
			}
		}()
		out, runErr = x.engine.runOf(def)(&WorkflowContext{exec: x}, input)
		x.settle()
		x.frontier("", callSync)
		returned = true
	}()
	<-done
	return out, runErr, returned
}

// deadlineError is the error a run ends with past its deadline.
func (x *execution) deadlineError() error {
	return fmt.Errorf("%w: run %s had to end by %s", ErrDeadline, x.lease.RunID, x.deadline.UTC().Format(time.RFC3339Nano))
}

// replayOf is the claimed run's replay: the one its claim brought, or the
// store's answer to LoadReplay.
func (e *Engine) replayOf(ctx context.Context, r storage.ClaimedRun) (storage.Replay, error) {
	if r.Replay != nil {
		return *r.Replay, nil
	}
	return e.store.LoadReplay(ctx, r.Lease.RunID)
}

// finish completes the run with its output or error.
func (x *execution) finish(out []byte, runErr error) {
	e := x.engine
	req := storage.CompleteRequest{Lease: x.lease, Status: StatusComplete, Output: out, Progress: x.takeProgress()}
	if runErr != nil {
		req.Status = StatusErrored
		req.Output = nil
		req.Error = e.payloads.sealInfo(errorInfo(runErr))
	}
	req.Notify = parentNotice(x.claim.ParentID, x.lease.RunID, e.payloads.newChildOutcome(req.Output, req.Error))
	if x.hasChildren() {
		req.ChildError = &storage.ErrorInfo{Code: storage.CodeTerminated, Message: e.payloads.sealText(fmt.Sprintf(
			"stem: run terminated: its parent %s ended (%s) and the child's parent-close policy is terminate", x.lease.RunID, req.Status))}
		req.ChildCancel = fmt.Sprintf("its parent %s ended (%s) and the child's parent-close policy is cancel", x.lease.RunID, req.Status)
	}
	var err error
	if d := x.takeDeferred(); d != nil {
		// The last step's checkpoint carries the completion: one write.
		var res storage.CheckpointResult
		res, err = e.store.Checkpoint(context.WithoutCancel(x.ctx), storage.CheckpointRequest{
			Lease: x.lease, LeaseFor: e.cfg.LeaseDuration, Checkpoint: d.cp, Attempts: d.attempts, Progress: req.Progress, Complete: &req,
		})
		switch {
		case err != nil:
		case res.Paused:
			// Paused at its last step: resumed, it replays to its end and
			// completes then.
			x.outcome = outcomePaused
			return
		case !res.Completed:
			// The key's checkpoint was stored by another meanwhile.
			x.logger().Warn("stem: the run's last checkpoint was written by another; handing the run back to replay", "key", d.cp.Key)
			x.release()
			return
		}
	} else {
		err = e.store.Complete(context.WithoutCancel(x.ctx), req)
	}
	if err != nil {
		if !errors.Is(err, ErrLeaseLost) {
			x.logger().Error("stem: complete failed; handing the run over", "err", err)
		}
		x.cancel(x.lostCause(err))
		x.outcome = outcomeStopped
		if lettingGo(err) {
			x.letGo(err)
		}
		return
	}
	x.outcome, x.runErr = outcomeFinished, runErr
	if x.free != nil {
		x.free()
	}
	e.waiters.end(x.lease.RunID, &storage.RunRecord{ID: x.lease.RunID, Workflow: x.workflow, Status: req.Status, Output: req.Output, Error: req.Error},
		func() { x.ended.Store(true) })
	if req.Notify != nil {
		e.arrivals.wake(req.Notify.RunID)
		e.signal()
	}
}

// heartbeat extends the lease while the run executes, each time
// Config.HeartbeatInterval has passed without a write extending it: while a
// step runs or a retry waits, then. It reports the step running (once per
// attempt), learns of a requested pause, and cancels the execution when the
// lease is lost, with a cause that says why (ErrTerminated, ErrRestarted,
// or the lost lease).
func (x *execution) heartbeat(done <-chan struct{}) {
	every := x.engine.cfg.HeartbeatInterval
	if every <= 0 {
		return
	}
	clock := x.engine.clock
	for {
		tick, stop := storage.NewTimer(clock, max(every/4, time.Millisecond))
		select {
		case <-done:
			stop()
			return
		case <-x.ctx.Done():
			stop()
			return
		case <-tick:
		}
		x.flushIdle(every / 4)
		x.mu.Lock()
		if clock.Now().Sub(x.lastExtend) < every && !x.progress.due(every/4) {
			x.mu.Unlock()
			continue
		}
		step := x.active
		if x.reported {
			step = nil
		}
		x.reported = x.active != nil
		leaseFor := x.leaseFor()
		x.mu.Unlock()
		res, err := x.engine.store.Heartbeat(x.ctx, storage.HeartbeatRequest{Lease: x.lease, LeaseFor: leaseFor, Step: step, Progress: x.takeProgress()})
		if err != nil {
			if errors.Is(err, ErrLeaseLost) {
				x.cancel(x.lostCause(err))
				return
			}
			if x.ctx.Err() == nil {
				x.logger().Warn("stem: heartbeat", "err", err)
			}
			if step != nil {
				x.mu.Lock()
				x.reported = x.active != step // report it with the next one
				x.mu.Unlock()
			}
			continue
		}
		x.extended()
		x.notePause(res)
		if res.CancelRequested {
			x.noteCancel("", true)
		}
	}
}

// leaseFor is the lease length a heartbeat asks for: the engine's, or
// longer while a step's timeout needs it. The caller holds x.mu.
func (x *execution) leaseFor() time.Duration {
	return max(x.engine.cfg.LeaseDuration, time.Until(x.holdUntil))
}

// holdFor extends the lease up front for a step attempt whose timeout is
// longer than the lease, to the timeout plus a lease's length, so the
// attempt keeps its lease however the heartbeats fare. It reports the
// attempt as the active step. A refused extension stops the run as a
// failed write does.
func (x *execution) holdFor(a *storage.ActiveStep, timeout time.Duration) {
	leaseFor := timeout + x.engine.cfg.LeaseDuration
	x.mu.Lock()
	if until := x.engine.clock.Now().Add(leaseFor); until.After(x.holdUntil) {
		x.holdUntil = until
	}
	x.reported = true
	x.mu.Unlock()
	res, err := x.engine.store.Heartbeat(context.WithoutCancel(x.ctx), storage.HeartbeatRequest{Lease: x.lease, LeaseFor: leaseFor, Step: a})
	if err != nil {
		x.stop(err)
	}
	x.extended()
	x.notePause(res)
	if res.CancelRequested {
		x.noteCancel("", true)
	}
}

// notePause tells the run, once, that a heartbeat found a pause
// requested: it parks at its next step boundary.
func (x *execution) notePause(res storage.HeartbeatResult) {
	if res.PauseRequested {
		x.pauseOnce.Do(func() { close(x.pauseSeen) })
	}
}

// lostCause is the cause an execution is cancelled with when its lease is
// lost: ErrTerminated or ErrRestarted when the store says so, or the lost
// lease (ErrLeaseLost).
func (x *execution) lostCause(err error) error {
	var lost *storage.LeaseLostError
	if errors.As(err, &lost) {
		switch lost.Loss {
		case storage.LossTerminated:
			return fmt.Errorf("run %s: %w", x.lease.RunID, ErrTerminated)
		case storage.LossRestarted:
			return fmt.Errorf("run %s: %w", x.lease.RunID, ErrRestarted)
		}
	}
	return err
}

// lettingGo reports whether a run stopped by err is handed back: after a
// restart, whose new execution waits until the old holder lets go; after a
// lost lease whose store did not say why (it may be a restart: the release
// then lets go, and fails harmlessly otherwise); and after a store write
// that failed for a passing reason (a timeout, a lost connection). A write
// the store refused as malformed or out of place would fail again: that
// run is left to its lease, whose expiry counts towards MaxRecoveries.
func lettingGo(err error) bool {
	if errors.Is(err, ErrRestarted) {
		return true
	}
	var lost *storage.LeaseLostError
	if errors.As(err, &lost) {
		return lost.Loss == storage.LossRestarted || lost.Loss == storage.LossUnknown
	}
	if errors.Is(err, ErrLeaseLost) {
		return true // not said why: see above
	}
	for _, final := range []error{ErrTerminated, errShutdown, ErrInvalidArgument, ErrInvalidState, ErrRunNotFound, ErrClosed} {
		if errors.Is(err, final) {
			return false
		}
	}
	return true
}

// beginStep records a step attempt as running: the one the heartbeat
// reports.
func (x *execution) beginStep(a *storage.ActiveStep) {
	x.mu.Lock()
	x.running = append(x.running, a)
	x.active, x.reported = a, false
	x.mu.Unlock()
}

// endStep records that a step attempt ended. When none runs any more, a
// longer lease an attempt's timeout asked for ends too.
func (x *execution) endStep(a *storage.ActiveStep) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if i := slices.Index(x.running, a); i >= 0 {
		x.running = slices.Delete(x.running, i, i+1)
	}
	if x.active != a {
		return
	}
	x.active, x.reported = nil, false
	if n := len(x.running); n > 0 {
		x.active = x.running[n-1]
		return
	}
	x.holdUntil = time.Time{}
}

// lookup returns the run's checkpoint of key, if it has one.
func (x *execution) lookup(key string) (storage.Checkpoint, bool) {
	x.cpMu.Lock()
	defer x.cpMu.Unlock()
	cp, ok := x.checkpoints[key]
	if ok && x.replay != nil {
		x.replay.seen[key] = true
	}
	return cp, ok
}

// keep records cp as the run's checkpoint of its key.
func (x *execution) keep(cp storage.Checkpoint) {
	x.cpMu.Lock()
	x.checkpoints[cp.Key] = cp
	x.cpMu.Unlock()
}

// forget drops the checkpoint of key (a refused event's): the history
// no longer waits for a call of it.
func (x *execution) forget(key string) {
	x.cpMu.Lock()
	delete(x.checkpoints, key)
	x.history.ask(key)
	x.cpMu.Unlock()
}

func (x *execution) extended() {
	x.mu.Lock()
	x.lastExtend = x.engine.clock.Now()
	x.mu.Unlock()
}

// useKey marks a checkpoint key used in this execution and expands an
// autoversion key with its iteration. A non-autoversion key used twice is
// ErrDuplicateStep.
func (x *execution) useKey(key string, autoversion bool) (string, error) {
	if autoversion {
		i := x.counters[key]
		x.counters[key] = i + 1
		key = IterationKey(key, i)
	}
	if x.used[key] {
		return "", fmt.Errorf("%w: %q is called more than once in run %s; mark the step autoversion to call it in a loop", ErrDuplicateStep, key, x.lease.RunID)
	}
	x.used[key] = true
	if key == x.state.Key && !maps.Equal(x.state.Counters, x.countersOrNil()) {
		x.drift(key, fmt.Errorf("%w: run %s reached %q having made its numbered calls (autoversion steps, sleeps, waits) %s, but the run suspended there after %s: a loop ran another number of times", ErrNonDeterminism, x.lease.RunID, key, callCounts(x.counters), callCounts(x.state.Counters)))
	}
	return key, nil
}

// callCounts says how many times each numbered call was made, for a
// message: "pack@v1 3 times, pace 2 times", or "none".
func callCounts(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		n := m[k]
		if strings.HasSuffix(k, "#") { // a sleep's or wait's count is of its later calls
			k, n = strings.TrimSuffix(k, "#"), n+1
		}
		parts = append(parts, fmt.Sprintf("%s %d times", k, n))
	}
	return strings.Join(parts, ", ")
}

func (x *execution) countersOrNil() map[string]int {
	if len(x.counters) == 0 {
		return nil
	}
	return x.counters
}

// checkStopped begins every durable call. It unwinds the workflow goroutine
// if the run was stopped, or hands it back if the engine is shutting down.
// A durable call made while the goroutine unwinds (from a deferred
// function, once the run parked or stopped) ends it again at once: it
// neither runs nor writes anything, and the call is made again, with the
// run live, when the workflow's code reaches it in a later execution.
func (x *execution) checkStopped() {
	if x.unwinding.Load() {
		runtime.Goexit()
	}
	if x.keepsResult() {
		x.flush()
	}
	if x.ctx.Err() != nil {
		x.onStopped()
		x.unwind()
	}
	select {
	case <-x.stopping:
		x.quiesce()
		x.release()
		x.unwind()
	default:
	}
}

// unwind ends the workflow goroutine once this execution's outcome is
// settled (parked, paused, handed back, stopped or replayed to its end),
// marking it unwinding first so that durable calls in the workflow's
// defers do nothing (see checkStopped).
func (x *execution) unwind() {
	x.unwinding.Store(true)
	runtime.Goexit()
}

// keepsResult reports whether a step that just succeeded may write its
// checkpoint: the run is live, or only the engine's shutdown stops it.
func (x *execution) keepsResult() bool {
	cause := context.Cause(x.ctx)
	return cause == nil || errors.Is(cause, errShutdown)
}

// onStopped writes what a stopped run needs: nothing after a termination
// or a lease taken by another; a release when the engine shuts down; a
// letting go after a restart.
func (x *execution) onStopped() {
	if x.outcome != outcomeNone {
		return
	}
	cause := context.Cause(x.ctx)
	if errors.Is(cause, errShutdown) {
		x.quiesce()
		x.release()
		return
	}
	if errors.Is(cause, ErrDeadline) {
		x.finish(nil, cause)
		if x.outcome == outcomeNone {
			x.outcome = outcomeStopped
		}
		return
	}
	x.outcome = outcomeStopped
	if lettingGo(cause) {
		x.letGo(cause)
	}
}

// release hands the run back, ready now, for any worker.
func (x *execution) release() {
	now := x.engine.clock.Now()
	_, err := x.engine.store.Suspend(context.WithoutCancel(x.ctx), storage.SuspendRequest{
		Lease: x.lease, LeaseFor: x.engine.cfg.LeaseDuration, ReadyAt: &now,
	})
	if err != nil && !errors.Is(err, ErrLeaseLost) {
		x.logger().Warn("stem: release", "err", err)
	}
	x.outcome = outcomeReleased
}

// letGo hands back, best effort, a run this engine stopped executing for
// why: a failed store write (so another worker takes the run at once
// instead of at the lease's expiry), or a restart (whose new execution
// waits until the old holder lets go; see storage.Store.Restart). It first
// waits for this execution's step functions to return, until the lease
// would expire anyway, so the run is never handed over while one still
// runs. The release is fenced and bounded by letGoTimeout; when it fails,
// the lease's expiry hands the run over.
func (x *execution) letGo(why error) {
	x.mu.Lock()
	until := x.lastExtend.Add(x.leaseFor())
	x.mu.Unlock()
	returned := x.steps.none()
	expired, stop := storage.NewTimer(x.engine.clock, until.Sub(x.engine.clock.Now()))
	defer stop()
	select {
	case <-returned:
	case <-expired:
		x.logger().Warn("stem: a step still runs after its context was cancelled; the run waits for its lease to expire", "why", why)
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(x.ctx), letGoTimeout)
	defer cancel()
	now := x.engine.clock.Now()
	_, err := x.engine.store.Suspend(ctx, storage.SuspendRequest{
		Lease: x.lease, LeaseFor: x.engine.cfg.LeaseDuration, ReadyAt: &now,
	})
	switch {
	case err == nil:
		x.outcome = outcomeReleased
		x.engine.signal()
	case !errors.Is(err, ErrLeaseLost):
		x.logger().Warn("stem: hand over; the run waits for its lease to expire", "why", why, "err", err)
	}
}

// handBack hands back a run this engine cannot open, untouched: no
// checkpoint, attempt or error is written, and its wait and suspension
// state are kept. When it is sealed with a key other live workers hold
// (and serve its workflow), it is ready again at once, for them, and this
// engine leaves the workflow to them for a while (see lacksKey); else it
// is ready again a little later (not at once, so no engine spins on it).
// Why is logged once per run.
func (x *execution) handBack(err error) {
	e := x.engine
	readyAt := e.clock.Now().Add(e.handBackDelay())
	var holders []string
	if se := (*SealedError)(nil); errors.As(err, &se) && se.KeyID != "" {
		if holders = e.lacksKey(x.ctx, se.KeyID, x.workflow); len(holders) > 0 {
			readyAt = e.clock.Now()
		}
	}
	if _, warned := e.sealedRuns.LoadOrStore(x.lease.RunID, true); !warned {
		x.logger().Warn("stem: cannot open the run with this engine's codec; handing it back untouched for an engine that holds the key", "err", err, "holders", holders)
	}
	_, serr := e.store.Suspend(context.WithoutCancel(x.ctx), storage.SuspendRequest{
		Lease: x.lease, LeaseFor: e.cfg.LeaseDuration, ReadyAt: &readyAt, SuspendState: x.claim.SuspendState,
	})
	if serr != nil && !errors.Is(serr, ErrLeaseLost) {
		x.logger().Warn("stem: hand back", "err", serr)
	}
	e.signal() // its ready time may be sooner than the engine's next wake
	x.outcome, x.sealedErr = outcomeReleased, err
}

// opened returns cp opened for the replay; one this engine cannot open
// hands the run back and unwinds the workflow goroutine.
func (x *execution) opened(cp storage.Checkpoint) storage.Checkpoint {
	cp, err := x.engine.payloads.openCheckpoint(x.lease.RunID, cp)
	if err != nil {
		x.handBack(err)
		x.cancel(err)
		x.unwind()
	}
	return cp
}

// stop ends the execution after a store error: a lost lease writes nothing
// more (but lets a restart's new execution go); any other error hands the
// run back at once, best effort, for another worker.
func (x *execution) stop(err error) {
	if !errors.Is(err, ErrLeaseLost) {
		x.logger().Error("stem: store write failed; handing the run over", "err", err)
	}
	cause := x.lostCause(err)
	x.cancel(cause)
	x.outcome = outcomeStopped
	if lettingGo(cause) {
		x.letGo(cause)
	}
	x.unwind()
}

// checkpoint writes a checkpoint under the lease. It returns the stored
// checkpoint, and existed when another write of the key had won (an event
// delivered first). A lost lease or a pause taking effect unwinds the
// workflow goroutine.
func (x *execution) checkpoint(cp storage.Checkpoint, attempts []Attempt) (stored storage.Checkpoint, existed bool) {
	return x.writeCheckpoint(cp, attempts, false)
}

// writeCheckpoint is checkpoint on the workflow goroutine (async false) or
// on a step future's own (async true), where a failed write or a pause
// taking effect stops the run for the workflow goroutine to wind up and
// unwinds only the future's goroutine.
func (x *execution) writeCheckpoint(cp storage.Checkpoint, attempts []Attempt, async bool) (stored storage.Checkpoint, existed bool) {
	return x.writeWith(cp, attempts, async, nil)
}

// cpExtras is what a checkpoint write carries beside the checkpoint: a
// reply to an update, values appended to streams, search attributes set.
type cpExtras struct {
	reply   *storage.UpdateReply
	streams []storage.StreamWrite
	attrs   []storage.Attr
}

// writeWith is writeCheckpoint with extras, which are written in the same
// change, when the checkpoint is (never deferred).
func (x *execution) writeWith(cp storage.Checkpoint, attempts []Attempt, async bool, ex *cpExtras) (stored storage.Checkpoint, existed bool) {
	x.replay.reach(x, cp.Key)
	x.mu.Lock()
	busy := async || len(x.running) > 0
	x.mu.Unlock()
	if ex == nil && !busy && cp.Kind == KindStep && x.stepFutures == 0 && x.replay == nil {
		return x.deferStep(cp, attempts), false
	}
	x.flush()
	return x.putWith(cp, attempts, async, busy, nil, ex)
}

// put writes a checkpoint as writeCheckpoint does. For a deferred one
// (d), a checkpoint stored meanwhile under the key that differs from it
// stops the run: the workflow went on with a result the store does not
// hold, so the run is handed back to replay from what it does.
func (x *execution) put(cp storage.Checkpoint, attempts []Attempt, async, busy bool, d *deferredWrite) (stored storage.Checkpoint, existed bool) {
	return x.putWith(cp, attempts, async, busy, d, nil)
}

// putWith is put with extras (see writeWith).
func (x *execution) putWith(cp storage.Checkpoint, attempts []Attempt, async, busy bool, d *deferredWrite, ex *cpExtras) (stored storage.Checkpoint, existed bool) {
	req := storage.CheckpointRequest{
		Lease: x.lease, LeaseFor: x.engine.cfg.LeaseDuration, Checkpoint: cp, Attempts: attempts, Progress: x.takeProgress(),
		Busy: busy,
	}
	if ex != nil {
		req.Reply, req.Streams, req.Attributes = ex.reply, ex.streams, ex.attrs
	}
	res, err := x.engine.store.Checkpoint(context.WithoutCancel(x.ctx), req)
	if err != nil {
		x.fault(err, async)
	}
	if ex != nil && res.Existing == nil {
		x.announce(ex)
	}
	return x.landed(res, cp, async, d)
}

// announce wakes this engine's callers waiting on the reply or the
// streams a write carried (the store announces them to other processes).
func (x *execution) announce(ex *cpExtras) {
	run := x.lease.RunID
	if ex.reply != nil {
		x.engine.waiters.wake(storage.UpdateAnnouncement(run, ex.reply.ID))
	}
	for _, w := range ex.streams {
		x.engine.waiters.wake(storage.StreamAnnouncement(run, w.Stream))
	}
}

// landed takes in what the store did with checkpoint cp (res), written by
// put or with a transactional step's attempt.
func (x *execution) landed(res storage.CheckpointResult, cp storage.Checkpoint, async bool, d *deferredWrite) (stored storage.Checkpoint, existed bool) {
	if d != nil && res.Existing != nil && !d.same(*res.Existing) {
		x.fault(d.overtaken(x.lease.RunID), async)
	}
	x.extended()
	if res.PauseRequested {
		x.notePause(storage.HeartbeatResult{PauseRequested: true})
	}
	if res.CancelRequested && cp.Kind != KindCancel {
		x.noteCancel("", true)
	}
	if res.Existing != nil {
		cp = *res.Existing
	}
	if res.Existing != nil || cp.Kind == KindChild {
		// Written by another (an event delivered first), or carrying a
		// child's output sealed by the child's engine: it may not open here.
		if async {
			opened, err := x.engine.payloads.openCheckpoint(x.lease.RunID, cp)
			if err != nil {
				x.fault(err, true)
			}
			cp = opened
		} else {
			cp = x.opened(cp)
		}
	}
	x.keep(cp)
	if res.Paused {
		x.cancel(ErrLeaseLost)
		if !async {
			x.outcome = outcomePaused
			x.unwind()
		}
		runtime.Goexit()
	}
	return cp, res.Existing != nil
}

// fault stops the run after a failed store write: on the workflow
// goroutine as stop does; on a future's goroutine by cancelling the
// execution with the write's cause, which the workflow goroutine winds up
// at its next step boundary, and unwinding the future's goroutine.
func (x *execution) fault(err error, async bool) {
	if !async {
		x.stop(err)
	}
	if !errors.Is(err, ErrLeaseLost) {
		x.logger().Error("stem: store write failed; handing the run over", "err", err)
	}
	x.cancel(x.lostCause(err))
	runtime.Goexit()
}

// waiting tells Hooks.Wait, when set, of a sleep or wait the run begins
// at key: on the topics of w's cases, until the time given (nil: none).
func (x *execution) waiting(key string, kind StepKind, w *storage.Wait, until *time.Time) {
	h := x.engine.hooks.Wait
	if h == nil || x.replay != nil {
		return
	}
	hw := HookWait{RunID: x.lease.RunID, Workflow: x.workflow, Key: key, Kind: kind, Topics: w.Topics()}
	if until != nil {
		hw.Until = *until
	}
	h(x.ctx, hw)
}

// suspend parks the run at key and unwinds the workflow goroutine. If the
// request has a wait that the store satisfies at once, suspend returns the
// delivered checkpoint instead.
//
// Every future of the run still waiting on an event or a child rides with
// the suspension as a further case of its wait, so whatever arrives first
// wakes the run; one delivered at once is kept for its future and the run
// suspends again. Step futures settle first: no run parks while one of its
// steps runs. The run's deadline bounds ReadyAt.
func (x *execution) suspend(key string, req storage.SuspendRequest) storage.Checkpoint {
	return x.park(key, req, false)
}

// park is suspend; with anyCase, a delivery at once to any case (a
// future's) returns too, for a caller waiting on futures.
func (x *execution) park(key string, req storage.SuspendRequest, anyCase bool) storage.Checkpoint {
	if key != "" { // an await's park is checked by waitAny, which names it
		x.frontier(key, callSync)
	}
	x.replay.reach(x, key)
	x.quiesce()
	x.flush()
	own := req.Wait
	for {
		req.Wait = x.withFutureCases(own)
		if req.Refuse == nil && x.refusal != nil && req.Wait.HasKey(x.refusal.Key) {
			req.Refuse, x.refusal = x.refusal, nil
		}
		state, _ := json.Marshal(suspendState{Key: key, Counters: x.countersOrNil(), Futures: x.futureKeys(), Deadlines: x.waitDeadlines(own)})
		req.Lease = x.lease
		req.LeaseFor = x.engine.cfg.LeaseDuration
		req.SuspendState = state
		req.CancelSeen = x.cancelSeen()
		req.Progress = x.takeProgress()
		if d := x.deadline; d != nil && (req.ReadyAt == nil || d.Before(*req.ReadyAt)) {
			req.ReadyAt = d
		}
		res, err := x.engine.store.Suspend(context.WithoutCancel(x.ctx), req)
		if err != nil {
			x.stop(err)
		}
		if res.Delivered == nil {
			break
		}
		x.extended()
		cp := x.opened(*res.Delivered)
		x.keep(cp)
		req.Refuse = nil
		if anyCase || own != nil && cp.Key == own.Key {
			x.unquiesce()
			return cp
		}
		// Another case's (a future's): kept for it; suspend again.
	}
	x.outcome = outcomeSuspended
	if req.ReadyAt != nil {
		// Ready now: claim it. Ready later: the engine's next wake time
		// may now be sooner than the one it sleeps until.
		x.engine.signal()
	}
	x.unwind()
	panic("unreachable")
}

// stepCount counts an execution's step functions running. Unlike a
// WaitGroup it may count up while someone waits for none: a step future's
// attempt may begin as the run is being let go.
type stepCount struct {
	mu   sync.Mutex
	n    int
	idle chan struct{} // closed when n comes down to 0
}

func (s *stepCount) add() {
	s.mu.Lock()
	s.n++
	s.mu.Unlock()
}

func (s *stepCount) done() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n--; s.n == 0 && s.idle != nil {
		close(s.idle)
		s.idle = nil
	}
}

// none returns a channel closed once no step function runs.
func (s *stepCount) none() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n == 0 {
		c := make(chan struct{})
		close(c)
		return c
	}
	if s.idle == nil {
		s.idle = make(chan struct{})
	}
	return s.idle
}

// hasChildren reports whether the run may have children of this
// execution or one before: it started one, its history holds a child
// call, or it was parked awaiting one. A run without is completed without a search for children.
func (x *execution) hasChildren() bool {
	x.cpMu.Lock()
	defer x.cpMu.Unlock()
	if x.startedChild {
		return true
	}
	for _, c := range x.claim.Wait.Cases() {
		if c.Kind == KindChild {
			return true // parked awaiting a child, and woken by something else
		}
	}
	for _, cp := range x.checkpoints {
		if cp.Kind == KindChild {
			return true
		}
	}
	return false
}
