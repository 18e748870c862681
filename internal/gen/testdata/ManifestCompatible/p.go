// Package p changed its payload types since the manifest was written, in
// ways every stored value survives: encoding/json decodes what runs in
// flight hold into the new types, so no version= bump is needed and the
// manifest records the new shapes.
package p

import "github.com/stemflow/stem/runtime"

// Order gained Note (a field added), Qty widened from int32 to int64, and
// Lines is a slice where it was an array of 3.
type Order struct {
	ID    string   `json:"id"`
	Qty   int64    `json:"qty"`
	Note  string   `json:"note"`
	Lines []string `json:"lines"`
}

// Hold's Amount was an int32 and is now a *float64 (a pointer has its
// element's shape), and its JSON name changed only in case.
type Hold struct {
	Amount *float64 `json:"Amount"`
	Items  []Line   `json:"items"`
}

// Line gained SKU, inside Hold's slice.
type Line struct {
	N   uint16 `json:"n"`
	SKU string `json:"sku"`
}

// Status is Fill's progress: its map's keys were integers, its values
// uint8.
type Status struct {
	Done map[string]uint32 `json:"done"`
}

// Fill reserves an order.
//
//stem:workflow name=p.fill progress=Status
func Fill(ctx *FillContext, o Order) (Hold, error) {
	return ctx.Reserve(o)
}

// Reserve holds stock.
//
//stem:step name=reserve
func Reserve(ctx runtime.StepContext, o Order) (Hold, error) { return Hold{}, nil }

// Ready is an event whose payload gained a field and whose number widened.
//
//stem:event topic=p.ready
type Ready struct {
	Dock  int64  `json:"dock"`
	Label string `json:"label"`
}

func use(ctx *FillContext) { ctx.AwaitReady("ready", 0) }
