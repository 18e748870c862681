package p

import "github.com/stemflow/stem/runtime"

type Steps struct{}

type Other struct{}

type Gen[T any] struct{}

//stem:step name=noctx
func NoCtx(n int) (int, error) { return n, nil }

//stem:step name=noparams
func NoParams() error { return nil }

//stem:step name=noresult
func NoResult(ctx runtime.StepContext) {}

//stem:step name=three
func Three(ctx runtime.StepContext) (int, int, error) { return 0, 0, nil }

//stem:step name=noerror
func NoError(ctx runtime.StepContext) int { return 0 }

//stem:step name=variadic
func Variadic(ctx runtime.StepContext, xs ...int) error { return nil }

//stem:step name=generic
func Generic[T any](ctx runtime.StepContext, x T) error { return nil }

//stem:step name=first
func (s *Steps) First(ctx runtime.StepContext) error { return nil }

//stem:step name=other
func (o Other) Second(ctx runtime.StepContext) error { return nil }

//stem:step name=genrecv
func (g *Gen[T]) Third(ctx runtime.StepContext) error { return nil }
