// Package billing charges invoices in the application's Postgres database.
package billing

import (
	"github.com/jackc/pgx/v5"
	"github.com/stemflow/stem/runtime"
)

// Invoice is what Bill charges.
type Invoice struct {
	ID    string
	Cents int64
}

// Bill charges an invoice.
//
//stem:workflow name=billing.bill existing=replace
func Bill(ctx *BillContext, inv Invoice) (int64, error) {
	return ctx.Charge(inv)
}

// Charge writes the charge's row in the step's transaction.
//
//stem:step name=charge version=2 retries=forever backoff=1s..1m tx
func Charge(ctx runtime.StepContext, tx pgx.Tx, inv Invoice) (int64, error) {
	var id int64
	err := tx.QueryRow(ctx, "INSERT INTO charges (invoice, cents) VALUES ($1, $2) RETURNING id", inv.ID, inv.Cents).Scan(&id)
	return id, err
}
