// Package shop is an annotated example of transactions on the embedded
// SQLite store: a shop whose own tables, shop_orders and shop_payments,
// live in the store's SQLite file beside Stem's, so that its writes and
// Stem's commit together.
//
// Two writes are atomic. Placing an order (Place, PlaceTx) inserts the
// order's row and starts its workflow, PlaceOrder, in one transaction of
// the application's (runtime.Engine.BeginTx): a crash or a rollback leaves
// both or neither, never an order nobody works nor a run without its
// order. And PlaceOrder's transactional step, RecordPayment, inserts the
// payment and marks the order paid in the step's transaction, which
// commits with the step's checkpoint: a crash leaves the payment recorded
// and checkpointed, or neither, so it is applied exactly once however
// often the worker dies.
//
// RecordPayment takes a *sql.Tx, so the package runs on SQLite
// (sqlitestore) only; RegisterWorkflows refuses any other store. A
// Postgres variant would take a pgx.Tx (github.com/jackc/pgx/v5) in the
// step, write $1 for ?, and run on pgstore.
//
// go generate writes stem_gen.go: PlaceOrderContext with the typed steps,
// StartPlaceOrder and StartPlaceOrderTx, GetPlaceOrder, RegisterWorkflows
// and the rest. A program needs:
//
//	shop.RegisterWorkflows(engine)
//	shop.CreateTables(ctx, engine)
//	placed, err := shop.Place(ctx, engine, order)
//	run, err := shop.GetPlaceOrder(ctx, engine, order.ID)
//	receipt, err := run.Result(ctx)
package shop

//go:generate go run github.com/stemflow/stem/cmd/stemgen

import (
	"database/sql"
	"errors"
	"fmt"

	"github.com/stemflow/stem/runtime"
)

// Order is what a customer ordered: the row of shop_orders, and the
// input of PlaceOrder, whose run has the order's ID.
type Order struct {
	ID       string `json:"id"`
	Customer string `json:"customer"`
	// AmountCents is the order's listed amount, before any discount.
	AmountCents int64 `json:"amount_cents"`
}

// Receipt is the outcome of a paid order: the payment's row in
// shop_payments and what it charged.
type Receipt struct {
	OrderID     string `json:"order_id"`
	PaymentID   int64  `json:"payment_id"`
	AmountCents int64  `json:"amount_cents"`
}

// DiscountFromCents is the listed amount from which CheckPrice takes
// DiscountPercent off.
const DiscountFromCents = 10000

// DiscountPercent is the discount of an order listed at DiscountFromCents
// or more.
const DiscountPercent = 5

// ErrNoOrder matches the failure of RecordPayment for an order that has no
// row in shop_orders. Place never makes one (the row and the run commit
// together), so it means the row was deleted under the run.
//
//stem:error name=shop.no_order
var ErrNoOrder = errors.New("shop: the order has no row")

// PlaceOrder is an order's workflow once placed: it prices the order, then
// records its payment in the store's transaction.
//
//stem:workflow name=shop.order
func PlaceOrder(ctx *PlaceOrderContext, o Order) (Receipt, error) {
	priced, err := ctx.CheckPrice(o)
	if err != nil {
		return Receipt{}, err
	}
	return ctx.RecordPayment(priced)
}

// CheckPrice prices the order as the shop charges it: its listed amount,
// with DiscountPercent off from DiscountFromCents up. It is plain
// computation; as a step its result is checkpointed, so a later change of
// the rule never reprices an order already checked. An order of no amount
// fails for good.
//
//stem:step name=check-price
func CheckPrice(ctx runtime.StepContext, o Order) (Order, error) {
	if o.AmountCents <= 0 {
		return Order{}, runtime.Permanent(fmt.Errorf("shop: order %s: amount %d cents, want more than none", o.ID, o.AmountCents))
	}
	if o.AmountCents >= DiscountFromCents {
		o.AmountCents -= o.AmountCents * DiscountPercent / 100
	}
	return o, nil
}

// RecordPayment records the payment of the priced order in tx, the step's
// transaction on the store's SQLite file: a row in shop_payments, and the
// order's paid count raised by one. Both commit with the step's
// checkpoint, or neither does, so the payment is applied once. paid counts
// rather than being set to 1 so that a payment applied twice would show
// there too, not only as a second row. A failed attempt's writes roll
// back with it, so the step is retried safely.
//
//stem:step name=record-payment tx retries=3 backoff=10ms
func RecordPayment(ctx runtime.StepContext, tx *sql.Tx, o Order) (Receipt, error) {
	res, err := tx.ExecContext(ctx, `UPDATE shop_orders SET paid = paid + 1 WHERE id = ?`, o.ID)
	if err != nil {
		return Receipt{}, err
	}
	if n, err := res.RowsAffected(); err != nil {
		return Receipt{}, err
	} else if n != 1 {
		return Receipt{}, runtime.Permanent(fmt.Errorf("order %s: %w", o.ID, ErrNoOrder))
	}
	res, err = tx.ExecContext(ctx, `INSERT INTO shop_payments (order_id, amount_cents) VALUES (?, ?)`, o.ID, o.AmountCents)
	if err != nil {
		return Receipt{}, err
	}
	id, err := res.LastInsertId()
	if err != nil {
		return Receipt{}, err
	}
	return Receipt{OrderID: o.ID, PaymentID: id, AmountCents: o.AmountCents}, nil
}
