// Package storetest is the conformance suite every storage.Store runs
// unchanged. Each rule of the contract in package storage has its own
// subtest, run in parallel on a fresh store with its own manual clock.
//
// A store's test calls Run with a Factory:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T, clock storage.Clock) storage.Store {
//			return memstore.New(memstore.Options{Clock: clock})
//		})
//	}
//
// The suite uses only the Store interface, so stores backed by real servers
// run it as they are.
//
// The cases live in files named like the stores' own: runs.go (create, get,
// list, parents), lease.go (claim, leases, active step, suspend, complete),
// checkpoint.go (write once, order, attempts, pending attempts, sleep),
// events.go (delivery, refusals), control.go (pause, terminate with its
// descendants, the descendants a completion terminates, restart and their
// races), executions.go (executions,
// restart from a step), catalog.go and catalogtimeout.go (a workflow's
// timeout= in the catalog) and inputs.go (malformed requests,
// unknown runs, Close), so a rule and the code that must honour it share a
// file name; cancel.go holds what a heartbeat tells a lease holder and the
// restart that waits for it to let go (lease.go and control.go in stores);
// names.go holds the rules for names, IDs, keys and topics, which every
// request's Validate applies; autoversion.go the keys of an autoversion
// step's iterations (#1 is not a prefix of #10, #10 follows #2); wake.go
// NextWake, which the stores answer in lease.go beside Claim; finished.go
// the announcements of storage.FinishNotifier (notify.go in stores);
// waitcases.go the waits with several cases (events.go in stores); and
// continue.go continue-as-new (executions.go), progress (checkpoint.go and
// lease.go) and deadlines (runs.go); queues.go the queues a claim takes
// from, with their priorities and limits, and QueueStats (queue.go and
// lease.go in stores); schedules.go the schedule records; purge.go the
// deletion of finished runs; versions.go the workflow version a run
// records and the claims, wake times and listings that filter by it
// (runs.go and lease.go in stores); workers.go the records engines keep of
// themselves, the headers a run carries to its claims (runs.go and
// lease.go) and the age of a queue's oldest ready run (queue.go);
// takeevent.go TakeEvent, the delivery of a wait's case without parking
// (lease.go in stores, beside Suspend, whose delivery it shares);
// invisible.go the names refused for an invisible character (a
// bidirectional override, a zero-width space), which names.go's rules
// apply; eager.go the runs created already leased (runs.go and lease.go
// in stores) and the completions that ride with a checkpoint
// (checkpoint.go); start.go the policies of a create whose ID has a run
// (return, refuse, replace), the event a create delivers
// (signal-with-start) and the start keys (singletons, debounce windows),
// all judged in CreateRuns (runs.go); starttx.go the writes a
// storage.TxStore makes in the application's transaction and its
// transactional steps (CheckpointTx), which Run registers only for a store
// that implements storage.TxStore; interact.go the updates sent to runs,
// their replies and the runs' streams (storage.Interactor: interact.go,
// checkpoint.go and purge.go in stores), with the replies and streams of
// a storage.TxStore's transactional steps, registered only for one.
package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stemflow/stem/storage"
)

// Factory returns a fresh, empty store whose clock (lease expiry, readiness,
// timestamps) is clock. Run closes the store when the subtest ends.
type Factory func(t *testing.T, clock storage.Clock) storage.Store

// Start is the time at which every subtest's clock starts: a whole second,
// so that stores keeping millisecond precision store it exactly.
var Start = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// Clock is a manual storage.Clock, safe for concurrent use: what Run hands
// to a Factory, and what stores' own tests use.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock returns a clock reading t.
func NewClock(t time.Time) *Clock { return &Clock{t: t} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// Set sets the clock to t.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

type testCase struct {
	name string
	run  func(f *fixture)
}

// Run runs the conformance suite against the stores newStore returns.
func Run(t *testing.T, newStore Factory) {
	t.Helper()
	var all []testCase
	all = append(all, runCases...)
	all = append(all, claimCases...)
	all = append(all, checkpointCases...)
	all = append(all, eventCases...)
	all = append(all, controlCases...)
	all = append(all, inputCases...)
	all = append(all, executionCases...)
	all = append(all, catalogCases...)
	all = append(all, catalogTimeoutCases...)
	all = append(all, cancelCases...)
	all = append(all, cancelRunCases...)
	all = append(all, nameCases...)
	all = append(all, autoversionCases...)
	all = append(all, wakeCases...)
	all = append(all, finishedCases...)
	all = append(all, waitCaseCases...)
	all = append(all, takeEventCases...)
	all = append(all, continueCases...)
	all = append(all, queueCases...)
	all = append(all, scheduleCases...)
	all = append(all, purgeCases...)
	all = append(all, versionCases...)
	all = append(all, workerCases...)
	all = append(all, workerKeyCases...)
	all = append(all, listingCases...)
	all = append(all, holdCases...)
	all = append(all, invisibleCases...)
	all = append(all, eagerCases...)
	all = append(all, startCases...)
	all = append(all, interactCases...)
	all = append(all, attrCases...)
	// One store, made and closed at once, says what they all implement.
	s := sample(t, newStore)
	if _, ok := s.(storage.TxStore); ok {
		all = append(all, startTxCases...)
		all = append(all, interactTxCases...)
	}
	lacks := lacking(s)
	_ = s.Close()
	all = withFeatures(all, lacks)
	for _, c := range all {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.run(newFixture(t, newStore))
		})
	}
}

// The defaults the cases use.
const (
	wf    = "wf"
	lease = time.Minute
)

type fixture struct {
	t     *testing.T
	ctx   context.Context
	store storage.Store
	clock *Clock
}

func newFixture(t *testing.T, newStore Factory) *fixture {
	clock := NewClock(Start)
	s := newStore(t, clock)
	if s == nil {
		t.Fatal("factory returned a nil store")
	}
	// A case that tests Close has closed the store already; a second Close
	// may then report ErrClosed.
	t.Cleanup(func() { _ = s.Close() })
	return &fixture{t: t, ctx: t.Context(), store: s, clock: clock}
}

func (f *fixture) now() time.Time { return f.clock.Now() }

// after returns a pointer to now+d.
func (f *fixture) after(d time.Duration) *time.Time {
	t := f.now().Add(d)
	return &t
}

func (f *fixture) create(id, workflow, input string) storage.RunRecord {
	f.t.Helper()
	res, err := f.store.CreateRuns(f.ctx, []storage.NewRun{{ID: id, Workflow: workflow, Input: []byte(input)}})
	if err != nil {
		f.t.Fatalf("CreateRuns(%s): %v", id, err)
	}
	if len(res) != 1 || !res[0].Created {
		f.t.Fatalf("CreateRuns(%s) = %+v, want one created run", id, res)
	}
	return res[0].Run
}

// createRun creates one run as given.
func (f *fixture) createRun(r storage.NewRun) storage.RunRecord {
	f.t.Helper()
	res, err := f.store.CreateRuns(f.ctx, []storage.NewRun{r})
	if err != nil {
		f.t.Fatalf("CreateRuns(%s): %v", r.ID, err)
	}
	if len(res) != 1 || !res[0].Created {
		f.t.Fatalf("CreateRuns(%s) = %+v, want one created run", r.ID, res)
	}
	return res[0].Run
}

// startAs creates a run of its own workflow (named after the run) and
// claims it as worker-a.
func (f *fixture) startAs(r storage.NewRun) storage.ClaimedRun {
	f.t.Helper()
	if r.Workflow == "" {
		r.Workflow = "wf-" + r.ID
	}
	f.createRun(r)
	c := f.claimOne("worker-a", r.Workflow)
	if c.Lease.RunID != r.ID {
		f.t.Fatalf("claimed %s, want %s", c.Lease.RunID, r.ID)
	}
	return c
}

func (f *fixture) claim(owner string, limit int, workflows ...string) []storage.ClaimedRun {
	f.t.Helper()
	return f.claimFrom(owner, limit, nil, workflows...)
}

// claimFrom claims from the queues named (none: the default queue) with
// their limits.
func (f *fixture) claimFrom(owner string, limit int, queues []storage.Queue, workflows ...string) []storage.ClaimedRun {
	f.t.Helper()
	return f.claimVersions(owner, limit, queues, nil, workflows...)
}

// claimVersions claims from the queues named with their limits, only the
// runs whose version versions allows (ClaimRequest.Versions).
func (f *fixture) claimVersions(owner string, limit int, queues []storage.Queue, versions map[string][]int, workflows ...string) []storage.ClaimedRun {
	f.t.Helper()
	if len(workflows) == 0 {
		workflows = []string{wf}
	}
	got, err := f.store.Claim(f.ctx, storage.ClaimRequest{Owner: owner, Workflows: workflows, Limit: limit, LeaseFor: lease, Queues: queues, Versions: versions})
	if err != nil {
		f.t.Fatalf("Claim(%s, queues %v, versions %v): %v", owner, queues, versions, err)
	}
	f.wantClaimedReplays(got)
	return got
}

// wantClaimedReplays checks that each replay a claim brought is what
// LoadReplay answers now, nothing having happened since: every case that
// claims through the fixture checks it, whatever history its runs have.
func (f *fixture) wantClaimedReplays(claimed []storage.ClaimedRun) {
	f.t.Helper()
	for _, c := range claimed {
		if c.Replay == nil {
			continue
		}
		if want := f.replay(c.Lease.RunID); !reflect.DeepEqual(*c.Replay, want) {
			f.t.Fatalf("the claim of %s brought the replay\n%+v\nwant LoadReplay's\n%+v", c.Lease.RunID, *c.Replay, want)
		}
	}
}

func (f *fixture) claimOne(owner string, workflows ...string) storage.ClaimedRun {
	f.t.Helper()
	got := f.claim(owner, 10, workflows...)
	if len(got) != 1 {
		f.t.Fatalf("Claim(%s) leased %d runs %v, want 1", owner, len(got), claimedIDs(got))
	}
	return got[0]
}

func (f *fixture) claimNone(workflows ...string) {
	f.t.Helper()
	if got := f.claim("worker-idle", 10, workflows...); len(got) != 0 {
		f.t.Fatalf("Claim leased %v, want nothing", claimedIDs(got))
	}
}

// start creates a run of wf and claims it as worker-a.
func (f *fixture) start(id, input string) storage.ClaimedRun {
	f.t.Helper()
	f.create(id, wf, input)
	c := f.claimOne("worker-a")
	if c.Lease.RunID != id {
		f.t.Fatalf("claimed %s, want %s", c.Lease.RunID, id)
	}
	return c
}

func (f *fixture) get(id string) storage.RunRecord {
	f.t.Helper()
	rec, err := f.store.GetRun(f.ctx, id)
	if err != nil {
		f.t.Fatalf("GetRun(%s): %v", id, err)
	}
	return rec
}

func (f *fixture) wantStatus(id string, want storage.RunStatus) storage.RunRecord {
	f.t.Helper()
	rec := f.get(id)
	if rec.Status != want {
		f.t.Fatalf("run %s status %s, want %s", id, rec.Status, want)
	}
	return rec
}

func (f *fixture) checkpoint(l storage.Lease, key, output string) storage.CheckpointResult {
	f.t.Helper()
	res, err := f.store.Checkpoint(f.ctx, stepReq(l, key, output))
	if err != nil {
		f.t.Fatalf("Checkpoint(%s, %s): %v", l.RunID, key, err)
	}
	return res
}

func stepReq(l storage.Lease, key, output string) storage.CheckpointRequest {
	return storage.CheckpointRequest{
		Lease:      l,
		LeaseFor:   lease,
		Checkpoint: storage.Checkpoint{Key: key, Kind: storage.KindStep, Output: []byte(output)},
	}
}

func (f *fixture) suspend(req storage.SuspendRequest) storage.SuspendResult {
	f.t.Helper()
	if req.LeaseFor == 0 {
		req.LeaseFor = lease
	}
	res, err := f.store.Suspend(f.ctx, req)
	if err != nil {
		f.t.Fatalf("Suspend(%s): %v", req.Lease.RunID, err)
	}
	return res
}

// park registers an event wait on topic under key and parks the run.
func (f *fixture) park(l storage.Lease, key, topic string, kind storage.CheckpointKind) {
	f.t.Helper()
	res := f.suspend(storage.SuspendRequest{Lease: l, Wait: &storage.Wait{Key: key, Topic: topic, Kind: kind}})
	if res.Delivered != nil || res.Paused {
		f.t.Fatalf("Suspend(%s) = %+v, want parked", l.RunID, res)
	}
}

func (f *fixture) checkpoints(id string) []storage.Checkpoint {
	f.t.Helper()
	return f.replay(id).Checkpoints
}

func (f *fixture) steps(id string) []storage.StepRecord {
	f.t.Helper()
	return f.history(id, 0).Steps
}

// replay is LoadReplay of the run.
func (f *fixture) replay(id string) storage.Replay {
	f.t.Helper()
	r, err := f.store.LoadReplay(f.ctx, id)
	if err != nil {
		f.t.Fatalf("LoadReplay(%s): %v", id, err)
	}
	return r
}

// history is ListSteps of one execution of the run (0: the current one).
func (f *fixture) history(id string, execution int) storage.History {
	f.t.Helper()
	h, err := f.store.ListSteps(f.ctx, storage.StepsQuery{RunID: id, Execution: execution})
	if err != nil {
		f.t.Fatalf("ListSteps(%s, execution %d): %v", id, execution, err)
	}
	return h
}

func (f *fixture) executions(id string) []storage.ExecutionRecord {
	f.t.Helper()
	execs, err := f.store.ListExecutions(f.ctx, id)
	if err != nil {
		f.t.Fatalf("ListExecutions(%s): %v", id, err)
	}
	return execs
}

func (f *fixture) catalog() storage.Catalog {
	f.t.Helper()
	c, err := f.store.GetCatalog(f.ctx)
	if err != nil {
		f.t.Fatalf("GetCatalog: %v", err)
	}
	return c
}

func (f *fixture) restart(id, fromKey string) {
	f.t.Helper()
	if err := f.store.Restart(f.ctx, storage.RestartRequest{RunID: id, FromKey: fromKey}); err != nil {
		f.t.Fatalf("Restart(%s, from %q): %v", id, fromKey, err)
	}
}

// terminate terminates a run and returns the IDs terminated.
func (f *fixture) terminate(req storage.TerminateRequest) []string {
	f.t.Helper()
	ids, err := f.store.Terminate(f.ctx, req)
	if err != nil {
		f.t.Fatalf("Terminate(%s): %v", req.RunID, err)
	}
	return ids
}

// wantAttempts compares attempts field by field, times to the millisecond,
// Execution included.
func (f *fixture) wantAttempts(what string, got, want []storage.Attempt) {
	f.t.Helper()
	if !reflect.DeepEqual(normAttempts(got), normAttempts(want)) {
		f.t.Fatalf("%s = %+v, want %+v", what, got, want)
	}
}

// wantExecutions compares a run's executions with want, times to the
// millisecond.
func (f *fixture) wantExecutions(id string, want ...storage.ExecutionRecord) {
	f.t.Helper()
	got := f.executions(id)
	for i := range got {
		got[i] = normExecution(got[i])
	}
	for i := range want {
		want[i] = normExecution(want[i])
	}
	if !reflect.DeepEqual(got, want) {
		f.t.Fatalf("executions of %s =\n%s\nwant\n%s", id, fmtExecutions(got), fmtExecutions(want))
	}
}

func fmtExecutions(es []storage.ExecutionRecord) string {
	var b strings.Builder
	for _, e := range es {
		ended := "nil"
		if e.EndedAt != nil {
			ended = e.EndedAt.Format(time.RFC3339Nano)
		}
		fmt.Fprintf(&b, "  #%d started %s ended %s status %s error %+v forked from %d at %q\n",
			e.Number, e.StartedAt.Format(time.RFC3339Nano), ended, e.Status, e.Error, e.ForkedFrom, e.FromKey)
	}
	return b.String()
}

// timePtr returns a pointer to t.
func timePtr(t time.Time) *time.Time { return &t }

// wantCheckpoints checks a run's checkpoints: their keys and outputs, in
// order, as key=output pairs.
func (f *fixture) wantCheckpoints(id string, want ...string) []storage.Checkpoint {
	f.t.Helper()
	cps := f.checkpoints(id)
	got := make([]string, len(cps))
	for i, cp := range cps {
		got[i] = cp.Key + "=" + string(cp.Output)
	}
	if !slices.Equal(got, want) {
		f.t.Fatalf("checkpoints of %s = %q, want %q", id, got, want)
	}
	return cps
}

func (f *fixture) send(id, topic, payload string) bool {
	f.t.Helper()
	delivered, err := f.store.SendEvent(f.ctx, storage.Event{RunID: id, Topic: topic, Payload: []byte(payload)})
	if err != nil {
		f.t.Fatalf("SendEvent(%s, %s): %v", id, topic, err)
	}
	return delivered
}

func (f *fixture) emit(topic, payload string) []string {
	f.t.Helper()
	ids, err := f.store.Emit(f.ctx, storage.EmitRequest{Topic: topic, Payload: []byte(payload)})
	if err != nil {
		f.t.Fatalf("Emit(%s): %v", topic, err)
	}
	slices.Sort(ids)
	return ids
}

func (f *fixture) complete(l storage.Lease, output string) {
	f.t.Helper()
	err := f.store.Complete(f.ctx, storage.CompleteRequest{Lease: l, Status: storage.StatusComplete, Output: []byte(output)})
	if err != nil {
		f.t.Fatalf("Complete(%s): %v", l.RunID, err)
	}
}

// snapshot is everything a store holds, as the contract shows it: the
// runs, each run's executions and every execution's steps and pending
// attempts, the catalog and the schedules.
type snapshot struct {
	Runs       []storage.RunRecord
	Executions map[string][]storage.ExecutionRecord
	// Histories holds each run's executions' steps, oldest first.
	Histories map[string][]storage.History
	Catalog   storage.Catalog
	Schedules []storage.Schedule
}

func (f *fixture) snapshot() snapshot {
	f.t.Helper()
	snap := snapshot{Executions: map[string][]storage.ExecutionRecord{}, Histories: map[string][]storage.History{}}
	for _, rec := range f.listAll(storage.ListRunsQuery{Limit: 50}) {
		snap.Runs = append(snap.Runs, normRecord(rec))
		execs := f.executions(rec.ID)
		for i := range execs {
			execs[i] = normExecution(execs[i])
		}
		snap.Executions[rec.ID] = execs
		for n := 1; n <= rec.Execution; n++ {
			snap.Histories[rec.ID] = append(snap.Histories[rec.ID], normHistory(f.history(rec.ID, n)))
		}
	}
	snap.Catalog = normCatalog(f.catalog())
	for _, sc := range f.allSchedules() {
		snap.Schedules = append(snap.Schedules, normSchedule(sc))
	}
	return snap
}

// wantUnchanged fails when the store holds anything other than before.
func (f *fixture) wantUnchanged(before snapshot, what string) {
	f.t.Helper()
	if after := f.snapshot(); !reflect.DeepEqual(before, after) {
		f.t.Fatalf("%s changed the store:\nbefore %+v\nafter  %+v", what, before, after)
	}
}

// listAll pages through ListRuns.
func (f *fixture) listAll(q storage.ListRunsQuery) []storage.RunRecord {
	f.t.Helper()
	var all []storage.RunRecord
	for range 10000 {
		page, err := f.store.ListRuns(f.ctx, q)
		if err != nil {
			f.t.Fatalf("ListRuns(%+v): %v", q, err)
		}
		all = append(all, page.Runs...)
		if page.Next == "" {
			return all
		}
		if len(page.Runs) == 0 {
			f.t.Fatalf("ListRuns(%+v) returned an empty page with Next %q", q, page.Next)
		}
		q.After = page.Next
	}
	f.t.Fatal("ListRuns never reached the end")
	return nil
}

func (f *fixture) wantErr(err, target error, what string) {
	f.t.Helper()
	if !errors.Is(err, target) {
		f.t.Fatalf("%s: error %v, want %v", what, err, target)
	}
}

func (f *fixture) wantTime(what string, got, want time.Time) {
	f.t.Helper()
	if !ms(got).Equal(ms(want)) {
		f.t.Fatalf("%s = %v, want %v", what, got, want)
	}
}

func (f *fixture) wantTimePtr(what string, got *time.Time, want time.Time) {
	f.t.Helper()
	if got == nil {
		f.t.Fatalf("%s = nil, want %v", what, want)
	}
	f.wantTime(what, *got, want)
}

func (f *fixture) wantBytes(what string, got []byte, want string) {
	f.t.Helper()
	if !bytes.Equal(got, []byte(want)) {
		f.t.Fatalf("%s = %q, want %q", what, got, want)
	}
}

// wantLeaseUntil checks that the run's lease now expires at want.
func (f *fixture) wantLeaseUntil(id string, want time.Time) {
	f.t.Helper()
	f.wantTime("LeaseUntil of "+id, f.get(id).LeaseUntil, want)
}

// ms truncates a time to the millisecond every store keeps, in UTC.
func ms(t time.Time) time.Time { return t.UTC().Truncate(time.Millisecond) }

func normBytes(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return b
}

func normRecord(r storage.RunRecord) storage.RunRecord {
	r.Input, r.Output = normBytes(r.Input), normBytes(r.Output)
	if len(r.Headers) == 0 {
		r.Headers = nil
	}
	r.LeaseUntil, r.CreatedAt, r.UpdatedAt = ms(r.LeaseUntil), ms(r.CreatedAt), ms(r.UpdatedAt)
	r.StartedAt, r.EndedAt = ms(r.StartedAt), msPtr(r.EndedAt)
	if r.Active != nil {
		a := *r.Active
		a.Started = ms(a.Started)
		r.Active = &a
	}
	if r.ReadyAt != nil {
		t := ms(*r.ReadyAt)
		r.ReadyAt = &t
	}
	if r.Wait != nil {
		w := *r.Wait
		w.Deadline = msPtr(w.Deadline)
		if len(w.Also) == 0 {
			w.Also = nil
		}
		r.Wait = &w
	}
	r.Deadline = msPtr(r.Deadline)
	r.Progress = normBytes(r.Progress)
	r.Attributes = storage.NormalizeAttrs(r.Attributes)
	return r
}

func normCheckpoint(cp storage.Checkpoint) storage.Checkpoint {
	cp.Output = normBytes(cp.Output)
	cp.Input = normBytes(cp.Input)
	cp.CreatedAt = ms(cp.CreatedAt)
	return cp
}

func msPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	m := ms(*t)
	return &m
}

func normAttempts(as []storage.Attempt) []storage.Attempt {
	if len(as) == 0 {
		return nil
	}
	out := make([]storage.Attempt, len(as))
	for i, a := range as {
		a.Started, a.Ended, a.RetryAt = ms(a.Started), ms(a.Ended), msPtr(a.RetryAt)
		out[i] = a
	}
	return out
}

func normHistory(h storage.History) storage.History {
	if len(h.Steps) == 0 {
		h.Steps = nil
	}
	for i := range h.Steps {
		h.Steps[i].Checkpoint = normCheckpoint(h.Steps[i].Checkpoint)
		h.Steps[i].Attempts = normAttempts(h.Steps[i].Attempts)
	}
	h.Pending = normAttempts(h.Pending)
	return h
}

func normExecution(e storage.ExecutionRecord) storage.ExecutionRecord {
	e.StartedAt, e.EndedAt = ms(e.StartedAt), msPtr(e.EndedAt)
	return e
}

func normCatalog(c storage.Catalog) storage.Catalog {
	if len(c.Workflows) == 0 {
		c.Workflows = nil
	}
	if len(c.Events) == 0 {
		c.Events = nil
	}
	if len(c.Queues) == 0 {
		c.Queues = nil
	}
	for i := range c.Queues {
		c.Queues[i].UpdatedAt = ms(c.Queues[i].UpdatedAt)
	}
	for i := range c.Workflows {
		w := &c.Workflows[i]
		w.InputSchema, w.OutputSchema = normBytes(w.InputSchema), normBytes(w.OutputSchema)
		w.UpdatedAt = ms(w.UpdatedAt)
	}
	for i := range c.Events {
		e := &c.Events[i]
		e.PayloadSchema = normBytes(e.PayloadSchema)
		e.UpdatedAt = ms(e.UpdatedAt)
	}
	return c
}

func claimedIDs(runs []storage.ClaimedRun) []string {
	ids := make([]string, len(runs))
	for i, r := range runs {
		ids[i] = r.Lease.RunID
	}
	return ids
}

func recordIDs(runs []storage.RunRecord) []string {
	ids := make([]string, len(runs))
	for i, r := range runs {
		ids[i] = r.ID
	}
	return ids
}

func runID(i int) string { return fmt.Sprintf("run-%03d", i) }
