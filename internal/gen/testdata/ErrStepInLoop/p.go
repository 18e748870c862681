// Package p calls steps that are not autoversion in loops: every call
// after the first would fail at run time, so go generate reports each, at
// the method's name. Calls that run once are fine: in a loop's init or
// range expression, or followed in the loop's body by a return; so are
// autoversion steps, sleeps, waits, timers and child calls.
package p

import (
	"time"

	"github.com/stemflow/stem/runtime"
)

// Order is what Fulfil receives.
type Order struct{ Items []string }

// Fulfil calls steps in every kind of loop.
//
//stem:workflow name=orders.fulfil
func Fulfil(ctx *FulfilContext, o Order) (int, error) {
	for _, it := range o.Items {
		if _, err := ctx.Reserve(it); err != nil {
			return 0, err
		}
		_ = ctx.ReserveAsync(it)
		if _, err := ctx.Pack(it); err != nil { // autoversion: fine
			return 0, err
		}
		if err := ctx.Sleep("cool-off", time.Second); err != nil { // numbered by the runtime
			return 0, err
		}
		if _, err := ctx.AwaitReady("ready", time.Minute); err != nil {
			return 0, err
		}
		_ = ctx.Timer("tick", time.Second)
	}
	for i := 0; i < 3; i++ {
		func() {
			ctx.Reserve("in a closure")
		}()
	}
	for n := 0; ctx.Count() != nil; n++ { // the condition runs on every pass
	}
	for i, _ := ctx.Count(); i == 0; ctx.Count() { // the init runs once, the post statement every pass
	}
	for range ctx.Count() { // the range expression runs once
	}
	for {
		r, err := ctx.Reserve("once") // a return follows: fine
		if err != nil {
			return 0, err
		}
		return len(r), nil
	}
}

// Poll retries in a loop, and nests loops.
//
//stem:workflow name=orders.poll
func Poll(ctx *PollContext, o Order) (int, error) {
	for {
		n, err := ctx.Count()
		if err != nil {
			continue // the continue comes before the return
		}
		return n, nil
	}
	for _, a := range o.Items {
		for _, b := range o.Items {
			switch a {
			case b:
				ctx.Reserve(a) // the return after it leaves every loop
				return 0, nil
			}
		}
	}
	func() {
		for range 2 {
			ctx.Count() // a loop inside a function literal
			return      // leaves the literal only, but the loop with it
		}
	}()
	for range 2 {
		func() {
			ctx.Count()
			return // leaves the literal, which the loop calls again
		}()
	}
	return 0, nil
}

// Reserve is not autoversion.
//
//stem:step name=reserve
func Reserve(ctx runtime.StepContext, item string) (string, error) { return item, nil }

// Pack is autoversion.
//
//stem:step name=pack autoversion
func Pack(ctx runtime.StepContext, item string) (string, error) { return item, nil }

// Count counts, at version 2.
//
//stem:step name=count version=2
func Count(ctx runtime.StepContext) (int, error) { return 0, nil }

// Ready is an event.
//
//stem:event topic=orders.ready
type Ready struct{ Dock string }
