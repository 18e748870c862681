package stemotel_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/trace"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/stemotel"
)

// registerSimple registers "otel.simple", one step.
func registerSimple(e *runtime.Engine) {
	err := runtime.Register(e, "otel.simple", func(c *runtime.WorkflowContext, in string) (string, error) {
		return runtime.Step(c, "one@v1", runtime.StepOptions{}, func(runtime.StepContext) (string, error) { return in, nil })
	})
	if err != nil {
		panic(err)
	}
}

// With StoreSpans, the store calls made inside a trace are spans of it;
// the engine's polls, outside any, are not. Without, no call is a span.
func TestStoreSpans(t *testing.T) {
	t.Parallel()
	for _, on := range []bool{true, false} {
		t.Run(map[bool]string{true: "on", false: "off"}[on], func(t *testing.T) {
			t.Parallel()
			f := setup(t, stemotel.Options{StoreSpans: on})
			e := f.engine(f.store, runtime.Config{}, registerSimple)
			stop := run(t, e)
			ctx, parent := f.tracer.Start(context.Background(), "parent")
			_, err := runtime.Start[string, string](ctx, e, "otel.simple", "x", runtime.WithID("simple"))
			parent.End()
			must(t, err)
			wait(t, e, "simple")
			stop()

			var store []string
			for _, s := range f.spans.Ended() {
				if !strings.HasPrefix(s.Name(), "stem.store ") {
					continue
				}
				store = append(store, s.Name())
				if s.SpanContext().TraceID() != parent.SpanContext().TraceID() || s.SpanKind() != trace.SpanKindClient || attr(s, "stem.store.op") != strings.TrimPrefix(s.Name(), "stem.store ") {
					t.Errorf("store span %s: trace %s, kind %s, attributes %v", s.Name(), s.SpanContext().TraceID(), s.SpanKind(), s.Attributes())
				}
			}
			if !on {
				if len(store) != 0 {
					t.Errorf("store spans without StoreSpans: %v", store)
				}
				return
			}
			start := f.spansNamed("stem.start otel.simple")[0]
			exec := f.spansNamed("stem.execute otel.simple")[0]
			for name, parent := range map[string]trace.SpanContext{
				"stem.store CreateRuns": start.SpanContext(),
				// The completion rides with the step's checkpoint.
				"stem.store Checkpoint": exec.SpanContext(),
			} {
				spans := f.spansNamed(name)
				if len(spans) != 1 || spans[0].Parent().SpanID() != parent.SpanID() {
					t.Errorf("%d spans %s, want 1 under %s", len(spans), name, parent.SpanID())
				}
			}
			if claims := f.spansNamed("stem.store Claim"); len(claims) != 0 {
				t.Errorf("%d claims are spans", len(claims))
			}
		})
	}
}

// Sleeps and waits are events on the execution's span.
func TestWaitEvents(t *testing.T) {
	t.Parallel()
	f := setup(t, stemotel.Options{})
	e := f.engine(f.store, runtime.Config{}, func(e *runtime.Engine) {
		err := runtime.Register(e, "otel.waiting", func(c *runtime.WorkflowContext, _ int) (string, error) {
			if err := c.Sleep("nap", 10*time.Millisecond); err != nil {
				return "", err
			}
			return runtime.WaitForEvent[string](c, "mood", "otel.mood", time.Minute)
		})
		if err != nil {
			panic(err)
		}
	})
	stop := run(t, e)
	ctx := context.Background()
	_, err := runtime.Start[int, string](ctx, e, "otel.waiting", 0, runtime.WithID("waiting"))
	must(t, err)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		if len(f.spansNamed("stem.execute otel.waiting")) == 2 {
			break // asleep, then waiting for the event
		}
		if time.Now().After(deadline) {
			t.Fatal("the run never waited for its event")
		}
	}
	must(t, e.SendEvent(ctx, "waiting", "otel.mood", "sunny"))
	info := wait(t, e, "waiting")
	stop()
	if string(info.Output) != `"sunny"` {
		t.Fatalf("output %s", info.Output)
	}

	execs := f.spansNamed("stem.execute otel.waiting")
	if len(execs) != 3 {
		t.Fatalf("%d executions, want 3", len(execs))
	}
	event := func(x int, name string) map[string]any {
		for _, ev := range execs[x].Events() {
			if ev.Name == name {
				attrs := map[string]any{}
				for _, kv := range ev.Attributes {
					attrs[string(kv.Key)] = kv.Value.AsInterface()
				}
				return attrs
			}
		}
		t.Fatalf("execution %d has no event %s: %v", x+1, name, execs[x].Events())
		return nil
	}
	sleep := event(0, "stem.sleep")
	if sleep["stem.step.key"] != "nap" || sleep["stem.wait.kind"] != "sleep" || sleep["stem.wait.until"] == nil || sleep["stem.wait.topics"] != nil {
		t.Errorf("sleep event %v", sleep)
	}
	until, err := time.Parse(time.RFC3339Nano, sleep["stem.wait.until"].(string))
	if err != nil || until.Before(execs[0].StartTime()) || until.After(execs[0].StartTime().Add(time.Second)) {
		t.Errorf("the sleep's stem.wait.until %v (%v), want 10ms after the execution began, %v", until, err, execs[0].StartTime())
	}
	w := event(1, "stem.wait")
	if topics, _ := w["stem.wait.topics"].([]string); w["stem.step.key"] != "mood" || w["stem.wait.kind"] != "event" || len(topics) != 1 || topics[0] != "otel.mood" || w["stem.wait.until"] == nil {
		t.Errorf("wait event %v", w)
	}
	if evs := execs[2].Events(); len(evs) != 0 {
		t.Errorf("the last execution, which waits for nothing, has events %v", evs)
	}
}

// A start keeps the headers another hook set, adds the trace context and
// the baggage, and the step's context has the starter's baggage back.
func TestHeaders(t *testing.T) {
	t.Parallel()
	f := setup(t, stemotel.Options{})
	tenant := runtime.Hooks{Start: func(ctx context.Context, s *runtime.HookStart, next func(context.Context) error) error {
		for i := range s.Runs {
			s.Runs[i].Headers = map[string]string{"tenant": "acme", "traceparent": "stale"}
		}
		return next(ctx)
	}}
	seen := make(chan string, 1)
	e, err := runtime.New(runtime.Config{Store: f.store, PollInterval: 20 * time.Millisecond, Hooks: []runtime.Hooks{tenant, f.tel.Hooks()}})
	must(t, err)
	t.Cleanup(func() { _ = e.Close() })
	err = runtime.Register(e, "otel.baggage", func(c *runtime.WorkflowContext, _ int) (int, error) {
		return 0, runtime.Do(c, "look@v1", runtime.StepOptions{}, func(sc runtime.StepContext) error {
			seen <- baggage.FromContext(sc).Member("customer").Value()
			return nil
		})
	})
	must(t, err)

	m, err := baggage.NewMember("customer", "c-42")
	must(t, err)
	bag, err := baggage.New(m)
	must(t, err)
	ctx, span := f.tracer.Start(baggage.ContextWithBaggage(context.Background(), bag), "parent")
	_, err = runtime.Start[int, int](ctx, e, "otel.baggage", 0, runtime.WithID("bag"))
	span.End()
	must(t, err)
	rec, err := f.store.GetRun(context.Background(), "bag")
	must(t, err)
	tp := rec.Headers["traceparent"]
	if rec.Headers["tenant"] != "acme" || !strings.Contains(tp, span.SpanContext().TraceID().String()) || rec.Headers["baggage"] != "customer=c-42" || len(rec.Headers) != 3 {
		t.Errorf("headers %v", rec.Headers)
	}
	stop := run(t, e)
	wait(t, e, "bag")
	stop()
	if got := <-seen; got != "c-42" {
		t.Errorf("the step's baggage has customer %q, want c-42", got)
	}
}

// A Telemetry on the global providers, none set (no-ops), costs the runs
// nothing: no headers are stored, and everything works.
func TestGlobalNoopProviders(t *testing.T) {
	t.Parallel()
	tel, err := stemotel.New(stemotel.Options{})
	must(t, err)
	f := setup(t, stemotel.Options{})
	f.tel = tel
	e := f.engine(f.store, runtime.Config{}, registerOrder(f.tracer))
	obs, err := tel.Observe(e)
	must(t, err)
	defer obs()
	stop := run(t, e)
	_, err = runtime.Start[string, string](context.Background(), e, "otel.order", "o", runtime.WithID("order"))
	must(t, err)
	if info := wait(t, e, "order"); info.Status != runtime.StatusComplete {
		t.Fatalf("run ended %s: %v", info.Status, info.Err)
	}
	stop()
	for _, id := range []string{"order", "order/ship"} {
		rec, err := f.store.GetRun(context.Background(), id)
		if err != nil || rec.Headers != nil {
			t.Errorf("run %s: headers %v, %v", id, rec.Headers, err)
		}
	}
	// Only the application's own span, the step's inventory.hold, is
	// recorded.
	if spans := f.spans.Ended(); len(spans) != 1 || spans[0].Name() != "inventory.hold" {
		t.Errorf("spans %v", names(spans))
	}
}
