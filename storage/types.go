package storage

import (
	"encoding/json"
	"slices"
	"strings"
	"time"
)

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

// StatusContinued is the status of an execution that ended by continuing
// as new (Store.ContinueAsNew): it appears in ExecutionRecord, never as a
// run's status.
const StatusContinued RunStatus = "continued"

// Statuses lists every run status, in the order a run usually passes them.
var Statuses = []RunStatus{StatusQueued, StatusRunning, StatusPaused, StatusWaiting, StatusComplete, StatusErrored, StatusTerminated}

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
	// ParentPolicy says what terminating the parent does to this child.
	ParentPolicy ParentPolicy
	// StartAt, when set and after the store's now, delays the run: it is
	// StatusQueued with ReadyAt = StartAt and no claim takes it before
	// then (a delayed start). Unset, or at or before now: ready at once.
	StartAt *time.Time
	// Deadline, when set, is when the run must have ended: the store keeps
	// it with the run, through restarts and continue-as-new, and hands it
	// to every claim; the runtime enforces it.
	Deadline *time.Time
	// Queue is the queue the run is claimed from; "" is DefaultQueue.
	Queue string
	// Partition is the run's partition key within its queue (a customer's
	// ID, say), "" for none: Queue.PartitionConcurrency bounds how many
	// runs of one partition hold a place at once.
	Partition string
	// Priority orders the claims of a queue's ready runs: higher first,
	// oldest ReadyAt first within a priority. Zero is the default; within
	// MinPriority and MaxPriority.
	Priority int
	// Version is the version of the workflow the run starts under (its
	// annotation's version=), from 0 to MaxVersion. The store keeps it
	// with the run, through restarts and continue-as-new, and a claim
	// takes the run only where ClaimRequest.Versions allows it. 0 means
	// the starter did not say (runs stored before versions were kept
	// read as 0): engines claim such a run with the newest version they
	// register.
	Version int
	// Headers is context the run carries from its start to every claim:
	// the starter's trace context (W3C traceparent and tracestate) and
	// whatever else the runtime's Start hooks put in, so work done for the
	// run days later on another machine joins the trace that started it.
	// The store keeps it byte for byte with the run, through restarts and
	// continue-as-new; nil and empty are the same (see ValidateHeaders).
	Headers map[string]string
	// Lease, when set, starts the run already leased (an eager start): the
	// engine that creates it executes it at once, with no claim. The run
	// is created StatusRunning, held by Lease.Owner until now+Lease.For
	// with token 1, exactly as if a Claim had taken it at its creation: it
	// holds a place in its queue, counts as a start of its queue's rate,
	// and when the lease expires any Claim recovers it (Recoveries 1). A
	// run whose ID exists already is left as it is and is not leased
	// (Created false). StartAt cannot be set with it.
	Lease *EagerLease
	// OnExisting and OnEnded say what the create does when a run with the
	// ID exists: returns it (the zero values), refuses the create
	// (CreateResult.Refused), or replaces the run with the new one on the
	// terms of Replace, which a replacing policy requires. The store
	// judges them in the same atomic change that creates, so concurrent
	// creates of one ID agree.
	OnExisting ExistingPolicy
	OnEnded    EndedPolicy
	Replace    *ReplaceTerms
	// Event, when set, is delivered in the same atomic change to the run
	// the create leaves under the ID (signal-with-start): buffered for the
	// new run, or delivered to the existing one exactly as SendEvent
	// would (CreateResult.Delivered). Its RunID is ignored. With OnEnded
	// EndedReturn an ended run refuses it (RefusedEnded). A refused create
	// delivers nothing.
	Event *Event
	// Key, when set, makes the run a singleton or a debounced run of its
	// workflow (see StartKey). Neither Lease nor StartAt can be set with
	// a debounce key.
	Key *StartKey
	// Attributes are the run's search attributes from its start (see
	// Attr): stored with the run, indexed, and kept through restarts and
	// continue-as-new; a checkpoint's Attributes change them later.
	Attributes []Attr
}

// EagerLease is the lease a run is created with (NewRun.Lease).
type EagerLease struct {
	// Owner is the worker that holds the run from its creation.
	Owner string
	// For is how long the lease lasts unless extended.
	For time.Duration
}

// MaxVersion is the highest workflow version a run records.
const MaxVersion = 999999999

// The bounds of NewRun.Priority.
const (
	MinPriority = -1000000
	MaxPriority = 1000000
)

// ParentPolicy says what becomes of a child run when its parent ends.
type ParentPolicy string

// The parent policies.
const (
	// ParentTerminate (the zero value) terminates the child with its parent.
	ParentTerminate ParentPolicy = ""
	// ParentAbandon leaves the child running to its end.
	ParentAbandon ParentPolicy = "abandon"
	// ParentCancel requests the child's cancellation (see Store.Cancel)
	// when its parent ends: the child runs its cleanup and ends itself.
	ParentCancel ParentPolicy = "cancel"
)

// Valid reports whether p is one of the parent policies.
func (p ParentPolicy) Valid() bool {
	return p == ParentTerminate || p == ParentAbandon || p == ParentCancel
}

// MaxCancelReason is the longest reason a cancellation records, in bytes.
const MaxCancelReason = 1024

// CancelRequest requests a run's cancellation; see Store.Cancel.
type CancelRequest struct {
	RunID string
	// Reason says why, for the run's code and its operators: plain text
	// of at most MaxCancelReason bytes, possibly empty.
	Reason string
}

// CreateResult reports what CreateRuns did with one request.
type CreateResult struct {
	// Created is false when a run with the ID already existed.
	Created bool
	// Run is the stored record: the new run, or the existing one (the
	// key's holder when Joined; the run that refused it when Refused).
	Run RunRecord
	// Replaced is set when the new run replaced one of the same ID
	// (ExistingReplace, EndedReuse, EndedReuseFailed); ReplacedStatus is
	// the replaced run's status before the change.
	Replaced       bool
	ReplacedStatus RunStatus
	// Joined is set when the create's StartKey was held and it joined its
	// holder, which Run is, instead of creating a run.
	Joined bool
	// Refused, when not empty, says why the create's policy refused it:
	// nothing was written for it.
	Refused StartRefusal
	// Delivered reports that NewRun.Event resolved a wait of the run (as
	// SendEvent's delivered); false when it was buffered.
	Delivered bool
}

// RunRecord is a run as stored.
type RunRecord struct {
	ID       string
	Workflow string
	ParentID string
	Status   RunStatus
	Input    []byte
	// Attributes are the run's search attributes, sorted by name (see
	// NormalizeAttrs); nil when it has none.
	Attributes []Attr
	// Output is the result of a complete run.
	Output []byte
	// Error is set for errored and terminated runs.
	Error *ErrorInfo
	// PauseRequested is true while a pause waits for a running run's next
	// step boundary.
	PauseRequested bool
	// CancelRequested is set once the run's cancellation was requested
	// (Store.Cancel), until a Restart; CancelReason is the first
	// request's reason.
	CancelRequested bool
	CancelReason    string
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
	// ParentPolicy is what terminating the parent does to this run.
	ParentPolicy ParentPolicy
	// Execution is the number of the current execution: 1 from creation,
	// one more on every Restart.
	Execution int
	// StartedAt is when the current execution began (the run's creation or
	// its last restart); EndedAt when it finished, nil while unfinished.
	StartedAt time.Time
	EndedAt   *time.Time
	// Active is the step attempt a worker last reported running (by
	// Heartbeat), until the step's next write or the run's next claim.
	Active *ActiveStep
	// Deadline is NewRun.Deadline, nil when the run has none.
	Deadline *time.Time
	// Progress is the value the run last published (see
	// CheckpointRequest.Progress), nil when none since its creation or last
	// Restart. Continue-as-new keeps it.
	Progress []byte
	// Queue, Partition and Priority are NewRun's; Queue is never empty.
	Queue     string
	Partition string
	Priority  int
	// Version is NewRun.Version: the workflow version the run started
	// under, 0 when unknown.
	Version int
	// Headers is NewRun.Headers, nil when it had none.
	Headers map[string]string
	// Hold says why the run is held (see Hold): set by a Suspend that
	// holds it, cleared by the run's next Claim. Nil when not held.
	Hold      *Hold
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Hold is why an engine held a run instead of executing it: the workflow's
// code no longer makes the calls the run's history recorded (a deploy
// changed it). A held run is handed back untouched, its history, wait and
// suspension state kept, and is ready again later, when an engine of
// another build may continue it; it is never completed or errored for
// being held.
type Hold struct {
	// Reason says what diverged, in words.
	Reason string `json:"reason"`
	// Recorded is the key of the call the history has at the divergence
	// ("" when the history ends there); Called is the key of the call the
	// code made there ("" when the code made none: it returned).
	Recorded string `json:"recorded,omitempty"`
	Called   string `json:"called,omitempty"`
	// Position is the divergent call's place in the execution's history,
	// from 0 (tools show it from 1: "call 3" is Position 2).
	Position int `json:"position"`
	// Execution is the execution whose history diverged.
	Execution int `json:"execution"`
	// Since is when the engine held the run.
	Since time.Time `json:"since"`
}

// Clone returns a copy of h (nil for nil) that shares nothing with it.
func (h *Hold) Clone() *Hold {
	if h == nil {
		return nil
	}
	c := *h
	return &c
}

// MaxHoldReason bounds Hold.Reason, in bytes.
const MaxHoldReason = 4096

// ActiveStep is a step attempt in progress, as a worker reports it.
type ActiveStep struct {
	Key     string
	Attempt int
	Started time.Time
}

// DefaultPageSize is the page size of a ListRunsQuery with no Limit.
const DefaultPageSize = 100

// ListRunsQuery filters ListRuns. Zero fields do not filter.
type ListRunsQuery struct {
	Workflow string
	Status   RunStatus
	// ParentID keeps only the children of this run.
	ParentID string
	// Queue keeps only the runs of this queue.
	Queue string
	// Versions keeps only the runs recorded with one of these workflow
	// versions (0 included: the runs whose version is unknown); nil or
	// empty keeps every version.
	Versions []int
	// IDPrefix keeps only the runs whose ID begins with it, byte for byte
	// (a range of the ID order, so a store reads no other run).
	IDPrefix string
	// CreatedFrom and CreatedTo keep only the runs created (CreatedAt) at
	// or after CreatedFrom and before CreatedTo; a zero time does not
	// filter. The range is applied to the runs the ID order reaches, so a
	// page costs the runs it passes over outside the range: with generated
	// IDs (UUIDv7, which sort by creation time) and Descending, the newest
	// runs come first and a page of a recent range stops early.
	CreatedFrom, CreatedTo time.Time
	// Descending lists the runs by ID descending: newest first, for
	// generated IDs. After is then the cursor from the other side: only
	// runs with ID less than After.
	Descending bool
	// After is the cursor: only runs with ID greater than After (less,
	// when Descending).
	After string
	// Limit caps the page; zero means DefaultPageSize.
	Limit int
	// Where keeps only the runs whose search attributes pass every
	// filter (at most MaxAttrFilters). A store reads such a page through
	// its attribute index, from the first filter's name and value.
	Where []AttrFilter
	// TopLevel keeps only the runs that no other run started (ParentID
	// empty): a list of parents without their children.
	TopLevel bool
	// Order is the order of the listing: by ID (OrderID, the zero value)
	// or by creation time (OrderCreated), ascending or Descending. In
	// OrderCreated, After and RunPage.Next are CreatedCursors.
	Order RunOrder
}

// CountRunsQuery filters CountRuns. Zero fields do not filter.
type CountRunsQuery struct {
	// Workflow counts only the runs of this workflow.
	Workflow string
}

// RunCounts is how many runs are in each status. A status without runs
// may be missing (it reads zero).
type RunCounts map[RunStatus]int64

// Total is the number of runs counted.
func (c RunCounts) Total() int64 {
	var n int64
	for _, v := range c {
		n += v
	}
	return n
}

// PrefixEnd returns the least string greater, byte for byte, than every
// string that begins with prefix, and false when there is none (prefix is
// empty or all 0xFF bytes). Stores bound an IDPrefix range with it:
// [prefix, end).
func PrefixEnd(prefix string) (string, bool) {
	b := []byte(prefix)
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] < 0xFF {
			b[i]++
			return string(b[:i+1]), true
		}
	}
	return "", false
}

// IDRange is the range of run IDs a listing reads, in byte order: the ID
// prefix's range intersected with the cursor's (see ListRunsQuery.IDRange).
type IDRange struct {
	// From is the lower bound, "" for none; FromIncluded says whether an ID
	// equal to From is in the range (a prefix) or not (a cursor).
	From         string
	FromIncluded bool
	// To is the upper bound, excluded; HasTo is false when there is none.
	To    string
	HasTo bool
}

// IDRange returns the range of IDs the query's page is read from: IDs
// with its IDPrefix ([prefix, PrefixEnd(prefix))), past its cursor (above
// After, or below it when Descending). Stores that seek an index by its
// bounds read from the nearer one on each side.
func (q ListRunsQuery) IDRange() IDRange {
	var r IDRange
	if q.IDPrefix != "" {
		r.From, r.FromIncluded = q.IDPrefix, true
		r.To, r.HasTo = PrefixEnd(q.IDPrefix)
	}
	switch {
	case q.After == "", q.Order == OrderCreated:
	case q.Descending:
		if !r.HasTo || q.After < r.To {
			r.To, r.HasTo = q.After, true
		}
	case q.After >= q.IDPrefix:
		r.From, r.FromIncluded = q.After, false
	}
	return r
}

// CeilMicro rounds t up to a whole microsecond. A store that keeps times
// in microseconds compares a filter's time t with it: a stored time is at
// or after t exactly when it is at or after CeilMicro(t), and before t
// exactly when before CeilMicro(t).
func CeilMicro(t time.Time) time.Time {
	c := t.Truncate(time.Microsecond)
	if c.Before(t) {
		c = c.Add(time.Microsecond)
	}
	return c
}

// Listed reports whether a run passes the query's filters other than the
// cursor and the parent: workflow, status, queue, versions, ID prefix and
// creation range. Stores that filter what they read share its meaning.
func (q ListRunsQuery) Listed(r *RunRecord) bool {
	switch {
	case q.Workflow != "" && r.Workflow != q.Workflow,
		q.Status != "" && r.Status != q.Status,
		q.Queue != "" && r.Queue != q.Queue,
		len(q.Versions) > 0 && !slices.Contains(q.Versions, r.Version),
		q.IDPrefix != "" && !strings.HasPrefix(r.ID, q.IDPrefix),
		!q.CreatedFrom.IsZero() && r.CreatedAt.Before(q.CreatedFrom),
		!q.CreatedTo.IsZero() && !r.CreatedAt.Before(q.CreatedTo),
		q.TopLevel && r.ParentID != "":
		return false
	}
	for _, f := range q.Where {
		if !f.Match(r.Attributes) {
			return false
		}
	}
	return true
}

// CreatedAfter returns the cursor of a listing in OrderCreated: the
// creation time and ID the page starts past (ok false when the query has
// no cursor, or is in OrderID). A malformed cursor is refused by Validate.
func (q ListRunsQuery) CreatedAfter() (created time.Time, id string, ok bool) {
	if q.Order != OrderCreated || q.After == "" {
		return time.Time{}, "", false
	}
	created, id, err := ParseCreatedCursor(q.After)
	return created, id, err == nil
}

// Past reports whether a run lies past the query's cursor in its order
// (every run does when there is no cursor): by ID, or by creation time
// and then ID in OrderCreated, ascending or Descending. Stores that read
// in order and filter use it; the cursor's time compares at the
// microsecond, as stores keep creation times.
func (q ListRunsQuery) Past(r *RunRecord) bool {
	if q.After == "" {
		return true
	}
	c := 0
	if q.Order == OrderCreated {
		created, id, ok := q.CreatedAfter()
		if !ok {
			return true
		}
		c = r.CreatedAt.Truncate(time.Microsecond).Compare(created.Truncate(time.Microsecond))
		if c == 0 {
			c = strings.Compare(r.ID, id)
		}
	} else {
		c = strings.Compare(r.ID, q.After)
	}
	if q.Descending {
		return c < 0
	}
	return c > 0
}

// NextCursor is the cursor that follows r, the last run of a full page,
// in the query's order.
func (q ListRunsQuery) NextCursor(r *RunRecord) string {
	if q.Order == OrderCreated {
		return CreatedCursor(r.CreatedAt.Truncate(time.Microsecond), r.ID)
	}
	return r.ID
}

// PageSize is how many runs one page of the query holds at most.
func (q ListRunsQuery) PageSize() int { return pageSize(q.Limit) }

// pageSize is a query's page size for its Limit: DefaultPageSize when the
// Limit is not above zero.
func pageSize(limit int) int {
	if limit <= 0 {
		return DefaultPageSize
	}
	return limit
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
	// Queues are the queues the claim takes runs from, with the limits the
	// store enforces (see Queue); none means DefaultQueue without limits.
	//
	// The claim leases runs by Priority, highest first; within a priority,
	// runs whose lease expired (recoveries) before ready ones, then oldest
	// ReadyAt (or lease expiry) first. A ready run whose queue or partition
	// has no free place, or whose queue's rate window is full, is passed
	// over, and the claim goes on to the next. Concurrent claims from any
	// number of processes never let a queue or partition hold more places
	// than its limit, nor a window more starts than its rate.
	Queues []Queue
	// Versions restricts the claim to the versions of each workflow the
	// worker can run: a run of a workflow with an entry here is claimed
	// only when its Version is in the entry's list (VersionIn). A workflow
	// of Workflows without an entry is claimed at any version. The
	// runtime gives every workflow it claims an entry: the versions it
	// registers, and 0 for runs of unknown version.
	Versions map[string][]int
}

// VersionIn reports whether a run of workflow at version v passes a
// Versions filter (ClaimRequest.Versions, NextWakeRequest.Versions): when
// versions has no entry for workflow, or the entry lists v.
func VersionIn(versions map[string][]int, workflow string, v int) bool {
	allowed, ok := versions[workflow]
	return !ok || slices.Contains(allowed, v)
}

// Empty reports whether the claim can lease nothing (no workflows or no
// room), so a store answers it without a round trip.
func (r ClaimRequest) Empty() bool { return r.Limit <= 0 || len(r.Workflows) == 0 }

// NextWakeRequest asks when a Claim of Workflows could next find a run by
// the passing of time alone.
type NextWakeRequest struct {
	// Workflows restricts the question to these workflow names, as
	// ClaimRequest.Workflows restricts a claim.
	Workflows []string
	// Queues restricts it to runs of these queues, as ClaimRequest.Queues
	// does (none: DefaultQueue). Queue limits are not considered: NextWake
	// may name a time at which a claim finds every due run's queue full,
	// and an engine whose claim then comes back empty backs off.
	Queues []string
	// Versions restricts it to runs of these versions, as
	// ClaimRequest.Versions restricts a claim.
	Versions map[string][]int
}

// NextWake answers a NextWakeRequest.
type NextWake struct {
	// Found is false when no run of those workflows becomes claimable by
	// the passing of time: only an event, a resume or a new start can make
	// one ready.
	Found bool
	// After is how long from now, on the store's clock, until the earliest
	// one does: zero when one is claimable already. It is a duration, not a
	// time, so a worker whose clock differs from the store's sleeps the
	// right length.
	After time.Duration
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
	// Deadline is the run's deadline (NewRun.Deadline), nil when none.
	Deadline *time.Time
	// Version is the workflow version the run started under
	// (NewRun.Version), 0 when unknown.
	Version int
	// Headers is the run's NewRun.Headers, nil when it had none.
	Headers map[string]string
	// LeaseUntil is when this lease expires unless extended.
	LeaseUntil time.Time
	// CancelRequested and CancelReason are the run's (RunRecord's): the
	// worker cancels the workflow from its start.
	CancelRequested bool
	CancelReason    string
	// Replay, when not nil, is the run's replay exactly as LoadReplay would
	// return it right after this claim, read by the store in the same
	// round trip, so the worker need not ask. A store may leave it nil, and
	// the worker calls LoadReplay.
	Replay *Replay
}

// CheckpointKind says what produced a checkpoint.
type CheckpointKind string

// The checkpoint kinds.
const (
	KindStep  CheckpointKind = "step"
	KindSleep CheckpointKind = "sleep"
	KindEvent CheckpointKind = "event"
	KindChild CheckpointKind = "child"
	// KindSelect records which case of a select won (the runtime's).
	KindSelect CheckpointKind = "select"
	// KindCancel records the durable call at which the run's cancellation
	// took effect (the runtime's).
	KindCancel CheckpointKind = "cancel"
	// KindAttr records a workflow's setting of its search attributes
	// (CheckpointRequest.Attributes), so a replay does not set them again.
	KindAttr CheckpointKind = "attr"
)

// Valid reports whether k is one of the checkpoint kinds.
func (k CheckpointKind) Valid() bool {
	switch k {
	case KindStep, KindSleep, KindEvent, KindChild, KindSelect, KindCancel, KindUpdate, KindReply, KindStream, KindAttr:
		return true
	}
	return false
}

// Checkpoint is the durable result of one step, sleep, event wait or child
// call of a run.
type Checkpoint struct {
	Key  string
	Kind CheckpointKind
	// Output is the encoded result; it may be empty.
	Output []byte
	// Input is what the durable call was given, encoded (a step's
	// arguments), for operators: opaque bytes the store keeps with the
	// checkpoint and returns from ListSteps byte for byte. LoadReplay and
	// Claim may leave it nil, since a replay does not need it. Empty when
	// the call had none, or the runtime did not record it.
	Input []byte
	// Error is the step's final error, or nil for success.
	Error *ErrorInfo
	// Seq orders a run's checkpoints by write; assigned by the store.
	Seq int64
	// Execution is the execution the checkpoint belongs to; assigned by the
	// store.
	Execution int
	// ForkedFrom is the execution this checkpoint was copied from by a
	// Restart from a later step, or 0 when it was written in its own.
	ForkedFrom int
	CreatedAt  time.Time
}

// ErrorInfo is an error as stored.
type ErrorInfo struct {
	Message string `json:"message"`
	// Code names a sentinel the error matched (see the Code constants), so
	// errors.Is keeps working after a replay.
	Code string `json:"code,omitempty"`
	// Detail is what the runtime records beyond the text and code: the
	// declared errors the failure matched, with their fields, as text the
	// store keeps and returns byte for byte (it may be sealed). "" for
	// none.
	Detail string `json:"detail,omitempty"`
}

// Attempt is one execution of a step function (or, for a wait, one refused
// event payload).
type Attempt struct {
	Key     string
	Number  int
	Started time.Time
	Ended   time.Time
	// Error is "" for a successful attempt.
	Error string
	// RetryAt is, for a failed attempt that will be retried, when the next
	// attempt is due.
	RetryAt *time.Time
	// Execution is the execution the attempt belongs to; assigned by the
	// store.
	Execution int
}

// CheckpointRequest is a fenced checkpoint write.
type CheckpointRequest struct {
	Lease      Lease
	LeaseFor   time.Duration
	Checkpoint Checkpoint
	Attempts   []Attempt
	// Progress, when not nil, becomes the run's published progress
	// (RunRecord.Progress) in the same write. Nil leaves it as it is.
	Progress []byte
	// Busy says the worker has other steps of the run in progress: a
	// requested pause does not take effect with this write (the result
	// reports it instead, and the worker parks the run once they are done).
	Busy bool
	// Complete, when set, finishes the run in the same atomic change, as
	// Store.Complete would right after this checkpoint, when the
	// checkpoint was written (not Existing) and no pause took effect with
	// it: a run whose workflow returns right after its last step costs
	// one write, not two. CheckpointResult.Completed reports it; when
	// not completed, the run is left exactly as Checkpoint alone leaves
	// it. Its Lease is the request's (it may be left zero); it cannot be
	// Busy.
	Complete *CompleteRequest
	// Reply, when set, is the workflow's reply to one of the run's
	// updates: when the checkpoint is written (not Existing), the update
	// becomes UpdateReplied with it in the same change, unless it was
	// replied to already (the first reply stands). An update the run does
	// not have is ErrInvalidArgument, with nothing written.
	Reply *UpdateReply
	// Streams, when set, are appended to the run's streams in the same
	// change, in order, when the checkpoint is written (not Existing).
	Streams []StreamWrite
	// Attributes, when set, are merged into the run's search attributes
	// (MergeAttrs: a name set replaces its value) in the same change,
	// when the checkpoint is written (not Existing). A merge that would
	// hold more than MaxAttributes is ErrInvalidArgument, with nothing
	// written.
	Attributes []Attr
}

// CheckpointResult reports a checkpoint write.
type CheckpointResult struct {
	// Existing is the checkpoint already stored for the key, when there was
	// one; the request's checkpoint was then not written.
	Existing *Checkpoint
	// Paused is true when a requested pause took effect with this write; the
	// lease is released.
	Paused bool
	// PauseRequested is true when a pause is requested but did not take
	// effect because the request was Busy.
	PauseRequested bool
	// CancelRequested is true when the run's cancellation is requested.
	CancelRequested bool
	// Completed is true when the request's Complete finished the run.
	Completed bool
}

// RecordAttemptsRequest appends a step's failed attempts under the lease.
type RecordAttemptsRequest struct {
	Lease    Lease
	LeaseFor time.Duration
	Attempts []Attempt
}

// HeartbeatRequest extends a lease.
type HeartbeatRequest struct {
	Lease    Lease
	LeaseFor time.Duration
	// Step, when set, is stored as the run's Active step.
	Step *ActiveStep
	// Progress, when not nil, is published in the same write; see
	// CheckpointRequest.Progress.
	Progress []byte
}

// HeartbeatResult reports a heartbeat that held.
type HeartbeatResult struct {
	// PauseRequested is true while a pause waits for the run's next step
	// boundary (see Store.Pause), so the worker learns of it between
	// writes.
	PauseRequested bool
	// CancelRequested is true when the run's cancellation is requested
	// (see Store.Cancel).
	CancelRequested bool
}

// Replay is what a worker replays a run from: the current execution's
// checkpoints, and the attempts recorded for its steps that have none yet
// (so a step's attempt count survives a hand-over).
type Replay struct {
	Execution   int
	Checkpoints []Checkpoint
	// Pending are the attempts of keys without a checkpoint, in the order
	// recorded.
	Pending []Attempt
}

// Wait is an event wait: the run resumes when an event of Topic arrives (its
// payload becomes the checkpoint of Key) or at Deadline. A wait may have
// further cases (Also): it then resumes at the first event of any of its
// cases' topics.
type Wait struct {
	Key   string
	Topic string
	// Kind is the kind of the checkpoint a delivery writes: KindEvent for an
	// event wait, KindChild for a parent waiting on its child. Empty means
	// KindEvent; see DeliveryKind.
	Kind     CheckpointKind
	Deadline *time.Time
	// Also are the wait's further cases, each with its own key, topic and
	// kind. An event of a topic of any case (the wait's own first, then
	// Also in order: the first case of that topic) is delivered as that
	// case's checkpoint, and ends the whole wait. Keys and topics are
	// distinct across all the cases.
	Also []WaitCase
}

// WaitCase is one case of a Wait: an event of Topic is delivered as the
// checkpoint of Key, of kind Kind (empty: KindEvent).
type WaitCase struct {
	Key   string
	Topic string
	Kind  CheckpointKind
}

// Cases returns every case of the wait: its own first, then Also.
func (w *Wait) Cases() []WaitCase {
	if w == nil {
		return nil
	}
	return append([]WaitCase{{Key: w.Key, Topic: w.Topic, Kind: w.Kind}}, w.Also...)
}

// Case returns the first case of the wait whose topic is topic.
func (w *Wait) Case(topic string) (WaitCase, bool) {
	if w == nil {
		return WaitCase{}, false
	}
	if w.Topic == topic {
		return WaitCase{Key: w.Key, Topic: w.Topic, Kind: w.Kind}, true
	}
	for _, c := range w.Also {
		if c.Topic == topic {
			return c, true
		}
	}
	return WaitCase{}, false
}

// Topics returns the topics of every case of the wait.
func (w *Wait) Topics() []string {
	if w == nil {
		return nil
	}
	out := make([]string, 0, 1+len(w.Also))
	out = append(out, w.Topic)
	for _, c := range w.Also {
		out = append(out, c.Topic)
	}
	return out
}

// DeliveryKind is the kind of the checkpoint an event delivered to the
// case writes: its Kind, or KindEvent when it has none.
func (c WaitCase) DeliveryKind() CheckpointKind {
	if c.Kind == "" {
		return KindEvent
	}
	return c.Kind
}

// DeliveryKind is the kind of the checkpoint an event delivered to the wait
// writes: the wait's Kind, or KindEvent when it has none.
func (w *Wait) DeliveryKind() CheckpointKind {
	if w == nil || w.Kind == "" {
		return KindEvent
	}
	return w.Kind
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
	// Progress, when not nil, is published in the same write; see
	// CheckpointRequest.Progress.
	Progress []byte
	// Refuse, when set, takes back an event delivered to Wait.Key whose
	// payload the worker could not use: first, in the same change, the
	// checkpoint of Refuse.Key (of kind KindEvent) is deleted and
	// Refuse.Attempt recorded, so the refusal stays visible; then the
	// request proceeds as usual, so the run waits again.
	Refuse *Refusal
	// Hold, when set, is recorded on the run in the same change (see
	// RunRecord.Hold): the engine holds the run rather than execute it.
	Hold *Hold
	// CancelSeen says the worker knows of the run's requested
	// cancellation (its cleanup may park). Without it, a run whose
	// cancellation is requested is parked ready now, whatever ReadyAt
	// says, so a worker takes it again at once and sees the request; a
	// Hold is kept as asked.
	CancelSeen bool
}

// TakeEventRequest takes an event for a wait without parking the run; see
// Store.TakeEvent.
type TakeEventRequest struct {
	Lease    Lease
	LeaseFor time.Duration
	// Wait names the cases an event may resolve; its Deadline is not used.
	Wait *Wait
}

// Refusal names a delivered event checkpoint to take back and the attempt
// that records why.
type Refusal struct {
	Key     string
	Attempt Attempt
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
	// Progress, when not nil, is published in the same write; see
	// CheckpointRequest.Progress.
	Progress []byte
	// ChildError, when set, terminates with the run's completion every
	// unfinished descendant whose ParentPolicy is ParentTerminate
	// (children, their children, ...), each with this error, in the same
	// change, as TerminateRequest.ChildError does, and requests the
	// cancellation of those whose ParentPolicy is ParentCancel, with
	// ChildCancel as its reason.
	ChildError  *ErrorInfo
	ChildCancel string
}

// ContinueRequest ends a run's current execution and begins the next with
// a new input; see Store.ContinueAsNew.
type ContinueRequest struct {
	Lease Lease
	Input []byte
	// Progress, when not nil, is published in the same write; see
	// CheckpointRequest.Progress.
	Progress []byte
	// ChildError, when set, terminates with the ending execution every
	// unfinished descendant of the run whose ParentPolicy is
	// ParentTerminate (children, their children, ...), each with this
	// error, in the same change, as CompleteRequest.ChildError does, and
	// requests the cancellation of those whose ParentPolicy is
	// ParentCancel, with ChildCancel as its reason.
	ChildError  *ErrorInfo
	ChildCancel string
}

// TerminateRequest terminates a run.
type TerminateRequest struct {
	RunID  string
	Error  ErrorInfo
	Notify *Event
	// ChildError, when set, terminates with the run every unfinished
	// descendant whose ParentPolicy is ParentTerminate (children, their
	// children, ...), each with this error, in the same change, and
	// requests, with ChildCancel as the reason, the cancellation of every
	// unfinished one whose ParentPolicy is ParentCancel and whose parent
	// ends in that change (this run or a terminated descendant).
	ChildError  *ErrorInfo
	ChildCancel string
}

// RestartRequest starts a run's next execution.
type RestartRequest struct {
	RunID string
	// FromKey, when set, forks: the checkpoints of the current execution
	// written before the checkpoint of FromKey (in sequence order) are
	// copied into the new execution, so it runs again from that step.
	FromKey string
	// IfExecution, when above zero, makes the restart conditional: it
	// happens only while the run's current execution is IfExecution, and
	// is otherwise ErrConflict with nothing written. A bulk restart that
	// is resumed after an interruption so never restarts a run twice.
	IfExecution int
}

// ExecutionRecord is one execution of a run: the first from its creation,
// one more per Restart.
type ExecutionRecord struct {
	Number    int
	StartedAt time.Time
	// EndedAt is when it finished, or, for one still unfinished, when a
	// Restart replaced it; nil for the current execution while unfinished.
	EndedAt *time.Time
	// Status is the run's status when the execution ended (finished, or
	// replaced by a Restart while queued, running, waiting or paused), or
	// now for the current one.
	Status RunStatus
	// Error is the execution's error, if it ended with one.
	Error *ErrorInfo
	// ForkedFrom and FromKey say where a restart from a step began: the
	// previous execution and the key whose checkpoint and later ones were
	// not carried over ("" for a restart from the top).
	ForkedFrom int
	FromKey    string
}

// StepsQuery asks for one execution's steps.
type StepsQuery struct {
	RunID string
	// Execution is the execution's number; 0 means the current one.
	Execution int
}

// History is one execution's steps as operators read them.
type History struct {
	Execution int
	// Steps are the execution's checkpoints in sequence order, each with
	// its attempts.
	Steps []StepRecord
	// Pending are the attempts of keys without a checkpoint in the
	// execution (a step retrying, or given up by a restart), in the order
	// recorded.
	Pending []Attempt
}

// WorkflowType is a workflow as an engine registered it, for tools that do
// not run it: the operator command, a dashboard.
type WorkflowType struct {
	Name    string
	Version int
	// InputSchema and OutputSchema are JSON Schemas of the input and output.
	InputSchema  json.RawMessage
	OutputSchema json.RawMessage
	// Queue is the workflow's default queue ("" is DefaultQueue).
	Queue string
	// Retention, when set, is how long the workflow's finished runs are
	// kept, overriding the engines' default; 0 keeps them forever.
	Retention *time.Duration
	// Timeout, when above zero, is the workflow's timeout= : a run started
	// without a deadline of its own gets one Timeout after its start, by
	// whatever starts it (an engine that registers the workflow, or one
	// that knows it only from the catalog). 0 is no timeout.
	Timeout time.Duration
	// Attributes are the search attributes the workflow declares, in
	// the order declared.
	Attributes []AttrDecl
	// Worker is the engine that recorded it last, and UpdatedAt when.
	Worker    string
	UpdatedAt time.Time
}

// QueueType is a queue as an engine registered it: engines sharing a store
// must agree on every queue's limits.
type QueueType struct {
	Queue
	Worker    string
	UpdatedAt time.Time
}

// EventType is an event topic with the JSON Schema of its payload.
type EventType struct {
	Topic         string
	PayloadSchema json.RawMessage
	Worker        string
	UpdatedAt     time.Time
}

// Catalog is what the engines sharing a store serve.
type Catalog struct {
	Workflows []WorkflowType
	Events    []EventType
	// Queues are sorted by name, like the others.
	Queues []QueueType
}

// EmitRequest is an event for every run waiting on its topic.
type EmitRequest struct {
	Topic   string
	Payload []byte
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
