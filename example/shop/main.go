// Command shop places orders and takes their payments in the store's own
// SQLite file, with the shop's tables beside Stem's, and checks that every
// order came out whole:
//
//	go run ./example/shop                       # 50 orders in shop.db
//	go run ./example/shop --orders 500 --pace 10ms
//	go test ./example/shop -run TestKilled -v   # kill -9 it again and again, then check the file
//
// It shows transactions on the embedded SQLite store (sqlitestore, the
// default), with the annotated package example/shop/shop. Each order's
// row and its workflow run are written in one transaction of the
// application's (runtime.Engine.BeginTx, shop.StartPlaceOrderTx): both
// exist, or neither. The workflow prices the order, then records its
// payment in a transactional step, whose writes (a payment row, the order
// marked paid) commit with the step's checkpoint: the payment is applied
// once, however often the worker dies. That step takes a *sql.Tx, so the
// command runs on SQLite only and refuses a Postgres or Redis store; a
// Postgres variant would take a pgx.Tx.
//
// The orders have fixed IDs (order-0001 on), so running it again after
// an interruption (Ctrl-C, or kill -9) places only the orders that were
// not placed and works the unfinished ones. At the end it prints the
// orders, the payments, and any order without a run, run without an
// order, or order not paid exactly once, and then fails.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}
