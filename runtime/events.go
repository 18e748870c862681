package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/stemflow/stem/storage"
)

// WaitForEvent suspends the run until an event of topic arrives for it (sent
// with SendEvent to this run, or emitted to the topic while it waits), and
// returns the event's payload decoded into T. name is the wait's durable key.
// A timeout above zero bounds the wait: when it passes first, WaitForEvent
// returns an error matching ErrEventTimeout, checkpointed like any result so
// the wait never re-arms. The payload is seen exactly once: it is the wait's
// checkpoint.
func WaitForEvent[T any](c *WorkflowContext, name, topic string, timeout time.Duration) (T, error) {
	var zero T
	x := c.exec
	x.checkStopped()
	if err := validKey(name); err != nil {
		return zero, err
	}
	if topic == "" {
		return zero, invalidArg("event topic is empty")
	}
	key, err := x.useKey(name, false)
	if err != nil {
		return zero, err
	}
	if cp, ok := x.checkpoints[key]; ok {
		return decodeCheckpoint[T](x, cp)
	}
	w := x.claim.Wait
	if w == nil || w.Key != key {
		// The first wait: its deadline is fixed now and persisted.
		w = &storage.Wait{Key: key, Topic: topic, Kind: KindEvent}
		if timeout > 0 {
			d := x.engine.clock.Now().Add(timeout).UTC()
			w.Deadline = &d
		}
	} else if w.Deadline != nil && !x.engine.clock.Now().Before(*w.Deadline) {
		// A registered wait whose deadline passed: a timeout, not a new wait.
		cp, _ := x.checkpoint(storage.Checkpoint{Key: key, Kind: KindEvent, Error: &storage.ErrorInfo{
			Message: x.engine.payloads.sealText(fmt.Sprintf("event %q (topic %q) did not arrive by %s", key, w.Topic, w.Deadline.Format(time.RFC3339Nano))),
			Code:    storage.CodeEventTimeout,
		}}, nil)
		return decodeCheckpoint[T](x, cp)
	}
	cp := x.suspend(key, storage.SuspendRequest{Wait: w, ReadyAt: w.Deadline})
	return decodeCheckpoint[T](x, cp)
}

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
