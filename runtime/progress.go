package runtime

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"sync"
	"time"

	"github.com/stemflow/stem/storage"
)

// progress is the value a run publishes, waiting for a write to ride.
type progress struct {
	mu sync.Mutex
	// pending is the sealed value not yet written, set at setAt.
	pending []byte
	setAt   time.Time
	// last is the plain JSON of the latest value published or pending, so
	// the same value is not written twice (a replay publishes again what
	// it published before).
	last []byte
}

// due reports whether a value has waited longer than after for a write:
// the heartbeat then writes it, so a long step does not hide it.
func (p *progress) due(after time.Duration) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pending != nil && time.Since(p.setAt) >= after
}

// takeProgress returns the value waiting to be published (nil: none), for
// the write about to be made to carry it.
func (x *execution) takeProgress() []byte {
	p := &x.progress
	p.mu.Lock()
	defer p.mu.Unlock()
	b := p.pending
	p.pending = nil
	return b
}

// SetProgress publishes v as the run's progress: callers read it with
// GetProgress (and the generated handle's Progress), wait for it to change
// with WaitProgress, and operators see it in `stem show`. The value is
// written with the run's next write (a step's checkpoint, a suspension, its
// end), or within a quarter of Config.HeartbeatInterval while a step runs;
// publishing the value last published writes nothing, so a replay costs
// no write. Generated code types it: a workflow annotated progress=T gets
// SetProgress(T). A value over Config.MaxPayloadBytes, or one that does not
// encode, is an error at the call and nothing changes.
func SetProgress(c *WorkflowContext, v any) error {
	x := c.exec
	x.checkStopped()
	plain, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("%w: progress of run %s: %v", ErrDecode, x.lease.RunID, err)
	}
	if limit := x.engine.cfg.MaxPayloadBytes; len(plain) > limit {
		return fmt.Errorf("%w: progress of run %s is %d bytes, over the limit of %d", ErrPayloadTooLarge, x.lease.RunID, len(plain), limit)
	}
	p := &x.progress
	p.mu.Lock()
	defer p.mu.Unlock()
	if bytes.Equal(plain, p.last) {
		return nil
	}
	sealed, err := x.engine.payloads.seal(plain)
	if err != nil {
		return err
	}
	p.last, p.pending, p.setAt = plain, sealed, time.Now()
	return nil
}

// GetProgress returns the progress the run last published, decoded into P,
// and whether it has published any.
func GetProgress[P any](ctx context.Context, e *Engine, runID string) (P, bool, error) {
	var zero P
	info, err := e.Get(ctx, runID)
	if err != nil {
		return zero, false, err
	}
	return decodeProgress[P](e, info)
}

func decodeProgress[P any](e *Engine, info RunInfo) (P, bool, error) {
	var p P
	if info.Progress == nil {
		return p, false, nil
	}
	if err := decodeJSON("progress of run "+info.ID, info.Progress, e.cfg.MaxPayloadBytes, &p); err != nil {
		return p, true, err
	}
	return p, true, nil
}

// WaitProgress waits until the run's published progress differs from after
// (compared as JSON) and returns it; or, when the run finishes first, its
// last published progress. It reads the store at most every
// Config.PollInterval, sooner at first.
func WaitProgress[P any](ctx context.Context, e *Engine, runID string, after P) (P, error) {
	var zero P
	prev, err := json.Marshal(after)
	if err != nil {
		return zero, fmt.Errorf("%w: WaitProgress: %v", ErrInvalidArgument, err)
	}
	delay := 5 * time.Millisecond
	for {
		info, err := e.Get(ctx, runID)
		if err != nil {
			return zero, err
		}
		if info.Progress != nil && !jsonEqual(info.Progress, prev) || info.Status.Finished() {
			p, _, err := decodeProgress[P](e, info)
			return p, err
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return zero, ctx.Err()
		case <-t.C:
		}
		delay = min(2*delay, max(e.cfg.PollInterval, 5*time.Millisecond))
	}
}

// jsonEqual reports whether a and b are the same JSON value, whatever
// their spacing.
func jsonEqual(a, b []byte) bool {
	var ca, cb bytes.Buffer
	if json.Compact(&ca, a) != nil || json.Compact(&cb, b) != nil {
		return bytes.Equal(a, b)
	}
	return bytes.Equal(ca.Bytes(), cb.Bytes())
}

// ContinueAsNew ends the run's current execution and begins the next one
// of the same run with input and an empty history, so a workflow that
// loops forever replays only its latest iteration. Call it as a return:
//
//	return Out{}, runtime.ContinueAsNew(ctx, next)
//
// It waits for the run's step futures to write their outcomes, writes the
// new execution, and does not return: the run is queued at once, keeping
// its ID, parent, deadline, progress and the events sent to it, and Result
// returns the final execution's result. The children the run started meet
// their parent-close policy (see ParentClosePolicy) in the same store
// change, as when the run ends: an execution that continued as new awaits
// none of them. An input of the wrong type, one
// that does not encode or one over Config.MaxPayloadBytes is an error and
// nothing changes. Generated code types it: ctx.ContinueAsNew(in).
func ContinueAsNew(c *WorkflowContext, input any) error {
	x := c.exec
	x.checkStopped()
	if want, got := x.inType, reflect.TypeOf(input); want != nil && got != want {
		return fmt.Errorf("%w: ContinueAsNew of workflow %q with a %v input, want %v", ErrInvalidArgument, x.workflow, got, want)
	}
	in, err := x.engine.payloads.encode("input of workflow "+x.workflow+" (continue as new)", input)
	if err != nil {
		return err
	}
	if err := x.cutAt(c.detached, "continue-as-new", true); err != nil {
		return err
	}
	x.settle()
	x.failUntaken(c)
	x.frontier("continue-as-new", callSync)
	if x.replay != nil {
		x.replay.continued = true
		x.unwind()
	}
	x.flush()
	req := storage.ContinueRequest{Lease: x.lease, Input: in, Progress: x.takeProgress()}
	if x.hasChildren() {
		req.ChildError = &storage.ErrorInfo{Code: storage.CodeTerminated, Message: x.engine.payloads.sealText(fmt.Sprintf(
			"stem: run terminated: its parent %s continued as new and the child's parent-close policy is terminate", x.lease.RunID))}
		req.ChildCancel = fmt.Sprintf("its parent %s continued as new and the child's parent-close policy is cancel", x.lease.RunID)
	}
	err = x.engine.store.ContinueAsNew(context.WithoutCancel(x.ctx), req)
	if err != nil {
		x.stop(err)
	}
	x.outcome = outcomeContinued
	x.engine.signal()
	x.unwind()
	panic("unreachable")
}
