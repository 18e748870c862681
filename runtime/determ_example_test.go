package runtime_test

import (
	"context"
	"fmt"
	"time"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/stores/memstore"
)

// The workflow's clock and randomness come from its context: each value
// is recorded at the call, so the run, replayed after its sleep (or a
// crash), sees what it saw the first time, and SideEffect's function runs
// once.
func ExampleSideEffect() {
	store := memstore.New(memstore.Options{})
	defer store.Close()
	engine, err := runtime.New(runtime.Config{Store: store, PollInterval: 10 * time.Millisecond})
	if err != nil {
		panic(err)
	}
	defer engine.Close()

	calls := 0
	var ids []string // the UUID each invocation of the workflow got
	type receipt struct {
		ID     string
		At     time.Time
		Ticket int
	}
	err = runtime.Register(engine, "stamp", func(c *runtime.WorkflowContext, _ int) (receipt, error) {
		id := c.UUID()
		ids = append(ids, id)
		at := c.Now()
		ticket, err := runtime.SideEffect(c, "ticket", func() (int, error) {
			calls++
			return 42, nil
		})
		if err != nil {
			return receipt{}, err
		}
		if err := c.Sleep("settle", 20*time.Millisecond); err != nil {
			return receipt{}, err
		}
		return receipt{ID: id, At: at, Ticket: ticket}, nil
	})
	if err != nil {
		panic(err)
	}

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	go engine.Run(ctx)

	run, err := runtime.Start[int, receipt](ctx, engine, "stamp", 0)
	if err != nil {
		panic(err)
	}
	out, err := run.Result(ctx)
	if err != nil {
		panic(err)
	}
	// The workflow ran twice (before and after its sleep) and got the same
	// UUID both times; the ticket was computed once.
	fmt.Println(len(ids), ids[0] == ids[1] && ids[1] == out.ID, out.Ticket, calls)
	// Output: 2 true 42 1
}
