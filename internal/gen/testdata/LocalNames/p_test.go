package p

import (
	"context"
	"testing"
	"time"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/stores/memstore"
)

// The generated code, whose locals share their names with the package's
// types, runs a workflow over them from start to result.
func TestFlowRuns(t *testing.T) {
	cx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	eng, err := runtime.New(runtime.Config{Store: memstore.New(memstore.Options{}), PollInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := RegisterWorkflows(eng, &fn{V: 1}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- eng.Run(cx) }()
	defer func() { eng.Close(); <-done }()
	r, err := StartFlow(cx, eng, in{N: 1}, runtime.WithID("flow-1"))
	if err != nil {
		t.Fatal(err)
	}
	if err := ready(cx, eng, r.ID(), 2); err != nil {
		t.Fatal(err)
	}
	got, err := r.Result(cx)
	if err != nil || got != (out{S: "c"}) {
		t.Fatalf("Result = %+v, %v; want {S:c}", got, err)
	}
}
