package redisstore

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stemflow/stem/storage"
)

// A run's end that notifies a run on another shard (a Complete's or a
// Terminate's Notify, which the engine sends a child's parent) cannot be
// one script, so a Cluster makes it three steps, each safe to repeat:
//
//  1. On the ending run's shard, an outbox entry (hash ob, field an
//     operation ID ob:<random>) records the run, the status it is to end
//     with and the event.
//  2. The end itself, on that shard, without the Notify.
//  3. The event, sent to its run's shard under the entry's operation ID,
//     then the entry deleted.
//
// If the end fails, the entry is deleted. A process that dies between the
// steps leaves the entry; a claim on that shard (at most once per
// sweepEvery in each process) sweeps the entries older than sweepGrace:
// each whose run ended with the entry's status is sent again under its
// operation ID, which the receiving shard remembers for a day, so that the
// event is delivered once; each whose run did not end so is deleted, as
// the end it was for never happened.
//
// Invariant: an event of a run's end is delivered only if the end is
// stored, and is delivered (once) if it is, unless its receiver's shard
// forgets the operation for a day before a sweep.

// outboxEntry is what step 1 records.
type outboxEntry struct {
	Run    string            `json:"run"`
	Status storage.RunStatus `json:"status"`
	Event  storage.Event     `json:"event"`
	// At is when the entry was written (Unix milliseconds, the writer's
	// clock), so that a sweep leaves a live end's entry alone.
	At int64 `json:"at"`
}

const (
	// sweepEvery is how often a process sweeps one shard's outbox at most.
	sweepEvery = 2 * time.Second
	// sweepGrace is how old an entry must be for a sweep to take it.
	sweepGrace = 10 * time.Second
)

// outbox is the shard's outbox key (ob).
func (k keyspace) outbox() string { return k.prefix + "ob" }

// notifyAcross ends the run on shard s with end, which carries ev (nil for
// none): in the same script when ev's run lives on s, else in the three
// steps above. end receives the event to carry itself (nil when the
// outbox carries it).
func (c *Cluster) notifyAcross(ctx context.Context, s *Store, run string, st storage.RunStatus, ev *storage.Event, end func(*storage.Event) error) error {
	if ev == nil || ev.RunID == "" || len(c.shards) == 1 {
		return end(ev)
	}
	to, err := c.of(ctx, ev.RunID)
	if err != nil {
		return err
	}
	if to == s {
		return end(ev)
	}
	op := "ob:" + rand.Text()
	b, err := json.Marshal(outboxEntry{Run: run, Status: st, Event: *ev, At: time.Now().UnixMilli()})
	if err != nil {
		return err
	}
	if err := s.write(ctx, "outbox", s.keys.outbox(), func(p redis.Pipeliner) func() error {
		return p.HSet(ctx, s.keys.outbox(), op, b).Err
	}); err != nil {
		return err
	}
	if err := end(nil); err != nil {
		_ = s.dropOutbox(context.WithoutCancel(ctx), op)
		return err
	}
	if err := c.deliver(ctx, s, to, op, *ev); err != nil {
		// The end is stored; a sweep delivers the event.
		s.logger.Warn("redisstore: the event of a run's end to a run on another shard is left to a sweep", "run", run, "to", ev.RunID, "error", err)
	}
	return nil
}

// deliver sends ev on shard to under op, then deletes op's entry from
// shard from's outbox. An event whose run is gone or has ended is
// dropped, as the end's own script would drop it.
func (c *Cluster) deliver(ctx context.Context, from, to *Store, op string, ev storage.Event) error {
	_, err := to.sendEvent(ctx, ev, op)
	if err != nil && !errors.Is(err, storage.ErrRunNotFound) && !errors.Is(err, storage.ErrInvalidState) {
		return err
	}
	return from.dropOutbox(ctx, op)
}

// dropOutbox deletes op's entry from the shard's outbox.
func (s *Store) dropOutbox(ctx context.Context, op string) error {
	return s.write(ctx, "outbox", s.keys.outbox(), func(p redis.Pipeliner) func() error {
		return p.HDel(ctx, s.keys.outbox(), op).Err
	})
}

// maybeSweep sweeps shard i's outbox when this process has not in the
// last sweepEvery.
func (c *Cluster) maybeSweep(ctx context.Context, i int) {
	if len(c.shards) == 1 {
		return
	}
	now := time.Now().UnixNano()
	last := &c.swept[i]
	prev := last.Load()
	if now-prev < int64(sweepEvery) || !last.CompareAndSwap(prev, now) {
		return
	}
	if err := c.sweep(ctx, i, time.Now().Add(-sweepGrace)); err != nil {
		c.shards[i].logger.Warn("redisstore: outbox sweep", "shard", i, "error", err)
	}
}

// sweep takes shard i's outbox entries written before cutoff.
func (c *Cluster) sweep(ctx context.Context, i int, cutoff time.Time) error {
	s := c.shards[i]
	var entries map[string]string
	if err := s.hcall(ctx, "outbox sweep", func(ctx context.Context) error {
		var err error
		entries, err = s.client.HGetAll(ctx, s.keys.outbox()).Result()
		return err
	}); err != nil {
		return err
	}
	for op, raw := range entries {
		var e outboxEntry
		if err := json.Unmarshal([]byte(raw), &e); err != nil {
			return fmt.Errorf("redisstore: outbox entry %s of shard %d: %w", op, i, err)
		}
		if time.UnixMilli(e.At).After(cutoff) {
			continue
		}
		rec, err := s.GetRun(ctx, e.Run)
		switch {
		case err == nil && rec.Status == e.Status:
			to, err := c.of(ctx, e.Event.RunID)
			if err != nil {
				return err
			}
			if err := c.deliver(ctx, s, to, op, e.Event); err != nil {
				return err
			}
		case err == nil || errors.Is(err, storage.ErrRunNotFound):
			if err := s.dropOutbox(ctx, op); err != nil {
				return err
			}
		default:
			return err
		}
	}
	return nil
}

// sweepClock is the per-shard time of this process's last sweep.
type sweepClock = []atomic.Int64
