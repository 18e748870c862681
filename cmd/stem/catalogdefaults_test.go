package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/storage"
	"github.com/stemflow/stem/stores/sqlitestore"
)

// catalogTimeout is the timeout= of the workflow the catalog tests' worker
// registers.
const catalogTimeout = 5 * time.Hour

// newCatalogFixture is a running worker that registers report (version 3,
// timeout= catalogTimeout), its catalog recorded.
func newCatalogFixture(t *testing.T) *fixture {
	t.Setenv("STEM_STORE", "")
	t.Setenv("STEM_CODEC_KEY", "")
	path := filepath.Join(t.TempDir(), "stem.db")
	store, err := sqlitestore.Open(path, sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e, err := runtime.New(runtime.Config{Store: store, PollInterval: 10 * time.Millisecond, ShutdownGrace: -1})
	if err != nil {
		t.Fatal(err)
	}
	if err := runtime.Register(e, "report", func(c *runtime.WorkflowContext, in greeting) (string, error) {
		return runtime.WaitForEvent[string](c, "done", "report.done", 0)
	}, runtime.WorkflowVersion(3), runtime.WorkflowTimeout(catalogTimeout)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); e.Run(ctx) }()
	f := &fixture{t: t, path: path, e: e, ctx: ctx}
	f.stop = func() { cancel(); <-done }
	t.Cleanup(func() {
		f.stop()
		e.Close()
		store.Close()
	})
	f.eventually(func(out string) bool { return strings.Contains(out, "report") }, "workflows")
	if c, err := e.Catalog(ctx); err != nil || !slices.ContainsFunc(c.Workflows, func(w storage.WorkflowType) bool { return w.Name == "report" && w.Timeout == catalogTimeout }) {
		t.Fatalf("catalog %+v, %v: want report with its timeout", c.Workflows, err)
	}
	return f
}

// wantCatalogDefaults checks run id's version, and that its deadline is
// the workflow's timeout after a moment within the command's call.
func (f *fixture) wantCatalogDefaults(what, id string, before, after time.Time) {
	f.t.Helper()
	info, err := f.e.Get(f.ctx, id)
	if err != nil {
		f.t.Fatalf("%s: %v", what, err)
	}
	if info.Version != 3 || info.Deadline == nil || info.Deadline.Before(before.Add(catalogTimeout)) || info.Deadline.After(after.Add(catalogTimeout)) {
		f.t.Fatalf("%s: run %s has version %d, deadline %v; want 3, and %v after the start (%v to %v)",
			what, id, info.Version, info.Deadline, catalogTimeout, before, after)
	}
}

// A run that stem start starts knows its workflow by name only: it gets
// the workflow's timeout= (and version) from the catalog, as a start on
// the worker that registers it would.
func TestStartAppliesCatalogTimeout(t *testing.T) {
	f := newCatalogFixture(t)
	before := time.Now()
	f.cli(0, "start", "report", `{"name":"q3"}`, "--id", "by-name")
	f.wantCatalogDefaults("stem start", "by-name", before, time.Now())
}

// A run that stem schedule trigger starts records the workflow's version
// (stem check counts it as versioned) and gets its timeout=, both from the
// catalog.
func TestScheduleTriggerAppliesCatalogDefaults(t *testing.T) {
	f := newCatalogFixture(t)
	f.cli(0, "schedule", "create", "quarterly", "report", "0 6 1 */3 *", `{"name":"q"}`)
	before := time.Now()
	js, _ := f.cli(0, "--json", "schedule", "trigger", "quarterly")
	var res struct {
		RunID string `json:"run_id"`
	}
	if err := json.Unmarshal([]byte(js), &res); err != nil || res.RunID == "" {
		f.t.Fatalf("trigger --json (%v): %s", err, js)
	}
	f.wantCatalogDefaults("stem schedule trigger", res.RunID, before, time.Now())
}
