package runtime

import (
	"context"
	"time"
)

// Store is the durable state behind an Engine. Every store (memstore,
// sqlitestore, pgstore, redisstore) implements it and passes the conformance
// suite in stores/storetest unchanged.
//
// The rules every implementation honours:
//
//   - Atomicity. Each method is one atomic change: a transaction in SQL, one
//     Lua script in Redis, one critical section in memory. A method that
//     returns an error has changed nothing.
//   - Fencing. Methods that take a Lease change the run only while the run is
//     StatusRunning and its stored token equals Lease.Token, checked in the
//     same atomic change that writes. Otherwise they write nothing and return
//     ErrLeaseLost.
//   - One clock. Lease expiry and readiness are judged on the store's clock:
//     the database's own where it has one, or the Now function the store was
//     constructed with (tests substitute it).
//   - Checkpoints are written once. The first checkpoint written for a
//     (run, key) wins; a later write of the same key writes nothing and reports
//     the stored one (see CheckpointResult.Existing). A checkpoint with empty
//     Output is still a checkpoint.
//   - Order. Checkpoints carry a sequence number assigned by the store in
//     write order; ListSteps returns them in that order, never sorted by key.
//   - Bad input changes nothing: an unknown run is ErrRunNotFound, a state
//     that forbids the change is ErrInvalidState, both with nothing written.
//
// Payload bytes (Input, Output, event payloads, SuspendState) are opaque to
// the store: it stores and returns them byte for byte. Size limits are
// enforced by the Engine before any store call.
type Store interface {
	// CreateRuns inserts runs, each atomically with respect to the others of
	// the same ID. A run whose ID already exists is left untouched and
	// reported with Created false and its stored record; concurrent creates
	// of one ID create it exactly once. New runs are StatusQueued and ready
	// at once. Results are in the order of the requests.
	CreateRuns(ctx context.Context, runs []NewRun) ([]CreateResult, error)

	// GetRun returns a run's record, or ErrRunNotFound.
	GetRun(ctx context.Context, id string) (RunRecord, error)

	// ListRuns returns runs ordered by ID ascending, filtered by the query,
	// at most Limit of them, starting after the cursor ID.
	ListRuns(ctx context.Context, q ListRunsQuery) (RunPage, error)

	// Claim leases up to Limit runs of the named workflows that are ready:
	// StatusQueued or StatusWaiting with ReadyAt at or before now, or
	// StatusRunning whose lease expired (a crashed worker's run; its
	// Recoveries count grows by one). Paused, finished and not-yet-due runs
	// are never claimed. Each claimed run becomes StatusRunning with Owner,
	// lease expiry now+LeaseFor, and a token greater than any it had before.
	// Concurrent claims never hand one run to two callers. Claim returns
	// the runs it leased, oldest ReadyAt first where the store can.
	Claim(ctx context.Context, req ClaimRequest) ([]ClaimedRun, error)

	// LoadCheckpoints returns every checkpoint of a run, in sequence order.
	// The worker replays the run from these.
	LoadCheckpoints(ctx context.Context, runID string) ([]Checkpoint, error)

	// Checkpoint records a step's result under the lease, fenced. In the same
	// atomic change it appends the given attempts, resets Recoveries to zero,
	// extends the lease to now+LeaseFor, and, if the run is waiting on this
	// key (an event wait resolved by timeout), removes that wait.
	//
	// If a checkpoint for the key already exists (an event delivered while
	// the worker was deciding a timeout), nothing but the lease extension is
	// written and the stored checkpoint is returned in Existing.
	//
	// If a pause was requested while the run was running, the checkpoint is
	// written and the run becomes StatusPaused with its lease released, in the
	// same change; Paused reports it and the worker stops.
	Checkpoint(ctx context.Context, req CheckpointRequest) (CheckpointResult, error)

	// RecordAttempts appends attempts (failed ones, before a retry) under the
	// lease, fenced, and extends the lease to now+LeaseFor.
	RecordAttempts(ctx context.Context, lease Lease, leaseFor time.Duration, attempts []Attempt) error

	// Heartbeat extends the lease to now+LeaseFor, fenced. A worker running a
	// long step calls it so the run is not claimed by another.
	Heartbeat(ctx context.Context, lease Lease, leaseFor time.Duration) error

	// Suspend parks a running run, fenced, in one atomic change:
	//
	//   - If Checkpoint is set it is written first (a sleep's wake time),
	//     with the same write-once rule as Checkpoint.
	//   - If Wait is set: when a checkpoint for Wait.Key already exists, or a
	//     buffered event for (run, Wait.Topic) exists, the run is not parked.
	//     A buffered event (the oldest) is consumed and written as the
	//     checkpoint of Wait.Key. Either way the checkpoint is returned in
	//     Delivered, the lease is extended to now+LeaseFor, and the run stays
	//     StatusRunning. Otherwise the wait is registered (replacing any
	//     earlier wait of the run).
	//   - When parked, the lease is released and the run becomes StatusWaiting
	//     with ReadyAt = req.ReadyAt (nil: not ready until an event arrives),
	//     or StatusQueued when ReadyAt is at or before now. SuspendState is
	//     stored and handed back by the next Claim. A pause requested while
	//     running makes the parked run StatusPaused instead, keeping ReadyAt.
	//
	// Suspend with neither Checkpoint nor Wait and ReadyAt = now releases the
	// run for any worker to claim at once (an engine shutting down).
	Suspend(ctx context.Context, req SuspendRequest) (SuspendResult, error)

	// Complete finishes a run, fenced: StatusComplete with Output, or
	// StatusErrored with Error. The lease, any wait and the SuspendState are
	// cleared. If Notify is set, it is delivered in the same atomic change
	// exactly as SendEvent would (a child run telling its parent), except
	// that a Notify whose run is unknown or finished is dropped: a child
	// always finishes, whatever became of its parent.
	Complete(ctx context.Context, req CompleteRequest) error

	// Pause pauses a run. A queued or waiting run becomes StatusPaused at
	// once, keeping its ReadyAt and wait; a running run gets PauseRequested
	// and pauses at its next Checkpoint or Suspend. Pausing a paused run is a
	// no-op. A finished run: ErrInvalidState.
	Pause(ctx context.Context, runID string) error

	// Resume undoes Pause: a paused run becomes StatusQueued if it is ready
	// (ReadyAt at or before now) and StatusWaiting otherwise; a running run's
	// PauseRequested is cleared. Any other state: ErrInvalidState.
	Resume(ctx context.Context, runID string) error

	// Terminate ends an unfinished run: StatusTerminated with Error, lease
	// and wait cleared, so the worker holding it fails its next fenced write
	// with ErrLeaseLost. Notify is delivered (or dropped) in the same change,
	// as in Complete. A finished run: ErrInvalidState.
	Terminate(ctx context.Context, req TerminateRequest) error

	// Restart drops a run's checkpoints, attempts, wait and SuspendState and
	// makes it StatusQueued and ready now, keeping its ID, workflow and input
	// (and its buffered events). Any lease is revoked: the old holder's next
	// fenced write fails. Allowed in every state.
	Restart(ctx context.Context, runID string) error

	// Emit delivers an event to every run currently waiting on the topic
	// (any status, including running and paused): for each, the payload is
	// written as the checkpoint of the wait's key, the wait is removed, and a
	// StatusWaiting run becomes StatusQueued ready now (a paused one stays
	// paused, ready now). Runs not waiting on the topic are not affected and
	// nothing is buffered. Concurrent emits resume a waiting run once. It
	// returns the IDs of the runs it delivered to.
	Emit(ctx context.Context, topic string, payload []byte) ([]string, error)

	// SendEvent delivers an event to one run: as Emit when the run is waiting
	// on the topic; otherwise the event is buffered for the run (in order)
	// and consumed by the run's next Suspend waiting on the topic. An unknown
	// run is ErrRunNotFound; a finished run is ErrInvalidState.
	SendEvent(ctx context.Context, ev Event) (delivered bool, err error)

	// ListSteps returns a run's checkpoints in sequence order with their
	// attempts (each step's attempts in the order recorded).
	ListSteps(ctx context.Context, runID string) ([]StepRecord, error)

	// Close releases the store's resources. Calls after Close return
	// ErrClosed.
	Close() error
}

// Notifier is implemented by stores that can tell a worker that runs may have
// become ready (Postgres LISTEN/NOTIFY, say). Notifications are hints only:
// an Engine polls regardless, and correctness never depends on them.
type Notifier interface {
	// Notifications returns a channel that receives a value when runs may be
	// ready to claim. It is closed when ctx is done or the store closes.
	Notifications(ctx context.Context) <-chan struct{}
}

// RunStatus is the state of a run, as users see it.
type RunStatus string

// The run statuses.
const (
	StatusQueued     RunStatus = "queued"
	StatusRunning    RunStatus = "running"
	StatusPaused     RunStatus = "paused"
	StatusWaiting    RunStatus = "waiting"
	StatusComplete   RunStatus = "complete"
	StatusErrored    RunStatus = "errored"
	StatusTerminated RunStatus = "terminated"
)

// Finished reports whether the status is final.
func (s RunStatus) Finished() bool {
	return s == StatusComplete || s == StatusErrored || s == StatusTerminated
}

// Valid reports whether s is one of the run statuses.
func (s RunStatus) Valid() bool {
	switch s {
	case StatusQueued, StatusRunning, StatusPaused, StatusWaiting, StatusComplete, StatusErrored, StatusTerminated:
		return true
	}
	return false
}

// NewRun is a run to create.
type NewRun struct {
	ID       string
	Workflow string
	Input    []byte
	// ParentID is the run that started this one as a child, or "".
	ParentID string
}

// CreateResult reports what CreateRuns did with one request.
type CreateResult struct {
	// Created is false when a run with the ID already existed.
	Created bool
	// Run is the stored record: the new run, or the existing one.
	Run RunRecord
}

// RunRecord is a run as stored.
type RunRecord struct {
	ID       string
	Workflow string
	ParentID string
	Status   RunStatus
	Input    []byte
	// Output is the result of a complete run.
	Output []byte
	// Error is set for errored and terminated runs.
	Error *ErrorInfo
	// PauseRequested is true while a pause waits for a running run's next
	// step boundary.
	PauseRequested bool
	// ReadyAt is when a queued or waiting run may be claimed; nil while it
	// waits for an event without timeout.
	ReadyAt *time.Time
	// Wait is the event wait the run is parked on, if any.
	Wait *Wait
	// Owner, LeaseUntil and Token describe the current or last lease.
	Owner      string
	LeaseUntil time.Time
	Token      int64
	// Recoveries counts claims of this run after an expired lease since its
	// last checkpoint.
	Recoveries int
	CreatedAt  time.Time
	UpdatedAt  time.Time
}

// ListRunsQuery filters ListRuns. Zero fields do not filter.
type ListRunsQuery struct {
	Workflow string
	Status   RunStatus
	// After is the cursor: only runs with ID greater than After.
	After string
	// Limit caps the page; zero means 100.
	Limit int
}

// RunPage is one page of ListRuns.
type RunPage struct {
	Runs []RunRecord
	// Next is the cursor for the following page, or "" at the end.
	Next string
}

// ClaimRequest asks for runs to lease.
type ClaimRequest struct {
	// Owner identifies the worker, unique per process start.
	Owner string
	// Workflows restricts the claim to these workflow names.
	Workflows []string
	// Limit caps how many runs one claim leases.
	Limit int
	// LeaseFor is the lease length.
	LeaseFor time.Duration
}

// Lease is a worker's hold on a run. Every fenced write names it.
type Lease struct {
	RunID string
	Owner string
	Token int64
}

// ClaimedRun is a run leased by Claim.
type ClaimedRun struct {
	Lease    Lease
	Workflow string
	ParentID string
	Input    []byte
	// Recoveries is the run's count after this claim.
	Recoveries int
	// SuspendState is what the last Suspend stored, or nil.
	SuspendState []byte
	// Wait is the event wait the run was parked on, if still registered.
	Wait *Wait
	// LeaseUntil is when this lease expires unless extended.
	LeaseUntil time.Time
}

// CheckpointKind says what produced a checkpoint.
type CheckpointKind string

// The checkpoint kinds.
const (
	KindStep  CheckpointKind = "step"
	KindSleep CheckpointKind = "sleep"
	KindEvent CheckpointKind = "event"
	KindChild CheckpointKind = "child"
)

// Checkpoint is the durable result of one step, sleep, event wait or child
// call of a run.
type Checkpoint struct {
	Key  string
	Kind CheckpointKind
	// Output is the encoded result; it may be empty.
	Output []byte
	// Error is the step's final error, or nil for success.
	Error *ErrorInfo
	// Seq orders a run's checkpoints by write; assigned by the store.
	Seq       int64
	CreatedAt time.Time
}

// ErrorInfo is an error as stored.
type ErrorInfo struct {
	Message string `json:"message"`
	// Code names a sentinel the error matched (see the Code constants), so
	// errors.Is keeps working after a replay.
	Code string `json:"code,omitempty"`
}

// Attempt is one execution of a step function.
type Attempt struct {
	Key     string
	Number  int
	Started time.Time
	Ended   time.Time
	// Error is "" for a successful attempt.
	Error string
}

// CheckpointRequest is a fenced checkpoint write.
type CheckpointRequest struct {
	Lease      Lease
	LeaseFor   time.Duration
	Checkpoint Checkpoint
	Attempts   []Attempt
}

// CheckpointResult reports a checkpoint write.
type CheckpointResult struct {
	// Existing is the checkpoint already stored for the key, when there was
	// one; the request's checkpoint was then not written.
	Existing *Checkpoint
	// Paused is true when a requested pause took effect with this write; the
	// lease is released.
	Paused bool
}

// Wait is an event wait: the run resumes when an event of Topic arrives (its
// payload becomes the checkpoint of Key) or at Deadline.
type Wait struct {
	Key   string
	Topic string
	// Kind is the kind of the checkpoint a delivery writes: KindEvent for an
	// event wait, KindChild for a parent waiting on its child.
	Kind     CheckpointKind
	Deadline *time.Time
}

// SuspendRequest parks a run; see Store.Suspend.
type SuspendRequest struct {
	Lease    Lease
	LeaseFor time.Duration
	// Checkpoint is written first when set (a sleep's wake time).
	Checkpoint *Checkpoint
	// Wait registers an event wait when set.
	Wait *Wait
	// ReadyAt is when the run may be claimed again; nil means only an event
	// makes it ready.
	ReadyAt *time.Time
	// SuspendState is opaque engine data handed back by the next Claim.
	SuspendState []byte
}

// SuspendResult reports a Suspend.
type SuspendResult struct {
	// Delivered is set when the wait was satisfied at once (an existing
	// checkpoint or a buffered event); the run was not parked and the lease
	// is still held.
	Delivered *Checkpoint
	// Paused is true when the run was parked as paused.
	Paused bool
}

// CompleteRequest finishes a run.
type CompleteRequest struct {
	Lease  Lease
	Status RunStatus // StatusComplete or StatusErrored
	Output []byte
	Error  *ErrorInfo
	// Notify is delivered as by SendEvent in the same change, when set.
	Notify *Event
}

// TerminateRequest terminates a run.
type TerminateRequest struct {
	RunID  string
	Error  ErrorInfo
	Notify *Event
}

// Event is an event addressed to one run.
type Event struct {
	RunID   string
	Topic   string
	Payload []byte
}

// StepRecord is a checkpoint with its attempts, as listed for operators.
type StepRecord struct {
	Checkpoint
	Attempts []Attempt
}
