package storage

import (
	"errors"
	"fmt"
)

// Sentinel errors that stores return and callers branch on with errors.Is.
// Package runtime re-exports them under the same names.
var (
	// ErrLeaseLost: the run is no longer leased to this worker (the lease
	// expired and another worker claimed it, or the run was terminated,
	// restarted or paused). The worker stops the run and writes nothing more.
	ErrLeaseLost = errors.New("stem: lease lost")
	// ErrRunNotFound: no run has the ID.
	ErrRunNotFound = errors.New("stem: run not found")
	// ErrInvalidState: the run's status forbids the operation.
	ErrInvalidState = errors.New("stem: operation not allowed in the run's state")
	// ErrClosed: the engine or store was closed.
	ErrClosed = errors.New("stem: closed")
	// ErrInvalidArgument: a call's argument is malformed (an empty ID, an
	// empty topic, a bad key).
	ErrInvalidArgument = errors.New("stem: invalid argument")
	// ErrNotStore: opened without creating (a tool that only inspects), the
	// file, schema or key prefix holds no Stem store, or one at a schema
	// version this code does not know. Nothing was created or changed.
	ErrNotStore = errors.New("stem: not a Stem store")
	// ErrUnsupported: the store, as it is configured, refuses a feature
	// of the contract (see Feature and Refuser); the error names the
	// feature and what would serve it. Nothing was written.
	ErrUnsupported = errors.New("stem: not supported by this store")
)

// The ErrorInfo codes, which carry a sentinel's identity through storage so
// errors.Is keeps working on an error read back from a store.
const (
	CodeEventTimeout    = "event_timeout"
	CodeNonDeterminism  = "nondeterminism"
	CodeDuplicateStep   = "duplicate_step"
	CodeTerminated      = "terminated"
	CodePoisonRun       = "poison_run"
	CodePermanent       = "permanent"
	CodeDecode          = "decode"
	CodePanic           = "panic"
	CodeUnknownWorkflow = "unknown_workflow"
	CodeChildCollision  = "child_collision"
	CodeDeadline        = "deadline"
	CodeInvalidArgument = "invalid_argument"
	CodeCanceled        = "canceled"
	CodeUpdateUnhandled = "update_unhandled"
)

// invalid reports a malformed request in the wording every store shares:
// "<what>: stem: invalid argument: <why>".
func invalid(what, format string, args ...any) error {
	return fmt.Errorf("%s: %w: "+format, append([]any{what, ErrInvalidArgument}, args...)...)
}
