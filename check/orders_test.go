package check_test

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/stemflow/stem/check"
	"github.com/stemflow/stem/example/orders/orders"
	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/storage"
	"github.com/stemflow/stem/stores/sqlitestore"
)

// The example's own runs, stored by its generated code on SQLite, check
// clean against its own manifest (what stemgen wrote): every shape the
// runtime stored decodes by the manifest's shapes, every key is known,
// the wait's topic declared; and a replay on its code agrees.
func TestExampleRunsCheckClean(t *testing.T) {
	ctx := context.Background()
	st, err := sqlitestore.Open(filepath.Join(t.TempDir(), "stem.db"), sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	srv := httptest.NewServer(orders.NewPaymentService(0, 0))
	defer srv.Close()
	e, err := runtime.New(runtime.Config{Store: st, PollInterval: 10 * time.Millisecond, ShutdownGrace: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if err := e.RegisterQueue(orders.FulfilQueue); err != nil {
		t.Fatal(err)
	}
	if err := orders.RegisterWorkflows(e, orders.NewSteps(orders.NewPaymentsClient(srv.URL, srv.Client()))); err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); e.Run(runCtx) }()
	defer func() { stop(); <-done }()

	order := func(id string) orders.Order {
		return orders.Order{ID: id, Customer: "grace", CoolOff: time.Millisecond, ShipWithin: time.Hour,
			Items: []orders.Item{{SKU: "mug", Qty: 2, PriceCents: 900}, {SKU: "pot", Qty: 1, PriceCents: 2500}}}
	}
	// One run finished (with its child invoice), one waiting for the
	// warehouse.
	shipped, err := orders.StartFulfil(ctx, e, order("42"), runtime.WithID("order-42"))
	if err != nil {
		t.Fatal(err)
	}
	waiting, err := orders.StartFulfil(ctx, e, order("43"), runtime.WithID("order-43"))
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{shipped.ID(), waiting.ID()} {
		deadline := time.Now().Add(20 * time.Second)
		for {
			info, err := e.Get(ctx, id)
			if err == nil && info.WaitingFor != "" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("run %s never waited for the warehouse: %+v %v", id, info, err)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	if err := (orders.Warehouse{Engine: e}).Ship(ctx, shipped.ID(), "42"); err != nil {
		t.Fatal(err)
	}
	if _, err := shipped.Result(ctx); err != nil {
		t.Fatal(err)
	}

	build, err := check.Load(filepath.Join("..", "example", "orders"))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := check.Store(ctx, st, build, check.Options{Engine: e})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() || rep.Checked != 1 || rep.Replayed != 1 || rep.Sealed != 0 || len(build.OldManifests()) != 0 {
		t.Fatalf("the example's runs against its own manifest: %+v\n%s", rep, problems(rep))
	}
	if info, _ := e.Get(ctx, waiting.ID()); info.Status != storage.StatusWaiting || info.Version != 2 {
		t.Fatalf("the run checked: %+v", info)
	}
}
