// Package bump changed the output of step charge and bumped its version,
// so the manifest keeps the old key's shape and records the new one.
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
