package p

import "github.com/stemflow/stem/runtime"

// Money is an amount.
type Money struct {
	Cents    int64
	Currency string
}

// Pay takes cents now.
//
//stem:workflow name=p.pay
func Pay(ctx *PayContext, cents int64) (Money, error) {
	return ctx.Charge(cents)
}

// Charge returns Money now, but kept its version.
//
//stem:step name=charge version=2
func Charge(ctx runtime.StepContext, amount int64) (Money, error) {
	return Money{Cents: amount}, nil
}

// Refund no longer takes a note: a removed field.
//
//stem:step name=refund
func Refund(ctx runtime.StepContext, m Money) error { return nil }

// Status is what Track publishes: it gained a field, and Done was a
// string.
type Status struct{ Done, Of int }

// Track publishes its progress, whose shape changed.
//
//stem:workflow name=p.track version=3 progress=Status
func Track(ctx *TrackContext, n int) (int, error) { return n, nil }

// Quiet no longer publishes progress, which needs no bump.
//
//stem:workflow name=p.quiet
func Quiet(ctx *QuietContext, n int) (int, error) { return n, nil }

// Loud publishes progress now, which needs no bump either.
//
//stem:workflow name=p.loud progress=Status
func Loud(ctx *LoudContext, n int) (int, error) { return n, nil }
