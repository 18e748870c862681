package crashtest

import (
	"context"
	"database/sql"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stemflow/stem/storage"
)

// txRecorder is a worker's recorder on a transactional store: the
// recorder's logging of claims and writes, and the store's transactions
// for the transactional steps.
type txRecorder struct {
	*recorder
}

func (r txRecorder) tx() storage.TxStore { return r.Store.(storage.TxStore) }

func (r txRecorder) TxType() reflect.Type { return r.tx().TxType() }

func (r txRecorder) BeginTx(ctx context.Context) (storage.AppTx, error) { return r.tx().BeginTx(ctx) }

func (r txRecorder) CreateRunsTx(ctx context.Context, tx any, runs []storage.NewRun) ([]storage.CreateResult, error) {
	return r.tx().CreateRunsTx(ctx, tx, runs)
}

func (r txRecorder) SendEventTx(ctx context.Context, tx any, ev storage.Event) (bool, error) {
	return r.tx().SendEventTx(ctx, tx, ev)
}

func (r txRecorder) EmitTx(ctx context.Context, tx any, req storage.EmitRequest) ([]string, error) {
	return r.tx().EmitTx(ctx, tx, req)
}

// CheckpointTx is logged as a checkpoint: a frozen worker's stale step
// write must be refused as any other.
func (r txRecorder) CheckpointTx(ctx context.Context, req storage.CheckpointRequest, step func(context.Context, any) ([]byte, error)) (storage.CheckpointResult, error) {
	began := time.Now()
	res, err := r.tx().CheckpointTx(ctx, req, step)
	r.note(began, "checkpoint", req.Lease.RunID, req.Lease.Token, err)
	return res, err
}

// execTx runs a statement in a store's transaction, a pgx.Tx or a
// *sql.Tx, with "?" placeholders written as each expects.
func execTx(ctx context.Context, tx any, query string, args ...any) error {
	switch tx := tx.(type) {
	case pgx.Tx:
		for i := range args {
			query = strings.Replace(query, "?", fmt.Sprintf("$%d", i+1), 1)
		}
		_, err := tx.Exec(ctx, query, args...)
		return err
	case *sql.Tx:
		_, err := tx.ExecContext(ctx, query, args...)
		return err
	}
	return fmt.Errorf("crashtest: a transaction of type %T", tx)
}

// insertEffect records a transactional step's effect in table.
func insertEffect(ctx context.Context, tx any, table, runID, key string) error {
	return execTx(ctx, tx, "INSERT INTO "+table+" (run_id, step_key) VALUES (?, ?)", runID, key)
}

// createEffects creates the table of the transactional steps' effects in
// the store's database, named for this test, and drops it when the test
// ends.
func createEffects(ctx context.Context, t *testing.T, s storage.Store) string {
	t.Helper()
	ts, ok := s.(storage.TxStore)
	if !ok {
		t.Fatalf("crashtest: TxSteps on %T, which has no transactions", s)
	}
	table := fmt.Sprintf("crash_effects_%d", time.Now().UnixNano())
	inTx(ctx, t, ts, "CREATE TABLE "+table+" (run_id TEXT NOT NULL, step_key TEXT NOT NULL)")
	t.Cleanup(func() { inTx(context.Background(), t, ts, "DROP TABLE "+table) })
	return table
}

// inTx runs one statement in a transaction of its own.
func inTx(ctx context.Context, t *testing.T, ts storage.TxStore, query string) {
	t.Helper()
	tx, err := ts.BeginTx(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if err := execTx(ctx, tx.Tx(), query); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}

// stepRows is what pgx.Rows and *sql.Rows share.
type stepRows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

// verifyTxEffects checks that every step of every run left exactly one
// row: its commit came once, with its checkpoint, whatever the kills.
func verifyTxEffects(ctx context.Context, t *testing.T, s storage.Store, table string, runs int) {
	t.Helper()
	counts := map[string]int{}
	ts := s.(storage.TxStore)
	tx, err := ts.BeginTx(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	q := "SELECT run_id || ' ' || step_key FROM " + table
	var rows stepRows
	switch tx := tx.Tx().(type) {
	case pgx.Tx:
		r, err := tx.Query(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		rows = r
	case *sql.Tx:
		r, err := tx.QueryContext(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		rows = r
	}
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			t.Fatal(err)
		}
		counts[k]++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for i := range runs {
		for k := range Steps {
			line := fmt.Sprintf("crash-%05d step%d@v1", i, k)
			if counts[line] != 1 {
				t.Fatalf("transactional step %q left %d rows; want exactly 1", line, counts[line])
			}
		}
	}
	if n := len(counts); n != runs*Steps {
		t.Fatalf("%d distinct step rows; want %d", n, runs*Steps)
	}
}
