package storage

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// A store whose server may stop answering bounds each call by its own call
// timeout (BoundCall), whatever deadline its caller set, and reports a call
// that this deadline ended as a *NoAnswerError: its Health then counts the
// server as not answering, and the caller's error says how long it waited.

// NoAnswerError is a call the server did not answer within Timeout.
type NoAnswerError struct {
	Timeout time.Duration
	Err     error
}

// Error says how long the call waited, and why it ended.
func (e *NoAnswerError) Error() string {
	return fmt.Sprintf("no answer within %v: %v", e.Timeout, e.Err)
}

// Unwrap returns the error the call ended with.
func (e *NoAnswerError) Unwrap() error { return e.Err }

// errCallTimeout is the cause of a call context whose store deadline,
// not its caller's, ended it.
var errCallTimeout = errors.New("stem: store call timeout")

// BoundCall returns ctx limited to deadline, a store's call timeout from the
// call's start; CallTimedOut tells that deadline from the caller's.
func BoundCall(ctx context.Context, deadline time.Time) (context.Context, context.CancelFunc) {
	return context.WithDeadlineCause(ctx, deadline, errCallTimeout)
}

// CallTimedOut reports whether the deadline BoundCall set is what ended
// cctx.
func CallTimedOut(cctx context.Context) bool { return context.Cause(cctx) == errCallTimeout }
