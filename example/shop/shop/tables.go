package shop

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/storage"
)

// Schema creates the shop's own tables, if they are not there, in the
// store's SQLite file. shop_payments has no unique key on order_id on
// purpose: a payment applied twice would be a second row, seen and
// counted, rather than an error that hides it.
const Schema = `
CREATE TABLE IF NOT EXISTS shop_orders (
	id           TEXT PRIMARY KEY,
	customer     TEXT NOT NULL,
	amount_cents INTEGER NOT NULL,
	paid         INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS shop_payments (
	order_id     TEXT NOT NULL,
	amount_cents INTEGER NOT NULL
);`

// CreateTables creates the shop's tables (Schema) in a transaction on the
// engine's store, which must be SQLite.
func CreateTables(ctx context.Context, e *runtime.Engine) error {
	return inTx(ctx, e, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, Schema)
		return err
	})
}

// Place places the order, unless its ID is in shop_orders already: in one
// transaction on the engine's store, it inserts the order's row and starts
// its run of PlaceOrder under the order's ID (PlaceTx). It reports whether
// it placed the order; one placed before (by an earlier session, say) is
// left as it is, so placing the same orders again after a crash places
// only those that were not.
func Place(ctx context.Context, e *runtime.Engine, o Order) (placed bool, err error) {
	err = inTx(ctx, e, func(tx *sql.Tx) error {
		placed, err = PlaceTx(ctx, e, tx, o)
		return err
	})
	return placed, err
}

// PlaceTx is Place inside tx, a transaction on the store's file (the Tx of
// e.BeginTx): the order's row and its run exist once tx commits, and
// neither does if it rolls back. The check for an order placed before is
// made in tx, so it holds until the commit: SQLite lets one transaction
// write at a time.
func PlaceTx(ctx context.Context, e *runtime.Engine, tx *sql.Tx, o Order) (placed bool, err error) {
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM shop_orders WHERE id = ?`, o.ID).Scan(&n); err != nil {
		return false, fmt.Errorf("shop: place %s: %w", o.ID, err)
	}
	if n > 0 {
		return false, nil
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO shop_orders (id, customer, amount_cents) VALUES (?, ?, ?)`,
		o.ID, o.Customer, o.AmountCents); err != nil {
		return false, fmt.Errorf("shop: place %s: %w", o.ID, err)
	}
	if _, err := StartPlaceOrderTx(ctx, e, tx, o, runtime.WithID(o.ID)); err != nil {
		return false, fmt.Errorf("shop: place %s: %w", o.ID, err)
	}
	return true, nil
}

// inTx runs fn in a transaction the engine's store begins, and commits it
// when fn succeeds.
func inTx(ctx context.Context, e *runtime.Engine, fn func(tx *sql.Tx) error) error {
	app, err := e.BeginTx(ctx)
	if err != nil {
		return fmt.Errorf("shop: %w", err)
	}
	defer app.Rollback(ctx)
	tx, err := SQLTx(app)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		return err
	}
	return app.Commit(ctx)
}

// SQLTx returns the *sql.Tx of a transaction the engine's store began, or
// an error saying that the store is not SQLite, which the shop needs.
func SQLTx(app storage.AppTx) (*sql.Tx, error) {
	tx, ok := app.Tx().(*sql.Tx)
	if !ok {
		return nil, fmt.Errorf("shop: the store's transactions are %T: the shop's tables and its transactional step need SQLite's *sql.Tx (sqlitestore)", app.Tx())
	}
	return tx, nil
}
