// Package ledger records payments in the application's own SQLite
// database, in transactional steps: a ledger row and the step's checkpoint
// commit together.
package ledger

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/stemflow/stem/runtime"
)

// Payment is what Settle records.
type Payment struct {
	OrderID string
	Cents   int64
}

// Receipt is what a settled payment comes to.
type Receipt struct {
	OrderID string
	Row     int64
	Audits  []int
}

// Paid is the bank's confirmation of a payment.
//
//stem:event topic=ledger.paid
type Paid struct{ OrderID string }

// ReconcileProgress is how far Reconcile is.
type ReconcileProgress struct{ Done int }

// Steps holds what the steps need.
type Steps struct{}

// Settle records a payment, waits for the bank, marks the payment settled
// and audits it twice.
//
//stem:workflow name=ledger.settle existing=fail ended=reuse-failed
func Settle(ctx *SettleContext, p Payment) (Receipt, error) {
	r, err := ctx.Record(p)
	if err != nil {
		return Receipt{}, err
	}
	if _, err := ctx.AwaitPaid("paid", 0); err != nil {
		return Receipt{}, err
	}
	if err := ctx.MarkSettled(p.OrderID); err != nil {
		return Receipt{}, err
	}
	for i := range 2 {
		n, err := ctx.Audit(fmt.Sprintf("%s audit %d", p.OrderID, i))
		if err != nil {
			return Receipt{}, err
		}
		r.Audits = append(r.Audits, n)
	}
	return r, ctx.Notify(p.OrderID)
}

// Reconcile counts the day's settled payments.
//
//stem:workflow name=ledger.reconcile progress=ReconcileProgress
func Reconcile(ctx *ReconcileContext, day string) (int, error) {
	if err := ctx.SetProgress(ReconcileProgress{Done: 1}); err != nil {
		return 0, err
	}
	return 0, ctx.Notify(day)
}

// Record writes the payment's ledger row in the step's transaction.
//
//stem:step name=record retries=2 tx
func (s *Steps) Record(ctx runtime.StepContext, tx *sql.Tx, p Payment) (Receipt, error) {
	res, err := tx.ExecContext(ctx, "INSERT INTO ledger (order_id, cents) VALUES (?, ?)", p.OrderID, p.Cents)
	if err != nil {
		return Receipt{}, err
	}
	id, err := res.LastInsertId()
	return Receipt{OrderID: p.OrderID, Row: id}, err
}

// MarkSettled marks the order's ledger rows settled.
//
//stem:step name=mark-settled tx
func MarkSettled(ctx context.Context, tx *sql.Tx, orderID string) error {
	_, err := tx.ExecContext(ctx, "UPDATE ledger SET settled = 1 WHERE order_id = ?", orderID)
	return err
}

// Audit appends an audit line and returns how many the ledger holds.
//
//stem:step name=audit autoversion tx
func (s *Steps) Audit(ctx runtime.StepContext, tx *sql.Tx, line string) (int, error) {
	if _, err := tx.ExecContext(ctx, "INSERT INTO audit (line) VALUES (?)", line); err != nil {
		return 0, err
	}
	var n int
	err := tx.QueryRowContext(ctx, "SELECT count(*) FROM audit").Scan(&n)
	return n, err
}

// Notify tells nobody, outside any transaction.
//
//stem:step name=notify
func (s *Steps) Notify(ctx runtime.StepContext, orderID string) error { return nil }

// ConfirmTx records the bank's confirmation of run runID inside tx, the
// application's transaction: the run hears of it when tx commits.
func ConfirmTx(ctx context.Context, e *runtime.Engine, tx *sql.Tx, runID, orderID string) error {
	return SendPaidTx(ctx, e, tx, runID, Paid{OrderID: orderID})
}

// ConfirmAllTx confirms orderID to every run waiting, inside tx.
func ConfirmAllTx(ctx context.Context, e *runtime.Engine, tx *sql.Tx, orderID string) (int, error) {
	return EmitPaidTx(ctx, e, tx, Paid{OrderID: orderID})
}

// PaidBeforeStart settles a payment the bank confirmed before it was
// recorded: the run, keyed by the order, starts with the confirmation.
func PaidBeforeStart(ctx context.Context, e *runtime.Engine, p Payment) (*SettleRun, error) {
	return SendPaidOrStartSettle(ctx, e, p.OrderID, p, Paid{OrderID: p.OrderID})
}
