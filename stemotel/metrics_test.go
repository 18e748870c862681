package stemotel_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/stemotel"
)

// point is a data point of a metric, whatever its type: a counter's or
// gauge's value, a histogram's count and sum.
type point struct {
	attrs attribute.Set
	value float64
	count uint64
}

// points returns the data points of the metric named name.
func points(rm metricdata.ResourceMetrics, name string) []point {
	var out []point
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != stemotel.ScopeName {
			continue
		}
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					out = append(out, point{attrs: p.Attributes, value: float64(p.Value)})
				}
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					out = append(out, point{attrs: p.Attributes, value: float64(p.Value)})
				}
			case metricdata.Gauge[float64]:
				for _, p := range d.DataPoints {
					out = append(out, point{attrs: p.Attributes, value: p.Value})
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					out = append(out, point{attrs: p.Attributes, value: p.Sum, count: p.Count})
				}
			default:
				panic(fmt.Sprintf("metric %s has data of type %T", name, m.Data))
			}
		}
	}
	return out
}

// find returns the point of the metric named name whose attributes are
// exactly kvs (as "key=value" pairs), and whether there is one.
func find(rm metricdata.ResourceMetrics, name string, kvs ...string) (point, bool) {
	for _, p := range points(rm, name) {
		if p.attrs.Len() != len(kvs) {
			continue
		}
		match := true
		for _, kv := range kvs {
			k, v, _ := cut(kv)
			if got, ok := p.attrs.Value(attribute.Key(k)); !ok || got.Emit() != v {
				match = false
			}
		}
		if match {
			return p, true
		}
	}
	return point{}, false
}

func cut(kv string) (string, string, bool) {
	for i := range len(kv) {
		if kv[i] == '=' {
			return kv[:i], kv[i+1:], true
		}
	}
	return kv, "", false
}

// registerMetered registers "otel.metered" (a step that succeeds, one
// that fails its first attempt, an autoversion step called twice) and
// "otel.failing" (a step that fails for good).
func registerMetered(e *runtime.Engine) {
	err := runtime.Register(e, "otel.metered", func(c *runtime.WorkflowContext, _ int) (int, error) {
		if err := runtime.Do(c, "a@v1", runtime.StepOptions{}, func(runtime.StepContext) error { return nil }); err != nil {
			return 0, err
		}
		err := runtime.Do(c, "b@v1", runtime.StepOptions{Retries: 2, Backoff: 5 * time.Millisecond}, func(sc runtime.StepContext) error {
			if sc.Attempt() == 1 {
				return errors.New("not yet")
			}
			return nil
		})
		if err != nil {
			return 0, err
		}
		for range 2 {
			if err := runtime.Do(c, "pack@v1", runtime.StepOptions{Autoversion: true}, func(runtime.StepContext) error { return nil }); err != nil {
				return 0, err
			}
		}
		return 1, nil
	})
	if err != nil {
		panic(err)
	}
	err = runtime.Register(e, "otel.failing", func(c *runtime.WorkflowContext, _ int) (int, error) {
		return 0, runtime.Do(c, "boom@v1", runtime.StepOptions{}, func(runtime.StepContext) error { return runtime.Permanent(errors.New("boom")) })
	})
	if err != nil {
		panic(err)
	}
}

func TestMetrics(t *testing.T) {
	t.Parallel()
	f := setup(t, stemotel.Options{})
	e := f.engine(f.store, runtime.Config{}, registerMetered)
	ctx := context.Background()
	for i := range 3 {
		_, err := runtime.Start[int, int](ctx, e, "otel.metered", i, runtime.WithID(fmt.Sprint("metered-", i)))
		must(t, err)
	}
	_, err := runtime.Start[int, int](ctx, e, "otel.failing", 0, runtime.WithID("failing"))
	must(t, err)
	// A start of an existing run creates nothing.
	_, err = runtime.Start[int, int](ctx, e, "otel.metered", 0, runtime.WithID("metered-0"))
	must(t, err)
	stop := run(t, e)
	for i := range 3 {
		wait(t, e, fmt.Sprint("metered-", i))
	}
	wait(t, e, "failing")
	stop()
	rm := f.collect()

	for _, c := range []struct {
		name  string
		kvs   []string
		value float64
	}{
		{"stem.runs.started", []string{"stem.workflow=otel.metered"}, 3},
		{"stem.runs.started", []string{"stem.workflow=otel.failing"}, 1},
		{"stem.runs.finished", []string{"stem.workflow=otel.metered", "stem.status=complete"}, 3},
		{"stem.runs.finished", []string{"stem.workflow=otel.failing", "stem.status=errored"}, 1},
		{"stem.executions", []string{"stem.workflow=otel.metered", "stem.outcome=complete"}, 3},
		{"stem.executions", []string{"stem.workflow=otel.failing", "stem.outcome=errored"}, 1},
		{"stem.step.retries", []string{"stem.workflow=otel.metered", "stem.step=b@v1"}, 3},
	} {
		p, ok := find(rm, c.name, c.kvs...)
		if !ok || p.value != c.value {
			t.Errorf("%s %v = %v (found %v), want %v; points %v", c.name, c.kvs, p.value, ok, c.value, points(rm, c.name))
		}
	}
	for _, c := range []struct {
		kvs   []string
		count uint64
	}{
		{[]string{"stem.workflow=otel.metered", "stem.step=a@v1", "stem.outcome=ok"}, 3},
		{[]string{"stem.workflow=otel.metered", "stem.step=b@v1", "stem.outcome=retry"}, 3},
		{[]string{"stem.workflow=otel.metered", "stem.step=b@v1", "stem.outcome=ok"}, 3},
		{[]string{"stem.workflow=otel.metered", "stem.step=pack@v1", "stem.outcome=ok"}, 6},
		{[]string{"stem.workflow=otel.failing", "stem.step=boom@v1", "stem.outcome=failed"}, 1},
	} {
		p, ok := find(rm, "stem.step.duration", c.kvs...)
		if !ok || p.count != c.count || p.value <= 0 {
			t.Errorf("stem.step.duration %v: count %d, sum %v (found %v); want count %d", c.kvs, p.count, p.value, ok, c.count)
		}
	}
	if n := len(points(rm, "stem.step.duration")); n != 5 {
		t.Errorf("stem.step.duration has %d series, want 5 (one per step, not per autoversion iteration)", n)
	}
	// A run's completion rides with its last step's checkpoint: these
	// workflows end right after a step, so none calls Complete.
	for _, op := range []string{"Claim", "CreateRuns", "Checkpoint", "RecordAttempts"} {
		if p, ok := find(rm, "stem.store.duration", "stem.store.op="+op, "stem.outcome=ok"); !ok || p.count == 0 {
			t.Errorf("stem.store.duration has no %s call", op)
		}
	}
	claims, _ := find(rm, "stem.store.duration", "stem.store.op=Claim", "stem.outcome=ok")
	if p, ok := find(rm, "stem.claim.duration", "stem.outcome=ok"); !ok || p.count != claims.count {
		t.Errorf("stem.claim.duration counts %d claims, stem.store.duration %d", p.count, claims.count)
	}
	if ps := points(rm, "stem.lease.lost"); len(ps) != 0 {
		t.Errorf("stem.lease.lost %v, want none", ps)
	}
}

// The queue gauges read the engine's queues at each collection: runs
// started on an engine that does not run wait, ready, in the default
// queue.
func TestQueueGauges(t *testing.T) {
	t.Parallel()
	f := setup(t, stemotel.Options{})
	e := f.engine(f.store, runtime.Config{}, registerMetered)
	must(t, e.RegisterQueue(runtime.Queue{Name: "bulk"}))
	ctx := context.Background()
	for i := range 2 {
		_, err := runtime.Start[int, int](ctx, e, "otel.metered", i)
		must(t, err)
	}
	_, err := runtime.Start[int, int](ctx, e, "otel.metered", 9, runtime.OnQueue("bulk"))
	must(t, err)
	time.Sleep(20 * time.Millisecond)

	if len(points(f.collect(), "stem.queue.ready")) != 0 {
		t.Fatal("queue gauges before Observe")
	}
	stop, err := f.tel.Observe(e)
	must(t, err)
	rm := f.collect()
	for _, c := range []struct {
		name, queue string
		min, max    float64
	}{
		{"stem.queue.ready", "default", 2, 2},
		{"stem.queue.ready", "bulk", 1, 1},
		{"stem.queue.oldest_ready", "default", 0.015, 60},
		{"stem.queue.running", "default", 0, 0},
		{"stem.queue.waiting", "default", 0, 0},
	} {
		p, ok := find(rm, c.name, "stem.queue="+c.queue)
		if !ok || p.value < c.min || p.value > c.max {
			t.Errorf("%s of queue %s = %v (found %v), want %v to %v", c.name, c.queue, p.value, ok, c.min, c.max)
		}
	}
	must(t, stop())
	if ps := points(f.collect(), "stem.queue.ready"); len(ps) != 0 {
		t.Errorf("queue gauges after stop: %v", ps)
	}

	// Named queues only; a bad name is refused at once.
	stop, err = f.tel.Observe(e, "bulk")
	must(t, err)
	defer stop()
	if ps := points(f.collect(), "stem.queue.ready"); len(ps) != 1 || ps[0].value != 1 {
		t.Errorf("stem.queue.ready of queue bulk only: %v", ps)
	}
	if _, err := f.tel.Observe(e, "no spaces"); err == nil {
		t.Error("Observe of a queue with a bad name: no error")
	}
	if _, err := f.tel.Observe(nil); !errors.Is(err, runtime.ErrInvalidArgument) {
		t.Errorf("Observe(nil): %v", err)
	}
}

// An execution whose lease another worker took stops when its write is
// refused, and is counted.
func TestLeaseLost(t *testing.T) {
	t.Parallel()
	f := setup(t, stemotel.Options{})
	var calls atomic.Int32
	release := make(chan struct{})
	register := func(e *runtime.Engine) {
		err := runtime.Register(e, "otel.slow", func(c *runtime.WorkflowContext, _ int) (int, error) {
			return runtime.Step(c, "slow@v1", runtime.StepOptions{}, func(sc runtime.StepContext) (int, error) {
				if calls.Add(1) == 1 {
					<-release // the first worker's attempt outlives its lease
				}
				return 1, nil
			})
		})
		if err != nil {
			panic(err)
		}
	}
	// No heartbeats: the running step does not keep its lease.
	cfg := runtime.Config{LeaseDuration: 200 * time.Millisecond, HeartbeatInterval: -1}
	a := f.engine(f.store, cfg, register)
	b := f.engine(f.store, cfg, register)
	_, err := runtime.Start[int, int](context.Background(), a, "otel.slow", 0, runtime.WithID("slow"))
	must(t, err)
	stopA := run(t, a)
	for calls.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	stopB := run(t, b)
	wait(t, b, "slow")
	stopB()
	close(release)
	stopA()

	rm := f.collect()
	if p, ok := find(rm, "stem.lease.lost", "stem.workflow=otel.slow"); !ok || p.value != 1 {
		t.Errorf("stem.lease.lost = %v (found %v), want 1", p.value, ok)
	}
	if p, ok := find(rm, "stem.executions", "stem.workflow=otel.slow", "stem.outcome=stopped"); !ok || p.value != 1 {
		t.Errorf("stopped executions = %v (found %v), want 1", p.value, ok)
	}
	stopped := f.spansNamed("stem.execute otel.slow")[0]
	if attr(stopped, "stem.outcome") != "stopped" || stopped.Status().Code.String() != "Error" {
		t.Errorf("the stopped execution's span: %v %v", stopped.Attributes(), stopped.Status())
	}
}

// A run the engine's codec cannot open is handed back, and counted by the
// key it is sealed with, so an alert names the key the worker lacks.
func TestSealedHandBacks(t *testing.T) {
	t.Parallel()
	f := setup(t, stemotel.Options{})
	keyA, keyB := []byte("aaaaaaaaaaaaaaaa"), []byte("bbbbbbbbbbbbbbbb")
	codec := func(key []byte) runtime.Codec {
		c, err := runtime.NewAESGCMCodec(key)
		must(t, err)
		return c
	}
	register := func(e *runtime.Engine) {
		must(t, runtime.Register(e, "otel.sealed", func(c *runtime.WorkflowContext, n int) (int, error) { return n, nil }))
	}
	sealer := f.engine(f.store, runtime.Config{Codec: codec(keyB)}, register)
	_, err := runtime.Start[int, int](context.Background(), sealer, "otel.sealed", 1, runtime.WithID("sealed"))
	must(t, err)
	lacks := f.engine(f.store, runtime.Config{Codec: codec(keyA)}, register)
	stop := run(t, lacks)
	defer stop()
	idB := runtime.AESGCMKeyID(keyB)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if p, ok := find(f.collect(), "stem.sealed.handbacks", "stem.workflow=otel.sealed", "stem.codec.key_id="+idB); ok && p.value >= 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("stem.sealed.handbacks never counted the run sealed with key ID %s:\n%v", idB, points(f.collect(), "stem.sealed.handbacks"))
		}
		time.Sleep(5 * time.Millisecond)
	}
}
