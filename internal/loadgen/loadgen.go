// Package loadgen runs Stem's standard workloads on an engine, for the
// operator's `stem bench` and the benchmarks alike:
//
//   - Steps (W1): runs of N trivial checkpointed steps, all in flight,
//     timed from the first start to the last result;
//   - Latency (W2): one run at a time, start to result;
//   - Sleepers (W3): runs that each sleep, all in flight, wall time.
//
// Runs start in either of the two ways programs start them: one StartBatch
// (Batch) or a goroutine per run that starts it and awaits its result
// (Goroutines). Every result is checked, so a figure never counts a run
// that did the wrong thing.
package loadgen

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/stemflow/stem/runtime"
)

// The workloads' durable workflow names.
const (
	// StepsWorkflow takes a step count n and runs n steps, each adding one
	// to the last one's result; it returns n.
	StepsWorkflow = "stembench.steps"
	// SleepWorkflow sleeps for its input in milliseconds and returns it.
	SleepWorkflow = "stembench.sleep"
)

// Register registers the workloads' workflows on e.
func Register(e *runtime.Engine) error {
	if err := runtime.Register(e, StepsWorkflow, func(c *runtime.WorkflowContext, n int) (int, error) {
		v := 0
		for i := range n {
			next, err := runtime.Step(c, fmt.Sprintf("s%d@v1", i), runtime.StepOptions{}, func(runtime.StepContext) (int, error) {
				return v + 1, nil
			})
			if err != nil {
				return 0, err
			}
			v = next
		}
		return v, nil
	}); err != nil {
		return err
	}
	return runtime.Register(e, SleepWorkflow, func(c *runtime.WorkflowContext, ms int) (int, error) {
		return ms, c.Sleep("nap", time.Duration(ms)*time.Millisecond)
	})
}

// Style is a way of starting runs.
type Style string

// The two ways programs start runs.
const (
	// Batch starts every run with StartBatch (500 a call), then awaits
	// each result.
	Batch Style = "batch"
	// Goroutines starts each run in a goroutine of its own with Start and
	// awaits its result there.
	Goroutines Style = "goroutines"
)

// Styles are both styles, in the order reports list them.
var Styles = []Style{Batch, Goroutines}

// StartAll starts n runs of workflow on e, run i with input(i), in style,
// and returns once every one has its result. Each result must equal
// want(i), else the error names the run.
func StartAll(ctx context.Context, e *runtime.Engine, style Style, workflow string, n int, input, want func(i int) int) error {
	check := func(i int, h *runtime.Run[int]) error {
		out, err := h.Result(ctx)
		if err != nil {
			return fmt.Errorf("run %s: %w", h.ID(), err)
		}
		if w := want(i); out != w {
			return fmt.Errorf("run %s returned %d, want %d", h.ID(), out, w)
		}
		return nil
	}
	switch style {
	case Batch:
		items := make([]runtime.BatchItem[int], n)
		for i := range items {
			items[i].Input = input(i)
		}
		var hs []*runtime.Run[int]
		for lo := 0; lo < n; lo += 500 {
			got, err := runtime.StartBatch[int, int](ctx, e, workflow, items[lo:min(lo+500, n)])
			if err != nil {
				return err
			}
			hs = append(hs, got...)
		}
		for i, h := range hs {
			if err := check(i, h); err != nil {
				return err
			}
		}
		return nil
	case Goroutines:
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for i := range n {
			wg.Go(func() {
				h, err := runtime.Start[int, int](ctx, e, workflow, input(i))
				if err == nil {
					err = check(i, h)
				}
				if err != nil {
					errs <- err
				}
			})
		}
		wg.Wait()
		close(errs)
		return <-errs
	}
	return fmt.Errorf("loadgen: unknown start style %q", style)
}

// Steps runs W1: runs runs of steps steps each, started in style, and
// returns the time from the first start to the last result.
func Steps(ctx context.Context, e *runtime.Engine, style Style, runs, steps int) (time.Duration, error) {
	began := time.Now()
	err := StartAll(ctx, e, style, StepsWorkflow, runs, func(int) int { return steps }, func(int) int { return steps })
	return time.Since(began), err
}

// Latency runs W2: warm runs, then n runs of steps steps one at a time, and
// returns the latency of each of the n, start to result.
func Latency(ctx context.Context, e *runtime.Engine, warm, n, steps int) ([]time.Duration, error) {
	var lat []time.Duration
	for i := range warm + n {
		began := time.Now()
		if err := StartAll(ctx, e, Goroutines, StepsWorkflow, 1, func(int) int { return steps }, func(int) int { return steps }); err != nil {
			return nil, err
		}
		if i >= warm {
			lat = append(lat, time.Since(began))
		}
	}
	return lat, nil
}

// Sleepers runs W3: runs runs that each sleep for sleep, started in style,
// and returns the wall time from the first start to the last result.
func Sleepers(ctx context.Context, e *runtime.Engine, style Style, runs int, sleep time.Duration) (time.Duration, error) {
	ms := int(sleep / time.Millisecond)
	began := time.Now()
	err := StartAll(ctx, e, style, SleepWorkflow, runs, func(int) int { return ms }, func(int) int { return ms })
	return time.Since(began), err
}

// Percentile returns the q-quantile of ds (0 when empty), sorting ds.
func Percentile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return ds[min(len(ds)-1, int(q*float64(len(ds))))]
}
