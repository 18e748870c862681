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

//stem:step name=refund
func Refund(ctx runtime.StepContext, m Money) error { return nil }
