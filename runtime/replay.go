package runtime

import (
	"context"
	"errors"
)

// ReplayOptions chooses the stored runs Engine.Replay replays.
type ReplayOptions struct {
	// Workflows limits the replay to these workflows; nil replays every
	// workflow registered with the engine.
	Workflows []string
	// RunIDs limits it to these runs; nil replays every run of Workflows.
	RunIDs []string
	// Statuses limits it to runs in these statuses; nil replays them all,
	// finished runs included.
	Statuses []RunStatus
	// Limit caps how many runs are replayed; zero replays all.
	Limit int
}

// Divergence is a stored run the current code would not continue as it
// ran.
type Divergence struct {
	RunID    string
	Workflow string
	// Version is the workflow version the run was stored with.
	Version int
	// Execution is the execution replayed.
	Execution int
	// Key is the checkpoint key where the code and the run part: the key
	// the code asked for, or the stored key it never reached. "" when the
	// run diverges at its end (another result).
	Key string
	// Message says what differs.
	Message string
}

// ReplayReport is what Engine.Replay found.
type ReplayReport struct {
	// Replayed counts the runs replayed.
	Replayed int
	// Divergences lists the runs that would diverge, in the order replayed.
	Divergences []Divergence
}

// Replay replays stored runs against the workflows registered with the
// engine, without executing steps and without writing to the store: each
// run's workflow function is called with its stored input and every call
// it makes is answered from the run's checkpoints. A run diverges when the
// code asks for a key the run did not record where the run recorded
// others, never reaches keys the run recorded, or (for a finished run)
// ends otherwise than the run ended. The engine need not be running.
func (e *Engine) Replay(ctx context.Context, opts ReplayOptions) (ReplayReport, error) {
	return ReplayReport{}, errors.ErrUnsupported
}
