package storage_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stemflow/stem/storage"
)

// TestBoundCall: the store's own deadline is told from the caller's, and a
// NoAnswerError says how long the call waited and unwraps to its cause.
func TestBoundCall(t *testing.T) {
	t.Parallel()
	cctx, cancel := storage.BoundCall(context.Background(), time.Now().Add(time.Millisecond))
	defer cancel()
	<-cctx.Done()
	if !storage.CallTimedOut(cctx) {
		t.Fatal("a call ended by its store deadline is not reported as timed out")
	}
	caller, stop := context.WithTimeout(context.Background(), time.Millisecond)
	defer stop()
	cctx, cancel = storage.BoundCall(caller, time.Now().Add(time.Hour))
	defer cancel()
	<-cctx.Done()
	if storage.CallTimedOut(cctx) {
		t.Fatal("a call ended by its caller's deadline is reported as the store's timeout")
	}
	err := error(&storage.NoAnswerError{Timeout: 5 * time.Second, Err: context.DeadlineExceeded})
	if err.Error() != "no answer within 5s: context deadline exceeded" || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("NoAnswerError = %q (Is DeadlineExceeded: %v)", err, errors.Is(err, context.DeadlineExceeded))
	}
}
