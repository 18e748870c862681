package ledger_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	_ "modernc.org/sqlite"

	ledger "example.com/stemcase"
	"example.com/stemcase/ledgerstemtest"
	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/stemtest"
	"github.com/stemflow/stem/storage"
	"github.com/stemflow/stem/stores/memstore"
	"github.com/stemflow/stem/stores/sqlitestore"
)

func register(e *runtime.Engine) error { return ledger.RegisterWorkflows(e, &ledger.Steps{}) }

// TestRefusedOnMemstore registers the workflows on the in-memory store,
// which has no transactions: each Register fails with the runtime's
// error naming a transactional step, its type and the store.
func TestRefusedOnMemstore(t *testing.T) {
	e, err := runtime.New(runtime.Config{Store: memstore.New(memstore.Options{})})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	for name, reg := range map[string]func(*runtime.Engine, *ledger.Steps) error{
		"RegisterSettle": ledger.RegisterSettle, "RegisterReconcile": ledger.RegisterReconcile,
	} {
		err := reg(e, &ledger.Steps{})
		if !errors.Is(err, runtime.ErrInvalidArgument) {
			t.Fatalf("%s on memstore: %v, want an error matching runtime.ErrInvalidArgument", name, err)
		}
		msg := err.Error()
		if !strings.Contains(msg, "transactional step") || !strings.Contains(msg, "*memstore.Store") ||
			!slices.ContainsFunc([]string{ledger.StepRecord, ledger.StepMarkSettled, ledger.StepAudit}, func(k string) bool { return strings.Contains(msg, `"`+k+`"`) }) {
			t.Errorf("%s on memstore: %q does not name a transactional step and the store", name, msg)
		}
	}
}

// TestTypeMismatch registers on a store whose transactions are pgx.Tx:
// the steps take *sql.Tx, and Register says so.
func TestTypeMismatch(t *testing.T) {
	st := &txStore{Store: memstore.New(memstore.Options{}), txType: reflect.TypeFor[pgx.Tx]()}
	e, err := runtime.New(runtime.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	err = ledger.RegisterSettle(e, &ledger.Steps{})
	if !errors.Is(err, runtime.ErrInvalidArgument) || !strings.Contains(err.Error(), "*sql.Tx") || !strings.Contains(err.Error(), "pgx.Tx") {
		t.Errorf("RegisterSettle on a pgx.Tx store: %v, want an error naming both transaction types", err)
	}
}

// TestRegistersOnTxStore registers on a store with *sql.Tx transactions.
func TestRegistersOnTxStore(t *testing.T) {
	st := &txStore{Store: memstore.New(memstore.Options{}), txType: reflect.TypeFor[*sql.Tx]()}
	e, err := runtime.New(runtime.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if err := register(e); err != nil {
		t.Fatalf("RegisterWorkflows on a *sql.Tx store: %v", err)
	}
}

// TestSQLiteStore registers the workflows on a real sqlitestore. It needs
// sqlitestore to implement storage.TxStore, which this tree's does not yet
// (the stores' transactional side is written apart): until it does, the
// test says so and skips.
func TestSQLiteStore(t *testing.T) {
	st, err := sqlitestore.Open(filepath.Join(t.TempDir(), "stem.db"), sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, ok := any(st).(storage.TxStore); !ok {
		t.Skip("sqlitestore does not implement storage.TxStore yet: registering transactional steps on it needs the stores' transactional side")
	}
	e, err := runtime.New(runtime.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if err := register(e); err != nil {
		t.Fatalf("RegisterWorkflows on sqlitestore: %v", err)
	}
}

// TestRuns runs Settle to its end on a store whose transactional steps run
// in a transaction on an SQLite database of the test's own: the steps get
// the transaction and their rows commit. A mock of Audit gets the
// transaction too.
func TestRuns(t *testing.T) {
	db := openDB(t)
	env := stemtest.New(t, register, stemtest.WithStore(func(clock storage.Clock) storage.Store {
		return &txStore{Store: memstore.New(memstore.Options{Clock: clock}), txType: reflect.TypeFor[*sql.Tx](), db: db}
	}))
	audit := ledgerstemtest.Mock(env).Audit(func(ctx runtime.StepContext, tx *sql.Tx, line string) (int, error) {
		if tx == nil {
			return 0, errors.New("the mock got no transaction")
		}
		if _, err := tx.ExecContext(ctx, "INSERT INTO audit (line) VALUES (?)", "mocked "+line); err != nil {
			return 0, err
		}
		return ctx.Iteration() + 10, nil
	})
	p := ledger.Payment{OrderID: "o-1", Cents: 1250}
	run, err := ledger.StartSettle(env.Context(), env.Engine, p, runtime.WithID("o-1"))
	if err != nil {
		t.Fatal(err)
	}
	ledgerstemtest.SendPaidAt(env, time.Hour, run.ID(), ledger.Paid{OrderID: "o-1"})
	rec, err := run.Result(env.Context())
	if err != nil {
		t.Fatal(err)
	}
	if rec.OrderID != "o-1" || rec.Row != 1 || !slices.Equal(rec.Audits, []int{10, 11}) {
		t.Errorf("receipt = %+v", rec)
	}
	var settled int
	if err := db.QueryRow("SELECT settled FROM ledger WHERE order_id = 'o-1'").Scan(&settled); err != nil || settled != 1 {
		t.Errorf("ledger row: settled %d, %v", settled, err)
	}
	var lines []string
	rows, err := db.Query("SELECT line FROM audit ORDER BY rowid")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var l string
		if err := rows.Scan(&l); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, l)
	}
	if want := []string{"mocked o-1 audit 0", "mocked o-1 audit 1"}; !slices.Equal(lines, want) {
		t.Errorf("audit lines %q, want %q", lines, want)
	}
	if got := audit.Calls(); !slices.Equal(got, []ledgerstemtest.AuditCall{{Line: "o-1 audit 0"}, {Line: "o-1 audit 1"}}) {
		t.Errorf("audit calls = %+v", got)
	}
}

func openDB(t *testing.T) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "app.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	db.SetMaxOpenConns(1)
	for _, q := range []string{
		"CREATE TABLE ledger (order_id TEXT, cents INTEGER, settled INTEGER NOT NULL DEFAULT 0)",
		"CREATE TABLE audit (line TEXT)",
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	return db
}

// txStore stands in for a store with transactions (sqlitestore, once it
// implements storage.TxStore): the in-memory store, with transactions of
// txType. With db, a transactional step runs in a transaction on db, which
// commits after the in-memory checkpoint is written: not atomic, as a
// real store is, but enough to run the generated calls. The application's
// writes (BeginTx and the calls inside it) fail.
type txStore struct {
	*memstore.Store
	txType reflect.Type
	db     *sql.DB
}

var _ storage.TxStore = (*txStore)(nil)

var errNoAppTx = errors.New("txStore: the test's store takes no application transactions")

func (s *txStore) TxType() reflect.Type { return s.txType }

func (s *txStore) BeginTx(context.Context) (storage.AppTx, error) { return nil, errNoAppTx }

func (s *txStore) CreateRunsTx(context.Context, any, []storage.NewRun) ([]storage.CreateResult, error) {
	return nil, errNoAppTx
}

func (s *txStore) SendEventTx(context.Context, any, storage.Event) (bool, error) {
	return false, errNoAppTx
}

func (s *txStore) EmitTx(context.Context, any, storage.EmitRequest) ([]string, error) {
	return nil, errNoAppTx
}

func (s *txStore) CheckpointTx(ctx context.Context, req storage.CheckpointRequest, step func(ctx context.Context, tx any) ([]byte, error)) (storage.CheckpointResult, error) {
	if s.db == nil {
		return storage.CheckpointResult{}, errors.New("txStore: no database to run the step in")
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return storage.CheckpointResult{}, err
	}
	defer tx.Rollback()
	out, err := step(ctx, tx)
	if err != nil {
		return storage.CheckpointResult{}, err
	}
	req.Checkpoint.Output = out
	res, err := s.Store.Checkpoint(ctx, req)
	if err != nil || res.Existing != nil {
		return res, err
	}
	return res, tx.Commit()
}
