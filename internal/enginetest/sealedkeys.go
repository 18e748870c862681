package enginetest

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"time"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/storage"
)

var sealedKeyScenarios = []scenario{
	{"codec/a worker lacking a run's key hands it back ready at once to a live worker that holds it, and records the key it lacks", testSealedKeyLeftToHolder},
}

// keyEngine returns an engine with codec, worker ID id and the workflow
// "keys.greet", counting in handBacks the executions it handed back for
// it could not open the run.
func (f *fixture) keyEngine(codec runtime.Codec, id string, handBacks *atomic.Int32) *runtime.Engine {
	f.t.Helper()
	e, err := runtime.New(runtime.Config{
		Store: f.store, Codec: codec, WorkerID: id, LeaseDuration: 5 * time.Second,
		PollInterval: 10 * time.Millisecond, ShutdownGrace: 50 * time.Millisecond,
		Hooks: []runtime.Hooks{{Execution: func(ctx context.Context, x *runtime.HookExecution, next func(context.Context)) {
			next(ctx)
			if x.Outcome == runtime.OutcomeReleased && errors.Is(x.Err, runtime.ErrSealed) {
				handBacks.Add(1)
			}
		}}},
	})
	f.must(err)
	f.must(runtime.Register(e, "keys.greet", func(c *runtime.WorkflowContext, name string) (string, error) {
		return runtime.Step(c, "say@v1", runtime.StepOptions{}, func(runtime.StepContext) (string, error) { return "hello " + name, nil })
	}))
	return e
}

func (f *fixture) worker(e *runtime.Engine, id string) (storage.Worker, bool) {
	f.t.Helper()
	ws, err := e.Workers(f.ctx)
	f.must(err)
	for _, w := range ws {
		if w.ID == id {
			return w, true
		}
	}
	return storage.Worker{}, false
}

func testSealedKeyLeftToHolder(f *fixture) {
	idA, idB := runtime.AESGCMKeyID(codecKeyA), runtime.AESGCMKeyID(codecKeyB)
	var lacking, holding atomic.Int32
	lacksB := f.keyEngine(f.codec(codecKeyA), "lacks-b", &lacking)
	holdsB := f.keyEngine(f.codec(codecKeyB, codecKeyA), "holds-b", &holding)
	// holds-b is live, as it records itself, but claims nothing yet: the
	// run goes to lacks-b first.
	f.must(f.store.PutWorker(f.ctx, storage.PutWorkerRequest{TTL: time.Minute, Worker: storage.Worker{
		ID: "holds-b", StartedAt: time.Now(), Workflows: []string{"keys.greet"}, KeyIDs: []string{idB, idA},
	}}))
	_, err := runtime.Start[string, string](f.ctx, holdsB, "keys.greet", "ada", runtime.WithID("sealed-b"))
	f.must(err)

	f.start(lacksB)
	f.eventually("lacks-b hands the run back", func() bool { return lacking.Load() >= 1 })
	// Ready at once: a hand-back for later would be ready after now. (Read
	// until seen so: a claim of lacks-b's in flight as it handed the run
	// back may take it once more, and hand it back again.)
	f.eventually("the run handed back is ready now, for holds-b", func() bool {
		info := f.info(lacksB, "sealed-b")
		return !info.Status.Finished() && info.ReadyAt != nil && !info.ReadyAt.After(time.Now())
	})
	f.eventually("lacks-b's record lists the key it lacks", func() bool {
		w, ok := f.worker(lacksB, "lacks-b")
		return ok && slices.Equal(w.MissingKeyIDs, []string{idB}) && slices.Equal(w.KeyIDs, []string{idA})
	})

	f.start(holdsB)
	run, err := runtime.Get[string](f.ctx, holdsB, "keys.greet", "sealed-b")
	f.must(err)
	if out, err := run.Result(f.ctx); err != nil || out != "hello ada" {
		f.t.Fatalf("holds-b: %q, %v", out, err)
	}
	if n := holding.Load(); n != 0 {
		f.t.Fatalf("holds-b handed back %d runs; it holds every key", n)
	}
	if w, ok := f.worker(holdsB, "holds-b"); !ok || !slices.Equal(w.KeyIDs, []string{idB, idA}) || w.MissingKeyIDs != nil {
		f.t.Fatalf("holds-b's record: %+v", w)
	}
}
