package shop_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	shop "example.com/stemcase"
	"example.com/stemcase/shopstemtest"
	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/stemtest"
)

func register(e *runtime.Engine) error { return shop.RegisterWorkflows(e, shop.NewSteps()) }

var order = shop.Order{ID: "o-1", Items: []string{"tea", "cup"}, Cents: 1250}

// TestMocks replaces steps with the generated mocks, checks the calls
// they record, and sends the event two virtual days in.
func TestMocks(t *testing.T) {
	env := stemtest.New(t, register)
	mocks := shopstemtest.Mock(env)
	charge := mocks.Charge(func(ctx runtime.StepContext, orderID string, cents int64) (string, error) {
		if ctx.Attempt() == 1 {
			return "", errors.New("the payment service is down")
		}
		return "mock-pay", nil
	})
	label := mocks.Label(func(ctx runtime.StepContext, item string) (string, error) { return "L-" + item, nil })
	notify := mocks.Notify(nil) // the step keeps its own function
	run, err := shop.StartCheckout(env.Context(), env.Engine, order)
	if err != nil {
		t.Fatal(err)
	}
	shopstemtest.SendPackedAt(env, 48*time.Hour, run.ID(), shop.Packed{OrderID: order.ID, Box: "B-7"})
	rec, err := run.Result(env.Context())
	if err != nil {
		t.Fatal(err)
	}
	if rec.Payment != "mock-pay" || rec.Box != "B-7" || !slices.Equal(rec.Labels, []string{"L-tea", "L-cup"}) {
		t.Errorf("receipt = %+v", rec)
	}
	// The charge failed once and was retried an hour later.
	want := shopstemtest.ChargeCall{OrderID: order.ID, Cents: order.Cents}
	if got := charge.Calls(); !slices.Equal(got, []shopstemtest.ChargeCall{want, want}) || charge.Count() != 2 {
		t.Errorf("charge calls = %+v, count %d", got, charge.Count())
	}
	items := []string{}
	for _, c := range label.Calls() {
		items = append(items, c.Item)
	}
	if slices.Sort(items); !slices.Equal(items, []string{"cup", "tea"}) {
		t.Errorf("label calls = %v", items)
	}
	if notify.Count() != 0 {
		t.Errorf("notify ran the mock %d times; a nil fn keeps the step's own", notify.Count())
	}
	if env.Elapsed() < 48*time.Hour {
		t.Errorf("virtual time %s: the event is sent at 48h", env.Elapsed())
	}
}

// TestEmit emits the event to every waiting run.
func TestEmit(t *testing.T) {
	env := stemtest.New(t, register)
	run, err := shop.StartCheckout(env.Context(), env.Engine, order)
	if err != nil {
		t.Fatal(err)
	}
	shopstemtest.EmitPackedAt(env, time.Hour, shop.Packed{OrderID: order.ID, Box: "B-1"})
	rec, err := run.Result(env.Context())
	if err != nil || rec.Box != "B-1" || rec.Payment != "pay-o-1-1250" {
		t.Errorf("receipt = %+v, %v", rec, err)
	}
}

// TestCrashEveryStep kills the worker at each step of Checkout, which
// then waits three virtual days for the warehouse.
func TestCrashEveryStep(t *testing.T) {
	shopstemtest.CrashEveryStepCheckout(t, register, order)
}

// TestWorkflowMock mocks Checkout as the child of a parent in another
// package, where the test does not register Checkout: the mock stands in
// under its durable name and serves the parent once.
func TestWorkflowMock(t *testing.T) {
	env := stemtest.New(t, func(e *runtime.Engine) error {
		return runtime.Register(e, "gifts.send", func(c *runtime.WorkflowContext, o shop.Order) (string, error) {
			rec, err := runtime.CallChild[shop.Receipt](c, "checkout", shop.CheckoutWorkflowName, o)
			if err != nil {
				return "", err
			}
			if err := c.Sleep("wrap", time.Hour); err != nil {
				return "", err
			}
			return "gift in " + rec.Box, nil
		})
	})
	checkout := shopstemtest.Mock(env).CheckoutWorkflow(func(ctx *runtime.WorkflowContext, o shop.Order) (shop.Receipt, error) {
		return shop.Receipt{Payment: "mock", Box: "B-" + o.ID}, nil
	})
	run, err := runtime.Start[shop.Order, string](env.Context(), env.Engine, "gifts.send", order)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := run.Result(env.Context()); err != nil || got != "gift in B-o-1" {
		t.Fatalf("gift: %q, %v", got, err)
	}
	if checkout.ExpectCount(t, 1) && checkout.ExpectCall(t, 0, order) {
		if c := checkout.Calls()[0]; c.ParentID != run.ID() {
			t.Errorf("the mock's parent %q, want %s", c.ParentID, run.ID())
		}
	}
}
