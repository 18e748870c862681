// Package enginetest runs engines against a store: the scenarios where the
// runtime and a store must agree for a guarantee to hold end to end —
// children and restarts, retry budgets across hand-overs, history across
// executions, refused event payloads, timers and heartbeats. Every store's
// tests call Run with a factory of fresh stores, so each scenario holds on
// every store, not only the one the runtime's own tests use.
package enginetest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/storage"
)

// Factory returns a fresh, empty store on the system clock. Run closes it
// when the scenario ends.
type Factory func(t *testing.T) storage.Store

type scenario struct {
	name string
	run  func(f *fixture)
}

// Run runs every scenario, in parallel, each on a fresh store.
func Run(t *testing.T, newStore Factory) {
	t.Helper()
	var all []scenario
	all = append(all, childScenarios...)
	all = append(all, attemptScenarios...)
	all = append(all, historyScenarios...)
	all = append(all, eventScenarios...)
	all = append(all, timeScenarios...)
	all = append(all, codecScenarios...)
	all = append(all, sealedKeyScenarios...)
	all = append(all, cancelScenarios...)
	all = append(all, futureScenarios...)
	all = append(all, productionScenarios...)
	all = append(all, versionScenarios...)
	all = append(all, observeScenarios...)
	all = append(all, deferScenarios...)
	all = append(all, deployScenarios...)
	all = append(all, loopScenarios...)
	all = append(all, backoffScenarios...)
	all = append(all, determScenarios...)
	all = append(all, faninScenarios...)
	all = append(all, errorScenarios...)
	all = append(all, cancelFutureScenarios...)
	all = append(all, eventWinsScenarios...)
	all = append(all, runCancelScenarios...)
	all = append(all, continueChildScenarios...)
	all = append(all, eagerScenarios...)
	all = append(all, startScenarios...)
	all = append(all, interactScenarios...)
	all = append(all, attrScenarios...)
	all = append(all, bulkScenarios...)
	all = withFeatures(t, all, newStore)
	for _, s := range all {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			st := newStore(t)
			t.Cleanup(func() { _ = st.Close() })
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			t.Cleanup(cancel)
			s.run(&fixture{t: t, ctx: ctx, store: st})
		})
	}
}

type fixture struct {
	t     *testing.T
	ctx   context.Context
	store storage.Store
}

// config is an engine's configuration in a scenario.
type config struct {
	lease   time.Duration
	workers int
	// store wraps the fixture's store when set (a dying worker's view).
	store storage.Store
	hooks []runtime.Hooks
	// workerTTL is Config.WorkerTTL (0: the default).
	workerTTL time.Duration
	// holdRetry is Config.HoldRetry (0: 100ms, so a scenario's fixed
	// build takes a held run at once).
	holdRetry time.Duration
	// parkAfter is Config.ParkRetriesAfter (0: the default).
	parkAfter time.Duration
}

// engine returns an engine on the fixture's store with register's
// workflows, not running yet.
func (f *fixture) engine(c config, register func(e *runtime.Engine)) *runtime.Engine {
	f.t.Helper()
	if c.lease == 0 {
		c.lease = 5 * time.Second
	}
	if c.workers == 0 {
		c.workers = 8
	}
	if c.holdRetry == 0 {
		c.holdRetry = 100 * time.Millisecond
	}
	st := c.store
	if st == nil {
		st = f.store
	}
	e, err := runtime.New(runtime.Config{
		Store: st, Workers: c.workers, LeaseDuration: c.lease,
		PollInterval: 10 * time.Millisecond, ShutdownGrace: 50 * time.Millisecond,
		Hooks: c.hooks, WorkerTTL: c.workerTTL, HoldRetry: c.holdRetry,
		ParkRetriesAfter: c.parkAfter,
	})
	if err != nil {
		f.t.Fatal(err)
	}
	register(e)
	return e
}

// start runs e until the scenario ends or stop is called.
func (f *fixture) start(e *runtime.Engine) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := e.Run(ctx); err != nil {
			f.t.Errorf("Run: %v", err)
		}
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			<-done
		})
	}
	f.t.Cleanup(stop)
	return stop
}

func (f *fixture) must(err error) {
	f.t.Helper()
	if err != nil {
		f.t.Fatal(err)
	}
}

// eventually polls cond until it holds or the scenario's patience runs out.
func (f *fixture) eventually(what string, cond func() bool) {
	f.t.Helper()
	for !cond() {
		if f.ctx.Err() != nil {
			f.t.Fatalf("never happened: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (f *fixture) info(e *runtime.Engine, id string) runtime.RunInfo {
	f.t.Helper()
	info, err := e.Get(f.ctx, id)
	f.must(err)
	return info
}

func (f *fixture) waitStatus(e *runtime.Engine, id string, want runtime.RunStatus) runtime.RunInfo {
	f.t.Helper()
	var info runtime.RunInfo
	f.eventually("run "+id+" is "+string(want), func() bool {
		got, err := e.Get(f.ctx, id)
		if errors.Is(err, runtime.ErrRunNotFound) {
			return false // not created yet (a child its parent is about to start)
		}
		f.must(err)
		info = got
		return info.Status == want
	})
	return info
}

func (f *fixture) steps(e *runtime.Engine, id string, execution int) []runtime.StepInfo {
	f.t.Helper()
	steps, err := e.ListSteps(f.ctx, id, execution)
	f.must(err)
	return steps
}

func findStep(steps []runtime.StepInfo, key string) *runtime.StepInfo {
	for i := range steps {
		if steps[i].Key == key {
			return &steps[i]
		}
	}
	return nil
}

// errDead is what a dead worker's store calls return.
var errDead = errors.New("enginetest: this worker's process died")

// dyingStore is one worker's view of the store that dies on demand: after
// kill, every call it makes fails, as if its process had crashed, and its
// lease is left to expire.
type dyingStore struct {
	storage.Store
	dead atomic.Bool
	// afterAttempts kills the worker once it has recorded this many failed
	// attempts (0: never by itself).
	afterAttempts int32
	recorded      atomic.Int32
	// suspends counts the worker's Suspend calls.
	suspends atomic.Int32
	// killAfter, when set, kills the worker once a checkpoint it wrote
	// landed and killAfter says so: the write is stored, and the process
	// dies before it hears back.
	killAfter func(storage.CheckpointRequest) bool
}

func (d *dyingStore) check() error {
	if d.dead.Load() {
		return errDead
	}
	return nil
}

func (d *dyingStore) Claim(ctx context.Context, req storage.ClaimRequest) ([]storage.ClaimedRun, error) {
	if err := d.check(); err != nil {
		return nil, err
	}
	return d.Store.Claim(ctx, req)
}

func (d *dyingStore) LoadReplay(ctx context.Context, id string) (storage.Replay, error) {
	if err := d.check(); err != nil {
		return storage.Replay{}, err
	}
	return d.Store.LoadReplay(ctx, id)
}

func (d *dyingStore) ContinueAsNew(ctx context.Context, req storage.ContinueRequest) error {
	if err := d.check(); err != nil {
		return err
	}
	return d.Store.ContinueAsNew(ctx, req)
}

func (d *dyingStore) Checkpoint(ctx context.Context, req storage.CheckpointRequest) (storage.CheckpointResult, error) {
	if err := d.check(); err != nil {
		return storage.CheckpointResult{}, err
	}
	res, err := d.Store.Checkpoint(ctx, req)
	if err == nil && d.killAfter != nil && d.killAfter(req) {
		d.dead.Store(true)
		return storage.CheckpointResult{}, errDead
	}
	return res, err
}

func (d *dyingStore) RecordAttempts(ctx context.Context, req storage.RecordAttemptsRequest) error {
	if err := d.check(); err != nil {
		return err
	}
	err := d.Store.RecordAttempts(ctx, req)
	if err == nil && d.afterAttempts > 0 && d.recorded.Add(int32(len(req.Attempts))) >= d.afterAttempts {
		// The write landed; the process died before it heard back.
		d.dead.Store(true)
		return errDead
	}
	return err
}

func (d *dyingStore) Heartbeat(ctx context.Context, req storage.HeartbeatRequest) (storage.HeartbeatResult, error) {
	if err := d.check(); err != nil {
		return storage.HeartbeatResult{}, err
	}
	return d.Store.Heartbeat(ctx, req)
}

func (d *dyingStore) Suspend(ctx context.Context, req storage.SuspendRequest) (storage.SuspendResult, error) {
	if err := d.check(); err != nil {
		return storage.SuspendResult{}, err
	}
	d.suspends.Add(1)
	return d.Store.Suspend(ctx, req)
}

func (d *dyingStore) TakeEvent(ctx context.Context, req storage.TakeEventRequest) (*storage.Checkpoint, error) {
	if err := d.check(); err != nil {
		return nil, err
	}
	return d.Store.TakeEvent(ctx, req)
}

func (d *dyingStore) Complete(ctx context.Context, req storage.CompleteRequest) error {
	if err := d.check(); err != nil {
		return err
	}
	return d.Store.Complete(ctx, req)
}

func (d *dyingStore) PutWorker(ctx context.Context, req storage.PutWorkerRequest) error {
	if err := d.check(); err != nil {
		return err
	}
	return d.Store.PutWorker(ctx, req)
}

func (d *dyingStore) RemoveWorker(ctx context.Context, id string) error {
	if err := d.check(); err != nil {
		return err
	}
	return d.Store.RemoveWorker(ctx, id)
}
