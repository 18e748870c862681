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
	e, err := runtime.New(runtime.Config{Store: memstore.New(memstore.Options{}), PollInterval: 10 * time.Millisecond})
	if err != nil {
		log.Fatal(err)
	}
	steps := &Steps{}
	if err := RegisterWorkflows(e, steps); err != nil {
		log.Fatal(err)
	}
	done := make(chan error)
	go func() { done <- e.Run(ctx) }()
	defer func() { e.Close(); <-done }()

	cart := Cart{ID: "c-1", Customer: "ada", Lines: []Line{{SKU: "book", Qty: 2, Cents: 1500}, {SKU: "pen", Qty: 1, Cents: 200}}}
	run, err := StartCheckout(ctx, e, cart, runtime.WithID("cart-1"))
	if err != nil {
		log.Fatal(err)
	}
	// The payment child's ID derives from its parent's and the call's name.
	for {
		err := SendPaymentConfirmed(ctx, e, "cart-1/pay", PaymentConfirmed{Reference: "ref-1"})
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			log.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	rec, err := run.Result(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("receipt: %+v\n", rec)
	// The audit the checkout awaited through its handle, from outside.
	audit, err := GetAudit(ctx, e, rec.AuditRun)
	if err != nil {
		log.Fatal(err)
	}
	id, err := audit.Result(ctx)
	fmt.Println("audit:", id, err, "same as awaited:", id == rec.AuditID)

	refund, err := StartRefund(ctx, e, RefundRequest{PaymentID: rec.Payment.ID, Cents: 200, Reason: "pen broke"}, runtime.WithID("refund-1"))
	if err != nil {
		log.Fatal(err)
	}
	if err := SendRefundApproved(ctx, e, refund.ID(), RefundApproved{By: "grace"}); err != nil {
		log.Fatal(err)
	}
	ret, err := refund.Result(ctx)
	fmt.Printf("refund: %+v %v\n", ret, err)

	for _, id := range []string{"cart-1", "cart-1/pay", "cart-1/deliver", "refund-1"} {
		steps, err := e.ListSteps(ctx, id, 0)
		if err != nil {
			log.Fatal(err)
		}
		var keys []string
		for _, s := range steps {
			keys = append(keys, s.Key)
		}
		fmt.Println("steps of", id+":", keys)
	}
	// What the engine recorded in the store for tools that do not run the
	// workflows: each workflow's version and shapes, each event's payload.
	catalog, err := e.Catalog(ctx)
	if err != nil {
		log.Fatal(err)
	}
	for _, w := range catalog.Workflows {
		fmt.Printf("catalog: workflow %s v%d, schemas %v\n", w.Name, w.Version, len(w.InputSchema) > 0 && len(w.OutputSchema) > 0)
	}
	for _, ev := range catalog.Events {
		fmt.Printf("catalog: event %s, schema %v\n", ev.Topic, len(ev.PayloadSchema) > 0)
	}
	// Keys and idempotency keys, from outside the runs.
	fmt.Println("keys:", StepValidate, StepPrice, StepPriceIteration(1), StepCapture, StepReturn, StepNotify)
	fmt.Println("reserve hold:", run.IdempotencyKey(StepReserve, "hold"))
	fmt.Println("price #1:", run.IdempotencyKey(StepPriceIteration(1), ""))
	fmt.Println("authorize:", runtime.IdempotencyKey(PayWorkflowName, "cart-1/pay", StepAuthorize, "auth"))
	steps.mu.Lock()
	defer steps.mu.Unlock()
	for _, l := range steps.log {
		fmt.Println("step:", l)
	}
}
