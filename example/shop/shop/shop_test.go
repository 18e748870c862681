package shop_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/stemflow/stem/example/shop/shop"
	"github.com/stemflow/stem/example/shop/shop/shopstemtest"
	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/stemtest"
	"github.com/stemflow/stem/storage"
	"github.com/stemflow/stem/stores/memstore"
	"github.com/stemflow/stem/stores/sqlitestore"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// fixture is an engine on a SQLite store of the test's own, with the
// shop's workflow registered and its tables created, and a way to start
// working.
type fixture struct {
	ctx    context.Context
	engine *runtime.Engine
}

func setup(t *testing.T) *fixture {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	st, err := sqlitestore.Open(filepath.Join(t.TempDir(), "shop.db"), sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	e, err := runtime.New(runtime.Config{Store: st, PollInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	if err := shop.RegisterWorkflows(e); err != nil {
		t.Fatal(err)
	}
	if err := shop.CreateTables(ctx, e); err != nil {
		t.Fatal(err)
	}
	return &fixture{ctx: ctx, engine: e}
}

// work runs the engine until the test ends.
func (f *fixture) work(t *testing.T) {
	ctx, stop := context.WithCancel(f.ctx)
	done := make(chan error, 1)
	go func() { done <- f.engine.Run(ctx) }()
	t.Cleanup(func() { stop(); <-done })
}

// count returns what one query of the shop's tables counts, read in a
// transaction of the store's.
func (f *fixture) count(t *testing.T, query string, args ...any) int {
	t.Helper()
	app, err := f.engine.BeginTx(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer app.Rollback(f.ctx)
	tx, err := shop.SQLTx(app)
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := tx.QueryRowContext(f.ctx, query, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

var order = shop.Order{ID: "order-0042", Customer: "grace", AmountCents: 12000}

// An order placed in a transaction that rolls back leaves neither its row
// nor its run, though an engine works the store meanwhile; placed again
// and committed, it is worked and paid once.
func TestRolledBackPlaceLeavesNeither(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.work(t)

	app, err := f.engine.BeginTx(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := shop.SQLTx(app)
	if err != nil {
		t.Fatal(err)
	}
	placed, err := shop.PlaceTx(f.ctx, f.engine, tx, order)
	if err != nil || !placed {
		t.Fatalf("PlaceTx: %v, %v", placed, err)
	}
	var inTx int
	if err := tx.QueryRowContext(f.ctx, `SELECT count(*) FROM shop_orders WHERE id = ?`, order.ID).Scan(&inTx); err != nil || inTx != 1 {
		t.Fatalf("the order's row inside its transaction: %d, %v", inTx, err)
	}
	if err := app.Rollback(f.ctx); err != nil {
		t.Fatal(err)
	}
	if n := f.count(t, `SELECT count(*) FROM shop_orders`); n != 0 {
		t.Errorf("%d order rows after the rollback, want none", n)
	}
	if _, err := f.engine.Get(f.ctx, order.ID); !errors.Is(err, runtime.ErrRunNotFound) {
		t.Errorf("the order's run after the rollback: %v, want ErrRunNotFound", err)
	}

	placed, err = shop.Place(f.ctx, f.engine, order)
	if err != nil || !placed {
		t.Fatalf("Place: %v, %v", placed, err)
	}
	run, err := shop.GetPlaceOrder(f.ctx, f.engine, order.ID)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := run.Result(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := (shop.Receipt{OrderID: order.ID, PaymentID: 1, AmountCents: 11400}); rec != want {
		t.Errorf("receipt %+v, want %+v (5%% off 120.00)", rec, want)
	}
	if n := f.count(t, `SELECT count(*) FROM shop_payments WHERE order_id = ?`, order.ID); n != 1 {
		t.Errorf("%d payments, want 1", n)
	}
	if n := f.count(t, `SELECT paid FROM shop_orders WHERE id = ?`, order.ID); n != 1 {
		t.Errorf("paid %d, want 1", n)
	}
}

// Placing an order whose ID is in shop_orders writes nothing: one row,
// one run.
func TestPlaceTwice(t *testing.T) {
	t.Parallel()
	f := setup(t)
	for i, want := range []bool{true, false} {
		placed, err := shop.Place(f.ctx, f.engine, order)
		if err != nil || placed != want {
			t.Fatalf("Place #%d: %v, %v; want %v", i+1, placed, err, want)
		}
	}
	if n := f.count(t, `SELECT count(*) FROM shop_orders`); n != 1 {
		t.Errorf("%d order rows, want 1", n)
	}
	runs, _, err := f.engine.ListRuns(f.ctx, runtime.ListRunsQuery{})
	if err != nil || len(runs) != 1 || runs[0].ID != order.ID {
		t.Errorf("runs %+v, %v; want the order's one", runs, err)
	}
}

// The shop's workflow needs SQLite's transactions: registering it on the
// in-memory store fails naming its transactional step, and so does
// creating the tables.
func TestRefusedOnMemstore(t *testing.T) {
	t.Parallel()
	e, err := runtime.New(runtime.Config{Store: memstore.New(memstore.Options{})})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	err = shop.RegisterWorkflows(e)
	if !errors.Is(err, runtime.ErrInvalidArgument) || !strings.Contains(err.Error(), shop.StepRecordPayment) {
		t.Errorf("RegisterWorkflows on memstore: %v, want ErrInvalidArgument naming %s", err, shop.StepRecordPayment)
	}
	if err := shop.CreateTables(context.Background(), e); !errors.Is(err, runtime.ErrInvalidArgument) {
		t.Errorf("CreateTables on memstore: %v, want ErrInvalidArgument", err)
	}
}

// A failed attempt of the payment step rolls back what it wrote: the
// first attempt records the payment and then fails, the retry records it
// again, and the order has one payment.
func TestFailedPaymentAttemptRollsBack(t *testing.T) {
	t.Parallel()
	env := stemtest.New(t, shop.RegisterWorkflows, stemtest.WithStore(func(clock storage.Clock) storage.Store {
		st, err := sqlitestore.Open(filepath.Join(t.TempDir(), "shop.db"), sqlitestore.Options{Clock: clock})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}))
	pay := shopstemtest.Mock(env).RecordPayment(func(ctx runtime.StepContext, tx *sql.Tx, o shop.Order) (shop.Receipt, error) {
		rec, err := shop.RecordPayment(ctx, tx, o)
		if err == nil && ctx.Attempt() == 1 {
			return shop.Receipt{}, errors.New("the payment's first attempt fails after its writes")
		}
		return rec, err
	})
	if err := shop.CreateTables(env.Context(), env.Engine); err != nil {
		t.Fatal(err)
	}
	if _, err := shop.Place(env.Context(), env.Engine, order); err != nil {
		t.Fatal(err)
	}
	run, err := shop.GetPlaceOrder(env.Context(), env.Engine, order.ID)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := run.Result(env.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(pay.Calls()) != 2 {
		t.Errorf("%d attempts of the payment, want 2", len(pay.Calls()))
	}
	app, err := env.Engine.BeginTx(env.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer app.Rollback(env.Context())
	tx, err := shop.SQLTx(app)
	if err != nil {
		t.Fatal(err)
	}
	var payments, paid int
	var rowid int64
	err = tx.QueryRowContext(env.Context(), `SELECT (SELECT count(*) FROM shop_payments), (SELECT max(rowid) FROM shop_payments), (SELECT paid FROM shop_orders)`).Scan(&payments, &rowid, &paid)
	if err != nil || payments != 1 || paid != 1 || rec.PaymentID != rowid {
		t.Errorf("%d payments, paid %d, row %d for receipt %+v (%v); want one payment, paid once, the receipt's", payments, paid, rowid, rec, err)
	}
}
