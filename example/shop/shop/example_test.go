package shop_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/stemflow/stem/example/shop/shop"
	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/stores/sqlitestore"
)

// Example places an order in a SQLite store of its own, its row and its
// run in one transaction, and waits for its payment. Placed again, it is
// left as it is.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "shop-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	st, err := sqlitestore.Open(filepath.Join(dir, "shop.db"), sqlitestore.Options{})
	if err != nil {
		panic(err)
	}
	defer st.Close()
	engine, err := runtime.New(runtime.Config{Store: st, PollInterval: 10 * time.Millisecond})
	if err != nil {
		panic(err)
	}
	if err := shop.RegisterWorkflows(engine); err != nil {
		panic(err)
	}
	if err := shop.CreateTables(ctx, engine); err != nil {
		panic(err)
	}
	work, stop := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- engine.Run(work) }()
	defer func() { stop(); <-done; engine.Close() }()

	o := shop.Order{ID: "order-0001", Customer: "ada", AmountCents: 12000}
	placed, err := shop.Place(ctx, engine, o)
	if err != nil {
		panic(err)
	}
	run, err := shop.GetPlaceOrder(ctx, engine, o.ID)
	if err != nil {
		panic(err)
	}
	receipt, err := run.Result(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println(placed, receipt.OrderID, receipt.PaymentID, receipt.AmountCents)
	again, err := shop.Place(ctx, engine, o)
	if err != nil {
		panic(err)
	}
	fmt.Println(again)
	// Output:
	// true order-0001 1 11400
	// false
}
