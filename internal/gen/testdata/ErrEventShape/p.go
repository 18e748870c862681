// Package p changed the payload of event Ready, and of event Gone, without
// a new topic or a version bump: runs waiting on them, or holding a
// delivered payload, would decode the old shape into the new type.
package p

// Order is what Ship receives.
type Order struct{ ID string }

// Ship waits for its parcel to be ready.
//
//stem:workflow name=p.ship
func Ship(ctx *ShipContext, o Order) (string, error) {
	r, err := ctx.AwaitReady("ready", 0)
	return r.Carrier, err
}

// Ready was {Tracking string}.
//
//stem:event topic=p.ready
type Ready struct {
	Tracking int
	Carrier  string
}

// Gone changed at an explicit version.
//
//stem:event topic=p.gone version=3
type Gone struct{ At string }

// Same kept its shape.
//
//stem:event topic=p.same
type Same struct{ N int }
