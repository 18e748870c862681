package orders_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"time"

	"github.com/stemflow/stem/example/orders/orders"
	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/stores/memstore"
)

// Example runs an order on memstore against the fake payment service.
func Example() {
	ctx := context.Background()
	payments := orders.NewPaymentService(1, 0) // the first charge request fails
	srv := httptest.NewServer(payments)
	defer srv.Close()

	engine, err := runtime.New(runtime.Config{Store: memstore.New(memstore.Options{}), PollInterval: 10 * time.Millisecond})
	if err != nil {
		panic(err)
	}
	if err := engine.RegisterQueue(orders.FulfilQueue); err != nil {
		panic(err)
	}
	steps := orders.NewSteps(orders.NewPaymentsClient(srv.URL, srv.Client()))
	if err := orders.RegisterWorkflows(engine, steps); err != nil {
		panic(err)
	}
	done := make(chan error)
	go func() { done <- engine.Run(ctx) }()
	defer func() { engine.Close(); <-done }()

	order := orders.Order{
		ID: "42", Customer: "grace",
		Items:   []orders.Item{{SKU: "mug", Qty: 2, PriceCents: 900}},
		CoolOff: time.Millisecond,
	}
	run, err := orders.StartFulfil(ctx, engine, order, runtime.WithID("order-42"))
	if err != nil {
		panic(err)
	}
	if err := (orders.Warehouse{Engine: engine}).Ship(ctx, run.ID(), order.ID); err != nil {
		panic(err)
	}
	receipt, err := run.Result(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println(receipt.Payment.ID, receipt.Payment.AmountCents, receipt.Shipping.Carrier, receipt.Tracking)
	fmt.Print(receipt.Invoice.Text)
	fmt.Println(run.IdempotencyKey(orders.StepCharge, "payment"))
	progress, _, err := run.Progress(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Printf("%+v\n", progress)
	info, err := run.Info(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println(info.Attributes) // what listings filter on: stem runs --where customer=grace
	// Output:
	// pay-1 1800 post TRK-42
	// Invoice for order 42 (grace), payment pay-1
	//   2 x mug [mug-0]
	// orders.fulfil/order-42/charge@v1/payment
	// {Stage:done Packed:1 Lines:1}
	// [customer=grace order=42 stage=done total=18]
}
