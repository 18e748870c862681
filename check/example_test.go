package check_test

import (
	"context"
	"fmt"
	"time"

	"github.com/stemflow/stem/check"
	"github.com/stemflow/stem/storage"
	"github.com/stemflow/stem/stores/memstore"
)

// A run waits on an event whose type the new build dropped, holding a
// step result of a shape the build changed without a version bump: the
// check reports both, and what to do.
func Example() {
	ctx := context.Background()
	store := memstore.New(memstore.Options{})
	defer store.Close()

	// A run as an older build left it: a step done, waiting for an event.
	store.CreateRuns(ctx, []storage.NewRun{{ID: "order-1", Workflow: "orders.fulfil", Version: 2, Input: []byte(`{"id":"order-1"}`)}})
	claimed, _ := store.Claim(ctx, storage.ClaimRequest{Owner: "worker", Workflows: []string{"orders.fulfil"}, Limit: 1, LeaseFor: time.Minute})
	lease := claimed[0].Lease
	store.Checkpoint(ctx, storage.CheckpointRequest{Lease: lease, LeaseFor: time.Minute,
		Checkpoint: storage.Checkpoint{Key: "reserve@v1", Kind: storage.KindStep, Output: []byte(`{"hold":{"id":"h-1"}}`)}})
	store.Suspend(ctx, storage.SuspendRequest{Lease: lease, LeaseFor: time.Minute,
		Wait: &storage.Wait{Key: "ship", Topic: "orders.shipment-ready"}})

	// The new build's manifest (check.Load reads them from a source tree).
	build := &check.Build{}
	err := build.Add("orders/stem.manifest.json", []byte(`{
  "comment": "",
  "format": 2,
  "workflows": [{"key": "orders.fulfil@v2", "input": "{id:string}", "output": "{tracking:string}"}],
  "steps": [{"key": "reserve@v1", "input": "({id:string})", "output": "{hold:string}"}],
  "events": [{"key": "orders.shipment-ready@v1", "payload": "{tracking:string}", "retired": true}]
}`))
	if err != nil {
		fmt.Println(err)
		return
	}

	report, err := check.Store(ctx, store, build, check.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, p := range report.Problems {
		fmt.Printf("%s %s %s: %s\n  fix: %s\n", p.RunID, p.Kind, p.Key, p.Reason, p.Fix)
	}
	fmt.Printf("%d of %d in-flight runs could not continue\n", report.Stranded, report.Checked)
	// Output:
	// order-1 event orders.shipment-ready: waits (as ship) on event topic orders.shipment-ready, which the build retired: no //stem:event type declares it now
	//   fix: keep the event type (topic=orders.shipment-ready) in the build until these runs have it, deliver the event before the deploy, or terminate the runs
	// order-1 shape reserve@v1: the step's stored result does not decode into the build's result type: hold: want string, have an object
	//   fix: the result type of step reserve@v1 changed shape without a version bump: bump the step's version= so these runs run it again
	// 1 of 1 in-flight runs could not continue
}
