package runtime

import (
	"fmt"
	"strconv"
)

// AwaitAll waits until every one of futures has its result, awaits each in
// order, and returns their values in the futures' order with the error of
// the first (in argument order) that failed, or nil: a typed All for
// futures of one result type, so a []*Future[T] needs no copying into a
// []Awaitable. A value whose future failed is T's zero value. Every future
// is awaited here, once: one awaited before is ErrInvalidArgument, as a
// second Await is. Futures of more than one run or execution, or a nil
// future, are ErrInvalidArgument and nothing is awaited. No futures
// returns nil, nil.
func AwaitAll[T any](futures []*Future[T]) ([]T, error) {
	if len(futures) == 0 {
		return nil, nil
	}
	as, err := awaitables("AwaitAll", futures)
	if err != nil {
		return nil, err
	}
	x := futures[0].x
	if x == nil {
		return nil, fmt.Errorf("%w: AwaitAll: future 0 was not made by a workflow context", ErrInvalidArgument)
	}
	x.checkStopped()
	fs, err := x.awaitable("AwaitAll", as)
	if err != nil {
		return nil, err
	}
	if err := x.waitAll(fs, futures[0].detached); err != nil {
		return make([]T, len(futures)), err
	}
	vals := make([]T, len(futures))
	var first error
	for i, f := range futures {
		v, err := f.Await()
		if err != nil && first == nil {
			first = err
		}
		vals[i] = v
	}
	return vals, first
}

// SelectFuture is Select over futures of one result type: it waits for the
// first of futures to have its result, awaits it, and returns its index
// and value (or error). The winner is checkpointed under name exactly as
// Select's is, so a replay returns the same winner whatever has become
// ready since; losers are left as Select leaves them (an event future
// released, a step, child or timer going on), to be awaited or selected
// again, or cancelled: call Cancel on each loser to stop it, as
// SelectCancel does (see Future.Cancel). No futures, a nil future or a future of another run is
// ErrInvalidArgument, with index -1.
func SelectFuture[T any](c *WorkflowContext, name string, futures []*Future[T]) (int, T, error) {
	var zero T
	as, err := awaitables("select "+strconv.Quote(name), futures)
	if err != nil {
		return -1, zero, err
	}
	i, err := Select(c, name, as...)
	if err != nil {
		return i, zero, err
	}
	v, err := futures[i].Await()
	return i, v, err
}

// awaitables returns futures as Awaitables, refusing a nil one (an
// Awaitable holding a nil *Future would not be nil).
func awaitables[T any](what string, futures []*Future[T]) ([]Awaitable, error) {
	as := make([]Awaitable, len(futures))
	for i, f := range futures {
		if f == nil {
			return nil, fmt.Errorf("%w: %s: future %d is nil", ErrInvalidArgument, what, i)
		}
		as[i] = f
	}
	return as, nil
}
