package p

import "github.com/stemflow/stem/runtime"

//stem:workflow nmae=p.flow version=0
func Flow(ctx *FlowContext, n int) (int, error) { return n, nil }

//stem:step name=a@b retries=-1 backoff=1s..x timeout=0s
func A(ctx runtime.StepContext) error { return nil }

//stem:stpe name=b
func B(ctx runtime.StepContext) error { return nil }

// stem:step name=c
func C(ctx runtime.StepContext) error { return nil }

//stem:step name=d name=e autoversion=true version
func D(ctx runtime.StepContext) error { return nil }

//stem:event topic=stem.internal
type E struct{ X int }

//stem:event
type F struct{ X int }
