package runtime

import (
	"errors"
	"fmt"
	"maps"
	"runtime"
	"strconv"
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
// the first of several.
//
// A Future belongs to the run and the execution that created it: use it
// only in that workflow function, and await it at most once.
type Future[T any] struct {
	future
	// val is the output of a step future whose attempt wrote its checkpoint
	// in this execution (fresh), so it is not decoded again.
	val   T
	fresh bool
}

// Awaitable is a future of any result type: what All and Select take.
type Awaitable interface {
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
}

// Key returns the future's durable key (its checkpoint's), or "" for a
// future that failed at creation.
func (f *future) Key() string { return f.key }

// futures is an execution's bookkeeping of its futures.
type futures struct {
	// slots bounds the step futures' attempts in progress; quiesce takes
	// them all so that the run parks only when none is.
	slots chan struct{}
	// keys are the keys of the futures created, in order; list the
	// futures themselves.
	keys []string
	list []*future
	// stepFutures counts the step futures whose goroutine was started.
	stepFutures int
	// changed is signalled when a step future's goroutine ends.
	changed chan struct{}
	// refusal is an event future's payload that did not decode, to take
	// back with the next suspension.
	refusal *storage.Refusal
	// deadlines are the deadlines of the event waits registered, by key.
	deadlines map[string]time.Time
}

func (fs *futures) init(maxParallel int) {
	fs.slots = make(chan struct{}, maxParallel)
	fs.changed = make(chan struct{}, 1)
}

// acquireSlot waits for a slot for a step future's attempt; a run that
// stops meanwhile unwinds the future's goroutine.
func (x *execution) acquireSlot() {
	select {
	case x.slots <- struct{}{}:
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

// created records a future's key in program order. A replay that creates
// its futures in another order than the run did before its last suspension
// fails the run as non-deterministic, naming both keys.
func (x *execution) created(f *future) {
	n := len(x.keys)
	if n < len(x.state.Futures) && x.state.Futures[n] != f.key {
		x.fail(fmt.Errorf("%w: run %s created future %d as %q, but its replay creates %q there", ErrNonDeterminism, x.lease.RunID, n, x.state.Futures[n], f.key))
	}
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
// own's.
func (x *execution) withFutureCases(own *storage.Wait) *storage.Wait {
	var cases []storage.WaitCase
	topics := map[string]bool{}
	if own != nil {
		topics[own.Topic] = true
	}
	for _, f := range x.list {
		if f.err != nil || f.kind != futureEvent && f.kind != futureChild || topics[f.topic] {
			continue
		}
		if _, ok := x.lookup(f.key); ok {
			continue
		}
		topics[f.topic] = true
		cases = append(cases, storage.WaitCase{Key: f.key, Topic: f.topic, Kind: f.waitKind})
	}
	if len(cases) == 0 {
		return own
	}
	if own == nil {
		c := cases[0]
		return &storage.Wait{Key: c.Key, Topic: c.Topic, Kind: c.Kind, Also: cases[1:]}
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
		if f.done == nil {
			continue
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
	if f.err != nil {
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
	cp, ok := x.lookup(f.key)
	if !ok {
		return false
	}
	if f.check != nil && cp.Error == nil {
		if err := f.check(cp); errors.Is(err, ErrDecode) || errors.Is(err, ErrPayloadTooLarge) {
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
// key names the wait in the run's suspension: a select's key, reached with
// the autoversion counts the suspension records, or "" for All and Await,
// which reach no key of their own (the futures' order is checked instead).
func (x *execution) waitAny(fs []*future, key string) {
	for {
		var (
			local bool
			wake  time.Time
		)
		for _, f := range fs {
			if x.ready(f) {
				return
			}
			switch f.kind {
			case futureStep:
				local = true
			case futureTimer:
				if wake.IsZero() || f.wake.Before(wake) {
					wake = f.wake
				}
			}
		}
		if x.replay != nil {
			x.replay.reach(x, waitingOn(fs, key))
		}
		if !local {
			req := storage.SuspendRequest{}
			if !wake.IsZero() {
				req.ReadyAt = &wake
			}
			if x.engine.hooks.Wait != nil {
				x.waiting(key, KindSelect, x.withFutureCases(nil), req.ReadyAt)
			}
			x.park(key, req, true)
			continue
		}
		x.waitLocal(wake, key)
	}
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
// goroutine and a pause parks the run at key.
func (x *execution) waitLocal(wake time.Time, key string) {
	var timeout <-chan time.Time
	if !wake.IsZero() {
		var stop func() bool
		timeout, stop = storage.NewTimer(x.engine.clock, wake.Sub(x.engine.clock.Now()))
		defer stop()
	}
	// Meanwhile the execution is not at work: it waits on the clock, or
	// on steps that count themselves (Engine.ExecutionsWorking).
	x.engine.working.Add(-1)
	var stopped, paused bool
	select {
	case <-x.changed:
	case <-timeout:
	case <-x.ctx.Done():
		stopped = true
	case <-x.stopping:
		stopped = true
	case <-x.pauseSeen:
		paused = true
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
	switch f.kind {
	case futureTimer:
		return nil
	case futureStep:
		if f.cp == nil {
			x.checkStopped()
			return fmt.Errorf("step future %q stopped without a result", f.key)
		}
		return x.engine.payloads.errorFrom(f.cp.Key, f.cp.Error)
	}
	cp, _ := x.lookup(f.key)
	if cp.Error != nil {
		return x.engine.payloads.errorFrom(cp.Key, cp.Error)
	}
	if f.kind == futureChild {
		var co childOutcome
		if err := decodeJSON("child outcome "+cp.Key, cp.Output, 0, &co); err == nil && co.Error != nil {
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
	for {
		var waiting []*future
		for _, f := range fs {
			if !x.ready(f) {
				waiting = append(waiting, f)
			}
		}
		if len(waiting) == 0 {
			break
		}
		x.waitAny(waiting, "")
	}
	for _, f := range fs {
		if err := x.resultErr(f); err != nil {
			return err
		}
	}
	return nil
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
	x.waitAny([]*future{&f.future}, "")
	return f.result()
}

// result returns a ready future's result.
func (f *Future[T]) result() (T, error) {
	var zero T
	x := f.x
	switch f.kind {
	case futureTimer:
		return zero, nil
	case futureStep:
		if f.cp == nil {
			x.checkStopped()
			return zero, fmt.Errorf("step future %q stopped without a result", f.key)
		}
		if f.fresh {
			return f.val, nil
		}
		return decodeCheckpoint[T](x, *f.cp)
	}
	cp, _ := x.lookup(f.key)
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
// workflow waits on the worker for a step or a timer to win; otherwise the
// run parks until an event or child case is delivered or the earliest
// timer is due. No cases is ErrInvalidArgument.
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
	key, err := x.useKey(name, true)
	if err != nil {
		return -1, err
	}
	if cp, ok := x.lookup(key); ok {
		i, err := strconv.Atoi(string(cp.Output))
		if err != nil || i < 0 || i >= len(fs) {
			x.fail(fmt.Errorf("%w: run %s: select %q chose case %s, but its replay has %d cases", ErrNonDeterminism, x.lease.RunID, key, cp.Output, len(fs)))
		}
		return i, nil
	}
	for {
		for i, f := range fs {
			if x.ready(f) {
				x.checkpoint(storage.Checkpoint{Key: key, Kind: KindSelect, Output: []byte(strconv.Itoa(i))}, nil)
				return i, nil
			}
		}
		x.waitAny(fs, key)
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
	f := &Future[T]{future: future{x: x, kind: futureStep}}
	if f.err = storage.CheckStepKey(key); f.err != nil {
		return f
	}
	full, err := x.useKey(key, opts.Autoversion)
	if err != nil {
		f.err = err
		return f
	}
	f.key = full
	x.created(&f.future)
	if cp, ok := x.lookup(full); ok {
		f.cp = &cp
		return f
	}
	iteration, last := iterationOf(x, key, opts), x.pending[full]
	f.done = make(chan struct{})
	if x.replay != nil {
		return f // never runs: awaiting it reaches the replay's frontier
	}
	x.stepFutures++
	go func() {
		defer x.signalChange()
		defer close(f.done)
		out, cp, fresh := attempts(x, full, iteration, last, opts, fn, void, true)
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
func OnEvent[T any](c *WorkflowContext, name, topic string) *Future[T] {
	x := c.exec
	x.checkStopped()
	f := &Future[T]{future: future{x: x, kind: futureEvent, topic: topic, waitKind: KindEvent}}
	if f.err = storage.CheckStepKey(name); f.err != nil {
		return f
	}
	if f.err = validTopic(topic); f.err != nil {
		return f
	}
	if f.key, f.err = x.useKey(name, true); f.err != nil {
		return f
	}
	x.created(&f.future)
	f.check = func(cp storage.Checkpoint) error {
		_, err := decodeCheckpoint[T](x, cp)
		return err
	}
	return f
}

// Timer returns a future that is ready at d from its first creation: the
// wake time is checkpointed then (under name, numbered by call order like
// OnEvent's), so a replay keeps it. Await it to sleep, or Select it beside
// other futures for a timeout.
func (c *WorkflowContext) Timer(name string, d time.Duration) *Future[struct{}] {
	x := c.exec
	x.checkStopped()
	f := &Future[struct{}]{future: future{x: x, kind: futureTimer}}
	if f.err = storage.CheckStepKey(name); f.err != nil {
		return f
	}
	if f.key, f.err = x.useKey(name, true); f.err != nil {
		return f
	}
	x.created(&f.future)
	if cp, ok := x.lookup(f.key); ok {
		if err := decodeJSON("timer "+f.key+" wake time", cp.Output, 0, &f.wake); err != nil {
			f.err = err
		}
		return f
	}
	f.wake = x.engine.clock.Now().Add(d).UTC()
	out, _ := f.wake.MarshalJSON()
	x.checkpoint(storage.Checkpoint{Key: f.key, Kind: KindSleep, Output: out}, nil)
	return f
}

// CallChildAsync starts the workflow named workflow as a child of this run
// (see CallChild) and returns a future of its outcome without waiting for
// it. The child starts when the future is created.
func CallChildAsync[Out any](c *WorkflowContext, name, workflow string, input any, opts ...ChildOption) *Future[Out] {
	x := c.exec
	x.checkStopped()
	f := &Future[Out]{future: future{x: x, kind: futureChild, waitKind: KindChild}}
	if f.err = storage.CheckStepKey(name); f.err != nil {
		return f
	}
	if f.key, f.err = x.useKey(name, false); f.err != nil {
		return f
	}
	x.created(&f.future)
	if _, ok := x.lookup(f.key); ok {
		return f
	}
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
