package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/stores/memstore"
)

// A pick-first: the quickest of three mirrors answers, SelectCancel
// cancels the two others (their contexts' cause is ErrCanceled), and the
// run ends without waiting for them.
func ExampleSelectCancel() {
	store := memstore.New(memstore.Options{})
	defer store.Close()
	engine, err := runtime.New(runtime.Config{Store: store, PollInterval: 10 * time.Millisecond})
	if err != nil {
		panic(err)
	}
	defer engine.Close()

	err = runtime.Register(engine, "fetch", func(c *runtime.WorkflowContext, path string) (string, error) {
		opts := runtime.StepOptions{Autoversion: true, Retries: 3}
		fetch := func(mirror string) *runtime.Future[string] {
			return runtime.StepAsync(c, "fetch@v1", opts, func(sc runtime.StepContext) (string, error) {
				if mirror != "near" {
					<-sc.Done() // a slow mirror: answers only when cancelled
					return "", context.Cause(sc)
				}
				return mirror + ":" + path, nil
			})
		}
		mirrors := []*runtime.Future[string]{fetch("far"), fetch("near"), fetch("farther")}
		i, err := runtime.SelectCancel(c, "first-answer", mirrors[0], mirrors[1], mirrors[2])
		if err != nil {
			return "", err
		}
		_, lost := mirrors[0].Await()
		body, err := mirrors[i].Await()
		return fmt.Sprintf("%s (mirror 0 canceled: %v)", body, errors.Is(lost, runtime.ErrCanceled)), err
	})
	if err != nil {
		panic(err)
	}

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	go engine.Run(ctx)

	run, err := runtime.Start[string, string](ctx, engine, "fetch", "/index.html")
	if err != nil {
		panic(err)
	}
	out, err := run.Result(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println(out)
	// Output:
	// near:/index.html (mirror 0 canceled: true)
}
