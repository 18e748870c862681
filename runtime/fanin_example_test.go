package runtime_test

import (
	"context"
	"fmt"
	"time"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/stores/memstore"
)

// A fan-out over one result type: AwaitAll returns the squares in the
// order the steps were started, and SelectFuture the first of two timers
// to be due, with its index checkpointed as Select's.
func ExampleAwaitAll() {
	store := memstore.New(memstore.Options{})
	defer store.Close()
	engine, err := runtime.New(runtime.Config{Store: store, PollInterval: 10 * time.Millisecond})
	if err != nil {
		panic(err)
	}
	defer engine.Close()

	err = runtime.Register(engine, "squares", func(c *runtime.WorkflowContext, n int) (string, error) {
		var fs []*runtime.Future[int]
		for i := range n {
			fs = append(fs, runtime.StepAsync(c, fmt.Sprintf("square%d@v1", i), runtime.StepOptions{}, func(runtime.StepContext) (int, error) {
				return i * i, nil
			}))
		}
		squares, err := runtime.AwaitAll(fs)
		if err != nil {
			return "", err
		}
		timers := []*runtime.Future[struct{}]{c.Timer("slow", time.Hour), c.Timer("quick", 20*time.Millisecond)}
		first, _, err := runtime.SelectFuture(c, "first-due", timers)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("squares %v, timer %d due first", squares, first), nil
	})
	if err != nil {
		panic(err)
	}

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	go engine.Run(ctx)

	run, err := runtime.Start[int, string](ctx, engine, "squares", 4)
	if err != nil {
		panic(err)
	}
	out, err := run.Result(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println(out)
	// Output:
	// squares [0 1 4 9], timer 1 due first
}
