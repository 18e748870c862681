package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"runtime"
	"runtime/debug"
	"sync"
	"time"

	"github.com/stemflow/stem/storage"
)

// activeStepAfter is how long a step attempt runs before the heartbeat
// reports it to the store, so operators see it running. A step that ends
// sooner costs no store call for it.
const activeStepAfter = time.Second

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

	checkpoints map[string]storage.Checkpoint
	// pending holds, per key without a checkpoint, the last attempt
	// recorded in this execution (by this worker or one before it), so a
	// step's attempt numbers and retry budget go on across hand-overs.
	pending  map[string]storage.Attempt
	used     map[string]bool
	counters map[string]int
	state    suspendState // from the last suspension

	mu         sync.Mutex
	lastExtend time.Time
	outcome    outcome
	log        *slog.Logger
	// active is the step attempt running now, and reported whether the
	// heartbeat has told the store about it.
	active   *storage.ActiveStep
	reported bool
}

type outcome int

const (
	outcomeNone      outcome = iota
	outcomeSuspended         // parked in the store
	outcomeStopped           // lease lost, terminated or paused: nothing more to write
	outcomeReleased          // handed back for another worker
	outcomeFinished          // completed or errored by the execution itself
)

// suspendState is what the engine stores with a suspension: the key it
// suspended at and the autoversion counters reached, so a replay that reaches
// that key with different counts is caught as non-deterministic.
type suspendState struct {
	Key      string         `json:"key"`
	Counters map[string]int `json:"counters,omitempty"`
}

// logger returns the execution's logger, built with the execution: the
// heartbeat and workflow goroutines both log.
func (x *execution) logger() *slog.Logger { return x.log }

// execute runs one claimed run until it completes, suspends or stops.
func (e *Engine) execute(parent context.Context, r storage.ClaimedRun) {
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(parent))
	x := &execution{
		engine:     e,
		claim:      r,
		lease:      r.Lease,
		workflow:   r.Workflow,
		ctx:        ctx,
		cancel:     cancel,
		stopping:   make(chan struct{}),
		log:        e.log.With("run", r.Lease.RunID, "workflow", r.Workflow),
		used:       map[string]bool{},
		counters:   map[string]int{},
		lastExtend: time.Now(),
	}
	defer cancel(nil)

	e.mu.Lock()
	e.active[r.Lease.RunID] = x
	e.mu.Unlock()
	defer func() {
		e.mu.Lock()
		if e.active[r.Lease.RunID] == x {
			delete(e.active, r.Lease.RunID)
		}
		e.mu.Unlock()
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
	def, err := e.registered(r.Workflow)
	if err != nil {
		x.release()
		return
	}
	replay, err := e.store.LoadReplay(ctx, r.Lease.RunID)
	if err != nil {
		x.logger().Error("stem: load checkpoints", "err", err)
		x.release()
		return
	}
	x.checkpoints = make(map[string]storage.Checkpoint, len(replay.Checkpoints))
	for _, cp := range replay.Checkpoints {
		x.checkpoints[cp.Key] = cp
	}
	x.pending = make(map[string]storage.Attempt, len(replay.Pending))
	for _, a := range replay.Pending {
		if a.Number > x.pending[a.Key].Number {
			x.pending[a.Key] = a
		}
	}
	if len(r.SuspendState) > 0 {
		_ = json.Unmarshal(r.SuspendState, &x.state)
	}

	hbDone := make(chan struct{})
	go x.heartbeat(hbDone)
	defer close(hbDone)

	var (
		out      []byte
		runErr   error
		returned bool
	)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() {
			if p := recover(); p != nil {
				runErr = &StepError{Message: fmt.Sprintf("workflow panicked: %v\n%s", p, debug.Stack()), Code: storage.CodePanic}
				returned = true
			}
		}()
		out, runErr = def.run(&WorkflowContext{exec: x}, r.Input)
		returned = true
	}()
	<-done

	if !returned {
		// The workflow goroutine unwound: suspended or stopped.
		return
	}
	if cause := context.Cause(x.ctx); cause != nil && !errors.Is(cause, errShutdown) {
		// Terminated or lease lost while finishing: write nothing. (A run
		// that finished while the engine shuts down still completes.)
		x.outcome = outcomeStopped
		return
	}
	x.finish(out, runErr)
}

// finish completes the run with its output or error.
func (x *execution) finish(out []byte, runErr error) {
	e := x.engine
	req := storage.CompleteRequest{Lease: x.lease, Status: StatusComplete, Output: out}
	if runErr != nil {
		req.Status = StatusErrored
		req.Output = nil
		req.Error = e.payloads.sealInfo(errorInfo(runErr))
	}
	req.Notify = parentNotice(x.claim.ParentID, x.lease.RunID, e.payloads.newChildOutcome(req.Output, req.Error))
	if err := e.store.Complete(context.WithoutCancel(x.ctx), req); err != nil {
		if !errors.Is(err, ErrLeaseLost) {
			x.logger().Error("stem: complete", "err", err)
		}
		return
	}
	x.outcome = outcomeFinished
	e.notifyFinished()
	if req.Notify != nil {
		e.signal()
	}
}

// heartbeat extends the lease while the run executes, unless a write did so
// recently.
func (x *execution) heartbeat(done <-chan struct{}) {
	lease := x.engine.cfg.LeaseDuration
	t := time.NewTicker(min(lease/4, activeStepAfter/4))
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-x.ctx.Done():
			return
		case <-t.C:
		}
		x.mu.Lock()
		stale := time.Since(x.lastExtend) >= lease/4
		var step *storage.ActiveStep
		if a := x.active; a != nil && !x.reported && x.engine.clock.Now().Sub(a.Started) >= activeStepAfter {
			step, x.reported = a, true
		}
		x.mu.Unlock()
		if !stale && step == nil {
			continue
		}
		if err := x.engine.store.Heartbeat(x.ctx, storage.HeartbeatRequest{Lease: x.lease, LeaseFor: lease, Step: step}); err != nil {
			if errors.Is(err, ErrLeaseLost) {
				x.cancel(ErrLeaseLost)
				return
			}
			if x.ctx.Err() == nil {
				x.logger().Warn("stem: heartbeat", "err", err)
			}
			continue
		}
		x.extended()
	}
}

// setActive records the step attempt running now (nil when none).
func (x *execution) setActive(a *storage.ActiveStep) {
	x.mu.Lock()
	x.active, x.reported = a, false
	x.mu.Unlock()
}

func (x *execution) extended() {
	x.mu.Lock()
	x.lastExtend = time.Now()
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
		x.fail(fmt.Errorf("%w: run %s reached %q with autoversion counts %v, but suspended there with %v", ErrNonDeterminism, x.lease.RunID, key, x.counters, x.state.Counters))
	}
	return key, nil
}

func (x *execution) countersOrNil() map[string]int {
	if len(x.counters) == 0 {
		return nil
	}
	return x.counters
}

// checkStopped unwinds the workflow goroutine if the run was stopped, or
// hands it back if the engine is shutting down.
func (x *execution) checkStopped() {
	if x.ctx.Err() != nil {
		x.onStopped()
		runtime.Goexit()
	}
	select {
	case <-x.stopping:
		x.release()
		runtime.Goexit()
	default:
	}
}

// keepsResult reports whether a step that just succeeded may write its
// checkpoint: the run is live, or only the engine's shutdown stops it.
func (x *execution) keepsResult() bool {
	cause := context.Cause(x.ctx)
	return cause == nil || errors.Is(cause, errShutdown)
}

// onStopped writes what a stopped run needs: nothing after a lost lease or a
// termination; a release when the engine shuts down.
func (x *execution) onStopped() {
	if x.outcome != outcomeNone {
		return
	}
	if errors.Is(context.Cause(x.ctx), errShutdown) {
		x.release()
		return
	}
	x.outcome = outcomeStopped
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

// stop ends the execution after a store error: a lost lease writes nothing
// more; any other error leaves the run to its lease, which expires and lets
// another worker take it.
func (x *execution) stop(err error) {
	if !errors.Is(err, ErrLeaseLost) {
		x.logger().Error("stem: store write failed; leaving the run to its lease", "err", err)
	}
	x.outcome = outcomeStopped
	x.cancel(err)
	runtime.Goexit()
}

// fail ends the run as errored from inside the workflow goroutine.
func (x *execution) fail(err error) {
	x.finish(nil, err)
	if x.outcome != outcomeFinished {
		x.outcome = outcomeStopped
	}
	runtime.Goexit()
}

// checkpoint writes a checkpoint under the lease. It returns the stored
// checkpoint, and existed when another write of the key had won (an event
// delivered first). A lost lease or a pause taking effect unwinds the
// workflow goroutine.
func (x *execution) checkpoint(cp storage.Checkpoint, attempts []Attempt) (stored storage.Checkpoint, existed bool) {
	res, err := x.engine.store.Checkpoint(context.WithoutCancel(x.ctx), storage.CheckpointRequest{
		Lease: x.lease, LeaseFor: x.engine.cfg.LeaseDuration, Checkpoint: cp, Attempts: attempts,
	})
	if err != nil {
		x.stop(err)
	}
	x.extended()
	if res.Existing != nil {
		cp = *res.Existing
	}
	x.checkpoints[cp.Key] = cp
	if res.Paused {
		x.outcome = outcomeStopped
		x.cancel(ErrLeaseLost)
		runtime.Goexit()
	}
	return cp, res.Existing != nil
}

// suspend parks the run at key and unwinds the workflow goroutine. If the
// request has a wait that the store satisfies at once, suspend returns the
// delivered checkpoint instead.
func (x *execution) suspend(key string, req storage.SuspendRequest) storage.Checkpoint {
	state, _ := json.Marshal(suspendState{Key: key, Counters: x.countersOrNil()})
	req.Lease = x.lease
	req.LeaseFor = x.engine.cfg.LeaseDuration
	req.SuspendState = state
	res, err := x.engine.store.Suspend(context.WithoutCancel(x.ctx), req)
	if err != nil {
		x.stop(err)
	}
	if res.Delivered != nil {
		x.extended()
		x.checkpoints[res.Delivered.Key] = *res.Delivered
		return *res.Delivered
	}
	x.outcome = outcomeSuspended
	if req.ReadyAt != nil && !req.ReadyAt.After(x.engine.clock.Now()) {
		x.engine.signal()
	}
	runtime.Goexit()
	panic("unreachable")
}
