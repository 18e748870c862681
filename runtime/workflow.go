package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/stemflow/stem/storage"
)

// WorkflowContext is what a workflow function receives. Its methods, and the
// package functions that take it (Step, Do, WaitForEvent, CallChild,
// StartChild), are the workflow's only way to act durably. Generated code
// embeds it in each workflow's typed context.
//
// A workflow is re-invoked from the top whenever its run is scheduled again;
// every completed step returns its checkpoint instead of running. So code
// between steps must be deterministic: side effects and clocks belong in
// steps.
type WorkflowContext struct {
	exec *execution
	// detached is set on the context Detached returns.
	detached bool
}

// RunID returns the run's ID.
func (c *WorkflowContext) RunID() string { return c.exec.lease.RunID }

// Workflow returns the workflow's durable name.
func (c *WorkflowContext) Workflow() string { return c.exec.workflow }

// ParentID returns the ID of the run that started this one as a child, or "".
func (c *WorkflowContext) ParentID() string { return c.exec.claim.ParentID }

// Logger returns a logger that names the run.
func (c *WorkflowContext) Logger() *slog.Logger { return c.exec.logger() }

// Context returns a context that is cancelled when the run stops on this
// worker (terminated, lease lost, engine shutting down), and, unless c is
// detached (see Detached), when the run is cancelled, with a cause
// matching ErrCanceled (context.Cause).
func (c *WorkflowContext) Context() context.Context { return c.exec.stepBase(c.detached) }

// Sleep suspends the run for d under the durable name. The wake time is
// persisted once; when the run is scheduled again after it, Sleep returns at
// once without sleeping again. While suspended, Sleep does not return: the
// workflow goroutine unwinds and the run is released.
//
// A sleep may sit in a loop: the calls of one name number themselves by
// call order in the execution. The first is keyed name, as a single sleep
// always was, and the n-th after it name#n (see IterationKey), each with
// its own wake time; sleeps and waits (WaitForEvent) of one name share the
// numbering. A replay that reaches the run's suspension with another count
// fails the run with ErrNonDeterminism. ErrDuplicateStep comes only from a
// name whose numbered key a call of another kind (a step, a child call, a
// select or a future) already uses in the run.
func (c *WorkflowContext) Sleep(name string, d time.Duration) error {
	return c.sleep(name, func(now time.Time) time.Time { return now.Add(d) })
}

// SleepUntil suspends the run until t under the durable name, numbered in
// a loop as Sleep's is; see Sleep.
func (c *WorkflowContext) SleepUntil(name string, t time.Time) error {
	return c.sleep(name, func(time.Time) time.Time { return t })
}

func (c *WorkflowContext) sleep(name string, wakeAt func(now time.Time) time.Time) error {
	x := c.exec
	x.checkStopped()
	if err := storage.CheckStepKey(name); err != nil {
		return err
	}
	key, err := x.repeatKey(name, asSleep)
	if err != nil {
		return err
	}
	now := x.engine.clock.Now()
	if cp, ok := x.recall(key, callSync); ok {
		var wake time.Time
		if err := json.Unmarshal(cp.Output, &wake); err != nil {
			return fmt.Errorf("%w: sleep %q wake time: %v", ErrDecode, key, err)
		}
		if err := x.cutAt(c.detached, "sleep:"+key, now.Before(wake)); err != nil {
			return err
		}
		if !now.Before(wake) {
			return nil
		}
		x.waiting(key, KindSleep, nil, &wake)
		x.suspend(key, storage.SuspendRequest{ReadyAt: &wake})
		panic("unreachable")
	}
	x.frontier(key, callSync)
	if err := x.cutAt(c.detached, "sleep:"+key, true); err != nil {
		return err
	}
	wake := wakeAt(now).UTC()
	out, _ := json.Marshal(wake)
	cp := storage.Checkpoint{Key: key, Kind: KindSleep, Output: out}
	if !now.Before(wake) {
		x.checkpoint(cp, nil)
		return nil
	}
	x.waiting(key, KindSleep, nil, &wake)
	x.suspend(key, storage.SuspendRequest{Checkpoint: &cp, ReadyAt: &wake})
	panic("unreachable")
}

// durableCall is a kind of durable call, for the error that says how to give
// a call a key of its own.
type durableCall int

const (
	asStep durableCall = iota
	asChild
	asSleep
	asWait
	asSelect
	asEventFuture
	asTimer
	asChildResult
	asReply
	asAppend
	asAttr
)

func (k durableCall) String() string {
	switch k {
	case asStep:
		return "step"
	case asChild:
		return "child call"
	case asSleep:
		return "sleep"
	case asWait:
		return "wait"
	case asSelect:
		return "select"
	case asEventFuture:
		return "event future"
	case asTimer:
		return "timer"
	case asReply:
		return "reply"
	case asAppend:
		return "stream write"
	case asAttr:
		return "attribute setting"
	}
	return "child result"
}

// useCallKey is useKey for a call of kind what: a key used before in this
// execution is ErrDuplicateStep, with the fix that suits the call.
func (x *execution) useCallKey(key string, autoversion bool, what durableCall) (string, error) {
	full, err := x.useKey(key, autoversion)
	if err == nil || !errors.Is(err, ErrDuplicateStep) {
		return full, err
	}
	if autoversion {
		key = IterationKey(key, x.counters[key]-1)
	}
	return "", x.duplicate(key, what, autoversion)
}

// duplicate is the ErrDuplicateStep of a call of kind what whose key is
// used already. A step that is not autoversion and a child call use their
// key as given, so calling them twice is the mistake; the other calls
// number their keys by call order, so the key was taken by a call of
// another kind with the same name.
func (x *execution) duplicate(key string, what durableCall, autoversion bool) error {
	switch {
	case what == asStep && !autoversion:
		return fmt.Errorf("%w: %q is called more than once in run %s; mark the step autoversion to call it in a loop", ErrDuplicateStep, key, x.lease.RunID)
	case what == asChild:
		return fmt.Errorf("%w: %q names more than one child call in run %s; give each call its own name (the child's run ID derives from it)", ErrDuplicateStep, key, x.lease.RunID)
	}
	return fmt.Errorf("%w: the %s's key %q is used already in run %s by a call of another kind; give the %s a name of its own", ErrDuplicateStep, what, key, x.lease.RunID, what)
}

// repeatKey returns the key of a sleep's or wait's call named name, numbered
// by call order in this execution: the first call keeps name itself (so a
// run suspended there before sleeps and waits numbered themselves finds its
// checkpoint), and the n-th call after it is name#n (IterationKey). Sleeps
// and waits of one name share the numbering. The count rides with the
// suspension state among the autoversion counters, as "name#", from the
// second call on, so a replay that reaches the suspension with another
// count is caught as non-deterministic.
func (x *execution) repeatKey(name string, what durableCall) (string, error) {
	if x.repeats == nil {
		x.repeats = map[string]int{}
	}
	n := x.repeats[name]
	x.repeats[name] = n + 1
	key := name
	if n > 0 {
		key = IterationKey(name, n)
		x.counters[name+"#"] = n
	}
	return x.useCallKey(key, false, what)
}
