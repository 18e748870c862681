package enginetest

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/storage"
)

// needs names the scenarios that need a feature a store may lack (see
// storage.Partial). On a store that lacks one, that feature's scenario of
// featureScenarios runs instead of them: what an engine does there is
// checked, not skipped.
var needs = map[string]storage.Feature{
	"start/a singleton key answers starts with its unfinished holder":                                    storage.FeatureStartKeys,
	"start/starts within a debounce window run once with the last input":                                 storage.FeatureStartKeys,
	"eager/a run is not started eagerly on a limited queue, and the limit holds":                         storage.FeatureQueueLimits,
	"queue/a concurrency limit of 3 holds across four engines, one of which dies, measured by the steps": storage.FeatureQueueLimits,
	"queue/a partition runs one at a time while other partitions run beside it":                          storage.FeatureQueueLimits,
	"queue/engines that disagree on a queue's limits: the second one's Run reports both":                 storage.FeatureQueueLimits,
	"queue/an engine whose queue is full backs off instead of claiming in a loop":                        storage.FeatureQueueLimits,
	"queue/a free worker takes higher priorities first, and a dead worker's run before the backlog":      storage.FeatureGlobalOrder,
}

var featureScenarios = map[storage.Feature]scenario{
	storage.FeatureStartKeys:   {"features/without start keys, a keyed start fails with ErrUnsupported and creates nothing", testLacksStartKeys},
	storage.FeatureQueueLimits: {"features/without queue limits, Run of an engine with a limited queue fails at once, naming it", testLacksQueueLimits},
	storage.FeatureGlobalOrder: {"features/without one order, runs of every priority on a busy engine all complete", testLacksGlobalOrder},
}

// withFeatures drops the scenarios that need a feature the store of
// newStore lacks and adds that feature's scenario.
func withFeatures(t *testing.T, all []scenario, newStore Factory) []scenario {
	t.Helper()
	st := newStore(t)
	defer func() { _ = st.Close() }()
	kept := all[:0:0]
	for _, s := range all {
		if f, ok := needs[s.name]; !ok || storage.Has(st, f) {
			kept = append(kept, s)
		}
	}
	for _, f := range []storage.Feature{storage.FeatureStartKeys, storage.FeatureQueueLimits, storage.FeatureGlobalOrder} {
		if !storage.Has(st, f) {
			kept = append(kept, featureScenarios[f])
		}
	}
	return kept
}

func testLacksStartKeys(f *fixture) {
	e := f.engine(config{}, func(e *runtime.Engine) { blockUntilEvent(f, e) })
	f.start(e)
	_, err := runtime.Start[int, int](f.ctx, e, "hold", 1, runtime.WithID("a"), runtime.WithSingleton("nightly"))
	if !errors.Is(err, runtime.ErrUnsupported) || !strings.Contains(err.Error(), "start keys") {
		f.t.Fatalf("a singleton start: %v, want ErrUnsupported naming start keys", err)
	}
	if _, err := e.Get(f.ctx, "a"); !errors.Is(err, runtime.ErrRunNotFound) {
		f.t.Fatalf("run a after the refused start: %v, want it never created", err)
	}
	r, err := runtime.Start[int, int](f.ctx, e, "hold", 2, runtime.WithID("b"))
	f.must(err)
	f.must(e.SendEvent(f.ctx, "b", "test.go", 0))
	if got, err := r.Result(f.ctx); err != nil || got != 2 {
		f.t.Fatalf("a start without a key: %d, %v", got, err)
	}
}

func testLacksQueueLimits(f *fixture) {
	e := f.engine(config{}, func(e *runtime.Engine) {
		f.must(e.RegisterQueue(runtime.Queue{Name: "partner", Concurrency: 2}))
		f.must(runtime.Register(e, "call", func(c *runtime.WorkflowContext, in string) (string, error) { return in, nil }, runtime.WorkflowQueue("partner")))
	})
	err := e.Run(f.ctx)
	if !errors.Is(err, runtime.ErrUnsupported) || !strings.Contains(err.Error(), "partner") {
		f.t.Fatalf("Run with a limited queue: %v, want ErrUnsupported naming the queue", err)
	}
}

func testLacksGlobalOrder(f *fixture) {
	e := f.engine(config{workers: 2}, func(e *runtime.Engine) {
		f.must(runtime.Register(e, "job", func(c *runtime.WorkflowContext, in int) (int, error) {
			return runtime.Step(c, "double", runtime.StepOptions{}, func(sc runtime.StepContext) (int, error) { return 2 * in, nil })
		}))
	})
	var runs []*runtime.Run[int]
	for i := range 30 {
		r, err := runtime.Start[int, int](f.ctx, e, "job", i, runtime.WithID(fmt.Sprintf("job-%02d", i)), runtime.WithPriority(i%3))
		f.must(err)
		runs = append(runs, r)
	}
	f.start(e)
	for i, r := range runs {
		if got, err := r.Result(f.ctx); err != nil || got != 2*i {
			f.t.Fatalf("job %d: %d, %v", i, got, err)
		}
	}
}
