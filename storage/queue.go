package storage

import (
	"fmt"
	"time"
)

// DefaultQueue is the queue of a run started without one (NewRun.Queue "")
// and of a claim that names none.
const DefaultQueue = "default"

// Queue is a queue's name and limits, as an engine registers it and hands it
// to every claim. The store enforces the limits across every process that
// shares it, in the claim itself; zero fields set no limit.
//
// A run holds a place in its queue (and its partition) while it is
// StatusRunning: from the claim that takes it until it parks (sleeps,
// waits), pauses, finishes or continues as new, and also while its lease
// has expired and nobody has claimed it back, because a worker that only
// stalled may still be executing its step. Claiming back an expired run
// (a recovery) takes no new place, so recoveries are never held back by a
// limit. A Restart makes a running run queued at once, so its place is free
// at once, though its old worker may go on with its step until it learns
// of the restart (its next heartbeat or write).
type Queue struct {
	// Name is the queue's durable name (CheckQueueName).
	Name string
	// Concurrency is how many runs of the queue may hold a place at once;
	// 0: no limit.
	Concurrency int
	// PartitionConcurrency is how many runs of one partition (NewRun.
	// Partition) may hold a place at once; 0: the queue has no partitions,
	// and runs on it have none.
	PartitionConcurrency int
	// Rate and RatePeriod: at most Rate runs of the queue start (are claimed
	// for the first time since their creation or last Restart) within any
	// window of RatePeriod: a claim at now counts the starts in
	// (now-RatePeriod, now], so a start exactly RatePeriod ago no longer
	// counts. Zero Rate: no rate limit; a Rate needs a RatePeriod.
	Rate       int
	RatePeriod time.Duration
}

// Limited reports whether the queue sets any limit: a claim that names
// only unlimited queues needs no counting.
func (q Queue) Limited() bool {
	return q.Concurrency > 0 || q.PartitionConcurrency > 0 || q.Rate > 0
}

// Validate checks the name and that no limit is negative and a rate has a
// period.
func (q Queue) Validate() error {
	if err := CheckQueueName(q.Name); err != nil {
		return err
	}
	if p := q.problem(); p != "" {
		return invalid("queue", "queue %q: %s", q.Name, p)
	}
	return nil
}

// problem says what is wrong with a queue's limits, or "".
func (q Queue) problem() string {
	switch {
	case q.Concurrency < 0:
		return fmt.Sprintf("negative concurrency %d", q.Concurrency)
	case q.PartitionConcurrency < 0:
		return fmt.Sprintf("negative partition concurrency %d", q.PartitionConcurrency)
	case q.Rate < 0:
		return fmt.Sprintf("negative rate %d", q.Rate)
	case q.RatePeriod < 0:
		return fmt.Sprintf("negative rate period %v", q.RatePeriod)
	case q.Rate > 0 && q.RatePeriod == 0:
		return fmt.Sprintf("a rate of %d needs a rate period", q.Rate)
	case q.Rate == 0 && q.RatePeriod > 0:
		return fmt.Sprintf("a rate period of %v needs a rate", q.RatePeriod)
	case q.RatePeriod > 0 && q.RatePeriod < time.Millisecond:
		return fmt.Sprintf("rate period %v is under a millisecond", q.RatePeriod)
	}
	return ""
}

// String describes the queue's limits, as a mismatch between engines is
// reported.
func (q Queue) String() string {
	s := fmt.Sprintf("queue %s (concurrency %s, partition concurrency %s", q.Name, limitText(q.Concurrency), limitText(q.PartitionConcurrency))
	if q.Rate > 0 {
		s += fmt.Sprintf(", rate %d per %v", q.Rate, q.RatePeriod)
	} else {
		s += ", no rate limit"
	}
	return s + ")"
}

func limitText(n int) string {
	if n == 0 {
		return "unlimited"
	}
	return fmt.Sprint(n)
}

// CheckQueueName checks a queue's name: as a workflow's.
func CheckQueueName(name string) error {
	return checkASCII("queue name", name, nameChars, nameHint)
}

// ClaimQueues returns the queues a claim takes from: the request's, or the
// default queue without limits when it names none.
func (r ClaimRequest) ClaimQueues() []Queue {
	if len(r.Queues) == 0 {
		return []Queue{{Name: DefaultQueue}}
	}
	return r.Queues
}

// QueueNames returns the names of the queues NextWake asks about: the
// request's, or the default queue when it names none.
func (r NextWakeRequest) QueueNames() []string {
	if len(r.Queues) == 0 {
		return []string{DefaultQueue}
	}
	return r.Queues
}

// QueueOf returns the queue a new run is stored on: its Queue, or
// DefaultQueue.
func (r NewRun) QueueOf() string {
	if r.Queue == "" {
		return DefaultQueue
	}
	return r.Queue
}

// QueueStats are a queue's runs by state, as QueueStats counts them.
type QueueStats struct {
	Queue string
	// Ready counts StatusQueued runs whose ReadyAt has come: the backlog.
	Ready int
	// Scheduled counts StatusQueued runs not yet due (a delayed start).
	Scheduled int
	// Running counts the runs holding a place (StatusRunning).
	Running int
	// Waiting counts StatusWaiting runs (asleep or awaiting an event).
	Waiting int
	// Paused counts StatusPaused runs.
	Paused int
	// OldestReady is how long the longest-waiting of the Ready runs has
	// been ready, on the store's clock: now minus its ReadyAt. Zero when
	// Ready is zero. A backlog whose OldestReady grows is not being
	// worked.
	OldestReady time.Duration
}

// validQueues checks the claim's queues: each valid, none named twice.
func validQueues(op string, qs []Queue) error {
	seen := make(map[string]bool, len(qs))
	for _, q := range qs {
		if err := CheckQueueName(q.Name); err != nil {
			return invalid(op, "%s", reason(err))
		}
		if p := q.problem(); p != "" {
			return invalid(op, "queue %q: %s", q.Name, p)
		}
		if seen[q.Name] {
			return invalid(op, "queue %q named twice", q.Name)
		}
		seen[q.Name] = true
	}
	return nil
}
