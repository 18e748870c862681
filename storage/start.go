package storage

import (
	"context"
	"errors"
	"reflect"
	"time"
)

// ExistingPolicy says what a create does when a run with its ID exists and
// has not ended (NewRun.OnExisting).
type ExistingPolicy string

// The policies for an ID whose run has not ended.
const (
	// ExistingReturn (the zero value) returns the existing run and writes
	// nothing: a start is idempotent by its ID.
	ExistingReturn ExistingPolicy = ""
	// ExistingFail refuses the create (CreateResult.Refused is
	// RefusedExists) and writes nothing.
	ExistingFail ExistingPolicy = "fail"
	// ExistingReplace terminates the existing run and replaces it with the
	// new one, in one atomic change (see NewRun.Replace).
	ExistingReplace ExistingPolicy = "replace"
)

// Valid reports whether p is one of the policies.
func (p ExistingPolicy) Valid() bool {
	return p == ExistingReturn || p == ExistingFail || p == ExistingReplace
}

// EndedPolicy says what a create does when the run with its ID has ended
// (NewRun.OnEnded).
type EndedPolicy string

// The policies for an ID whose run has ended.
const (
	// EndedReturn (the zero value) returns the ended run and writes
	// nothing.
	EndedReturn EndedPolicy = ""
	// EndedReuse replaces the ended run with the new one (see
	// NewRun.Replace), whatever its end.
	EndedReuse EndedPolicy = "reuse"
	// EndedReject refuses the create (CreateResult.Refused is
	// RefusedEnded) and writes nothing.
	EndedReject EndedPolicy = "reject"
	// EndedReuseFailed replaces the ended run when it errored or was
	// terminated, and refuses the create (RefusedEnded) when it completed.
	EndedReuseFailed EndedPolicy = "reuse-failed"
)

// Valid reports whether p is one of the policies.
func (p EndedPolicy) Valid() bool {
	return p == EndedReturn || p == EndedReuse || p == EndedReject || p == EndedReuseFailed
}

// StartRefusal says why a create's policy refused it (CreateResult.Refused).
type StartRefusal string

// The refusals.
const (
	// RefusedExists: the ID's run has not ended and OnExisting is
	// ExistingFail.
	RefusedExists StartRefusal = "exists"
	// RefusedEnded: the ID's run has ended and OnEnded is EndedReject, or
	// EndedReuseFailed and the run completed; or the create carries an
	// Event and OnEnded is EndedReturn, which leaves no run to deliver it
	// to.
	RefusedEnded StartRefusal = "ended"
	// RefusedFamily: the ID's run would be replaced, but it has an
	// unfinished descendant that does not end with it (its ParentPolicy is
	// ParentAbandon or ParentCancel), whose ID the new run's children
	// could take.
	RefusedFamily StartRefusal = "family"
)

// ReplaceTerms are what a replacement (ExistingReplace, EndedReuse,
// EndedReuseFailed) ends the replaced run with.
//
// A replacement is one atomic change. When the run has not ended it is
// terminated with Error, its descendants meeting their ParentPolicy with
// ChildError and ChildCancel exactly as TerminateRequest's (its end is
// announced to FinishNotifier's subscribers as any termination's); an
// ended run's unfinished descendants are terminated with ChildError. Then
// the run and every descendant are deleted with everything they own (as
// Purge deletes a run: executions, checkpoints, attempts, buffered
// events), and the new run is created under the ID, in execution 1. The
// old run's children's IDs, derived from its ID, are free again for the
// new run's children. An unfinished descendant whose ParentPolicy is not
// ParentTerminate refuses the replacement (RefusedFamily), with nothing
// written.
type ReplaceTerms struct {
	Error       ErrorInfo
	ChildError  ErrorInfo
	ChildCancel string
}

// StartKey is a key of a workflow that at most one run holds at a time
// (NewRun.Key): a singleton, or a debounce window.
//
// A singleton (Debounce zero) is held by the run created with it until
// that run ends: a create with the key while its holder has not ended
// returns the holder (CreateResult.Joined) and writes nothing; once it has
// ended, the create makes a new run, which holds the key.
//
// A debounce key is held by a run that has not started yet: the first
// create makes a run ready Debounce after now (the window opens with the
// first start and does not move); each create with the key while that run
// is queued and the window open (its ReadyAt still ahead) joins it
// (Joined), and unless KeepFirst its input and headers become the joining
// create's, so the run starts with the last input of the window. A create
// after the window closed opens a new window with a new run.
//
// A joining create writes no run of its own: its ID, policies and
// placement are ignored, its Event, if any, goes to the holder.
type StartKey struct {
	// Key is the key, within the run's workflow: 1 to MaxNameLen bytes of
	// visible UTF-8.
	Key string
	// Debounce, when above zero, is the debounce window.
	Debounce time.Duration
	// KeepFirst keeps the window's first input instead of its last.
	KeepFirst bool
}

// ErrStartRefused: a start's policy refused it (see RefusedError).
var ErrStartRefused = errors.New("stem: start refused by its policy")

// RefusedError reports a create its policy refused. The runtime returns
// it from a start; it matches ErrStartRefused.
type RefusedError struct {
	// RunID is the ID whose run refused it; Status that run's status.
	RunID  string
	Status RunStatus
	// Refusal says which rule refused it.
	Refusal StartRefusal
}

func (e *RefusedError) Error() string {
	id := quote(e.RunID)
	switch e.Refusal {
	case RefusedExists:
		return "stem: run " + id + " exists and is " + string(e.Status) + ": the start's policy for an existing run is to fail"
	case RefusedEnded:
		return "stem: run " + id + " has ended (" + string(e.Status) + "): the start's policy for an ended run refuses a new one"
	case RefusedFamily:
		return "stem: run " + id + " cannot be replaced: a descendant that does not end with it (abandon or cancel policy) has not ended"
	}
	return "stem: run " + id + ": start refused (" + string(e.Refusal) + ")"
}

// Is makes a RefusedError match ErrStartRefused.
func (e *RefusedError) Is(target error) bool { return target == ErrStartRefused }

// TxStore is implemented by stores that can write into a transaction on
// their own database that the application holds (Postgres, SQLite): a run
// started or an event sent in it exists exactly when the application's
// transaction commits, with the application's own rows. Engines learn of
// such writes after the commit, never before (a Postgres NOTIFY is
// delivered at commit; an SQLite store hears another connection's commit).
// The in-memory and Redis stores do not implement it.
type TxStore interface {
	Store
	// TxType is the type of the transactions the store takes and hands to
	// transactional steps: pgx.Tx on Postgres, *sql.Tx on SQLite.
	TxType() reflect.Type

	// BeginTx begins a transaction on the store's database for the
	// application's writes and the calls below; the caller commits or
	// rolls it back through the returned AppTx.
	BeginTx(ctx context.Context) (AppTx, error)

	// CreateRunsTx is CreateRuns inside tx, a transaction of TxType on the
	// store's database. Nothing is visible to others, and no engine is
	// woken, before tx commits; a rollback leaves nothing. A run with a
	// Lease is refused (ErrInvalidArgument): its creator cannot execute a
	// run that may never be committed.
	CreateRunsTx(ctx context.Context, tx any, runs []NewRun) ([]CreateResult, error)

	// SendEventTx is SendEvent inside tx (see CreateRunsTx).
	SendEventTx(ctx context.Context, tx any, ev Event) (delivered bool, err error)

	// EmitTx is Emit inside tx (see CreateRunsTx).
	EmitTx(ctx context.Context, tx any, req EmitRequest) ([]string, error)

	// CheckpointTx runs a transactional step: it begins a transaction on
	// the store's database, calls step with it, and writes req's
	// checkpoint with step's output in it, as Checkpoint does (fenced,
	// write-once, the pause rules), committing the step's writes and the
	// checkpoint together. A step that returns an error rolls back what it
	// wrote, and that error is returned as it is, with nothing written. A
	// checkpoint that is not written (the key had one: Existing; the lease
	// no longer holds: ErrLeaseLost) rolls the step's writes back too. A
	// crash at any point leaves both or neither. req.Complete must be nil;
	// req.Checkpoint.Output is ignored (step's output is written), and
	// req.Attempts is read after step returns, so that step may fill in
	// its attempt's end.
	// Transactional steps run each in a transaction of its own: one
	// step's failure never rolls back another's writes.
	CheckpointTx(ctx context.Context, req CheckpointRequest, step func(ctx context.Context, tx any) ([]byte, error)) (CheckpointResult, error)
}

// AppTx is a transaction TxStore.BeginTx began.
type AppTx interface {
	// Tx is the transaction, of the store's TxType.
	Tx() any
	// Commit commits it.
	Commit(ctx context.Context) error
	// Rollback rolls it back; after a Commit it does nothing.
	Rollback(ctx context.Context) error
}
