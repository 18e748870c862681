package p

import "github.com/stemflow/stem/runtime"

type Steps struct{}

//stem:workflow name=p.m
func (s *Steps) M(ctx runtime.StepContext, n int) (int, error) { return n, nil }

//stem:event topic=p.f
func F() {}

//stem:step name=t
type T struct{}

//stem:step name=v
var V = 1

// Two has two directives.
//
//stem:step name=two
//stem:step name=three
func Two(ctx runtime.StepContext) error { return nil }

//stem:event topic=p.grouped
type (
	G1 struct{ X int }
	G2 struct{ Y int }
)

//stem:step name=floating

// Floating's doc comment is separated from the directive by a blank line.
func Floating(ctx runtime.StepContext) error {
	//stem:step name=inside
	return nil
}
