package stemtest_test

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/stemtest"
)

// fakeTB records what an assertion reports instead of failing the test.
type fakeTB struct {
	testing.TB
	errors []string
}

func (f *fakeTB) Helper() {}

func (f *fakeTB) Errorf(format string, args ...any) {
	f.errors = append(f.errors, fmt.Sprintf(format, args...))
}

// expectReport checks that the fake got exactly one report holding every
// part of want.
func expectReport(t *testing.T, f *fakeTB, want ...string) {
	t.Helper()
	if len(f.errors) != 1 {
		t.Fatalf("reports %q, want one", f.errors)
	}
	for _, w := range want {
		if !strings.Contains(f.errors[0], w) {
			t.Errorf("report %q does not say %q", f.errors[0], w)
		}
	}
}

type line struct {
	SKU string
	Qty int
}

func TestExpectAssertions(t *testing.T) {
	t.Parallel()
	const what = "mock of step pack@v1"
	calls := []line{{"tea", 1}, {"cup", 2}}
	ok := &fakeTB{}
	if !stemtest.ExpectCount(ok, what, calls, 2) || !stemtest.ExpectCall(ok, what, calls, 1, line{"cup", 2}) ||
		!stemtest.ExpectCalledWith(ok, what, calls, line{"tea", 1}) {
		t.Errorf("assertions that hold reported false")
	}
	if len(ok.errors) != 0 {
		t.Errorf("assertions that hold reported %q", ok.errors)
	}

	f := &fakeTB{}
	if stemtest.ExpectCount(f, what, calls, 1) {
		t.Error("ExpectCount of a wrong count returned true")
	}
	expectReport(t, f, what+": called 2 times, want once", "#0 {SKU:tea Qty:1}", "#1 {SKU:cup Qty:2}")

	f = &fakeTB{}
	stemtest.ExpectCount(f, what, []line(nil), 3)
	expectReport(t, f, what+": called never, want 3 times")

	f = &fakeTB{}
	if stemtest.ExpectCall(f, what, calls, 0, line{"tea", 3}) {
		t.Error("ExpectCall of a different call returned true")
	}
	expectReport(t, f, what+": call #0:", "got  {SKU:tea Qty:1}", "want {SKU:tea Qty:3}")

	f = &fakeTB{}
	stemtest.ExpectCall(f, what, calls, 2, line{"pot", 1})
	expectReport(t, f, what+": no call #2 to compare with {SKU:pot Qty:1}: called 2 times")

	f = &fakeTB{}
	if stemtest.ExpectCalledWith(f, what, calls, line{"pot", 1}) {
		t.Error("ExpectCalledWith of a call not made returned true")
	}
	expectReport(t, f, what+": no call with {SKU:pot Qty:1}: called 2 times", "#1 {SKU:cup Qty:2}")
}

// registerShop registers shop.order, which runs a step, calls the child
// shop.price (which the test does not register), and runs another step.
func registerShop(e *runtime.Engine) error {
	return runtime.Register(e, "shop.order", func(c *runtime.WorkflowContext, sku string) (string, error) {
		tag, err := runtime.Step(c, "tag@v1", runtime.StepOptions{}, func(runtime.StepContext) (string, error) { return "T-" + sku, nil })
		if err != nil {
			return "", err
		}
		cents, err := runtime.CallChild[int](c, "price", "shop.price", sku)
		if err != nil {
			return "", err
		}
		return runtime.Step(c, "label@v1", runtime.StepOptions{}, func(runtime.StepContext) (string, error) {
			return fmt.Sprintf("%s:%d", tag, cents), nil
		})
	})
}

// A stand-in for a child the test does not register serves the parent in
// every case of CrashEveryStep, once each: a replay of the parent after
// the crash takes the child's checkpoint.
func TestMockWorkflowUnderCrashes(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var counts []*atomic.Int64
	stemtest.CrashEveryStep(t, registerShop, "shop.order", "tea", stemtest.Setup(func(env *stemtest.Env) {
		n := &atomic.Int64{}
		mu.Lock()
		counts = append(counts, n)
		mu.Unlock()
		stemtest.MockWorkflow(env, "shop.price", func(ctx *runtime.WorkflowContext, sku string) (int, error) {
			n.Add(1)
			if ctx.ParentID() != "stemtest-crash" {
				return 0, fmt.Errorf("parent %q", ctx.ParentID())
			}
			return len(sku) * 100, nil
		})
	}))
	if len(counts) != 5 {
		t.Fatalf("%d cases set up, want the first run and four crashes", len(counts))
	}
	for i, n := range counts {
		if got := n.Load(); got != 1 {
			t.Errorf("case %d: the stand-in ran %d times, want once", i, got)
		}
	}
}

// MockWorkflow on a registered child overrides it; the output reaches the
// parent.
func TestMockWorkflowOverridesRegistered(t *testing.T) {
	t.Parallel()
	var real atomic.Int64
	env := stemtest.New(t, func(e *runtime.Engine) error {
		if err := registerShop(e); err != nil {
			return err
		}
		return runtime.Register(e, "shop.price", func(c *runtime.WorkflowContext, sku string) (int, error) {
			real.Add(1)
			return 1, nil
		})
	})
	stemtest.MockWorkflow(env, "shop.price", func(ctx *runtime.WorkflowContext, sku string) (int, error) {
		if err := ctx.Sleep("think", time.Hour); err != nil {
			return 0, err
		}
		return 250, nil
	})
	run, err := runtime.Start[string, string](env.Context(), env.Engine, "shop.order", "cup")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := run.Result(env.Context()); err != nil || out != "T-cup:250" {
		t.Errorf("result %q, %v", out, err)
	}
	if real.Load() != 0 {
		t.Error("the real child ran")
	}
}
