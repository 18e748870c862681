// Package main keeps two versions of workflow vers.fulfil side by side:
// FulfilV1 drains the runs started under version 1 while new runs start
// on version 2, Fulfil.
package main

import (
	"fmt"
	"strings"

	"github.com/stemflow/stem/runtime"
)

// Order is what both versions receive.
type Order struct {
	ID    string
	Items []string
}

// Ready says the warehouse has the order.
//
//stem:event topic=vers.ready
type Ready struct{ Shelf string }

// Status is what version 1 publishes.
type Status struct{ Stage string }

// FulfilV1 packs the order in one parcel.
//
//stem:workflow name=vers.fulfil progress=Status
func FulfilV1(ctx *FulfilV1Context, o Order) (string, error) {
	if err := ctx.SetProgress(Status{Stage: "waiting"}); err != nil {
		return "", err
	}
	r, err := ctx.AwaitReady("ready", 0)
	if err != nil {
		return "", err
	}
	p, err := ctx.Pack(o.ID)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("v1 %s from %s", p, r.Shelf), nil
}

// Fulfil packs the items, and counts them.
//
//stem:workflow name=vers.fulfil version=2 timeout=1h
func Fulfil(ctx *FulfilContext, o Order) (string, error) {
	r, err := ctx.AwaitReady("ready", 0)
	if err != nil {
		return "", err
	}
	p, err := ctx.Pack(strings.Join(o.Items, "+"))
	if err != nil {
		return "", err
	}
	n, err := ctx.Count(o)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("v2 %s (%d items) from %s", p, n, r.Shelf), nil
}

// Pack packs what it is given into a parcel.
//
//stem:step name=pack
func Pack(ctx runtime.StepContext, what string) (string, error) {
	return "[" + what + "]", nil
}

// Count counts an order's items.
//
//stem:step name=count
func Count(ctx runtime.StepContext, o Order) (int, error) {
	return len(o.Items), nil
}
