// Package p changed its payload types since the manifest was written in
// ways stored values do not survive: each is refused at the annotation,
// with what a run in flight would do and the safe route first.
package p

import "github.com/stemflow/stem/runtime"

// Order lost Note, renamed qty to quantity (a removal and an addition),
// narrowed Total from int64 to int32 and made Lines a string.
type Order struct {
	ID       string `json:"id"`
	Quantity int64  `json:"quantity"`
	Total    int32  `json:"total"`
	Lines    string `json:"lines"`
}

// Hold's Amount was an int64: a float64 would round it above 2^53. Its
// items' SKU was a string.
type Hold struct {
	Amount float64 `json:"amount"`
	Items  []Line  `json:"items"`
}

// Line is one held line.
type Line struct {
	SKU int64 `json:"sku"`
}

// Status is Fill's progress: its map's keys were strings.
type Status struct {
	Done map[int64]bool `json:"done"`
}

// Fill reserves an order.
//
//stem:workflow name=p.fill version=2 progress=Status
func Fill(ctx *FillContext, o Order) (Hold, error) {
	return ctx.Reserve(o)
}

// Refill reserves again, through the same step.
//
//stem:workflow name=p.refill
func Refill(ctx *RefillContext, o Order) (Hold, error) {
	f := ctx.ReserveAsync(o)
	return f.Await()
}

// Reserve holds stock.
//
//stem:step name=reserve retries=2
func Reserve(ctx runtime.StepContext, o Order) (Hold, error) { return Hold{}, nil }

// Audit is called by no workflow; its result was a list.
//
//stem:step name=audit version=4
func Audit(ctx runtime.StepContext) (string, error) { return "", nil }

// Ready's dock was a string.
//
//stem:event topic=p.ready
type Ready struct {
	Dock int64 `json:"dock"`
}

func use(ctx *FillContext) { ctx.AwaitReady("ready", 0) }
