package sqlitestore_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stemflow/stem/storage"

	"github.com/stemflow/stem/stores/sqlitestore"
)

// A transactional step's checkpoint merges the attributes it sets, with
// its input, in the step's transaction; a merge over the limit rolls the
// whole of it back: the step's row, the checkpoint, the attributes. A
// run created in the application's transaction has its attributes,
// listed by them, from the commit on.
func TestCheckpointTxAttributes(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := dbPath(t)
	s := open(t, path, sqlitestore.Options{})
	db := appDB(t, path)
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateRunsTx(ctx, tx, []storage.NewRun{{ID: "r", Workflow: "wf",
		Attributes: []storage.Attr{storage.StringAttr("customer", "C-7")}}}); err != nil {
		t.Fatal(err)
	}
	byCustomer := storage.ListRunsQuery{Order: storage.OrderCreated, Descending: true,
		Where: []storage.AttrFilter{{Op: storage.OpEq, Value: storage.StringAttr("customer", "C-7")}}}
	if page, err := s.ListRuns(ctx, byCustomer); err != nil || len(page.Runs) != 0 {
		t.Fatalf("ListRuns by attribute before the commit = %+v, %v; want none", page.Runs, err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if page, err := s.ListRuns(ctx, byCustomer); err != nil || len(page.Runs) != 1 || page.Runs[0].ID != "r" {
		t.Fatalf("ListRuns by attribute after the commit = %+v, %v; want r", page.Runs, err)
	}
	cl := claimOne(t, s, "w", "wf")
	step := func(key string, attrs ...storage.Attr) storage.CheckpointRequest {
		return storage.CheckpointRequest{Lease: cl.Lease, LeaseFor: time.Minute, Attributes: attrs,
			Checkpoint: storage.Checkpoint{Key: key, Kind: storage.KindStep, Input: []byte(`{"order":"` + key + `"}`)}}
	}
	insert := func(id string) func(ctx context.Context, tx any) ([]byte, error) {
		return func(ctx context.Context, tx any) ([]byte, error) {
			_, err := tx.(*sql.Tx).ExecContext(ctx, `INSERT INTO orders (id, amount) VALUES (?, 1)`, id)
			return []byte(`"` + id + `"`), err
		}
	}
	if _, err := s.CheckpointTx(ctx, step("charge@v1", storage.NumberAttr("total", 42), storage.StringAttr("customer", "C-8")), insert("c1")); err != nil {
		t.Fatal(err)
	}
	want := []storage.Attr{storage.StringAttr("customer", "C-8"), storage.NumberAttr("total", 42)}
	rec, err := s.GetRun(ctx, "r")
	if err != nil || !slices.EqualFunc(rec.Attributes, want, storage.Attr.Equal) || !orderExists(t, db, "c1") {
		t.Fatalf("after CheckpointTx: attributes %v (%v), order c1 there: %v; want %v", rec.Attributes, err, orderExists(t, db, "c1"), want)
	}
	h, err := s.ListSteps(ctx, storage.StepsQuery{RunID: "r"})
	if err != nil || len(h.Steps) != 1 || string(h.Steps[0].Input) != `{"order":"charge@v1"}` {
		t.Fatalf("ListSteps = %+v, %v; want charge@v1 with its input", h.Steps, err)
	}

	var many []storage.Attr
	for i := range storage.MaxAttributes - 1 {
		many = append(many, storage.BoolAttr(fmt.Sprintf("b%02d", i), true))
	}
	_, err = s.CheckpointTx(ctx, step("ship@v1", many...), insert("c2"))
	if !errors.Is(err, storage.ErrInvalidArgument) {
		t.Fatalf("CheckpointTx over the limit = %v, want ErrInvalidArgument", err)
	}
	rec, _ = s.GetRun(ctx, "r")
	h, _ = s.ListSteps(ctx, storage.StepsQuery{RunID: "r"})
	if orderExists(t, db, "c2") || len(h.Steps) != 1 || !slices.EqualFunc(rec.Attributes, want, storage.Attr.Equal) {
		t.Fatalf("a refused merge left: order c2 %v, steps %d, attributes %v", orderExists(t, db, "c2"), len(h.Steps), rec.Attributes)
	}
}
