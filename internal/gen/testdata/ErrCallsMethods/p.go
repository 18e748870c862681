package p

import "github.com/stemflow/stem/runtime"

//stem:workflow name=p.w
func W(ctx *WContext, n int) (int, error) { return ctx.Double(n) }

//stem:step name=double
func Double(ctx runtime.StepContext, n int) (int, error) { return 2 * n, nil }

// Double on the type holding the step methods clashes with the step's.
func (c *stemCalls) Double(n int) (int, error) { return n, nil }

// Sleep would make the runtime's Sleep ambiguous on every context.
func (c *stemCalls) Sleep() {}

// Helper is fine.
func (c *stemCalls) Helper() {}
