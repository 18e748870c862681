// Package p names its payload types and parameters as the generated code
// names its locals (in, out, ctx, c, err, e, run, opts and others): the
// generated code must still compile, and mean the package's types.
package p

import (
	"context"

	"github.com/stemflow/stem/runtime"
)

type in struct{ N int }

type out struct{ S string }

type ctx struct{ V int }

type c struct{ V int }

type err struct{ Msg string }

// e is an event of an unexported type.
//
//stem:event topic=p.ready
type e struct{ V int }

type run struct{ ID string }

type opts struct{ Fast bool }

type r struct{ V int }

type items []string

type timeout struct{ D int }

type name string

type id string

type fn struct{ V int }

type ok bool

type sc struct{ V int }

type p struct{ V int }

type steps struct{}

type ev struct{ V int }

type futures struct{ V int }

type cases struct{ V int }

type after struct{ V int }

type i struct{ V int }

type rs struct{ V int }

type runID string

type d struct{ V int }

// req is an update of an unexported type, replied to with a from.
//
//stem:update name=p.req reply=from
type req struct{ V int }

type from struct{ N int }

// v is a stream of an unexported type.
//
//stem:stream name=p.v
type v struct{ V int }

// flow runs every step once.
//
//stem:workflow name=p.flow progress=run
func flow(ctx *FlowContext, in in) (out, error) {
	if _, e := ctx.stepOne(ctx2(in), c{}); e != nil {
		return out{}, e
	}
	if _, e := ctx.stepTwo(e{}, run{}, opts{}, r{}); e != nil {
		return out{}, e
	}
	if _, e := ctx.stepThree(items{"a"}, timeout{}, name("n"), id("i"), fn{}, ok(true), sc{}, p{}); e != nil {
		return out{}, e
	}
	if _, e := ctx.stepFour(steps{}, ev{}, futures{}, cases{}, after{}, i{}, rs{}, runID("x")); e != nil {
		return out{}, e
	}
	if _, e := ctx.stepFive(d{V: 1}); e != nil {
		return out{}, e
	}
	v, e := ctx.AwaitE("ready", 0)
	if e != nil {
		return out{}, e
	}
	return out{S: string(rune('a' + v.V))}, nil
}

func ctx2(x in) ctx { return ctx{V: x.N} }

// ready sends a run its event.
func ready(cx context.Context, eng *runtime.Engine, runID string, v int) error {
	return SendE(cx, eng, runID, e{V: v})
}

// stepOne takes parameters named as the generated code's locals.
//
//stem:step name=one
func stepOne(sctx runtime.StepContext, in ctx, out c) (err, error) {
	return err{Msg: "ok"}, nil
}

// stepTwo takes more.
//
//stem:step name=two
func stepTwo(ctx runtime.StepContext, c e, e run, err opts, opts r) (in, error) {
	return in{}, nil
}

// stepThree takes more.
//
//stem:step name=three
func stepThree(ctx runtime.StepContext, r items, items timeout, timeout name, name id, id fn, fn ok, ok sc, sc p) (out, error) {
	return out{}, nil
}

// stepFour takes the rest.
//
//stem:step name=four
func stepFour(ctx runtime.StepContext, p steps, steps ev, ev futures, futures cases, cases after, after i, i rs, rs runID) (run, error) {
	return run{}, nil
}

// stepFive is a method of a receiver type named as a local.
//
//stem:step name=five
func (s *fn) stepFive(ctx runtime.StepContext, x d) (ok, error) {
	return ok(x.V == s.V), nil
}
