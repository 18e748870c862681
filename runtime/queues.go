package runtime

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/stemflow/stem/storage"
)

// Queue is a queue's name and limits: how many of its runs may execute at
// once across every process sharing the store (Concurrency), how many of
// one partition (PartitionConcurrency; runs name their partition with
// WithPartition), and how many may start within a period (Rate per
// RatePeriod). Zero fields set no limit. The store enforces the limits in
// its claims; see storage.Queue for what holds a place.
//
// Queue definitions are code: every engine that shares a store registers
// the same ones (RegisterQueue). A run is started on its workflow's queue
// (the annotation's queue=), on the one a start names (OnQueue), or on
// DefaultQueue.
type Queue = storage.Queue

// DefaultQueue is the queue of runs started without one. It has no limits
// unless an engine registers it with some.
const DefaultQueue = storage.DefaultQueue

// QueueStats are a queue's runs by state: ready (the backlog), scheduled
// (a delayed start not yet due), running, waiting and paused.
type QueueStats = storage.QueueStats

// ErrQueueMismatch: an engine registers a queue with other limits than an
// engine sharing the store recorded. Engines must agree on every queue; see
// RegisterQueue.
var ErrQueueMismatch = errors.New("stem: queue definitions differ between engines")

// ErrUnknownQueue: a start names a queue that no engine sharing the store
// registered, or a workflow's queue= names one this engine did not.
var ErrUnknownQueue = errors.New("stem: unknown queue")

// queueLapse is how long a queue definition recorded by another engine is
// held against this one's: engines record theirs again every
// Config.SweepInterval while they run, so one older than this many sweeps
// belongs to no engine that is still running.
const queueLapse = 3

// RegisterQueue registers a queue and its limits on the engine. Register
// queues before Run and before starting runs on them; a queue registered
// twice with other limits, a bad name or a negative limit is
// ErrInvalidArgument.
//
// When Run starts, the engine compares its queues with those the engines
// sharing the store recorded: a queue recorded with other limits, by an
// engine that has recorded it within the last three Config.SweepIntervals
// (so one still running), makes Run return ErrQueueMismatch naming both
// definitions. To change a queue's limits, stop the engines that run the
// old definition, then start those with the new one (or wait the three
// intervals).
func (e *Engine) RegisterQueue(q Queue) error {
	if err := q.Validate(); err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return ErrClosed
	}
	if old, ok := e.queues[q.Name]; ok && old != q {
		return invalidArg("%s is registered already as %s", q, old)
	}
	e.queues[q.Name] = q
	return nil
}

// OnQueue starts the run on the named queue instead of its workflow's.
func OnQueue(name string) StartOption {
	return func(o *startOptions) { o.queue = name }
}

// WithPartition starts the run in the partition key of its queue (a
// customer's ID, say): at most the queue's PartitionConcurrency runs of one
// key execute at once. A queue without PartitionConcurrency has no
// partitions, and a key for it is ErrInvalidArgument.
func WithPartition(key string) StartOption {
	return func(o *startOptions) { o.partition = key }
}

// WithPriority gives the run a priority within its queue: higher runs are
// claimed first, and runs of one priority in the order they became ready.
// The default is 0; storage.MinPriority to storage.MaxPriority.
func WithPriority(p int) StartOption {
	return func(o *startOptions) { o.priority = p }
}

// workQueues returns the queues Run claims from: Config.Queues, or every
// registered queue and the default one.
func (e *Engine) workQueues() ([]storage.Queue, error) {
	names := e.queueNames()
	if len(e.cfg.Queues) > 0 {
		names = slices.Compact(slices.Sorted(slices.Values(e.cfg.Queues)))
	}
	out := make([]storage.Queue, 0, len(names))
	for _, n := range names {
		q, ok := e.queues[n]
		if !ok && n != DefaultQueue {
			return nil, fmt.Errorf("%w: Config.Queues names %q, which is not registered (RegisterQueue)%s", ErrUnknownQueue, n, e.queueHint(n))
		}
		if !ok {
			q = Queue{Name: DefaultQueue}
		}
		out = append(out, q)
	}
	for _, name := range e.names {
		if q := e.workflows[name].queue; q != "" && q != DefaultQueue {
			if _, ok := e.queues[q]; !ok {
				return nil, fmt.Errorf("%w: workflow %s runs on queue %q, which is not registered (RegisterQueue)%s", ErrUnknownQueue, name, q, e.queueHint(q))
			}
		}
	}
	return out, nil
}

// queueNames returns DefaultQueue and every registered queue, sorted.
// Called with e.mu held.
func (e *Engine) queueNames() []string {
	names := []string{DefaultQueue}
	for n := range e.queues {
		if n != DefaultQueue {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return names
}

// queueHint suggests a registered queue close to name. Called with e.mu
// held.
func (e *Engine) queueHint(name string) string {
	return didYouMean(name, e.queueNames())
}

// didYouMean is "; did you mean X?" for the candidate closest to name
// (storage.Nearest), or "" when none is close.
func didYouMean(name string, candidates []string) string {
	if s := storage.Nearest(name, candidates); s != "" {
		return fmt.Sprintf("; did you mean %q?", s)
	}
	return ""
}

// place puts a new run on its queue: the start's, the workflow's, or the
// default, and checks the queue and partition. A queue this engine did not
// register is looked up in the catalog (a client that starts runs for
// workers elsewhere), read at most once per call through cat.
func (e *Engine) place(ctx context.Context, r *storage.NewRun, cat *queueCatalog) error {
	if r.Queue == "" {
		e.mu.Lock()
		def := e.workflows[r.Workflow]
		if def != nil {
			r.Queue = def.queue
		}
		e.mu.Unlock()
		if def == nil {
			// A workflow other engines run: its queue is in the catalog.
			if err := cat.load(ctx, e); err != nil {
				return err
			}
			if w, ok := cat.workflows[r.Workflow]; ok {
				r.Queue = w.Queue
			}
		}
	}
	if r.Queue == "" {
		r.Queue = DefaultQueue
	}
	e.mu.Lock()
	q, ok := e.queues[r.Queue]
	hint := ""
	if !ok && r.Queue != DefaultQueue {
		hint = e.queueHint(r.Queue)
	}
	e.mu.Unlock()
	if !ok && r.Queue != DefaultQueue {
		if err := cat.load(ctx, e); err != nil {
			return err
		}
		if q, ok = cat.queues[r.Queue]; !ok {
			if hint == "" {
				names := []string{DefaultQueue}
				for n := range cat.queues {
					names = append(names, n)
				}
				slices.Sort(names)
				hint = didYouMean(r.Queue, names)
			}
			return fmt.Errorf("%w: %s: queue %q is not registered on this engine nor recorded by any engine sharing the store%s", ErrUnknownQueue, runOf(r), r.Queue, hint)
		}
	}
	if r.Partition != "" && q.PartitionConcurrency == 0 {
		return invalidArg("%s: partition key %q given, but queue %q has no partitions (no PartitionConcurrency)", runOf(r), r.Partition, r.Queue)
	}
	if r.Priority < storage.MinPriority || r.Priority > storage.MaxPriority {
		return invalidArg("%s: priority %d, outside %d to %d", runOf(r), r.Priority, storage.MinPriority, storage.MaxPriority)
	}
	return nil
}

// runOf names a run being started, for errors: by ID when it has one.
func runOf(r *storage.NewRun) string {
	if r.ID == "" {
		return "a run of " + r.Workflow
	}
	return "run " + r.ID + " of " + r.Workflow
}

// queueCatalog is the catalog's workflows and queues, read once when a
// placement needs them.
type queueCatalog struct {
	read      bool
	workflows map[string]storage.WorkflowType
	queues    map[string]storage.Queue
}

func (c *queueCatalog) load(ctx context.Context, e *Engine) error {
	if c.read {
		return nil
	}
	cat, err := e.store.GetCatalog(ctx)
	if err != nil {
		return err
	}
	c.read = true
	c.workflows = make(map[string]storage.WorkflowType, len(cat.Workflows))
	for _, w := range cat.Workflows {
		c.workflows[w.Name] = w
	}
	c.queues = make(map[string]storage.Queue, len(cat.Queues))
	for _, q := range cat.Queues {
		c.queues[q.Name] = q.Queue
	}
	return nil
}

// checkQueues compares the engine's queues with those recorded by engines
// still running (see RegisterQueue).
func (e *Engine) checkQueues(ctx context.Context, queues []storage.Queue) error {
	if p, ok := e.cfg.Store.(storage.Partial); ok && p.Lacks(storage.FeatureQueueLimits) {
		for _, q := range queues {
			if q.Limited() {
				return fmt.Errorf("%w: %s sets limits, which this store lacks: %s; or register the queue without limits",
					ErrUnsupported, q, p.WhyLacks(storage.FeatureQueueLimits))
			}
		}
	}
	c, err := e.store.GetCatalog(ctx)
	if err != nil {
		return err
	}
	now := e.clock.Now()
	for _, rec := range c.Queues {
		i := slices.IndexFunc(queues, func(q storage.Queue) bool { return q.Name == rec.Name })
		if i < 0 || queues[i] == rec.Queue || rec.Worker == e.cfg.WorkerID {
			continue
		}
		if now.Sub(rec.UpdatedAt) > queueLapse*e.cfg.SweepInterval {
			continue // recorded by an engine that has stopped
		}
		return fmt.Errorf("%w: this engine registers %s, but engine %s, recorded at %s, runs %s; stop the engines that run one of them (a definition lapses %v after its last engine stops)",
			ErrQueueMismatch, queues[i], rec.Worker, rec.UpdatedAt.Format(time.RFC3339), rec.Queue, queueLapse*e.cfg.SweepInterval)
	}
	return nil
}

// QueueStats counts the runs of the named queues by state (every queue
// this engine registers and the default one when none is named), in one
// indexed read.
func (e *Engine) QueueStats(ctx context.Context, queues ...string) ([]QueueStats, error) {
	if err := e.checkOpen(); err != nil {
		return nil, err
	}
	if len(queues) == 0 {
		e.mu.Lock()
		queues = e.queueNames()
		e.mu.Unlock()
	}
	for _, q := range queues {
		if err := storage.CheckQueueName(q); err != nil {
			return nil, err
		}
	}
	return e.store.QueueStats(ctx, queues)
}
