package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/stores/memstore"
)

// A booking that holds a room while it waits a day for the payment. The
// customer gives up: Cancel wakes the run, the wait fails with
// ErrCanceled, and the deferred compensation releases the room on the
// detached context, checkpointed like any step.
func ExampleEngine_Cancel() {
	store := memstore.New(memstore.Options{})
	defer store.Close()
	engine, err := runtime.New(runtime.Config{Store: store, PollInterval: 10 * time.Millisecond})
	if err != nil {
		panic(err)
	}
	defer engine.Close()

	err = runtime.Register(engine, "book", func(c *runtime.WorkflowContext, room string) (out string, err error) {
		if err := runtime.Do(c, "hold@v1", runtime.StepOptions{}, func(runtime.StepContext) error { return nil }); err != nil {
			return "", err
		}
		defer func() {
			if errors.Is(err, runtime.ErrCanceled) {
				_ = runtime.Do(c.Detached(), "release@v1", runtime.StepOptions{}, func(runtime.StepContext) error {
					fmt.Println("released", room)
					return nil
				})
			}
		}()
		if _, err := runtime.WaitForEvent[string](c, "paid", "payments", 24*time.Hour); err != nil {
			return "", err
		}
		return "booked " + room, nil
	})
	if err != nil {
		panic(err)
	}

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	go engine.Run(ctx)

	run, err := runtime.Start[string, string](ctx, engine, "book", "room 12")
	if err != nil {
		panic(err)
	}
	for info, _ := run.Info(ctx); info.Status != runtime.StatusWaiting; info, _ = run.Info(ctx) {
		time.Sleep(5 * time.Millisecond)
	}
	if err := run.Cancel(ctx, "the customer gave up"); err != nil {
		panic(err)
	}
	_, err = run.Result(ctx)
	info, _ := run.Info(ctx)
	fmt.Println(info.Status, errors.Is(err, runtime.ErrCanceled), info.CancelReason)
	// Output:
	// released room 12
	// errored true the customer gave up
}
