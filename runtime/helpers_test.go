package runtime_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stemflow/stem/storage"

	"go.uber.org/goleak"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/stores/memstore"
	"github.com/stemflow/stem/stores/storetest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// errKilled is what a killed worker's store calls return: a dead process
// writes nothing.
var errKilled = errors.New("worker killed")

// probeStore wraps a real store to observe an engine's calls and to simulate
// the death of the worker process that uses it: once killed, every call
// fails and nothing more reaches the store.
type probeStore struct {
	storage.Store
	dead     atomic.Bool
	claims   atomic.Int64
	suspends atomic.Int64

	mu          sync.Mutex
	checkpoints []checkpointCall
}

type checkpointCall struct {
	key string
	err error
}

func (p *probeStore) kill() { p.dead.Store(true) }

func (p *probeStore) Claim(ctx context.Context, req storage.ClaimRequest) ([]storage.ClaimedRun, error) {
	if p.dead.Load() {
		return nil, errKilled
	}
	p.claims.Add(1)
	return p.Store.Claim(ctx, req)
}

func (p *probeStore) Checkpoint(ctx context.Context, req storage.CheckpointRequest) (storage.CheckpointResult, error) {
	if p.dead.Load() {
		return storage.CheckpointResult{}, errKilled
	}
	res, err := p.Store.Checkpoint(ctx, req)
	p.mu.Lock()
	p.checkpoints = append(p.checkpoints, checkpointCall{req.Checkpoint.Key, err})
	p.mu.Unlock()
	return res, err
}

func (p *probeStore) checkpointCalls() []checkpointCall {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]checkpointCall(nil), p.checkpoints...)
}

func (p *probeStore) Suspend(ctx context.Context, req storage.SuspendRequest) (storage.SuspendResult, error) {
	if p.dead.Load() {
		return storage.SuspendResult{}, errKilled
	}
	res, err := p.Store.Suspend(ctx, req)
	if err == nil && res.Delivered == nil && (req.Checkpoint != nil || req.Wait != nil) {
		p.suspends.Add(1)
	}
	return res, err
}

func (p *probeStore) Heartbeat(ctx context.Context, req storage.HeartbeatRequest) (storage.HeartbeatResult, error) {
	if p.dead.Load() {
		return storage.HeartbeatResult{}, errKilled
	}
	return p.Store.Heartbeat(ctx, req)
}

func (p *probeStore) RecordAttempts(ctx context.Context, req storage.RecordAttemptsRequest) error {
	if p.dead.Load() {
		return errKilled
	}
	return p.Store.RecordAttempts(ctx, req)
}

func (p *probeStore) Complete(ctx context.Context, req storage.CompleteRequest) error {
	if p.dead.Load() {
		return errKilled
	}
	return p.Store.Complete(ctx, req)
}

func (p *probeStore) CreateRuns(ctx context.Context, runs []storage.NewRun) ([]storage.CreateResult, error) {
	if p.dead.Load() {
		return nil, errKilled
	}
	return p.Store.CreateRuns(ctx, runs)
}

func (p *probeStore) LoadReplay(ctx context.Context, id string) (storage.Replay, error) {
	if p.dead.Load() {
		return storage.Replay{}, errKilled
	}
	return p.Store.LoadReplay(ctx, id)
}

// fixture is a store shared by the engines of one test.
type fixture struct {
	t     *testing.T
	store storage.Store
	clock storage.Clock
}

func setup(t *testing.T) *fixture {
	t.Helper()
	st := memstore.New(memstore.Options{})
	t.Cleanup(func() { st.Close() })
	return &fixture{t: t, store: st}
}

func setupClock(t *testing.T) (*fixture, *storetest.Clock) {
	t.Helper()
	clock := storetest.NewClock(storetest.Start)
	st := memstore.New(memstore.Options{Clock: clock})
	t.Cleanup(func() { st.Close() })
	return &fixture{t: t, store: st, clock: clock}, clock
}

// engine returns an engine on the fixture's store (through a probe), with
// quick polling and the given lease. register adds its workflows. It is not
// running; call start.
func (f *fixture) engine(lease time.Duration, register func(e *runtime.Engine)) (*runtime.Engine, *probeStore) {
	f.t.Helper()
	probe := &probeStore{Store: f.store}
	e, err := runtime.New(runtime.Config{
		Store:         probe,
		Workers:       8,
		LeaseDuration: lease,
		PollInterval:  5 * time.Millisecond,
		Clock:         f.clock,
		ShutdownGrace: 50 * time.Millisecond,
	})
	if err != nil {
		f.t.Fatal(err)
	}
	register(e)
	return e, probe
}

// start runs the engine until the test ends (or stop is called).
func start(t *testing.T, e *runtime.Engine) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := e.Run(ctx); err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			<-done
		})
	}
	t.Cleanup(stop)
	return stop
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func waitCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// eventually polls cond until it holds or the test's patience runs out.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("never happened: %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func status(t *testing.T, e *runtime.Engine, id string) runtime.RunStatus {
	t.Helper()
	info, err := e.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return info.Status
}

// mustGet returns a typed handle on run id of workflow name through engine e.
func mustGet[Out any](t *testing.T, e *runtime.Engine, name, id string) *runtime.Run[Out] {
	t.Helper()
	r, err := runtime.Get[Out](waitCtx(t), e, name, id)
	must(t, err)
	return r
}

func (p *probeStore) PutWorker(ctx context.Context, req storage.PutWorkerRequest) error {
	if p.dead.Load() {
		return errKilled
	}
	return p.Store.PutWorker(ctx, req)
}

func (p *probeStore) RemoveWorker(ctx context.Context, id string) error {
	if p.dead.Load() {
		return errKilled
	}
	return p.Store.RemoveWorker(ctx, id)
}
