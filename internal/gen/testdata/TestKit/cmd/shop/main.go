// Command shop starts a checkout: a program that imports the workflow
// package, and so must not link its test helpers.
package main

import (
	"context"
	"fmt"
	"log"

	shop "example.com/stemcase"
	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/stores/memstore"
)

func main() {
	e, err := runtime.New(runtime.Config{Store: memstore.New(memstore.Options{})})
	if err != nil {
		log.Fatal(err)
	}
	if err := shop.RegisterWorkflows(e, shop.NewSteps()); err != nil {
		log.Fatal(err)
	}
	run, err := shop.StartCheckout(context.Background(), e, shop.Order{ID: "o-1"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(run.ID())
}
