package storage

import "context"

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
//     ErrLeaseLost; Heartbeat's is a *LeaseLostError that says why
//     (LeaseLost judges it), so a worker learns of a termination or restart
//     by its next heartbeat. The one exception is a release after a live
//     restart: see Restart.
//   - One clock. Lease expiry and readiness are judged on the store's clock:
//     the database's own where it has one, or the Clock the store was
//     constructed with (tests substitute it).
//   - Checkpoints are written once. The first checkpoint written for a
//     (run, key) wins; a later write of the same key writes nothing and reports
//     the stored one (see CheckpointResult.Existing). A checkpoint with empty
//     Output is still a checkpoint.
//   - Order. Checkpoints carry a sequence number assigned by the store in
//     write order; ListSteps returns them in that order, never sorted by key.
//   - Executions. A run's life is a series of executions, numbered from 1 at
//     creation and one more per Restart. Checkpoints and attempts belong to
//     the execution that wrote them (the store stamps Execution); replay and
//     fenced writes see only the current execution, and earlier executions
//     stay readable (ListExecutions, ListSteps) until the run is deleted.
//   - Active step. Heartbeat may name the step attempt running; the run's
//     Active is cleared by the run's next Checkpoint, RecordAttempts,
//     Suspend, Complete, Claim, Terminate or Restart.
//   - Bad input changes nothing: a request that fails its Validate method is
//     ErrInvalidArgument, an unknown run is ErrRunNotFound, a state that
//     forbids the change is ErrInvalidState, each with nothing written. Every
//     method validates its request with the request type's Validate before
//     touching the store, so the stores agree on what is malformed and say
//     it in the same words.
//
// Payload bytes (Input, Output, event payloads, SuspendState, the catalog's
// schemas) are opaque to the store: it stores and returns them byte for
// byte. Size limits are
// enforced by the Engine before any store call.
type Store interface {
	// CreateRuns inserts runs, each atomically with respect to the others of
	// the same ID. A run whose ID already exists is left untouched and
	// reported with Created false and its stored record; concurrent creates
	// of one ID create it exactly once. New runs are StatusQueued and ready
	// at once, in execution 1 started now, unless NewRun.StartAt delays
	// them or NewRun.Lease starts them leased (StatusRunning, as if
	// claimed at creation; CreateResult.Run then carries the lease's
	// Owner, Token and LeaseUntil). Results are in the order of the
	// requests.
	//
	// A request's start policies (OnExisting, OnEnded), event and key
	// (NewRun.Event, NewRun.Key; see StartKey and ReplaceTerms) are judged
	// in the same atomic change that creates it: one that a policy refuses
	// writes nothing (CreateResult.Refused), a replacement deletes the old
	// run with its family and creates the new one, and concurrent creates
	// of one ID or key agree. A run created under the ID of a run a
	// replacement deleted gets fencing tokens above the deleted one's, so
	// the deleted run's late holder never matches its lease.
	CreateRuns(ctx context.Context, runs []NewRun) ([]CreateResult, error)

	// GetRun returns a run's record, or ErrRunNotFound.
	GetRun(ctx context.Context, id string) (RunRecord, error)

	// ListRuns returns runs ordered by ID, or by creation time then ID
	// (q.Order), ascending or (q.Descending) descending, filtered by the
	// query (see ListRunsQuery.Listed and the parent), at most
	// q.PageSize() of them, starting past the cursor (ListRunsQuery.Past).
	// A page is read through an index of the order (of the workflow,
	// status, queue or parent when filtered, or of the first attribute
	// filter's name and value), never by sorting every run: its cost
	// does not grow with the number of runs stored, only with the runs a
	// filter passes over (and, for a range or prefix attribute filter,
	// with the runs the filter's range holds).
	ListRuns(ctx context.Context, q ListRunsQuery) (RunPage, error)

	// CountRuns counts the runs in each status, of every workflow or of
	// q.Workflow, finished ones included. It reads indexes, never
	// payloads; a dashboard calls it with every page.
	CountRuns(ctx context.Context, q CountRunsQuery) (RunCounts, error)

	// Claim leases up to Limit runs of the named workflows, on the queues
	// req.ClaimQueues() names, that are ready: StatusQueued or
	// StatusWaiting with ReadyAt at or before now, or StatusRunning whose
	// lease expired (a crashed worker's run; its Recoveries count grows by
	// one). Paused, finished and not-yet-due runs are never claimed, nor a
	// ready run whose queue's limits leave it no place (see Queue). Runs are
	// taken in the order ClaimRequest.Queues describes (priority, then
	// recoveries, then oldest); the order of the returned slice is not
	// specified. Each claimed run becomes StatusRunning with Owner, lease
	// expiry now+LeaseFor, and a token greater than any it had before, and
	// its Hold is cleared.
	// Concurrent claims never hand one run to two callers.
	Claim(ctx context.Context, req ClaimRequest) ([]ClaimedRun, error)

	// NextWake says how long until a Claim of req.Workflows could find a
	// run by the passing of time alone: the earliest ReadyAt of a
	// StatusQueued or StatusWaiting run, or LeaseUntil of a StatusRunning
	// run, of those workflows, measured from now on the store's clock (zero
	// when one is due already). Found is false when there is none, or no
	// workflow is named. An engine whose claim came back empty sleeps that
	// long instead of a whole poll interval. A store may answer earlier
	// than the truth (a stale index entry costs an empty claim), never
	// later. It writes nothing.
	NextWake(ctx context.Context, req NextWakeRequest) (NextWake, error)

	// LoadReplay returns what a worker replays a run from: the current
	// execution's number, its checkpoints in sequence order, and the
	// attempts recorded in it for keys that have no checkpoint.
	LoadReplay(ctx context.Context, runID string) (Replay, error)

	// Checkpoint records a step's result under the lease, fenced. In the same
	// atomic change it appends the given attempts, resets Recoveries to zero,
	// extends the lease to now+LeaseFor, and, if the run is waiting on this
	// key in any case of its wait (an event wait resolved by timeout),
	// removes that wait.
	//
	// If a checkpoint for the key already exists (an event delivered while
	// the worker was deciding a timeout), nothing but the lease extension is
	// written and the stored checkpoint is returned in Existing.
	//
	// If a pause was requested while the run was running, the checkpoint is
	// written and the run becomes StatusPaused with its lease released, in the
	// same change; Paused reports it and the worker stops. A Busy request
	// leaves the run running and its pause requested, and reports
	// PauseRequested instead.
	//
	// Complete, when set, finishes the run in the same change when the
	// checkpoint was written and no pause took effect with it, exactly as
	// Complete would right after (its Notify and ChildError included);
	// Completed reports it. With Existing or Paused, the completion is not
	// written.
	//
	// Progress, when not nil, is published in the same change (also when
	// the checkpoint existed): RunRecord.Progress becomes it. Checkpoint,
	// Heartbeat, Suspend, Complete and ContinueAsNew all take a Progress,
	// so a published value rides with the run's next write.
	Checkpoint(ctx context.Context, req CheckpointRequest) (CheckpointResult, error)

	// RecordAttempts appends attempts (failed ones, before a retry) under the
	// lease, fenced, and extends the lease to now+LeaseFor.
	RecordAttempts(ctx context.Context, req RecordAttemptsRequest) error

	// Heartbeat extends the lease to now+LeaseFor, fenced, and stores
	// req.Step (when set; without it Active is kept) as the run's Active
	// step. It reports whether a pause is requested. A worker calls it
	// while a step runs (about every second, unless a write extended the
	// lease meanwhile), so the run is not claimed by another, operators see
	// the step running, and the worker learns soon of what another process
	// did to the run.
	//
	// When the lease no longer holds, nothing is written and the error is a
	// *LeaseLostError (matching ErrLeaseLost) whose Loss says why, judged
	// in the same atomic change: LossTerminated, LossRestarted (a Restart
	// while the lease was live), LossTaken (another claim holds the run), or
	// LossEnded.
	Heartbeat(ctx context.Context, req HeartbeatRequest) (HeartbeatResult, error)

	// Suspend parks a running run, fenced, in one atomic change:
	//
	//   - If Checkpoint is set it is written first (a sleep's wake time),
	//     with the same write-once rule as Checkpoint.
	//   - If Wait is set: when a checkpoint for the key of one of its cases
	//     (Wait.Cases, in order) already exists, or a buffered event for the
	//     run on one of its topics exists, the run is not parked. The oldest
	//     such buffered event is consumed and written as the checkpoint of
	//     its case's key, of its case's kind. Either way the checkpoint is
	//     returned in Delivered (an existing one before a buffered event),
	//     the lease is extended to now+LeaseFor, and the run stays
	//     StatusRunning. Otherwise the wait, with all its cases, is
	//     registered (replacing any earlier wait of the run).
	//   - When parked, the lease is released and the run becomes StatusWaiting
	//     with ReadyAt = req.ReadyAt (nil: not ready until an event arrives),
	//     or StatusQueued when ReadyAt is at or before now. SuspendState is
	//     stored and handed back by the next Claim. A pause requested while
	//     running makes the parked run StatusPaused instead, keeping ReadyAt.
	//
	// Suspend with neither Checkpoint nor Wait and ReadyAt = now releases the
	// run for any worker to claim at once (an engine shutting down). Such a
	// release also lets go of a run restarted while the lease was live (see
	// Restart): it succeeds with nothing but that written.
	//
	// Refuse, when set, is applied first: the event checkpoint of
	// Refuse.Key is deleted and Refuse.Attempt recorded (so a payload the
	// worker could not decode is visible and the run waits again instead of
	// failing). A Refuse whose key has no event checkpoint is
	// ErrInvalidState, with nothing written.
	//
	// Hold, when set, is stored as the run's Hold in the same change; the
	// run's next Claim clears it. A hold comes with neither Checkpoint, Wait
	// nor Refuse: the run's wait, if it has one, is kept as it is.
	Suspend(ctx context.Context, req SuspendRequest) (SuspendResult, error)

	// TakeEvent resolves a wait without parking, fenced, for a run whose
	// worker is busy (a select whose steps still run): when a checkpoint
	// for the key of one of the wait's cases (Wait.Cases, in order)
	// already exists, it is returned; otherwise the oldest event buffered
	// for the run on one of its topics is consumed and written as the
	// checkpoint of its case's key, of its case's kind (DeliveryKind),
	// exactly as Suspend delivers it, and returned. Either way the lease is
	// extended to now+LeaseFor (when LeaseFor > 0) and the run stays
	// StatusRunning. With neither it returns nil and changes nothing.
	// It never parks the run, never registers the wait and writes no
	// other checkpoint. A lease that no longer holds is ErrLeaseLost with
	// nothing written (the event stays buffered).
	TakeEvent(ctx context.Context, req TakeEventRequest) (*Checkpoint, error)

	// Complete finishes a run, fenced: StatusComplete with Output, or
	// StatusErrored with Error, ending its execution now (EndedAt). The
	// lease, any wait and the SuspendState are cleared. If Notify is set, it is delivered in the same atomic change
	// exactly as SendEvent would (a child run telling its parent), except
	// that a Notify whose run is unknown or finished is dropped: a child
	// always finishes, whatever became of its parent. With ChildError set,
	// every unfinished descendant whose ParentPolicy is ParentTerminate is
	// terminated in the same change, with ChildError, exactly as Terminate
	// does it (so their holders fail their next fenced write with
	// ErrLeaseLost); without it no descendant is touched. A Complete
	// refused (ErrLeaseLost) terminates nothing.
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

	// Terminate ends an unfinished run: StatusTerminated with Error, its
	// execution ended, lease and wait cleared, so the worker holding it fails
	// its next fenced write with ErrLeaseLost. Notify is delivered (or
	// dropped) in the same change, as in Complete. With ChildError set, every
	// unfinished descendant whose ParentPolicy is ParentTerminate is
	// terminated too, with ChildError, in the same change: descendants are
	// reached through finished children as well, and a descendant that
	// abandons its parent keeps its own children too. A descendant whose
	// ParentPolicy is ParentCancel, reached so, is not terminated: its
	// cancellation is requested (as Cancel does, with ChildCancel as the
	// reason) when it is unfinished, and its own children are left to its
	// ending. It returns the
	// IDs it terminated, the run's first. A finished run: ErrInvalidState.
	Terminate(ctx context.Context, req TerminateRequest) ([]string, error)

	// Cancel requests a run's cancellation, which its workflow sees and
	// handles (the run may clean up, and ends itself), unlike Terminate.
	// The first request wins: a later one, whatever its reason, changes
	// nothing and succeeds. The request is recorded on the run
	// (RunRecord.CancelRequested, CancelReason) until a Restart begins its
	// next execution (ContinueAsNew keeps it), and reported by Claim,
	// Heartbeat and Checkpoint.
	// A waiting run becomes ready now, as if its wake time had come (its
	// wait stays registered); a paused run stays paused, ready now for
	// when it is resumed; a queued run stays queued; a running run learns
	// of it from its holder's next write (see SuspendRequest.CancelSeen).
	// Cancelling a run does not reach its children: its ending does, by
	// their ParentPolicy. A finished run is ErrInvalidState; an unknown
	// one ErrRunNotFound.
	Cancel(ctx context.Context, req CancelRequest) error

	// Restart begins a run's next execution: the current one ends (keeping
	// its checkpoints, attempts and final status, readable through
	// ListExecutions and ListSteps), and the run becomes StatusQueued in
	// execution Execution+1, started now, keeping its ID, workflow, input,
	// buffered events and deadline; wait, SuspendState, output, error,
	// progress and recoveries are cleared. With FromKey the new execution starts with copies of the
	// checkpoints written before FromKey's (ForkedFrom set); a FromKey with
	// no checkpoint in the current execution is ErrInvalidArgument with
	// nothing written. Allowed in every state.
	//
	// The run's updates are kept, and in the same change its buffered
	// updates are dropped and every update still pending whose Payload is
	// not the Output of a KindUpdate checkpoint of the new execution is
	// buffered again, in Seq order, after the other buffered events: the
	// new execution takes, once each, the updates the old one took without
	// replying. A replied update is never buffered again.
	//
	// Any lease is revoked: the old holder's fenced writes fail (Heartbeat's
	// with LossRestarted). A lease that has not expired also fences the new
	// execution, so that two executions never run at once: the run is ready
	// only at the old lease's expiry (ReadyAt; Owner, Token and LeaseUntil
	// keep describing the old lease), unless the holder lets go first with
	// a release (Suspend with neither Checkpoint, Wait nor Refuse and
	// ReadyAt at or before now, under the old lease), which makes it ready
	// now (queued; paused if paused since) and ends the old lease, and
	// succeeds. Without a live lease the run is ready now.
	//
	// With IfExecution above zero, a run whose current execution is
	// another is ErrConflict with nothing written. A run's search
	// attributes are kept.
	Restart(ctx context.Context, req RestartRequest) error

	// ContinueAsNew ends the run's current execution and begins its next,
	// fenced by the lease, in one atomic change: the ended execution keeps
	// its checkpoints and attempts (readable through ListExecutions and
	// ListSteps) and ends now with StatusContinued; the run, with the same
	// ID, workflow, parent, deadline, progress (unless Progress replaces
	// it) and buffered events, begins execution Execution+1 now with Input
	// and nothing else: no checkpoints, attempts, wait, SuspendState,
	// output, error, active step or recoveries. The lease is released and
	// the run is StatusQueued, ready now, or StatusPaused when a pause was
	// requested. With ChildError set, the run's children meet their
	// ParentPolicy in the same change, as in Complete: every unfinished
	// descendant whose ParentPolicy is ParentTerminate is terminated with
	// ChildError, and the cancellation of those whose ParentPolicy is
	// ParentCancel is requested with ChildCancel as the reason; without it
	// no descendant is touched. A lease that no longer holds is
	// ErrLeaseLost, with nothing written (no child touched either). A
	// store's replay of the new execution costs the same whatever the
	// number of executions before it.
	ContinueAsNew(ctx context.Context, req ContinueRequest) error

	// ListExecutions returns a run's executions, oldest first.
	ListExecutions(ctx context.Context, runID string) ([]ExecutionRecord, error)

	// Emit delivers an event to every run currently waiting on the topic
	// (any status, including running and paused) in any case of its wait:
	// for each, the payload is written as the checkpoint of that case's key
	// (Wait.Case), the whole wait is removed, and a
	// StatusWaiting run becomes StatusQueued ready now (a paused one stays
	// paused, ready now). Runs not waiting on the topic are not affected and
	// nothing is buffered. Concurrent emits resume a waiting run once. It
	// returns the IDs of the runs it delivered to.
	Emit(ctx context.Context, req EmitRequest) ([]string, error)

	// SendEvent delivers an event to one run: as Emit when the run is waiting
	// on the topic; otherwise the event is buffered for the run (in order)
	// and consumed by the run's next Suspend waiting on the topic. An unknown
	// run is ErrRunNotFound; a finished run is ErrInvalidState.
	SendEvent(ctx context.Context, ev Event) (delivered bool, err error)

	// ListSteps returns one execution's checkpoints in sequence order with
	// their attempts (each step's attempts in the order recorded), and the
	// attempts of keys without a checkpoint. An execution the run never had
	// is ErrInvalidArgument.
	ListSteps(ctx context.Context, q StepsQuery) (History, error)

	// PutCatalog records the workflows and event types an engine serves,
	// replacing earlier records of the same name or topic and keeping the
	// others.
	PutCatalog(ctx context.Context, c Catalog) error

	// GetCatalog returns every recorded workflow and event type, sorted by
	// name and topic.
	GetCatalog(ctx context.Context) (Catalog, error)

	// QueueStats counts the runs of each named queue by state (see
	// QueueStats), in the order named, in one read that does not scan
	// finished runs. A queue without runs has zero counts. Callers check
	// the names (CheckQueueName); a store may refuse a malformed one as
	// ErrInvalidArgument.
	QueueStats(ctx context.Context, queues []string) ([]QueueStats, error)

	// WriteSchedule creates or replaces a schedule, compared by revision
	// (see ScheduleWrite), and creates the write's runs, in one atomic
	// change: any number of processes may try to write the same tick, and
	// exactly one write takes it; the others are ErrConflict with nothing
	// written. The store sets Revision (1 at creation, one more per write),
	// CreatedAt and UpdatedAt.
	WriteSchedule(ctx context.Context, w ScheduleWrite) (ScheduleWriteResult, error)

	// GetSchedule returns a schedule, or ErrScheduleNotFound.
	GetSchedule(ctx context.Context, id string) (Schedule, error)

	// ListSchedules lists schedules by ID, or those due (ScheduleQuery.
	// DueBy) by CheckAt, through an index either way.
	ListSchedules(ctx context.Context, q ScheduleQuery) (SchedulePage, error)

	// DeleteSchedule deletes a schedule; the runs it started stay. An
	// unknown ID is ErrScheduleNotFound.
	DeleteSchedule(ctx context.Context, id string) error

	// Purge deletes up to Limit finished runs that match the request, each
	// with everything it owns (executions, checkpoints, attempts, buffered
	// events, updates, streams), oldest EndedAt first, and reports how many. A run being
	// deleted by another Purge is passed over; a purge never holds what a
	// claim or a run's writes wait on for longer than deleting one batch,
	// and a run that is not finished is never touched. DryRun counts
	// without deleting.
	Purge(ctx context.Context, req PurgeRequest) (PurgeResult, error)

	// PutWorker records a worker as live, replacing its earlier record (by
	// Worker.ID): Heartbeat is now and ExpiresAt now+TTL, on the store's
	// clock; the other fields are stored as given. An engine records
	// itself when it starts to work and again well within its TTL, and
	// removes itself when it stops.
	PutWorker(ctx context.Context, req PutWorkerRequest) error

	// RemoveWorker deletes a worker's record. An unknown ID is no error:
	// the record may have expired.
	RemoveWorker(ctx context.Context, id string) error

	// ListWorkers returns the live workers, those whose ExpiresAt is after
	// now, ordered by ID. An expired record is never returned, and
	// the store deletes expired records as it goes (on PutWorker or
	// ListWorkers), so those of workers that died do not accumulate.
	ListWorkers(ctx context.Context) ([]Worker, error)

	// Interactor carries updates to runs and their replies, and the
	// runs' streams.
	Interactor

	// Close releases the store's resources. Calls after Close return
	// ErrClosed.
	Close() error
}

// FinishNotifier is implemented by stores that can tell every process
// sharing the store that runs ended (Postgres NOTIFY, Redis pub/sub), so a
// caller waiting on a run's result in one process learns at once of its
// completion in another. Like Notifier's, its messages are hints: a waiter
// polls regardless, and correctness never depends on them.
type FinishNotifier interface {
	// Finished returns a channel that receives the ID of each run that
	// completes, errors or is terminated (a cascade's children too) after
	// the call, by this process or another. Where IDs may have been missed
	// (the subscriber fell behind, the store's subscription to the
	// server's announcements was down) it receives Missed, the empty ID,
	// instead. It is closed when ctx is done or the store closes.
	Finished(ctx context.Context) <-chan string
}

// EveryFinishNotifier is a FinishNotifier that can hear the end of every
// run of the store, whichever process ends it (Postgres and Redis with
// notifications on; an in-memory store, which no other process shares). A
// caller waiting on a run's result there needs to poll only as a safety
// net against a lost announcement, not to learn of other processes' work.
type EveryFinishNotifier interface {
	FinishNotifier
	// HearsEveryFinish reports whether Finished hears the runs other
	// processes end.
	HearsEveryFinish() bool
}

// Notifier is implemented by stores that can tell a worker that runs may have
// become ready (Postgres LISTEN/NOTIFY, say). Notifications are hints only:
// an Engine polls regardless, and correctness never depends on them. Stores
// fan their hints out through a Hub.
type Notifier interface {
	// Notifications returns a channel that receives a value when runs may be
	// ready to claim. It is closed when ctx is done or the store closes.
	Notifications(ctx context.Context) <-chan struct{}
}
