package runtime

import (
	"context"
	"encoding/json"
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
// worker (terminated, lease lost, engine shutting down).
func (c *WorkflowContext) Context() context.Context { return c.exec.ctx }

// Sleep suspends the run for d under the durable name. The wake time is
// persisted once; when the run is scheduled again after it, Sleep returns at
// once without sleeping again. While suspended, Sleep does not return: the
// workflow goroutine unwinds and the run is released.
func (c *WorkflowContext) Sleep(name string, d time.Duration) error {
	return c.sleep(name, func(now time.Time) time.Time { return now.Add(d) })
}

// SleepUntil suspends the run until t under the durable name; see Sleep.
func (c *WorkflowContext) SleepUntil(name string, t time.Time) error {
	return c.sleep(name, func(time.Time) time.Time { return t })
}

func (c *WorkflowContext) sleep(name string, wakeAt func(now time.Time) time.Time) error {
	x := c.exec
	x.checkStopped()
	if err := storage.CheckStepKey(name); err != nil {
		return err
	}
	key, err := x.useKey(name, false)
	if err != nil {
		return err
	}
	now := x.engine.clock.Now()
	if cp, ok := x.lookup(key); ok {
		var wake time.Time
		if err := json.Unmarshal(cp.Output, &wake); err != nil {
			return fmt.Errorf("%w: sleep %q wake time: %v", ErrDecode, key, err)
		}
		if !now.Before(wake) {
			return nil
		}
		x.waiting(key, KindSleep, nil, &wake)
		x.suspend(key, storage.SuspendRequest{ReadyAt: &wake})
		panic("unreachable")
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
