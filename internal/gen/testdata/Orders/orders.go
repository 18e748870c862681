// Command orders runs a generated workflow end to end on memstore.
package main

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
	ID     string   `json:"id"`
	Items  []string `json:"items"`
	Amount int64    `json:"amount"`
}

// Reservation holds stock for an order.
type Reservation struct {
	OrderID string
	Amount  int64
}

// Parcel is one packed item.
type Parcel struct {
	Item string
	Seq  int
}

// Receipt is the outcome of a fulfilled order.
type Receipt struct {
	OrderID  string
	Charged  int64
	Payment  string
	Tracking string
	Parcels  []Parcel
	Refund   string
}

// RefundInput says what to refund.
type RefundInput struct {
	OrderID string
	Amount  int64
	// Rounds is how many times the refund continues as new before it
	// issues the refund.
	Rounds int
}

// RefundResult is a refund's outcome.
type RefundResult struct{ ID string }

// FulfilProgress is what a run of Fulfil publishes as it goes.
type FulfilProgress struct {
	Stage  string
	Packed int
}

// ShipmentReady says the warehouse shipped an order.
//
//stem:event topic=shipment.ready
type ShipmentReady struct{ Tracking string }

// Steps holds what the steps need; main passes it at registration.
type Steps struct {
	mu       sync.Mutex
	attempts map[string]int
	log      []string
}

func (s *Steps) record(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.log = append(s.log, fmt.Sprintf(format, args...))
}

// Fulfil reserves stock while it tells the customer, waits for the
// warehouse (or a timeout), packs every item at once, then charges the
// customer and refunds a goodwill credit.
//
//stem:workflow name=orders.fulfil timeout=1h progress=FulfilProgress
func Fulfil(ctx *FulfilContext, order Order) (Receipt, error) {
	if err := ctx.SetProgress(FulfilProgress{Stage: "reserving"}); err != nil {
		return Receipt{}, err
	}
	reserve := ctx.ReserveAsync(order)
	notify := ctx.NotifyAsync("reserving " + order.ID)
	if err := ctx.All(reserve, notify); err != nil {
		return Receipt{}, err
	}
	res, err := reserve.Await()
	if err != nil {
		return Receipt{}, err
	}
	if _, err := notify.Await(); err != nil {
		return Receipt{}, err
	}
	if err := ctx.Sleep("cool-off", time.Millisecond); err != nil {
		return Receipt{}, err
	}
	ship, late := ctx.OnShipmentReady("ship"), ctx.Timer("ship-timeout", time.Minute)
	first, err := ctx.Select("ship-or-timeout", ship, late)
	if err != nil {
		return Receipt{}, err
	}
	if first == 1 {
		return Receipt{}, errors.New("the warehouse did not ship in time")
	}
	sh, err := ship.Await()
	if err != nil {
		return Receipt{}, err
	}
	var packs []*runtime.Future[Parcel]
	for _, item := range order.Items {
		packs = append(packs, ctx.PackAsync(item))
	}
	parcels, err := runtime.AwaitAll(packs)
	if err != nil {
		return Receipt{}, err
	}
	if err := ctx.SetProgress(FulfilProgress{Stage: "packed", Packed: len(parcels)}); err != nil {
		return Receipt{}, err
	}
	if err := ctx.Notify("packed " + order.ID); err != nil {
		return Receipt{}, err
	}
	rec, err := ctx.Charge(res, sh)
	if err != nil {
		return Receipt{}, err
	}
	refund, err := ctx.CallRefundAsync("goodwill", RefundInput{OrderID: order.ID, Amount: 1, Rounds: 2}).Await()
	if err != nil {
		return Receipt{}, err
	}
	rec.Parcels, rec.Refund = parcels, refund.ID
	if err := ctx.SetProgress(FulfilProgress{Stage: "done", Packed: len(parcels)}); err != nil {
		return Receipt{}, err
	}
	return rec, nil
}

// Refund returns part of a payment, after continuing as new in.Rounds
// times.
//
// Deprecated: refunds move to the billing service.
//
//stem:workflow name=orders.refund version=2
func Refund(ctx *RefundContext, in RefundInput) (RefundResult, error) {
	if in.Rounds > 0 {
		in.Rounds--
		return RefundResult{}, ctx.ContinueAsNew(in)
	}
	return ctx.IssueRefund(in)
}

// Reserve holds stock; the stock service is flaky and fails twice.
//
//stem:step name=reserve retries=3 backoff=1ms..4ms jitter=0.25 timeout=5s
func (s *Steps) Reserve(ctx runtime.StepContext, order Order) (Reservation, error) {
	s.mu.Lock()
	s.attempts["reserve"]++
	n := s.attempts["reserve"]
	s.mu.Unlock()
	if n < 3 {
		return Reservation{}, errors.New("stock service unavailable")
	}
	s.record("reserve attempt %d of %s", ctx.Attempt(), ctx.Key())
	return Reservation{OrderID: order.ID, Amount: order.Amount}, nil
}

// Pack packs one item.
//
//stem:step name=pack autoversion
func (s *Steps) Pack(ctx runtime.StepContext, item string) (Parcel, error) {
	s.record("pack %s as %s", item, ctx.Key())
	return Parcel{Item: item, Seq: ctx.Iteration()}, nil
}

// Charge charges the reserved amount once, whatever the retries.
//
//stem:step name=charge version=2
func (s *Steps) Charge(ctx runtime.StepContext, r Reservation, sh ShipmentReady) (Receipt, error) {
	key := ctx.IdempotencyKey("payment")
	if key != runtime.IdempotencyKey(FulfilWorkflowName, ctx.RunID(), StepCharge, "payment") {
		return Receipt{}, runtime.Permanent(fmt.Errorf("idempotency key %q differs from runtime.IdempotencyKey's", key))
	}
	return Receipt{OrderID: r.OrderID, Charged: r.Amount, Payment: key, Tracking: sh.Tracking}, nil
}

// IssueRefund issues a refund.
//
//stem:step name=issue-refund retries=forever jitter=0
func (s *Steps) IssueRefund(ctx runtime.StepContext, in RefundInput) (RefundResult, error) {
	return RefundResult{ID: "refund-of-" + in.OrderID}, nil
}

var (
	notifyMu sync.Mutex
	notified []string
)

// Notify tells the customer, as often as the workflow has news; it is a
// plain function step taking a context.Context and returning only an
// error.
//
//stem:step name=notify autoversion
func Notify(ctx context.Context, msg string) error {
	notifyMu.Lock()
	defer notifyMu.Unlock()
	notified = append(notified, strings.ToUpper(msg))
	return nil
}
