package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/stemflow/stem/storage"
)

// A run's cancellation (Engine.Cancel) is a request the workflow handles,
// unlike a termination. The store records it and wakes the run; the
// executing worker learns of it from its claim, a heartbeat or a
// checkpoint. The cancellation then takes effect at the workflow's next
// durable call that would do something new: run a step, begin a sleep or
// a wait, start a child, park on futures. That call fails with an error
// matching ErrCanceled, and so does every durable call after it, but those
// made on the detached context (WorkflowContext.Detached), which run and
// checkpoint as usual: the workflow's cleanup.
//
// Where it took effect is checkpointed (the run's cancelKey checkpoint, of
// KindCancel), so a replay cuts the run at the same call whatever happened
// since: a sleep whose wake time has passed by then, an event or a child's
// end delivered after the cut. A step running when the request arrives
// has its context cancelled with the same cause and is not retried; its
// outcome is checkpointed as usual (a failure as the cancellation's).

// cancelKey is the key of the checkpoint that records where a run's
// cancellation took effect. No call's key can be it: '#' only numbers a
// call's iterations, after its name.
const cancelKey = "#cancel"

// cancellation is an execution's view of its run's cancellation.
type cancellation struct {
	// seen is closed once the execution learns that the run's
	// cancellation is requested; reason is set before.
	seen   chan struct{}
	once   sync.Once
	reason string
	// cut names the durable call the cancellation took effect at (see
	// cutAt), recorded by an earlier execution (with the reason it
	// recorded, cutReason) or by this one, and reached is set once this
	// execution's code made that call. The workflow goroutine alone
	// touches them.
	cut       string
	cutReason string
	reached   bool
	// wctx is the workflow's context: the execution's, cancelled also,
	// with the cancellation's error as its cause, once the cancellation
	// is learned while the code runs live, or reached.
	wctx    context.Context
	wcancel context.CancelCauseFunc
}

// cancelMark is the content of the cancelKey checkpoint.
type cancelMark struct {
	Call   string `json:"call"`
	Reason string `json:"reason,omitempty"`
}

// init readies the cancellation of an execution whose context is ctx,
// not yet requested.
func (k *cancellation) init(ctx context.Context) {
	k.seen = make(chan struct{})
	k.wctx, k.wcancel = context.WithCancelCause(ctx)
}

// initCancel readies x's cancellation, before the workflow runs: from the
// cancelKey checkpoint of an earlier execution, if any, and the claim.
func (x *execution) initCancel() {
	k := &x.canc
	if cp, ok := x.lookup(cancelKey); ok {
		var m cancelMark
		if err := json.Unmarshal(cp.Output, &m); err == nil && m.Call != "" {
			k.cut, k.cutReason = m.Call, m.Reason
		}
		x.history.ask(cancelKey)
	}
	if x.claim.CancelRequested {
		x.noteCancel(x.claim.CancelReason, false)
	}
}

// noteCancel tells the execution, once, that the run's cancellation is
// requested (reason "" when the news came without it: it is read from the
// run then). When live, the code is running past its history: the
// workflow's context is cancelled at once, so a step running stops, and a
// wait on the worker for step futures looks again.
func (x *execution) noteCancel(reason string, live bool) {
	k := &x.canc
	k.once.Do(func() {
		if reason == "" && x.replay == nil {
			if rec, err := x.engine.store.GetRun(context.WithoutCancel(x.ctx), x.lease.RunID); err == nil {
				reason = rec.CancelReason
			}
		}
		k.reason = reason
		close(k.seen)
		x.logger().Info("stem: the run's cancellation is requested", "reason", k.reason)
	})
	if live {
		k.wcancel(x.cancelErr())
		x.signalChange()
	}
}

// cancelSeen reports whether the execution knows of the run's
// cancellation.
func (x *execution) cancelSeen() bool {
	select {
	case <-x.canc.seen:
		return true
	default:
		return false
	}
}

// cancelErr is the error the run's cancelled calls fail with.
func (x *execution) cancelErr() error {
	var r string
	if x.cancelSeen() {
		r = x.canc.reason // set before seen closed
	} else {
		r = x.canc.cutReason // recorded; the workflow goroutine's own
	}
	if r != "" {
		return fmt.Errorf("run %s canceled: %s: %w", x.lease.RunID, r, ErrCanceled)
	}
	return fmt.Errorf("run %s canceled: %w", x.lease.RunID, ErrCanceled)
}

// cutAt is where every durable call that the cancellation can cut begins:
// call names it ("step:pay@v1", "sleep:nap", ...), and fresh says it would
// do something new (run a step, begin a sleep or wait, start a child, park
// on futures), rather than return what the run recorded. It returns the
// cancellation's error when the call is cut: a call made on the detached
// context never is; past the cut every other call is; a replay cuts at
// the recorded call; and a live execution that knows of the cancellation
// cuts at its first fresh call, and records it.
func (x *execution) cutAt(detached bool, call string, fresh bool) error {
	k := &x.canc
	switch {
	case detached:
		return nil
	case k.reached:
		return x.cancelErr()
	case k.cut != "":
		if call != k.cut {
			return nil
		}
	case !fresh || x.replay != nil || !x.cancelSeen():
		return nil
	default:
		k.cutReason = k.reason
		out, _ := json.Marshal(cancelMark{Call: call, Reason: k.reason})
		x.checkpoint(storage.Checkpoint{Key: cancelKey, Kind: KindCancel, Output: out}, nil)
		k.cut = call
	}
	x.reachCut()
	return x.cancelErr()
}

// begin is where a synchronous durable call keyed key begins: it returns
// the checkpoint the run recorded for it, if any (recall), checks a call
// without one against the run's history (frontier), and returns the
// cancellation's error when the run's cancellation cuts the call, named
// call (cutAt).
func (x *execution) begin(detached bool, call, key string) (storage.Checkpoint, bool, error) {
	cp, ok := x.recall(key, callSync)
	if !ok {
		x.frontier(key, callSync)
	}
	return cp, ok, x.cutAt(detached, call, !ok)
}

// reachCut marks the cut reached: the workflow's context is cancelled, and
// so are the futures it created that are still at work, but those of the
// detached context — a running step's attempt stopped and its
// cancellation checkpointed (unless its own result came first), a timer,
// event or child no longer waited for.
func (x *execution) reachCut() {
	k := &x.canc
	k.reached = true
	k.wcancel(x.cancelErr())
	for _, f := range x.list {
		if f.detached || f.err != nil || f.canceled {
			continue
		}
		switch f.kind {
		case futureStep:
			if x.replay == nil {
				x.cancelStep(f)
			}
		default:
			if !x.ready(f) {
				f.canceled = true
			}
		}
	}
}

// Detached returns a context for the workflow's cleanup: durable calls
// made on it (steps, sleeps, waits, children, futures and their awaits)
// run and checkpoint as usual after the run's cancellation, which cuts
// every call made on c (see ErrCanceled), and its Context is not
// cancelled by it. Use it in the code that handles the cancellation, a
// deferred compensation typically:
//
//	defer func() {
//		if errors.Is(err, runtime.ErrCanceled) {
//			_ = runtime.Do(c.Detached(), "release@v1", opts, release)
//		}
//	}()
//
// Everything else about the run still stops it: termination, a lost
// lease, the run's deadline.
func (c *WorkflowContext) Detached() *WorkflowContext {
	return &WorkflowContext{exec: c.exec, detached: true}
}

// IsDetached reports whether c is a detached context (see Detached).
func (c *WorkflowContext) IsDetached() bool { return c.detached }

// CancelRequested reports whether the run's cancellation is known to be
// requested, and its reason. It is not a durable call: it may change
// between replays of the same code; branch on the error of a durable call
// (errors.Is(err, ErrCanceled)) instead, which replays as it ran.
func (c *WorkflowContext) CancelRequested() (reason string, requested bool) {
	x := c.exec
	switch {
	case x.cancelSeen():
		return x.canc.reason, true
	case x.canc.reached:
		return x.canc.cutReason, true
	}
	return "", false
}

// stepBase returns the context a step's attempts derive from: the
// workflow's, or, on the detached context, the execution's.
func (x *execution) stepBase(detached bool) context.Context {
	if detached {
		return x.ctx
	}
	return x.canc.wctx
}

// canceledStep is the failure a step's attempt records when the run's
// cancellation stopped it (err, its own error, nil when it did not begin).
func (x *execution) canceledStep(key string, err error) error {
	if err != nil {
		return fmt.Errorf("step %q cut short by the run's cancellation (%v): %w", key, err, x.cancelErr())
	}
	return fmt.Errorf("step %q not retried after the run's cancellation: %w", key, x.cancelErr())
}

// cancelDone returns a channel closed when the workflow's context is
// cancelled by the run's cancellation, for a wait on the worker not made
// on the detached context; nil otherwise.
func (x *execution) cancelDone(detached bool) <-chan struct{} {
	if detached {
		return nil
	}
	return x.canc.wctx.Done()
}
