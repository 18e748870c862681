// Package p names its workflow and step functions as the generated code
// names its locals: the generated code must still compile, and call them.
package p

import (
	"errors"

	"github.com/stemflow/stem/runtime"
)

// in doubles n through its steps.
//
//stem:workflow name=p.in
func in(ctx *InContext, n int) (int, error) {
	a, err := ctx.c(n)
	if err != nil {
		return 0, err
	}
	b, err := ctx.e(a)
	if err != nil {
		return 0, err
	}
	return ctx.sc(b)
}

// c adds one.
//
//stem:step name=c
func c(ctx runtime.StepContext, n int) (int, error) { return n + 1, nil }

// e doubles.
//
//stem:step name=e
func e(ctx runtime.StepContext, n int) (int, error) { return 2 * n, nil }

// sc subtracts two.
//
//stem:step name=sc
func sc(ctx runtime.StepContext, n int) (int, error) { return n - 2, nil }

// ask asks a run of in for a number.
//
//stem:update name=p.ask reply=answer validate=req
type ask struct{ N int }

type answer struct{ N int }

// req refuses a negative ask.
func req(a ask) error {
	if a.N < 0 {
		return errors.New("negative")
	}
	return nil
}
