package stemtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/storage"
	"github.com/stemflow/stem/stores/memstore"
)

// CrashEveryStep tests what a durable workflow promises: that its worker
// may die at any step and the run still ends as it would have. It runs
// the workflow registered as workflow once with in, to learn its steps and
// its outcome; then, for each step, runs it again on a fresh store with the
// worker killed right after the step's checkpoint is written, and again
// with the worker killed right before, and lets a fresh engine resume the
// run (after the dead worker's lease expires, in virtual time). Each case
// is a subtest, named for the step and the moment; it fails when the
// resumed run's outcome differs, when its checkpoints differ from the
// first run's (a key missing, added or written twice), or when a step's
// idempotency key differs: what a workflow that is not deterministic, or
// a step that is not idempotent, shows after a crash.
//
// register registers the workflow (and any child workflows it calls);
// opts configure every engine (WithStore is ignored: each case needs its
// own fresh store). Generated test helpers call it with the workflow's
// types.
func CrashEveryStep[In any](t *testing.T, register func(e *runtime.Engine) error, workflow string, in In, opts ...Option) {
	t.Helper()
	base := runOnce(t, register, workflow, in, nil, opts)
	if base == nil {
		return
	}
	if len(base.steps) == 0 {
		t.Logf("stemtest: workflow %s ran no step: nothing to crash", workflow)
		return
	}
	for i, key := range base.steps {
		for _, before := range []bool{false, true} {
			moment := "after"
			if before {
				moment = "before"
			}
			t.Run(fmt.Sprintf("%s %s (step %d of %d)", moment, key, i+1, len(base.steps)), func(t *testing.T) {
				got := runOnce(t, register, workflow, in, &crashPoint{key: key, before: before}, opts)
				if got == nil {
					return
				}
				if diff := base.diff(got); diff != "" {
					t.Errorf("workflow %s, killed %s the checkpoint of step %s: %s", workflow, moment, key, diff)
				}
			})
		}
	}
}

// crashRunID is the ID of the run each case starts.
const crashRunID = "stemtest-crash"

// crashPoint says where to kill the worker: right before or right after
// the checkpoint of the step keyed key is written.
type crashPoint struct {
	key    string
	before bool
}

// outcome is what a run came to.
type outcome struct {
	output string
	err    string
	// steps are the keys of its step checkpoints, in the order written;
	// keys all its checkpoint keys, sorted, one per checkpoint.
	steps []string
	keys  []string
	// idem holds each step's idempotency key, by step key.
	idem map[string]string
}

// runOnce runs the workflow to its end, killing the worker at crash when
// given, and returns what the run came to; nil when the test failed.
func runOnce[In any](t *testing.T, register func(e *runtime.Engine) error, workflow string, in In, crash *crashPoint, opts []Option) *outcome {
	t.Helper()
	var cs *crashStore
	opts = append(slices.Clone(opts), WithStore(func(clock storage.Clock) storage.Store {
		cs = &crashStore{Store: memstore.New(memstore.Options{Clock: clock}), at: crash}
		return cs
	}))
	env := New(t, register, opts...)
	ctx := env.Context()
	if _, err := env.Engine.StartJSON(ctx, workflow, crashRunID, mustJSON(t, in)); err != nil {
		t.Fatalf("stemtest: starting %s: %v", workflow, err)
	}
	if env.opts.started != nil {
		env.opts.started(env, crashRunID)
	}
	type result struct {
		info runtime.RunInfo
		err  error
	}
	wait := func(e *runtime.Engine) <-chan result {
		ch := make(chan result, 1)
		go func() {
			info, err := e.Wait(ctx, crashRunID)
			ch <- result{info, err}
		}()
		return ch
	}
	ended := wait(env.Engine)
	if crash != nil {
		select {
		case <-cs.crashed():
		case r := <-ended:
			t.Errorf("stemtest: workflow %s ran otherwise than the first time, with the same input: it ended (%s) without reaching step %s, which the first run took", workflow, describe(r.info, r.err), crash.key)
			return nil
		case <-ctx.Done():
			t.Fatalf("stemtest: the run never reached the checkpoint of step %s", crash.key)
		}
		// The worker is dead; a fresh one, on the same store, resumes
		// the run once its lease expires.
		env.restart(cs.Store)
		ended = wait(env.Engine)
	}
	r := <-ended
	info, err := r.info, r.err
	if err != nil {
		t.Fatalf("stemtest: waiting for the run: %v", err)
	}
	o := &outcome{output: string(info.Output), idem: map[string]string{}}
	if info.Err != nil {
		o.err = info.Err.Error()
	}
	h, err := cs.Store.ListSteps(ctx, storage.StepsQuery{RunID: crashRunID})
	if err != nil {
		t.Fatalf("stemtest: listing the run's steps: %v", err)
	}
	for _, s := range h.Steps {
		o.keys = append(o.keys, s.Key)
		if s.Kind == storage.KindStep {
			o.steps = append(o.steps, s.Key)
			o.idem[s.Key] = runtime.IdempotencyKey(workflow, crashRunID, s.Key, "")
		}
	}
	slices.Sort(o.keys)
	return o
}

// diff says how got differs from the first run, or "".
func (base *outcome) diff(got *outcome) string {
	var d []string
	if got.output != base.output || got.err != base.err {
		d = append(d, fmt.Sprintf("the run ended with %s, not %s as without the crash", got.describe(), base.describe()))
	}
	for i := 1; i < len(got.keys); i++ {
		if got.keys[i] == got.keys[i-1] {
			d = append(d, fmt.Sprintf("key %s was checkpointed twice", got.keys[i]))
		}
	}
	if missing, extra := setDiff(base.keys, got.keys), setDiff(got.keys, base.keys); len(missing)+len(extra) > 0 {
		d = append(d, fmt.Sprintf("its checkpoints differ from the run without the crash: missing %v, new %v", missing, extra))
	}
	for k, want := range base.idem {
		if have, ok := got.idem[k]; ok && have != want {
			d = append(d, fmt.Sprintf("step %s saw idempotency key %s, not %s", k, have, want))
		}
	}
	return strings.Join(d, "; ")
}

// describe says how a run ended, as Wait returned it.
func describe(info runtime.RunInfo, err error) string {
	switch {
	case err != nil:
		return err.Error()
	case info.Err != nil:
		return "error " + info.Err.Error()
	}
	return "output " + string(info.Output)
}

func (o *outcome) describe() string {
	if o.err != "" {
		return "error " + o.err
	}
	return "output " + o.output
}

// setDiff returns the elements of a not in b.
func setDiff(a, b []string) []string {
	var out []string
	for _, x := range a {
		if !slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}

func mustJSON(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("stemtest: the input does not encode: %v", err)
	}
	return b
}

// restart stops the engine, as a killed worker stops, and starts a fresh
// one on st with the same workflows.
func (env *Env) restart(st storage.Store) {
	env.shutdown()
	env.mu.Lock()
	env.stopped = false
	env.mu.Unlock()
	e := env.newEngine(st)
	env.mu.Lock()
	env.Engine = e
	env.mu.Unlock()
}

// errCrashed is what a killed worker's store calls return.
var errCrashed = errors.New("stemtest: the worker was killed here")

// crashStore is the store as a worker that dies at a checkpoint sees it:
// from the crash on, every write fails and the worker writes nothing more.
type crashStore struct {
	storage.Store
	at   *crashPoint
	mu   sync.Mutex
	dead bool
	done chan struct{}
}

func (c *crashStore) crashed() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done == nil {
		c.done = make(chan struct{})
	}
	return c.done
}

func (c *crashStore) isDead() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dead
}

func (c *crashStore) die() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dead {
		return
	}
	c.dead = true
	if c.done == nil {
		c.done = make(chan struct{})
	}
	close(c.done)
}

// Checkpoint writes the checkpoint unless the worker is dead, and kills it
// at the crash point.
func (c *crashStore) Checkpoint(ctx context.Context, req storage.CheckpointRequest) (storage.CheckpointResult, error) {
	if c.isDead() {
		return storage.CheckpointResult{}, errCrashed
	}
	hit := c.at != nil && req.Checkpoint.Kind == storage.KindStep && req.Checkpoint.Key == c.at.key
	if hit && c.at.before {
		c.die()
		return storage.CheckpointResult{}, errCrashed
	}
	res, err := c.Store.Checkpoint(ctx, req)
	if hit && err == nil {
		c.die()
	}
	return res, err
}

// The other writes and claims of a dead worker fail.

func (c *crashStore) Claim(ctx context.Context, req storage.ClaimRequest) ([]storage.ClaimedRun, error) {
	if c.isDead() {
		return nil, errCrashed
	}
	return c.Store.Claim(ctx, req)
}

func (c *crashStore) RecordAttempts(ctx context.Context, req storage.RecordAttemptsRequest) error {
	if c.isDead() {
		return errCrashed
	}
	return c.Store.RecordAttempts(ctx, req)
}

func (c *crashStore) Heartbeat(ctx context.Context, req storage.HeartbeatRequest) (storage.HeartbeatResult, error) {
	if c.isDead() {
		return storage.HeartbeatResult{}, errCrashed
	}
	return c.Store.Heartbeat(ctx, req)
}

func (c *crashStore) Suspend(ctx context.Context, req storage.SuspendRequest) (storage.SuspendResult, error) {
	if c.isDead() {
		return storage.SuspendResult{}, errCrashed
	}
	return c.Store.Suspend(ctx, req)
}

func (c *crashStore) Complete(ctx context.Context, req storage.CompleteRequest) error {
	if c.isDead() {
		return errCrashed
	}
	return c.Store.Complete(ctx, req)
}

func (c *crashStore) ContinueAsNew(ctx context.Context, req storage.ContinueRequest) error {
	if c.isDead() {
		return errCrashed
	}
	return c.Store.ContinueAsNew(ctx, req)
}

func (c *crashStore) CreateRuns(ctx context.Context, runs []storage.NewRun) ([]storage.CreateResult, error) {
	if c.isDead() {
		return nil, errCrashed
	}
	return c.Store.CreateRuns(ctx, runs)
}

func (c *crashStore) Emit(ctx context.Context, req storage.EmitRequest) ([]string, error) {
	if c.isDead() {
		return nil, errCrashed
	}
	return c.Store.Emit(ctx, req)
}

func (c *crashStore) SendEvent(ctx context.Context, ev storage.Event) (bool, error) {
	if c.isDead() {
		return false, errCrashed
	}
	return c.Store.SendEvent(ctx, ev)
}
