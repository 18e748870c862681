package orders

import (
	"context"
	"errors"

	"github.com/stemflow/stem/runtime"
)

// Warehouse simulates the warehouse: it tells waiting orders that their
// shipment is ready, with the typed events generated for ShipmentReady.
type Warehouse struct {
	Engine *runtime.Engine
}

// TrackingNumber is the tracking number the simulated warehouse gives an
// order.
func TrackingNumber(orderID string) string { return "TRK-" + orderID }

// Ship tells the run runID (a run of Fulfil for order orderID) that its
// shipment is ready. It may be called before the run waits for it: the
// event is kept until it does.
func (w Warehouse) Ship(ctx context.Context, runID, orderID string) error {
	if w.Engine == nil {
		return errNoEngine
	}
	return SendShipmentReady(ctx, w.Engine, runID, ShipmentReady{OrderID: orderID, Tracking: TrackingNumber(orderID)})
}

// ShipAll tells every run waiting for its shipment right now that it is
// ready, all on one truck, and returns how many it reached.
func (w Warehouse) ShipAll(ctx context.Context, truck string) (int, error) {
	if w.Engine == nil {
		return 0, errNoEngine
	}
	return EmitShipmentReady(ctx, w.Engine, ShipmentReady{Tracking: truck})
}

var errNoEngine = errors.New("orders: Warehouse.Engine is nil")
