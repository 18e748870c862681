package runtime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"reflect"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/stemflow/stem/storage"
)

// StepOptions is a step's execution policy, and what its checkpoint
// records of its call. The zero value runs one attempt with no timeout and
// records no input.
type StepOptions struct {
	// Retries is how many times a failed attempt is retried: a step runs at
	// most Retries+1 times. RetryForever retries until an attempt succeeds.
	// An error wrapped with Permanent is not retried. Other negative values
	// are invalid: the step call returns an error matching
	// ErrInvalidArgument.
	Retries int
	// Backoff is the delay before the first retry, doubled for each later
	// one and capped by MaxBackoff. Default 100ms. The wait is randomized
	// by Jitter: with the default, a delay d waits between d/2 and d. A
	// retry due later than Config.ParkRetriesAfter parks the run on the
	// store's timer and frees the worker meanwhile (a step future's retry
	// waits on the worker; see Config.ParkRetriesAfter).
	Backoff time.Duration
	// Jitter is the fraction of each backoff delay that is randomized, from
	// 0 to 1: a delay d waits between d*(1-Jitter) and d, so that retries
	// of many runs failing together spread out. Zero means DefaultJitter
	// (0.5); NoJitter waits exact delays. Other values outside (0, 1] are
	// invalid: the step call returns an error matching ErrInvalidArgument.
	Jitter float64
	// MaxBackoff caps the delay. Default 1m.
	MaxBackoff time.Duration
	// Timeout bounds each attempt; the attempt's context is cancelled and the
	// attempt fails when it passes. Zero: no limit. A timeout longer than the
	// engine's LeaseDuration extends the run's lease before each attempt,
	// to the timeout plus a LeaseDuration, so the attempt keeps its lease
	// even when heartbeats are off or fail (a worker that dies meanwhile is
	// then replaced only after that long).
	Timeout time.Duration
	// Autoversion lets the step run many times in one run: its calls get the
	// keys key#0, key#1, ... by call order.
	Autoversion bool
	// Input is what the step is given, for operators: encoded as JSON,
	// sealed by the engine's codec as outputs are, and written with the
	// step's checkpoint (StepInfo.Input; the dashboard shows it). It is
	// encoded once per call that runs the step, before its first
	// attempt, never on a replay. Generated code passes the step's
	// arguments: the argument of a step of one, a slice of them in
	// order for a step of several. Nil records nothing. An input that
	// does not encode, or encodes larger than Config.MaxPayloadBytes, is
	// not recorded, and the step runs all the same: its checkpoint notes
	// why instead (StepInfo.InputNote), and the engine logs a warning.
	Input any
	// tx is the transaction type a transactional step takes (TxStep), nil
	// for a step that is not one.
	tx reflect.Type
}

// RetryForever, as StepOptions.Retries, retries a failed step until an
// attempt succeeds or fails with a Permanent error, however many attempts
// that takes. Its backoff stays capped by StepOptions.MaxBackoff.
const RetryForever = -1

// DefaultJitter is the fraction of a retry's backoff that is randomized
// when StepOptions.Jitter is zero: a delay d waits between d/2 and d.
const DefaultJitter = 0.5

// DefaultParkRetriesAfter is Config.ParkRetriesAfter when zero: a retry
// due more than a second later parks its run and frees the worker.
const DefaultParkRetriesAfter = time.Second

// NoJitter, as StepOptions.Jitter, makes retries wait exactly their backoff
// delays.
const NoJitter = -1.0

// check reports options no step can run with, as an error matching
// ErrInvalidArgument.
func (o StepOptions) check() error {
	if o.Retries < RetryForever {
		return fmt.Errorf("%w: StepOptions.Retries %d (want RetryForever or at least 0)", ErrInvalidArgument, o.Retries)
	}
	if o.Jitter != NoJitter && !(o.Jitter >= 0 && o.Jitter <= 1) {
		return fmt.Errorf("%w: StepOptions.Jitter %v (want 0 to 1, or NoJitter)", ErrInvalidArgument, o.Jitter)
	}
	return nil
}

// StepContext is what a step function receives: a context.Context that is
// cancelled when the attempt times out or the run stops on this worker, and
// facts about the call. context.Cause tells why: ErrTerminated or
// ErrRestarted (by this engine or, within a heartbeat, by another
// process), ErrLeaseLost (another worker took the run), ErrCanceled (the
// workflow cancelled the step's future: Future.Cancel, SelectCancel), or
// the engine shutting down. A pause does not cancel a running step: it
// takes effect at the next step boundary.
type StepContext interface {
	context.Context
	// RunID returns the run's ID.
	RunID() string
	// Workflow returns the workflow's durable name.
	Workflow() string
	// Key returns the step's checkpoint key, expanded for autoversion
	// ("pack@v1#3").
	Key() string
	// Attempt returns the attempt number, from 1.
	Attempt() int
	// Iteration returns the autoversion iteration (0 for other steps).
	Iteration() int
	// IdempotencyKey returns "<workflow>/<runID>/<key>[/<scope>]": the same
	// on every retry and after every crash, different for each autoversion
	// iteration. Pass it to outside services that deduplicate requests.
	IdempotencyKey(scope string) string
	// Logger returns a logger that names the run and step.
	Logger() *slog.Logger
}

// IdempotencyKey returns the idempotency key a step with the given expanded
// checkpoint key sees in a run: "<workflow>/<runID>/<stepKey>[/<scope>]".
// Use it outside a run to reconcile with the services a step called.
func IdempotencyKey(workflow, runID, stepKey, scope string) string {
	k := workflow + "/" + runID + "/" + stepKey
	if scope != "" {
		k += "/" + scope
	}
	return k
}

// IterationKey returns the expanded checkpoint key of iteration i of an
// autoversion step keyed key: "pack@v1" and 3 give "pack@v1#3". The runtime
// keys autoversion calls with it, and generated code builds its keys with it.
func IterationKey(key string, i int) string {
	return key + "#" + strconv.Itoa(i)
}

type stepContext struct {
	context.Context
	x         *execution
	key       string
	attempt   int
	iteration int
	// tx is a transactional step's transaction (TxStep), nil otherwise.
	tx any
	// streams holds the attempt's appends to the run's streams
	// (AppendInStep), written with its checkpoint.
	streams stepStreams
}

func (s *stepContext) RunID() string    { return s.x.lease.RunID }
func (s *stepContext) Workflow() string { return s.x.workflow }
func (s *stepContext) Key() string      { return s.key }
func (s *stepContext) Attempt() int     { return s.attempt }
func (s *stepContext) Iteration() int   { return s.iteration }
func (s *stepContext) IdempotencyKey(scope string) string {
	return IdempotencyKey(s.x.workflow, s.x.lease.RunID, s.key, scope)
}
func (s *stepContext) Logger() *slog.Logger {
	return s.x.logger().With("step", s.key, "attempt", s.attempt)
}

// Step runs fn as the step with checkpoint key (conventionally
// "name@vN"), or returns its checkpointed result if it completed before. A
// failed attempt is retried by opts; a step that exhausts its retries
// checkpoints its failure, so a replay returns the same error (as a
// *StepError that keeps errors.Is working for the package's sentinels).
func Step[T any](c *WorkflowContext, key string, opts StepOptions, fn func(sc StepContext) (T, error)) (T, error) {
	return runStep(c, key, opts, fn, false)
}

// Do runs fn as a step that returns no value; see Step. Its completion is a
// checkpoint like any other, so it does not run again on replay.
func Do(c *WorkflowContext, key string, opts StepOptions, fn func(sc StepContext) error) error {
	_, err := runStep(c, key, opts, func(sc StepContext) (struct{}, error) { return struct{}{}, fn(sc) }, true)
	return err
}

func runStep[T any](c *WorkflowContext, key string, opts StepOptions, fn func(sc StepContext) (T, error), void bool) (T, error) {
	var zero T
	x := c.exec
	x.checkStopped()
	if err := storage.CheckStepKey(key); err != nil {
		return zero, err
	}
	if err := opts.check(); err != nil {
		return zero, err
	}
	full, err := x.useCallKey(key, opts.Autoversion, asStep)
	if err != nil {
		return zero, err
	}
	cp, ok, err := x.begin(c.detached, "step:"+full, full)
	if err != nil {
		return zero, err
	}
	if ok {
		return decodeRecorded[T](x, cp)
	}
	out, cp, fresh := attempts(x, nil, full, iterationOf(x, key, opts), x.pending[full], opts, fn, void, false, c.detached)
	if fresh {
		return out, nil
	}
	return decodeCheckpoint[T](x, cp)
}

// iterationOf is the iteration of the call of the step keyed key just
// made (0 for a step that is not autoversion).
func iterationOf(x *execution, key string, opts StepOptions) int {
	if opts.Autoversion {
		return x.counters[key] - 1
	}
	return 0
}

// attempts runs a step's attempts, after last (the latest recorded in this
// execution, if any), until one succeeds or the step fails for good, and
// writes its checkpoint. It returns the checkpoint as stored and, when
// fresh, the output of the attempt that wrote it. On the workflow goroutine
// (async false) a stop unwinds it as every step boundary does; on a step
// future's goroutine (async true) a stop unwinds only that goroutine, and
// the workflow goroutine winds the run up at its next boundary. A step
// future's attempts run under fctx, its own context: once the future is
// cancelled (Future.Cancel) its attempt is abandoned, no retry follows and
// its goroutine ends writing nothing (Cancel writes the cancellation).
// Unless detached (made on the detached context), the run's cancellation
// stops the step: its running attempt's context is cancelled, and a
// failure after it, or a retry due after it, is the step's outcome, an
// error matching ErrCanceled.
func attempts[T any](x *execution, fctx context.Context, full string, iteration int, last storage.Attempt, opts StepOptions, fn func(sc StepContext) (T, error), void, async, detached bool) (out T, stored storage.Checkpoint, fresh bool) {
	x.replay.reach(x, full)
	e := x.engine
	input := x.stepInput(full, opts.Input)
	if opts.Timeout <= 0 {
		base, _, _ := strings.Cut(full, "#") // once per step, not per iteration
		e.warnUnheld(x.workflow, base)
	}
	// A step future's attempt holds one of the run's slots from its start
	// until its outcome is written, so that the run parks only when none
	// is in progress (see execution.quiesce).
	held := false
	release := func() {
		if held {
			x.releaseSlot()
			held = false
		}
	}
	defer release()
	// Attempts recorded before a hand-over count: the numbers go on and the
	// retry budget is not granted again. A retry whose backoff was recorded
	// waits until its due time, on this worker as on the one before.
	ctx := x.stepBase(detached)
	if fctx != nil {
		ctx = fctx
	}
	if last.RetryAt != nil {
		x.retryWait(fctx, full, *last.RetryAt, async, detached)
	}
	for attempt := last.Number + 1; ; attempt++ {
		if !detached && x.cancelSeen() {
			// Cancelled while it waited to retry: not retried.
			err := x.canceledStep(full, nil)
			cp, _ := x.writeCheckpoint(storage.Checkpoint{Key: full, Kind: KindStep, Input: input, Error: e.payloads.sealInfo(errorInfo(err))}, nil, async)
			release()
			var zero T
			return zero, cp, false
		}
		if async {
			x.acquireSlot(fctx)
			held = true
		}
		start := e.clock.Now()
		if !async {
			x.parkIfPaused(full, start)
		}
		active := &storage.ActiveStep{Key: full, Attempt: attempt, Started: start}
		x.beginStep(active)
		if opts.Timeout > e.cfg.LeaseDuration {
			x.holdFor(active, opts.Timeout)
		}
		var r attemptResult[T]
		if h := e.hooks.Attempt; h != nil {
			r = hookedAttempt(ctx, h, x, full, iteration, attempt, start, async, active, opts, input, fn, void)
		} else {
			r = attemptOnce(ctx, x, full, iteration, attempt, active, opts, input, fn, void, async)
		}
		out, err, output, end, retryAt := r.out, r.err, r.output, r.end, r.retryAt
		if err != nil && canceledFuture(fctx) {
			// Cancelled by the workflow, which writes the cancellation:
			// no retry, nothing recorded here. (A success is written as
			// usual: cancel is a request, and the first write wins.)
			release()
			runtime.Goexit()
		}
		if err == nil && !x.keepsResult() || err != nil && x.ctx.Err() != nil {
			// An attempt that ended while the engine shuts down still has
			// its lease: a success writes its checkpoint, a failure of its
			// own (the run's context still live, within ShutdownGrace) its
			// attempt, so a deploy grants no attempt again; the run is
			// released at the next step boundary or backoff. A failure
			// after the run's context was cancelled is not recorded (it
			// may be the cancellation); a terminated run or a lost lease
			// writes nothing more.
			x.boundary(async)
		}
		a := Attempt{Key: full, Number: attempt, Started: start, Ended: end}
		if err == nil && r.written != nil {
			cp, existed := x.landed(*r.written, storage.Checkpoint{Key: full, Kind: KindStep, Output: output, Input: input}, async, nil)
			release()
			return out, cp, !existed
		}
		if err == nil {
			var ex *cpExtras
			if len(r.streams) > 0 {
				ex = &cpExtras{streams: r.streams}
			}
			cp, existed := x.writeWith(storage.Checkpoint{Key: full, Kind: KindStep, Output: output, Input: input}, []Attempt{a}, async, ex)
			release()
			return out, cp, !existed
		}
		a.Error = e.payloads.sealText(err.Error())
		if !detached && x.cancelSeen() {
			// Stopped by the run's cancellation, or failed after it: the
			// step's outcome is the cancellation, not retried.
			err, retryAt = x.canceledStep(full, err), time.Time{}
		}
		if retryAt.IsZero() {
			cp, _ := x.writeCheckpoint(storage.Checkpoint{Key: full, Kind: KindStep, Input: input, Error: e.payloads.sealInfo(errorInfo(err))}, []Attempt{a}, async)
			release()
			var zero T
			return zero, cp, false
		}
		at := retryAt // its own variable: taking retryAt's address would move it to the heap for every attempt
		a.RetryAt = &at
		if !async {
			x.flush()
		}
		if err := e.store.RecordAttempts(context.WithoutCancel(x.ctx), storage.RecordAttemptsRequest{Lease: x.lease, LeaseFor: e.cfg.LeaseDuration, Attempts: []Attempt{a}}); err != nil {
			x.fault(err, async)
		}
		x.extended()
		release()
		x.retryWait(fctx, full, retryAt, async, detached)
	}
}

// formatNote marks a step's stored input that was not recorded: sealMagic,
// formatNote, then the note that says why (sealed as error texts are).
// No codec's frame uses it, so an input is either JSON, a sealed payload,
// or a note.
const formatNote = 'n'

// stepInput encodes a step's input (StepOptions.Input) for its checkpoint,
// as outputs are: JSON, size-checked, sealed. Nil gives nil. An input that
// does not encode or is over the payload limit gives a note saying so
// instead, and a warning in the log: recording is for operators, and
// never fails the step.
func (x *execution) stepInput(key string, in any) []byte {
	if in == nil {
		return nil
	}
	p := x.engine.payloads
	b, err := p.encode("input of step "+key, in)
	if err == nil {
		return b
	}
	x.logger().Warn("stem: a step's input is not recorded with its checkpoint", "step", key, "err", err)
	note := p.sealText("not recorded: " + strings.TrimPrefix(err.Error(), "stem: "))
	out := make([]byte, 0, len(sealMagic)+1+len(note))
	return append(append(append(out, sealMagic...), formatNote), note...)
}

// inputNote returns the note a stored input holds instead of the input,
// still sealed, and whether it holds one.
func inputNote(stored []byte) (string, bool) {
	if len(stored) < len(sealMagic)+2 || string(stored[:len(sealMagic)]) != sealMagic || stored[len(sealMagic)] != formatNote {
		return "", false
	}
	return string(stored[len(sealMagic)+1:]), true
}

// canceledFuture reports whether fctx, a step future's context (nil on
// the workflow goroutine), was cancelled by Future.Cancel (whose cause is
// ErrCanceled itself; the run's cancellation's wraps it).
func canceledFuture(fctx context.Context) bool {
	return fctx != nil && context.Cause(fctx) == ErrCanceled
}

// attemptResult is how an attempt ended: its output (encoded, unless the
// step is void), its error, when it ended, and, for a failure that is to
// be retried, when.
type attemptResult[T any] struct {
	out     T
	err     error
	output  []byte
	end     time.Time
	retryAt time.Time
	// written is what the store did with a transactional step's
	// checkpoint, written with the attempt's success (attemptTx).
	written *storage.CheckpointResult
	// streams are a successful attempt's appends to the run's streams.
	streams []storage.StreamWrite
}

// anyTx is the transaction type of a TxStep[T, any], which runs on any
// store's transactions.
var anyTx = reflect.TypeFor[any]()

// attemptTx makes an attempt of a transactional step: the store calls fn
// in a transaction of its own and writes the step's checkpoint in it with
// the attempt, both committed together or neither (see
// storage.TxStore.CheckpointTx). A failure rolled back is the attempt's
// error, retried as any step's; a store that cannot run it fails the step
// for good.
func attemptTx[T any](ctx context.Context, x *execution, full string, iteration, attempt int, active *storage.ActiveStep, opts StepOptions, input []byte, fn func(sc StepContext) (T, error), void, async bool) (r attemptResult[T]) {
	e := x.engine
	ts, ok := e.cfg.Store.(storage.TxStore)
	switch {
	case !ok:
		r.err = Permanent(fmt.Errorf("%w: step %q is transactional (it takes a %v) and the engine's store (%T) has no transactions; Postgres (pgstore) and SQLite (sqlitestore) run such steps", ErrInvalidArgument, full, opts.tx, e.cfg.Store))
	case opts.tx != anyTx && ts.TxType() != opts.tx:
		r.err = Permanent(fmt.Errorf("%w: step %q takes a %v and the engine's store (%T) runs steps in a %v", ErrInvalidArgument, full, opts.tx, e.cfg.Store, ts.TxType()))
	}
	if r.err != nil {
		x.endStep(active)
		r.end = e.clock.Now()
		return r
	}
	if !async {
		x.flush() // the run's deferred write lands before this one
	}
	x.mu.Lock()
	busy := async || len(x.running) > 0
	x.mu.Unlock()
	attempts := []Attempt{{Key: full, Number: attempt, Started: active.Started}}
	req := storage.CheckpointRequest{Lease: x.lease, LeaseFor: e.cfg.LeaseDuration,
		Checkpoint: storage.Checkpoint{Key: full, Kind: KindStep, Input: input}, Attempts: attempts, Progress: x.takeProgress(), Busy: busy}
	var stepErr error
	res, err := ts.CheckpointTx(context.WithoutCancel(x.ctx), req, func(txCtx context.Context, tx any) ([]byte, error) {
		var writes []storage.StreamWrite
		r.out, stepErr = callStep(ctx, x, full, iteration, attempt, opts.Timeout, fn, async, tx, &writes)
		if stepErr == nil && len(writes) > 0 {
			stepErr = Permanent(fmt.Errorf("%w: transactional step %q appended to a stream; append from the workflow, or from a step that is not transactional", ErrInvalidArgument, full))
		}
		x.endStep(active)
		r.end = e.clock.Now()
		attempts[0].Ended = r.end
		if stepErr == nil && !void {
			if r.output, stepErr = e.payloads.encode("output of step "+full, r.out); stepErr != nil {
				stepErr = Permanent(stepErr)
			}
		}
		if stepErr != nil {
			return nil, stepErr
		}
		return r.output, nil
	})
	switch {
	case stepErr != nil:
		r.err = stepErr
	case err != nil:
		x.fault(err, async)
	default:
		r.written = &res
	}
	if r.end.IsZero() {
		r.end = e.clock.Now()
	}
	return r
}

// attemptOnce makes attempt number attempt of the step keyed full under
// ctx, and decides what follows it. input is the step's recorded input,
// which a transactional step's checkpoint carries (see stepInput).
func attemptOnce[T any](ctx context.Context, x *execution, full string, iteration, attempt int, active *storage.ActiveStep, opts StepOptions, input []byte, fn func(sc StepContext) (T, error), void, async bool) (r attemptResult[T]) {
	e := x.engine
	if opts.tx != nil {
		r = attemptTx(ctx, x, full, iteration, attempt, active, opts, input, fn, void, async)
	} else {
		r.out, r.err = callStep(ctx, x, full, iteration, attempt, opts.Timeout, fn, async, nil, &r.streams)
		x.endStep(active)
		r.end = e.clock.Now()
		if r.err == nil && !void {
			if r.output, r.err = e.payloads.encode("output of step "+full, r.out); r.err != nil {
				r.err = Permanent(r.err)
			}
		}
	}
	if r.err != nil && !IsPermanent(r.err) && (opts.Retries == RetryForever || attempt <= opts.Retries) {
		r.retryAt = r.end.Add(backoff(opts, attempt))
	}
	return r
}

// hookedAttempt is attemptOnce inside Hooks.Attempt h. (Apart, so that an
// attempt without hooks makes no closure.)
func hookedAttempt[T any](ctx context.Context, h func(context.Context, *HookAttempt, func(context.Context)), x *execution, full string, iteration, attempt int, start time.Time, async bool, active *storage.ActiveStep, opts StepOptions, input []byte, fn func(sc StepContext) (T, error), void bool) (r attemptResult[T]) {
	ha := &HookAttempt{RunID: x.lease.RunID, Workflow: x.workflow, Key: full, Attempt: attempt, Async: async, Started: start}
	h(ctx, ha, func(ctx context.Context) {
		r = attemptOnce(ctx, x, full, iteration, attempt, active, opts, input, fn, void, async)
		ha.Ended, ha.Err, ha.Retry, ha.RetryAt = r.end, r.err, !r.retryAt.IsZero(), r.retryAt
	})
	return r
}

// retryWait waits until t, when the retry of the step keyed key is due. On
// the workflow goroutine, a retry due later than Config.ParkRetriesAfter
// parks the run, ready at t, and frees the worker: the attempt that failed
// is recorded with its due time, so the execution that claims the run
// again replays to this step and makes the next attempt at once. A pause
// the heartbeat learns of meanwhile parks the run the same way, so it
// takes effect before the next attempt. A step future's goroutine goes on
// waiting on the worker (the run's other calls may still be at work; the
// workflow goroutine parks the run at its next boundary).
func (x *execution) retryWait(fctx context.Context, key string, t time.Time, async, detached bool) {
	if !detached && x.cancelSeen() {
		return // the next attempt is not made
	}
	if p := x.engine.cfg.ParkRetriesAfter; !async && p >= 0 && t.Sub(x.engine.clock.Now()) > p {
		x.suspend(key, storage.SuspendRequest{ReadyAt: &t})
	}
	if async {
		// Waiting for its backoff, the future does not keep the run
		// from parking (see waitAny).
		x.stepsAtWork.Add(-1)
		defer x.stepsAtWork.Add(1)
	}
	x.waitUntil(fctx, t, async, x.cancelDone(detached))
	if !async {
		x.parkIfPaused(key, t)
	}
}

// parkIfPaused parks the run at the step keyed key, ready at readyAt, when
// a heartbeat found a pause requested: the store parks it paused (or, if
// resumed since, waiting). It returns only when no pause was seen.
func (x *execution) parkIfPaused(key string, readyAt time.Time) {
	select {
	case <-x.pauseSeen:
		x.suspend(key, storage.SuspendRequest{ReadyAt: &readyAt})
	default:
	}
}

// heartbeatsHold reports whether heartbeats keep a running step's lease:
// they are on and come more often than the lease expires.
func (e *Engine) heartbeatsHold() bool {
	return e.cfg.HeartbeatInterval > 0 && e.cfg.HeartbeatInterval < e.cfg.LeaseDuration
}

// warnUnheld warns, once per workflow and step key, that a step without a
// timeout runs while heartbeats do not keep its lease: it may outlive the
// lease, and another worker may then run it too.
func (e *Engine) warnUnheld(workflow, key string) {
	if e.heartbeatsHold() {
		return
	}
	if _, warned := e.unheld.LoadOrStore(workflow+"\x00"+key, true); warned {
		return
	}
	e.log.Warn("stem: heartbeats do not keep this step's lease (Config.HeartbeatInterval is off or not shorter than LeaseDuration) and it has no timeout: if it outlives the lease, another worker may run it too; give it a Timeout",
		"workflow", workflow, "step", key, "lease", e.cfg.LeaseDuration, "heartbeat", e.cfg.HeartbeatInterval)
}

// waitUntil waits until t on the engine's clock, or unwinds the goroutine
// (see boundary: the workflow's or a step future's, by async) if the run
// stops or the engine shuts down meanwhile. On the workflow goroutine it
// returns early when a heartbeat finds a pause requested. A step future's
// goroutine ends when fctx, its context, is cancelled meanwhile.
func (x *execution) waitUntil(fctx context.Context, t time.Time, async bool, canceledRun <-chan struct{}) {
	d := t.Sub(x.engine.clock.Now())
	if d <= 0 {
		return
	}
	timer, stop := storage.NewTimer(x.engine.clock, d)
	defer stop()
	pauseSeen := x.pauseSeen
	if async {
		pauseSeen = nil // a future's goroutine leaves the pause to the workflow's
	} else {
		// Meanwhile the execution is not at work: it waits on the clock
		// (Engine.ExecutionsWorking).
		x.engine.working.Add(-1)
	}
	var canceled <-chan struct{}
	if fctx != nil {
		canceled = fctx.Done()
	}
	stopped := false
	select {
	case <-canceled:
		stopped = true
	case <-x.ctx.Done():
		stopped = true
	case <-x.stopping:
		stopped = true
	case <-pauseSeen:
	case <-timer:
	case <-canceledRun:
		stopped = x.ctx.Err() != nil
	}
	if !async {
		x.engine.working.Add(1)
	}
	if stopped {
		x.boundary(async)
		if canceledFuture(fctx) {
			runtime.Goexit()
		}
	}
}

// backoff returns the delay before retry number attempt (from 1):
// exponential, capped, with opts.Jitter of it randomized (a delay d waits
// between d*(1-Jitter) and d).
func backoff(opts StepOptions, attempt int) time.Duration {
	base, maxd := opts.Backoff, opts.MaxBackoff
	if base <= 0 {
		base = 100 * time.Millisecond
	}
	if maxd <= 0 {
		maxd = time.Minute
	}
	d := base
	for i := 1; i < attempt && d < maxd; i++ {
		d *= 2
	}
	d = min(d, maxd)
	j := opts.Jitter
	switch {
	case j == 0:
		j = DefaultJitter
	case j < 0:
		return d
	}
	fixed := d - time.Duration(float64(d)*j)
	return fixed + rand.N(d-fixed+1)
}

// callStep runs one attempt under ctx (the run's, or a hook's derived
// from it), turning a panic into a failed attempt with its stack. With a
// timeout, an attempt that ignores its context is abandoned when the
// timeout passes; with abandon (a step future's attempt), also when ctx
// is cancelled, so that a future cancelled by the workflow does not hold
// the run while its function ignores the cancellation.
func callStep[T any](ctx context.Context, x *execution, key string, iteration, attempt int, timeout time.Duration, fn func(StepContext) (T, error), abandon bool, tx any, writes *[]storage.StreamWrite) (out T, err error) {
	if timeout > 0 {
		var cancel func()
		ctx, cancel = withTimeout(x.engine.clock, ctx, timeout)
		defer cancel()
	}
	sc := &stepContext{Context: ctx, x: x, key: key, attempt: attempt, iteration: iteration, tx: tx}
	x.steps.add()
	x.engine.stepsRunning.Add(1)
	call := func() (out T, err error) {
		defer x.steps.done()
		defer x.engine.stepsRunning.Add(-1)
		defer func() {
			if p := recover(); p != nil {
				err = fmt.Errorf("step %q panicked: %v\n%s", key, p, debug.Stack())
			}
		}()
		defer sc.streams.seal()
		return fn(sc)
	}
	defer func() {
		if err == nil {
			*writes = sc.streams.take()
		}
	}()
	if timeout <= 0 && !abandon {
		return call()
	}
	type result struct {
		out T
		err error
	}
	done := make(chan result, 1)
	go func() {
		o, e := call()
		done <- result{o, e}
	}()
	select {
	case r := <-done:
		return r.out, r.err
	case <-ctx.Done():
		if timeout <= 0 && !errors.Is(context.Cause(ctx), ErrCanceled) {
			// Only a cancelled future's attempt is abandoned: another
			// stop waits for the function, as without abandon.
			r := <-done
			return r.out, r.err
		}
		return out, fmt.Errorf("step %q attempt %d: %w", key, attempt, context.Cause(ctx))
	}
}

// decodeCheckpoint returns a checkpoint's result as the step's.
func decodeCheckpoint[T any](x *execution, cp storage.Checkpoint) (T, error) {
	var out T
	if cp.Error != nil {
		return out, x.engine.payloads.errorFrom(cp.Key, cp.Error)
	}
	if err := x.engine.payloads.decode("checkpoint "+cp.Key, cp.Output, &out); err != nil {
		return out, err
	}
	return out, nil
}

// withTimeout is context.WithTimeout on clock: on a virtual clock (a
// Timers) the context is cancelled, with context.DeadlineExceeded as its
// cause, once the clock reads d past now.
func withTimeout(clock storage.Clock, ctx context.Context, d time.Duration) (context.Context, func()) {
	if _, virtual := clock.(storage.Timers); !virtual {
		return context.WithTimeout(ctx, d)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	stop := storage.AfterFunc(clock, d, func() { cancel(context.DeadlineExceeded) })
	return ctx, func() {
		stop()
		cancel(context.Canceled)
	}
}
