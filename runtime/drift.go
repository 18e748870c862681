package runtime

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/stemflow/stem/storage"
)

// DefaultHoldRetry is how long a held run waits before an engine looks at
// it again when Config.HoldRetry is zero.
const DefaultHoldRetry = 30 * time.Second

// history is what an execution replays: the calls its run recorded in
// this execution, as their checkpoints in write order, and which of them
// the code has asked for so far.
//
// Each execution checks, call by call, that its code makes the calls the
// history recorded, in the order recorded (see recall and frontier); a run
// whose code parts from its history is held (see execution.hold), never
// completed or errored for it. Lookup by key alone is not replay: a step
// wrapped in an if, inserted before a park, removed or reordered keeps
// every other key, and only the order tells.
type history struct {
	keys  []string
	at    map[string]int
	asked []bool
	// next is the first entry not asked for: all before it were.
	next int
	// futures holds the keys of the futures the run created before its
	// last suspension, and parkAt the history entry of the call it parked
	// at (-1: none recorded), from the suspension state.
	futures map[string]bool
	parkAt  int
}

// load fills h from the execution's checkpoints, in write order, and its
// suspension state.
func (h *history) load(cps []storage.Checkpoint, state suspendState) {
	h.keys = make([]string, len(cps))
	h.at = make(map[string]int, len(cps))
	h.asked = make([]bool, len(cps))
	for i, cp := range cps {
		h.keys[i] = cp.Key
		h.at[cp.Key] = i
	}
	h.futures = make(map[string]bool, len(state.Futures))
	for _, k := range state.Futures {
		h.futures[k] = true
	}
	h.parkAt = -1
	if i, ok := h.at[state.Key]; ok && state.Key != "" {
		h.parkAt = i
	}
}

// ask marks the entry of key asked for, and returns its index (-1 when
// the history has no such entry).
func (h *history) ask(key string) int {
	i, ok := h.at[key]
	if !ok {
		return -1
	}
	h.asked[i] = true
	for h.next < len(h.keys) && h.asked[h.next] {
		h.next++
	}
	return i
}

// callKind says how a durable call relates to the run's history, for the
// checks: a call made on the workflow goroutine that the run waited for
// (its checkpoint is written at the call), or a future's creation.
type callKind int

const (
	callSync callKind = iota
	callFuture
)

// recall returns the checkpoint the run recorded for a call of key, if it
// has one, after checking the call against the history: a call the run
// waited for must come after every call recorded before it. A future's
// creation is only marked: its checkpoint is written when it ends, after
// calls made later.
func (x *execution) recall(key string, kind callKind) (storage.Checkpoint, bool) {
	cp, ok := x.lookup(key)
	if !ok {
		return cp, false
	}
	x.cpMu.Lock()
	i := x.history.ask(key)
	next := x.history.next
	x.cpMu.Unlock()
	if kind == callSync && i > next {
		x.diverge(next, key, "the code calls %s, but the run recorded %s before it, which the code has not called", key, x.history.keys[next])
	}
	return cp, true
}

// frontier checks a call for which the run recorded nothing (a step to
// run, a sleep or wait to begin, a child to start, the run's end: called
// "" when the code returns): the code must have made every call recorded
// before it. A future's creation is checked against what the run recorded
// up to its last suspension only, less other futures' results: a future
// started before it may have finished after later calls.
func (x *execution) frontier(called string, kind callKind) {
	x.cpMu.Lock()
	h := &x.history
	missed := -1
	switch {
	case kind == callSync && h.next < len(h.keys):
		missed = h.next
	case kind == callFuture && !h.futures[called]:
		for i := h.next; i <= h.parkAt; i++ {
			if !h.asked[i] && !h.futures[h.keys[i]] {
				missed = i
				break
			}
		}
	}
	x.cpMu.Unlock()
	if missed < 0 {
		return
	}
	recorded := h.keys[missed]
	if called == "" {
		x.diverge(missed, "", "the code returns without calling %s, which the run recorded", recorded)
	}
	x.diverge(missed, called, "the code calls %s, which the run did not record, where the run recorded %s", called, recorded)
}

// diverge holds the run for a divergence at history entry i (the one the
// run recorded there, or the end of its history when i is its length),
// where the code called called; see hold.
func (x *execution) diverge(i int, called string, format string, args ...any) {
	h := storage.Hold{Reason: fmt.Sprintf(format, args...), Called: called, Position: i}
	if i < len(x.history.keys) {
		h.Recorded = x.history.keys[i]
	}
	x.hold(h)
}

// drift holds the run for a check of the runtime's own (loop counts, a
// select's case, a checkpoint that no longer decodes) that caught the code
// parting from the run's history, at the first history entry not yet
// asked for or the entry of called, whichever comes first.
func (x *execution) drift(called string, err error) {
	x.cpMu.Lock()
	i := x.history.next
	x.cpMu.Unlock()
	if j, ok := x.history.at[called]; ok && j < i {
		i = j
	}
	x.diverge(i, called, "%s", err.Error())
}

// hold ends the execution without executing the run further: its code
// no longer makes the calls its history recorded. A replay reports it; a
// live execution hands the run back untouched — its checkpoints, wait and
// suspension state kept, nothing else written — with the hold recorded on
// it, ready again after Config.HoldRetry, so that a build that restores
// compatibility continues it with no operator's help. It logs why once
// per run and reason; Hooks.Execution sees OutcomeHeld. It does not
// return.
func (x *execution) hold(h storage.Hold) {
	h.Execution = max(x.execution, 1)
	if len(h.Reason) > storage.MaxHoldReason {
		h.Reason = h.Reason[:storage.MaxHoldReason-3] + "..."
	}
	if x.replay != nil {
		x.replay.caughtKey = h.Called
		if h.Called == "" {
			x.replay.caughtKey = h.Recorded
		}
		x.replay.diverge(x, h.Reason)
	}
	e := x.engine
	x.quiesce()
	x.flush()
	h.Since = e.clock.Now().UTC()
	if _, warned := e.heldRuns.LoadOrStore(x.lease.RunID+"\x00"+h.Reason, true); !warned {
		x.logger().Warn("stem: the workflow's code no longer matches the run's history; the run is held until a build that matches it takes it",
			"reason", h.Reason, "recorded", h.Recorded, "called", h.Called, "position", h.Position, "retry", e.holdRetry())
	}
	readyAt := h.Since.Add(e.holdRetry())
	if d := x.deadline; d != nil && d.Before(readyAt) {
		readyAt = *d
	}
	_, err := e.store.Suspend(context.WithoutCancel(x.ctx), storage.SuspendRequest{
		Lease: x.lease, LeaseFor: e.cfg.LeaseDuration, ReadyAt: &readyAt, SuspendState: x.claim.SuspendState, Hold: &h,
	})
	if err != nil && !errors.Is(err, ErrLeaseLost) {
		x.logger().Warn("stem: hold", "err", err)
	}
	e.signal() // its ready time may be sooner than the engine's next wake
	x.held = &h
	x.outcome = outcomeHeld
	x.unwind()
}

// holdRetry is Config.HoldRetry, or its default.
func (e *Engine) holdRetry() time.Duration {
	if d := e.cfg.HoldRetry; d > 0 {
		return d
	}
	return DefaultHoldRetry
}

// decodeRecorded decodes a checkpoint the run recorded for the call of
// key; one that no longer decodes into the code's type holds the run (the
// type changed under runs in flight) rather than fail it.
func decodeRecorded[T any](x *execution, cp storage.Checkpoint) (T, error) {
	out, err := decodeCheckpoint[T](x, cp)
	if err != nil && cp.Error == nil && errors.Is(err, ErrDecode) {
		x.drift(cp.Key, fmt.Errorf("the checkpoint of %s, recorded by an earlier build, no longer decodes into the code's type: %v", cp.Key, trimDecode(err)))
	}
	return out, err
}

// consumed reports whether the run's code took the event checkpoint of
// key in an earlier execution: it was recorded before the run's last
// park. A payload delivered since (the one that woke the run) is fresh: one
// that does not decode is refused, as the sender's fault; a consumed one
// that no longer decodes is the code's type changing under the run, and
// holds it. In a replay every recorded payload was taken.
func (x *execution) consumed(key string) bool {
	x.cpMu.Lock()
	defer x.cpMu.Unlock()
	i, ok := x.history.at[key]
	if x.replay != nil {
		return ok // a replay has no fresh deliveries: all were taken
	}
	return ok && i < x.history.parkAt
}

// holdUndecodable holds the run when the event payload of cp, which the
// code took in an earlier execution, no longer decodes (err).
func (x *execution) holdUndecodable(cp storage.Checkpoint, err error) {
	if x.consumed(cp.Key) {
		x.drift(cp.Key, fmt.Errorf("the event payload of %s, taken by an earlier execution, no longer decodes into the code's type: %v", cp.Key, trimDecode(err)))
	}
}

// trimDecode is a decode error's message without the sentinel's prefix.
func trimDecode(err error) string {
	return strings.TrimPrefix(err.Error(), ErrDecode.Error()+": ")
}
