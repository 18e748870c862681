package billing_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	billing "example.com/stemcase"
	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/storage"
	"github.com/stemflow/stem/stores/memstore"
)

// TestRegister registers Bill on the in-memory store, which refuses its
// transactional step, and on a store with pgx.Tx transactions, which
// takes it.
func TestRegister(t *testing.T) {
	mem, err := runtime.New(runtime.Config{Store: memstore.New(memstore.Options{})})
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	err = billing.RegisterBill(mem)
	if !errors.Is(err, runtime.ErrInvalidArgument) || !strings.Contains(err.Error(), `"`+billing.StepCharge+`"`) || !strings.Contains(err.Error(), "*memstore.Store") {
		t.Errorf("RegisterBill on memstore: %v, want the runtime's refusal naming step %s and the store", err, billing.StepCharge)
	}
	pg, err := runtime.New(runtime.Config{Store: &pgxStore{memstore.New(memstore.Options{})}})
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	if err := billing.RegisterWorkflows(pg); err != nil {
		t.Errorf("RegisterWorkflows on a pgx.Tx store: %v", err)
	}
}

// pgxStore stands in for pgstore, once it implements storage.TxStore:
// the in-memory store, with transactions of type pgx.Tx, each of whose
// transactional calls fails.
type pgxStore struct{ *memstore.Store }

var _ storage.TxStore = pgxStore{}

var errNoTx = errors.New("pgxStore: the test's store runs no transaction")

func (pgxStore) TxType() reflect.Type                           { return reflect.TypeFor[pgx.Tx]() }
func (pgxStore) BeginTx(context.Context) (storage.AppTx, error) { return nil, errNoTx }
func (pgxStore) CreateRunsTx(context.Context, any, []storage.NewRun) ([]storage.CreateResult, error) {
	return nil, errNoTx
}
func (pgxStore) SendEventTx(context.Context, any, storage.Event) (bool, error) { return false, errNoTx }
func (pgxStore) EmitTx(context.Context, any, storage.EmitRequest) ([]string, error) {
	return nil, errNoTx
}
func (pgxStore) CheckpointTx(context.Context, storage.CheckpointRequest, func(context.Context, any) ([]byte, error)) (storage.CheckpointResult, error) {
	return storage.CheckpointResult{}, errNoTx
}
