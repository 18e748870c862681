package runtime_test

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/storage"
)

// sealedHandBacks counts an engine's executions handed back because it
// could not open the run.
func sealedHandBacks(n *atomic.Int32) runtime.Hooks {
	return runtime.Hooks{Execution: func(ctx context.Context, x *runtime.HookExecution, next func(context.Context)) {
		next(ctx)
		if x.Outcome == runtime.OutcomeReleased && errors.Is(x.Err, runtime.ErrSealed) {
			n.Add(1)
		}
	}}
}

func workerRecord(t *testing.T, e *runtime.Engine, id string) (storage.Worker, bool) {
	t.Helper()
	ws, err := e.Workers(context.Background())
	must(t, err)
	for _, w := range ws {
		if w.ID == id {
			return w, true
		}
	}
	return storage.Worker{}, false
}

// A worker whose codec lacks the key a run is sealed with hands the run
// back ready at once when another live worker holds the key, leaves the
// workflow to that worker rather than claiming the run again, and lists
// the key it lacks in its worker record. The clock never moves: a run
// handed back for later would never be claimed again.
func TestSealedKeyLeftToWorkerThatHoldsIt(t *testing.T) {
	t.Parallel()
	f, clock := setupClock(t)
	ctx := waitCtx(t)
	idA, idB := runtime.AESGCMKeyID(keyA), runtime.AESGCMKeyID(keyB)

	var lacking atomic.Int32
	lacksB := codecEngine(t, f.store, codecOf(t, keyA), func(c *runtime.Config) {
		c.Clock, c.WorkerID, c.Hooks = clock, "lacks-b", []runtime.Hooks{sealedHandBacks(&lacking)}
	})
	holdsB := codecEngine(t, f.store, codecOf(t, keyB, keyA), func(c *runtime.Config) {
		c.Clock, c.WorkerID = clock, "holds-b"
	})
	if got := runtime.CodecKeyIDs(codecOf(t, keyB, keyA)); !slices.Equal(got, []string{idB, idA}) {
		t.Fatalf("CodecKeyIDs = %v, want [%s %s]", got, idB, idA)
	}
	// holds-b is live (as it records itself when it runs) but not yet
	// claiming: the run goes to lacks-b first.
	must(t, f.store.PutWorker(ctx, storage.PutWorkerRequest{TTL: time.Minute, Worker: storage.Worker{
		ID: "holds-b", StartedAt: clock.Now(), Workflows: []string{"greet"}, KeyIDs: []string{idB, idA},
	}}))
	_, err := runtime.Start[string, string](ctx, holdsB, "greet", "ada", runtime.WithID("sealed-b"))
	must(t, err)

	start(t, lacksB)
	eventually(t, "lacks-b hands the run back", func() bool { return lacking.Load() >= 1 })
	info, err := lacksB.Get(ctx, "sealed-b")
	must(t, err)
	if info.Status.Finished() || info.ReadyAt == nil || info.ReadyAt.After(clock.Now()) {
		t.Fatalf("after lacks-b handed it back: %+v; want it ready now (%v), for holds-b", info, clock.Now())
	}
	eventually(t, "lacks-b lists the key it lacks", func() bool {
		w, ok := workerRecord(t, lacksB, "lacks-b")
		return ok && slices.Equal(w.MissingKeyIDs, []string{idB})
	})
	if w, _ := workerRecord(t, lacksB, "lacks-b"); !slices.Equal(w.KeyIDs, []string{idA}) {
		t.Fatalf("lacks-b records key IDs %v, want [%s]", w.KeyIDs, idA)
	}

	start(t, holdsB)
	run := mustGet[string](t, holdsB, "greet", "sealed-b")
	if out, err := run.Result(ctx); err != nil || out != "hello ada" {
		t.Fatalf("holds-b: %q, %v", out, err)
	}
	// Once, then it leaves the workflow to holds-b (twice if a claim of
	// its own was already under way as it handed the run back).
	if n := lacking.Load(); n > 2 {
		t.Fatalf("lacks-b claimed the run %d times; it should leave the workflow to holds-b", n)
	}
	if w, ok := workerRecord(t, holdsB, "holds-b"); !ok || !slices.Equal(w.KeyIDs, []string{idB, idA}) || w.MissingKeyIDs != nil {
		t.Fatalf("holds-b's record: %+v", w)
	}
}

// With no other live worker holding the key, the run is handed back for
// later, as before: no worker can open it now, and none should spin on
// it.
func TestSealedKeyNobodyHoldsWaits(t *testing.T) {
	t.Parallel()
	f, clock := setupClock(t)
	ctx := waitCtx(t)
	var lacking atomic.Int32
	lacksB := codecEngine(t, f.store, codecOf(t, keyA), func(c *runtime.Config) {
		c.Clock, c.WorkerID, c.Hooks = clock, "lacks-b", []runtime.Hooks{sealedHandBacks(&lacking)}
	})
	sealer := codecEngine(t, f.store, codecOf(t, keyB), func(c *runtime.Config) { c.Clock = clock })
	_, err := runtime.Start[string, string](ctx, sealer, "greet", "ada", runtime.WithID("sealed-b"))
	must(t, err)
	start(t, lacksB)
	eventually(t, "lacks-b hands the run back", func() bool { return lacking.Load() >= 1 })
	info, err := lacksB.Get(ctx, "sealed-b")
	must(t, err)
	if info.ReadyAt == nil || !info.ReadyAt.After(clock.Now()) {
		t.Fatalf("after lacks-b handed it back: %+v; want it ready later than now (%v)", info, clock.Now())
	}
}
