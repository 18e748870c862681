package main

import (
	"context"
	"fmt"
	"log"
	"slices"
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
	steps := &Steps{attempts: map[string]int{}}
	if err := RegisterWorkflows(e, steps); err != nil {
		log.Fatal(err)
	}
	done := make(chan error)
	go func() { done <- e.Run(ctx) }()

	run, err := StartFulfil(ctx, e, Order{ID: "o-1", Items: []string{"book", "lamp"}, Amount: 4200}, runtime.WithID("order-1"))
	if err != nil {
		log.Fatal(err)
	}
	// Sent before the run waits for it: kept until it does.
	if err := SendShipmentReady(ctx, e, run.ID(), ShipmentReady{Tracking: "T-1"}); err != nil {
		log.Fatal(err)
	}
	rec, err := run.Result(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("receipt: %+v\n", rec)
	// The step futures ran side by side: their log is in no set order.
	slices.Sort(steps.log)
	for _, l := range steps.log {
		fmt.Println("step:", l)
	}
	p, ok, err := run.Progress(ctx)
	fmt.Printf("progress: %+v %v %v\n", p, ok, err)
	p, err = run.WaitProgress(ctx, FulfilProgress{Stage: "packed", Packed: 2})
	fmt.Printf("waited progress: %+v %v\n", p, err)
	fmt.Println("notified:", notified)
	fmt.Println("pack key #1:", run.IdempotencyKey(StepPackIteration(1), ""))
	fmt.Println("keys:", StepReserve, StepCharge, StepPack, StepPackIteration(1), RefundWorkflowName)

	again, err := GetFulfil(ctx, e, "order-1")
	if err != nil {
		log.Fatal(err)
	}
	info, err := again.Info(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("status:", info.Status, "deadline set:", info.Deadline != nil)
	child, err := GetRefund(ctx, e, "order-1/goodwill")
	if err != nil {
		log.Fatal(err)
	}
	res, err := child.Result(ctx)
	fmt.Printf("child: %+v %v\n", res, err)
	childInfo, err := child.Info(ctx)
	fmt.Println("child executions:", childInfo.Execution, err)
	if _, err := GetRefund(ctx, e, "order-1"); err != nil {
		fmt.Println("wrong workflow:", err)
	}
	n, err := EmitShipmentReady(ctx, e, ShipmentReady{Tracking: "late"})
	fmt.Println("emitted to:", n, err)

	batch, err := StartRefundBatch(ctx, e, []runtime.BatchItem[RefundInput]{{ID: "r-1", Input: RefundInput{OrderID: "o-2"}}, {ID: "r-2", Input: RefundInput{OrderID: "o-3"}}})
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range batch {
		res, err := r.Result(ctx)
		fmt.Printf("batch %s: %+v %v\n", r.ID(), res, err)
	}
	if err := RegisterFulfil(e, nil); err != nil {
		fmt.Println("nil steps:", err)
	}
	e.Close()
	<-done
}
