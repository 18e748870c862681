// Command scale is five workflows sharing fifteen steps and three events,
// calling each other as children: the case that shows how the generated
// file grows with workflows and steps (it should grow with their sum, not
// their product, but for Send<Event>OrStart<Workflow>, one per workflow
// and event).
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

// Cart is what a customer checks out.
type Cart struct {
	ID       string `json:"id"`
	Customer string `json:"customer"`
	Lines    []Line `json:"lines"`
}

// Line is one line of a cart.
type Line struct {
	SKU   string `json:"sku"`
	Qty   int    `json:"qty"`
	Cents int64  `json:"cents"`
}

// Charge asks for a payment.
type Charge struct {
	CartID   string `json:"cart_id"`
	Customer string `json:"customer"`
	Cents    int64  `json:"cents"`
}

// Payment is a payment made.
type Payment struct {
	ID    string `json:"id"`
	Cents int64  `json:"cents"`
}

// Shipment is what the delivery workflow produced.
type Shipment struct {
	Tracking  string   `json:"tracking"`
	Parcels   []string `json:"parcels"`
	Delivered bool     `json:"delivered"`
}

// Receipt is the outcome of a checkout.
type Receipt struct {
	CartID   string   `json:"cart_id"`
	Payment  Payment  `json:"payment"`
	Shipment Shipment `json:"shipment"`
	AuditRun string   `json:"audit_run"`
	AuditID  string   `json:"audit_id"`
}

// RefundRequest asks for money back.
type RefundRequest struct {
	PaymentID string `json:"payment_id"`
	Cents     int64  `json:"cents"`
	Reason    string `json:"reason"`
}

// Entry is one audit record.
type Entry struct {
	Subject string `json:"subject"`
	What    string `json:"what"`
}

// PaymentConfirmed says the payment provider confirmed an authorization.
//
//stem:event topic=shop.payment-confirmed
type PaymentConfirmed struct {
	Reference string `json:"reference"`
}

// Delivered says the carrier delivered a shipment.
//
//stem:event topic=shop.delivered
type Delivered struct {
	Tracking string `json:"tracking"`
}

// RefundApproved says a person approved a refund.
//
//stem:event topic=shop.refund-approved
type RefundApproved struct {
	By string `json:"by"`
}

// Checkout validates and prices a cart, reserves its stock, has it paid
// and delivered by child workflows, and has it audited by a child it starts
// early and awaits last, through the typed handle (a child that outlives
// its parent if the checkout is terminated). The settling sleep between
// makes the run replay the start of the audit before awaiting it.
//
//stem:workflow name=shop.checkout
func Checkout(ctx *CheckoutContext, cart Cart) (Receipt, error) {
	if err := ctx.Validate(cart); err != nil {
		return Receipt{}, err
	}
	var total int64
	for _, l := range cart.Lines {
		c, err := ctx.Price(l)
		if err != nil {
			return Receipt{}, err
		}
		total += c
	}
	hold, err := ctx.Reserve(cart)
	if err != nil {
		return Receipt{}, err
	}
	pay, err := ctx.CallPay("pay", Charge{CartID: cart.ID, Customer: cart.Customer, Cents: total})
	if err != nil {
		if rerr := ctx.Cleanup(hold); rerr != nil {
			return Receipt{}, rerr
		}
		return Receipt{}, err
	}
	ship, err := ctx.CallDeliver("deliver", cart)
	if err != nil {
		return Receipt{}, err
	}
	audit, err := ctx.StartAuditChild("audit", Entry{Subject: cart.ID, What: "checkout " + pay.ID}, runtime.Abandon())
	if err != nil {
		return Receipt{}, err
	}
	if _, err := ctx.Invoice(cart, pay); err != nil {
		return Receipt{}, err
	}
	if err := ctx.Sleep("settle", time.Millisecond); err != nil {
		return Receipt{}, err
	}
	auditID, err := audit.Result()
	if err != nil {
		return Receipt{}, err
	}
	return Receipt{CartID: cart.ID, Payment: pay, Shipment: ship, AuditRun: audit.ID(), AuditID: auditID}, nil
}

// Pay authorizes a charge, waits for the provider's confirmation, and
// captures it.
//
//stem:workflow name=shop.pay
func Pay(ctx *PayContext, c Charge) (Payment, error) {
	auth, err := ctx.Authorize(c)
	if err != nil {
		return Payment{}, err
	}
	conf, err := ctx.AwaitPaymentConfirmed("confirmed", time.Hour)
	if err != nil {
		return Payment{}, err
	}
	p, err := ctx.Capture(auth, conf)
	p.Cents = c.Cents
	return p, err
}

// Deliver packs every line, labels and dispatches the parcels, and
// notifies the customer of each step; a delivery not confirmed in time is
// still a shipment.
//
//stem:workflow name=shop.deliver
func Deliver(ctx *DeliverContext, cart Cart) (Shipment, error) {
	var parcels []string
	for _, l := range cart.Lines {
		p, err := ctx.Pack(l)
		if err != nil {
			return Shipment{}, err
		}
		parcels = append(parcels, p)
	}
	label, err := ctx.Label(cart.ID, parcels)
	if err != nil {
		return Shipment{}, err
	}
	if err := ctx.Dispatch(label); err != nil {
		return Shipment{}, err
	}
	if err := ctx.Notify(cart.Customer, "dispatched "+label); err != nil {
		return Shipment{}, err
	}
	_, err = ctx.AwaitDelivered("delivered", time.Millisecond)
	delivered := err == nil
	if err != nil && !errors.Is(err, runtime.ErrEventTimeout) {
		return Shipment{}, err
	}
	if err := ctx.Notify(cart.Customer, fmt.Sprintf("delivered=%v", delivered)); err != nil {
		return Shipment{}, err
	}
	return Shipment{Tracking: label, Parcels: parcels, Delivered: delivered}, nil
}

// Refund waits for a person's approval, refunds the payment, and has the
// refund audited.
//
//stem:workflow name=shop.refund version=2
func Refund(ctx *RefundContext, req RefundRequest) (Payment, error) {
	ok, err := ctx.AwaitRefundApproved("approved", time.Hour)
	if err != nil {
		return Payment{}, err
	}
	p, err := ctx.Return(req)
	if err != nil {
		return Payment{}, err
	}
	if _, err := ctx.CallAudit("audit", Entry{Subject: req.PaymentID, What: "refund approved by " + ok.By}); err != nil {
		return Payment{}, err
	}
	return p, ctx.Notify(req.PaymentID, "refunded")
}

// Audit records an entry, scores it and archives it.
//
//stem:workflow name=shop.audit
func Audit(ctx *AuditContext, e Entry) (string, error) {
	id, err := ctx.Record(e)
	if err != nil {
		return "", err
	}
	score, err := ctx.Score(e)
	if err != nil {
		return "", err
	}
	if err := ctx.Archive(id, score); err != nil {
		return "", err
	}
	return id, nil
}

// Steps holds what the steps need; main passes it at registration.
type Steps struct {
	mu  sync.Mutex
	log []string
}

func (s *Steps) record(ctx runtime.StepContext, what string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.log = append(s.log, fmt.Sprintf("%s %s: %s", ctx.Workflow(), ctx.Key(), what))
}

// Validate refuses an empty cart.
//
//stem:step name=validate
func (s *Steps) Validate(ctx runtime.StepContext, cart Cart) error {
	if len(cart.Lines) == 0 {
		return runtime.Permanent(fmt.Errorf("cart %s is empty", cart.ID))
	}
	s.record(ctx, "valid")
	return nil
}

// Price prices one line; it runs once per line.
//
//stem:step name=price autoversion
func (s *Steps) Price(ctx runtime.StepContext, l Line) (int64, error) {
	s.record(ctx, l.SKU)
	return int64(l.Qty) * l.Cents, nil
}

// Reserve holds the cart's stock.
//
//stem:step name=reserve retries=3 backoff=1ms..4ms timeout=5s
func (s *Steps) Reserve(ctx runtime.StepContext, cart Cart) (string, error) {
	s.record(ctx, "held")
	return ctx.IdempotencyKey("hold"), nil
}

// Cleanup releases a hold.
//
//stem:step name=cleanup
func Cleanup(ctx context.Context, hold string) error { return nil }

// Authorize authorizes a charge with the provider.
//
//stem:step name=authorize retries=5 backoff=1ms..2ms timeout=10s
func (s *Steps) Authorize(ctx runtime.StepContext, c Charge) (string, error) {
	s.record(ctx, fmt.Sprint(c.Cents))
	return ctx.IdempotencyKey("auth"), nil
}

// Capture captures an authorized charge.
//
//stem:step name=capture version=3
func (s *Steps) Capture(ctx runtime.StepContext, auth string, conf PaymentConfirmed) (Payment, error) {
	s.record(ctx, conf.Reference)
	return Payment{ID: "pay-" + conf.Reference}, nil
}

// Invoice writes the invoice of a paid cart.
//
//stem:step name=invoice
func (s *Steps) Invoice(ctx runtime.StepContext, cart Cart, p Payment) (string, error) {
	return "INV-" + cart.ID, nil
}

// Pack packs one line; it runs once per line.
//
//stem:step name=pack autoversion timeout=30s
func (s *Steps) Pack(ctx runtime.StepContext, l Line) (string, error) {
	s.record(ctx, l.SKU)
	return fmt.Sprintf("%s-%d", l.SKU, ctx.Iteration()), nil
}

// Label prints the shipping label of a cart's parcels.
//
//stem:step name=label
func (s *Steps) Label(ctx runtime.StepContext, cartID string, parcels []string) (string, error) {
	return "TRK-" + cartID + "-" + strings.Join(parcels, "+"), nil
}

// Dispatch hands a labelled shipment to the carrier.
//
//stem:step name=dispatch retries=2
func (s *Steps) Dispatch(ctx runtime.StepContext, label string) error {
	s.record(ctx, "dispatched")
	return nil
}

// Notify tells a customer something; it may run many times in one run.
//
//stem:step name=notify autoversion retries=2 backoff=1ms
func (s *Steps) Notify(ctx runtime.StepContext, to, msg string) error {
	s.record(ctx, to+": "+msg)
	return nil
}

// Return pays a refund back.
//
//stem:step name=return version=2
func (s *Steps) Return(ctx runtime.StepContext, req RefundRequest) (Payment, error) {
	return Payment{ID: "ret-" + req.PaymentID, Cents: -req.Cents}, nil
}

// Record writes an audit entry and returns its ID.
//
//stem:step name=record
func (s *Steps) Record(ctx runtime.StepContext, e Entry) (string, error) {
	return "audit-" + e.Subject, nil
}

// Score rates an audit entry.
//
//stem:step name=score
func (s *Steps) Score(ctx runtime.StepContext, e Entry) (int, error) {
	return len(e.What), nil
}

// Archive files a scored audit entry away.
//
//stem:step name=archive timeout=1m
func (s *Steps) Archive(ctx runtime.StepContext, id string, score int) error {
	return nil
}
