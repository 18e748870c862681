package stemtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

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
// run at the same virtual instant (the dead worker's lease is handed back
// rather than left to expire, so a workflow reading ctx.Now reads what it
// read without the crash). Each case
// is a subtest, named for the step and the moment; it fails when the
// resumed run's outcome differs, when its checkpoints differ from the
// first run's (a key missing, added or written twice), when a step's
// idempotency key differs, or when a step's function ran more often than
// in the first run (once more is allowed for the step whose checkpoint the
// crash lost): what a workflow that is not deterministic, or a step that
// is not idempotent, shows after a crash. The first run fails it too when
// a step's function ran more often than its attempts were recorded: a
// step that ran where nothing could be written, such as one called from a
// defer as the run parked (the runtime refuses those; a workflow that
// recovers from that refusal would show it).
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
	if unrecorded := base.unrecorded(); unrecorded != "" {
		t.Errorf("workflow %s, without a crash: %s", workflow, unrecorded)
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
	// ran counts the runs of each step's function, by key, in every
	// process of the case; recorded the attempts the store holds.
	ran, recorded map[string]int
	// kept holds the keys checkpointed when the worker was killed.
	kept map[string]bool
}

// runOnce runs the workflow to its end, killing the worker at crash when
// given, and returns what the run came to; nil when the test failed.
func runOnce[In any](t *testing.T, register func(e *runtime.Engine) error, workflow string, in In, crash *crashPoint, opts []Option) *outcome {
	t.Helper()
	var cs *crashStore
	var ranMu sync.Mutex
	ran := map[string]int{}
	count := runtime.Hooks{Attempt: func(ctx context.Context, a *runtime.HookAttempt, next func(context.Context)) {
		if a.RunID == crashRunID {
			ranMu.Lock()
			ran[a.Key]++
			ranMu.Unlock()
		}
		next(ctx)
	}}
	opts = append(slices.Clone(opts), WithStore(func(clock storage.Clock) storage.Store {
		cs = &crashStore{Store: memstore.New(memstore.Options{Clock: clock}), at: crash}
		return cs
	}), func(o *options) { o.hooks = append(o.hooks, count) })
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
	var kept map[string]bool
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
		// the run. Its lease is handed back at once rather than left to
		// expire, so the crash costs no virtual time: the resumed run
		// reads the clock (ctx.Now) where the run without the crash did.
		h, err := cs.Store.ListSteps(ctx, storage.StepsQuery{RunID: crashRunID})
		if err != nil {
			t.Fatalf("stemtest: listing the run's steps at the crash: %v", err)
		}
		kept = map[string]bool{}
		for _, s := range h.Steps {
			kept[s.Key] = true
		}
		cs.release(ctx, env.Clock.Now())
		env.restart(cs.Store)
		ended = wait(env.Engine)
	}
	r := <-ended
	info, err := r.info, r.err
	if err != nil {
		t.Fatalf("stemtest: waiting for the run: %v", err)
	}
	o := &outcome{output: string(info.Output), idem: map[string]string{}, recorded: map[string]int{}, kept: kept}
	ranMu.Lock()
	o.ran = maps.Clone(ran)
	ranMu.Unlock()
	if info.Err != nil {
		o.err = info.Err.Error()
	}
	h, err := cs.Store.ListSteps(ctx, storage.StepsQuery{RunID: crashRunID})
	if err != nil {
		t.Fatalf("stemtest: listing the run's steps: %v", err)
	}
	for _, a := range h.Pending {
		o.recorded[a.Key]++
	}
	for _, s := range h.Steps {
		o.recorded[s.Key] += len(s.Attempts)
		o.keys = append(o.keys, s.Key)
		if s.Kind == storage.KindStep {
			o.steps = append(o.steps, s.Key)
			o.idem[s.Key] = runtime.IdempotencyKey(workflow, crashRunID, s.Key, "")
		}
	}
	slices.Sort(o.keys)
	return o
}

// unrecorded says which steps' functions ran more often than their
// attempts were recorded, or "".
func (o *outcome) unrecorded() string {
	var d []string
	for _, k := range slices.Sorted(maps.Keys(o.ran)) {
		if o.ran[k] > o.recorded[k] {
			d = append(d, fmt.Sprintf("step %s ran %d times but %d attempts were recorded: it ran where nothing could be written", k, o.ran[k], o.recorded[k]))
		}
	}
	return strings.Join(d, "; ")
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
	// A step checkpointed before the crash never runs again; one whose
	// attempt the crash cut short (or whose checkpoint it lost) runs once
	// more.
	for _, k := range slices.Sorted(maps.Keys(base.ran)) {
		allowed := base.ran[k]
		if !got.kept[k] {
			allowed++
		}
		if got.ran[k] > allowed {
			d = append(d, fmt.Sprintf("step %s ran %d times, %d without the crash", k, got.ran[k], base.ran[k]))
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
	env.swapping.Lock()
	defer env.swapping.Unlock()
	env.shutdown()
	env.mu.Lock()
	env.stopped = false
	env.mu.Unlock()
	e := env.newEngine(st)
	env.mu.Lock()
	env.Engine = e
	close(env.swapped)
	env.swapped = make(chan struct{})
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
	// held is the test run as the worker last claimed it: the lease the
	// dead worker holds, and the state its claim handed back.
	held *storage.ClaimedRun
}

// release hands the dead worker's lease on the test run back, ready now,
// with the state its claim had, as the lease's expiry would later.
func (c *crashStore) release(ctx context.Context, now time.Time) {
	c.mu.Lock()
	held := c.held
	c.mu.Unlock()
	if held == nil {
		return
	}
	// A lease already gone (the run parked or ended before the crash) has
	// nothing to hand back.
	_, _ = c.Store.Suspend(ctx, storage.SuspendRequest{Lease: held.Lease, ReadyAt: &now, SuspendState: held.SuspendState})
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
	runs, err := c.Store.Claim(ctx, req)
	for i := range runs {
		if runs[i].Lease.RunID == crashRunID {
			c.mu.Lock()
			c.held = &runs[i]
			c.mu.Unlock()
		}
	}
	return runs, err
}

// CreateRuns records the test run as held when it is created leased to
// the worker (an eager start), as Claim does when a claim takes it.
func (c *crashStore) CreateRuns(ctx context.Context, runs []storage.NewRun) ([]storage.CreateResult, error) {
	if c.isDead() {
		return nil, errCrashed
	}
	res, err := c.Store.CreateRuns(ctx, runs)
	for _, r := range res {
		if rec := r.Run; r.Created && rec.ID == crashRunID && rec.Status == storage.StatusRunning {
			c.mu.Lock()
			c.held = &storage.ClaimedRun{Lease: storage.Lease{RunID: rec.ID, Owner: rec.Owner, Token: rec.Token}}
			c.mu.Unlock()
		}
	}
	return res, err
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

func (c *crashStore) TakeEvent(ctx context.Context, req storage.TakeEventRequest) (*storage.Checkpoint, error) {
	if c.isDead() {
		return nil, errCrashed
	}
	return c.Store.TakeEvent(ctx, req)
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
