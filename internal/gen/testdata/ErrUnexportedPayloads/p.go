// Package p has exported workflows and steps whose payload types other
// packages cannot name; the unexported ones may use them.
package p

import (
	"context"

	"github.com/stemflow/stem/runtime"
)

type order struct{ ID string }

type receipt struct{ Total int }

// Receipt is exported.
type Receipt struct{ Total int }

// Steps holds the steps.
type Steps struct{}

// Fulfil is exported, its input and output types are not.
//
//stem:workflow name=p.fulfil
func Fulfil(ctx *FulfilContext, in order) (receipt, error) { return receipt{}, nil }

// Batch is exported; its input holds an unexported type.
//
//stem:workflow name=p.batch
func Batch(ctx *BatchContext, orders []*order) (map[string]Receipt, error) { return nil, nil }

// internal is unexported: its types are its package's business.
//
//stem:workflow name=p.internal
func internal(ctx *InternalContext, in order) (receipt, error) { return receipt{}, nil }

// Reserve is an exported step with an unexported input.
//
//stem:step name=reserve
func (s *Steps) Reserve(ctx runtime.StepContext, o order, n int) (Receipt, error) {
	return Receipt{}, nil
}

// Charge is an exported step with an unexported output, in a struct.
//
//stem:step name=charge
func Charge(ctx context.Context, total int) (struct{ R receipt }, error) {
	return struct{ R receipt }{}, nil
}

// pack is unexported.
//
//stem:step name=pack
func (s *Steps) pack(ctx runtime.StepContext, o order) (receipt, error) { return receipt{}, nil }
