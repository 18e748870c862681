package sqlitestore_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/storage"
	"github.com/stemflow/stem/stores/sqlitestore"
)

// Open a store on a file, run a workflow on it with an engine, and read the
// result back.
func ExampleOpen() {
	dir, err := os.MkdirTemp("", "stem-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	// The zero Options: synchronous NORMAL (a commit survives a crash of
	// the process; SyncFull also survives power loss), the system clock.
	store, err := sqlitestore.Open(filepath.Join(dir, "stem.db"), sqlitestore.Options{})
	if err != nil {
		panic(err)
	}
	defer store.Close()

	e, err := runtime.New(runtime.Config{Store: store, PollInterval: 10 * time.Millisecond})
	if err != nil {
		panic(err)
	}
	defer e.Close()
	if err := runtime.Register(e, "greet", func(c *runtime.WorkflowContext, name string) (string, error) {
		return runtime.Step(c, "greet@v1", runtime.StepOptions{}, func(runtime.StepContext) (string, error) {
			return "hello, " + name, nil
		})
	}); err != nil {
		panic(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go e.Run(ctx)
	run, err := runtime.Start[string, string](ctx, e, "greet", "world", runtime.WithID("greet-1"))
	if err != nil {
		panic(err)
	}
	out, err := run.Result(ctx)
	fmt.Println(out, err)

	h, err := store.ListSteps(ctx, storage.StepsQuery{RunID: "greet-1"})
	if err != nil {
		panic(err)
	}
	for _, s := range h.Steps {
		fmt.Printf("%s %s %d attempt(s)\n", s.Key, s.Output, len(s.Attempts))
	}
	// Output:
	// hello, world <nil>
	// greet@v1 "hello, world" 1 attempt(s)
}
