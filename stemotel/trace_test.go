package stemotel_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/stemotel"
)

// registerOrder registers "otel.order": it reserves (a step whose code
// starts a span of its own), charges (a step whose first attempt on each
// worker fails and is retried), then ships through a child run of
// "otel.ship", which prints a label once the order waits for it.
func registerOrder(tracer trace.Tracer) func(e *runtime.Engine) {
	return func(e *runtime.Engine) {
		err := runtime.Register(e, "otel.order", func(c *runtime.WorkflowContext, id string) (string, error) {
			reserved, err := runtime.Step(c, "reserve@v1", runtime.StepOptions{}, func(sc runtime.StepContext) (string, error) {
				_, span := tracer.Start(sc, "inventory.hold")
				defer span.End()
				return "reserved " + id, nil
			})
			if err != nil {
				return "", err
			}
			charged, err := runtime.Step(c, "charge@v1", runtime.StepOptions{Retries: 3, Backoff: 10 * time.Millisecond}, func(sc runtime.StepContext) (string, error) {
				if sc.Attempt() == 1 {
					return "", errors.New("card declined; try again")
				}
				return "charged", nil
			})
			if err != nil {
				return "", err
			}
			label, err := runtime.CallChild[string](c, "ship", "otel.ship", id)
			if err != nil {
				return "", err
			}
			return reserved + ", " + charged + ", " + label, nil
		})
		if err != nil {
			panic(err)
		}
		err = runtime.Register(e, "otel.ship", func(c *runtime.WorkflowContext, id string) (string, error) {
			return runtime.Step(c, "label@v1", runtime.StepOptions{}, func(sc runtime.StepContext) (string, error) {
				// The parent parks on its child before the child ends,
				// however fast the child is.
				for {
					if info, err := e.Get(sc, c.ParentID()); err != nil || info.Status == runtime.StatusWaiting {
						return "label for " + id, err
					}
					time.Sleep(time.Millisecond)
				}
			})
		})
		if err != nil {
			panic(err)
		}
	}
}

// The whole life of a run is one trace, the starter's: engine A runs it
// until its first checkpoint and dies there, leaving the run leased;
// engine B recovers it once the lease expires, retries a failed step,
// starts a child run and finishes. Every span of the run, of either
// engine, of the child and of the step's own code is in the trace of the
// span the run was started under.
func TestRecoveredRunIsOneTrace(t *testing.T) {
	t.Parallel()
	f := setup(t, stemotel.Options{})
	cfg := runtime.Config{LeaseDuration: 300 * time.Millisecond, HeartbeatInterval: 100 * time.Millisecond, ShutdownGrace: -1}
	crash := newCrashStore(f.store, "reserve@v1")
	a := f.engine(crash, cfg, registerOrder(f.tracer))
	stopA := run(t, a)

	ctx, checkout := f.tracer.Start(context.Background(), "checkout")
	_, err := runtime.Start[string, string](ctx, a, "otel.order", "o-1", runtime.WithID("order-1"))
	checkout.End()
	must(t, err)

	select {
	case <-crash.died:
	case <-time.After(10 * time.Second):
		t.Fatal("engine A never checkpointed the first step")
	}
	// A runs on into its dead store and stops; it writes nothing more,
	// so the run stays leased to it.
	for deadline := time.Now().Add(10 * time.Second); len(f.spansNamed("stem.execute otel.order")) == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("engine A's execution never ended")
		}
	}
	stopA()

	b := f.engine(f.store, cfg, registerOrder(f.tracer))
	stopB := run(t, b)
	info := wait(t, b, "order-1")
	stopB()
	if info.Status != runtime.StatusComplete || string(info.Output) != `"reserved o-1, charged, label for o-1"` {
		t.Fatalf("run ended %s with %s, %v", info.Status, info.Output, info.Err)
	}

	traceID := checkout.SpanContext().TraceID()
	for _, s := range f.spans.Ended() {
		if s.SpanContext().TraceID() != traceID {
			t.Errorf("span %s (%v) is in trace %s, not the starter's %s", s.Name(), s.Attributes(), s.SpanContext().TraceID(), traceID)
		}
	}

	starts := f.spansNamed("stem.start otel.order")
	if len(starts) != 1 {
		t.Fatalf("%d start spans, want 1", len(starts))
	}
	start := starts[0]
	if start.Parent().SpanID() != checkout.SpanContext().SpanID() || start.SpanKind() != trace.SpanKindProducer {
		t.Errorf("start span: parent %s, kind %s; want the checkout span, producer", start.Parent().SpanID(), start.SpanKind())
	}
	if attr(start, "stem.run_id") != "order-1" || attr(start, "stem.runs") != int64(1) || attr(start, "stem.workflow") != "otel.order" {
		t.Errorf("start span attributes %v", start.Attributes())
	}

	// A's execution, stopped by its dead store; B's recovery, parked on
	// the child; B's last, after the child finished.
	execs := f.spansNamed("stem.execute otel.order")
	if len(execs) != 3 {
		t.Fatalf("%d executions of the order, want 3: %v", len(execs), names(execs))
	}
	for _, x := range execs {
		if x.Parent().SpanID() != start.SpanContext().SpanID() || !x.Parent().IsRemote() || x.SpanKind() != trace.SpanKindConsumer {
			t.Errorf("execution span %v: parent %s (remote %v), kind %s; want the start span, remote, consumer", x.Attributes(), x.Parent().SpanID(), x.Parent().IsRemote(), x.SpanKind())
		}
	}
	wantExec := []struct {
		recoveries int64
		outcome    string
		status     codes.Code
	}{{0, "stopped", codes.Error}, {1, "parked", codes.Unset}, {0, "complete", codes.Unset}}
	for i, w := range wantExec {
		x := execs[i]
		if attr(x, "stem.recoveries") != w.recoveries || attr(x, "stem.outcome") != w.outcome || x.Status().Code != w.status {
			t.Errorf("execution %d: recoveries %v, outcome %v, status %v; want %d, %s, %v", i+1, attr(x, "stem.recoveries"), attr(x, "stem.outcome"), x.Status(), w.recoveries, w.outcome, w.status)
		}
		if attr(x, "stem.run_id") != "order-1" || attr(x, "stem.execution") != int64(1) {
			t.Errorf("execution %d attributes %v", i+1, x.Attributes())
		}
	}
	if !hasEvent(execs[1], "stem.wait", "stem.wait.kind", "child") {
		t.Errorf("B's first execution has no event of its wait on the child: %v", execs[1].Events())
	}

	// Steps: A's reserve and first charge attempt; B's two charge
	// attempts (A's attempt was never recorded, so B's first is number 1
	// again). Each is under its own execution.
	byID := map[trace.SpanID]sdktrace.ReadOnlySpan{}
	for _, s := range f.spans.Ended() {
		byID[s.SpanContext().SpanID()] = s
	}
	parentOf := func(s sdktrace.ReadOnlySpan) sdktrace.ReadOnlySpan { return byID[s.Parent().SpanID()] }
	reserve := f.spansNamed("stem.step reserve@v1")
	if len(reserve) != 1 || parentOf(reserve[0]) != execs[0] {
		t.Fatalf("reserve spans %d, want 1 under A's execution", len(reserve))
	}
	if hold := f.spansNamed("inventory.hold"); len(hold) != 1 || parentOf(hold[0]) != reserve[0] {
		t.Errorf("the span the step's code started is not the step span's child")
	}
	charges := f.spansNamed("stem.step charge@v1")
	if len(charges) != 3 {
		t.Fatalf("%d charge attempts, want 3", len(charges))
	}
	for i, w := range []struct {
		exec    sdktrace.ReadOnlySpan
		attempt int64
		failed  bool
	}{{execs[0], 1, true}, {execs[1], 1, true}, {execs[1], 2, false}} {
		s := charges[i]
		if parentOf(s) != w.exec {
			t.Errorf("charge attempt %d is not under its execution", i+1)
		}
		if attr(s, "stem.step.attempt") != w.attempt || attr(s, "stem.step.key") != "charge@v1" || attr(s, "stem.run_id") != "order-1" {
			t.Errorf("charge attempt %d attributes %v", i+1, s.Attributes())
		}
		if w.failed {
			if s.Status().Code != codes.Error || attr(s, "stem.step.retry") != true || attr(s, "stem.step.retry_at") == nil || !hasEvent(s, "exception", "exception.message", "card declined; try again") {
				t.Errorf("failed charge attempt %d: status %v, attributes %v, events %v", i+1, s.Status(), s.Attributes(), s.Events())
			}
		} else if s.Status().Code != codes.Unset || attr(s, "stem.step.retry") != false {
			t.Errorf("charge attempt %d: status %v, attributes %v", i+1, s.Status(), s.Attributes())
		}
	}

	// The child starts inside B's execution and runs under its start.
	childStart := f.spansNamed("stem.start otel.ship")
	childExec := f.spansNamed("stem.execute otel.ship")
	label := f.spansNamed("stem.step label@v1")
	if len(childStart) != 1 || len(childExec) != 1 || len(label) != 1 {
		t.Fatalf("child spans: %d starts, %d executions, %d label steps; want 1 each", len(childStart), len(childExec), len(label))
	}
	if parentOf(childStart[0]) != execs[1] || attr(childStart[0], "stem.parent_run_id") != "order-1" {
		t.Errorf("the child's start is not under B's execution of the order: %v", childStart[0].Attributes())
	}
	if childExec[0].Parent().SpanID() != childStart[0].SpanContext().SpanID() || attr(childExec[0], "stem.parent_run_id") != "order-1" {
		t.Errorf("the child's execution is not under its start: %v", childExec[0].Attributes())
	}
	if parentOf(label[0]) != childExec[0] {
		t.Errorf("the child's step is not under its execution")
	}
}

// names returns the spans' names, for messages.
func names(spans []sdktrace.ReadOnlySpan) []string {
	out := make([]string, len(spans))
	for i, s := range spans {
		out[i] = s.Name()
	}
	return out
}

// hasEvent reports whether s has an event named name with the attribute
// key set to value.
func hasEvent(s sdktrace.ReadOnlySpan, name, key string, value any) bool {
	for _, ev := range s.Events() {
		if ev.Name != name {
			continue
		}
		for _, kv := range ev.Attributes {
			if string(kv.Key) == key && kv.Value.AsInterface() == value {
				return true
			}
		}
	}
	return false
}
