// Package shop checks out orders; its tests use the generated test
// helpers, package shopstemtest.
package shop

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/stemflow/stem/runtime"
)

// Order is what a customer bought.
type Order struct {
	ID    string   `json:"id"`
	Items []string `json:"items"`
	Cents int64    `json:"cents"`
}

// Receipt is a checked-out order.
type Receipt struct {
	Payment string   `json:"payment"`
	Labels  []string `json:"labels"`
	Box     string   `json:"box"`
}

// Packed says the warehouse packed an order.
//
//stem:event topic=shop.packed
type Packed struct {
	OrderID string `json:"order_id"`
	Box     string `json:"box"`
}

// Steps holds what the steps need.
type Steps struct {
	mu     sync.Mutex
	audits []string
}

// NewSteps returns the steps of the shop.
func NewSteps() *Steps { return &Steps{} }

// Charge charges an order; a retry refers to the same charge.
//
//stem:step name=charge retries=3 backoff=1h
func (s *Steps) Charge(ctx runtime.StepContext, orderID string, cents int64) (string, error) {
	return fmt.Sprintf("pay-%s-%d", orderID, cents), nil
}

// Label labels one item; it runs once per item.
//
//stem:step name=label autoversion
func (s *Steps) Label(ctx runtime.StepContext, item string) (string, error) {
	return strings.ToUpper(item), nil
}

// Packed is a step named like the event: the helpers keep them apart.
//
//stem:step name=packed
func (s *Steps) Packed(ctx runtime.StepContext, box string) error { return nil }

// entry is a record of the audit log, a type no other package can name.
type entry struct {
	OrderID string `json:"order_id"`
}

// audit records an order; its mock is left out of the helpers.
//
//stem:step name=audit
func (s *Steps) audit(ctx runtime.StepContext, e entry) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.audits = append(s.audits, e.OrderID)
	return nil
}

// Notify tells the customer; a step function taking a context.Context
// and an unnamed input.
//
//stem:step name=notify
func Notify(ctx context.Context, _ string) error { return nil }

// Checkout charges an order, labels its items at once, waits up to three
// days for the warehouse to pack it, and tells the customer.
//
//stem:workflow name=shop.checkout version=2
func Checkout(ctx *CheckoutContext, o Order) (Receipt, error) {
	if err := ctx.audit(entry{OrderID: o.ID}); err != nil {
		return Receipt{}, err
	}
	pay, err := ctx.Charge(o.ID, o.Cents)
	if err != nil {
		return Receipt{}, err
	}
	labels := make([]*runtime.Future[string], len(o.Items))
	for i, item := range o.Items {
		labels[i] = ctx.LabelAsync(item)
	}
	rec := Receipt{Payment: pay, Box: "unpacked"}
	for _, f := range labels {
		l, err := f.Await()
		if err != nil {
			return Receipt{}, err
		}
		rec.Labels = append(rec.Labels, l)
	}
	p, err := ctx.AwaitPacked("packed", 72*time.Hour)
	switch {
	case err == nil:
		rec.Box = p.Box
		if err := ctx.Packed(p.Box); err != nil {
			return Receipt{}, err
		}
	case !errors.Is(err, runtime.ErrEventTimeout):
		return Receipt{}, err
	}
	return rec, ctx.Notify(o.ID)
}

// CheckoutV1 is the first version of Checkout, kept to drain its runs: it
// gets no crash test of its own.
//
//stem:workflow name=shop.checkout version=1
func CheckoutV1(ctx *CheckoutV1Context, o Order) (Receipt, error) {
	pay, err := ctx.Charge(o.ID, o.Cents)
	return Receipt{Payment: pay}, err
}
