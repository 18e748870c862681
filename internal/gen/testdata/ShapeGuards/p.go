// Package p's payload types cover what the shape guards of the generated
// file write: structs with embedded, unexported and tagged fields, named
// slices and strings, generic types, types of another package, and a type
// named like the guards' alias.
package p

import (
	"time"

	"example.com/stemcase/q"
	"github.com/stemflow/stem/runtime"
)

// Status is a named string: guarded by converting a pointer.
type Status string

// IDs is a named slice.
type IDs []string

// Base is embedded in Order.
type Base struct{ Seq int64 }

// Meta is embedded in Order through a pointer.
type Meta struct {
	Tags map[string]Status `json:"tags"`
}

// Skipped is only in a field JSON leaves out: nothing guards it.
type Skipped struct{ X int }

// Order has everything.
type Order struct {
	Base
	*Meta
	ID      string        `json:"id"`
	Lines   IDs           `json:"lines"`
	Status  Status        `json:"status,omitempty"`
	At      time.Time     `json:"at"`
	Wait    time.Duration `json:"wait"`
	Extra   q.Exported    `json:"extra"`
	Mixed   q.Mixed       `json:"mixed"`
	Wrapped q.Wrap        `json:"wrapped"`
	Deep    q.Deep        `json:"deep"`
	Ignored Skipped       `json:"-"`
	note    string
}

// Box is generic.
type Box[T any] struct {
	Item T   `json:"item"`
	N    int `json:"n"`
}

// shapeAtLastGoGenerate is a type of the package named like the guards'
// alias, and part of a payload.
type shapeAtLastGoGenerate struct{ V int }

// Result is what Place returns.
type Result struct {
	Box   Box[q.Exported]       `json:"box"`
	Other shapeAtLastGoGenerate `json:"other"`
}

// Place places an order.
//
//stem:workflow name=p.place
func Place(ctx *PlaceContext, o Order) (Result, error) {
	_ = o.note
	return ctx.Store(o)
}

// Store stores it.
//
//stem:step name=store
func Store(ctx runtime.StepContext, o Order) (Result, error) { return Result{}, nil }
