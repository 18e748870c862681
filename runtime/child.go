package runtime

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/stemflow/stem/storage"
)

// CallChild starts the workflow named workflow as a child of this run, with
// input, and waits for it to end, returning its output (or its error). name
// is the call's durable key; the child's run ID derives from this run's ID
// and it, so a replay never starts the child twice.
func CallChild[Out any](c *WorkflowContext, name, workflow string, input any) (Out, error) {
	var zero Out
	x := c.exec
	x.checkStopped()
	if err := validKey(name); err != nil {
		return zero, err
	}
	key, err := x.useKey(name, false)
	if err != nil {
		return zero, err
	}
	if cp, ok := x.checkpoints[key]; ok {
		return decodeChild[Out](x, cp)
	}
	childID, err := x.startChild(key, workflow, input)
	if err != nil {
		return zero, err
	}
	cp := x.suspend(key, storage.SuspendRequest{Wait: &storage.Wait{Key: key, Topic: childTopic(childID), Kind: KindChild}})
	return decodeChild[Out](x, cp)
}

// StartChild starts the workflow named workflow as a child of this run and
// returns the child's run ID without waiting for it. name is the call's
// durable key; a replay returns the same child.
func StartChild(c *WorkflowContext, name, workflow string, input any) (string, error) {
	x := c.exec
	x.checkStopped()
	if err := validKey(name); err != nil {
		return "", err
	}
	key, err := x.useKey(name, false)
	if err != nil {
		return "", err
	}
	if cp, ok := x.checkpoints[key]; ok {
		return decodeCheckpoint[string](x, cp)
	}
	childID, err := x.startChild(key, workflow, input)
	if err != nil {
		return "", err
	}
	out, _ := json.Marshal(childID)
	x.checkpoint(storage.Checkpoint{Key: key, Kind: KindChild, Output: out}, nil)
	return childID, nil
}

// startChild creates the child run (idempotently, by its derived ID).
func (x *execution) startChild(key, workflow string, input any) (string, error) {
	e := x.engine
	if _, err := e.registered(workflow); err != nil {
		return "", err
	}
	in, err := e.payloads.encode("input of child "+workflow, input)
	if err != nil {
		return "", err
	}
	childID := childRunID(x.lease.RunID, key)
	if _, err := e.store.CreateRuns(context.WithoutCancel(x.ctx), []storage.NewRun{{
		ID: childID, Workflow: workflow, Input: in, ParentID: x.lease.RunID,
	}}); err != nil {
		x.stop(err)
	}
	e.signal()
	return childID, nil
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
