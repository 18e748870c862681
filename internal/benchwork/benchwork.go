// Package benchwork holds the engine benchmarks every store runs, so their
// figures measure the same work: 10-step runs executed by one engine (or
// several processes' engines) until all complete. TenSteps times only the
// execution of runs started beforehand; Starts times what a user's program
// sees, from the first start to the last result, in both ways programs start
// runs: one StartBatch, and a goroutine per run that starts it and awaits
// its result.
package benchwork

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stemflow/stem/storage"

	"github.com/stemflow/stem/internal/loadgen"
	"github.com/stemflow/stem/runtime"
)

// Workflow is the benchmark workflow's durable name.
const Workflow = "bench.ten"

// Steps is how many steps each benchmark run has.
const Steps = 10

// SleepWorkflow is the durable name of the workflow that sleeps for its
// input (milliseconds) and returns.
const SleepWorkflow = "bench.sleep"

// StampWorkflow is the durable name of the workflow whose one step waits
// its input (milliseconds) and returns the time it ended, in Unix
// microseconds.
const StampWorkflow = "bench.stamp"

// TxWorkflow is the durable name of the workflow of Steps transactional
// steps (runtime.TxStep) that do no work of their own: against Workflow,
// what a step's own transaction costs.
const TxWorkflow = "bench.tentx"

// Register registers the benchmark workflows: Workflow, Steps checkpointed
// steps that do no work of their own, so the figures are the framework's
// cost per step; TxWorkflow, the same as transactional steps (runnable on
// stores with transactions only); and SleepWorkflow, one durable sleep.
func Register(e *runtime.Engine) error {
	if err := runtime.Register(e, SleepWorkflow, func(c *runtime.WorkflowContext, ms int) (int, error) {
		return ms, c.Sleep("nap", time.Duration(ms)*time.Millisecond)
	}); err != nil {
		return err
	}
	if err := runtime.Register(e, StampWorkflow, func(c *runtime.WorkflowContext, ms int) (int, error) {
		return runtime.Step(c, "stamp@v1", runtime.StepOptions{}, func(sc runtime.StepContext) (int, error) {
			time.Sleep(time.Duration(ms) * time.Millisecond)
			return int(time.Now().UnixMicro()), nil
		})
	}); err != nil {
		return err
	}
	keys := make([]string, Steps)
	for i := range keys {
		keys[i] = fmt.Sprintf("s%d@v1", i)
	}
	if err := runtime.Register(e, TxWorkflow, func(c *runtime.WorkflowContext, in int) (int, error) {
		sum := in
		for i, key := range keys {
			v, err := runtime.TxStep(c, key, runtime.StepOptions{}, func(runtime.StepContext, any) (int, error) {
				return sum + i, nil
			})
			if err != nil {
				return 0, err
			}
			sum = v
		}
		return sum, nil
	}); err != nil {
		return err
	}
	return runtime.Register(e, Workflow, func(c *runtime.WorkflowContext, in int) (int, error) {
		sum := in
		for i, key := range keys {
			v, err := runtime.Step(c, key, runtime.StepOptions{}, func(runtime.StepContext) (int, error) {
				return sum + i, nil
			})
			if err != nil {
				return 0, err
			}
			sum = v
		}
		return sum, nil
	})
}

// TxSteps times `runs` runs from the first start to the last result, as
// Starts does, of Workflow (steps=plain) and of TxWorkflow (steps=tx),
// each started in one batch and from a goroutine per run: what a step's
// own transaction costs against a plain step's checkpoint, on a store
// with transactions.
func TxSteps(b *testing.B, newStore func(b *testing.B) storage.Store, workers, runs int) {
	for _, wf := range []struct{ name, workflow string }{{"plain", Workflow}, {"tx", TxWorkflow}} {
		for _, st := range loadgen.Styles {
			b.Run("steps="+wf.name+"/start="+string(st), func(b *testing.B) {
				measure(b, newStore, benchPoll, nil, workers, runs, true, nil, func(ctx context.Context, e *runtime.Engine) error {
					return loadgen.StartAll(ctx, e, st, wf.workflow, runs, func(i int) int { return i }, tenStepsOf)
				})
			})
		}
	}
}

// tenStepsOf is what Workflow returns for input i: i plus 0+1+...+9.
func tenStepsOf(i int) int { return i + Steps*(Steps-1)/2 }

// NewEngine returns an engine on store with the benchmark workflows
// registered, polling every 100 ms.
func NewEngine(tb testing.TB, store storage.Store, workers int) *runtime.Engine {
	tb.Helper()
	return newEngine(tb, runtime.Config{Store: store, Workers: workers, PollInterval: benchPoll})
}

// newEngine returns an engine on cfg with the benchmark workflows
// registered.
func newEngine(tb testing.TB, cfg runtime.Config) *runtime.Engine {
	tb.Helper()
	e, err := runtime.New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	if err := Register(e); err != nil {
		tb.Fatal(err)
	}
	return e
}

// TenSteps runs `runs` 10-step runs per iteration on a fresh store from
// newStore, with one engine of `workers` workers, and reports steps/s over
// the time from the engine's start until every run completed. Starting the
// runs is not timed.
func TenSteps(b *testing.B, newStore func(b *testing.B) storage.Store, workers, runs int) {
	TenStepsHooked(b, newStore, workers, runs, nil)
}

// TenStepsHooked is TenSteps on engines with the hooks: what they cost
// the engine, against TenSteps without.
func TenStepsHooked(b *testing.B, newStore func(b *testing.B) storage.Store, workers, runs int, hooks []runtime.Hooks) {
	var handles []*runtime.Run[int]
	measure(b, newStore, benchPoll, hooks, workers, runs, false,
		func(ctx context.Context, e *runtime.Engine) { handles = StartRuns(b, ctx, e, runs) },
		func(ctx context.Context, e *runtime.Engine) error { return await(ctx, handles) })
}

// Starts runs `runs` 10-step runs per iteration on a fresh store from
// newStore with one running engine of `workers` workers, in two
// sub-benchmarks: start=batch starts them with StartBatch (500 a call) and
// awaits each result; start=goroutines starts each in its own goroutine
// with Start and awaits its result there. Each reports steps/s over the
// time from the first start call until the last result.
func Starts(b *testing.B, newStore func(b *testing.B) storage.Store, workers, runs int) {
	for _, st := range loadgen.Styles {
		b.Run("start="+string(st), func(b *testing.B) {
			measure(b, newStore, benchPoll, nil, workers, runs, true, nil, func(ctx context.Context, e *runtime.Engine) error {
				return loadgen.StartAll(ctx, e, st, Workflow, runs, func(i int) int { return i }, tenStepsOf)
			})
		})
	}
}

// benchPoll is the poll interval of the throughput benchmarks' engines.
const benchPoll = 100 * time.Millisecond

// measure reports steps/s of `runs` runs per iteration, each iteration on a
// fresh store and engine polling every poll (0: the default), with the
// hooks: prepare (when set) runs untimed, then timed runs
// with the timer on. The engine runs from before prepare when engineFirst,
// else from the start of the timed part, which then includes its start.
func measure(b *testing.B, newStore func(b *testing.B) storage.Store, poll time.Duration, hooks []runtime.Hooks, workers, runs int, engineFirst bool,
	prepare func(ctx context.Context, e *runtime.Engine), timed func(ctx context.Context, e *runtime.Engine) error) {
	var steps int
	var elapsed time.Duration
	for b.Loop() {
		b.StopTimer()
		store := newStore(b)
		e := newEngine(b, runtime.Config{Store: store, Workers: workers, PollInterval: poll, Hooks: hooks})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		run := func() { go func() { done <- e.Run(ctx) }() }
		if engineFirst {
			run()
		}
		if prepare != nil {
			prepare(ctx, e)
		}
		b.StartTimer()
		began := time.Now()
		if !engineFirst {
			run()
		}
		if err := timed(ctx, e); err != nil {
			b.Fatal(err)
		}
		elapsed += time.Since(began)
		steps += runs * Steps
		b.StopTimer()
		cancel()
		<-done
		e.Close()
		store.Close()
		b.StartTimer()
	}
	if runs > 0 {
		b.ReportMetric(float64(steps)/elapsed.Seconds(), "steps/s")
	}
}

// measureEach runs timed once per iteration, with the timer on, on a fresh
// store and a running engine of workers workers with the default poll
// interval; the caller reports what it measured.
func measureEach(b *testing.B, newStore func(b *testing.B) storage.Store, workers int, timed func(ctx context.Context, e *runtime.Engine) error) {
	measure(b, newStore, 0, nil, workers, 0, true, nil, timed)
}

// await waits for every run's result.
func await(ctx context.Context, handles []*runtime.Run[int]) error {
	for _, h := range handles {
		if _, err := h.Result(ctx); err != nil {
			return err
		}
	}
	return nil
}

// SleepLatency runs one run at a time that sleeps 50 ms, on a running
// engine, and reports p50 and p99 from start to result in ms, and the p99
// beyond the 50 ms asked for: how late an idle engine wakes.
func SleepLatency(b *testing.B, store storage.Store) {
	const nap = 50
	lat := oneAtATime(b, newEngine(b, runtime.Config{Store: store, Workers: 4}), SleepWorkflow, nap) // the default poll interval, 1 s
	p50, p99 := percentile(lat, 0.50), percentile(lat, 0.99)
	b.ReportMetric(ms(p50), "p50-ms")
	b.ReportMetric(ms(p99), "p99-ms")
	b.ReportMetric(ms(p99-nap*time.Millisecond), "p99-late-ms")
}

// oneAtATime runs e and, per benchmark iteration, one run of workflow with
// input from start to result, returning each one's latency.
func oneAtATime(b *testing.B, e *runtime.Engine, workflow string, input int) []time.Duration {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	defer func() { cancel(); <-done; e.Close() }()
	var lat []time.Duration
	for b.Loop() {
		began := time.Now()
		run, err := runtime.Start[int, int](ctx, e, workflow, input)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := run.Result(ctx); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(began))
	}
	return lat
}

// RemoteResult measures how late Result returns in a client engine that is
// not the worker: a worker engine on one store instance runs each run,
// whose step takes 200 ms (long enough for a polling waiter to back off)
// and returns the time it ended; a client engine on another instance of
// the same store (its own connections, as another process would have)
// starts the run and awaits it. It reports p50 and p99 of the time from
// the step's end to Result's return, in ms.
func RemoteResult(b *testing.B, worker, client storage.Store) {
	w := newEngine(b, runtime.Config{Store: worker, Workers: 4})
	c := newEngine(b, runtime.Config{Store: client})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	defer func() { cancel(); <-done; w.Close(); c.Close() }()
	var late []time.Duration
	for b.Loop() {
		run, err := runtime.Start[int, int](ctx, c, StampWorkflow, 200)
		if err != nil {
			b.Fatal(err)
		}
		ended, err := run.Result(ctx)
		if err != nil {
			b.Fatal(err)
		}
		late = append(late, time.Since(time.UnixMicro(int64(ended))))
	}
	b.ReportMetric(ms(percentile(late, 0.50)), "p50-late-ms")
	b.ReportMetric(ms(percentile(late, 0.99)), "p99-late-ms")
}

// Sleepers starts `runs` runs that each sleep 1 s, on a running engine of
// 32 workers, by one batch and by a goroutine per run, and reports the wall
// time from the first start to the last result in ms: the ideal is just
// over 1000.
func Sleepers(b *testing.B, newStore func(b *testing.B) storage.Store, runs int) {
	for _, st := range loadgen.Styles {
		b.Run("start="+string(st), func(b *testing.B) {
			var walls []time.Duration
			measureEach(b, newStore, 32, func(ctx context.Context, e *runtime.Engine) error {
				began := time.Now()
				err := loadgen.StartAll(ctx, e, st, SleepWorkflow, runs, func(int) int { return 1000 }, func(int) int { return 1000 })
				walls = append(walls, time.Since(began))
				return err
			})
			b.ReportMetric(ms(percentile(walls, 0.5)), "wall-ms")
		})
	}
}

// percentile returns the q-quantile of ds, which it sorts.
func percentile(ds []time.Duration, q float64) time.Duration {
	slices.Sort(ds)
	return ds[min(len(ds)-1, int(q*float64(len(ds))))]
}

// ms is d in milliseconds.
func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// StartRuns starts n benchmark runs in batches and returns their handles.
func StartRuns(tb testing.TB, ctx context.Context, e *runtime.Engine, n int) []*runtime.Run[int] {
	tb.Helper()
	items := make([]runtime.BatchItem[int], n)
	for i := range items {
		items[i].Input = i
	}
	var handles []*runtime.Run[int]
	for lo := 0; lo < n; lo += 500 {
		hs, err := runtime.StartBatch[int, int](ctx, e, Workflow, items[lo:min(lo+500, n)])
		if err != nil {
			tb.Fatal(err)
		}
		handles = append(handles, hs...)
	}
	return handles
}

// Latency measures the end-to-end latency of one 10-step run at a time
// (start to result, on a running engine) and reports p50 and p99 in ms.
func Latency(b *testing.B, store storage.Store) {
	lat := oneAtATime(b, NewEngine(b, store, 4), Workflow, 1)
	b.ReportMetric(ms(percentile(lat, 0.50)), "p50-ms")
	b.ReportMetric(ms(percentile(lat, 0.99)), "p99-ms")
}
