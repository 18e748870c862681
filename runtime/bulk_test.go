package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/storage"
)

// bulkWorkflows registers the workflows the bulk tests act on, and the
// bulk action's own:
//
//   - bulk.wait waits for an event on topic "go";
//   - bulk.fail runs step a, then step b, which fails for good until
//     fixed is set, then step c; ran counts each step's runs by key;
//   - bulk.own ends errored by its own error, after a step that succeeds.
type bulkWorkflows struct {
	fixed atomic.Bool
	mu    sync.Mutex
	ran   map[string]int
}

func (w *bulkWorkflows) register(t *testing.T) func(e *runtime.Engine) {
	w.ran = map[string]int{}
	step := func(c *runtime.WorkflowContext, key string, fail bool) error {
		return runtime.Do(c, key, runtime.StepOptions{}, func(sc runtime.StepContext) error {
			w.mu.Lock()
			w.ran[sc.RunID()+"/"+key]++
			w.mu.Unlock()
			if fail {
				return runtime.Permanent(errors.New("the warehouse is closed"))
			}
			return nil
		})
	}
	return func(e *runtime.Engine) {
		must(t, runtime.RegisterBulk(e))
		must(t, runtime.Register(e, "bulk.wait", func(c *runtime.WorkflowContext, _ int) (string, error) {
			return runtime.WaitForEvent[string](c, "wait", "go", 0)
		}))
		must(t, runtime.Register(e, "bulk.fail", func(c *runtime.WorkflowContext, _ int) (string, error) {
			if err := step(c, "a@v1", false); err != nil {
				return "", err
			}
			if err := step(c, "b@v1", !w.fixed.Load()); err != nil {
				return "", err
			}
			return "shipped", step(c, "c@v1", false)
		}))
		must(t, runtime.Register(e, "bulk.own", func(c *runtime.WorkflowContext, _ int) (string, error) {
			if err := step(c, "a@v1", false); err != nil {
				return "", err
			}
			return "", errors.New("nothing to ship")
		}))
	}
}

func (w *bulkWorkflows) runs(runID, key string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ran[runID+"/"+key]
}

// startN starts n runs of workflow with IDs prefix-0 .. prefix-(n-1).
func startN(t *testing.T, e *runtime.Engine, workflow, prefix string, n int) []string {
	t.Helper()
	ids := make([]string, n)
	items := make([]runtime.BatchItem[int], n)
	for i := range n {
		ids[i] = fmt.Sprintf("%s-%d", prefix, i)
		items[i] = runtime.BatchItem[int]{ID: ids[i], Input: i}
	}
	_, err := runtime.StartBatch[int, string](waitCtx(t), e, workflow, items)
	must(t, err)
	return ids
}

func waitAll(t *testing.T, e *runtime.Engine, ids []string, want runtime.RunStatus) {
	t.Helper()
	for _, id := range ids {
		eventually(t, id+" is "+string(want), func() bool { return status(t, e, id) == want })
	}
}

// awaitBulk waits for a bulk action to end and returns it.
func awaitBulk(t *testing.T, e *runtime.Engine, id string) runtime.BulkInfo {
	t.Helper()
	var b runtime.BulkInfo
	eventually(t, "bulk action "+id+" ends", func() bool {
		var err error
		b, err = e.GetBulk(context.Background(), id)
		must(t, err)
		return b.Status.Finished()
	})
	return b
}

// A bulk request is checked before anything is written: an unknown action
// (with the nearest named), a reason for an action that records none, a
// filter on bulk actions themselves, and a filter the stores refuse.
func TestBulkRequestRefused(t *testing.T) {
	t.Parallel()
	f := setup(t)
	w := &bulkWorkflows{}
	e, _ := f.engine(5*time.Second, w.register(t))
	for _, c := range []struct {
		req  runtime.BulkRequest
		want string
	}{
		{runtime.BulkRequest{Action: "restrat"}, `unknown action "restrat" (want one of terminate, cancel, pause, resume, restart, restart-failed); did you mean "restart"?`},
		{runtime.BulkRequest{}, "no action"},
		{runtime.BulkRequest{Action: runtime.BulkPause, Reason: "why"}, "a reason is recorded only by terminate and cancel"},
		{runtime.BulkRequest{Action: runtime.BulkTerminate, Reason: "bad\x1b[2J"}, "control character"},
		{runtime.BulkRequest{Action: runtime.BulkTerminate, Filter: runtime.ListRunsQuery{Workflow: runtime.BulkWorkflow}}, "bulk actions do not act on"},
		{runtime.BulkRequest{Action: runtime.BulkTerminate, Filter: runtime.ListRunsQuery{Status: "sleeping"}}, `unknown run status "sleeping"`},
		{runtime.BulkRequest{Action: runtime.BulkRestart, Filter: runtime.ListRunsQuery{Where: []runtime.AttrFilter{{Op: storage.OpPrefix, Value: runtime.NumberAttr("total", 3)}}}}, "^= (prefix) compares only strings"},
		{runtime.BulkRequest{Action: runtime.BulkRestart, Rate: nan()}, "not a number of runs per second"},
		{runtime.BulkRequest{Action: runtime.BulkRestart, ID: "a/b"}, "'/'"},
	} {
		_, err := e.StartBulk(waitCtx(t), c.req)
		if !errors.Is(err, runtime.ErrInvalidArgument) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("StartBulk(%+v): %v, want ErrInvalidArgument saying %q", c.req, err, c.want)
		}
	}
	if bulks, err := e.ListBulks(waitCtx(t), 0); err != nil || len(bulks) != 0 {
		t.Fatalf("refused requests left bulk actions: %v %v", bulks, err)
	}
}

func nan() float64 { var z float64; return z / z }

// Terminate by filter: the unfinished runs of one workflow are terminated
// with the reason, its finished one is skipped, the other workflow's runs
// are left alone, and the bulk action reports it all.
func TestBulkTerminateByFilter(t *testing.T) {
	t.Parallel()
	f := setup(t)
	w := &bulkWorkflows{}
	e, _ := f.engine(5*time.Second, w.register(t))
	start(t, e)
	waiting := startN(t, e, "bulk.wait", "w", 5)
	others := startN(t, e, "bulk.own", "o", 2)
	waitAll(t, e, waiting, runtime.StatusWaiting)
	waitAll(t, e, others, runtime.StatusErrored)
	must(t, e.SendEvent(waitCtx(t), "w-4", "go", "now"))
	waitAll(t, e, waiting[4:], runtime.StatusComplete)

	id, err := e.StartBulk(waitCtx(t), runtime.BulkRequest{Action: runtime.BulkTerminate, Filter: runtime.ListRunsQuery{Workflow: "bulk.wait"}, Reason: "duplicate orders", Rate: runtime.BulkRateUnlimited})
	must(t, err)
	b := awaitBulk(t, e, id)
	if b.Status != runtime.StatusComplete || !b.Progress.Done || b.Progress.Matched != 5 || b.Progress.Acted != 4 || b.Progress.Skipped != 1 || b.Progress.Failed != 0 {
		t.Fatalf("bulk action: %+v", b)
	}
	if b.Request.Action != runtime.BulkTerminate || b.Request.Filter.Workflow != "bulk.wait" || b.Request.Reason != "duplicate orders" || b.Request.ID != id {
		t.Fatalf("request as recorded: %+v", b.Request)
	}
	for _, id := range waiting[:4] {
		info, err := e.Get(waitCtx(t), id)
		must(t, err)
		if info.Status != runtime.StatusTerminated || !strings.Contains(info.Err.Error(), "duplicate orders") {
			t.Fatalf("%s: %s %v", id, info.Status, info.Err)
		}
	}
	for _, id := range others {
		if s := status(t, e, id); s != runtime.StatusErrored {
			t.Fatalf("%s of another workflow is %s", id, s)
		}
	}
	if s := status(t, e, id); s != runtime.StatusComplete {
		t.Fatalf("the bulk action acted on itself: %s", s)
	}
}

// Pause then resume by filter (an ID prefix): the runs are paused, the
// paused ones skipped by a second pause, and all resumed; they go on.
func TestBulkPauseResume(t *testing.T) {
	t.Parallel()
	f := setup(t)
	w := &bulkWorkflows{}
	e, _ := f.engine(5*time.Second, w.register(t))
	start(t, e)
	ids := startN(t, e, "bulk.wait", "p", 4)
	startN(t, e, "bulk.wait", "q", 1)
	waitAll(t, e, ids, runtime.StatusWaiting)
	pause := runtime.BulkRequest{Action: runtime.BulkPause, Filter: runtime.ListRunsQuery{IDPrefix: "p-"}, Rate: 1000}
	id, err := e.StartBulk(waitCtx(t), pause)
	must(t, err)
	if b := awaitBulk(t, e, id); b.Progress.Acted != 4 || b.Progress.Matched != 4 {
		t.Fatalf("pause: %+v", b.Progress)
	}
	waitAll(t, e, ids, runtime.StatusPaused)
	if s := status(t, e, "q-0"); s != runtime.StatusWaiting {
		t.Fatalf("q-0 outside the filter is %s", s)
	}
	again, err := e.StartBulk(waitCtx(t), pause)
	must(t, err)
	if b := awaitBulk(t, e, again); b.Progress.Acted != 0 || b.Progress.Skipped != 4 {
		t.Fatalf("second pause: %+v", b.Progress)
	}
	id, err = e.StartBulk(waitCtx(t), runtime.BulkRequest{Action: runtime.BulkResume, Filter: runtime.ListRunsQuery{IDPrefix: "p-"}, Rate: 1000})
	must(t, err)
	if b := awaitBulk(t, e, id); b.Progress.Acted != 4 {
		t.Fatalf("resume: %+v", b.Progress)
	}
	waitAll(t, e, ids, runtime.StatusWaiting)
	if n, err := e.Emit(waitCtx(t), "go", "now"); err != nil || n != 5 {
		t.Fatalf("emit after resume reached %d (%v), want 5", n, err)
	}
	waitAll(t, e, ids, runtime.StatusComplete)

	bulks, err := e.ListBulks(waitCtx(t), 2)
	must(t, err)
	if len(bulks) != 2 || bulks[0].ID != id || bulks[1].ID != again || bulks[0].Request.Action != runtime.BulkResume {
		t.Fatalf("ListBulks, newest first: %+v", bulks)
	}
}

// Restart-failed restarts each errored run from its failed step: the steps
// before it are not run again, the run completes in its second execution.
// A run its workflow failed (no failed step) is skipped, saying why.
func TestBulkRestartFailed(t *testing.T) {
	t.Parallel()
	f := setup(t)
	w := &bulkWorkflows{}
	e, _ := f.engine(5*time.Second, w.register(t))
	start(t, e)
	ids := startN(t, e, "bulk.fail", "f", 12)
	own := startN(t, e, "bulk.own", "f-own", 1)
	waitAll(t, e, append(ids, own...), runtime.StatusErrored)
	w.fixed.Store(true)

	id, err := e.StartBulk(waitCtx(t), runtime.BulkRequest{Action: runtime.BulkRestartFailed, Filter: runtime.ListRunsQuery{IDPrefix: "f-", Status: runtime.StatusErrored}, Rate: 500})
	must(t, err)
	b := awaitBulk(t, e, id)
	if b.Status != runtime.StatusComplete || b.Progress.Matched != 13 || b.Progress.Acted != 12 || b.Progress.Skipped != 1 {
		t.Fatalf("bulk action: %+v", b)
	}
	if len(b.Progress.Errors) != 1 || !strings.Contains(b.Progress.Errors[0], "f-own-0: skipped: no failed step in execution 1") {
		t.Fatalf("errors: %q", b.Progress.Errors)
	}
	waitAll(t, e, ids, runtime.StatusComplete)
	for _, id := range ids {
		info, err := e.Get(waitCtx(t), id)
		must(t, err)
		if info.Execution != 2 || w.runs(id, "a@v1") != 1 || w.runs(id, "b@v1") != 2 || w.runs(id, "c@v1") != 1 {
			t.Fatalf("%s: execution %d, a ran %d, b %d, c %d; want 2, 1, 2, 1", id, info.Execution, w.runs(id, "a@v1"), w.runs(id, "b@v1"), w.runs(id, "c@v1"))
		}
	}
	if info, err := e.Get(waitCtx(t), "f-own-0"); err != nil || info.Execution != 1 {
		t.Fatalf("f-own-0: %+v %v", info, err)
	}
}

// failOnce fails the first write of a checkpoint with the key, after the
// store took it: the engine learns nothing of it, as when its process
// dies right then, and the step's run is taken up again.
type failOnce struct {
	storage.Store
	key    string
	failed atomic.Bool
}

func (s *failOnce) Checkpoint(ctx context.Context, req storage.CheckpointRequest) (storage.CheckpointResult, error) {
	if req.Checkpoint.Key == s.key && !s.failed.Load() {
		s.failed.Store(true)
		return storage.CheckpointResult{}, fmt.Errorf("%w: the connection dropped", storage.ErrLeaseLost)
	}
	return s.Store.Checkpoint(ctx, req)
}

// A page whose step runs again (its checkpoint was never written: the
// engine lost its lease right after acting on the page) restarts no run
// twice: the restarts are conditional on the execution the checkpointed
// listing saw.
func TestBulkRestartNotTwice(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.store = &failOnce{Store: f.store, key: "page@v1#0"}
	w := &bulkWorkflows{}
	e, _ := f.engine(300*time.Millisecond, w.register(t))
	start(t, e)
	ids := startN(t, e, "bulk.fail", "r", 6)
	waitAll(t, e, ids, runtime.StatusErrored)
	w.fixed.Store(true)
	id, err := e.StartBulk(waitCtx(t), runtime.BulkRequest{Action: runtime.BulkRestart, Filter: runtime.ListRunsQuery{Workflow: "bulk.fail"}, Rate: runtime.BulkRateUnlimited})
	must(t, err)
	b := awaitBulk(t, e, id)
	if !f.store.(*failOnce).failed.Load() {
		t.Fatal("the page's checkpoint was never refused")
	}
	if b.Status != runtime.StatusComplete || b.Progress.Matched != 6 || b.Progress.Acted+b.Progress.Skipped != 6 {
		t.Fatalf("bulk action: %+v", b)
	}
	waitAll(t, e, ids, runtime.StatusComplete)
	for _, id := range ids {
		info, err := e.Get(waitCtx(t), id)
		must(t, err)
		if info.Execution != 2 || w.runs(id, "a@v1") != 2 {
			t.Fatalf("%s: execution %d, step a ran %d times; want one restart (2, 2)", id, info.Execution, w.runs(id, "a@v1"))
		}
	}
}

// CountMatching counts what a bulk action would act on, bulk actions left
// out, up to its bound.
func TestCountMatching(t *testing.T) {
	t.Parallel()
	f := setup(t)
	w := &bulkWorkflows{}
	e, _ := f.engine(5*time.Second, w.register(t))
	startN(t, e, "bulk.wait", "c", 7)
	startN(t, e, "bulk.own", "d", 3)
	_, err := e.StartBulk(waitCtx(t), runtime.BulkRequest{Action: runtime.BulkPause, Filter: runtime.ListRunsQuery{Workflow: "bulk.own"}})
	must(t, err)
	for _, c := range []struct {
		q    runtime.ListRunsQuery
		upTo int
		n    int
		more bool
	}{
		{runtime.ListRunsQuery{}, 100, 10, false},
		{runtime.ListRunsQuery{}, 10, 10, false},
		{runtime.ListRunsQuery{}, 9, 9, true},
		{runtime.ListRunsQuery{Workflow: "bulk.wait", Limit: 2, After: "c-3"}, 100, 7, false},
		{runtime.ListRunsQuery{IDPrefix: "d-"}, 1, 1, true},
	} {
		n, more, err := e.CountMatching(waitCtx(t), c.q, c.upTo)
		if err != nil || n != c.n || more != c.more {
			t.Errorf("CountMatching(%+v, %d) = %d %v %v, want %d %v", c.q, c.upTo, n, more, err, c.n, c.more)
		}
	}
	if _, _, err := e.CountMatching(waitCtx(t), runtime.ListRunsQuery{Status: "nope"}, 10); !errors.Is(err, runtime.ErrInvalidArgument) {
		t.Fatalf("bad status: %v", err)
	}
}

// GetBulk of a run that is not a bulk action, or of none, says so.
func TestGetBulkOfOtherRun(t *testing.T) {
	t.Parallel()
	f := setup(t)
	w := &bulkWorkflows{}
	e, _ := f.engine(5*time.Second, w.register(t))
	startN(t, e, "bulk.wait", "g", 1)
	if _, err := e.GetBulk(waitCtx(t), "g-0"); !errors.Is(err, runtime.ErrInvalidArgument) || !strings.Contains(err.Error(), "not a bulk action") {
		t.Fatalf("GetBulk of a run: %v", err)
	}
	if _, err := e.GetBulk(waitCtx(t), "none"); !errors.Is(err, runtime.ErrRunNotFound) {
		t.Fatalf("GetBulk of nothing: %v", err)
	}
	if _, err := e.StartBulk(waitCtx(t), runtime.BulkRequest{Action: runtime.BulkPause, ID: "g-0"}); !errors.Is(err, runtime.ErrInvalidArgument) {
		t.Fatalf("StartBulk on a run's ID: %v", err)
	}
}
