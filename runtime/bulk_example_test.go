package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/stores/memstore"
)

// A bulk action restarts every errored run of a workflow from the step
// that failed it, once the cause is fixed: the step before it keeps its
// result.
func ExampleEngine_StartBulk() {
	store := memstore.New(memstore.Options{})
	defer store.Close()
	engine, err := runtime.New(runtime.Config{Store: store, PollInterval: 10 * time.Millisecond})
	if err != nil {
		panic(err)
	}
	defer engine.Close()

	var open atomic.Bool // the warehouse, which the ship step needs
	err = runtime.Register(engine, "orders.ship", func(c *runtime.WorkflowContext, order int) (string, error) {
		if err := runtime.Do(c, "pack@v1", runtime.StepOptions{}, func(runtime.StepContext) error { return nil }); err != nil {
			return "", err
		}
		return runtime.Step(c, "ship@v1", runtime.StepOptions{}, func(runtime.StepContext) (string, error) {
			if !open.Load() {
				return "", runtime.Permanent(errors.New("the warehouse is closed"))
			}
			return fmt.Sprintf("order %d shipped", order), nil
		})
	})
	if err != nil {
		panic(err)
	}
	// This engine's workers carry out bulk actions too.
	if err := runtime.RegisterBulk(engine); err != nil {
		panic(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	go engine.Run(ctx)

	var runs []*runtime.Run[string]
	for i := range 3 {
		r, err := runtime.Start[int, string](ctx, engine, "orders.ship", i, runtime.WithID(fmt.Sprintf("order-%d", i)))
		if err != nil {
			panic(err)
		}
		if _, err := r.Result(ctx); err == nil {
			panic("shipped from a closed warehouse")
		}
		runs = append(runs, r)
	}

	open.Store(true)
	filter := runtime.ListRunsQuery{Workflow: "orders.ship", Status: runtime.StatusErrored}
	n, _, err := engine.CountMatching(ctx, filter, 1000)
	if err != nil {
		panic(err)
	}
	fmt.Println(n, "errored runs")
	id, err := engine.StartBulk(ctx, runtime.BulkRequest{Action: runtime.BulkRestartFailed, Filter: filter})
	if err != nil {
		panic(err)
	}
	for {
		b, err := engine.GetBulk(ctx, id)
		if err != nil {
			panic(err)
		}
		if b.Status.Finished() {
			fmt.Printf("%s: %d matched, %d restarted\n", b.Status, b.Progress.Matched, b.Progress.Acted)
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, r := range runs {
		for {
			info, err := r.Info(ctx)
			if err != nil {
				panic(err)
			}
			if info.Execution == 2 && info.Status.Finished() {
				out, err := r.Result(ctx)
				fmt.Println(out, err)
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	// Output:
	// 3 errored runs
	// complete: 3 matched, 3 restarted
	// order 0 shipped <nil>
	// order 1 shipped <nil>
	// order 2 shipped <nil>
}
