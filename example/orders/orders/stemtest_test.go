package orders_test

import (
	"errors"
	"net/http/httptest"
	"strings"
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
		return orders.Payment{}, runtime.Permanent(errors.New("card declined"))
	})
	release := mock.Release(func(ctx runtime.StepContext, r orders.Reservation) error { return nil })
	run, err := orders.StartFulfil(env.Context(), env.Engine, longOrder)
	if err != nil {
		t.Fatal(err)
	}
	ordersstemtest.SendShipmentReadyAt(env, 30*time.Hour, run.ID(), orders.ShipmentReady{OrderID: longOrder.ID, Tracking: "T-1"})
	if _, err := run.Result(env.Context()); err == nil || !strings.Contains(err.Error(), "card declined") {
		t.Fatalf("the run ended with %v, want the decline", err)
	}
	if n := charge.Count(); n != 1 {
		t.Errorf("the charge was tried %d times, want once: a decline is permanent", n)
	}
	calls := release.Calls()
	if len(calls) != 1 || calls[0].R.OrderID != longOrder.ID || calls[0].R.AmountCents != longOrder.Total() {
		t.Errorf("release calls %+v, want the order's reservation once", calls)
	}
}
