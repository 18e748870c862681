package runtime_test

import (
	"slices"
	"testing"
	"time"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/storage"
)

// reportTimeout is the timeout= of the workflow the catalog tests record.
const reportTimeout = 2 * time.Hour

// registerReport registers report, version 3 with a timeout, whose runs
// wait for an event that never comes.
func registerReport(t *testing.T) func(e *runtime.Engine) {
	return func(e *runtime.Engine) {
		must(t, runtime.Register(e, "report", func(c *runtime.WorkflowContext, _ int) (string, error) {
			return runtime.WaitForEvent[string](c, "done", "report.done", 0)
		}, runtime.WorkflowVersion(3), runtime.WorkflowTimeout(reportTimeout)))
	}
}

// waitRecorded waits until the store's catalog records workflow.
func waitRecorded(t *testing.T, e *runtime.Engine, workflow string) storage.WorkflowType {
	t.Helper()
	var w storage.WorkflowType
	eventually(t, "the catalog records "+workflow, func() bool {
		c, err := e.Catalog(waitCtx(t))
		i := slices.IndexFunc(c.Workflows, func(w storage.WorkflowType) bool { return w.Name == workflow })
		if err != nil || i < 0 {
			return false
		}
		w = c.Workflows[i]
		return true
	})
	return w
}

// A workflow's timeout= reaches the catalog, and an engine that knows the
// workflow only from there (StartJSON: stem start, a client) gives the
// runs it starts the deadline a registering engine would, with the
// recorded version; a timeout the start gives replaces it.
func TestStartJSONAppliesCatalogTimeout(t *testing.T) {
	t.Parallel()
	f, clock := setupClock(t)
	worker, _ := f.engine(time.Minute, registerReport(t))
	start(t, worker)
	client, err := runtime.New(runtime.Config{Store: f.store, Clock: clock})
	must(t, err)
	t.Cleanup(func() { client.Close() })
	if w := waitRecorded(t, client, "report"); w.Timeout != reportTimeout || w.Version != 3 {
		t.Fatalf("catalog records report with timeout %v, version %d; want %v, 3", w.Timeout, w.Version, reportTimeout)
	}
	ctx := waitCtx(t)
	now := clock.Now()

	info, err := client.StartJSON(ctx, "report", "plain", []byte(`1`))
	must(t, err)
	if want := now.Add(reportTimeout); info.Deadline == nil || !info.Deadline.Equal(want) || info.Version != 3 {
		t.Fatalf("run started by name: deadline %v, version %d; want %v, 3", info.Deadline, info.Version, want)
	}
	// Delayed: the timeout counts from when the run may start.
	info, err = client.StartJSON(ctx, "report", "delayed", []byte(`2`), runtime.WithDelay(3*time.Hour))
	must(t, err)
	if want := now.Add(3*time.Hour + reportTimeout); info.Deadline == nil || !info.Deadline.Equal(want) {
		t.Fatalf("delayed run: deadline %v, want %v", info.Deadline, want)
	}
	// The start's own timeout wins.
	info, err = client.StartJSON(ctx, "report", "own", []byte(`3`), runtime.WithTimeout(time.Minute))
	must(t, err)
	if want := now.Add(time.Minute); info.Deadline == nil || !info.Deadline.Equal(want) {
		t.Fatalf("run with its own timeout: deadline %v, want %v", info.Deadline, want)
	}
	// As the registering engine does.
	info, err = worker.StartJSON(ctx, "report", "local", []byte(`4`))
	must(t, err)
	if want := now.Add(reportTimeout); info.Deadline == nil || !info.Deadline.Equal(want) || info.Version != 3 {
		t.Fatalf("run started on the registering engine: deadline %v, version %d; want %v, 3", info.Deadline, info.Version, want)
	}
}

// A typed start delayed past the workflow's timeout= is started, with the
// timeout counted from when the run may start, as StartJSON counts it; a
// WithTimeout still counts from the call.
func TestTypedStartCountsTimeoutFromItsStart(t *testing.T) {
	t.Parallel()
	f, clock := setupClock(t)
	e, _ := f.engine(time.Minute, registerReport(t))
	ctx := waitCtx(t)
	now := clock.Now()
	run, err := runtime.Start[int, string](ctx, e, "report", 1, runtime.WithID("later"), runtime.WithDelay(3*time.Hour))
	must(t, err)
	info, err := e.Get(ctx, run.ID())
	must(t, err)
	if want := now.Add(3*time.Hour + reportTimeout); info.Deadline == nil || !info.Deadline.Equal(want) {
		t.Fatalf("a run delayed 3h of a workflow with a 2h timeout: deadline %v, want %v", info.Deadline, want)
	}
	if _, err := runtime.Start[int, string](ctx, e, "report", 1, runtime.WithID("given"), runtime.WithDelay(3*time.Hour), runtime.WithTimeout(time.Hour)); err == nil {
		t.Fatal("a WithTimeout that ends before the delayed start was accepted")
	}
}
