package runtime

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/stemflow/stem/storage"
)

// A step's checkpoint is written with the run's next write, not on its
// own: at the workflow's next durable call, or with its completion when
// the workflow returns right after the step, so a run of ten steps costs
// ten writes, the last carrying the completion. Until then the result
// lives only in this process, and the workflow's code runs on with it;
// that code is deterministic and makes no durable call before the write,
// so a crash in between loses only what a crash during the step would:
// the step runs again when another worker replays the run. The heartbeat
// writes a checkpoint left waiting longer than a quarter of its interval
// (code that computes for long between two calls), so the window stays
// short whatever the workflow does. Only a step of the workflow goroutine
// with no step future in the execution is deferred: futures write as
// their steps end.

// deferredWrite is a step's checkpoint not written yet.
type deferredWrite struct {
	cp       storage.Checkpoint
	attempts []Attempt
	at       time.Time
}

// deferStep keeps cp as the run's checkpoint of its key and leaves its
// write to the run's next write (see flush). It returns cp.
func (x *execution) deferStep(cp storage.Checkpoint, attempts []Attempt) storage.Checkpoint {
	x.flush() // one at a time, in order (none is waiting here, as a rule)
	x.deferred.Store(&deferredWrite{cp: cp, attempts: attempts, at: x.engine.clock.Now()})
	x.keep(cp)
	return cp
}

// flush writes the deferred checkpoint, if any, on the workflow
// goroutine, before the write the caller is about to make: a failure
// stops the run, a pause taking effect parks it, as any checkpoint's.
//
// It takes flushMu even when nothing waits: the heartbeat may be writing
// the deferred checkpoint, which must land before the caller's write.
func (x *execution) flush() {
	x.flushMu.Lock()
	defer x.flushMu.Unlock()
	if d := x.deferred.Swap(nil); d != nil {
		x.mu.Lock()
		busy := len(x.running) > 0
		x.mu.Unlock()
		x.put(d.cp, d.attempts, false, busy, d)
	}
}

// takeDeferred takes the deferred checkpoint, if any, for the caller to
// write (a completion riding with it), once any write of it by the
// heartbeat has ended.
func (x *execution) takeDeferred() *deferredWrite {
	x.flushMu.Lock()
	defer x.flushMu.Unlock()
	return x.deferred.Swap(nil)
}

// flushIdle writes, from the heartbeat, a deferred checkpoint that has
// waited longer than after for the workflow's next call. It writes as a
// busy checkpoint, so a pause takes effect at the workflow's next step
// boundary, not here. A lost lease cancels the execution; a write that
// failed otherwise is left for the next flush to write again.
func (x *execution) flushIdle(after time.Duration) {
	d := x.deferred.Load()
	if d == nil || x.engine.clock.Now().Sub(d.at) < after {
		return
	}
	x.flushMu.Lock()
	defer x.flushMu.Unlock()
	if d = x.deferred.Swap(nil); d == nil {
		return
	}
	res, err := x.engine.store.Checkpoint(context.WithoutCancel(x.ctx), storage.CheckpointRequest{
		Lease: x.lease, LeaseFor: x.engine.cfg.LeaseDuration, Checkpoint: d.cp, Attempts: d.attempts, Progress: x.takeProgress(), Busy: true,
	})
	switch {
	case errors.Is(err, ErrLeaseLost):
		x.cancel(x.lostCause(err))
		return
	case err != nil:
		x.deferred.CompareAndSwap(nil, d)
		if x.ctx.Err() == nil {
			x.logger().Warn("stem: write a step's checkpoint", "key", d.cp.Key, "err", err)
		}
		return
	case res.Existing != nil && !d.same(*res.Existing):
		x.cancel(d.overtaken(x.lease.RunID))
		return
	}
	x.extended()
	if res.PauseRequested {
		x.notePause(storage.HeartbeatResult{PauseRequested: true})
	}
	if res.CancelRequested {
		x.noteCancel("", true)
	}
}

// same reports whether stored is this checkpoint as written (by an
// earlier try of a write whose answer was lost).
func (d *deferredWrite) same(stored storage.Checkpoint) bool {
	return stored.Kind == d.cp.Kind && bytes.Equal(stored.Output, d.cp.Output) && reflect.DeepEqual(stored.Error, d.cp.Error)
}

// overtaken is the error that stops a run whose deferred checkpoint found
// another stored under its key: the run is handed back to replay from the
// store's.
func (d *deferredWrite) overtaken(runID string) error {
	return fmt.Errorf("run %s: the checkpoint of %q was stored by another meanwhile: %w", runID, d.cp.Key, ErrLeaseLost)
}
