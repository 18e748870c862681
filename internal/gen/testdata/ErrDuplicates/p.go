package p

import "github.com/stemflow/stem/runtime"

//stem:workflow name=p.same
func A(ctx *AContext, n int) (int, error) { return n, nil }

//stem:workflow name=p.same
func B(ctx *BContext, n int) (int, error) { return n, nil }

//stem:step name=s
func S1(ctx runtime.StepContext) error { return nil }

//stem:step name=s version=2
func S2(ctx runtime.StepContext) error { return nil }

//stem:step name=s
func S3(ctx runtime.StepContext) error { return nil }

//stem:event topic=t
type E1 struct{ X int }

//stem:event topic=t
type E2 struct{ X int }
