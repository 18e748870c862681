// Command flows has workflows that call each other as children and nothing
// else: no steps, no events, so its contexts have only the runtime's methods
// and the child calls.
package main

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/stores/memstore"
)

// Outer runs Inner as a child, starts another without waiting (abandoned to
// its own end, since Outer ends first), and reports where it ran.
//
//stem:workflow name=flows.outer
func Outer(ctx *OuterContext, n int) (string, error) {
	if err := ctx.Sleep("nap", time.Millisecond); err != nil {
		return "", err
	}
	got, err := ctx.CallInner("double", n)
	if err != nil {
		return "", err
	}
	later, err := ctx.StartInnerChild("later", got, runtime.ParentClose(runtime.ParentCloseAbandon))
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s ran %s: %d, then started %s", ctx.Workflow(), ctx.RunID(), got, later.ID()), nil
}

// Inner doubles n, and says which run is its parent.
//
//stem:workflow name=flows.inner
func Inner(ctx *InnerContext, n int) (int, error) {
	if ctx.ParentID() == "" {
		return 0, runtime.Permanent(fmt.Errorf("inner has no parent"))
	}
	return 2 * n, nil
}

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	e, err := runtime.New(runtime.Config{Store: memstore.New(memstore.Options{}), PollInterval: 10 * time.Millisecond})
	if err != nil {
		log.Fatal(err)
	}
	if err := RegisterWorkflows(e); err != nil {
		log.Fatal(err)
	}
	done := make(chan error)
	go func() { done <- e.Run(ctx) }()
	run, err := StartOuter(ctx, e, 21, runtime.WithID("outer-1"))
	if err != nil {
		log.Fatal(err)
	}
	out, err := run.Result(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(out)
	later, err := GetInner(ctx, e, "outer-1/later")
	if err != nil {
		log.Fatal(err)
	}
	n, err := later.Result(ctx)
	fmt.Println("later:", n, err)
	e.Close()
	<-done
}
