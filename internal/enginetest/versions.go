package enginetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/storage"
)

// Workflow versions, end to end: runs record the version they start under,
// an engine claims only the versions it registers, and a build that keeps
// the old version's function beside the new one drains the old runs on it.
var versionScenarios = []scenario{
	{"versions/an engine with only the new version leaves the old runs; one with both drains them on the old function", testVersionsDrain},
	{"versions/a dead worker's run of the old version goes only to an engine that registers that version", testVersionsHandOver},
	{"versions/starts, children, restarts and runs of unknown version use the newest; pause and terminate reach runs nobody can run", testVersionsControl},
}

// shipV1 and shipV2 are the input of two versions of "ship": the field
// changed type, so a v1 input does not decode into shipV2.
type shipV1 struct{ Tracking string }

// shipGo is the topic that wakes v1 runs parked on an event.
const shipGo = "ship.go"

type shipV2 struct {
	Tracking int
	Carrier  string
}

// shipV1Fn takes a step, parks, and takes another; shipV2Fn takes one
// step. Each says which version ran it. A v1 run parks by sleeping nap, or,
// when nap is 0, by waiting for an event on shipGo, so that a scenario and
// not the clock decides when its runs wake.
func shipV1Fn(nap time.Duration) func(c *runtime.WorkflowContext, in shipV1) (string, error) {
	return func(c *runtime.WorkflowContext, in shipV1) (string, error) {
		a, err := runtime.Step(c, "label@v1", runtime.StepOptions{}, func(runtime.StepContext) (string, error) { return in.Tracking, nil })
		if err != nil {
			return "", err
		}
		if nap == 0 {
			if _, err := runtime.WaitForEvent[string](c, "nap", shipGo, 0); err != nil {
				return "", err
			}
		} else if err := c.Sleep("nap", nap); err != nil {
			return "", err
		}
		b, err := runtime.Step(c, "send@v1", runtime.StepOptions{}, func(runtime.StepContext) (string, error) { return "sent", nil })
		return "v1 " + a + " " + b, err
	}
}

func shipV2Fn(c *runtime.WorkflowContext, in shipV2) (string, error) {
	a, err := runtime.Step(c, "label@v2", runtime.StepOptions{}, func(runtime.StepContext) (string, error) {
		return fmt.Sprintf("%s-%d", in.Carrier, in.Tracking), nil
	})
	return "v2 " + a, err
}

func registerV1(f *fixture, nap time.Duration) func(e *runtime.Engine) {
	return func(e *runtime.Engine) { f.must(runtime.Register(e, "ship", shipV1Fn(nap))) }
}

func registerV2(f *fixture) func(e *runtime.Engine) {
	return func(e *runtime.Engine) {
		f.must(runtime.Register(e, "ship", shipV2Fn, runtime.WorkflowVersion(2)))
	}
}

// registerBoth registers the new version first, so the engine must order
// them itself.
func registerBoth(f *fixture, nap time.Duration) func(e *runtime.Engine) {
	return func(e *runtime.Engine) {
		registerV2(f)(e)
		registerV1(f, nap)(e)
	}
}

func testVersionsDrain(f *fixture) {
	old := f.engine(config{}, registerV1(f, 0))
	for i := range 3 {
		r, err := runtime.Start[shipV1, string](f.ctx, old, "ship", shipV1{Tracking: fmt.Sprint("t", i)}, runtime.WithID(fmt.Sprint("old-", i)))
		f.must(err)
		if info := f.info(old, r.ID()); info.Version != 1 {
			f.t.Fatalf("a run started on version 1 records version %d", info.Version)
		}
	}
	stopOld := f.start(old)
	for i := range 3 {
		f.waitStatus(old, fmt.Sprint("old-", i), runtime.StatusWaiting)
	}
	stopOld() // the deploy: the old build stops while its runs wait

	// The new build registers only version 2: it runs its own runs and
	// never takes a version 1 run, whose input would not decode.
	next := f.engine(config{}, registerV2(f))
	r, err := runtime.Start[shipV2, string](f.ctx, next, "ship", shipV2{Tracking: 7, Carrier: "post"}, runtime.WithID("new"))
	f.must(err)
	f.start(next)
	if out, err := r.Result(f.ctx); err != nil || out != "v2 post-7" {
		f.t.Fatalf("the new version's run: %q, %v", out, err)
	}
	if info := f.info(next, "new"); info.Version != 2 {
		f.t.Fatalf("a run started on version 2 records version %d", info.Version)
	}
	// The old runs' event comes: they are ready to run, but not here.
	if n, err := next.Emit(f.ctx, shipGo, "go"); err != nil || n != 3 {
		f.t.Fatalf("emit to the old runs: %d woken, %v; want 3", n, err)
	}
	time.Sleep(300 * time.Millisecond) // time for the new build to take them, were it to
	for i := range 3 {
		id := fmt.Sprint("old-", i)
		info := f.info(next, id)
		if info.Status != runtime.StatusWaiting && info.Status != runtime.StatusQueued {
			f.t.Fatalf("run %s of version 1 under an engine that registers only version 2: %s (%v), want it left waiting", id, info.Status, info.Err)
		}
		if s := findStep(f.steps(next, id, 1), "label@v2"); s != nil {
			f.t.Fatalf("the version 2 function ran for run %s of version 1", id)
		}
	}

	// A build that keeps version 1 beside version 2 drains them on the
	// version 1 function, from their checkpoints.
	both := f.engine(config{}, registerBoth(f, 0))
	f.start(both)
	for i := range 3 {
		id := fmt.Sprint("old-", i)
		info := f.waitStatus(both, id, runtime.StatusComplete)
		if want := fmt.Sprintf(`"v1 t%d sent"`, i); string(info.Output) != want || info.Version != 1 {
			f.t.Fatalf("run %s drained: %s version %d, want %s version 1", id, info.Output, info.Version, want)
		}
	}
	r2, err := runtime.Start[shipV2, string](f.ctx, both, "ship", shipV2{Tracking: 8, Carrier: "van"})
	f.must(err)
	if out, err := r2.Result(f.ctx); err != nil || out != "v2 van-8" || f.info(both, r2.ID()).Version != 2 {
		f.t.Fatalf("a start on an engine with both versions runs on the newest: %q, %v", out, err)
	}
	if _, err := runtime.Start[shipV1, string](f.ctx, both, "ship", shipV1{Tracking: "x"}); !errors.Is(err, runtime.ErrInvalidArgument) {
		f.t.Fatalf("a start with the old version's types: %v, want ErrInvalidArgument (starts are on the newest)", err)
	}
}

func testVersionsHandOver(f *fixture) {
	client := f.engine(config{}, registerV1(f, time.Millisecond))
	_, err := runtime.Start[shipV1, string](f.ctx, client, "ship", shipV1{Tracking: "orphan"}, runtime.WithID("orphan"))
	f.must(err)
	claimed, err := f.store.Claim(f.ctx, storage.ClaimRequest{Owner: "dead-worker", Workflows: []string{"ship"}, Limit: 1, LeaseFor: 200 * time.Millisecond})
	f.must(err)
	if len(claimed) != 1 || claimed[0].Version != 1 {
		f.t.Fatalf("claimed %+v, want the orphan at version 1", claimed)
	}
	f.start(f.engine(config{}, registerV2(f)))
	time.Sleep(500 * time.Millisecond) // its lease expired long ago
	if info := f.info(client, "orphan"); info.Status != runtime.StatusRunning || info.Recoveries != 0 {
		f.t.Fatalf("an engine with only version 2 recovered a version 1 run: %s, %d recoveries", info.Status, info.Recoveries)
	}
	both := f.engine(config{}, registerBoth(f, time.Millisecond))
	f.start(both)
	info := f.waitStatus(both, "orphan", runtime.StatusComplete)
	if string(info.Output) != `"v1 orphan sent"` || info.Version != 1 {
		f.t.Fatalf("the recovered run: %s version %d", info.Output, info.Version)
	}
}

func testVersionsControl(f *fixture) {
	e := f.engine(config{}, func(e *runtime.Engine) {
		registerBoth(f, time.Millisecond)(e)
		f.must(runtime.Register(e, "parent", func(c *runtime.WorkflowContext, in int) (string, error) {
			return runtime.CallChild[string](c, "child", "ship", shipV2{Tracking: in, Carrier: "kid"})
		}))
	})
	if err := runtime.Register(e, "ship", shipV2Fn, runtime.WorkflowVersion(2)); !errors.Is(err, runtime.ErrDuplicateWorkflow) || !strings.Contains(err.Error(), "version 2") {
		f.t.Fatalf("a version registered twice: %v, want ErrDuplicateWorkflow naming it", err)
	}
	if err := runtime.Register(e, "ship", shipV1Fn(0)); !errors.Is(err, runtime.ErrDuplicateWorkflow) {
		f.t.Fatalf("version 1 registered twice: %v", err)
	}

	// A run stored before versions were recorded (version 0) runs on the
	// newest; so does a run started by raw JSON.
	in, _ := json.Marshal(shipV2{Tracking: 3, Carrier: "old-store"})
	_, err := f.store.CreateRuns(f.ctx, []storage.NewRun{{ID: "legacy", Workflow: "ship", Input: in}})
	f.must(err)
	raw, err := e.StartJSON(f.ctx, "ship", "raw", json.RawMessage(`{"Tracking":4,"Carrier":"cli"}`))
	f.must(err)
	if raw.Version != 2 {
		f.t.Fatalf("StartJSON recorded version %d, want the newest, 2", raw.Version)
	}
	// A version 1 run, to restart later.
	v1 := f.engine(config{}, registerV1(f, time.Millisecond))
	_, err = runtime.Start[shipV1, string](f.ctx, v1, "ship", shipV1{Tracking: "again"}, runtime.WithID("again"))
	f.must(err)
	parent, err := runtime.Start[int, string](f.ctx, e, "parent", 5, runtime.WithID("parent"))
	f.must(err)
	f.start(e)

	if info := f.waitStatus(e, "legacy", runtime.StatusComplete); string(info.Output) != `"v2 old-store-3"` || info.Version != 0 {
		f.t.Fatalf("a run of unknown version: %s, version %d", info.Output, info.Version)
	}
	f.waitStatus(e, "raw", runtime.StatusComplete)
	if out, err := parent.Result(f.ctx); err != nil || out != "v2 kid-5" {
		f.t.Fatalf("the parent's child: %q, %v", out, err)
	}
	if info := f.info(e, "parent/child"); info.Version != 2 {
		f.t.Fatalf("a child records version %d, want its workflow's newest, 2", info.Version)
	}
	f.waitStatus(e, "again", runtime.StatusComplete)
	f.must(e.Restart(f.ctx, "again"))
	f.eventually("the restarted version 1 run completes again", func() bool {
		info := f.info(e, "again")
		return info.Status == runtime.StatusComplete && info.Execution == 2
	})
	if info := f.info(e, "again"); string(info.Output) != `"v1 again sent"` || info.Version != 1 {
		f.t.Fatalf("a restart of a version 1 run: %s, version %d", info.Output, info.Version)
	}

	// Runs of a version no engine registers are still an operator's to
	// pause, resume and terminate.
	_, err = f.store.CreateRuns(f.ctx, []storage.NewRun{{ID: "stranded", Workflow: "ship", Input: []byte(`{"Tracking":"?"}`), Version: 9}})
	f.must(err)
	f.must(e.Pause(f.ctx, "stranded"))
	f.waitStatus(e, "stranded", runtime.StatusPaused)
	f.must(e.Resume(f.ctx, "stranded"))
	f.waitStatus(e, "stranded", runtime.StatusQueued)
	time.Sleep(100 * time.Millisecond)
	if info := f.info(e, "stranded"); info.Status != runtime.StatusQueued {
		f.t.Fatalf("a run of version 9, which no engine registers: %s (%v)", info.Status, info.Err)
	}
	f.must(e.Terminate(f.ctx, "stranded", "no build runs version 9"))
	f.waitStatus(e, "stranded", runtime.StatusTerminated)
	page, err := f.store.ListRuns(f.ctx, storage.ListRunsQuery{Workflow: "ship", Versions: []int{1}})
	f.must(err)
	if len(page.Runs) != 1 || page.Runs[0].ID != "again" {
		f.t.Fatalf("the runs of version 1: %v", page.Runs)
	}
}
