package runtime

import (
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

// Ready tells the engine's workers that runs may be ready to claim, for
// packages that create runs through the store directly (a schedule's
// ticks): they claim at once instead of at their next poll.
func (e *Engine) Ready() { e.signal() }

// StartDefaults gives a run created later than it was prepared (a
// schedule's tick) what a start now gives it, when the workflow is
// registered on this engine: its timeout=, counted from now, when the run
// has no deadline, and the newest registered version when it has none.
func (e *Engine) StartDefaults(r *storage.NewRun) {
	def, err := e.registered(r.Workflow)
	if err != nil {
		return
	}
	if r.Deadline == nil {
		r.Deadline = def.deadlineFrom(e.clock.Now(), time.Time{})
	}
	if r.Version == 0 {
		r.Version = def.version
	}
}
