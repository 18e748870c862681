package enginetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/storage"
)

var bulkScenarios = []scenario{
	{"bulk/a restart-failed whose engine dies mid-way is taken over and restarts each run once, from its failed step", testBulkDies},
	{"bulk/a restart-failed whose engine stops mid-way is taken over and restarts each run once, from its failed step", testBulkStops},
	{"bulk/terminate, pause and resume act on the runs their filter matches", testBulkByFilter},
	{"bulk/a filter on search attributes selects the runs acted on", testBulkByAttributes},
}

// bulkApp is the application the bulk scenarios act on: bulk.fail runs
// step a, then step b, which fails for good until fixed, then step c;
// bulk.wait waits for an event on topic "go". ran counts each step's runs
// by run and key.
type bulkApp struct {
	f     *fixture
	fixed atomic.Bool
	mu    sync.Mutex
	ran   map[string]int
}

func newBulkApp(f *fixture) *bulkApp { return &bulkApp{f: f, ran: map[string]int{}} }

func (a *bulkApp) step(c *runtime.WorkflowContext, key string, fail bool) error {
	return runtime.Do(c, key, runtime.StepOptions{}, func(sc runtime.StepContext) error {
		a.mu.Lock()
		a.ran[sc.RunID()+"/"+key]++
		a.mu.Unlock()
		if fail {
			return runtime.Permanent(errors.New("the warehouse is closed"))
		}
		return nil
	})
}

func (a *bulkApp) register(e *runtime.Engine) {
	a.f.must(runtime.Register(e, "bulk.fail", func(c *runtime.WorkflowContext, _ int) (string, error) {
		if err := a.step(c, "a@v1", false); err != nil {
			return "", err
		}
		if err := a.step(c, "b@v1", !a.fixed.Load()); err != nil {
			return "", err
		}
		return "shipped", a.step(c, "c@v1", false)
	}))
	a.f.must(runtime.Register(e, "bulk.wait", func(c *runtime.WorkflowContext, _ int) (string, error) {
		return runtime.WaitForEvent[string](c, "wait", "go", 0)
	}))
}

func (a *bulkApp) runs(id, key string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.ran[id+"/"+key]
}

// start starts n runs of workflow, IDs prefix-00 and on, and waits until
// each is want.
func (a *bulkApp) start(e *runtime.Engine, workflow, prefix string, n int, want runtime.RunStatus) []string {
	f := a.f
	f.t.Helper()
	ids := make([]string, n)
	items := make([]runtime.BatchItem[int], n)
	for i := range n {
		ids[i] = fmt.Sprintf("%s-%02d", prefix, i)
		items[i] = runtime.BatchItem[int]{ID: ids[i], Input: i}
	}
	_, err := runtime.StartBatch[int, string](f.ctx, e, workflow, items)
	f.must(err)
	for _, id := range ids {
		f.waitStatus(e, id, want)
	}
	return ids
}

// awaitBulk waits for bulk action id to end and returns it.
func (f *fixture) awaitBulk(e *runtime.Engine, id string) runtime.BulkInfo {
	f.t.Helper()
	var b runtime.BulkInfo
	f.eventually("bulk action "+id+" ends", func() bool {
		var err error
		b, err = e.GetBulk(f.ctx, id)
		f.must(err)
		return b.Status.Finished()
	})
	return b
}

// bulkEngine is an engine that carries out bulk actions and nothing else,
// as the operator command's is.
func (f *fixture) bulkEngine(c config) *runtime.Engine {
	return f.engine(c, func(e *runtime.Engine) { f.must(runtime.RegisterBulk(e)) })
}

// restartKiller is the view of the store of an engine whose process dies
// once it has restarted `after` runs: the last restart is stored, and the
// process dies before it hears back. Its reads fail from then on too.
type restartKiller struct {
	*dyingStore
	after    int32
	restarts atomic.Int32
}

func (k *restartKiller) Restart(ctx context.Context, req storage.RestartRequest) error {
	if err := k.check(); err != nil {
		return err
	}
	err := k.Store.Restart(ctx, req)
	if err == nil && k.restarts.Add(1) >= k.after {
		k.dead.Store(true)
		return errDead
	}
	return err
}

func (k *restartKiller) GetRun(ctx context.Context, id string) (storage.RunRecord, error) {
	if err := k.check(); err != nil {
		return storage.RunRecord{}, err
	}
	return k.Store.GetRun(ctx, id)
}

func (k *restartKiller) ListRuns(ctx context.Context, q storage.ListRunsQuery) (storage.RunPage, error) {
	if err := k.check(); err != nil {
		return storage.RunPage{}, err
	}
	return k.Store.ListRuns(ctx, q)
}

func (k *restartKiller) ListSteps(ctx context.Context, q storage.StepsQuery) (storage.History, error) {
	if err := k.check(); err != nil {
		return storage.History{}, err
	}
	return k.Store.ListSteps(ctx, q)
}

// restartCounter counts the restarts an engine made.
type restartCounter struct {
	storage.Store
	n atomic.Int32
}

func (r *restartCounter) Restart(ctx context.Context, req storage.RestartRequest) error {
	err := r.Store.Restart(ctx, req)
	if err == nil {
		r.n.Add(1)
	}
	return err
}

// bulkFailed starts n runs of bulk.fail on an application engine that
// runs throughout, waits until they errored at step b, and fixes b.
func bulkFailed(f *fixture, n int) (*bulkApp, *runtime.Engine, []string) {
	app := newBulkApp(f)
	e := f.engine(config{}, app.register)
	f.start(e)
	ids := app.start(e, "bulk.fail", "f", n, runtime.StatusErrored)
	app.fixed.Store(true)
	return app, e, ids
}

// wantRestartedOnce checks the end of a restart-failed of ids: each run
// complete in its second execution, step a not run again, b and c run in
// it; and the bulk action's counts add up.
func wantRestartedOnce(f *fixture, app *bulkApp, e *runtime.Engine, ids []string, b runtime.BulkInfo) {
	f.t.Helper()
	p := b.Progress
	if b.Status != runtime.StatusComplete || !p.Done || p.Matched != len(ids) || p.Acted+p.Skipped != len(ids) || p.Failed != 0 || p.Acted == 0 {
		f.t.Fatalf("bulk action: %s %+v %v", b.Status, p, b.Err)
	}
	for _, id := range ids {
		info := f.waitStatus(e, id, runtime.StatusComplete)
		if info.Execution != 2 {
			f.t.Fatalf("%s is at execution %d, want 2: restarted once", id, info.Execution)
		}
		if n := app.runs(id, "a@v1"); n != 1 {
			f.t.Fatalf("%s: step a ran %d times, want once: the restart is from step b", id, n)
		}
		if app.runs(id, "b@v1") < 2 || app.runs(id, "c@v1") < 1 {
			f.t.Fatalf("%s: step b ran %d times, c %d", id, app.runs(id, "b@v1"), app.runs(id, "c@v1"))
		}
		steps := f.steps(e, id, 2)
		if s := findStep(steps, "a@v1"); s == nil || s.ForkedFrom != 1 {
			f.t.Fatalf("%s: step a in execution 2: %+v", id, s)
		}
	}
}

// testBulkDies: the engine carrying a bulk restart-failed dies right
// after a restart landed, mid-page; another engine takes the bulk action
// over once its lease expires, does the page again from its checkpointed
// listing, and restarts no run twice.
func testBulkDies(f *fixture) {
	const n = 30
	app, e, ids := bulkFailed(f, n)
	killer := &restartKiller{dyingStore: &dyingStore{Store: f.store}, after: 14}
	a := f.bulkEngine(config{lease: 300 * time.Millisecond, store: killer})
	f.start(a)
	id, err := a.StartBulk(f.ctx, runtime.BulkRequest{Action: runtime.BulkRestartFailed, Filter: runtime.ListRunsQuery{Workflow: "bulk.fail", Status: runtime.StatusErrored}, Rate: 10})
	f.must(err)
	f.eventually("the engine carrying the bulk action died", killer.dead.Load)
	if b, err := e.GetBulk(f.ctx, id); err != nil || b.Status.Finished() {
		f.t.Fatalf("the bulk action ended with its engine: %+v %v", b, err)
	}
	counted := &restartCounter{Store: f.store}
	b := f.bulkEngine(config{lease: 300 * time.Millisecond, store: counted})
	f.start(b)
	info := f.awaitBulk(e, id)
	wantRestartedOnce(f, app, e, ids, info)
	if got := int(killer.restarts.Load() + counted.n.Load()); got != n {
		f.t.Fatalf("%d restarts stored, want %d: one per run", got, n)
	}
	// The page the first engine died in was done again: the run whose
	// restart landed as it died was found restarted, and skipped.
	if info.Progress.Skipped < 1 || info.Progress.Acted < int(counted.n.Load()) {
		f.t.Fatalf("the bulk action counts %d acted and %d skipped; the engine that took it over restarted %d", info.Progress.Acted, info.Progress.Skipped, counted.n.Load())
	}
}

// testBulkStops: the engine carrying a bulk restart-failed is stopped (a
// deploy) after some runs were restarted; another engine goes on with it
// and restarts no run twice.
func testBulkStops(f *fixture) {
	const n = 30
	app, e, ids := bulkFailed(f, n)
	first := &restartCounter{Store: f.store}
	a := f.bulkEngine(config{store: first})
	stopA := f.start(a)
	id, err := a.StartBulk(f.ctx, runtime.BulkRequest{Action: runtime.BulkRestartFailed, Filter: runtime.ListRunsQuery{Workflow: "bulk.fail"}, Rate: 10})
	f.must(err)
	f.eventually("some runs were restarted", func() bool { return first.n.Load() >= 10 })
	stopA()
	if b, err := e.GetBulk(f.ctx, id); err != nil || b.Status.Finished() {
		f.t.Fatalf("the bulk action ended with its engine: %+v %v", b, err)
	}
	second := &restartCounter{Store: f.store}
	b := f.bulkEngine(config{store: second})
	f.start(b)
	info := f.awaitBulk(e, id)
	wantRestartedOnce(f, app, e, ids, info)
	if got := int(first.n.Load() + second.n.Load()); got != n {
		f.t.Fatalf("%d restarts stored (%d, then %d), want %d: one per run", got, first.n.Load(), second.n.Load(), n)
	}
}

// testBulkByFilter: pause by ID prefix, resume by status, terminate by
// workflow and status; runs outside each filter are left alone.
func testBulkByFilter(f *fixture) {
	app := newBulkApp(f)
	e := f.engine(config{}, func(e *runtime.Engine) {
		app.register(e)
		f.must(runtime.RegisterBulk(e))
	})
	f.start(e)
	p := app.start(e, "bulk.wait", "p", 6, runtime.StatusWaiting)
	q := app.start(e, "bulk.wait", "q", 3, runtime.StatusWaiting)
	do := func(req runtime.BulkRequest) runtime.BulkProgress {
		f.t.Helper()
		req.Rate = runtime.BulkRateUnlimited
		id, err := e.StartBulk(f.ctx, req)
		f.must(err)
		b := f.awaitBulk(e, id)
		if b.Status != runtime.StatusComplete || !b.Progress.Done {
			f.t.Fatalf("bulk %s: %s %+v %v", req.Action, b.Status, b.Progress, b.Err)
		}
		return b.Progress
	}
	if got := do(runtime.BulkRequest{Action: runtime.BulkPause, Filter: runtime.ListRunsQuery{IDPrefix: "p-"}}); got.Matched != 6 || got.Acted != 6 {
		f.t.Fatalf("pause: %+v", got)
	}
	for _, id := range p {
		f.waitStatus(e, id, runtime.StatusPaused)
	}
	for _, id := range q {
		if s := f.info(e, id).Status; s != runtime.StatusWaiting {
			f.t.Fatalf("%s outside the filter is %s", id, s)
		}
	}
	// Resume those paused, of both prefixes: q's are skipped.
	if got := do(runtime.BulkRequest{Action: runtime.BulkResume, Filter: runtime.ListRunsQuery{Workflow: "bulk.wait"}}); got.Matched != 9 || got.Acted != 6 || got.Skipped != 3 {
		f.t.Fatalf("resume: %+v", got)
	}
	for _, id := range p {
		f.waitStatus(e, id, runtime.StatusWaiting)
	}
	f.must(e.SendEvent(f.ctx, "q-00", "go", "now"))
	f.waitStatus(e, "q-00", runtime.StatusComplete)
	if got := do(runtime.BulkRequest{Action: runtime.BulkTerminate, Filter: runtime.ListRunsQuery{Workflow: "bulk.wait", Status: runtime.StatusWaiting}, Reason: "closing down"}); got.Matched != 8 || got.Acted != 8 {
		f.t.Fatalf("terminate: %+v", got)
	}
	for _, id := range append(p, q[1:]...) {
		info := f.waitStatus(e, id, runtime.StatusTerminated)
		if info.Err == nil || !errors.Is(info.Err, runtime.ErrTerminated) {
			f.t.Fatalf("%s: %v", id, info.Err)
		}
	}
	if s := f.info(e, "q-00").Status; s != runtime.StatusComplete {
		f.t.Fatalf("q-00, ended before, is %s", s)
	}
}

// testBulkByAttributes: a pause whose filter is on search attributes
// (a number range and a string prefix) pauses the runs that have them.
func testBulkByAttributes(f *fixture) {
	app := newBulkApp(f)
	e := f.engine(config{}, func(e *runtime.Engine) {
		app.register(e)
		f.must(runtime.RegisterBulk(e))
	})
	var runs []storage.NewRun
	for i := range 8 {
		attrs := []storage.Attr{storage.NumberAttr("total", float64(i*50)), storage.StringAttr("customer", fmt.Sprintf("C-%d", i%2))}
		if i == 7 {
			attrs = nil
		}
		runs = append(runs, storage.NewRun{ID: fmt.Sprintf("a-%02d", i), Workflow: "bulk.wait", Input: []byte("0"), Version: 1, Queue: runtime.DefaultQueue, Attributes: attrs})
	}
	_, err := f.store.CreateRuns(f.ctx, runs)
	f.must(err)
	f.start(e)
	for _, r := range runs {
		f.waitStatus(e, r.ID, runtime.StatusWaiting)
	}
	filter := runtime.ListRunsQuery{Where: []runtime.AttrFilter{
		{Op: storage.OpGe, Value: storage.NumberAttr("total", 100)},
		{Op: storage.OpPrefix, Value: storage.StringAttr("customer", "C-1")},
	}}
	n, more, err := e.CountMatching(f.ctx, filter, 100)
	f.must(err)
	if n != 2 || more {
		f.t.Fatalf("CountMatching: %d %v, want a-03 and a-05", n, more)
	}
	id, err := e.StartBulk(f.ctx, runtime.BulkRequest{Action: runtime.BulkPause, Filter: filter, Rate: runtime.BulkRateUnlimited})
	f.must(err)
	if b := f.awaitBulk(e, id); b.Status != runtime.StatusComplete || b.Progress.Matched != 2 || b.Progress.Acted != 2 {
		f.t.Fatalf("pause by attributes: %s %+v %v", b.Status, b.Progress, b.Err)
	}
	for _, r := range runs {
		want := runtime.StatusWaiting
		if r.ID == "a-03" || r.ID == "a-05" {
			want = runtime.StatusPaused
		}
		f.waitStatus(e, r.ID, want)
	}
}
