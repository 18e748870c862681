package runtime

import (
	"context"
	"encoding/json"
	"log/slog"
	"time"

	"github.com/stemflow/stem/storage"
)

// Store returns the engine's store, for packages that extend the engine
// (the schedule package keeps its records there).
func (e *Engine) Store() storage.Store { return e.store }

// Now tells the time on the engine's clock (Config.Clock).
func (e *Engine) Now() time.Time { return e.clock.Now() }

// Logger returns the engine's logger (Config.Logger).
func (e *Engine) Logger() *slog.Logger { return e.log }

// PrepareStartJSON checks a start as StartJSON does (the workflow known,
// the input matching its type, the queue and partition) and returns the run
// it would create, with its input encoded (sealed by Config.Codec), without
// creating it: for packages that start runs later (a schedule's ticks).
// id may be "": the run then has none yet.
func (e *Engine) PrepareStartJSON(ctx context.Context, workflow, id string, input json.RawMessage, opts ...StartOption) (storage.NewRun, error) {
	return e.prepareJSON(ctx, workflow, id, input, opts)
}

// Ready tells the engine's workers that runs may be ready to claim, for
// packages that create runs through the store directly (a schedule's
// ticks): they claim at once instead of at their next poll.
func (e *Engine) Ready() { e.signal() }

// StartDefaults gives a run created later than it was prepared (a
// schedule's tick) what a start now gives it: its workflow's timeout=,
// counted from now, when the workflow is registered on this engine and the
// run has no deadline.
func (e *Engine) StartDefaults(r *storage.NewRun) {
	if r.Deadline != nil {
		return
	}
	if def, err := e.registered(r.Workflow); err == nil {
		r.Deadline = def.deadlineFrom(e.clock.Now(), time.Time{})
	}
}

// StartPrepared creates runs PrepareStartJSON returned (each with its ID
// set), as StartJSON creates its run: a run whose ID exists is left as it
// is, and reported with Created false.
func (e *Engine) StartPrepared(ctx context.Context, runs []storage.NewRun) ([]storage.CreateResult, error) {
	return e.create(ctx, runs)
}
