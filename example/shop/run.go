package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/stemflow/stem/example/shop/shop"
	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/stores/sqlitestore"
	"github.com/stemflow/stem/stores/storeurl"
)

// defaultStore is the SQLite file --store names unless told otherwise, in
// the working directory.
const defaultStore = "shop.db"

// run is the whole program; main only wires signals and the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("shop", flag.ContinueOnError)
	fs.SetOutput(stderr)
	store := fs.String("store", defaultStore, "the SQLite file that keeps the runs and the shop's tables (a path, or sqlite:…); SQLite only, since the payment step takes a *sql.Tx")
	count := fs.Int("orders", 50, "how many orders to place, order-0001 on")
	workers := fs.Int("workers", 8, "how many runs this process executes at once")
	pace := fs.Duration("pace", 0, "the pause between two orders placed, as customers arriving would leave")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *count < 1 || *count > 9999 || *workers < 1 || *pace < 0 {
		fmt.Fprintln(stderr, "shop: --orders must be 1 to 9999, --workers at least 1 and --pace not negative")
		return 2
	}
	if err := sqliteOnly(*store); err != nil {
		fmt.Fprintln(stderr, "shop:", err)
		return 2
	}
	err := shopFor(ctx, config{store: *store, orders: *count, workers: *workers, pace: *pace, out: stdout, warnings: stderr})
	switch {
	case err == nil:
		return 0
	case errors.Is(err, context.Canceled):
		return 130
	}
	fmt.Fprintln(stderr, "shop:", err)
	return 1
}

// sqliteOnly refuses a store that is not a SQLite file, before connecting
// to it, saying why.
func sqliteOnly(store string) error {
	kinds := []struct{ prefix, kind string }{
		{"postgres://", "a Postgres store"}, {"postgresql://", "a Postgres store"},
		{"redis://", "a Redis store"}, {"rediss://", "a Redis store"},
		{"mem:", "the in-memory store"}, {"memory:", "the in-memory store"},
	}
	for _, k := range kinds {
		if strings.HasPrefix(store, k.prefix) {
			return fmt.Errorf("--store names %s, and this example runs on SQLite only: "+
				"its tables live in the store's SQLite file and its payment step takes a *sql.Tx "+
				"(a Postgres variant would take a pgx.Tx); give --store a SQLite path, such as %s", k.kind, defaultStore)
		}
	}
	return nil
}

type config struct {
	store    string
	orders   int
	workers  int
	pace     time.Duration
	out      io.Writer
	warnings io.Writer // the store's warnings
}

// shopFor places the orders, works them until every one has ended, and
// prints the summary, an error if it found an order amiss.
func shopFor(ctx context.Context, cfg config) error {
	st, err := storeurl.OpenWith(ctx, cfg.store, storeurl.Options{
		Logger: slog.New(slog.NewTextHandler(cfg.warnings, nil)),
	})
	if err != nil {
		return err
	}
	defer st.Close()
	if _, ok := st.(*sqlitestore.Store); !ok {
		return fmt.Errorf("--store %s opened a %T, and this example runs on SQLite only", cfg.store, st)
	}
	engine, err := runtime.New(runtime.Config{
		Store:         st,
		Workers:       cfg.workers,
		LeaseDuration: 5 * time.Second, // a killed session's runs are taken up again within 5s
		PollInterval:  200 * time.Millisecond,
		Logger:        slog.New(slog.DiscardHandler),
	})
	if err != nil {
		return err
	}
	defer engine.Close()
	if err := shop.RegisterWorkflows(engine); err != nil {
		return err
	}
	if err := shop.CreateTables(ctx, engine); err != nil {
		return err
	}

	// Work while placing, as a shop does: the engine hears of each order's
	// run when the transaction that placed it commits.
	began := time.Now()
	work, stopWork := context.WithCancel(context.WithoutCancel(ctx))
	workDone := make(chan error, 1)
	go func() { workDone <- engine.Run(work) }()
	defer func() {
		// Runs in flight are handed back, ready for the next session.
		stopWork()
		<-workDone
	}()

	placed, err := placeOrders(ctx, engine, cfg)
	if err != nil {
		return interrupted(ctx, cfg.out, err)
	}
	fmt.Fprintf(cfg.out, "placed %d orders in %s", placed, cfg.store)
	if earlier := cfg.orders - placed; earlier > 0 {
		fmt.Fprintf(cfg.out, "; %d were placed by an earlier session", earlier)
	}
	fmt.Fprintln(cfg.out)

	failed, err := awaitOrders(ctx, engine)
	if err != nil {
		return interrupted(ctx, cfg.out, err)
	}
	a, err := audit(context.WithoutCancel(ctx), engine)
	if err != nil {
		return err
	}
	return a.print(cfg.out, failed, time.Since(began))
}

// interrupted says how to resume when err is the interruption (Ctrl-C),
// and returns err.
func interrupted(ctx context.Context, out io.Writer, err error) error {
	if ctx.Err() != nil {
		fmt.Fprintln(out, "interrupted: run again to place the orders left and work the unfinished ones")
		return ctx.Err()
	}
	return err
}

// sampleOrder is the i-th order (from 1): its ID and amount are fixed, so
// a later session places the same orders.
func sampleOrder(i int) shop.Order {
	return shop.Order{
		ID:          fmt.Sprintf("order-%04d", i),
		Customer:    fmt.Sprintf("customer-%d", i%7),
		AmountCents: int64(1500 + 2500*(i%6)), // 15.00 to 140.00: some get the discount
	}
}

// placeOrders places the orders, each in a transaction of its own, and
// returns how many it placed: an order an earlier session placed is left
// as it is.
func placeOrders(ctx context.Context, e *runtime.Engine, cfg config) (int, error) {
	placed := 0
	for i := 1; i <= cfg.orders; i++ {
		ok, err := shop.Place(ctx, e, sampleOrder(i))
		if err != nil {
			return placed, err
		}
		if !ok {
			continue
		}
		placed++
		if cfg.pace > 0 {
			select {
			case <-ctx.Done():
				return placed, ctx.Err()
			case <-time.After(cfg.pace):
			}
		}
	}
	return placed, nil
}

// awaitOrders waits for the run of every order in shop_orders to end, and
// returns the failures of those that did not complete, by order ID. An
// order without a run is the audit's to report.
func awaitOrders(ctx context.Context, e *runtime.Engine) (map[string]error, error) {
	var ids []string
	err := readTx(ctx, e, func(tx *sql.Tx) error {
		var err error
		ids, err = queryStrings(ctx, tx, `SELECT id FROM shop_orders ORDER BY id`)
		return err
	})
	if err != nil {
		return nil, err
	}
	failed := map[string]error{}
	for _, id := range ids {
		r, err := shop.GetPlaceOrder(ctx, e, id)
		if errors.Is(err, runtime.ErrRunNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if _, err := r.Result(ctx); err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			failed[id] = err
		}
	}
	return failed, nil
}

// auditReport is what the store's file holds once the orders are worked:
// the shop's rows and the runs of its workflow, and what does not match.
type auditReport struct {
	orders, payments, runs int
	listedCents, paidCents int64
	noRun                  []string // orders whose ID has no run
	noOrder                []string // runs of shop.order without an order row
	notPaidOnce            []string // orders not paid exactly once, with why
	unfinished             []string // runs not complete, with their status
}

// audit reads the shop's tables and its runs and matches them up.
func audit(ctx context.Context, e *runtime.Engine) (*auditReport, error) {
	a := &auditReport{}
	type order struct {
		cents    int64
		paid     int
		payments int
	}
	orders := map[string]*order{}
	var stray []string // payments of no order
	err := readTx(ctx, e, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT id, amount_cents, paid FROM shop_orders`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id string
			o := &order{}
			if err := rows.Scan(&id, &o.cents, &o.paid); err != nil {
				return err
			}
			orders[id] = o
			a.listedCents += o.cents
		}
		if err := rows.Err(); err != nil {
			return err
		}
		rows, err = tx.QueryContext(ctx, `SELECT order_id, amount_cents FROM shop_payments`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id string
			var cents int64
			if err := rows.Scan(&id, &cents); err != nil {
				return err
			}
			a.payments++
			a.paidCents += cents
			if o, ok := orders[id]; ok {
				o.payments++
			} else {
				stray = append(stray, id)
			}
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	a.orders = len(orders)
	for _, id := range stray {
		a.notPaidOnce = append(a.notPaidOnce, fmt.Sprintf("%s: a payment, and no such order", id))
	}
	for id, o := range orders {
		if o.payments != 1 || o.paid != 1 {
			a.notPaidOnce = append(a.notPaidOnce, fmt.Sprintf("%s: %d payments, paid %d times", id, o.payments, o.paid))
		}
	}

	runs := map[string]bool{}
	after := ""
	for {
		page, next, err := e.ListRuns(ctx, runtime.ListRunsQuery{Workflow: shop.PlaceOrderWorkflowName, After: after, Limit: 1000})
		if err != nil {
			return nil, err
		}
		for _, r := range page {
			runs[r.ID] = true
			if _, ok := orders[r.ID]; !ok {
				a.noOrder = append(a.noOrder, r.ID)
			}
			if r.Status != runtime.StatusComplete {
				a.unfinished = append(a.unfinished, fmt.Sprintf("%s: %s", r.ID, r.Status))
			}
		}
		if next == "" {
			break
		}
		after = next
	}
	a.runs = len(runs)
	for id := range orders {
		if !runs[id] {
			a.noRun = append(a.noRun, id)
		}
	}
	for _, s := range [][]string{a.noRun, a.noOrder, a.notPaidOnce, a.unfinished} {
		slices.Sort(s)
	}
	return a, nil
}

// print writes the summary, with a line for each order amiss, and returns
// an error when there is one.
func (a *auditReport) print(out io.Writer, failed map[string]error, elapsed time.Duration) error {
	fmt.Fprintf(out, "\nsummary after %.1fs: %d orders, %d runs of %s, %d payments charging %s (listed %s)\n",
		elapsed.Seconds(), a.orders, a.runs, shop.PlaceOrderWorkflowName, a.payments, money(a.paidCents), money(a.listedCents))
	bad := 0
	list := func(what string, items []string) {
		for _, it := range items {
			fmt.Fprintf(out, "  %s %s\n", what, it)
			bad++
		}
	}
	list("order without a run:", a.noRun)
	list("run without an order:", a.noOrder)
	list("not paid exactly once:", a.notPaidOnce)
	list("run not complete:", a.unfinished)
	for _, id := range slices.Sorted(maps.Keys(failed)) {
		fmt.Fprintf(out, "  failed %s: %v\n", id, failed[id])
	}
	if bad > 0 {
		return fmt.Errorf("%d things amiss in the store's file", bad)
	}
	fmt.Fprintln(out, "  every order has its run, complete, and exactly one payment")
	return nil
}

// money writes cents as units and hundredths.
func money(cents int64) string { return fmt.Sprintf("%d.%02d", cents/100, cents%100) }

// readTx runs fn in a transaction on the store's file and rolls it back:
// a consistent read of the shop's tables.
func readTx(ctx context.Context, e *runtime.Engine, fn func(tx *sql.Tx) error) error {
	app, err := e.BeginTx(ctx)
	if err != nil {
		return err
	}
	defer app.Rollback(ctx)
	tx, err := shop.SQLTx(app)
	if err != nil {
		return err
	}
	return fn(tx)
}

// queryStrings returns the first column of what query selects.
func queryStrings(ctx context.Context, tx *sql.Tx, query string) ([]string, error) {
	rows, err := tx.QueryContext(ctx, query)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}
