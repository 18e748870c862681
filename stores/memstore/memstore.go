// Package memstore is an in-memory storage.Store: for tests, examples and
// embedding where runs need not outlive the process.
//
// Every method is one critical section under a single mutex, so each is
// atomic with respect to all others. Byte slices are copied in and out:
// callers may reuse their buffers and may modify what they get back.
package memstore

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/stemflow/stem/storage"
)

// Options configures a Store. The zero value works.
type Options struct {
	// Clock is the store's clock: it judges lease expiry and readiness and
	// stamps records. Nil means the system clock. Tests substitute a manual
	// one.
	Clock storage.Clock
}

// Store is an in-memory storage.Store. It also implements
// storage.Notifier. Create one with New; it is safe for concurrent use.
type Store struct {
	mu     sync.Mutex
	now    func() time.Time
	closed bool

	runs map[string]*run
	// ids holds every run ID, sorted unless idsDirty.
	ids      []string
	idsDirty bool
	// queues indexes claimable runs per workflow.
	queues map[string]*queue
	// waits indexes registered event waits: topic, then run ID.
	waits map[string]map[string]*run
	subs  []*subscriber
}

var (
	_ storage.Store    = (*Store)(nil)
	_ storage.Notifier = (*Store)(nil)
)

var errClosed = fmt.Errorf("memstore: %w", storage.ErrClosed)

// New returns an empty store.
func New(opts Options) *Store {
	return &Store{
		now:    storage.ClockOr(opts.Clock).Now,
		runs:   make(map[string]*run),
		queues: make(map[string]*queue),
		waits:  make(map[string]map[string]*run),
	}
}

// run is one run's state. rec owns its slices and pointers: they are never
// shared with callers and never modified in place once set.
type run struct {
	rec   storage.RunRecord
	state []byte // SuspendState
	cps   []storage.Checkpoint
	// cpIndex maps keys to positions in cps once the run has many.
	cpIndex  map[string]int
	attempts []storage.Attempt
	events   []bufferedEvent
	seq      int64
	// readyGen identifies the run's current entry in its queue's ready heap.
	readyGen uint64
	queue    *queue
}

type bufferedEvent struct {
	topic   string
	payload []byte
}

// indexFrom is the checkpoint count from which lookups use cpIndex.
const indexFrom = 16

func (r *run) find(key string) (int, bool) {
	if r.cpIndex != nil {
		i, ok := r.cpIndex[key]
		return i, ok
	}
	for i := range r.cps {
		if r.cps[i].Key == key {
			return i, true
		}
	}
	return 0, false
}

// write appends a checkpoint whose Output the run already owns.
func (r *run) write(key string, kind storage.CheckpointKind, output []byte, errInfo *storage.ErrorInfo, now time.Time) int {
	r.seq++
	r.cps = append(r.cps, storage.Checkpoint{
		Key:       key,
		Kind:      kind,
		Output:    output,
		Error:     cloneError(errInfo),
		Seq:       r.seq,
		CreatedAt: now,
	})
	i := len(r.cps) - 1
	switch {
	case r.cpIndex != nil:
		r.cpIndex[key] = i
	case len(r.cps) >= indexFrom:
		r.cpIndex = make(map[string]int, 2*len(r.cps))
		for j := range r.cps {
			r.cpIndex[r.cps[j].Key] = j
		}
	}
	r.rec.Recoveries = 0
	return i
}

// release ends the current lease; Owner and Token keep describing it.
func (r *run) release(now time.Time) {
	if r.rec.LeaseUntil.After(now) {
		r.rec.LeaseUntil = now
	}
}

func (r *run) readyStatus() bool {
	return r.rec.Status == storage.StatusQueued || r.rec.Status == storage.StatusWaiting
}

func (s *Store) clock() time.Time { return s.now().Round(0) }

// lock takes the mutex unless ctx is done or the store closed.
func (s *Store) lock(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memstore: %w", err)
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return errClosed
	}
	return nil
}

// leased returns the run the lease still holds, or nil.
func (s *Store) leased(l storage.Lease) *run {
	r := s.runs[l.RunID]
	if r == nil || r.rec.Status != storage.StatusRunning || r.rec.Token != l.Token {
		return nil
	}
	return r
}

func leaseLost(op string, l storage.Lease) error {
	return fmt.Errorf("memstore: %s run %q token %d: %w", op, l.RunID, l.Token, storage.ErrLeaseLost)
}

func notFound(op, id string) error {
	return fmt.Errorf("memstore: %s run %q: %w", op, id, storage.ErrRunNotFound)
}

func invalidState(op string, r *run) error {
	return fmt.Errorf("memstore: %s run %q in status %s: %w", op, r.rec.ID, r.rec.Status, storage.ErrInvalidState)
}

func invalidArg(format string, args ...any) error {
	return fmt.Errorf("memstore: "+format+": %w", append(args, storage.ErrInvalidArgument)...)
}

// CreateRuns inserts runs; an existing ID is left untouched and reported
// with Created false.
func (s *Store) CreateRuns(ctx context.Context, runs []storage.NewRun) ([]storage.CreateResult, error) {
	for i := range runs {
		if runs[i].ID == "" || runs[i].Workflow == "" {
			return nil, invalidArg("create run %d: empty ID or workflow", i)
		}
	}
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	now := s.clock()
	out := make([]storage.CreateResult, len(runs))
	created := false
	for i := range runs {
		nr := &runs[i]
		if r := s.runs[nr.ID]; r != nil {
			out[i] = storage.CreateResult{Run: r.record()}
			continue
		}
		q := s.queues[nr.Workflow]
		if q == nil {
			q = &queue{}
			s.queues[nr.Workflow] = q
		}
		q.runs++
		readyAt := now
		r := &run{
			rec: storage.RunRecord{
				ID:        nr.ID,
				Workflow:  nr.Workflow,
				ParentID:  nr.ParentID,
				Status:    storage.StatusQueued,
				Input:     clone(nr.Input),
				ReadyAt:   &readyAt,
				CreatedAt: now,
				UpdatedAt: now,
			},
			queue: q,
		}
		s.runs[nr.ID] = r
		if n := len(s.ids); n > 0 && s.ids[n-1] > nr.ID {
			s.idsDirty = true
		}
		s.ids = append(s.ids, nr.ID)
		s.schedule(r)
		out[i] = storage.CreateResult{Created: true, Run: r.record()}
		created = true
	}
	if created {
		s.signal()
	}
	return out, nil
}

// GetRun returns a run's record, or ErrRunNotFound.
func (s *Store) GetRun(ctx context.Context, id string) (storage.RunRecord, error) {
	if err := s.lock(ctx); err != nil {
		return storage.RunRecord{}, err
	}
	defer s.mu.Unlock()
	r := s.runs[id]
	if r == nil {
		return storage.RunRecord{}, notFound("get", id)
	}
	return r.record(), nil
}

// ListRuns returns runs ordered by ID ascending, filtered by the query.
func (s *Store) ListRuns(ctx context.Context, q storage.ListRunsQuery) (storage.RunPage, error) {
	limit := q.Limit
	if limit <= 0 {
		limit = 100
	}
	if err := s.lock(ctx); err != nil {
		return storage.RunPage{}, err
	}
	defer s.mu.Unlock()
	if s.idsDirty {
		slices.Sort(s.ids)
		s.idsDirty = false
	}
	start := sort.SearchStrings(s.ids, q.After)
	if start < len(s.ids) && s.ids[start] == q.After {
		start++
	}
	var page storage.RunPage
	for _, id := range s.ids[start:] {
		r := s.runs[id]
		if (q.Workflow != "" && r.rec.Workflow != q.Workflow) || (q.Status != "" && r.rec.Status != q.Status) {
			continue
		}
		if len(page.Runs) == limit {
			page.Next = page.Runs[limit-1].ID
			break
		}
		page.Runs = append(page.Runs, r.record())
	}
	return page, nil
}

// Claim leases up to req.Limit ready runs of req.Workflows, oldest ReadyAt
// (or lease expiry) first.
func (s *Store) Claim(ctx context.Context, req storage.ClaimRequest) ([]storage.ClaimedRun, error) {
	if req.Owner == "" || req.LeaseFor <= 0 {
		return nil, invalidArg("claim: empty owner or lease length %v", req.LeaseFor)
	}
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	now := s.clock()
	nowNano := now.UnixNano()
	var out []storage.ClaimedRun
	for len(out) < req.Limit {
		var best *entryHeap
		leases := false
		for _, wf := range req.Workflows {
			q := s.queues[wf]
			if q == nil {
				continue
			}
			if len(q.ready) > 0 && q.ready[0].at <= nowNano && (best == nil || q.ready[0].at < (*best)[0].at) {
				best, leases = &q.ready, false
			}
			if len(q.leases) > 0 && q.leases[0].at <= nowNano && (best == nil || q.leases[0].at < (*best)[0].at) {
				best, leases = &q.leases, true
			}
		}
		if best == nil {
			break
		}
		e := best.pop()
		r := e.r
		recovered := false
		if leases {
			if r.rec.Status != storage.StatusRunning || r.rec.Token != int64(e.gen) {
				continue // a lease that has ended
			}
			if until := r.rec.LeaseUntil.UnixNano(); until > nowNano {
				r.queue.pushLease(entry{at: until, gen: e.gen, r: r})
				continue // extended since the entry was pushed
			}
			recovered = true
		} else {
			if e.gen != r.readyGen || !r.readyStatus() || r.rec.ReadyAt == nil {
				continue // superseded
			}
			if at := r.rec.ReadyAt.UnixNano(); at > nowNano {
				r.readyGen++
				r.queue.pushReady(entry{at: at, gen: r.readyGen, r: r})
				continue
			}
		}
		if out == nil {
			out = make([]storage.ClaimedRun, 0, min(req.Limit, 16))
		}
		out = append(out, s.claim(r, req, now, recovered))
	}
	return out, nil
}

func (s *Store) claim(r *run, req storage.ClaimRequest, now time.Time, recovered bool) storage.ClaimedRun {
	rec := &r.rec
	rec.Status = storage.StatusRunning
	rec.ReadyAt = nil
	rec.Owner = req.Owner
	rec.LeaseUntil = now.Add(req.LeaseFor)
	rec.Token++
	if recovered {
		rec.Recoveries++
	}
	rec.UpdatedAt = now
	r.queue.pushLease(entry{at: rec.LeaseUntil.UnixNano(), gen: uint64(rec.Token), r: r})
	return storage.ClaimedRun{
		Lease:        storage.Lease{RunID: rec.ID, Owner: rec.Owner, Token: rec.Token},
		Workflow:     rec.Workflow,
		ParentID:     rec.ParentID,
		Input:        clone(rec.Input),
		Recoveries:   rec.Recoveries,
		SuspendState: clone(r.state),
		Wait:         cloneWait(rec.Wait),
		LeaseUntil:   rec.LeaseUntil,
	}
}

// LoadCheckpoints returns every checkpoint of a run, in sequence order.
func (s *Store) LoadCheckpoints(ctx context.Context, runID string) ([]storage.Checkpoint, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	r := s.runs[runID]
	if r == nil {
		return nil, notFound("load checkpoints of", runID)
	}
	if len(r.cps) == 0 {
		return nil, nil
	}
	out := make([]storage.Checkpoint, len(r.cps))
	n := 0
	for i := range r.cps {
		n += len(r.cps[i].Output)
	}
	// One buffer for every output; each slice is capped so that appending
	// to one never overwrites the next.
	buf := make([]byte, 0, n)
	for i := range r.cps {
		out[i] = r.cps[i]
		if o := r.cps[i].Output; o != nil {
			start := len(buf)
			buf = append(buf, o...)
			out[i].Output = buf[start:len(buf):len(buf)]
		}
		out[i].Error = cloneError(r.cps[i].Error)
	}
	return out, nil
}

// Checkpoint records a step's result under the lease, fenced.
func (s *Store) Checkpoint(ctx context.Context, req storage.CheckpointRequest) (storage.CheckpointResult, error) {
	if req.Checkpoint.Key == "" || req.LeaseFor <= 0 {
		return storage.CheckpointResult{}, invalidArg("checkpoint: empty key or lease length %v", req.LeaseFor)
	}
	if err := s.lock(ctx); err != nil {
		return storage.CheckpointResult{}, err
	}
	defer s.mu.Unlock()
	r := s.leased(req.Lease)
	if r == nil {
		return storage.CheckpointResult{}, leaseLost("checkpoint", req.Lease)
	}
	now := s.clock()
	rec := &r.rec
	rec.LeaseUntil = now.Add(req.LeaseFor)
	rec.UpdatedAt = now
	cp := &req.Checkpoint
	if i, ok := r.find(cp.Key); ok {
		existing := cloneCheckpoint(r.cps[i])
		return storage.CheckpointResult{Existing: &existing}, nil
	}
	r.write(cp.Key, cp.Kind, clone(cp.Output), cp.Error, now)
	r.attempts = append(r.attempts, req.Attempts...)
	if rec.Wait != nil && rec.Wait.Key == cp.Key {
		s.clearWait(r)
	}
	if !rec.PauseRequested {
		return storage.CheckpointResult{}, nil
	}
	rec.PauseRequested = false
	rec.Status = storage.StatusPaused
	readyAt := now
	rec.ReadyAt = &readyAt
	r.release(now)
	s.schedule(r)
	return storage.CheckpointResult{Paused: true}, nil
}

// RecordAttempts appends attempts under the lease, fenced, and extends it.
func (s *Store) RecordAttempts(ctx context.Context, req storage.RecordAttemptsRequest) error {
	lease, leaseFor, attempts := req.Lease, req.LeaseFor, req.Attempts
	if leaseFor <= 0 {
		return invalidArg("record attempts: lease length %v", leaseFor)
	}
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	r := s.leased(lease)
	if r == nil {
		return leaseLost("record attempts of", lease)
	}
	now := s.clock()
	r.rec.LeaseUntil = now.Add(leaseFor)
	r.rec.UpdatedAt = now
	r.attempts = append(r.attempts, attempts...)
	return nil
}

// Heartbeat extends the lease, fenced.
func (s *Store) Heartbeat(ctx context.Context, req storage.HeartbeatRequest) error {
	lease, leaseFor := req.Lease, req.LeaseFor
	if leaseFor <= 0 {
		return invalidArg("heartbeat: lease length %v", leaseFor)
	}
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	r := s.leased(lease)
	if r == nil {
		return leaseLost("heartbeat", lease)
	}
	now := s.clock()
	r.rec.LeaseUntil = now.Add(leaseFor)
	r.rec.UpdatedAt = now
	return nil
}

// Suspend parks a running run, fenced, unless its wait is satisfied at once.
func (s *Store) Suspend(ctx context.Context, req storage.SuspendRequest) (storage.SuspendResult, error) {
	if req.Checkpoint != nil && req.Checkpoint.Key == "" {
		return storage.SuspendResult{}, invalidArg("suspend: empty checkpoint key")
	}
	if w := req.Wait; w != nil && (w.Key == "" || w.Topic == "") {
		return storage.SuspendResult{}, invalidArg("suspend: wait with empty key or topic")
	}
	if err := s.lock(ctx); err != nil {
		return storage.SuspendResult{}, err
	}
	defer s.mu.Unlock()
	r := s.leased(req.Lease)
	if r == nil {
		return storage.SuspendResult{}, leaseLost("suspend", req.Lease)
	}
	now := s.clock()
	rec := &r.rec
	rec.UpdatedAt = now
	if cp := req.Checkpoint; cp != nil {
		if _, ok := r.find(cp.Key); !ok {
			r.write(cp.Key, cp.Kind, clone(cp.Output), cp.Error, now)
		}
	}
	if w := req.Wait; w != nil {
		i, ok := r.find(w.Key)
		if !ok {
			if j := r.buffered(w.Topic); j >= 0 {
				payload := r.events[j].payload
				r.events = slices.Delete(r.events, j, j+1)
				i, ok = r.write(w.Key, kindOf(w), payload, nil, now), true
			}
		}
		if ok {
			if req.LeaseFor > 0 {
				rec.LeaseUntil = now.Add(req.LeaseFor)
			}
			delivered := cloneCheckpoint(r.cps[i])
			return storage.SuspendResult{Delivered: &delivered}, nil
		}
		s.setWait(r, w)
	}
	r.state = clone(req.SuspendState)
	rec.ReadyAt = cloneTime(req.ReadyAt)
	r.release(now)
	var res storage.SuspendResult
	switch {
	case rec.PauseRequested:
		rec.PauseRequested = false
		rec.Status = storage.StatusPaused
		res.Paused = true
	case rec.ReadyAt != nil && !rec.ReadyAt.After(now):
		rec.Status = storage.StatusQueued
		s.signal()
	default:
		rec.Status = storage.StatusWaiting
	}
	s.schedule(r)
	return res, nil
}

// Complete finishes a run, fenced, and delivers req.Notify when set.
func (s *Store) Complete(ctx context.Context, req storage.CompleteRequest) error {
	if req.Status != storage.StatusComplete && req.Status != storage.StatusErrored {
		return invalidArg("complete: status %q", req.Status)
	}
	if n := req.Notify; n != nil && (n.RunID == "" || n.Topic == "") {
		return invalidArg("complete: notify with empty run ID or topic")
	}
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	r := s.leased(req.Lease)
	if r == nil {
		return leaseLost("complete", req.Lease)
	}
	now := s.clock()
	s.finish(r, req.Status, clone(req.Output), cloneError(req.Error), now)
	if req.Notify != nil {
		s.notify(req.Notify, now)
	}
	return nil
}

// finish makes r final, clearing its lease, wait and suspension data.
func (s *Store) finish(r *run, status storage.RunStatus, output []byte, errInfo *storage.ErrorInfo, now time.Time) {
	rec := &r.rec
	rec.Status = status
	rec.Output = output
	rec.Error = errInfo
	rec.PauseRequested = false
	rec.ReadyAt = nil
	rec.UpdatedAt = now
	r.release(now)
	s.clearWait(r)
	r.state = nil
}

// notify delivers a finishing run's event. A target that does not exist or
// has finished cannot take it, and the event is dropped: a child's
// completion must not fail because its parent is gone.
func (s *Store) notify(ev *storage.Event, now time.Time) {
	t := s.runs[ev.RunID]
	if t == nil || t.rec.Status.Finished() {
		return
	}
	s.send(t, ev.Topic, clone(ev.Payload), now)
}

// Pause pauses a run, or requests a running run's pause.
func (s *Store) Pause(ctx context.Context, runID string) error {
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	r := s.runs[runID]
	if r == nil {
		return notFound("pause", runID)
	}
	rec := &r.rec
	switch rec.Status {
	case storage.StatusPaused:
		return nil
	case storage.StatusRunning:
		if rec.PauseRequested {
			return nil
		}
		rec.PauseRequested = true
	case storage.StatusQueued, storage.StatusWaiting:
		rec.Status = storage.StatusPaused
	default:
		return invalidState("pause", r)
	}
	rec.UpdatedAt = s.clock()
	return nil
}

// Resume undoes Pause.
func (s *Store) Resume(ctx context.Context, runID string) error {
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	r := s.runs[runID]
	if r == nil {
		return notFound("resume", runID)
	}
	rec := &r.rec
	now := s.clock()
	switch {
	case rec.Status == storage.StatusPaused:
		if rec.ReadyAt != nil && !rec.ReadyAt.After(now) {
			rec.Status = storage.StatusQueued
			s.signal()
		} else {
			rec.Status = storage.StatusWaiting
		}
		s.schedule(r)
	case rec.Status == storage.StatusRunning && rec.PauseRequested:
		rec.PauseRequested = false
	default:
		return invalidState("resume", r)
	}
	rec.UpdatedAt = now
	return nil
}

// Terminate ends an unfinished run and delivers req.Notify when set.
func (s *Store) Terminate(ctx context.Context, req storage.TerminateRequest) error {
	if n := req.Notify; n != nil && (n.RunID == "" || n.Topic == "") {
		return invalidArg("terminate: notify with empty run ID or topic")
	}
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	r := s.runs[req.RunID]
	if r == nil {
		return notFound("terminate", req.RunID)
	}
	if r.rec.Status.Finished() {
		return invalidState("terminate", r)
	}
	now := s.clock()
	errInfo := req.Error
	s.finish(r, storage.StatusTerminated, nil, &errInfo, now)
	if req.Notify != nil {
		s.notify(req.Notify, now)
	}
	return nil
}

// Restart drops a run's progress and queues it to run again from the top.
func (s *Store) Restart(ctx context.Context, runID string) error {
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	r := s.runs[runID]
	if r == nil {
		return notFound("restart", runID)
	}
	now := s.clock()
	rec := &r.rec
	r.release(now)
	s.clearWait(r)
	r.cps, r.cpIndex, r.attempts, r.state = nil, nil, nil, nil
	rec.Status = storage.StatusQueued
	rec.Output, rec.Error = nil, nil
	rec.PauseRequested = false
	rec.Recoveries = 0
	readyAt := now
	rec.ReadyAt = &readyAt
	rec.UpdatedAt = now
	s.schedule(r)
	s.signal()
	return nil
}

// Emit delivers an event to every run waiting on the topic.
func (s *Store) Emit(ctx context.Context, req storage.EmitRequest) ([]string, error) {
	topic, payload := req.Topic, req.Payload
	if topic == "" {
		return nil, invalidArg("emit: empty topic")
	}
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	waiting := s.waits[topic]
	if len(waiting) == 0 {
		return nil, nil
	}
	now := s.clock()
	ids := make([]string, 0, len(waiting))
	for id := range waiting {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		s.deliver(s.runs[id], clone(payload), now)
	}
	return ids, nil
}

// SendEvent delivers an event to one run, or buffers it for the run.
func (s *Store) SendEvent(ctx context.Context, ev storage.Event) (bool, error) {
	if ev.Topic == "" {
		return false, invalidArg("send event: empty topic")
	}
	if err := s.lock(ctx); err != nil {
		return false, err
	}
	defer s.mu.Unlock()
	r := s.runs[ev.RunID]
	if r == nil {
		return false, notFound("send event to", ev.RunID)
	}
	if r.rec.Status.Finished() {
		return false, invalidState("send event to", r)
	}
	return s.send(r, ev.Topic, clone(ev.Payload), s.clock()), nil
}

// send delivers payload (owned) to r if it waits on topic, or buffers it.
func (s *Store) send(r *run, topic string, payload []byte, now time.Time) bool {
	if w := r.rec.Wait; w != nil && w.Topic == topic {
		s.deliver(r, payload, now)
		return true
	}
	r.events = append(r.events, bufferedEvent{topic: topic, payload: payload})
	return false
}

// deliver writes payload (owned) as the checkpoint of r's wait, removes the
// wait and makes a waiting run ready now.
func (s *Store) deliver(r *run, payload []byte, now time.Time) {
	rec := &r.rec
	w := rec.Wait
	s.clearWait(r)
	if _, ok := r.find(w.Key); !ok {
		r.write(w.Key, kindOf(w), payload, nil, now)
	}
	rec.UpdatedAt = now
	switch rec.Status {
	case storage.StatusWaiting, storage.StatusQueued:
		rec.Status = storage.StatusQueued
		if rec.ReadyAt == nil || rec.ReadyAt.After(now) {
			readyAt := now
			rec.ReadyAt = &readyAt
			s.schedule(r)
		}
		s.signal()
	case storage.StatusPaused:
		readyAt := now
		rec.ReadyAt = &readyAt
	}
}

func kindOf(w *storage.Wait) storage.CheckpointKind {
	if w.Kind == "" {
		return storage.KindEvent
	}
	return w.Kind
}

// buffered returns the index of r's oldest buffered event of topic, or -1.
func (r *run) buffered(topic string) int {
	for i := range r.events {
		if r.events[i].topic == topic {
			return i
		}
	}
	return -1
}

func (s *Store) setWait(r *run, w *storage.Wait) {
	s.clearWait(r)
	r.rec.Wait = cloneWait(w)
	m := s.waits[w.Topic]
	if m == nil {
		m = make(map[string]*run)
		s.waits[w.Topic] = m
	}
	m[r.rec.ID] = r
}

func (s *Store) clearWait(r *run) {
	w := r.rec.Wait
	if w == nil {
		return
	}
	r.rec.Wait = nil
	if m := s.waits[w.Topic]; m != nil {
		delete(m, r.rec.ID)
		if len(m) == 0 {
			delete(s.waits, w.Topic)
		}
	}
}

// ListSteps returns a run's checkpoints in sequence order with their
// attempts.
func (s *Store) ListSteps(ctx context.Context, runID string) ([]storage.StepRecord, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	r := s.runs[runID]
	if r == nil {
		return nil, notFound("list steps of", runID)
	}
	if len(r.cps) == 0 {
		return nil, nil
	}
	var byKey map[string][]storage.Attempt
	if len(r.attempts) > 0 {
		byKey = make(map[string][]storage.Attempt)
		for _, a := range r.attempts {
			byKey[a.Key] = append(byKey[a.Key], a)
		}
	}
	out := make([]storage.StepRecord, len(r.cps))
	for i := range r.cps {
		out[i] = storage.StepRecord{Checkpoint: cloneCheckpoint(r.cps[i]), Attempts: byKey[r.cps[i].Key]}
	}
	return out, nil
}

// Close releases the store's memory and closes notification channels.
// Calls after Close return ErrClosed.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errClosed
	}
	s.closed = true
	for _, sub := range s.subs {
		sub.stop()
		close(sub.ch)
	}
	s.subs = nil
	s.runs, s.ids, s.queues, s.waits = nil, nil, nil, nil
	return nil
}

// record returns a copy of the run's record that shares nothing with r.
func (r *run) record() storage.RunRecord {
	rec := r.rec
	rec.Input = clone(rec.Input)
	rec.Output = clone(rec.Output)
	rec.Error = cloneError(rec.Error)
	rec.ReadyAt = cloneTime(rec.ReadyAt)
	rec.Wait = cloneWait(rec.Wait)
	return rec
}

func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append(make([]byte, 0, len(b)), b...)
}

func cloneError(e *storage.ErrorInfo) *storage.ErrorInfo {
	if e == nil {
		return nil
	}
	c := *e
	return &c
}

func cloneTime(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	c := *t
	return &c
}

func cloneWait(w *storage.Wait) *storage.Wait {
	if w == nil {
		return nil
	}
	c := *w
	c.Deadline = cloneTime(w.Deadline)
	return &c
}

func cloneCheckpoint(cp storage.Checkpoint) storage.Checkpoint {
	cp.Output = clone(cp.Output)
	cp.Error = cloneError(cp.Error)
	return cp
}
