// Package orders is an annotated example: the order workflow of a small
// shop. Fulfil reserves stock and quotes shipping at once (two step
// futures), cools off, during which the customer may cancel (a select
// between a timer and an update future: the run replies to the Cancel),
// waits for the warehouse or a timeout (a select between an event future
// and a timer), packs every line at once (an autoversion step, one future
// per line), charges the customer through a flaky payment service (a
// retried step whose idempotency key makes the charge happen once), and
// has the invoice made by a child workflow. It publishes its progress as
// it goes, and writes a log of what it does on a stream, from the workflow
// and from its Pack step. Its runs carry search attributes: the order's ID
// and customer, taken from its input at the start, its total and the stage
// it has reached, which the workflow sets as it goes; the invoice's runs
// carry the order's ID and customer too. Listings filter on them: stem
// runs --where customer=ada (or 'total>=50', or stage=awaiting-shipment),
// the dashboard's search, and runtime.ListRunsQuery.Where in Go.
//
// go generate writes stem_gen.go: FulfilContext with the typed steps and
// their Async forms, StartFulfil, GetFulfil, SendShipmentReady,
// UpdateCancel, StreamLogLine, RegisterWorkflows and the rest. Fulfil runs on the queue FulfilQueue
// defines (queue=orders), and its finished runs are kept 30 days
// (retention=720h). A program needs:
//
//	engine.RegisterQueue(orders.FulfilQueue)
//	steps := orders.NewSteps(orders.NewPaymentsClient(url, httpClient))
//	orders.RegisterWorkflows(engine, steps)
//	run, err := orders.StartFulfil(ctx, engine, order)
//	orders.Warehouse{Engine: engine}.Ship(ctx, run.ID(), order.ID)
//	cancelled, err := orders.UpdateCancel(ctx, engine, run.ID(), orders.Cancel{Reason: "changed my mind"})
//	progress, ok, err := run.Progress(ctx)
//	for line, err := range orders.StreamLogLine(ctx, engine, run.ID(), 0) { ... }
//	receipt, err := run.Result(ctx)
//
// PaymentService is the fake payment provider to run it against.
package orders

//go:generate go run github.com/stemflow/stem/cmd/stemgen

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/stemflow/stem/runtime"
)

// Order is what a customer bought, with the workflow's timing.
type Order struct {
	ID       string `json:"id"`
	Customer string `json:"customer"`
	Items    []Item `json:"items"`
	// CoolOff is how long the order may still be cancelled (UpdateCancel)
	// before the warehouse is told (default DefaultCoolOff).
	CoolOff time.Duration `json:"cool_off,omitempty"`
	// ShipWithin bounds the wait for the warehouse (default
	// DefaultShipWithin); when it passes, the reservation is released and
	// the run fails with an error matching ErrNotShipped (and
	// runtime.ErrEventTimeout).
	ShipWithin time.Duration `json:"ship_within,omitempty"`
}

// Item is one line of an order.
type Item struct {
	SKU        string `json:"sku"`
	Qty        int    `json:"qty"`
	PriceCents int64  `json:"price_cents"`
}

// Defaults for Order's timing.
const (
	DefaultCoolOff    = 2 * time.Second
	DefaultShipWithin = 72 * time.Hour
)

// Total returns the order's amount in cents.
func (o Order) Total() int64 {
	var t int64
	for _, it := range o.Items {
		t += int64(it.Qty) * it.PriceCents
	}
	return t
}

// Reservation holds stock for an order.
type Reservation struct {
	OrderID     string `json:"order_id"`
	Hold        string `json:"hold"`
	AmountCents int64  `json:"amount_cents"`
	Customer    string `json:"customer"`
}

// Parcel is one packed line of an order.
type Parcel struct {
	SKU   string `json:"sku"`
	Qty   int    `json:"qty"`
	Label string `json:"label"`
}

// Payment is a charge the payment service made.
type Payment struct {
	ID          string `json:"id"`
	Customer    string `json:"customer"`
	AmountCents int64  `json:"amount_cents"`
}

// InvoiceRequest is the input of the Invoice workflow.
type InvoiceRequest struct {
	OrderID   string   `json:"order_id"`
	Customer  string   `json:"customer"`
	PaymentID string   `json:"payment_id"`
	Lines     []Parcel `json:"lines"`
}

// InvoiceDoc is a rendered invoice.
type InvoiceDoc struct {
	Number string `json:"number"`
	Text   string `json:"text"`
}

// Quote is what shipping an order costs, and with whom.
type Quote struct {
	Carrier   string `json:"carrier"`
	CostCents int64  `json:"cost_cents"`
}

// Receipt is the outcome of a fulfilled order.
type Receipt struct {
	OrderID  string     `json:"order_id"`
	Payment  Payment    `json:"payment"`
	Shipping Quote      `json:"shipping"`
	Tracking string     `json:"tracking"`
	Parcels  []Parcel   `json:"parcels"`
	Invoice  InvoiceDoc `json:"invoice"`
}

// Stages of a run of Fulfil, as its progress says.
const (
	StageReserving        = "reserving"
	StageCoolingOff       = "cooling-off"
	StageAwaitingShipment = "awaiting-shipment"
	StagePacking          = "packing"
	StageCharging         = "charging"
	StageInvoicing        = "invoicing"
	StageDone             = "done"
)

// FulfilProgress is what a run of Fulfil publishes as it goes: read it
// with Progress or WaitProgress on FulfilRun.
type FulfilProgress struct {
	Stage  string `json:"stage"`
	Packed int    `json:"packed"`
	Lines  int    `json:"lines"`
}

// ShipmentReady says the warehouse has the order's parcels ready to go.
//
//stem:event topic=orders.shipment-ready
type ShipmentReady struct {
	OrderID  string `json:"order_id"`
	Tracking string `json:"tracking"`
}

// Cancel asks a run of Fulfil to give the order up while it cools off
// (UpdateCancel): the run releases the order's stock, replies Cancelled
// and ends with an error matching ErrCancelled. A Cancel without a reason
// is refused (ErrNoReason) before it reaches the run; one sent after the
// cool-off is not taken, and the caller gets runtime.ErrUpdateUnhandled
// when the run ends.
//
//stem:update name=orders.cancel reply=Cancelled validate=checkCancel
type Cancel struct {
	Reason string `json:"reason"`
}

// Cancelled is a run's reply to a Cancel: the order given up and the stock
// hold released.
type Cancelled struct {
	OrderID  string `json:"order_id"`
	Released string `json:"released"`
}

// ErrNoReason: a Cancel that does not say why, which the engine refuses
// (runtime.ErrUpdateRefused) before anything is written.
var ErrNoReason = errors.New("orders: a cancellation needs a reason")

// checkCancel is Cancel's validator.
func checkCancel(c Cancel) error {
	if strings.TrimSpace(c.Reason) == "" {
		return ErrNoReason
	}
	return nil
}

// ErrCancelled: the customer cancelled the order while it cooled off. A
// run of Fulfil that ends so matches it with errors.Is.
//
//stem:error name=orders.cancelled
var ErrCancelled = errors.New("the order was cancelled")

// LogLine is one line of an order's log, the stream a run of Fulfil
// writes: a line per stage from the workflow, and one per packed line
// from Pack. Read it with StreamLogLine, as it is written.
//
//stem:stream name=orders.log
type LogLine struct {
	Stage string `json:"stage"`
	Text  string `json:"text"`
}

// ErrNotShipped: the warehouse did not ship the order in time (its
// ShipWithin). A run of Fulfil that ends so matches it with errors.Is,
// read from Result here or in another process.
//
//stem:error name=orders.not_shipped
var ErrNotShipped = errors.New("the warehouse did not ship")

// ChargeRejected: the payment service refused the charge (a 4xx reply).
// It is permanent, so the charge is not retried; the caller of a run that
// ends so gets it back with errors.As, fields and all.
//
//stem:error name=orders.charge_rejected
type ChargeRejected struct {
	Status int    `json:"status"`
	Reason string `json:"reason"`
}

func (e *ChargeRejected) Error() string {
	return fmt.Sprintf("orders: charge rejected (%d): %s", e.Status, e.Reason)
}

// FulfilQueue is the queue orders are fulfilled on: at most 24 orders
// execute at once across every worker sharing the store (the payment
// provider's limit on concurrent calls), and at most 2 of one customer, so
// a customer who orders a hundred things at once does not hold up the
// others. Register it on every engine that starts or works orders.
var FulfilQueue = runtime.Queue{Name: "orders", Concurrency: 24, PartitionConcurrency: 2}

// Fulfil reserves stock and quotes shipping at once, cools off (the
// customer may cancel then), waits for the warehouse, packs every line at
// once, charges the customer, and has the invoice made.
//
//stem:workflow name=orders.fulfil version=2 progress=FulfilProgress queue=orders retention=720h
//stem:attr name=order from=ID
//stem:attr name=customer from=Customer
//stem:attr name=total type=number
//stem:attr name=stage type=string
func Fulfil(ctx *FulfilContext, order Order) (Receipt, error) {
	stage := func(s string, packed int) error {
		if err := ctx.AppendLogLine(LogLine{Stage: s, Text: fmt.Sprintf("order %s: %s", order.ID, s)}); err != nil {
			return err
		}
		if err := ctx.SetStageAttr(s); err != nil {
			return err
		}
		return ctx.SetProgress(FulfilProgress{Stage: s, Packed: packed, Lines: len(order.Items)})
	}
	// The total, in the currency's units, is computed from the lines, so
	// the workflow sets it: from= takes only what the input holds.
	if err := ctx.SetTotalAttr(float64(order.Total()) / 100); err != nil {
		return Receipt{}, err
	}
	if err := stage(StageReserving, 0); err != nil {
		return Receipt{}, err
	}
	// Two steps at once: each future's key is fixed here, in program
	// order, so a replay finds both checkpoints whichever ended first.
	reserve, quote := ctx.ReserveAsync(order), ctx.QuoteShippingAsync(order)
	if err := ctx.All(reserve, quote); err != nil {
		return Receipt{}, err
	}
	res, err := reserve.Await()
	if err != nil {
		return Receipt{}, err
	}
	shipping, err := quote.Await()
	if err != nil {
		return Receipt{}, err
	}
	coolOff := order.CoolOff
	if coolOff <= 0 {
		coolOff = DefaultCoolOff
	}
	if err := stage(StageCoolingOff, 0); err != nil {
		return Receipt{}, err
	}
	// The cool-off or a Cancel, whichever comes first: the winner is
	// checkpointed, so a replay takes the same branch.
	cooled, cancel := ctx.Timer("cool-off", coolOff), ctx.OnCancel("cancel")
	first, err := ctx.Select("cool-off-or-cancel", cooled, cancel)
	if err != nil {
		return Receipt{}, err
	}
	if first == 1 {
		c, err := cancel.Await()
		if err != nil {
			return Receipt{}, err
		}
		if err := ctx.Release(res); err != nil {
			return Receipt{}, err
		}
		if err := c.Reply(ctx.WorkflowContext, Cancelled{OrderID: order.ID, Released: res.Hold}); err != nil {
			return Receipt{}, err
		}
		return Receipt{}, fmt.Errorf("order %s: %w: %s", order.ID, ErrCancelled, c.Request.Reason)
	}
	within := order.ShipWithin
	if within <= 0 {
		within = DefaultShipWithin
	}
	if err := stage(StageAwaitingShipment, 0); err != nil {
		return Receipt{}, err
	}
	// The shipment or the timeout, whichever comes first: the winner is
	// checkpointed, so a replay takes the same branch.
	shipped, late := ctx.OnShipmentReady("shipment"), ctx.Timer("ship-within", within)
	first, err = ctx.Select("shipment-or-timeout", shipped, late)
	if err != nil {
		return Receipt{}, err
	}
	if first == 1 {
		if rerr := ctx.Release(res); rerr != nil {
			return Receipt{}, rerr
		}
		return Receipt{}, fmt.Errorf("order %s: %w within %s: %w", order.ID, ErrNotShipped, within, runtime.ErrEventTimeout)
	}
	ship, err := shipped.Await()
	if err != nil {
		return Receipt{}, err
	}
	if err := stage(StagePacking, 0); err != nil {
		return Receipt{}, err
	}
	packs := make([]*runtime.Future[Parcel], len(order.Items))
	for i, item := range order.Items {
		packs[i] = ctx.PackAsync(item) // keyed pack@v1#i by creation order
	}
	parcels, err := runtime.AwaitAll(packs)
	if err != nil {
		return Receipt{}, err
	}
	if err := stage(StageCharging, len(parcels)); err != nil {
		return Receipt{}, err
	}
	payment, err := ctx.Charge(res)
	if err != nil {
		if rerr := ctx.Release(res); rerr != nil {
			return Receipt{}, rerr
		}
		return Receipt{}, err
	}
	if err := stage(StageInvoicing, len(parcels)); err != nil {
		return Receipt{}, err
	}
	inv, err := ctx.CallInvoice("invoice", InvoiceRequest{
		OrderID: order.ID, Customer: order.Customer, PaymentID: payment.ID, Lines: parcels,
	})
	if err != nil {
		return Receipt{}, err
	}
	if err := stage(StageDone, len(parcels)); err != nil {
		return Receipt{}, err
	}
	return Receipt{OrderID: order.ID, Payment: payment, Shipping: shipping, Tracking: ship.Tracking, Parcels: parcels, Invoice: inv}, nil
}

// Invoice renders and files the invoice of a paid order.
//
//stem:workflow name=orders.invoice
//stem:attr name=order from=OrderID
//stem:attr name=customer from=Customer
func Invoice(ctx *InvoiceContext, req InvoiceRequest) (InvoiceDoc, error) {
	return ctx.RenderInvoice(req)
}

// Steps holds what the steps need: the payment client and the stock
// holds. Create it with NewSteps and pass it to RegisterWorkflows.
type Steps struct {
	payments *PaymentsClient

	mu    sync.Mutex
	holds map[string]Reservation
	packs int
}

// NewSteps returns the steps of the order workflows, charging through
// payments.
func NewSteps(payments *PaymentsClient) *Steps {
	return &Steps{payments: payments, holds: map[string]Reservation{}}
}

// Holds returns the stock holds not yet released, by hold ID.
func (s *Steps) Holds() map[string]Reservation {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]Reservation, len(s.holds))
	for k, v := range s.holds {
		out[k] = v
	}
	return out
}

// Reserve holds stock for the order.
//
//stem:step name=reserve retries=3 backoff=50ms..1s timeout=5s
func (s *Steps) Reserve(ctx runtime.StepContext, order Order) (Reservation, error) {
	if len(order.Items) == 0 {
		return Reservation{}, runtime.Permanent(fmt.Errorf("order %s has no items", order.ID))
	}
	// The hold is named by the step's idempotency key, so a retry after a
	// crash finds the hold it made instead of making another.
	hold := ctx.IdempotencyKey("hold")
	r := Reservation{OrderID: order.ID, Hold: hold, AmountCents: order.Total(), Customer: order.Customer}
	s.mu.Lock()
	s.holds[hold] = r
	s.mu.Unlock()
	return r, nil
}

// QuoteShipping asks the carriers what shipping the order costs. It
// needs only the order, so Fulfil runs it beside Reserve.
//
//stem:step name=quote-shipping retries=2 backoff=50ms timeout=5s
func (s *Steps) QuoteShipping(ctx runtime.StepContext, order Order) (Quote, error) {
	units := 0
	for _, it := range order.Items {
		units += it.Qty
	}
	if units > 3 {
		return Quote{Carrier: "freight", CostCents: 1500}, nil
	}
	return Quote{Carrier: "post", CostCents: 300 + 150*int64(units)}, nil
}

// Release gives a reservation's stock back.
//
//stem:step name=release retries=3 backoff=50ms..1s
func (s *Steps) Release(ctx runtime.StepContext, r Reservation) error {
	s.mu.Lock()
	delete(s.holds, r.Hold)
	s.mu.Unlock()
	return nil
}

// Pack packs one line of the order; it runs once per line, and logs it on
// the order's log once it succeeds.
//
//stem:step name=pack autoversion timeout=30s
func (s *Steps) Pack(ctx runtime.StepContext, item Item) (Parcel, error) {
	s.mu.Lock()
	s.packs++
	s.mu.Unlock()
	p := Parcel{SKU: item.SKU, Qty: item.Qty, Label: fmt.Sprintf("%s-%d", item.SKU, ctx.Iteration())}
	if err := AppendLogLineInStep(ctx, LogLine{Stage: StagePacking, Text: fmt.Sprintf("packed %d x %s as %s", p.Qty, p.SKU, p.Label)}); err != nil {
		return Parcel{}, err
	}
	return p, nil
}

// Charge charges the reservation's amount. The payment service may fail or
// lose its answer; the idempotency key makes every retry (and a retry
// after a crash) refer to the same charge.
//
//stem:step name=charge retries=5 backoff=100ms..2s timeout=10s
func (s *Steps) Charge(ctx runtime.StepContext, r Reservation) (Payment, error) {
	return s.payments.Charge(ctx, r.Customer, r.AmountCents, ctx.IdempotencyKey("payment"))
}

// RenderInvoice renders an invoice.
//
//stem:step name=render-invoice
func (s *Steps) RenderInvoice(ctx runtime.StepContext, req InvoiceRequest) (InvoiceDoc, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "Invoice for order %s (%s), payment %s\n", req.OrderID, req.Customer, req.PaymentID)
	for _, l := range req.Lines {
		fmt.Fprintf(&b, "  %d x %s [%s]\n", l.Qty, l.SKU, l.Label)
	}
	return InvoiceDoc{Number: "INV-" + req.OrderID, Text: b.String()}, nil
}
