package enginetest

import (
	"context"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/storage"
)

// attrScenarios are the search attributes of runs, end to end: taken from
// the input at the start and set by the workflow, found by ListRuns'
// filters, and kept through crashes, restarts, continue-as-new and
// deploys.
var attrScenarios = []scenario{
	{"attrs/attributes from the input and set by the workflow are what ListRuns' filters find", testAttrsFilter},
	{"attrs/an attribute set before a worker dies is found by the next worker, which does not set it again", testAttrsCrash},
	{"attrs/a continue-as-new and a restart keep the run's attributes; a child has its own, from its input", testAttrsKept},
	{"attrs/a run in flight under a build without attributes is resumed by one that sets them", testAttrsDeploy},
}

// attrOrder is the input of the attribute scenarios' workflows.
type attrOrder struct {
	Customer string    `json:"customer"`
	Total    float64   `json:"total"`
	Placed   time.Time `json:"placed"`
	Round    int       `json:"round"`
}

// attrDecls are the attributes of the scenarios' workflows: three from
// the input, two the workflows set.
var attrDecls = []runtime.AttrDecl{
	{Name: "customer", Type: runtime.AttrString, From: "customer"},
	{Name: "total", Type: runtime.AttrNumber, From: "total"},
	{Name: "placed", Type: runtime.AttrTime, From: "placed"},
	{Name: "stage", Type: runtime.AttrString},
	{Name: "round", Type: runtime.AttrNumber},
}

// renderAttrs renders attributes as name=value, sorted by name.
func renderAttrs(attrs []runtime.Attr) string {
	s := make([]string, len(attrs))
	for i, a := range attrs {
		s[i] = a.String()
	}
	return strings.Join(s, " ")
}

// attrsOf renders run id's attributes.
func (f *fixture) attrsOf(e *runtime.Engine, id string) string {
	f.t.Helper()
	return renderAttrs(f.info(e, id).Attributes)
}

// where lists the IDs of the runs the filters keep, page by page, in q's
// order.
func (f *fixture) where(e *runtime.Engine, q runtime.ListRunsQuery, filters ...string) []string {
	f.t.Helper()
	w, err := e.ParseWhere(f.ctx, filters)
	f.must(err)
	q.Where = w
	var ids []string
	for {
		runs, next, err := e.ListRuns(f.ctx, q)
		f.must(err)
		for _, r := range runs {
			ids = append(ids, r.ID)
		}
		if next == "" {
			return ids
		}
		q.After = next
	}
}

// wantRuns fails the scenario when the filters do not keep exactly want
// (in ID order).
func (f *fixture) wantRuns(e *runtime.Engine, want []string, filters ...string) {
	f.t.Helper()
	if got := f.where(e, runtime.ListRunsQuery{}, filters...); !slices.Equal(got, want) {
		f.t.Errorf("runs where %q: %v, want %v", filters, got, want)
	}
}

func day(s string) time.Time {
	t, err := time.Parse(time.DateOnly, s)
	if err != nil {
		panic(err)
	}
	return t
}

func testAttrsFilter(f *fixture) {
	e := f.engine(config{}, func(e *runtime.Engine) {
		f.must(runtime.Register(e, "orders", func(c *runtime.WorkflowContext, o attrOrder) (string, error) {
			if err := runtime.SetAttributes(c, runtime.StringAttr("stage", "packed")); err != nil {
				return "", err
			}
			if _, err := runtime.WaitForEvent[string](c, "ship", "orders.ship", 0); err != nil {
				return "", err
			}
			return o.Customer, runtime.SetAttributes(c, runtime.StringAttr("stage", "shipped"), runtime.NumberAttr("round", 1))
		}, runtime.WorkflowAttributes(attrDecls...)))
	})
	f.start(e)
	orders := []struct {
		id string
		o  attrOrder
	}{
		{"o-1", attrOrder{Customer: "C-7", Total: 120, Placed: day("2026-11-01")}},
		{"o-2", attrOrder{Customer: "C-70", Total: 80, Placed: day("2026-11-20")}},
		{"o-3", attrOrder{Customer: "D-1", Total: 100.5, Placed: day("2026-11-28")}},
		{"o-4", attrOrder{Customer: "C-700", Total: 0}},
		{"o-5", attrOrder{Customer: "C-7", Total: -3}},
	}
	for _, o := range orders {
		_, err := runtime.Start[attrOrder, string](f.ctx, e, "orders", o.o, runtime.WithID(o.id))
		f.must(err)
	}
	for _, o := range orders {
		f.waitStatus(e, o.id, runtime.StatusWaiting)
	}
	f.must(e.SendEvent(f.ctx, "o-1", "orders.ship", "now"))
	f.waitStatus(e, "o-1", runtime.StatusComplete)
	if got, want := f.attrsOf(e, "o-1"), "customer=C-7 placed=2026-11-01T00:00:00Z round=1 stage=shipped total=120"; got != want {
		f.t.Fatalf("o-1's attributes: %s\nwant %s", got, want)
	}
	if got, want := f.attrsOf(e, "o-4"), "customer=C-700 stage=packed total=0"; got != want {
		f.t.Fatalf("o-4's attributes: %s\nwant %s", got, want)
	}
	f.wantRuns(e, []string{"o-1", "o-5"}, "customer=C-7")
	f.wantRuns(e, []string{"o-1", "o-2", "o-4", "o-5"}, "customer^=C-7")
	f.wantRuns(e, []string{"o-2", "o-4"}, "customer^=C-70")
	f.wantRuns(e, nil, "customer=C")
	f.wantRuns(e, []string{"o-1", "o-3"}, "total>=100")
	f.wantRuns(e, []string{"o-3"}, "total>100", "total<=100.5")
	f.wantRuns(e, []string{"o-4", "o-5"}, "total<=0")
	f.wantRuns(e, []string{"o-5"}, "total<0")
	f.wantRuns(e, []string{"o-4"}, "total=0")
	f.wantRuns(e, []string{"o-1"}, "placed<2026-11-15")
	f.wantRuns(e, []string{"o-2", "o-3"}, "placed>=2026-11-20T00:00:00Z")
	f.wantRuns(e, []string{"o-2"}, "placed>2026-11-01", "placed<2026-11-28")
	f.wantRuns(e, []string{"o-2", "o-3", "o-4", "o-5"}, "stage=packed")
	f.wantRuns(e, []string{"o-1"}, "stage=shipped", "round=1")
	f.wantRuns(e, []string{"o-2", "o-4", "o-5"}, "customer^=C", "total<100", "stage=packed", "total>-5", "total<99")

	// Newest first, two at a time: every run of C-7* once, in creation
	// order then ID, descending.
	q := runtime.ListRunsQuery{Order: storage.OrderCreated, Descending: true, Limit: 2}
	got := f.where(e, q, "customer^=C-7")
	var infos []runtime.RunInfo
	for _, id := range got {
		infos = append(infos, f.info(e, id))
	}
	sorted := slices.IsSortedFunc(infos, func(a, b runtime.RunInfo) int {
		if c := b.CreatedAt.Truncate(time.Microsecond).Compare(a.CreatedAt.Truncate(time.Microsecond)); c != 0 {
			return c
		}
		return strings.Compare(b.ID, a.ID)
	})
	if len(got) != 4 || !sorted {
		f.t.Fatalf("runs of C-7* newest first, two a page: %v; want o-1, o-2, o-4, o-5 by creation, descending", got)
	}
	// The same filters through the store, as tools give them.
	where, err := e.ParseWhere(f.ctx, []string{"total>=100"})
	f.must(err)
	page, err := f.store.ListRuns(f.ctx, storage.ListRunsQuery{Where: where, Workflow: "orders", Status: storage.StatusWaiting})
	f.must(err)
	if len(page.Runs) != 1 || page.Runs[0].ID != "o-3" || renderAttrs(page.Runs[0].Attributes) == "" {
		f.t.Fatalf("waiting orders of 100 or more: %+v", page.Runs)
	}
}

// attrCountingStore counts the search attribute writes of one worker.
type attrCountingStore struct {
	storage.Store
	attrWrites atomic.Int32
}

func (s *attrCountingStore) Checkpoint(ctx context.Context, req storage.CheckpointRequest) (storage.CheckpointResult, error) {
	if req.Checkpoint.Kind == storage.KindAttr {
		s.attrWrites.Add(1)
	}
	return s.Store.Checkpoint(ctx, req)
}

func testAttrsCrash(f *fixture) {
	var worked atomic.Int32
	register := func(e *runtime.Engine) {
		f.must(runtime.Register(e, "crashy", func(c *runtime.WorkflowContext, o attrOrder) (string, error) {
			if err := runtime.SetAttributes(c, runtime.StringAttr("stage", "started")); err != nil {
				return "", err
			}
			if _, err := runtime.Step(c, "work@v1", runtime.StepOptions{}, func(runtime.StepContext) (int, error) {
				return int(worked.Add(1)), nil
			}); err != nil {
				return "", err
			}
			return o.Customer, runtime.SetAttributes(c, runtime.StringAttr("stage", "worked"))
		}, runtime.WorkflowAttributes(attrDecls...)))
	}
	// The first worker dies as its first attribute write lands, before
	// the step runs.
	dying := &dyingStore{Store: f.store, killAfter: func(r storage.CheckpointRequest) bool {
		return r.Checkpoint.Kind == storage.KindAttr
	}}
	a := f.engine(config{lease: 300 * time.Millisecond, store: dying}, register)
	stopA := f.start(a)
	_, err := runtime.Start[attrOrder, string](f.ctx, a, "crashy", attrOrder{Customer: "X-1"}, runtime.WithID("x"))
	f.must(err)
	f.eventually("the first worker died", dying.dead.Load)
	stopA()
	if worked.Load() != 0 {
		f.t.Fatalf("the step ran %d times before the worker died after the attribute write", worked.Load())
	}
	// Written before the worker died: filters find it at once.
	if got := f.where(a, runtime.ListRunsQuery{}, "stage=started"); !slices.Equal(got, []string{"x"}) {
		f.t.Fatalf("runs where stage=started after the crash: %v", got)
	}
	counting := &attrCountingStore{Store: f.store}
	b := f.engine(config{lease: 300 * time.Millisecond, store: counting}, register)
	f.start(b)
	f.waitStatus(b, "x", runtime.StatusComplete)
	if got := f.attrsOf(b, "x"); got != "customer=X-1 stage=worked total=0" {
		f.t.Fatalf("attributes %q, want customer=X-1 stage=worked total=0", got)
	}
	// The second worker wrote the second setting only; the first is
	// recorded once.
	if n := counting.attrWrites.Load(); n != 1 {
		f.t.Fatalf("the second worker wrote %d attribute settings, want 1 (the one after the step)", n)
	}
	var keys []string
	for _, s := range f.steps(b, "x", 0) {
		keys = append(keys, s.Key)
	}
	if want := []string{"attr:stage", "work@v1", "attr:stage#1"}; !slices.Equal(keys, want) {
		f.t.Fatalf("steps %v, want %v", keys, want)
	}
	f.wantRuns(b, []string{"x"}, "customer=X-1", "stage=worked")
	f.wantRuns(b, nil, "stage=started")
}

func testAttrsKept(f *fixture) {
	e := f.engine(config{}, func(e *runtime.Engine) {
		f.must(runtime.Register(e, "cycle", func(c *runtime.WorkflowContext, o attrOrder) (string, error) {
			if o.Round == 0 {
				if err := runtime.SetAttributes(c, runtime.StringAttr("stage", "first")); err != nil {
					return "", err
				}
				// The next execution's input names another customer: the
				// run keeps the attributes it has.
				return "", runtime.ContinueAsNew(c, attrOrder{Customer: "other", Round: 1})
			}
			if err := runtime.SetAttributes(c, runtime.NumberAttr("round", float64(o.Round))); err != nil {
				return "", err
			}
			if _, err := runtime.WaitForEvent[string](c, "go", "cycle.go", 0); err != nil {
				return "", err
			}
			return runtime.CallChild[string](c, "kid", "cycle.kid", attrOrder{Customer: "K-1", Total: 5})
		}, runtime.WorkflowAttributes(attrDecls...)))
		f.must(runtime.Register(e, "cycle.kid", func(c *runtime.WorkflowContext, o attrOrder) (string, error) {
			return o.Customer, runtime.SetAttributes(c, runtime.StringAttr("stage", "kid"))
		}, runtime.WorkflowAttributes(attrDecls...)))
	})
	f.start(e)
	_, err := runtime.Start[attrOrder, string](f.ctx, e, "cycle", attrOrder{Customer: "C-1", Total: 10}, runtime.WithID("cy"))
	f.must(err)
	info := f.waitStatus(e, "cy", runtime.StatusWaiting)
	const want = "customer=C-1 round=1 stage=first total=10"
	if got := renderAttrs(info.Attributes); info.Execution != 2 || got != want {
		f.t.Fatalf("after a continue-as-new: execution %d, attributes %q; want execution 2, %q", info.Execution, got, want)
	}
	f.must(e.Restart(f.ctx, "cy"))
	f.eventually("the restarted run waits", func() bool {
		info = f.info(e, "cy")
		return info.Execution == 3 && info.Status == runtime.StatusWaiting
	})
	if got := renderAttrs(info.Attributes); got != want {
		f.t.Fatalf("after a restart: attributes %q, want %q", got, want)
	}
	f.wantRuns(e, []string{"cy"}, "customer=C-1", "stage=first", "round=1")
	f.wantRuns(e, nil, "customer=other")
	f.must(e.SendEvent(f.ctx, "cy", "cycle.go", "go"))
	f.waitStatus(e, "cy", runtime.StatusComplete)
	kid := f.waitStatus(e, "cy/kid", runtime.StatusComplete)
	if got := renderAttrs(kid.Attributes); got != "customer=K-1 stage=kid total=5" {
		f.t.Fatalf("the child's attributes %q, want its own: customer=K-1 stage=kid total=5", got)
	}
	f.wantRuns(e, []string{"cy/kid"}, "customer=K-1")
	f.wantRuns(e, []string{"cy", "cy/kid"}, "total>=5")
	if got := f.where(e, runtime.ListRunsQuery{TopLevel: true}, "total>=5"); !slices.Equal(got, []string{"cy"}) {
		f.t.Fatalf("top-level runs where total>=5: %v, want [cy]", got)
	}
}

func testAttrsDeploy(f *fixture) {
	build := func(attrs bool) func(e *runtime.Engine) {
		return func(e *runtime.Engine) {
			var opts []runtime.RegisterOption
			if attrs {
				opts = append(opts, runtime.WorkflowAttributes(attrDecls...))
			}
			f.must(runtime.Register(e, "ship", func(c *runtime.WorkflowContext, o attrOrder) (string, error) {
				if _, err := runtime.Step(c, "pick@v1", runtime.StepOptions{}, func(runtime.StepContext) (int, error) { return 1, nil }); err != nil {
					return "", err
				}
				if _, err := runtime.WaitForEvent[string](c, "go", "ship.go", 0); err != nil {
					return "", err
				}
				if attrs {
					// Added by the second build, after every call runs in
					// flight recorded.
					if err := runtime.SetAttributes(c, runtime.StringAttr("stage", "shipped")); err != nil {
						return "", err
					}
				}
				return o.Customer, nil
			}, opts...))
		}
	}
	old := f.engine(config{}, build(false))
	stopOld := f.start(old)
	_, err := runtime.Start[attrOrder, string](f.ctx, old, "ship", attrOrder{Customer: "A-1"}, runtime.WithID("before"))
	f.must(err)
	if info := f.waitStatus(old, "before", runtime.StatusWaiting); len(info.Attributes) != 0 {
		f.t.Fatalf("a run of the build without attributes has %s", renderAttrs(info.Attributes))
	}
	stopOld()
	next := f.engine(config{}, build(true))
	f.start(next)
	_, err = runtime.Start[attrOrder, string](f.ctx, next, "ship", attrOrder{Customer: "A-2"}, runtime.WithID("after"))
	f.must(err)
	f.waitStatus(next, "after", runtime.StatusWaiting)
	for _, id := range []string{"before", "after"} {
		f.must(next.SendEvent(f.ctx, id, "ship.go", "go"))
	}
	for _, id := range []string{"before", "after"} {
		if info := f.waitStatus(next, id, runtime.StatusComplete); info.Hold != nil {
			f.t.Fatalf("run %s was held: %+v", id, info.Hold)
		}
	}
	// The run in flight took no attributes from its input (its start
	// declared none), and has the one the new build set.
	if got := f.attrsOf(next, "before"); got != "stage=shipped" {
		f.t.Fatalf("the run in flight: attributes %q, want stage=shipped", got)
	}
	if got := f.attrsOf(next, "after"); got != "customer=A-2 stage=shipped total=0" {
		f.t.Fatalf("the run of the new build: attributes %q, want customer=A-2 stage=shipped total=0", got)
	}
	f.wantRuns(next, []string{"after", "before"}, "stage=shipped")
	f.wantRuns(next, []string{"after"}, "customer^=A-")
}
