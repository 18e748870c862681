// Package bump changed the output of step charge and bumped its version,
// so the manifest keeps the old key's shape and records the new one; so
// did workflow track, whose progress type changed.
package bump

import "github.com/stemflow/stem/runtime"

// Money is an amount in cents and its currency.
type Money struct {
	Cents    int64
	Currency string
}

// Pay charges.
//
//stem:workflow name=bump.pay
func Pay(ctx *PayContext, amount int64) (Money, error) {
	return ctx.Charge(amount)
}

// Charge used to return the cents only.
//
//stem:step name=charge version=2
func Charge(ctx runtime.StepContext, amount int64) (Money, error) {
	return Money{Cents: amount, Currency: "EUR"}, nil
}

// Status is what Track publishes; it gained Of, so Track's version was
// bumped.
type Status struct{ Done, Of int }

// Track publishes its progress.
//
//stem:workflow name=bump.track version=2 timeout=90s progress=Status
func Track(ctx *TrackContext, n int) (int, error) {
	if err := ctx.SetProgress(Status{Done: n, Of: n}); err != nil {
		return 0, err
	}
	return n, nil
}

// Quiet no longer publishes progress: the manifest keeps the shape it
// recorded, so publishing another later needs a bump.
//
//stem:workflow name=bump.quiet
func Quiet(ctx *QuietContext, n int) (int, error) { return n, nil }
