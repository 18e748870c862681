package sqlitestore_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/stores/sqlitestore"
)

// BenchmarkEngine times a real engine on a SQLite file running 1000
// ten-step runs per iteration, from starting its workers until every result
// is in, and reports steps/s. Each step is one Checkpoint.
//
//	go test -run '^$' -bench BenchmarkEngine ./stores/sqlitestore
func BenchmarkEngine(b *testing.B) {
	const runs = 1000
	for _, mode := range []sqlitestore.Synchronous{sqlitestore.SyncNormal, sqlitestore.SyncFull} {
		for _, workers := range []int{1, 32} {
			b.Run(fmt.Sprintf("sync=%s/workers=%d", mode, workers), func(b *testing.B) {
				var steps int
				var elapsed time.Duration
				for b.Loop() {
					steps += runs * 10
					elapsed += runTenStep(b, sqlitestore.Options{Synchronous: mode}, workers, runs)
				}
				b.ReportMetric(float64(steps)/elapsed.Seconds(), "steps/s")
			})
		}
	}
}

// runTenStep starts runs ten-step runs on a fresh file, then runs an engine
// with the given workers until all are complete, and returns how long that
// took. Only that part runs with the benchmark timer on.
func runTenStep(b *testing.B, opts sqlitestore.Options, workers, runs int) time.Duration {
	b.StopTimer()
	defer b.StartTimer()
	ctx := context.Background()
	store, err := sqlitestore.Open(filepath.Join(b.TempDir(), "engine.db"), opts)
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	e, err := runtime.New(runtime.Config{Store: store, Workers: workers, PollInterval: 50 * time.Millisecond})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	if err := runtime.Register(e, "bench.ten", func(c *runtime.WorkflowContext, in int) (int, error) {
		sum := in
		for i := range 10 {
			v, err := runtime.Step(c, "s"+strconv.Itoa(i)+"@v1", runtime.StepOptions{}, func(runtime.StepContext) (int, error) {
				return sum + i, nil
			})
			if err != nil {
				return 0, err
			}
			sum = v
		}
		return sum, nil
	}); err != nil {
		b.Fatal(err)
	}
	items := make([]runtime.BatchItem[int], runs)
	for i := range items {
		items[i].Input = i
	}
	handles, err := runtime.StartBatch[int, int](ctx, e, "bench.ten", items)
	if err != nil {
		b.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	b.StartTimer()
	began := time.Now()
	go func() { done <- e.Run(runCtx) }()
	for _, h := range handles {
		if _, err := h.Result(ctx); err != nil {
			b.Fatal(err)
		}
	}
	took := time.Since(began)
	b.StopTimer()
	cancel()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	return took
}
