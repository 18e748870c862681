package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/stores/memstore"
)

// registerParent registers parent.quote, which calls child.price as a
// child, then sleeps, so it is replayed after the child ended.
func registerParent(t *testing.T, e *runtime.Engine, starts *atomic.Int64) {
	t.Helper()
	must(t, runtime.Register(e, "parent.quote", func(c *runtime.WorkflowContext, sku string) (string, error) {
		starts.Add(1)
		cents, err := runtime.CallChild[int](c, "price", "child.price", sku)
		if err != nil {
			return "", err
		}
		if err := c.Sleep("after", 10*time.Millisecond); err != nil {
			return "", err
		}
		return sku + ":" + strconv.Itoa(cents), nil
	}))
}

// OverrideWorkflow puts a test's function in place of a registered child:
// the parent gets its output, checkpointed, so the parent's replay does
// not run it again; nil gives the child its own function back.
func TestOverrideWorkflowReplacesARegisteredChild(t *testing.T) {
	t.Parallel()
	f := setup(t)
	var starts, real, mocked atomic.Int64
	var parentSeen atomic.Value
	e, _ := f.engine(5*time.Second, func(e *runtime.Engine) {
		registerParent(t, e, &starts)
		must(t, runtime.Register(e, "child.price", func(c *runtime.WorkflowContext, sku string) (int, error) {
			real.Add(1)
			return 100, nil
		}))
	})
	must(t, runtime.OverrideWorkflow(e, "child.price", func(c *runtime.WorkflowContext, sku string) (int, error) {
		mocked.Add(1)
		parentSeen.Store(c.ParentID())
		return 42, nil
	}))
	start(t, e)
	run, err := runtime.Start[string, string](waitCtx(t), e, "parent.quote", "tea")
	must(t, err)
	got, err := run.Result(waitCtx(t))
	must(t, err)
	if got != "tea:42" {
		t.Errorf("parent's result %q, want the override's price", got)
	}
	if starts.Load() < 2 {
		t.Fatalf("the parent executed %d times; the test needs a replay after the child", starts.Load())
	}
	if n, r := mocked.Load(), real.Load(); n != 1 || r != 0 {
		t.Errorf("override ran %d times and the real child %d, want 1 and 0: the parent's replay takes the checkpoint", n, r)
	}
	if p, _ := parentSeen.Load().(string); p != run.ID() {
		t.Errorf("the override ran in a run whose parent is %q, want %s", p, run.ID())
	}

	must(t, runtime.OverrideWorkflow[string, int](e, "child.price", nil))
	run2, err := runtime.Start[string, string](waitCtx(t), e, "parent.quote", "cup")
	must(t, err)
	if got, err := run2.Result(waitCtx(t)); err != nil || got != "cup:100" {
		t.Errorf("after removing the override: %q, %v; want the child's own price", got, err)
	}
}

// The override's error reaches the parent as the child's, and is
// checkpointed like a child's.
func TestOverrideWorkflowError(t *testing.T) {
	t.Parallel()
	f := setup(t)
	var starts, mocked atomic.Int64
	e, _ := f.engine(5*time.Second, func(e *runtime.Engine) {
		registerParent(t, e, &starts)
		must(t, runtime.Register(e, "child.price", func(c *runtime.WorkflowContext, sku string) (int, error) { return 1, nil }))
	})
	must(t, runtime.OverrideWorkflow(e, "child.price", func(c *runtime.WorkflowContext, sku string) (int, error) {
		mocked.Add(1)
		return 0, errors.New("no price for " + sku)
	}))
	start(t, e)
	run, err := runtime.Start[string, string](waitCtx(t), e, "parent.quote", "tea")
	must(t, err)
	if _, err := run.Result(waitCtx(t)); err == nil || !strings.Contains(err.Error(), "no price for tea") {
		t.Errorf("parent ended with %v, want the override's error", err)
	}
	if n := mocked.Load(); n != 1 {
		t.Errorf("override ran %d times, want 1", n)
	}
}

// A stand-in registered while the engine runs, for a child the engine did
// not register, serves the parent's call.
func TestStandInRegisteredWhileRunning(t *testing.T) {
	t.Parallel()
	f := setup(t)
	var starts atomic.Int64
	e, _ := f.engine(5*time.Second, func(e *runtime.Engine) { registerParent(t, e, &starts) })
	start(t, e)
	err := runtime.OverrideWorkflow(e, "child.price", func(c *runtime.WorkflowContext, sku string) (int, error) { return 0, nil })
	if !errors.Is(err, runtime.ErrUnknownWorkflow) {
		t.Fatalf("overriding an unregistered workflow: %v, want ErrUnknownWorkflow", err)
	}
	for _, want := range []string{`"child.price" is not registered`, "parent.quote", "stand-in"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	must(t, runtime.Register(e, "child.price", func(c *runtime.WorkflowContext, sku string) (int, error) { return 7, nil }))
	run, err := runtime.Start[string, string](waitCtx(t), e, "parent.quote", "tea")
	must(t, err)
	if got, err := run.Result(waitCtx(t)); err != nil || got != "tea:7" {
		t.Errorf("parent: %q, %v; want the stand-in's price", got, err)
	}
}

// An override whose types are not the workflow's is refused, naming both.
func TestOverrideWorkflowWrongTypes(t *testing.T) {
	t.Parallel()
	f := setup(t)
	e, _ := f.engine(5*time.Second, func(e *runtime.Engine) {
		must(t, runtime.Register(e, "child.price", func(c *runtime.WorkflowContext, sku string) (int, error) { return 1, nil }))
	})
	err := runtime.OverrideWorkflow(e, "child.price", func(c *runtime.WorkflowContext, n int) (int, error) { return n, nil })
	if !errors.Is(err, runtime.ErrInvalidArgument) || !strings.Contains(err.Error(), "takes string and returns int, not int and int") {
		t.Errorf("override with other types: %v", err)
	}
}

// A test puts its own function in place of a child workflow: the parent
// gets the override's output, checkpointed as the child's.
func ExampleOverrideWorkflow() {
	store := memstore.New(memstore.Options{})
	defer store.Close()
	engine, err := runtime.New(runtime.Config{Store: store, PollInterval: 10 * time.Millisecond})
	if err != nil {
		panic(err)
	}
	defer engine.Close()
	_ = runtime.Register(engine, "price", func(c *runtime.WorkflowContext, sku string) (int, error) {
		return 0, errors.New("the price service is not there in tests")
	})
	_ = runtime.Register(engine, "quote", func(c *runtime.WorkflowContext, sku string) (string, error) {
		cents, err := runtime.CallChild[int](c, "price", "price", sku)
		return fmt.Sprintf("%s costs %d cents", sku, cents), err
	})

	err = runtime.OverrideWorkflow(engine, "price", func(c *runtime.WorkflowContext, sku string) (int, error) {
		return 250, nil
	})
	fmt.Println(err)
	err = runtime.OverrideWorkflow(engine, "prize", func(c *runtime.WorkflowContext, sku string) (int, error) {
		return 0, nil
	})
	fmt.Println(errors.Is(err, runtime.ErrUnknownWorkflow), err)

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	go engine.Run(ctx)
	run, err := runtime.Start[string, string](ctx, engine, "quote", "tea")
	if err != nil {
		panic(err)
	}
	fmt.Println(run.Result(ctx))
	// Output:
	// <nil>
	// true stem: unknown workflow: OverrideWorkflow: "prize" is not registered with this engine, so there is nothing to override (register it first, or register a stand-in under its name with Register); it registers price, quote; did you mean "price"?
	// tea costs 250 cents <nil>
}
