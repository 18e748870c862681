package main

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/stores/memstore"
)

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	store := memstore.New(memstore.Options{})
	engine := func() *runtime.Engine {
		e, err := runtime.New(runtime.Config{Store: store, PollInterval: 10 * time.Millisecond})
		if err != nil {
			log.Fatal(err)
		}
		return e
	}
	result := func(e *runtime.Engine, run *FulfilRun, shelf string) {
		if err := SendReady(ctx, e, run.ID(), Ready{Shelf: shelf}); err != nil {
			log.Fatal(err)
		}
		out, err := run.Result(ctx)
		fmt.Printf("%s: %q %v\n", run.ID(), out, err)
	}

	// The previous build had version 1 only: its runs start, and run, on
	// FulfilV1.
	old := engine()
	if err := RegisterFulfilV1(old); err != nil {
		log.Fatal(err)
	}
	oldDone := make(chan error)
	go func() { oldDone <- old.Run(ctx) }()
	run, err := StartFulfil(ctx, old, Order{ID: "o-1", Items: []string{"book", "lamp"}}, runtime.WithID("o-1"))
	if err != nil {
		log.Fatal(err)
	}
	for {
		info, err := run.Info(ctx)
		if err != nil {
			log.Fatal(err)
		}
		if info.Status == runtime.StatusWaiting {
			fmt.Printf("%s: %s at version %d\n", info.ID, info.Status, info.Version)
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	old.Close() // the deploy, while o-1 waits for the warehouse
	if err := <-oldDone; err != nil {
		log.Fatal(err)
	}

	// This build registers both versions, one function each: the old
	// version's runs go on on FulfilV1, new runs start on the newest,
	// Fulfil.
	e := engine()
	defer e.Close()
	if err := RegisterWorkflows(e); err != nil {
		log.Fatal(err)
	}
	if err := RegisterFulfilV1(e); err != nil {
		fmt.Println("again:", err)
	}
	go e.Run(ctx)
	// o-1 drains on FulfilV1, where it started.
	run, err = GetFulfil(ctx, e, "o-1")
	if err != nil {
		log.Fatal(err)
	}
	result(e, run, "A1")
	run, err = StartFulfil(ctx, e, Order{ID: "o-2", Items: []string{"cup", "pot"}}, runtime.WithID("o-2"))
	if err != nil {
		log.Fatal(err)
	}
	result(e, run, "B2")
	fmt.Println("versions:", FulfilV1WorkflowVersion, FulfilWorkflowVersion, FulfilWorkflowName)
}
