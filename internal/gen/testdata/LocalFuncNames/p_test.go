package p

import (
	"context"
	"testing"
	"time"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/stores/memstore"
)

// The generated code calls the workflow and its steps although its locals
// have their names.
func TestInRuns(t *testing.T) {
	cx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	eng, err := runtime.New(runtime.Config{Store: memstore.New(memstore.Options{}), PollInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := RegisterWorkflows(eng); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- eng.Run(cx) }()
	defer func() { eng.Close(); <-done }()
	r, err := StartIn(cx, eng, 5)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := r.Result(cx); err != nil || got != 10 {
		t.Fatalf("Result = %d, %v; want 10", got, err)
	}
}
