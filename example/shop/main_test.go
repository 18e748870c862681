package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
	_ "modernc.org/sqlite" // the "sqlite" driver the checks read the shop's tables with

	"github.com/stemflow/stem/example/shop/shop"
	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/stores/sqlitestore"
)

// envCommand set to 1 makes the test binary the command: a test re-executes
// it so, with the command's arguments, to kill it as kill -9 would.
const envCommand = "STEM_SHOP_EXAMPLE_COMMAND"

func TestMain(m *testing.M) {
	if os.Getenv(envCommand) == "1" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
		stop()
		os.Exit(code)
	}
	goleak.VerifyTestMain(m)
}

// command returns the command as a process of its own (the test binary
// re-executed), its output collected in out.
func command(ctx context.Context, out *bytes.Buffer, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	cmd.Env = append(os.Environ(), envCommand+"=1")
	cmd.Stdout, cmd.Stderr = out, out
	return cmd
}

// The test that matters: the command is killed (SIGKILL, as kill -9)
// eight times at random moments, 100 to 600ms into a session, each time
// started again on the same file, and then left to finish. Whatever the
// kills interrupted (an order's transaction, a payment's step, a commit),
// the file then holds every order with exactly one run, every run with its
// order, and every order paid exactly once by a complete run.
func TestKilledAndRestarted(t *testing.T) {
	if testing.Short() {
		t.Skip("kills the command eight times and waits for its leases to lapse")
	}
	const orders, kills = 240, 8
	db := filepath.Join(t.TempDir(), "shop.db")
	args := []string{"--store", db, "--orders", strconv.Itoa(orders), "--pace", "15ms"}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	landed := 0
	for i := 1; i <= kills; i++ {
		var out bytes.Buffer
		cmd := command(ctx, &out, args...)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(100+rand.IntN(501)) * time.Millisecond)
		_ = cmd.Process.Signal(syscall.SIGKILL) // fails only if it has ended, which Wait tells
		err := cmd.Wait()
		status, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
		switch {
		case status.Signaled() && status.Signal() == syscall.SIGKILL:
			landed++
			t.Logf("session %d killed: %s", i, progress(db))
		case err == nil:
			t.Logf("session %d finished before its kill: %s", i, progress(db))
		default:
			t.Fatalf("session %d: %v\n%s", i, err, out.String())
		}
	}

	var out bytes.Buffer
	if err := command(ctx, &out, args...).Run(); err != nil {
		t.Fatalf("the last session: %v\n%s", err, out.String())
	}
	t.Logf("the last session:\n%s", out.String())
	payments := verify(t, db, orders)
	t.Logf("%d kills landed of %d; %d orders, %d payments", landed, kills, orders, payments)
}

// progress says how far the sessions got, from the shop's tables, as a
// line for the log: the file may not have them yet.
func progress(db string) string {
	d, err := sql.Open("sqlite", db)
	if err != nil {
		return err.Error()
	}
	defer d.Close()
	var placed, paid int
	err = d.QueryRow(`SELECT (SELECT count(*) FROM shop_orders), (SELECT count(*) FROM shop_payments)`).Scan(&placed, &paid)
	if err != nil {
		return "no shop tables yet"
	}
	return fmt.Sprintf("%d orders placed, %d paid so far", placed, paid)
}

// verify checks the file after the last session, with its own reads
// rather than the command's audit, and returns how many payments it holds.
func verify(t *testing.T, db string, orders int) int {
	t.Helper()
	ctx := context.Background()
	d, err := sql.Open("sqlite", db)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()

	type row struct {
		customer string
		cents    int64
		paid     int
	}
	rows := map[string]row{}
	q, err := d.QueryContext(ctx, `SELECT id, customer, amount_cents, paid FROM shop_orders`)
	if err != nil {
		t.Fatal(err)
	}
	for q.Next() {
		var id string
		var r row
		if err := q.Scan(&id, &r.customer, &r.cents, &r.paid); err != nil {
			t.Fatal(err)
		}
		rows[id] = r
	}
	if err := q.Err(); err != nil {
		t.Fatal(err)
	}
	q.Close()
	for i := 1; i <= orders; i++ {
		if _, ok := rows[fmt.Sprintf("order-%04d", i)]; !ok {
			t.Errorf("order-%04d was never placed", i)
		}
	}
	if len(rows) != orders {
		t.Errorf("%d order rows, want %d", len(rows), orders)
	}

	type payment struct {
		rowid int64
		cents int64
	}
	payments := map[string][]payment{}
	n := 0
	q, err = d.QueryContext(ctx, `SELECT rowid, order_id, amount_cents FROM shop_payments`)
	if err != nil {
		t.Fatal(err)
	}
	for q.Next() {
		var id string
		var p payment
		if err := q.Scan(&p.rowid, &id, &p.cents); err != nil {
			t.Fatal(err)
		}
		payments[id] = append(payments[id], p)
		n++
	}
	if err := q.Err(); err != nil {
		t.Fatal(err)
	}
	q.Close()
	for id, ps := range payments {
		if _, ok := rows[id]; !ok {
			t.Errorf("%d payments of %s, which is no order", len(ps), id)
		}
	}

	st, err := sqlitestore.Open(db, sqlitestore.Options{OpenExisting: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	e, err := runtime.New(runtime.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if err := shop.RegisterWorkflows(e); err != nil {
		t.Fatal(err)
	}
	for id, r := range rows {
		if r.paid != 1 || len(payments[id]) != 1 {
			t.Errorf("%s: paid %d, %d payment rows %v; want each exactly once", id, r.paid, len(payments[id]), payments[id])
		}
		info, err := e.Get(ctx, id)
		if err != nil {
			t.Errorf("%s: the order's run: %v", id, err)
			continue
		}
		var in shop.Order
		if err := json.Unmarshal(info.Input, &in); err != nil || in != (shop.Order{ID: id, Customer: r.customer, AmountCents: r.cents}) {
			t.Errorf("%s: the run's input %s (%v) is not the order's row %+v", id, info.Input, err, r)
		}
		if info.Workflow != shop.PlaceOrderWorkflowName || info.Status != runtime.StatusComplete {
			t.Errorf("%s: a run of %s, %s, want %s, complete (%v)", id, info.Workflow, info.Status, shop.PlaceOrderWorkflowName, info.Err)
			continue
		}
		run, err := shop.GetPlaceOrder(ctx, e, id)
		if err != nil {
			t.Fatal(err)
		}
		rec, err := run.Result(ctx)
		if err != nil {
			t.Errorf("%s: %v", id, err)
			continue
		}
		// The step's checkpointed result is the payment its transaction
		// committed, not one a killed attempt wrote and lost.
		if ps := payments[id]; len(ps) == 1 && (rec.PaymentID != ps[0].rowid || rec.AmountCents != ps[0].cents) {
			t.Errorf("%s: the run's receipt %+v, the payment row %+v", id, rec, ps[0])
		}
	}
	runs, after := 0, ""
	for {
		page, next, err := e.ListRuns(ctx, runtime.ListRunsQuery{After: after, Limit: 500})
		if err != nil {
			t.Fatal(err)
		}
		for _, info := range page {
			runs++
			if _, ok := rows[info.ID]; !ok {
				t.Errorf("run %s of %s has no order row", info.ID, info.Workflow)
			}
		}
		if next == "" {
			break
		}
		after = next
	}
	if runs != orders || n != orders {
		t.Errorf("%d runs and %d payments, want %d of each", runs, n, orders)
	}
	return n
}

// Run again on a finished file, the command places nothing and pays
// nothing again.
func TestRerunPlacesNothing(t *testing.T) {
	db := filepath.Join(t.TempDir(), "shop.db")
	args := []string{"--store", db, "--orders", "12"}
	var out, errOut bytes.Buffer
	if code := run(context.Background(), args, &out, &errOut); code != 0 {
		t.Fatalf("first session: exit %d\n%s%s", code, out.String(), errOut.String())
	}
	out.Reset()
	if code := run(context.Background(), args, &out, &errOut); code != 0 {
		t.Fatalf("second session: exit %d\n%s%s", code, out.String(), errOut.String())
	}
	for _, want := range []string{
		"placed 0 orders in " + db + "; 12 were placed by an earlier session",
		"12 orders, 12 runs of shop.order, 12 payments",
		"every order has its run, complete, and exactly one payment",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("second session's output lacks %q:\n%s", want, out.String())
		}
	}
	verify(t, db, 12)
}

// A store other than a SQLite file is refused before anything connects
// to it, saying why.
func TestRefusesOtherStores(t *testing.T) {
	for _, store := range []string{
		"postgres://nobody@127.0.0.1:1/none?sslmode=disable",
		"redis://127.0.0.1:1/0",
		"mem:",
	} {
		var out, errOut bytes.Buffer
		code := run(context.Background(), []string{"--store", store}, &out, &errOut)
		msg := errOut.String()
		if code != 2 || !strings.Contains(msg, "SQLite only") || !strings.Contains(msg, "*sql.Tx") || strings.Contains(msg, "127.0.0.1") {
			t.Errorf("--store %s: exit %d, %q; want exit 2 and why, without the URL", store, code, msg)
		}
	}
}
