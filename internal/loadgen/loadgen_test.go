package loadgen_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/stemflow/stem/internal/loadgen"
	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/stores/memstore"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// engine returns a running engine on memstore with the workloads
// registered.
func engine(t *testing.T) *runtime.Engine {
	t.Helper()
	e, err := runtime.New(runtime.Config{Store: memstore.New(memstore.Options{}), Workers: 8})
	if err != nil {
		t.Fatal(err)
	}
	if err := loadgen.Register(e); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); e.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done; e.Close() })
	return e
}

// TestWorkloads runs each workload in each style: every result is checked
// by the workload itself.
func TestWorkloads(t *testing.T) {
	t.Parallel()
	e := engine(t)
	ctx := t.Context()
	for _, st := range loadgen.Styles {
		if _, err := loadgen.Steps(ctx, e, st, 50, 5); err != nil {
			t.Fatalf("Steps(%s): %v", st, err)
		}
		if d, err := loadgen.Sleepers(ctx, e, st, 20, 50*time.Millisecond); err != nil || d < 50*time.Millisecond {
			t.Fatalf("Sleepers(%s) = %v, %v; want at least the 50 ms slept", st, d, err)
		}
	}
	lat, err := loadgen.Latency(ctx, e, 2, 5, 3)
	if err != nil || len(lat) != 5 {
		t.Fatalf("Latency = %d samples, %v; want 5", len(lat), err)
	}
}

// TestWrongResultNamesTheRun: a result other than the one expected fails
// the workload with the run's ID.
func TestWrongResultNamesTheRun(t *testing.T) {
	t.Parallel()
	e := engine(t)
	for _, st := range loadgen.Styles {
		err := loadgen.StartAll(t.Context(), e, st, loadgen.StepsWorkflow, 3, func(int) int { return 2 }, func(int) int { return 3 })
		if err == nil || !strings.Contains(err.Error(), "returned 2, want 3") || !strings.Contains(err.Error(), "run ") {
			t.Fatalf("StartAll(%s) with a wrong expectation: %v", st, err)
		}
	}
	if err := loadgen.StartAll(t.Context(), e, "sideways", loadgen.StepsWorkflow, 1, nil, nil); err == nil {
		t.Fatal("an unknown style was accepted")
	}
}
