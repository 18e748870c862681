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
	// ErrDuplicateStep: a step key that is not autoversion was used twice in
	// one run.
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
	// ErrInvalidArgument: a call's argument is malformed (an empty ID, an
	// empty topic, a bad key).
	ErrInvalidArgument = storage.ErrInvalidArgument
)

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

// IsPermanent reports whether err was wrapped with Permanent.
func IsPermanent(err error) bool {
	var p *permanentError
	return errors.As(err, &p)
}

// StepError is a step's failure as replayed from its checkpoint: the message
// the step returned, and the sentinel it matched, if any.
type StepError struct {
	// Key is the checkpoint key of the step.
	Key string
	// Message is the original error's text.
	Message string
	// Code names the sentinel the error matched ("" for none).
	Code string
}

// Error returns the original error's text.
func (e *StepError) Error() string { return e.Message }

// Unwrap returns the sentinel the stored code names, so errors.Is works on a
// replayed error as on the original.
func (e *StepError) Unwrap() error {
	if e.Code == storage.CodePermanent {
		return nil
	}
	return codeSentinels[e.Code]
}

// errorInfo converts an error to its stored form.
func errorInfo(err error) *storage.ErrorInfo {
	if err == nil {
		return nil
	}
	info := &storage.ErrorInfo{Message: err.Error()}
	var se *StepError
	if errors.As(err, &se) && se.Code != "" {
		info.Code = se.Code
		return info
	}
	for code, sentinel := range codeSentinels {
		if errors.Is(err, sentinel) {
			info.Code = code
			return info
		}
	}
	if IsPermanent(err) {
		info.Code = storage.CodePermanent
	}
	return info
}

func invalidArg(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidArgument}, args...)...)
}
