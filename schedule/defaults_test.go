package schedule_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/schedule"
	"github.com/stemflow/stem/storage"
	"github.com/stemflow/stem/stores/memstore"
	"github.com/stemflow/stem/stores/storetest"
)

// reportTimeout is the timeout= of the workflow the tests schedule.
const reportTimeout = 2 * time.Hour

// fixture is a store on a manual clock, a worker that registers report
// (version 3, timeout= reportTimeout) and has recorded it in the catalog,
// and a client engine that knows report only from the catalog.
type fixture struct {
	t      *testing.T
	ctx    context.Context
	clock  *storetest.Clock
	store  storage.Store
	client *runtime.Engine
}

func setup(t *testing.T) *fixture {
	t.Helper()
	clock := storetest.NewClock(storetest.Start)
	st := memstore.New(memstore.Options{Clock: clock})
	ctx, cancel := context.WithCancel(context.Background())
	f := &fixture{t: t, ctx: ctx, clock: clock, store: st}
	worker := f.engine()
	f.must(runtime.Register(worker, "report", func(c *runtime.WorkflowContext, _ int) (string, error) {
		return runtime.WaitForEvent[string](c, "done", "report.done", 0)
	}, runtime.WorkflowVersion(3), runtime.WorkflowTimeout(reportTimeout)))
	f.client = f.engine()
	done := make(chan struct{})
	go func() { defer close(done); worker.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
		st.Close()
	})
	f.eventually("the worker records report in the catalog", func() bool {
		c, err := f.client.Catalog(ctx)
		return err == nil && slices.ContainsFunc(c.Workflows, func(w storage.WorkflowType) bool { return w.Name == "report" })
	})
	return f
}

func (f *fixture) engine(services ...runtime.Service) *runtime.Engine {
	f.t.Helper()
	e, err := runtime.New(runtime.Config{Store: f.store, Clock: f.clock, PollInterval: 5 * time.Millisecond, ShutdownGrace: -1, Services: services})
	f.must(err)
	f.t.Cleanup(func() { e.Close() })
	return e
}

func (f *fixture) must(err error) {
	f.t.Helper()
	if err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) eventually(what string, cond func() bool) {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(f.ctx, 30*time.Second)
	defer cancel()
	for !cond() {
		select {
		case <-ctx.Done():
			f.t.Fatalf("timed out waiting until %s", what)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// wantDefaults checks that run id has the recorded version and a deadline
// reportTimeout after at.
func (f *fixture) wantDefaults(e *runtime.Engine, id string, at time.Time) {
	f.t.Helper()
	info, err := e.Get(f.ctx, id)
	f.must(err)
	if want := at.Add(reportTimeout); info.Deadline == nil || !info.Deadline.Equal(want) || info.Version != 3 {
		f.t.Fatalf("run %s: deadline %v, version %d; want %v, 3", id, info.Deadline, info.Version, want)
	}
}

// A run that Trigger starts on an engine that does not register the
// workflow (the operator command's) gets its timeout= and version from
// the catalog, as a start on the worker would.
func TestTriggerAppliesCatalogDefaults(t *testing.T) {
	t.Parallel()
	f := setup(t)
	_, err := schedule.Create(f.ctx, f.client, schedule.Spec{ID: "nightly", Workflow: "report", Cron: "0 2 * * *", Input: 7})
	f.must(err)
	f.clock.Advance(time.Minute)
	id, err := schedule.Trigger(f.ctx, f.client, "nightly")
	f.must(err)
	f.wantDefaults(f.client, id, f.clock.Now())
}

// A tick fired by an engine that serves the schedules but not the
// workflow gets its timeout= and version from the catalog.
func TestTickAppliesCatalogDefaults(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ticker := f.engine(schedule.Service{Poll: 5 * time.Millisecond})
	f.must(runtime.Register(ticker, "other", func(c *runtime.WorkflowContext, _ int) (int, error) { return 0, nil }))
	info, err := schedule.Create(f.ctx, f.client, schedule.Spec{ID: "hourly", Workflow: "report", Cron: "@hourly", Input: 7})
	f.must(err)
	ctx, cancel := context.WithCancel(f.ctx)
	done := make(chan struct{})
	go func() { defer close(done); ticker.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	f.clock.Set(info.NextFireAt)
	id := schedule.RunID("hourly", info.NextFireAt)
	f.eventually("the tick starts its run", func() bool {
		_, err := f.client.Get(f.ctx, id)
		return err == nil
	})
	f.wantDefaults(f.client, id, info.NextFireAt)
}
