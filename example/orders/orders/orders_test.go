package orders_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/stemflow/stem/example/orders/orders"
	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/storage"
	"github.com/stemflow/stem/stores/memstore"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// fixture is a running engine on memstore with the order workflows and a
// flaky payment service.
type fixture struct {
	ctx       context.Context
	engine    *runtime.Engine
	steps     *orders.Steps
	payments  *orders.PaymentService
	warehouse orders.Warehouse
}

func setup(t *testing.T, failFirst, loseReplies int) *fixture {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	svc := orders.NewPaymentService(failFirst, loseReplies)
	srv := httptest.NewServer(svc)
	t.Cleanup(srv.Close)
	e, err := runtime.New(runtime.Config{Store: memstore.New(memstore.Options{}), PollInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.RegisterQueue(orders.FulfilQueue); err != nil {
		t.Fatal(err)
	}
	steps := orders.NewSteps(orders.NewPaymentsClient(srv.URL, srv.Client()))
	if err := orders.RegisterWorkflows(e, steps); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	t.Cleanup(func() {
		e.Close()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return &fixture{ctx: ctx, engine: e, steps: steps, payments: svc, warehouse: orders.Warehouse{Engine: e}}
}

var order = orders.Order{
	ID:       "o-1",
	Customer: "ada",
	Items: []orders.Item{
		{SKU: "book", Qty: 2, PriceCents: 1500},
		{SKU: "lamp", Qty: 1, PriceCents: 4200},
		{SKU: "pen", Qty: 3, PriceCents: 100},
	},
	CoolOff:    10 * time.Millisecond,
	ShipWithin: time.Minute,
}

// TestFulfil runs the whole workflow against a payment service that fails
// twice and then loses a reply: the charge is retried and made once.
func TestFulfil(t *testing.T) {
	t.Parallel()
	f := setup(t, 2, 1)
	run, err := orders.StartFulfil(f.ctx, f.engine, order, runtime.WithID("order-o-1"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.warehouse.Ship(f.ctx, run.ID(), order.ID); err != nil {
		t.Fatal(err)
	}
	rec, err := run.Result(f.ctx)
	if err != nil {
		t.Fatal(err)
	}

	want := orders.Payment{ID: "pay-1", Customer: "ada", AmountCents: order.Total()}
	if rec.Payment != want || rec.Tracking != orders.TrackingNumber("o-1") || rec.Invoice.Number != "INV-o-1" {
		t.Errorf("receipt = %+v", rec)
	}
	if got := f.payments.Payments(); !slices.Equal(got, []orders.Payment{want}) {
		t.Errorf("payments = %+v, want one charge", got)
	}
	if n := f.payments.Requests(); n != 4 {
		t.Errorf("payment requests = %d, want 4 (2 failures, 1 lost reply, 1 success)", n)
	}
	// Reconciliation from outside the run finds the charge by the key the
	// step used.
	if p, ok := f.payments.Lookup(run.IdempotencyKey(orders.StepCharge, "payment")); !ok || p != want {
		t.Errorf("Lookup(run.IdempotencyKey(StepCharge)) = %+v, %v", p, ok)
	}
	var labels []string
	for _, p := range rec.Parcels {
		labels = append(labels, p.Label)
	}
	if want := []string{"book-0", "lamp-1", "pen-2"}; !slices.Equal(labels, want) {
		t.Errorf("parcel labels = %q, want %q", labels, want)
	}
	if !strings.Contains(rec.Invoice.Text, "2 x book [book-0]") {
		t.Errorf("invoice text = %q", rec.Invoice.Text)
	}

	steps, err := f.engine.ListSteps(f.ctx, run.ID(), 0)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, s := range steps {
		if s.Kind == storage.KindAttr {
			continue // the settings of search attributes, checked below
		}
		keys = append(keys, s.Key)
		if s.Key == orders.StepCharge && len(s.Attempts) != 4 {
			t.Errorf("charge attempts = %d, want 4", len(s.Attempts))
		}
	}
	// Reserve and QuoteShipping ran side by side, as did the packs: the
	// steps are listed as they ended, so compare them sorted. The event
	// future, the timers and the selects are keyed by call order (#0);
	// the workflow's appends to its log, one per stage, are keyed
	// stream:orders.log, then #1, #2, ... (the packs' ride on their
	// checkpoints).
	wantKeys := []string{orders.StepReserve, orders.StepQuoteShipping, "cool-off#0", "cool-off-or-cancel#0", "ship-within#0", "shipment#0", "shipment-or-timeout#0",
		"pack@v1#0", "pack@v1#1", "pack@v1#2", orders.StepCharge, "invoice", "stream:" + orders.LogLineStream}
	for i := 1; i < 7; i++ {
		wantKeys = append(wantKeys, runtime.IterationKey("stream:"+orders.LogLineStream, i))
	}
	slices.Sort(keys)
	slices.Sort(wantKeys)
	if !slices.Equal(keys, wantKeys) {
		t.Errorf("steps = %q, want %q", keys, wantKeys)
	}
	if rec.Shipping != (orders.Quote{Carrier: "freight", CostCents: 1500}) {
		t.Errorf("shipping = %+v", rec.Shipping)
	}
	p, ok, err := run.Progress(f.ctx)
	if want := (orders.FulfilProgress{Stage: orders.StageDone, Packed: 3, Lines: 3}); err != nil || !ok || p != want {
		t.Errorf("Progress = %+v, %v, %v; want %+v", p, ok, err, want)
	}
	child, err := orders.GetInvoice(f.ctx, f.engine, run.ID()+"/invoice")
	if err != nil {
		t.Fatal(err)
	}
	if inv, err := child.Result(f.ctx); err != nil || inv != rec.Invoice {
		t.Errorf("child invoice = %+v, %v", inv, err)
	}
	// The search attributes: the order and the customer from the input,
	// the total and the last stage as the workflow set them; the invoice's
	// run has the order and the customer from its own input, so a filter
	// on the order finds both runs.
	info, err := run.Info(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	wantAttrs := []runtime.Attr{
		runtime.StringAttr("customer", "ada"), runtime.StringAttr("order", "o-1"),
		runtime.StringAttr("stage", orders.StageDone), runtime.NumberAttr("total", float64(order.Total())/100),
	}
	if !slices.EqualFunc(info.Attributes, wantAttrs, runtime.Attr.Equal) {
		t.Errorf("attributes = %v, want %v", info.Attributes, wantAttrs)
	}
	byOrder, _, err := f.engine.ListRuns(f.ctx, runtime.ListRunsQuery{Where: []runtime.AttrFilter{{Op: storage.OpEq, Value: runtime.StringAttr("order", "o-1")}}})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range byOrder {
		ids = append(ids, r.ID)
	}
	if want := []string{run.ID(), child.ID()}; !slices.Equal(ids, want) {
		t.Errorf("runs with order=o-1: %q, want %q", ids, want)
	}
	if len(f.steps.Holds()) != 1 {
		t.Errorf("holds = %v, want the order's", f.steps.Holds())
	}
}

// TestShipmentTimeout: the warehouse never ships, the wait times out, the
// reservation is released and the run errors with ErrNotShipped, which
// also matches ErrEventTimeout.
func TestShipmentTimeout(t *testing.T) {
	t.Parallel()
	f := setup(t, 0, 0)
	o := order
	o.ID, o.ShipWithin = "o-late", 20*time.Millisecond
	run, err := orders.StartFulfil(f.ctx, f.engine, o)
	if err != nil {
		t.Fatal(err)
	}
	_, err = run.Result(f.ctx)
	if !errors.Is(err, orders.ErrNotShipped) || !errors.Is(err, runtime.ErrEventTimeout) {
		t.Fatalf("Result error = %v, want ErrNotShipped and ErrEventTimeout", err)
	}
	info, err := run.Info(f.ctx)
	if err != nil || info.Status != runtime.StatusErrored {
		t.Errorf("status = %v, %v", info.Status, err)
	}
	if h := f.steps.Holds(); len(h) != 0 {
		t.Errorf("holds after the timeout = %v, want none", h)
	}
	if n := f.payments.Requests(); n != 0 {
		t.Errorf("payment requests = %d, want none", n)
	}
}

// TestProgress follows a run's published progress with WaitProgress: it
// waits for its shipment until the warehouse ships.
func TestProgress(t *testing.T) {
	t.Parallel()
	f := setup(t, 0, 0)
	run, err := orders.StartFulfil(f.ctx, f.engine, order, runtime.WithID("order-progress"))
	if err != nil {
		t.Fatal(err)
	}
	var p orders.FulfilProgress
	for p.Stage != orders.StageAwaitingShipment {
		if p, err = run.WaitProgress(f.ctx, p); err != nil {
			t.Fatal(err)
		}
		if p.Stage == orders.StageDone || p.Lines != len(order.Items) {
			t.Fatalf("progress = %+v before the shipment", p)
		}
	}
	if err := f.warehouse.Ship(f.ctx, run.ID(), order.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := run.Result(f.ctx); err != nil {
		t.Fatal(err)
	}
	if p, ok, err := run.Progress(f.ctx); err != nil || !ok || p.Stage != orders.StageDone {
		t.Errorf("Progress = %+v, %v, %v", p, ok, err)
	}
}

// TestShipAll ships every waiting order with one broadcast.
func TestShipAll(t *testing.T) {
	t.Parallel()
	f := setup(t, 0, 0)
	items := []runtime.BatchItem[orders.Order]{}
	for _, id := range []string{"a", "b"} {
		o := order
		o.ID = id
		items = append(items, runtime.BatchItem[orders.Order]{ID: "order-" + id, Input: o})
	}
	runs, err := orders.StartFulfilBatch(f.ctx, f.engine, items)
	if err != nil {
		t.Fatal(err)
	}
	// Emit reaches only runs already waiting: wait for both.
	for _, r := range runs {
		for {
			info, err := r.Info(f.ctx)
			if err != nil {
				t.Fatal(err)
			}
			if info.WaitingFor == orders.ShipmentReadyTopic {
				break
			}
			select {
			case <-f.ctx.Done():
				t.Fatal(f.ctx.Err())
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
	n, err := f.warehouse.ShipAll(f.ctx, "truck-7")
	if err != nil || n != 2 {
		t.Fatalf("ShipAll = %d, %v; want 2", n, err)
	}
	for _, r := range runs {
		rec, err := r.Result(f.ctx)
		if err != nil || rec.Tracking != "truck-7" {
			t.Errorf("%s: %+v, %v", r.ID(), rec, err)
		}
	}
	if got := len(f.payments.Payments()); got != 2 {
		t.Errorf("payments = %d, want 2", got)
	}
}

func TestRejectsAnEmptyOrder(t *testing.T) {
	t.Parallel()
	f := setup(t, 0, 0)
	run, err := orders.StartFulfil(f.ctx, f.engine, orders.Order{ID: "empty", Customer: "x"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := run.Result(f.ctx); err == nil || !strings.Contains(err.Error(), "has no items") {
		t.Errorf("Result error = %v", err)
	}
}

// TestReplay replays the stored runs, one finished and one waiting for the
// warehouse, against this build's code: none diverges. Run against a copy
// of production's store, the same check tells before a deploy whether the
// new code can continue the runs in flight (see `stem check`).
func TestReplay(t *testing.T) {
	t.Parallel()
	f := setup(t, 0, 0)
	done, err := orders.StartFulfil(f.ctx, f.engine, order, runtime.WithID("order-done"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.warehouse.Ship(f.ctx, done.ID(), order.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := done.Result(f.ctx); err != nil {
		t.Fatal(err)
	}
	waiting := order
	waiting.ID = "o-2"
	if _, err := orders.StartFulfil(f.ctx, f.engine, waiting, runtime.WithID("order-waiting")); err != nil {
		t.Fatal(err)
	}
	for {
		info, err := f.engine.Get(f.ctx, "order-waiting")
		if err != nil {
			t.Fatal(err)
		}
		if info.Status == runtime.StatusWaiting && len(info.WaitTopics) > 0 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	rep, err := f.engine.Replay(f.ctx, runtime.ReplayOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The two orders and the finished one's invoice child.
	if rep.Replayed != 3 || len(rep.Divergences) != 0 || len(rep.Skipped) != 0 {
		t.Fatalf("replay of this build's own runs: %+v", rep)
	}
}

// TestCancelNeedsAReason: a Cancel without a reason is refused by its
// validator before anything is written, and the run goes on.
func TestCancelNeedsAReason(t *testing.T) {
	t.Parallel()
	f := setup(t, 0, 0)
	run, err := orders.StartFulfil(f.ctx, f.engine, order, runtime.WithID("order-no-reason"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = orders.UpdateCancel(f.ctx, f.engine, run.ID(), orders.Cancel{Reason: " "})
	if !errors.Is(err, runtime.ErrUpdateRefused) || !errors.Is(err, orders.ErrNoReason) {
		t.Fatalf("UpdateCancel without a reason: %v, want ErrUpdateRefused and ErrNoReason", err)
	}
	if err := f.warehouse.Ship(f.ctx, run.ID(), order.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := run.Result(f.ctx); err != nil {
		t.Fatalf("the order after a refused cancel: %v", err)
	}
}

// TestCancel cancels an order while it cools off: the run takes the
// update, releases the stock, replies with the hold it released, and ends
// with ErrCancelled; nothing is charged.
func TestCancel(t *testing.T) {
	t.Parallel()
	f := setup(t, 0, 0)
	o := order
	o.ID, o.CoolOff = "o-cancel", time.Hour
	run, err := orders.StartFulfil(f.ctx, f.engine, o, runtime.WithID("order-o-cancel"))
	if err != nil {
		t.Fatal(err)
	}
	var p orders.FulfilProgress
	for p.Stage != orders.StageCoolingOff {
		if p, err = run.WaitProgress(f.ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	got, err := orders.UpdateCancel(f.ctx, f.engine, run.ID(), orders.Cancel{Reason: "changed my mind"}, runtime.WithUpdateID("cancel-1"))
	if err != nil {
		t.Fatal(err)
	}
	if got.OrderID != o.ID || got.Released == "" {
		t.Errorf("UpdateCancel = %+v", got)
	}
	if _, err := run.Result(f.ctx); !errors.Is(err, orders.ErrCancelled) || !strings.Contains(err.Error(), "changed my mind") {
		t.Errorf("Result error = %v, want ErrCancelled with the reason", err)
	}
	if h := f.steps.Holds(); len(h) != 0 {
		t.Errorf("holds after the cancel = %v, want none", h)
	}
	if n := f.payments.Requests(); n != 0 {
		t.Errorf("payment requests = %d, want none", n)
	}
	// Sent again under its ID, the update finds its reply: the run has
	// ended, and handles it once.
	again, err := orders.UpdateCancel(f.ctx, f.engine, run.ID(), orders.Cancel{Reason: "changed my mind"}, runtime.WithUpdateID("cancel-1"))
	if err != nil || again != got {
		t.Errorf("UpdateCancel again = %+v, %v; want %+v", again, err, got)
	}
}

// TestLog reads a fulfilled order's log: a line per stage from the
// workflow, and a line per packed item from Pack, in the order they were
// written.
func TestLog(t *testing.T) {
	t.Parallel()
	f := setup(t, 0, 0)
	run, err := orders.StartFulfil(f.ctx, f.engine, order, runtime.WithID("order-log"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.warehouse.Ship(f.ctx, run.ID(), order.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := run.Result(f.ctx); err != nil {
		t.Fatal(err)
	}
	var stages, packed []string
	next := int64(0)
	for v, err := range orders.StreamLogLine(f.ctx, f.engine, run.ID(), 0) {
		if err != nil {
			t.Fatal(err)
		}
		if v.Offset != next {
			t.Errorf("offset %d, want %d", v.Offset, next)
		}
		next++
		if strings.HasPrefix(v.Value.Text, "packed ") {
			packed = append(packed, v.Value.Text)
			continue
		}
		stages = append(stages, v.Value.Stage)
	}
	want := []string{orders.StageReserving, orders.StageCoolingOff, orders.StageAwaitingShipment, orders.StagePacking,
		orders.StageCharging, orders.StageInvoicing, orders.StageDone}
	if !slices.Equal(stages, want) {
		t.Errorf("stages logged = %q, want %q", stages, want)
	}
	// The packs ran at once: their lines come in the order they ended.
	slices.Sort(packed)
	if want := []string{"packed 1 x lamp as lamp-1", "packed 2 x book as book-0", "packed 3 x pen as pen-2"}; !slices.Equal(packed, want) {
		t.Errorf("packs logged = %q, want %q", packed, want)
	}
}
