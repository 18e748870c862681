// Command ship tells runs of docs.ship that their order left.
package main

import (
	"context"
	"log"

	d "example.com/stemcase"
	"github.com/stemflow/stem/runtime"
)

func main() {
	ctx := context.Background()
	var e *runtime.Engine
	if err := d.SendShipped(ctx, e, "run-1", d.Shipped{Tracking: "T-1"}); err != nil {
		log.Fatal(err)
	}
	if err := e.SendEvent(ctx, "run-1", "docs.raw", d.Shipped{}); err != nil {
		log.Fatal(err)
	}
}
