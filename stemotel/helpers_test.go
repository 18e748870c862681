package stemotel_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/goleak"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/stemotel"
	"github.com/stemflow/stem/storage"
	"github.com/stemflow/stem/stores/memstore"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// fixture is a Telemetry on SDK providers whose spans and metrics the
// test reads, and a store.
type fixture struct {
	t      *testing.T
	spans  *tracetest.SpanRecorder
	tracer trace.Tracer // the application's, for parent spans
	reader *sdkmetric.ManualReader
	tel    *stemotel.Telemetry
	store  *memstore.Store
}

func setup(t *testing.T, opts stemotel.Options) *fixture {
	t.Helper()
	f := &fixture{t: t, spans: tracetest.NewSpanRecorder(), reader: sdkmetric.NewManualReader()}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(f.spans))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(f.reader))
	t.Cleanup(func() {
		_ = tp.Shutdown(context.Background())
		_ = mp.Shutdown(context.Background())
	})
	f.tracer = tp.Tracer("stemotel_test")
	opts.TracerProvider, opts.MeterProvider = tp, mp
	tel, err := stemotel.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	f.tel = tel
	f.store = memstore.New(memstore.Options{})
	t.Cleanup(func() { _ = f.store.Close() })
	return f
}

// engine returns an engine on store with the telemetry's hooks, the
// workflows registered by register.
func (f *fixture) engine(store storage.Store, cfg runtime.Config, register func(e *runtime.Engine)) *runtime.Engine {
	f.t.Helper()
	cfg.Store = store
	cfg.Hooks = []runtime.Hooks{f.tel.Hooks()}
	if cfg.PollInterval == 0 {
		cfg.PollInterval = 20 * time.Millisecond
	}
	e, err := runtime.New(cfg)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { _ = e.Close() })
	register(e)
	return e
}

// run runs e until the returned stop is called, which returns once Run
// has: every execution it held has ended, and so has its span.
func run(t *testing.T, e *runtime.Engine) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// wait waits for a run to finish, within 10s.
func wait(t *testing.T, e *runtime.Engine, id string) runtime.RunInfo {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	info, err := e.Wait(ctx, id)
	if err != nil {
		t.Fatalf("waiting for run %s: %v", id, err)
	}
	return info
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// attr returns a span's attribute named key, as a string, an int64 or a
// bool; nil when it has none.
func attr(s sdktrace.ReadOnlySpan, key string) any {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value.AsInterface()
		}
	}
	return nil
}

// spansNamed returns the ended spans named name, in the order they
// started.
func (f *fixture) spansNamed(name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range f.spans.Ended() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	sortByStart(out)
	return out
}

func sortByStart(spans []sdktrace.ReadOnlySpan) {
	slices.SortStableFunc(spans, func(a, b sdktrace.ReadOnlySpan) int { return a.StartTime().Compare(b.StartTime()) })
}

// collect reads the metrics.
func (f *fixture) collect() metricdata.ResourceMetrics {
	f.t.Helper()
	var rm metricdata.ResourceMetrics
	if err := f.reader.Collect(context.Background(), &rm); err != nil {
		f.t.Fatal(err)
	}
	return rm
}

// errKilled is what a killed worker's store calls return.
var errKilled = errors.New("worker killed")

// crashStore is the store as a worker sees it that dies right after the
// checkpoint of step dieAfter is written: from then on, every call it
// makes fails, and it writes nothing more (not even the release of its
// run), as a killed process.
type crashStore struct {
	storage.Store
	dieAfter string
	dead     atomic.Bool
	died     chan struct{}
}

func newCrashStore(s storage.Store, dieAfter string) *crashStore {
	return &crashStore{Store: s, dieAfter: dieAfter, died: make(chan struct{})}
}

func (c *crashStore) Checkpoint(ctx context.Context, req storage.CheckpointRequest) (storage.CheckpointResult, error) {
	if c.dead.Load() {
		return storage.CheckpointResult{}, errKilled
	}
	res, err := c.Store.Checkpoint(ctx, req)
	if err == nil && req.Checkpoint.Key == c.dieAfter && c.dead.CompareAndSwap(false, true) {
		close(c.died)
	}
	return res, err
}

func (c *crashStore) CreateRuns(ctx context.Context, runs []storage.NewRun) ([]storage.CreateResult, error) {
	if c.dead.Load() {
		return nil, errKilled
	}
	return c.Store.CreateRuns(ctx, runs)
}

func (c *crashStore) GetRun(ctx context.Context, id string) (storage.RunRecord, error) {
	if c.dead.Load() {
		return storage.RunRecord{}, errKilled
	}
	return c.Store.GetRun(ctx, id)
}

func (c *crashStore) Claim(ctx context.Context, req storage.ClaimRequest) ([]storage.ClaimedRun, error) {
	if c.dead.Load() {
		return nil, errKilled
	}
	return c.Store.Claim(ctx, req)
}

func (c *crashStore) NextWake(ctx context.Context, req storage.NextWakeRequest) (storage.NextWake, error) {
	if c.dead.Load() {
		return storage.NextWake{}, errKilled
	}
	return c.Store.NextWake(ctx, req)
}

func (c *crashStore) LoadReplay(ctx context.Context, id string) (storage.Replay, error) {
	if c.dead.Load() {
		return storage.Replay{}, errKilled
	}
	return c.Store.LoadReplay(ctx, id)
}

func (c *crashStore) RecordAttempts(ctx context.Context, req storage.RecordAttemptsRequest) error {
	if c.dead.Load() {
		return errKilled
	}
	return c.Store.RecordAttempts(ctx, req)
}

func (c *crashStore) Heartbeat(ctx context.Context, req storage.HeartbeatRequest) (storage.HeartbeatResult, error) {
	if c.dead.Load() {
		return storage.HeartbeatResult{}, errKilled
	}
	return c.Store.Heartbeat(ctx, req)
}

func (c *crashStore) Suspend(ctx context.Context, req storage.SuspendRequest) (storage.SuspendResult, error) {
	if c.dead.Load() {
		return storage.SuspendResult{}, errKilled
	}
	return c.Store.Suspend(ctx, req)
}

func (c *crashStore) Complete(ctx context.Context, req storage.CompleteRequest) error {
	if c.dead.Load() {
		return errKilled
	}
	return c.Store.Complete(ctx, req)
}

func (c *crashStore) ContinueAsNew(ctx context.Context, req storage.ContinueRequest) error {
	if c.dead.Load() {
		return errKilled
	}
	return c.Store.ContinueAsNew(ctx, req)
}

func (c *crashStore) Emit(ctx context.Context, req storage.EmitRequest) ([]string, error) {
	if c.dead.Load() {
		return nil, errKilled
	}
	return c.Store.Emit(ctx, req)
}

func (c *crashStore) SendEvent(ctx context.Context, ev storage.Event) (bool, error) {
	if c.dead.Load() {
		return false, errKilled
	}
	return c.Store.SendEvent(ctx, ev)
}

func (c *crashStore) PutWorker(ctx context.Context, req storage.PutWorkerRequest) error {
	if c.dead.Load() {
		return errKilled
	}
	return c.Store.PutWorker(ctx, req)
}

func (c *crashStore) RemoveWorker(ctx context.Context, id string) error {
	if c.dead.Load() {
		return errKilled
	}
	return c.Store.RemoveWorker(ctx, id)
}
