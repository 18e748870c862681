package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"runtime"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/stemflow/stem/storage"
)

// DefaultMaxParallelSteps is how many step futures of one run execute at
// once when Config.MaxParallelSteps is zero.
const DefaultMaxParallelSteps = 16

// Future is the result, to come, of a step, child workflow, event wait or
// timer that a workflow started without waiting for it (StepAsync,
// CallChildAsync, OnEvent, WorkflowContext.Timer, and their typed forms in
// generated code). Its durable key is fixed when it is created, in program
// order, so a replay finds each future's checkpoint whatever order they
// finished in. Await it for its result; All waits for several; Select for
// the first of several. AwaitAll and SelectFuture do the same for a slice
// of futures of one type, and return their values.
//
// A Future belongs to the run and the execution that created it: use it
// only in that workflow function, and await it at most once. An event
// future that loses a Select is released; see Select and OnEvent. Cancel
// stops a future the run no longer needs, and SelectCancel cancels a
// select's losers.
type Future[T any] struct {
	future
	// val is the output of a step future whose attempt wrote its checkpoint
	// in this execution (fresh), so it is not decoded again.
	val   T
	fresh bool
}

// Awaitable is a future of any result type: what All and Select take.
// Every *Future is one.
type Awaitable interface {
	// Cancel cancels the future; see Future.Cancel.
	Cancel()
	base() *future
}

func (f *Future[T]) base() *future { return &f.future }

type futureKind int

const (
	futureStep futureKind = iota
	futureEvent
	futureChild
	futureTimer
)

// future is what every Future holds, whatever its result type.
type future struct {
	x    *execution
	key  string
	kind futureKind
	// err is the future's error from its creation (a malformed key, a key
	// used twice, a child that could not start): its result.
	err error
	// done is closed when a step future's goroutine ends, with cp set when
	// the step's outcome was written. Nil for a step settled at creation.
	done chan struct{}
	cp   *storage.Checkpoint
	// topic and waitKind are what an event or child future waits on.
	topic    string
	waitKind storage.CheckpointKind
	// check decodes an event future's payload, so that one that does not
	// decode is refused and waited for again.
	check func(storage.Checkpoint) error
	// wake is a timer future's wake time.
	wake    time.Time
	awaited bool
	// seq is the future's place in the order the run's futures were
	// created.
	seq int
	// src is the key an event future's result is the checkpoint of, when
	// not its own: it took over a released future's event, or gave its
	// own away and waits under the key of the future that took it (see
	// handOver).
	src string
	// released is set while an event future that lost a select lets go of
	// its topic: it does not ride with the run's suspensions until it is
	// awaited or selected again.
	released bool
	// ctx is a running step future's attempts' context, and stop cancels
	// it (with ErrCanceled) when the future is cancelled.
	ctx  context.Context
	stop context.CancelCauseFunc
	// canceled is set when Cancel took effect: the future is ready, and
	// its result is the cancellation (a step's as its checkpoint holds
	// it, which may be the step's own result if that was written first).
	canceled bool
	// detached is set for a future made on the detached context: the
	// run's cancellation does not reach it, nor its awaits.
	detached bool
}

// Key returns the future's durable key, fixed at its creation, or "" for
// a future that failed at creation. It is its checkpoint's, but for an
// event future that took over the event of a future released by a select
// (see OnEvent), whose checkpoint is that future's.
func (f *future) Key() string { return f.key }

// Cancel asks that the future stop, and makes it ready: the run no longer
// waits for it (an ending run does not settle it, a parking run does not
// register it), and Await, All and Select find it ready at once with an
// error matching ErrCanceled — test that, not context.Canceled. Cancel is
// a request: a future that already has its result keeps it. Cancel is
// deterministic on replay. What it stops depends on the future:
//
//   - A step future's running attempt has its context cancelled with
//     ErrCanceled as its cause (context.Cause), and no retry follows. The
//     cancellation is checkpointed under the step's key, so a replay
//     returns it without running the step again; if the step's own
//     checkpoint was written first, the future keeps that result instead.
//     The run does not wait for a cancelled attempt to return: one whose
//     function ignores its context is abandoned, as at a timeout, and its
//     result is dropped.
//   - A timer future is cancelled whether or not it is due yet: its wake
//     time no longer bounds the run's waits.
//   - An event future stops waiting: it no longer rides with the run's
//     suspensions, so a later event of its topic is left for another
//     future or wait, or stays buffered. One whose event was delivered
//     already keeps it.
//   - A child future stops waiting for the child, which is not cancelled:
//     it runs on, its outcome not returned to this run, until this run
//     ends, when its parent-close policy applies (ParentClose: terminated
//     by default, running on to its own end when abandoned). One whose
//     child ended already keeps its outcome.
//
// Cancel of a future already awaited, or failed at its creation, does
// nothing. Like any durable call, Cancel belongs to the workflow function
// that created the future.
func (f *future) Cancel() {
	x := f.x
	if x == nil || f.err != nil || f.canceled || f.awaited {
		return
	}
	x.checkStopped()
	switch f.kind {
	case futureStep:
		x.cancelStep(f)
	case futureTimer:
		f.canceled = true
	default:
		if !x.ready(f) {
			f.canceled = true
		}
	}
}

// cancelStep cancels a step future that has no outcome yet: its attempt's
// context is cancelled and its cancellation written as its checkpoint,
// with the attempt running, if any, recorded as ended by it. The first
// checkpoint written wins: if the step's own came first, Cancel's write
// returns it, and the future keeps it.
func (x *execution) cancelStep(f *future) {
	if f.done == nil {
		return // settled at its creation
	}
	select {
	case <-f.done:
		if f.cp == nil {
			x.checkStopped() // its goroutine unwound: the run stopped
		}
		return
	default:
	}
	if f.stop != nil {
		f.stop(ErrCanceled)
	}
	e := x.engine
	now := e.clock.Now()
	const why = "canceled by the workflow"
	var as []Attempt
	x.mu.Lock()
	for _, a := range x.running {
		if a.Key == f.key {
			as = append(as, Attempt{Key: f.key, Number: a.Attempt, Started: a.Started, Ended: now, Error: e.payloads.sealText(why)})
		}
	}
	x.mu.Unlock()
	err := fmt.Errorf("step %q %s: %w", f.key, why, ErrCanceled)
	x.checkpoint(storage.Checkpoint{Key: f.key, Kind: KindStep, Error: e.payloads.sealInfo(errorInfo(err))}, as)
	f.canceled = true
}

// canceledErr is the result of a cancelled timer, event or child future.
func (f *future) canceledErr() error {
	return fmt.Errorf("future %q: %w", f.key, ErrCanceled)
}

// at returns the key of the checkpoint that holds the future's result.
func (f *future) at() string {
	if f.src != "" {
		return f.src
	}
	return f.key
}

// futures is an execution's bookkeeping of its futures.
type futures struct {
	// slots bounds the step futures' attempts in progress; quiesce takes
	// them all so that the run parks only when none is.
	slots chan struct{}
	// keys are the keys of the futures created, in order; list the
	// futures themselves.
	keys []string
	list []*future
	// stepFutures counts the step futures whose goroutine was started;
	// stepsAtWork those whose goroutine runs and is not waiting for a
	// retry's backoff.
	stepFutures int
	stepsAtWork atomic.Int32
	// changed is signalled when a step future's goroutine ends.
	changed chan struct{}
	// refusal is an event future's payload that did not decode, to take
	// back with the next suspension.
	refusal *storage.Refusal
	// deadlines are the deadlines of the event waits registered, by key.
	deadlines map[string]time.Time
	// heldEvents holds, per topic, the event futures a select released
	// while they had their event, in creation order: the next event
	// future of the topic created takes the first one's (see handOver).
	heldEvents map[string][]*future
}

func (fs *futures) init(maxParallel int) {
	fs.slots = make(chan struct{}, maxParallel)
	fs.changed = make(chan struct{}, 1)
}

// acquireSlot waits for a slot for a step future's attempt; a run that
// stops, or the future cancelled (fctx done), meanwhile unwinds the
// future's goroutine.
func (x *execution) acquireSlot(fctx context.Context) {
	select {
	case x.slots <- struct{}{}:
	case <-fctx.Done():
		runtime.Goexit()
	case <-x.ctx.Done():
		runtime.Goexit()
	case <-x.stopping:
		runtime.Goexit()
	}
}

func (x *execution) releaseSlot() { <-x.slots }

// quiesce waits until no step future's attempt is in progress and keeps
// new ones from starting, before the run parks or is handed back; unquiesce
// lets them go on when it did not.
func (x *execution) quiesce() {
	if x.stepFutures == 0 {
		return
	}
	for range cap(x.slots) {
		x.slots <- struct{}{}
	}
}

func (x *execution) unquiesce() {
	if x.stepFutures == 0 {
		return
	}
	for range cap(x.slots) {
		<-x.slots
	}
}

// boundary unwinds the goroutine at a step boundary of a stopped run: the
// workflow goroutine as checkStopped does, a step future's without
// writing anything (the workflow goroutine winds the run up).
func (x *execution) boundary(async bool) {
	if !async {
		x.checkStopped()
		return
	}
	if x.ctx.Err() != nil {
		runtime.Goexit()
	}
	select {
	case <-x.stopping:
		runtime.Goexit()
	default:
	}
}

// created records a future's key in program order. Independent futures
// created in another order than the run created them are no divergence:
// each finds its own checkpoint by its key, which its name and its own
// count fix, whatever was created around it. What the history needs of
// them is checked as they are created (recall, frontier).
func (x *execution) created(f *future) {
	f.seq = len(x.list)
	x.keys = append(x.keys, f.key)
	x.list = append(x.list, f)
}

// futureKeys returns the keys of the futures created so far (nil: none).
func (x *execution) futureKeys() []string {
	if len(x.keys) == 0 {
		return nil
	}
	return x.keys
}

// waitDeadlines returns the deadlines of the event waits registered so
// far, own's included.
func (x *execution) waitDeadlines(own *storage.Wait) map[string]time.Time {
	if x.deadlines == nil && len(x.state.Deadlines) > 0 {
		x.deadlines = maps.Clone(x.state.Deadlines)
	}
	if own != nil && own.Deadline != nil && own.DeliveryKind() == KindEvent {
		if x.deadlines == nil {
			x.deadlines = map[string]time.Time{}
		}
		x.deadlines[own.Key] = *own.Deadline
	}
	return x.deadlines
}

// waitDeadline returns the deadline an event wait keyed key registered
// before, if any.
func (x *execution) waitDeadline(key string) (time.Time, bool) {
	if x.deadlines != nil {
		d, ok := x.deadlines[key]
		return d, ok
	}
	d, ok := x.state.Deadlines[key]
	return d, ok
}

// withFutureCases returns own (nil: none) with a case for every event or
// child future still waiting: the first future on each topic, and none on
// own's. An event future released by a select it lost is not waiting.
func (x *execution) withFutureCases(own *storage.Wait) *storage.Wait {
	var cases []storage.WaitCase
	topics := map[string]bool{}
	if own != nil {
		topics[own.Topic] = true
	}
	for _, f := range x.list {
		if f.err != nil || f.kind != futureEvent && f.kind != futureChild || f.released || f.canceled || topics[f.topic] {
			continue
		}
		if _, ok := x.lookup(f.at()); ok {
			continue
		}
		topics[f.topic] = true
		cases = append(cases, storage.WaitCase{Key: f.at(), Topic: f.topic, Kind: f.waitKind})
	}
	if len(cases) == 0 {
		return own
	}
	if own == nil {
		return waitOf(cases)
	}
	w := *own
	w.Also = cases
	return &w
}

// signalChange tells a workflow goroutine waiting on futures that a step
// future's goroutine ended.
func (x *execution) signalChange() {
	select {
	case x.changed <- struct{}{}:
	default:
	}
}

// settle waits, before the run ends or continues as new, until every step
// future it started has written its outcome. A run stopped meanwhile
// unwinds instead.
func (x *execution) settle() {
	if x.replay != nil {
		x.replay.settled(x)
		return
	}
	for _, f := range x.list {
		if f.done == nil || f.canceled {
			continue // settled at creation, or cancelled: not waited for
		}
		select {
		case <-f.done:
		case <-x.ctx.Done():
			x.checkStopped()
		}
		if f.cp == nil {
			// Its goroutine unwound: the run stopped or the engine shuts
			// down.
			x.checkStopped()
		}
	}
}

// ready reports whether the future has its result. An event future whose
// delivered payload does not decode is not ready: the payload is refused
// with the next suspension and the future waits again.
func (x *execution) ready(f *future) bool {
	if f.err != nil || f.canceled {
		return true
	}
	switch f.kind {
	case futureStep:
		if f.done == nil {
			return true
		}
		select {
		case <-f.done:
			return true
		default:
			return false
		}
	case futureTimer:
		return !x.engine.clock.Now().Before(f.wake)
	}
	cp, ok := x.lookup(f.at())
	if !ok {
		return false
	}
	if f.check != nil && cp.Error == nil {
		if err := f.check(cp); errors.Is(err, ErrDecode) || errors.Is(err, ErrPayloadTooLarge) {
			x.holdUndecodable(cp, err)
			x.refuseFuture(cp, err)
			return false
		}
	}
	return true
}

// refuseFuture takes back an event future's payload that does not decode:
// the refusal, recorded as a failed attempt, goes with the next suspension
// and the future waits again.
func (x *execution) refuseFuture(cp storage.Checkpoint, err error) {
	e := x.engine
	now := e.clock.Now()
	a := storage.Attempt{Key: cp.Key, Number: x.pending[cp.Key].Number + 1, Started: now, Ended: now,
		Error: e.payloads.sealText(fmt.Sprintf("event payload refused: %v", err))}
	x.pending[cp.Key] = a
	x.forget(cp.Key)
	x.refusal = &storage.Refusal{Key: cp.Key, Attempt: a}
	x.logger().Warn("stem: refused an event payload that does not decode; waiting again", "key", cp.Key, "err", err)
}

// waitAny returns once one of fs is ready, waiting on the worker while a
// step future among them runs, and parking the run otherwise until an
// event or child future's case is delivered or the earliest timer is due.
// While it waits on the worker, an event or child case among fs delivered
// meanwhile is taken from the store (takeEvent) as a park would take it,
// so that it wins while the steps still run.
// key names the wait in the run's suspension: a select's key, reached with
// the autoversion counts the suspension records, or "" for All and Await,
// which reach no key of their own (the futures' order is checked instead).
// Before it waits it is a call the run's cancellation cuts (see cutAt),
// named call, unless detached; it returns the cancellation's error then.
func (x *execution) waitAny(fs []*future, key string, detached bool, call string) error {
	for {
		var (
			local, cases bool
			wake         time.Time
		)
		for _, f := range fs {
			if x.ready(f) {
				return nil
			}
			switch f.kind {
			case futureStep:
				local = true
			case futureEvent, futureChild:
				cases = true
			case futureTimer:
				if wake.IsZero() || f.wake.Before(wake) {
					wake = f.wake
				}
			}
		}
		if x.replay != nil {
			x.replay.reach(x, waitingOn(fs, key))
		}
		if err := x.cutAt(detached, call, true); err != nil {
			return err
		}
		if !local && x.stepsAtWork.Load() > 0 {
			// Another step future's attempt is in progress, or about to
			// begin: the run cannot park before it ends, so it waits on
			// the worker, taking an event or child case delivered
			// meanwhile.
			local = true
		}
		if !local {
			req := storage.SuspendRequest{}
			if !wake.IsZero() {
				req.ReadyAt = &wake
			}
			if x.engine.hooks.Wait != nil {
				x.waiting(key, KindSelect, x.withFutureCases(nil), req.ReadyAt)
			}
			x.frontier(waitingOn(fs, key), callSync)
			x.park(key, req, true)
			continue
		}
		// A step runs: an event or child case delivered meanwhile is taken
		// now, as a park would have taken it, rather than when the steps
		// end. The arrival is watched before the store is asked, so that
		// none slips between the two.
		var arrived *runWaiters
		var w *storage.Wait
		if cases {
			w = x.takeCases()
		}
		if w != nil {
			arrived = x.engine.arrivals.add(x.lease.RunID)
			if x.takeEvent(w) {
				x.engine.arrivals.remove(x.lease.RunID, arrived)
				continue
			}
		}
		x.waitLocal(wake, key, arrived, x.cancelDone(detached))
	}
}

// takeCases returns the wait a park would register for the event and
// child futures still waiting (see withFutureCases), less a case whose
// payload is being refused (the refusal goes with a suspension), or nil
// when none is left.
func (x *execution) takeCases() *storage.Wait {
	w := x.withFutureCases(nil)
	if w == nil || x.refusal == nil || !w.HasKey(x.refusal.Key) {
		return w
	}
	var cases []storage.WaitCase
	for _, c := range w.Cases() {
		if c.Key != x.refusal.Key {
			cases = append(cases, c)
		}
	}
	if len(cases) == 0 {
		return nil
	}
	return waitOf(cases)
}

// waitOf returns the wait on cases, the first its own and the rest Also.
func waitOf(cases []storage.WaitCase) *storage.Wait {
	c := cases[0]
	return &storage.Wait{Key: c.Key, Topic: c.Topic, Kind: c.Kind, Also: cases[1:]}
}

// takeEvent asks the store for an event or child outcome of one of w's
// cases delivered while steps run (Store.TakeEvent) and keeps it as a
// park's delivery would: the case's checkpoint, which a replay finds as
// it finds one delivered at a park. It reports whether one came. A failed
// take stops the run as a failed write does.
func (x *execution) takeEvent(w *storage.Wait) bool {
	x.flush()
	cp, err := x.engine.store.TakeEvent(context.WithoutCancel(x.ctx),
		storage.TakeEventRequest{Lease: x.lease, LeaseFor: x.engine.cfg.LeaseDuration, Wait: w})
	if err != nil {
		x.stop(err)
	}
	if cp == nil {
		return false
	}
	x.extended()
	x.keep(x.opened(*cp))
	return true
}

// waitingOn names what a wait on fs, none of them ready, is at: its key,
// or the first future's.
func waitingOn(fs []*future, key string) string {
	if key == "" && len(fs) > 0 {
		return fs[0].key
	}
	return key
}

// waitLocal waits, while a step future runs on this worker, until one
// ends or wake (when not zero) comes; a stop unwinds the workflow
// goroutine and a pause parks the run at key. With arrived (an
// arrivals watch, which it ends) it also returns when this engine sends
// the run an event or ends a child of it, or, for those another process
// sends, after Config.PollInterval, for the caller to take them.
func (x *execution) waitLocal(wake time.Time, key string, arrived *runWaiters, canceledRun <-chan struct{}) {
	var timeout <-chan time.Time
	if !wake.IsZero() {
		var stop func() bool
		timeout, stop = storage.NewTimer(x.engine.clock, wake.Sub(x.engine.clock.Now()))
		defer stop()
	}
	var arrival <-chan struct{}
	var poll <-chan time.Time
	if arrived != nil {
		defer x.engine.arrivals.remove(x.lease.RunID, arrived)
		arrival = arrived.done
		var stop func() bool
		poll, stop = storage.NewTimer(x.engine.clock, x.engine.cfg.PollInterval)
		defer stop()
	}
	// Meanwhile the execution is not at work: it waits on the clock, or
	// on steps that count themselves (Engine.ExecutionsWorking).
	x.engine.working.Add(-1)
	var stopped, paused bool
	select {
	case <-x.changed:
	case <-timeout:
	case <-arrival:
	case <-poll:
	case <-x.ctx.Done():
		stopped = true
	case <-x.stopping:
		stopped = true
	case <-x.pauseSeen:
		paused = true
	case <-canceledRun:
		stopped = x.ctx.Err() != nil
	}
	x.engine.working.Add(1)
	switch {
	case stopped:
		x.checkStopped()
	case paused:
		x.parkIfPaused(key, x.engine.clock.Now())
	}
}

// awaitable returns the futures behind as, checked to be this run's.
func (x *execution) awaitable(what string, as []Awaitable) ([]*future, error) {
	fs := make([]*future, len(as))
	for i, a := range as {
		if a == nil || a.base().x == nil {
			return nil, fmt.Errorf("%w: %s: future %d is nil or was not made by a workflow context", ErrInvalidArgument, what, i)
		}
		f := a.base()
		if f.x != x {
			return nil, fmt.Errorf("%w: %s: future %d (%q) belongs to another run or execution", ErrInvalidArgument, what, i, f.key)
		}
		fs[i] = f
	}
	return fs, nil
}

// resultErr returns the error a ready future's result holds, if any.
func (x *execution) resultErr(f *future) error {
	if f.err != nil {
		return f.err
	}
	if f.canceled && f.kind != futureStep {
		return f.canceledErr()
	}
	switch f.kind {
	case futureTimer:
		return nil
	case futureStep:
		if f.canceled {
			cp, _ := x.lookup(f.key)
			return x.engine.payloads.errorFrom(cp.Key, cp.Error)
		}
		if f.cp == nil {
			x.checkStopped()
			return fmt.Errorf("step future %q stopped without a result", f.key)
		}
		return x.engine.payloads.errorFrom(f.cp.Key, f.cp.Error)
	}
	cp, _ := x.lookup(f.at())
	if cp.Error != nil {
		return x.engine.payloads.errorFrom(cp.Key, cp.Error)
	}
	if f.kind == futureChild {
		var co childOutcome
		// The runtime's own envelope, not a user's payload: no size limit
		// (the child's output in it was checked when it was stored).
		if err := decodeJSON("child outcome "+cp.Key, cp.Output, math.MaxInt, &co); err == nil && co.Error != nil {
			return x.engine.payloads.errorFrom(cp.Key, co.Error)
		}
	}
	return nil
}

// All waits until every one of futures has its result, and returns the
// error of the first (in argument order) that failed, or nil. It does not
// take their results: Await each for its value. A future created by another
// run is ErrInvalidArgument.
func All(c *WorkflowContext, futures ...Awaitable) error {
	x := c.exec
	x.checkStopped()
	fs, err := x.awaitable("All", futures)
	if err != nil {
		return err
	}
	if err := x.waitAll(fs, c.detached); err != nil {
		return err
	}
	for _, f := range fs {
		if err := x.resultErr(f); err != nil {
			return err
		}
	}
	return nil
}

// waitAll waits until every one of fs, released ones put back to wait, has
// its result: All's wait, and AwaitAll's. The run's cancellation cuts it
// (at the first future's key), unless detached.
func (x *execution) waitAll(fs []*future, detached bool) error {
	call := "all:"
	if len(fs) > 0 {
		call += fs[0].key
	}
	if err := x.cutAt(detached, call, false); err != nil {
		return err
	}
	x.rearm(fs)
	for {
		var waiting []*future
		for _, f := range fs {
			if !x.ready(f) {
				waiting = append(waiting, f)
			}
		}
		if len(waiting) == 0 {
			return nil
		}
		if err := x.waitAny(waiting, "", detached, call); err != nil {
			return err
		}
	}
}

// Await waits for f and returns its result; see Future.Await.
func Await[T any](f *Future[T]) (T, error) { return f.Await() }

// Await waits until the future has its result and returns it: the step's
// output or error, the event's payload, the child's output or error, or,
// for a timer, nothing once it is due. While a step future runs, the
// workflow waits on the worker; while only events, children or timers are
// awaited, the run parks, and every event or child future still waiting
// rides with the suspension. A future is awaited once: a second Await is
// ErrInvalidArgument (keep the value from the first).
func (f *Future[T]) Await() (T, error) {
	var zero T
	x := f.x
	if x == nil {
		return zero, fmt.Errorf("%w: Await of a future not made by a workflow context", ErrInvalidArgument)
	}
	if f.awaited {
		return zero, fmt.Errorf("%w: future %q is awaited a second time; keep the result of its first Await", ErrInvalidArgument, f.key)
	}
	f.awaited = true
	if f.err != nil {
		return zero, f.err
	}
	x.checkStopped()
	call := "await:" + f.key
	if err := x.cutAt(f.detached, call, false); err != nil {
		return zero, err
	}
	x.rearm([]*future{&f.future})
	if err := x.waitAny([]*future{&f.future}, "", f.detached, call); err != nil {
		return zero, err
	}
	return f.result()
}

// result returns a ready future's result.
func (f *Future[T]) result() (T, error) {
	var zero T
	x := f.x
	if f.canceled && f.kind != futureStep {
		return zero, f.canceledErr()
	}
	switch f.kind {
	case futureTimer:
		return zero, nil
	case futureStep:
		if f.canceled {
			// Its checkpoint as Cancel found it written: the
			// cancellation, or the step's own result if it came first.
			cp, _ := x.lookup(f.key)
			return decodeCheckpoint[T](x, cp)
		}
		if f.cp == nil {
			x.checkStopped()
			return zero, fmt.Errorf("step future %q stopped without a result", f.key)
		}
		if f.fresh {
			return f.val, nil
		}
		return decodeCheckpoint[T](x, *f.cp)
	}
	cp, _ := x.lookup(f.at())
	if f.kind == futureChild {
		return decodeChild[T](x, cp)
	}
	return decodeCheckpoint[T](x, cp)
}

// Select waits for the first of cases to have its result and returns its
// index; Await that future for the result. The winner is checkpointed under
// name (numbered by call order, name#0, name#1, ..., so a select may sit in
// a loop): a replay returns the same index even if another case has become
// ready since. Cases are tried in argument order, so when several are
// ready the first wins. While a step future among the cases runs, the
// workflow waits on the worker, and an event or child case still wins as
// soon as it is delivered (the store's buffered event or the child's end
// is taken as the run's checkpoint of that case, as a park would take it,
// while the steps go on); otherwise the run parks until an event or child
// case is delivered or the earliest timer is due. No cases is
// ErrInvalidArgument.
//
// Every event future among the losers is released: it no longer waits with
// the run, so a later event of its topic goes to a later future (or wait)
// of the topic instead of to a future nobody awaits. A loser that had its
// event already keeps it for the next OnEvent future of its topic created
// afterwards, in the order the losers were created; the select's
// checkpoint records which did, so a replay hands the same events over.
// A released future awaited or selected again waits again: with its own
// event if no later future took it, otherwise for a new one. Step, child
// and timer futures that lose are not released: a step or child goes on,
// and its outcome is kept for an Await (the run waits for a step before it
// ends). SelectCancel cancels the losers instead.
func Select(c *WorkflowContext, name string, cases ...Awaitable) (int, error) {
	x := c.exec
	x.checkStopped()
	if len(cases) == 0 {
		return -1, fmt.Errorf("%w: select %q has no cases", ErrInvalidArgument, name)
	}
	if err := storage.CheckStepKey(name); err != nil {
		return -1, err
	}
	fs, err := x.awaitable("select "+strconv.Quote(name), cases)
	if err != nil {
		return -1, err
	}
	key, err := x.useCallKey(name, true, asSelect)
	if err != nil {
		return -1, err
	}
	call := "select:" + key
	x.rearm(fs)
	cp, ok, err := x.begin(c.detached, call, key)
	if err != nil {
		return -1, err
	}
	if ok {
		o, err := decodeSelect(cp.Output, len(fs))
		if err != nil {
			x.drift(key, fmt.Errorf("%w: run %s: select %q chose %s, but its replay has %d cases", ErrNonDeterminism, x.lease.RunID, key, cp.Output, len(fs)))
		}
		x.releaseLosers(fs, o)
		return o.Case, nil
	}
	for {
		for i, f := range fs {
			if x.ready(f) {
				o := selectOutcome{Case: i, Held: x.holding(fs, i)}
				x.checkpoint(storage.Checkpoint{Key: key, Kind: KindSelect, Output: o.encode(), Input: selectInput(fs)}, nil)
				x.releaseLosers(fs, o)
				return i, nil
			}
		}
		if err := x.waitAny(fs, key, c.detached, call); err != nil {
			return -1, err
		}
	}
}

// SelectCancel is Select that cancels its losers: it waits for the first
// of cases to have its result, checkpoints the winner under name as
// Select does, and cancels every other case (see Future.Cancel), so that
// the run waits for none of them — a pick-first of several steps ends
// when the first does, with the others' contexts cancelled (cause
// ErrCanceled) and their retries stopped. A loser that had its result
// already keeps it. Await the winner for its result; a loser awaited
// returns its result or an error matching ErrCanceled. A replay returns
// the same winner and the losers the same results, without running a
// cancelled step again.
func SelectCancel(c *WorkflowContext, name string, cases ...Awaitable) (int, error) {
	i, err := Select(c, name, cases...)
	if err != nil {
		return i, err
	}
	won := cases[i].base()
	for _, a := range cases {
		if f := a.base(); f != won {
			f.Cancel()
		}
	}
	return i, nil
}

// selectOutcome is what a select's checkpoint records: the case that won,
// and the losing event futures that had their event when it was decided
// (by case), which goes to later futures of their topics. It is stored as
// the bare index when none had, as a select's checkpoint always was, and
// as JSON ({"case":1,"held":[2]}) otherwise.
type selectOutcome struct {
	Case int   `json:"case"`
	Held []int `json:"held,omitempty"`
}

func (o selectOutcome) encode() []byte {
	if len(o.Held) == 0 {
		return []byte(strconv.Itoa(o.Case))
	}
	b, _ := json.Marshal(o)
	return b
}

// decodeSelect reads a select's checkpoint, checking it against the n
// cases of the select that reads it.
func decodeSelect(b []byte, n int) (selectOutcome, error) {
	var o selectOutcome
	if i, err := strconv.Atoi(string(b)); err == nil {
		o.Case = i
	} else if err := json.Unmarshal(b, &o); err != nil {
		return o, err
	}
	if o.Case < 0 || o.Case >= n {
		return o, fmt.Errorf("case %d of %d", o.Case, n)
	}
	for _, i := range o.Held {
		if i < 0 || i >= n || i == o.Case {
			return o, fmt.Errorf("held case %d of %d", i, n)
		}
	}
	return o, nil
}

// holding returns the losing event futures among fs (fs[won] won) that
// have their event, decodable into their type: a select records them, so
// a replay hands their events over as this execution does, whatever
// arrived since.
func (x *execution) holding(fs []*future, won int) []int {
	var held []int
	for i, f := range fs {
		if f == fs[won] || f.err != nil || f.kind != futureEvent {
			continue
		}
		cp, ok := x.lookup(f.at())
		if ok && cp.Error == nil && (f.check == nil || f.check(cp) == nil) {
			held = append(held, i)
		}
	}
	return held
}

// releaseLosers lets go of the event futures among fs that lost a select
// to fs[o.Case]: each stops riding with the run's suspensions, so later
// events of its topic go to the run's later futures and waits of it,
// until it is awaited or selected again (rearm). One that had its event
// when the select was decided (o.Held) keeps it for the next event future
// of its topic created (handOver). Step, child and timer futures are left
// as they are: a step or child that lost goes on, and its outcome is kept.
func (x *execution) releaseLosers(fs []*future, o selectOutcome) {
	for i, f := range fs {
		if f == fs[o.Case] || f.err != nil || f.kind != futureEvent || f.released {
			continue
		}
		f.released = true
		if !slices.Contains(o.Held, i) {
			continue
		}
		if _, ok := x.lookup(f.at()); !ok {
			continue // recorded, but gone since: none to hand over
		}
		if x.heldEvents == nil {
			x.heldEvents = map[string][]*future{}
		}
		q := x.heldEvents[f.topic]
		at, _ := slices.BinarySearchFunc(q, f.seq, func(h *future, seq int) int { return h.seq - seq })
		x.heldEvents[f.topic] = slices.Insert(q, at, f)
	}
}

// handOver gives a new event future n the event of the first future of
// its topic released holding one whose payload decodes into n's type: n's
// result is that future's checkpoint, and the released future, which can
// no longer return it, takes n's own key to wait under if it is awaited
// or selected again. So an event is returned once, by the future that
// took it; the same calls make the same hand-overs on every replay.
func (x *execution) handOver(n *future) {
	q := x.heldEvents[n.topic]
	for i, h := range q {
		cp, ok := x.lookup(h.at())
		if !ok || n.check(cp) != nil {
			continue
		}
		n.src, h.src = h.at(), n.key
		x.heldEvents[n.topic] = slices.Delete(q, i, i+1)
		return
	}
}

// rearm puts the released event futures among fs back to wait, as they
// are awaited or selected again: one still holding its event keeps it,
// and the others ride with the run's suspensions again.
func (x *execution) rearm(fs []*future) {
	for _, f := range fs {
		if !f.released {
			continue
		}
		f.released = false
		q := x.heldEvents[f.topic]
		if i := slices.Index(q, f); i >= 0 {
			x.heldEvents[f.topic] = slices.Delete(q, i, i+1)
		}
	}
}

// StepAsync starts fn as the step keyed key (see Step) without waiting for
// it, and returns its future. The step's attempts run on the worker beside
// the workflow and the run's other step futures, at most
// Config.MaxParallelSteps at once per run; its checkpoint is written when
// it ends, on its own. A step that completed before returns a future that
// is ready at once.
func StepAsync[T any](c *WorkflowContext, key string, opts StepOptions, fn func(sc StepContext) (T, error)) *Future[T] {
	return stepAsync(c, key, opts, fn, false)
}

// DoAsync starts fn as a step that returns no value without waiting for
// it; see StepAsync.
func DoAsync(c *WorkflowContext, key string, opts StepOptions, fn func(sc StepContext) error) *Future[struct{}] {
	return stepAsync(c, key, opts, func(sc StepContext) (struct{}, error) { return struct{}{}, fn(sc) }, true)
}

func stepAsync[T any](c *WorkflowContext, key string, opts StepOptions, fn func(sc StepContext) (T, error), void bool) *Future[T] {
	x := c.exec
	x.checkStopped()
	f := &Future[T]{future: future{x: x, kind: futureStep, detached: c.detached}}
	if f.err = storage.CheckStepKey(key); f.err != nil {
		return f
	}
	if f.err = opts.check(); f.err != nil {
		return f
	}
	full, err := x.useCallKey(key, opts.Autoversion, asStep)
	if err != nil {
		f.err = err
		return f
	}
	f.key = full
	cp, ok := x.recall(full, callFuture)
	if f.err = x.cutAt(c.detached, "go:"+full, !ok); f.err != nil {
		return f
	}
	x.created(&f.future)
	if ok {
		f.cp = &cp
		return f
	}
	x.frontier(full, callFuture)
	iteration, last := iterationOf(x, key, opts), x.pending[full]
	f.done = make(chan struct{})
	if x.replay != nil {
		return f // never runs: awaiting it reaches the replay's frontier
	}
	x.stepFutures++
	f.ctx, f.stop = context.WithCancelCause(x.stepBase(c.detached))
	x.stepsAtWork.Add(1)
	go func() {
		defer x.signalChange()
		defer x.stepsAtWork.Add(-1)
		defer close(f.done)
		defer f.stop(nil) // ended: its context is let go of (a Cancel now finds it done)
		out, cp, fresh := attempts(x, f.ctx, full, iteration, last, opts, fn, void, true, c.detached)
		f.val, f.fresh, f.cp = out, fresh, &cp
	}()
	return f
}

// OnEvent returns a future of the next event of topic for this run, as
// WaitForEvent would return it, without waiting: it is delivered while the
// run is parked on anything (a sleep, another wait, a future), and Await,
// All or Select wait for it. Its key is name numbered by call order
// (name#0, name#1, ...), so it may be created in a loop. It has no timeout
// of its own: Select it with a Timer for one. A payload that does not
// decode into T is refused, as by WaitForEvent.
//
// Of the futures of one topic waiting, the first created takes the next
// event; events of one topic reach a run in the order they were sent.
// A future that loses a Select is released (see Select) and waits no
// more; if it had its event already, that event is kept for the next
// future of the topic created afterwards in this execution, which returns
// it at once. So the usual event loop — each iteration creates a future
// per topic and selects the first ready — takes every event once, in
// order. A future never awaited before the run ends is no error; an event
// it took, or that a released future kept and no later future claimed,
// stays in the run's history (ListSteps) and is returned by no one.
func OnEvent[T any](c *WorkflowContext, name, topic string) *Future[T] {
	return onDelivery[T](c, name, topic, false)
}

// onDelivery is OnEvent (update false: of an event on topic) and OnUpdate
// (update true: of an update named topic, delivered on its reserved topic
// as a checkpoint of kind KindUpdate).
func onDelivery[T any](c *WorkflowContext, name, topic string, update bool) *Future[T] {
	x := c.exec
	x.checkStopped()
	f := &Future[T]{future: future{x: x, kind: futureEvent, topic: topic, waitKind: KindEvent, detached: c.detached}}
	if f.err = storage.CheckStepKey(name); f.err != nil {
		return f
	}
	if update {
		if f.err = storage.CheckUpdateName(topic); f.err != nil {
			return f
		}
		f.topic, f.waitKind = storage.UpdateTopic(topic), KindUpdate
	} else if f.err = validTopic(topic); f.err != nil {
		return f
	}
	if f.key, f.err = x.useCallKey(name, true, asEventFuture); f.err != nil {
		return f
	}
	if f.err = x.cutAt(c.detached, "event:"+f.key, false); f.err != nil {
		return f
	}
	x.created(&f.future)
	// Asked for: its event, if one came, is the run's to keep whether or
	// not the future is awaited (a replay does not miss it).
	x.recall(f.key, callFuture)
	f.check = func(cp storage.Checkpoint) error {
		_, err := decodeCheckpoint[T](x, cp)
		return err
	}
	x.handOver(&f.future)
	return f
}

// Timer returns a future that is ready at d from its first creation: the
// wake time is checkpointed then (under name, numbered by call order like
// OnEvent's), so a replay keeps it. Await it to sleep, or Select it beside
// other futures for a timeout.
func (c *WorkflowContext) Timer(name string, d time.Duration) *Future[struct{}] {
	x := c.exec
	x.checkStopped()
	f := &Future[struct{}]{future: future{x: x, kind: futureTimer, detached: c.detached}}
	if f.err = storage.CheckStepKey(name); f.err != nil {
		return f
	}
	if f.key, f.err = x.useCallKey(name, true, asTimer); f.err != nil {
		return f
	}
	cp, ok := x.recall(f.key, callSync)
	if f.err = x.cutAt(c.detached, "timer:"+f.key, !ok); f.err != nil {
		return f
	}
	x.created(&f.future)
	if ok {
		// The runtime's own record, not a user's payload: no size limit.
		if err := decodeJSON("timer "+f.key+" wake time", cp.Output, math.MaxInt, &f.wake); err != nil {
			f.err = err
		}
		return f
	}
	x.frontier(f.key, callSync)
	f.wake = x.engine.clock.Now().Add(d).UTC()
	out, _ := f.wake.MarshalJSON()
	x.checkpoint(storage.Checkpoint{Key: f.key, Kind: KindSleep, Output: out}, nil)
	return f
}

// CallChildAsync starts the workflow named workflow as a child of this run
// (see CallChild) and returns a future of its outcome without waiting for
// it. The child starts when the future is created. Cancelling the future
// (Future.Cancel) stops the wait for the child, not the child itself,
// which meets its parent-close policy when this run ends.
func CallChildAsync[Out any](c *WorkflowContext, name, workflow string, input any, opts ...ChildOption) *Future[Out] {
	x := c.exec
	x.checkStopped()
	f := &Future[Out]{future: future{x: x, kind: futureChild, waitKind: KindChild, detached: c.detached}}
	if f.err = storage.CheckStepKey(name); f.err != nil {
		return f
	}
	if f.key, f.err = x.useCallKey(name, false, asChild); f.err != nil {
		return f
	}
	_, ok := x.recall(f.key, callFuture)
	if f.err = x.cutAt(c.detached, "child:"+f.key, !ok); f.err != nil {
		return f
	}
	x.created(&f.future)
	if ok {
		return f
	}
	x.frontier(f.key, callFuture)
	childID, finished, collision, err := x.startChild(f.key, workflow, input, opts)
	switch {
	case err != nil:
		f.err = err
	case collision != nil:
		x.failChild(f.key, collision)
	case finished != nil:
		x.checkpointChild(f.key, x.engine.payloads.newChildOutcome(finished.Output, finished.Error))
	default:
		f.topic = childTopic(childID)
	}
	return f
}

// selectInput is what a select's checkpoint records of its call, for
// operators: the keys of its cases, in order, so the winner is named.
func selectInput(fs []*future) []byte {
	keys := make([]string, len(fs))
	for i, f := range fs {
		keys[i] = f.key
	}
	b, _ := json.Marshal(keys)
	return b
}
