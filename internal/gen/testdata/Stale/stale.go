// Package stale has a generated file from an older version of its code:
// stemgen must load the package anyway and replace the file.
package stale

import "github.com/stemflow/stem/runtime"

// Steps holds the steps.
type Steps struct{}

// Flow calls a step the stale file does not know.
//
//stem:workflow name=stale.flow
func Flow(ctx *FlowContext, n int) (int, error) {
	return ctx.Double(n)
}

// Double doubles.
//
//stem:step name=double
func (s *Steps) Double(ctx runtime.StepContext, n int) (int, error) { return 2 * n, nil }

func use() {
	_, _ = StartFlow(nil, nil, 1)
	_ = StepDouble
}
