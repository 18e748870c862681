// Package memstore is an in-memory storage.Store: for tests, examples and
// embedding where runs need not outlive the process.
//
// Every method is one critical section under a single mutex, so each is
// atomic with respect to all others. Byte slices are copied in and out:
// callers may reuse their buffers and may modify what they get back.
//
// The files follow the layout every store shares: runs.go creates and reads
// runs, start.go judges a create's start policies, event and key (and
// replaces a run), lease.go takes, keeps, parks and ends leases, checkpoint.go writes and
// lists checkpoints, events.go delivers events, control.go pauses, resumes,
// terminates and restarts, executions.go keeps and lists a run's
// executions, catalog.go records what workers serve, notify.go hands out
// wake-up hints, queue.go is the claim index and the queues' counts,
// schedule.go keeps schedules, purge.go deletes finished runs,
// workers.go keeps the records engines keep of themselves and interact.go
// keeps the updates sent to runs and the runs' streams (whose replies and
// values checkpoint.go writes).
package memstore

import (
	"context"
	"fmt"
	"maps"
	"slices"
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
	// queues holds each queue's claim index, per workflow, and counts.
	queues map[string]*queueState
	// waits indexes registered event waits: topic, then run ID.
	waits map[string]map[string]*run
	// children indexes child runs by parent ID, in creation order.
	children map[string][]*run
	// keys holds the run each start key was last taken by (start.go); it
	// holds the key only while it is still s.runs' run of its ID.
	keys map[startKey]*run
	// retired holds the lease tokens of runs a replacement deleted (the
	// replaced run and its descendants, those ever claimed), by ID: the
	// next run made under the ID goes on from its token and drops the
	// entry (start.go), so that a late holder of the deleted run's lease
	// never matches a lease of the new one. An entry stays until a run
	// takes its ID again.
	retired map[string]int64
	// workflows and eventTypes are the catalog, by name and by topic.
	workflows  map[string]storage.WorkflowType
	eventTypes map[string]storage.EventType
	queueTypes map[string]storage.QueueType
	// schedules holds the schedules by ID; scheduleIDs their IDs, sorted.
	schedules   map[string]*storage.Schedule
	scheduleIDs []string
	// hub fans out the hints of Notifications.
	hub storage.Hub
	// workers holds the workers' records by ID (workers.go).
	workers map[string]storage.Worker
}

var (
	_ storage.Store          = (*Store)(nil)
	_ storage.Notifier       = (*Store)(nil)
	_ storage.FinishNotifier = (*Store)(nil)
)

var errClosed = fmt.Errorf("memstore: %w", storage.ErrClosed)

// New returns an empty store.
func New(opts Options) *Store {
	return &Store{
		now:    storage.ClockOr(opts.Clock).Now,
		runs:   make(map[string]*run),
		queues: make(map[string]*queueState),
		waits:  make(map[string]map[string]*run),

		children:   make(map[string][]*run),
		keys:       make(map[startKey]*run),
		retired:    make(map[string]int64),
		workflows:  make(map[string]storage.WorkflowType),
		eventTypes: make(map[string]storage.EventType),
		queueTypes: make(map[string]storage.QueueType),
		schedules:  make(map[string]*storage.Schedule),
		workers:    make(map[string]storage.Worker),
	}
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
	s.hub.Close()
	s.runs, s.ids, s.queues, s.waits, s.children, s.keys, s.retired = nil, nil, nil, nil, nil, nil, nil
	s.workflows, s.eventTypes, s.queueTypes = nil, nil, nil
	s.schedules, s.scheduleIDs, s.workers = nil, nil, nil
	return nil
}

// run is one run's state. rec owns its slices and pointers: they are never
// shared with callers and never modified in place once set.
type run struct {
	rec   storage.RunRecord
	state []byte // SuspendState
	// cps and attempts are the current execution's (rec.Execution).
	cps []storage.Checkpoint
	// cpIndex maps keys to positions in cps once the run has many.
	cpIndex  map[string]int
	attempts []storage.Attempt
	// loose is set when attempts may hold keys without a checkpoint, so
	// LoadReplay looks for pending attempts only then.
	loose bool
	// forkedFrom and fromKey describe how the current execution began.
	forkedFrom int
	fromKey    string
	// past holds the earlier executions, oldest first.
	past   []execution
	events []bufferedEvent
	// updates holds the run's updates by ID and updateList the same in
	// Seq order (Seq is a position in it plus one); streams holds its
	// streams by name (interact.go). Every execution shares them.
	updates    map[string]*storage.UpdateRecord
	updateList []*storage.UpdateRecord
	streams    map[string]*stream
	// seq numbers the run's checkpoints across all its executions.
	seq int64
	// readyGen identifies the run's current entry in its index's waiting
	// or ready heap.
	readyGen uint64
	// q is the run's queue and ix its workflow's index there.
	q  *queueState
	ix *index
	// counted is the status q counts r under ("" before its creation);
	// delayed says q.delayed holds r.
	counted storage.RunStatus
	delayed bool
	// started is set by the first claim since the run's creation or last
	// Restart: a later claim is not a start.
	started bool
	// key is the start key the run was created with, nil if none.
	key *startKey
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

// record returns a copy of the run's record that shares nothing with r.
func (r *run) record() storage.RunRecord {
	rec := r.rec
	rec.Input = clone(rec.Input)
	rec.Output = clone(rec.Output)
	rec.Error = cloneError(rec.Error)
	rec.ReadyAt = cloneTime(rec.ReadyAt)
	rec.Wait = cloneWait(rec.Wait)
	rec.EndedAt = cloneTime(rec.EndedAt)
	rec.Active = cloneActive(rec.Active)
	rec.Deadline = cloneTime(rec.Deadline)
	rec.Progress = clone(rec.Progress)
	rec.Headers = cloneHeaders(rec.Headers)
	rec.Hold = rec.Hold.Clone()
	rec.Attributes = slices.Clone(rec.Attributes)
	return rec
}

// cloneHeaders copies a run's headers; none is nil.
func cloneHeaders(h map[string]string) map[string]string {
	if len(h) == 0 {
		return nil
	}
	return maps.Clone(h)
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

// refuse reports a request its Validate method rejected, in the contract's
// words: "memstore: <op>: stem: invalid argument: <why>".
func refuse(err error) error {
	return fmt.Errorf("memstore: %w", err)
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
	c.Also = slices.Clone(w.Also)
	return &c
}

func cloneActive(a *storage.ActiveStep) *storage.ActiveStep {
	if a == nil {
		return nil
	}
	c := *a
	return &c
}

// cloneAttempt copies a, stamping it with the execution it belongs to when
// execution is not zero.
func cloneAttempt(a storage.Attempt, execution int) storage.Attempt {
	a.RetryAt = cloneTime(a.RetryAt)
	if execution != 0 {
		a.Execution = execution
	}
	return a
}

func cloneCheckpoint(cp storage.Checkpoint) storage.Checkpoint {
	cp.Output = clone(cp.Output)
	cp.Input = clone(cp.Input)
	cp.Error = cloneError(cp.Error)
	return cp
}
