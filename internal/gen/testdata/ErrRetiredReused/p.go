// Package p brought back step wrap and event p.gone, both retired, with
// other shapes at their old keys: stored runs may still hold them.
package p

import "github.com/stemflow/stem/runtime"

// Ship wraps.
//
//stem:workflow name=p.ship version=2
func Ship(ctx *ShipContext, n int) (string, error) {
	if err := ctx.Wrap(n); err != nil {
		return "", err
	}
	g, err := ctx.AwaitGone("gone", 0)
	return g.Where, err
}

// Wrap took a string, and was autoversion.
//
//stem:step name=wrap
func Wrap(ctx runtime.StepContext, n int) error { return nil }

// Gone's At was a string.
//
//stem:event topic=p.gone
type Gone struct {
	At    int
	Where string
}
