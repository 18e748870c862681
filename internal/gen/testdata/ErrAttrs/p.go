package p

import "github.com/stemflow/stem/runtime"

// In is the input of the workflows.
type In struct {
	Customer string
	Total    float64
}

// Steps holds the steps.
type Steps struct{}

// Misspelled directives and keys, a bad name and type, a missing type.
//
//stem:workflow name=p.a
//stem:atr name=x type=string
//stem:attrs name=y type=string
//stem:attr name=z typ=string
//stem:attr name=a@b type=string
//stem:attr name=w type=int
//stem:attr name=v
//stem:attr name=u type=number form=Total
func A(ctx *AContext, in In) (int, error) { return 0, nil }

// A name twice, two names with one setter, and a setter a method has.
//
//stem:workflow name=p.b
//stem:attr name=stage type=string
//stem:attr name=stage type=string
//stem:attr name=order.id type=string
//stem:attr name=order_id type=string
//stem:attr name=done type=bool
func B(ctx *BContext, in In) (int, error) { return 0, nil }

// SetDoneAttr is the user's own.
func (c *BContext) SetDoneAttr() {}

// One name, two types in the package.
//
//stem:workflow name=p.c
//stem:attr name=stage type=number
//stem:attr name=customer from=Customer
func C(ctx *CContext, in In) (int, error) { return 0, nil }

// Before the workflow's directive.
//
//stem:attr name=early type=string
//stem:workflow name=p.d
func D(ctx *DContext, in In) (int, error) { return 0, nil }

// Not a workflow.
//
//stem:step name=s
//stem:attr name=step type=string
func (s *Steps) S(ctx runtime.StepContext) error { return nil }

// Not annotated.
//
//stem:attr name=plain type=string
func Plain() {}

// T is not a workflow.
//
//stem:attr name=t type=string
type T struct{}

//stem:attr name=floating type=string

// Too many.
//
//stem:workflow name=p.e
//stem:attr name=a0 type=bool
//stem:attr name=a1 type=bool
//stem:attr name=a2 type=bool
//stem:attr name=a3 type=bool
//stem:attr name=a4 type=bool
//stem:attr name=a5 type=bool
//stem:attr name=a6 type=bool
//stem:attr name=a7 type=bool
//stem:attr name=a8 type=bool
//stem:attr name=a9 type=bool
//stem:attr name=a10 type=bool
//stem:attr name=a11 type=bool
//stem:attr name=a12 type=bool
//stem:attr name=a13 type=bool
//stem:attr name=a14 type=bool
//stem:attr name=a15 type=bool
//stem:attr name=a16 type=bool
//stem:attr name=a17 type=bool
//stem:attr name=a18 type=bool
//stem:attr name=a19 type=bool
//stem:attr name=a20 type=bool
//stem:attr name=a21 type=bool
//stem:attr name=a22 type=bool
//stem:attr name=a23 type=bool
//stem:attr name=a24 type=bool
//stem:attr name=a25 type=bool
//stem:attr name=a26 type=bool
//stem:attr name=a27 type=bool
//stem:attr name=a28 type=bool
//stem:attr name=a29 type=bool
//stem:attr name=a30 type=bool
//stem:attr name=a31 type=bool
//stem:attr name=a32 type=bool
func E(ctx *EContext, in In) (int, error) { return 0, nil }

// A step whose method is a setter.
//
//stem:step name=f
func (s *Steps) SetFooAttr(ctx runtime.StepContext) error { return nil }

// Its attribute's setter is that step's method.
//
//stem:workflow name=p.f
//stem:attr name=foo type=string
func F(ctx *FContext, in In) (int, error) { return 0, nil }
