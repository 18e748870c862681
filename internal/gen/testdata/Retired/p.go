// Package p removed version 1 of workflow p.ship once its runs drained,
// and step wrap and event p.gone with it; step label, removed before,
// came back with the shape it had. The manifest keeps every key: the
// removed ones retired, the one that came back no longer.
package p

import "github.com/stemflow/stem/runtime"

// Ship packs and labels.
//
//stem:workflow name=p.ship version=2
func Ship(ctx *ShipContext, item string) (string, error) {
	p, err := ctx.Pack(item)
	if err != nil {
		return "", err
	}
	return ctx.Label(p)
}

//stem:step name=pack
func Pack(ctx runtime.StepContext, item string) (string, error) { return "[" + item + "]", nil }

//stem:step name=label
func Label(ctx runtime.StepContext, parcel string) (string, error) { return parcel + "#", nil }
