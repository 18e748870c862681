package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/stemflow/stem/storage"
)

// ChildOption configures a child workflow call.
type ChildOption func(*childOptions)

// childOptions is what the ChildOptions of one call set.
type childOptions struct {
	policy storage.ParentPolicy
}

// ParentClosePolicy says what becomes of a child run when its parent ends
// for any reason: it completes, errors (its deadline and its cancellation
// included) or is terminated; and when the parent's execution continues
// as new (ContinueAsNew), which ends the execution that started the child
// (the next one cannot await it). It is recorded with the child (RunInfo.ParentClose, stem
// show).
type ParentClosePolicy = storage.ParentPolicy

// The parent-close policies.
const (
	// ParentCloseTerminate, the default: when the parent ends, the child,
	// if it has not ended, is terminated in the same store change (with
	// its own children of this policy), with an error matching
	// ErrTerminated. A child call's future the parent never awaited does
	// not outlive it.
	ParentCloseTerminate ParentClosePolicy = storage.ParentTerminate
	// ParentCloseAbandon: the child runs to its own end whatever becomes
	// of its parent, and so do its children.
	ParentCloseAbandon ParentClosePolicy = storage.ParentAbandon
	// ParentCloseCancel: when the parent ends, the child, if it has not
	// ended, is cancelled (see Engine.Cancel), in the same store change:
	// it sees an error matching ErrCanceled, runs its cleanup on the
	// detached context, and ends itself, and its own children then meet
	// their policies.
	ParentCloseCancel ParentClosePolicy = storage.ParentCancel
)

// ParentClose sets what becomes of the child when its parent ends; see
// ParentClosePolicy. The default is ParentCloseTerminate.
func ParentClose(p ParentClosePolicy) ChildOption {
	return func(o *childOptions) { o.policy = p }
}

// Abandon is ParentClose(ParentCloseAbandon): the child runs to its end
// when its parent completes, errors, is terminated or continues as new.
func Abandon() ChildOption { return ParentClose(ParentCloseAbandon) }

// CallChild starts the workflow named workflow as a child of this run, with
// input, and waits for it to end, returning its output (or its error). name
// is the call's durable key; the child's run ID derives from this run's ID
// and it, so a replay never starts the child twice, and a replay that finds
// the child finished (after a restart of this run, say) takes its outcome.
// If the derived ID is taken by a run that is not this run's child of that
// workflow, the call fails with an error matching ErrChildCollision that
// names both runs.
func CallChild[Out any](c *WorkflowContext, name, workflow string, input any, opts ...ChildOption) (Out, error) {
	var zero Out
	x := c.exec
	x.checkStopped()
	if err := storage.CheckStepKey(name); err != nil {
		return zero, err
	}
	key, err := x.useCallKey(name, false, asChild)
	if err != nil {
		return zero, err
	}
	cp, ok, err := x.begin(c.detached, "child:"+key, key)
	if err != nil {
		return zero, err
	}
	if ok {
		return decodeChild[Out](x, cp)
	}
	childID, finished, collision, err := x.startChild(key, workflow, input, opts)
	switch {
	case err != nil:
		return zero, err
	case collision != nil:
		return decodeChild[Out](x, x.failChild(key, collision))
	case finished != nil:
		return decodeChild[Out](x, x.checkpointChild(key, x.engine.payloads.newChildOutcome(finished.Output, finished.Error)))
	}
	return decodeChild[Out](x, x.awaitChild(key, childID))
}

// ChildRun is a child workflow started with StartChild, whose output is Out.
type ChildRun[Out any] struct {
	x   *execution
	id  string
	key string
	// detached is set for a child started on the detached context.
	detached bool
}

// ID returns the child's run ID.
func (r *ChildRun[Out]) ID() string { return r.id }

// Result waits for the child to end and returns its output (or its error),
// durably: the outcome is the checkpoint of "<name>/result", so a replay
// returns it without waiting again. Calling it again returns the same.
func (r *ChildRun[Out]) Result() (Out, error) {
	x := r.x
	x.checkStopped()
	key := r.key + "/result"
	cp, ok, err := x.begin(r.detached, "result:"+key, key)
	if err != nil {
		var zero Out
		return zero, err
	}
	if ok {
		return decodeChild[Out](x, cp)
	}
	if _, err := x.useCallKey(key, false, asChildResult); err != nil {
		var zero Out
		return zero, err
	}
	// A child that ended before this execution waited (its notice consumed
	// by an execution before a restart) is read from the store.
	child, err := x.engine.store.GetRun(context.WithoutCancel(x.ctx), r.id)
	if err != nil {
		x.stop(err)
	}
	if child.Status.Finished() {
		return decodeChild[Out](x, x.checkpointChild(key, x.engine.payloads.newChildOutcome(child.Output, child.Error)))
	}
	return decodeChild[Out](x, x.awaitChild(key, r.id))
}

// StartChild starts the workflow named workflow as a child of this run and
// returns a handle on it without waiting; its Result waits for the child
// later. name is the call's durable key; a replay returns the same child.
// A derived ID taken by another run fails as in CallChild.
func StartChild[Out any](c *WorkflowContext, name, workflow string, input any, opts ...ChildOption) (*ChildRun[Out], error) {
	x := c.exec
	x.checkStopped()
	if err := storage.CheckStepKey(name); err != nil {
		return nil, err
	}
	key, err := x.useCallKey(name, false, asChild)
	if err != nil {
		return nil, err
	}
	cp, ok, err := x.begin(c.detached, "child:"+key, key)
	if err != nil {
		return nil, err
	}
	if !ok {
		// A child that ended already is read by Result.
		childID, _, collision, err := x.startChild(key, workflow, input, opts)
		if err != nil {
			return nil, err
		}
		if collision != nil {
			cp = x.failChild(key, collision)
		} else {
			out, _ := json.Marshal(childID)
			cp, _ = x.checkpoint(storage.Checkpoint{Key: key, Kind: KindChild, Output: out}, nil)
		}
	}
	id, err := decodeCheckpoint[string](x, cp)
	if err != nil {
		return nil, err
	}
	return &ChildRun[Out]{x: x, id: id, key: key, detached: c.detached}, nil
}

// startChild creates the child run (idempotently, by its derived ID). When
// the ID exists as this parent's child of that workflow and it has ended,
// finished is its record; when the ID is taken by any other run, collision
// is the error the call fails with (ErrChildCollision, naming both runs).
func (x *execution) startChild(key, workflow string, input any, opts []ChildOption) (childID string, finished *storage.RunRecord, collision *storage.ErrorInfo, err error) {
	x.replay.reach(x, key)
	e := x.engine
	def, err := e.registered(workflow)
	if err != nil {
		return "", nil, nil, err
	}
	what := "input of child " + workflow
	plain, err := json.Marshal(input)
	if err != nil {
		return "", nil, nil, fmt.Errorf("stem: encode %s: %w", what, err)
	}
	in, err := e.payloads.encodeRaw(what, plain)
	if err != nil {
		return "", nil, nil, err
	}
	// The child's own attributes, from its input.
	attrs, err := startAttrs(workflow, def.attrs, plain, nil)
	if err != nil {
		return "", nil, nil, err
	}
	childID = childRunID(x.lease.RunID, key)
	var o childOptions
	for _, opt := range opts {
		opt(&o)
	}
	if !o.policy.Valid() {
		return "", nil, nil, invalidArg("child call %q: unknown parent-close policy %q: want ParentCloseTerminate or ParentCloseAbandon", key, o.policy)
	}
	x.cpMu.Lock()
	x.startedChild = true
	x.cpMu.Unlock()
	req := storage.NewRun{ID: childID, Workflow: workflow, Input: in, Attributes: attrs, ParentID: x.lease.RunID, ParentPolicy: o.policy,
		Deadline: def.deadlineFrom(e.clock.Now(), time.Time{}), Queue: def.queue, Version: def.version}
	x.flush()
	res, err := e.createRuns(context.WithoutCancel(x.ctx), x.lease.RunID, []storage.NewRun{req})
	if err != nil {
		x.stop(err)
	}
	if r := res[0]; !r.Created {
		if r.Run.ParentID != x.lease.RunID || r.Run.Workflow != workflow {
			info := &storage.ErrorInfo{Code: storage.CodeChildCollision, Message: e.payloads.sealText(fmt.Sprintf(
				"stem: child run ID taken by another run: run %s cannot start its child %q (workflow %s) as run %s: that run exists as a run of %s with parent %q",
				x.lease.RunID, key, workflow, childID, r.Run.Workflow, r.Run.ParentID))}
			return childID, nil, info, nil
		}
		if r.Run.Status.Finished() {
			return childID, &r.Run, nil, nil
		}
	}
	e.signal()
	return childID, nil, nil, nil
}

// failChild checkpoints a child call's failure as its result.
func (x *execution) failChild(key string, info *storage.ErrorInfo) storage.Checkpoint {
	cp, _ := x.checkpoint(storage.Checkpoint{Key: key, Kind: KindChild, Error: info}, nil)
	return cp
}

// checkpointChild checkpoints a child's outcome as the call's result.
func (x *execution) checkpointChild(key string, co childOutcome) storage.Checkpoint {
	out, _ := json.Marshal(co)
	cp, _ := x.checkpoint(storage.Checkpoint{Key: key, Kind: KindChild, Output: out}, nil)
	return cp
}

// awaitChild parks the run until the child's outcome arrives as the
// checkpoint of key, or returns it at once if it is already buffered.
func (x *execution) awaitChild(key, childID string) storage.Checkpoint {
	w := &storage.Wait{Key: key, Topic: childTopic(childID), Kind: KindChild}
	x.waiting(key, KindChild, w, nil)
	return x.suspend(key, storage.SuspendRequest{Wait: w})
}

// decodeChild returns a child's outcome, delivered as the wait's checkpoint.
func decodeChild[Out any](x *execution, cp storage.Checkpoint) (Out, error) {
	var zero Out
	if cp.Error != nil {
		return zero, x.engine.payloads.errorFrom(cp.Key, cp.Error)
	}
	var co childOutcome
	if err := json.Unmarshal(cp.Output, &co); err != nil {
		return zero, fmt.Errorf("%w: child outcome %q: %v", ErrDecode, cp.Key, err)
	}
	if co.Error != nil {
		return zero, x.engine.payloads.errorFrom(cp.Key, co.Error)
	}
	var out Out
	if err := x.engine.payloads.decode("child output "+cp.Key, co.stored(), &out); err != nil {
		return zero, err
	}
	return out, nil
}

// childRunID derives a child's run ID from its parent's and the call's key,
// so a replayed parent finds the same child instead of starting another.
func childRunID(parentID, key string) string {
	return parentID + "/" + key
}

// childTopic is the topic on which a parent waits for its child's outcome.
func childTopic(childID string) string {
	return "stem.child/" + childID
}

// childOutcome is the payload a child sends its parent when it ends. The
// child's output travels as JSON, or sealed when the engine has a codec.
type childOutcome struct {
	Output json.RawMessage    `json:"output,omitempty"`
	Sealed []byte             `json:"sealed,omitempty"`
	Error  *storage.ErrorInfo `json:"error,omitempty"`
}

// newChildOutcome wraps a child's stored output (codec applied) or error.
func (p payloads) newChildOutcome(stored []byte, info *storage.ErrorInfo) childOutcome {
	if info != nil {
		return childOutcome{Error: info}
	}
	if p.codec != nil {
		return childOutcome{Sealed: stored}
	}
	return childOutcome{Output: stored}
}

// stored returns the child's output as stored (codec applied).
func (c childOutcome) stored() []byte {
	if c.Sealed != nil {
		return c.Sealed
	}
	return c.Output
}

// parentNotice is the event that tells parent parentID how its child childID
// ended, delivered in the same store change that ends the child; nil for a
// run without a parent.
func parentNotice(parentID, childID string, co childOutcome) *storage.Event {
	if parentID == "" {
		return nil
	}
	payload, err := json.Marshal(co)
	if err != nil {
		return nil
	}
	return &storage.Event{RunID: parentID, Topic: childTopic(childID), Payload: payload}
}

// childStep shows a child call's checkpoint as operators read a step: the
// child's output or error (for StartChild, which checkpoints the child's ID,
// the checkpoint as it is).
func (p payloads) childStep(cp storage.Checkpoint) (json.RawMessage, error) {
	var co childOutcome
	if json.Unmarshal(cp.Output, &co) != nil {
		return cp.Output, p.errorFrom(cp.Key, cp.Error)
	}
	if co.Error != nil {
		return nil, p.errorFrom(cp.Key, co.Error)
	}
	raw, err := p.raw("child output "+cp.Key, co.stored())
	if err != nil {
		return nil, p.errorFrom(cp.Key, cp.Error)
	}
	return raw, p.errorFrom(cp.Key, cp.Error)
}
