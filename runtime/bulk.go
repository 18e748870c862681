package runtime

import (
	"context"
	"time"
)

// BulkWorkflow is the durable name of the workflow that carries out a
// bulk action (RegisterBulk).
const BulkWorkflow = "stem.bulk"

// BulkAction is what a bulk action does to each run its filter matches.
type BulkAction string

// The bulk actions.
const (
	BulkTerminate BulkAction = "terminate"
	BulkCancel    BulkAction = "cancel"
	BulkPause     BulkAction = "pause"
	BulkResume    BulkAction = "resume"
	// BulkRestart restarts each run from the top.
	BulkRestart BulkAction = "restart"
	// BulkRestartFailed restarts each run from the step that failed it
	// (a fork: the steps before it are kept).
	BulkRestartFailed BulkAction = "restart-failed"
)

// DefaultBulkRate is how many runs a second a bulk action acts on when
// its request does not say.
const DefaultBulkRate = 100

// BulkRequest is a bulk action: an action and the filter of the runs it
// acts on.
type BulkRequest struct {
	Action BulkAction
	// Filter selects the runs; its Limit, After and Order are ignored.
	Filter ListRunsQuery
	// Reason is recorded by terminate and cancel.
	Reason string
	// Rate bounds the runs acted on per second; 0 is DefaultBulkRate.
	Rate float64
	// ID, when set, is the bulk action's ID (its run's); "" draws one.
	ID string
}

// BulkProgress is how far a bulk action has gone.
type BulkProgress struct {
	// Matched counts the runs the filter matched so far; Acted those
	// acted on, Skipped those that no longer needed it (ended, restarted
	// meanwhile), Failed those the action was refused for.
	Matched, Acted, Skipped, Failed int
	// Done is set once every matching run was seen.
	Done bool
	// Errors are the last few refusals, in words.
	Errors []string `json:",omitempty"`
}

// BulkInfo is a bulk action as its run records it.
type BulkInfo struct {
	ID        string
	Request   BulkRequest
	Status    RunStatus
	Progress  BulkProgress
	CreatedAt time.Time
}

// RegisterBulk registers the workflow that carries out bulk actions, so
// this engine's workers run them.
func RegisterBulk(e *Engine) error { return invalidArg("RegisterBulk is not built yet") }

// StartBulk starts a bulk action and returns its ID.
func (e *Engine) StartBulk(ctx context.Context, req BulkRequest) (string, error) {
	return "", invalidArg("StartBulk is not built yet")
}

// GetBulk returns a bulk action's state.
func (e *Engine) GetBulk(ctx context.Context, id string) (BulkInfo, error) {
	return BulkInfo{}, invalidArg("GetBulk is not built yet")
}

// ListBulks returns the newest bulk actions, newest first.
func (e *Engine) ListBulks(ctx context.Context, limit int) ([]BulkInfo, error) {
	return nil, invalidArg("ListBulks is not built yet")
}

// CountMatching counts the runs q matches, up to upTo (more reports that
// there are more).
func (e *Engine) CountMatching(ctx context.Context, q ListRunsQuery, upTo int) (n int, more bool, err error) {
	return 0, false, invalidArg("CountMatching is not built yet")
}
