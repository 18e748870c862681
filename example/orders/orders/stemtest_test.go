package orders_test

import (
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stemflow/stem/example/orders/orders"
	"github.com/stemflow/stem/example/orders/orders/ordersstemtest"
	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/stemtest"
)

// longOrder waits a day before packing and gives the warehouse a week.
var longOrder = orders.Order{
	ID:         "o-9",
	Customer:   "grace",
	Items:      []orders.Item{{SKU: "desk", Qty: 1, PriceCents: 25000}, {SKU: "lamp", Qty: 2, PriceCents: 4200}},
	CoolOff:    24 * time.Hour,
	ShipWithin: 7 * 24 * time.Hour,
}

// register registers the order workflows, with a payment service that
// fails twice before it answers.
func register(t *testing.T) func(e *runtime.Engine) error {
	svc := orders.NewPaymentService(2, 0)
	srv := httptest.NewServer(svc)
	t.Cleanup(srv.Close)
	return func(e *runtime.Engine) error {
		if err := e.RegisterQueue(orders.FulfilQueue); err != nil {
			return err
		}
		return orders.RegisterWorkflows(e, orders.NewSteps(orders.NewPaymentsClient(srv.URL, srv.Client())))
	}
}

// TestFulfilInVirtualTime runs an order with a day's cool-off and a
// warehouse that ships three days in: virtual days, real milliseconds.
func TestFulfilInVirtualTime(t *testing.T) {
	t.Parallel()
	env := stemtest.New(t, register(t))
	run, err := orders.StartFulfil(env.Context(), env.Engine, longOrder, runtime.WithID("order-o-9"))
	if err != nil {
		t.Fatal(err)
	}
	ordersstemtest.SendShipmentReadyAt(env, 72*time.Hour, run.ID(), orders.ShipmentReady{OrderID: longOrder.ID, Tracking: orders.TrackingNumber(longOrder.ID)})
	rec, err := run.Result(env.Context())
	if err != nil {
		t.Fatal(err)
	}
	if rec.Tracking != orders.TrackingNumber(longOrder.ID) {
		t.Errorf("tracking %q", rec.Tracking)
	}
	info, err := env.Engine.Get(env.Context(), run.ID())
	if err != nil || info.EndedAt == nil {
		t.Fatalf("the run: %+v, %v", info, err)
	}
	// The run's own end: the clock may move on while the test reads it.
	if got := info.EndedAt.Sub(stemtest.Epoch); got < 72*time.Hour || got > 73*time.Hour {
		t.Errorf("the order took %s of virtual time, want the warehouse's three days", got)
	}
	t.Logf("fulfilled after %s of virtual time", env.Elapsed())
}

// TestFulfilSurvivesACrashAtEveryStep kills the worker before and after
// each of the order's steps, with the warehouse shipping a day in.
func TestFulfilSurvivesACrashAtEveryStep(t *testing.T) {
	t.Parallel()
	in := longOrder
	in.CoolOff = time.Hour
	ordersstemtest.CrashEveryStepFulfil(t, register(t), in, stemtest.AfterStart(func(env *stemtest.Env, runID string) {
		ordersstemtest.SendShipmentReadyAt(env, 24*time.Hour, runID, orders.ShipmentReady{OrderID: in.ID, Tracking: orders.TrackingNumber(in.ID)})
	}))
}

// TestDeclinedCardReleasesTheStock replaces the charge with one that
// declines: the reservation is released, once, and the run fails with the
// decline, which is not retried.
func TestDeclinedCardReleasesTheStock(t *testing.T) {
	t.Parallel()
	env := stemtest.New(t, register(t))
	mock := ordersstemtest.Mock(env)
	charge := mock.Charge(func(ctx runtime.StepContext, r orders.Reservation) (orders.Payment, error) {
		return orders.Payment{}, runtime.Permanent(&orders.ChargeRejected{Status: 402, Reason: "card declined"})
	})
	release := mock.Release(func(ctx runtime.StepContext, r orders.Reservation) error { return nil })
	run, err := orders.StartFulfil(env.Context(), env.Engine, longOrder)
	if err != nil {
		t.Fatal(err)
	}
	ordersstemtest.SendShipmentReadyAt(env, 30*time.Hour, run.ID(), orders.ShipmentReady{OrderID: longOrder.ID, Tracking: "T-1"})
	_, err = run.Result(env.Context())
	var rejected *orders.ChargeRejected
	if !errors.As(err, &rejected) || rejected.Status != 402 || rejected.Reason != "card declined" || !runtime.IsPermanent(err) {
		t.Fatalf("the run ended with %v, want the permanent *ChargeRejected with its status and reason", err)
	}
	if n := charge.Count(); n != 1 {
		t.Errorf("the charge was tried %d times, want once: a decline is permanent", n)
	}
	calls := release.Calls()
	if len(calls) != 1 || calls[0].R.OrderID != longOrder.ID || calls[0].R.AmountCents != longOrder.Total() {
		t.Errorf("release calls %+v, want the order's reservation once", calls)
	}
}

// registerFulfilOnly registers Fulfil without its child Invoice, as a
// service whose invoicing runs elsewhere would.
func registerFulfilOnly(t *testing.T) func(e *runtime.Engine) error {
	svc := orders.NewPaymentService(0, 0)
	srv := httptest.NewServer(svc)
	t.Cleanup(srv.Close)
	return func(e *runtime.Engine) error {
		if err := e.RegisterQueue(orders.FulfilQueue); err != nil {
			return err
		}
		return orders.RegisterFulfil(e, orders.NewSteps(orders.NewPaymentsClient(srv.URL, srv.Client())))
	}
}

// fakeInvoice is what the invoice mocks return.
func fakeInvoice(req orders.InvoiceRequest) orders.InvoiceDoc {
	return orders.InvoiceDoc{Number: "MOCK-" + req.OrderID, Text: req.Customer}
}

// TestInvoiceChildMocked replaces the Invoice child workflow, which the
// test registers, with a typed mock: the order's receipt carries the
// mock's invoice, the mock served one child run of the order with the
// order's invoice request, and the real Invoice (its render step) never
// ran.
func TestInvoiceChildMocked(t *testing.T) {
	t.Parallel()
	env := stemtest.New(t, register(t))
	mock := ordersstemtest.Mock(env)
	render := mock.RenderInvoice(func(ctx runtime.StepContext, req orders.InvoiceRequest) (orders.InvoiceDoc, error) {
		return orders.InvoiceDoc{}, errors.New("the real invoice ran")
	})
	invoice := mock.InvoiceWorkflow(func(ctx *runtime.WorkflowContext, req orders.InvoiceRequest) (orders.InvoiceDoc, error) {
		return fakeInvoice(req), nil
	})
	run, err := orders.StartFulfil(env.Context(), env.Engine, longOrder)
	if err != nil {
		t.Fatal(err)
	}
	ordersstemtest.SendShipmentReadyAt(env, 30*time.Hour, run.ID(), orders.ShipmentReady{OrderID: longOrder.ID, Tracking: "T-1"})
	rec, err := run.Result(env.Context())
	if err != nil {
		t.Fatal(err)
	}
	if rec.Invoice != fakeInvoice(orders.InvoiceRequest{OrderID: longOrder.ID, Customer: longOrder.Customer}) {
		t.Errorf("receipt's invoice %+v, want the mock's", rec.Invoice)
	}
	render.ExpectCount(t, 0)
	if invoice.ExpectCount(t, 1) {
		want := orders.InvoiceRequest{OrderID: longOrder.ID, Customer: longOrder.Customer, PaymentID: rec.Payment.ID, Lines: rec.Parcels}
		invoice.ExpectCall(t, 0, want)
		invoice.ExpectCalledWith(t, want)
		if c := invoice.Calls()[0]; c.ParentID != run.ID() || c.RunID != run.ID()+"/invoice" {
			t.Errorf("the mock served run %s of parent %s, want the order's child %s/invoice", c.RunID, c.ParentID, run.ID())
		}
	}
}

// TestInvoiceChildStandIn mocks Invoice where the test does not register
// it: the mock stands in under its durable name, and its error reaches
// the order, which fails with it after charging.
func TestInvoiceChildStandIn(t *testing.T) {
	t.Parallel()
	env := stemtest.New(t, registerFulfilOnly(t))
	invoice := ordersstemtest.Mock(env).InvoiceWorkflow(func(ctx *runtime.WorkflowContext, req orders.InvoiceRequest) (orders.InvoiceDoc, error) {
		return orders.InvoiceDoc{}, runtime.Permanent(errors.New("the invoicing service is closed"))
	})
	run, err := orders.StartFulfil(env.Context(), env.Engine, longOrder)
	if err != nil {
		t.Fatal(err)
	}
	ordersstemtest.SendShipmentReadyAt(env, 30*time.Hour, run.ID(), orders.ShipmentReady{OrderID: longOrder.ID, Tracking: "T-1"})
	if _, err := run.Result(env.Context()); err == nil || !strings.Contains(err.Error(), "the invoicing service is closed") {
		t.Fatalf("the order ended with %v, want the stand-in's error", err)
	}
	if invoice.ExpectCount(t, 1) {
		got := invoice.Calls()[0].Input
		invoice.ExpectCall(t, 0, orders.InvoiceRequest{OrderID: longOrder.ID, Customer: longOrder.Customer, PaymentID: got.PaymentID, Lines: got.Lines})
		if got.PaymentID == "" || len(got.Lines) != len(longOrder.Items) {
			t.Errorf("the stand-in got %+v, want the payment and a line per item", got)
		}
	}
}

// TestInvoiceStandInSurvivesCrashes kills the worker at each of the
// order's steps with Invoice stood in for by a mock: in every case the
// mock runs once, however often the order is replayed (it parks for the
// child and resumes when the child ends, and again after the crash).
func TestInvoiceStandInSurvivesCrashes(t *testing.T) {
	t.Parallel()
	in := longOrder
	in.CoolOff = time.Hour
	var mu sync.Mutex
	type kase struct {
		h     *ordersstemtest.InvoiceWorkflowMock
		calls *atomic.Int64
	}
	var cases []kase
	ordersstemtest.CrashEveryStepFulfil(t, registerFulfilOnly(t), in,
		stemtest.Setup(func(env *stemtest.Env) {
			calls := &atomic.Int64{}
			h := ordersstemtest.Mock(env).InvoiceWorkflow(func(ctx *runtime.WorkflowContext, req orders.InvoiceRequest) (orders.InvoiceDoc, error) {
				calls.Add(1)
				return fakeInvoice(req), nil
			})
			mu.Lock()
			cases = append(cases, kase{h, calls})
			mu.Unlock()
		}),
		stemtest.AfterStart(func(env *stemtest.Env, runID string) {
			ordersstemtest.SendShipmentReadyAt(env, 24*time.Hour, runID, orders.ShipmentReady{OrderID: in.ID, Tracking: orders.TrackingNumber(in.ID)})
		}))
	if len(cases) < 3 {
		t.Fatalf("%d cases ran, want the first run and its crashes", len(cases))
	}
	for i, c := range cases {
		if n := c.calls.Load(); n != 1 {
			t.Errorf("case %d: the mock ran %d times, want once", i, n)
		}
		if c.h.ExpectCount(t, 1) && c.h.Calls()[0].Input.OrderID != in.ID {
			t.Errorf("case %d: the mock got %+v", i, c.h.Calls()[0].Input)
		}
	}
}

// fakeTB records what an assertion reports instead of failing the test.
type fakeTB struct {
	testing.TB
	errors []string
}

func (f *fakeTB) Helper() {}

func (f *fakeTB) Errorf(format string, args ...any) {
	f.errors = append(f.errors, fmt.Sprintf(format, args...))
}

// TestMockAssertionsReport checks that the generated assertions fail, and
// say where and how, when the calls are not what the test wants.
func TestMockAssertionsReport(t *testing.T) {
	t.Parallel()
	env := stemtest.New(t, registerFulfilOnly(t))
	mock := ordersstemtest.Mock(env)
	pack := mock.Pack(func(ctx runtime.StepContext, item orders.Item) (orders.Parcel, error) {
		return orders.Parcel{SKU: item.SKU, Qty: item.Qty, Label: "L"}, nil
	})
	invoice := mock.InvoiceWorkflow(func(ctx *runtime.WorkflowContext, req orders.InvoiceRequest) (orders.InvoiceDoc, error) {
		return fakeInvoice(req), nil
	})
	run, err := orders.StartFulfil(env.Context(), env.Engine, longOrder)
	if err != nil {
		t.Fatal(err)
	}
	ordersstemtest.SendShipmentReadyAt(env, 30*time.Hour, run.ID(), orders.ShipmentReady{OrderID: longOrder.ID, Tracking: "T-1"})
	if _, err := run.Result(env.Context()); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		assert func(t testing.TB) bool
		want   []string
	}{
		{"step count", func(t testing.TB) bool { return pack.ExpectCount(t, 3) },
			[]string{"ordersstemtest: mock of step pack@v1 (Steps.Pack): called 2 times, want 3 times", "{Item:{SKU:"}},
		{"step call", func(t testing.TB) bool { return pack.ExpectCall(t, 5, ordersstemtest.PackCall{}) },
			[]string{"mock of step pack@v1 (Steps.Pack): no call #5", "called 2 times"}},
		{"step called with", func(t testing.TB) bool {
			return pack.ExpectCalledWith(t, ordersstemtest.PackCall{Item: orders.Item{SKU: "chair", Qty: 1}})
		}, []string{"mock of step pack@v1 (Steps.Pack): no call with {Item:{SKU:chair Qty:1 PriceCents:0}}", "#0 {Item:{SKU:"}},
		{"workflow count", func(t testing.TB) bool { return invoice.ExpectCount(t, 2) },
			[]string{"ordersstemtest: mock of workflow orders.invoice (Invoice): called once, want 2 times", "OrderID:o-9"}},
		{"workflow call", func(t testing.TB) bool {
			return invoice.ExpectCall(t, 0, orders.InvoiceRequest{OrderID: "o-1"})
		}, []string{"mock of workflow orders.invoice (Invoice): call #0:", "got  {OrderID:o-9 Customer:grace", "want {OrderID:o-1 Customer: "}},
	} {
		f := &fakeTB{}
		if c.assert(f) {
			t.Errorf("%s: the assertion held", c.name)
		}
		if len(f.errors) != 1 {
			t.Errorf("%s: reports %q, want one", c.name, f.errors)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(f.errors[0], w) {
				t.Errorf("%s: report %q does not say %q", c.name, f.errors[0], w)
			}
		}
	}
	// The same assertions hold for what did happen.
	if !pack.ExpectCount(t, 2) || !invoice.ExpectCount(t, 1) {
		return
	}
	pack.ExpectCalledWith(t, ordersstemtest.PackCall{Item: longOrder.Items[0]})
	pack.ExpectCalledWith(t, ordersstemtest.PackCall{Item: longOrder.Items[1]})
}
