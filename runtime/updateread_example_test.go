package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/stores/memstore"
)

// A tool lists a run's updates and shows each as the engine opens it: the
// request and the reply as JSON (opened with the engine's codec, here
// sealed at rest), and the error the workflow replied with.
func ExampleEngine_OpenUpdate() {
	store := memstore.New(memstore.Options{})
	defer store.Close()
	codec, err := runtime.NewAESGCMCodec([]byte("0123456789abcdef"))
	if err != nil {
		panic(err)
	}
	engine, err := runtime.New(runtime.Config{Store: store, Codec: codec, PollInterval: 10 * time.Millisecond})
	if err != nil {
		panic(err)
	}
	defer engine.Close()

	if err := runtime.RegisterUpdate[int, int](engine, "add", nil); err != nil {
		panic(err)
	}
	err = runtime.Register(engine, "tally", func(c *runtime.WorkflowContext, total int) (int, error) {
		for {
			u, err := runtime.AwaitUpdate[int, int](c, "add", "add")
			if err != nil {
				return 0, err
			}
			switch {
			case u.Request < 0:
				err = u.Fail(c, errors.New("negative amount"))
			case u.Request == 0:
				return total, u.Reply(c, total)
			default:
				total += u.Request
				err = u.Reply(c, total)
			}
			if err != nil {
				return 0, err
			}
		}
	})
	if err != nil {
		panic(err)
	}

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	go engine.Run(ctx)

	run, err := runtime.Start[int, int](ctx, engine, "tally", 100)
	if err != nil {
		panic(err)
	}
	for _, n := range []int{5, -3, 0} {
		_, _ = runtime.CallUpdate[int](ctx, engine, run.ID(), "add", n)
	}

	updates, err := engine.Updates(ctx, run.ID(), 0, 0)
	if err != nil {
		panic(err)
	}
	for _, u := range updates {
		req, reply, replyErr, err := engine.OpenUpdate(u)
		if err != nil {
			panic(err)
		}
		if replyErr != nil {
			fmt.Printf("%d %s %s: error %v\n", u.Seq, u.Name, req, replyErr)
			continue
		}
		fmt.Printf("%d %s %s: %s\n", u.Seq, u.Name, req, reply)
	}
	// Output:
	// 1 add 5: 105
	// 2 add -3: error negative amount
	// 3 add 0: 105
}
