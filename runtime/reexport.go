package runtime

import "github.com/stemflow/stem/storage"

// RunStatus is the state of a run: queued, running, paused, waiting,
// complete, errored or terminated.
type RunStatus = storage.RunStatus

// The run statuses.
const (
	StatusQueued     = storage.StatusQueued
	StatusRunning    = storage.StatusRunning
	StatusPaused     = storage.StatusPaused
	StatusWaiting    = storage.StatusWaiting
	StatusComplete   = storage.StatusComplete
	StatusErrored    = storage.StatusErrored
	StatusTerminated = storage.StatusTerminated
	// StatusContinued is an execution's status when it ended by
	// ContinueAsNew (ExecutionInfo.Status); never a run's.
	StatusContinued = storage.StatusContinued
)

// StepKind says what a step of a run is: a step function, a sleep (or a
// timer), an event wait, a child workflow call, the winner of a select, an
// update taken or replied to, or an append to a stream.
type StepKind = storage.CheckpointKind

// The step kinds.
const (
	KindStep   = storage.KindStep
	KindSleep  = storage.KindSleep
	KindEvent  = storage.KindEvent
	KindChild  = storage.KindChild
	KindSelect = storage.KindSelect
	// KindCancel records where the run's cancellation took effect.
	KindCancel = storage.KindCancel
	// KindUpdate is an update the run took (OnUpdate).
	KindUpdate = storage.KindUpdate
	// KindReply is the run's reply to an update (Update.Reply).
	KindReply = storage.KindReply
	// KindStream is the run's append to a stream (Append).
	KindStream = storage.KindStream
)

// Attempt is one execution of a step function, as operators see it in
// StepInfo: its number, start and end, and its error ("" for success).
type Attempt = storage.Attempt

// ListRunsQuery filters Engine.ListRuns: by workflow and status, from a
// cursor, a page at a time. Zero fields do not filter.
type ListRunsQuery = storage.ListRunsQuery

// RunCounts is how many runs are in each status (Engine.CountRuns).
type RunCounts = storage.RunCounts
