package runtime_test

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/stores/memstore"
)

// A workflow written by hand against the runtime: two checkpointed steps, a
// durable sleep and an event wait, run on the in-memory store.
func Example() {
	store := memstore.New(memstore.Options{})
	defer store.Close()
	engine, err := runtime.New(runtime.Config{Store: store, PollInterval: 10 * time.Millisecond})
	if err != nil {
		panic(err)
	}
	defer engine.Close()

	err = runtime.Register(engine, "greet", func(c *runtime.WorkflowContext, name string) (string, error) {
		greeting, err := runtime.Step(c, "compose@v1", runtime.StepOptions{Retries: 3}, func(sc runtime.StepContext) (string, error) {
			return "Hello, " + name, nil
		})
		if err != nil {
			return "", err
		}
		if err := c.Sleep("pause", 20*time.Millisecond); err != nil {
			return "", err
		}
		mood, err := runtime.WaitForEvent[string](c, "mood", "greet.mood", time.Minute)
		if err != nil {
			return "", err
		}
		return runtime.Step(c, "shout@v1", runtime.StepOptions{}, func(sc runtime.StepContext) (string, error) {
			return strings.ToUpper(greeting) + " (" + mood + ")", nil
		})
	})
	if err != nil {
		panic(err)
	}

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	go engine.Run(ctx)

	run, err := runtime.Start[string, string](ctx, engine, "greet", "Ada", runtime.WithID("greet-ada"))
	if err != nil {
		panic(err)
	}
	// Sent before the run waits for it: kept, then delivered.
	if err := engine.SendEvent(ctx, run.ID(), "greet.mood", "cheerful"); err != nil {
		panic(err)
	}
	out, err := run.Result(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println(out)
	steps, _ := engine.ListSteps(ctx, run.ID(), 0)
	for _, s := range steps {
		fmt.Println(s.Kind, s.Key)
	}
	// Output:
	// HELLO, ADA (cheerful)
	// step compose@v1
	// sleep pause
	// event mood
	// step shout@v1
}
