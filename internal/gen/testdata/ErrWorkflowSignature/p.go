package p

import "context"

//stem:workflow name=p.few
func Few(ctx *FewContext) (int, error) { return 0, nil }

//stem:workflow name=p.ctx
func WrongCtx(ctx context.Context, n int) (int, error) { return 0, nil }

//stem:workflow name=p.noerr
func NoErr(ctx *NoErrContext, n int) int { return 0 }

//stem:workflow name=p.generic
func Generic[T any](ctx *GenericContext, n T) (T, error) { return n, nil }

//stem:workflow name=p.variadic
func Variadic(ctx *VariadicContext, n ...int) (int, error) { return 0, nil }

//stem:workflow name=p.value
func Value(ctx ValueContext, n int) (int, error) { return 0, nil }
