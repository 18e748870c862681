package main

import "github.com/stemflow/stem/runtime"

// The runtime's methods and the embedded *runtime.WorkflowContext reach
// every workflow context along one path only: none of these selectors is
// ambiguous, so this file compiles.
var (
	_ = []any{
		(*FulfilContext).Context, (*FulfilContext).Logger, (*FulfilContext).ParentID, (*FulfilContext).RunID,
		(*FulfilContext).Sleep, (*FulfilContext).SleepUntil, (*FulfilContext).Timer, (*FulfilContext).Workflow,
		(*RefundContext).Context, (*RefundContext).Logger, (*RefundContext).ParentID, (*RefundContext).RunID,
		(*RefundContext).Sleep, (*RefundContext).SleepUntil, (*RefundContext).Timer, (*RefundContext).Workflow,
	}
	_ = func(f *FulfilContext, r *RefundContext) []*runtime.WorkflowContext {
		return []*runtime.WorkflowContext{f.WorkflowContext, r.WorkflowContext}
	}
)
