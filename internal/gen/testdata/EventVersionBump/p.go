// Package p changed the payload of event Ready and bumped its version=
// once no run in flight held one: the manifest keeps the old key, retired,
// and records the new shape under the new key.
package p

// Ship waits for its parcel and returns the carrier.
//
//stem:workflow name=p.ship
func Ship(ctx *ShipContext, id string) (string, error) {
	r, err := ctx.AwaitReady("ready", 0)
	return r.Carrier, err
}

// Ready was {Tracking string} at version 1.
//
//stem:event topic=p.ready version=2
type Ready struct {
	Tracking int
	Carrier  string
}
