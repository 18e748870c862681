package runtime

import (
	"errors"
	"fmt"

	"github.com/stemflow/stem/storage"
)

// Sentinel errors. Callers branch on them with errors.Is.
var (
	// ErrLeaseLost: the run is no longer leased to this worker (the lease
	// expired and another worker claimed it, or the run was terminated,
	// restarted or paused). The worker stops the run and writes nothing more.
	ErrLeaseLost = storage.ErrLeaseLost
	// ErrRunNotFound: no run has the ID.
	ErrRunNotFound = storage.ErrRunNotFound
	// ErrInvalidState: the run's status forbids the operation.
	ErrInvalidState = storage.ErrInvalidState
	// ErrClosed: the engine or store was closed.
	ErrClosed = storage.ErrClosed
	// ErrUnsupported: the store, as configured, lacks a feature the call
	// uses (a start key or a queue's limits on a Redis Cluster store of
	// several shards); the error says which. Nothing was written.
	ErrUnsupported = storage.ErrUnsupported
	// ErrUnknownWorkflow: no workflow is registered under the name.
	ErrUnknownWorkflow = errors.New("stem: unknown workflow")
	// ErrDuplicateWorkflow: a workflow name was registered twice.
	ErrDuplicateWorkflow = errors.New("stem: workflow already registered")
	// ErrDecode: a payload (input, output, event) does not decode into the
	// type it is meant for.
	ErrDecode = errors.New("stem: payload does not decode")
	// ErrSealed: a payload or error text is sealed by a codec and cannot be
	// opened here: sealed with a key the engine's codec does not hold, failing
	// authentication (tampered or corrupt), or read by an engine without a
	// codec. The error is a *SealedError naming the run and the key ID.
	ErrSealed = errors.New("stem: sealed payload cannot be opened")
	// ErrPayloadTooLarge: a payload exceeds Config.MaxPayloadBytes.
	ErrPayloadTooLarge = errors.New("stem: payload too large")
	// ErrEventTimeout: an event wait timed out.
	ErrEventTimeout = errors.New("stem: event wait timed out")
	// ErrNonDeterminism: a replay did not follow the path the run took before.
	ErrNonDeterminism = errors.New("stem: non-deterministic workflow")
	// ErrDuplicateStep: a durable call's key was used twice in one
	// execution: a step not marked autoversion, or a child call, made twice
	// under one name; or a key a call numbered by call order (a sleep, a
	// wait, a select, a future) shares with a call of another kind. Its
	// text names the fix.
	ErrDuplicateStep = errors.New("stem: step called twice")
	// ErrTerminated: the run was terminated.
	ErrTerminated = errors.New("stem: run terminated")
	// ErrRestarted: the run was restarted (Engine.Restart, here or in
	// another process) while this engine executed it: the cause of its
	// running step's context. The engine writes nothing more of the old
	// execution and lets the new one start.
	ErrRestarted = errors.New("stem: run restarted")
	// ErrPoisonRun: the run's worker died too many times without progress.
	ErrPoisonRun = errors.New("stem: run recovered too many times without progress")
	// ErrChildCollision: a child workflow's derived run ID is taken by a run
	// that is not this parent's child of that workflow (started by hand, or
	// of another workflow).
	ErrChildCollision = errors.New("stem: child run ID taken by another run")
	// ErrDeadline: the run passed its deadline (WithTimeout, WithDeadline or
	// its workflow's timeout=) before it ended: it ends errored with it,
	// also while sleeping or waiting, and its running step's context is
	// cancelled with it as the cause.
	ErrDeadline = errors.New("stem: run passed its deadline")
	// ErrCanceled: a cancellation. Either the workflow cancelled a future
	// (Future.Cancel, or a select that cancels its losers, SelectCancel)
	// before it had its result: Await returns an error matching it. Or the
	// run was cancelled (Engine.Cancel, or a parent that ended with the
	// child's parent-close policy cancel): the workflow's context
	// (WorkflowContext.Context) is cancelled with a cause matching it, and
	// its durable calls fail with it, but those made on the detached
	// context (WorkflowContext.Detached) for its cleanup. A step whose
	// context was cancelled has it as its cause (context.Cause). Test for
	// it, not for context.Canceled, which a replayed cancellation does not
	// match.
	ErrCanceled = errors.New("stem: canceled")
	// ErrInvalidArgument: a call's argument is malformed (an empty ID, an
	// empty topic, a bad key).
	ErrInvalidArgument = storage.ErrInvalidArgument
	// ErrHeld: an engine held the run rather than execute it, because the
	// workflow's code no longer makes the calls the run's history recorded
	// (see Hold); a *HeldError says where.
	ErrHeld = errors.New("stem: run held: its code no longer matches its history")
)

// Hold says why an engine held a run: the first call where the workflow's
// code and the run's history part, with the key each has there. See
// RunInfo.Hold.
type Hold = storage.Hold

// HeldError is why an execution ended held (Hooks.Execution's Err with
// OutcomeHeld): the run and its hold. It matches ErrHeld.
type HeldError struct {
	RunID string
	Hold  Hold
}

// Error says which run is held, where and why.
func (e *HeldError) Error() string {
	return fmt.Sprintf("run %s held at call %d of execution %d: %s", e.RunID, e.Hold.Position+1, e.Hold.Execution, e.Hold.Reason)
}

// Unwrap returns ErrHeld.
func (e *HeldError) Unwrap() error { return ErrHeld }

var codeSentinels = map[string]error{
	storage.CodeEventTimeout:    ErrEventTimeout,
	storage.CodeNonDeterminism:  ErrNonDeterminism,
	storage.CodeDuplicateStep:   ErrDuplicateStep,
	storage.CodeTerminated:      ErrTerminated,
	storage.CodePoisonRun:       ErrPoisonRun,
	storage.CodeDecode:          ErrDecode,
	storage.CodeChildCollision:  ErrChildCollision,
	storage.CodeDeadline:        ErrDeadline,
	storage.CodeInvalidArgument: ErrInvalidArgument,
	storage.CodeUnknownWorkflow: ErrUnknownWorkflow,
	storage.CodeCanceled:        ErrCanceled,
	storage.CodeUpdateUnhandled: ErrUpdateUnhandled,
}

// Permanent wraps err so that a step returning it is not retried.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err}
}

type permanentError struct{ err error }

func (p *permanentError) Error() string { return p.err.Error() }
func (p *permanentError) Unwrap() error { return p.err }

// IsPermanent reports whether err was wrapped with Permanent, also when
// it is read back from a store: a step's failure that returned Permanent,
// in the workflow, after a replay and from Result.
func IsPermanent(err error) bool {
	return inChain(err, func(err error) bool {
		switch e := err.(type) {
		case *permanentError:
			return true
		case *StepError:
			return e.Code == storage.CodePermanent || e.permanent
		}
		return false
	})
}

// inChain reports whether match holds for an error in err's chain.
func inChain(err error, match func(error) bool) bool {
	found := false
	walkChain(err, func(e error) bool {
		found = found || match(e)
		return !found
	})
	return found
}

// maxChainDepth bounds how deep walkChain follows wrapped errors.
const maxChainDepth = 100

// walkChain calls visit on err and every error it wraps, depth first in
// the order errors.Is tries them, down to maxChainDepth; visit returns
// whether to go on into what its error wraps.
func walkChain(err error, visit func(error) bool) { walkChainAt(err, visit, 0) }

func walkChainAt(err error, visit func(error) bool, depth int) {
	if err == nil || depth > maxChainDepth || !visit(err) {
		return
	}
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		walkChainAt(u.Unwrap(), visit, depth+1)
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			walkChainAt(e, visit, depth+1)
		}
	}
}

// StepError is a failure read back from the store: a step's, a child's or
// a run's. It keeps the failure's text, the package's sentinel it matched,
// and the declared errors (DeclareError, DeclareErrorType, //stem:error)
// it held, so errors.Is and errors.As work on it as on the original, in
// the workflow, from Result, in another process and after a replay.
type StepError struct {
	// Key is the checkpoint key of the step ("" for a run's own error).
	Key string
	// Message is the original error's text.
	Message string
	// Code names the sentinel the error matched ("" for none).
	Code string

	// records are the declared errors recorded with the failure, values
	// those this process declared, rebuilt; permanent is the Permanent
	// mark when the code holds another sentinel's.
	records   []declaredRecord
	values    []error
	permanent bool
}

// Error returns the original error's text.
func (e *StepError) Error() string { return e.Message }

// Unwrap returns the sentinel the stored code names and the declared
// errors recorded with the failure, so errors.Is and errors.As work on a
// replayed error as on the original.
func (e *StepError) Unwrap() []error {
	out := make([]error, 0, 1+len(e.values))
	if c := codeSentinels[e.Code]; c != nil {
		out = append(out, c)
	}
	return append(out, e.values...)
}

// Declared returns the durable names of the declared errors recorded with
// the failure, outermost first, whether or not this process declares them.
func (e *StepError) Declared() []string {
	names := make([]string, len(e.records))
	for i, r := range e.records {
		names[i] = r.Name
	}
	return names
}

// stepError rebuilds a failure from its stored form, opened.
func stepError(key string, info *storage.ErrorInfo) *StepError {
	se := &StepError{Key: key, Message: info.Message, Code: info.Code}
	se.records, se.permanent, se.values = decodeDetail(info.Detail)
	return se
}

// errorInfo converts an error to its stored form: its text, the sentinel
// code it matched, and the declared errors in its chain.
func errorInfo(err error) *storage.ErrorInfo {
	if err == nil {
		return nil
	}
	info := &storage.ErrorInfo{Message: err.Error(), Code: sentinelCode(err)}
	info.Detail = encodeDetail(declaredIn(err), IsPermanent(err), info.Code)
	return info
}

// sentinelCode returns the code of the package's sentinel err matches,
// storage.CodePermanent for a permanent failure that matches none, or "".
func sentinelCode(err error) string {
	var se *StepError
	if errors.As(err, &se) && se.Code != "" {
		return se.Code
	}
	for code, sentinel := range codeSentinels {
		if errors.Is(err, sentinel) {
			return code
		}
	}
	if IsPermanent(err) {
		return storage.CodePermanent
	}
	return ""
}

func invalidArg(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidArgument}, args...)...)
}
