package pgstore

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stemflow/stem/storage"
)

// A queue's limits are enforced in the claim, across every process: the
// claims naming a limited queue take turns on a transaction-level advisory
// lock of the queue, and each counts, under it, the places held (running
// runs, expired leases included, through runs_queue_running_idx) and the
// starts within the rate window (queue_starts). A claim naming only
// queues without limits takes no lock and counts nothing: it is the one
// statement of Claim.

// candidate is a run a limited claim may lease, as claimCandidates reads
// it.
type candidate struct {
	id, queue, partition string
	priority             int32
	recovery             bool
	since                time.Time
	first                bool // its claim is a start
}

// claimLimited is the claim of a request naming a queue with limits, in
// one transaction:
//
//  1. it locks each limited queue (lockQueues, in name order, so claims
//     never wait for each other in a cycle);
//  2. it counts the places held per queue and partition (queuePlaces) and
//     the starts within each rate window (queueStarts, which prunes the
//     older ones);
//  3. it reads candidates in claim order, locked (claimCandidates), passing
//     over full queues and partitions, runs not yet started of a queue
//     whose window is full, and the runs it considered already, and admits
//     them one by one, counting the places and starts each admission
//     takes. A candidate that no longer fits (its partition filled by an
//     earlier one, say) is passed over and the next page is read with the
//     exclusions of the places taken so far. Every page admits at least
//     its first candidate, so there are at most Limit pages, usually one;
//  4. it leases the admitted runs (claimPicked) and records their starts,
//     and reads their replays, in one round trip.
//
// Recoveries are admitted whatever the counts: an expired lease still
// holds its place.
func (s *Store) claimLimited(ctx context.Context, req storage.ClaimRequest, queues []storage.Queue) ([]storage.ClaimedRun, error) {
	byName := make(map[string]storage.Queue, len(queues))
	var (
		locks, counted, rated []string
		periods               []int64
	)
	for _, q := range queues {
		byName[q.Name] = q
		if q.Limited() {
			locks = append(locks, q.Name)
		}
		if q.Concurrency > 0 || q.PartitionConcurrency > 0 {
			counted = append(counted, q.Name)
		}
		if q.Rate > 0 {
			rated, periods = append(rated, q.Name), append(periods, micros(q.RatePeriod))
			if _, ok := s.rated.Load(q.Name); !ok {
				s.rated.Store(q.Name, struct{}{})
			}
		}
	}
	sort.Strings(locks)
	keys := make([]string, len(locks))
	for i, name := range locks {
		keys[i] = "stem.pgstore.queue:" + s.schemaName + ":" + name
	}
	all := queueNames(queues)
	names, versions := versionArrays(req.Versions)
	var runs []storage.ClaimedRun
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		runs = nil
		now := s.clock()
		held := make(map[string]int)      // places held per queue
		heldIn := make(map[[2]string]int) // and per (queue, partition)
		started := make(map[string]int)   // starts within the window
		b := &pgx.Batch{}
		b.Queue(s.q.lockQueues, keys)
		b.Queue(s.q.queuePlaces, counted).Query(func(rows pgx.Rows) error {
			return forRows(rows, func() error {
				var (
					queue, part string
					n           int64
				)
				if err := rows.Scan(&queue, &part, &n); err != nil {
					return err
				}
				held[queue] += int(n)
				heldIn[[2]string{queue, part}] = int(n)
				return nil
			})
		})
		if len(rated) > 0 {
			b.Queue(s.q.queueStarts, now, rated, periods).Query(func(rows pgx.Rows) error {
				return forRows(rows, func() error {
					var (
						queue string
						n     int64
					)
					err := rows.Scan(&queue, &n)
					started[queue] = int(n)
					return err
				})
			})
		}
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return err
		}

		var (
			admitted []candidate
			starts   []string     // the queue of each admitted start
			seen     = []string{} // never nil: NULL would pass over every run
		)
		for need := req.Limit; need > 0; need = req.Limit - len(admitted) {
			open, fullQ, fullP, rateFull := []string{}, []string{}, []string{}, []string{}
			for _, q := range queues {
				if q.Concurrency == 0 || held[q.Name] < q.Concurrency {
					open = append(open, q.Name)
				}
				if q.Rate > 0 && started[q.Name] >= q.Rate {
					rateFull = append(rateFull, q.Name)
				}
			}
			for k, n := range heldIn {
				if q := byName[k[0]]; q.PartitionConcurrency > 0 && k[1] != "" && n >= q.PartitionConcurrency {
					fullQ, fullP = append(fullQ, k[0]), append(fullP, k[1])
				}
			}
			rows, err := tx.Query(ctx, s.q.claimCandidates, now, req.Workflows, need, open, all, fullQ, fullP, rateFull, seen, names, versions)
			if err != nil {
				return err
			}
			read := 0
			err = forRows(rows, func() error {
				var c candidate
				if err := rows.Scan(&c.id, &c.queue, &c.partition, &c.priority, &c.recovery, &c.since, &c.first); err != nil {
					return err
				}
				read++
				seen = append(seen, c.id)
				if len(admitted) == req.Limit {
					return nil
				}
				if !c.recovery {
					q := byName[c.queue]
					part := [2]string{c.queue, c.partition}
					switch {
					case q.Concurrency > 0 && held[c.queue] >= q.Concurrency:
						return nil
					case q.PartitionConcurrency > 0 && c.partition != "" && heldIn[part] >= q.PartitionConcurrency:
						return nil
					case q.Rate > 0 && c.first && started[c.queue] >= q.Rate:
						return nil
					}
					held[c.queue]++
					heldIn[part]++
					if q.Rate > 0 && c.first {
						started[c.queue]++
						starts = append(starts, c.queue)
					}
				}
				admitted = append(admitted, c)
				return nil
			})
			if err != nil {
				return err
			}
			if read < need {
				break // every candidate left was read
			}
		}
		if len(admitted) == 0 {
			return nil
		}
		var (
			ids        = make([]string, len(admitted))
			priorities = make([]int32, len(admitted))
			recoveries = make([]bool, len(admitted))
			since      = make([]time.Time, len(admitted))
		)
		for i, c := range admitted {
			ids[i], priorities[i], recoveries[i], since[i] = c.id, c.priority, c.recovery, c.since
		}
		b = &pgx.Batch{}
		b.Queue(s.q.claimPicked, now, ids, priorities, req.Owner, micros(req.LeaseFor), recoveries, since)
		b.Queue(s.q.loadClaimed, all)
		if len(starts) > 0 {
			b.Queue(s.q.recordStarts, now, starts)
		}
		br := tx.SendBatch(ctx, b)
		var err error
		if runs, err = readClaimed(br, req.Owner); err != nil {
			br.Close()
			return err
		}
		if err := br.Close(); err != nil {
			return err
		}
		if len(runs) != len(admitted) {
			return fmt.Errorf("leased %d of the %d runs admitted", len(runs), len(admitted))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return runs, nil
}

// QueueStats counts each named queue's unfinished runs by state, and
// finds how long its oldest ready run has waited, in one statement; see
// the queueStats query in queries.go.
func (s *Store) QueueStats(ctx context.Context, queues []string) ([]storage.QueueStats, error) {
	const op = "queue stats"
	if err := s.check(op); err != nil {
		return nil, err
	}
	for _, q := range queues {
		if err := storage.CheckQueueName(q); err != nil {
			return nil, fmt.Errorf("pgstore: %s: %w", op, err)
		}
	}
	out := make([]storage.QueueStats, 0, len(queues))
	if len(queues) == 0 {
		return out, nil
	}
	rows, err := s.pool.Query(ctx, s.q.queueStats, s.clock(), queues)
	if err != nil {
		return nil, s.wrap(op, err)
	}
	err = forRows(rows, func() error {
		var (
			st                                         storage.QueueStats
			ready, scheduled, running, waiting, paused int64
			oldest                                     *int64
		)
		if err := rows.Scan(&st.Queue, &ready, &scheduled, &running, &waiting, &paused, &oldest); err != nil {
			return err
		}
		st.Ready, st.Scheduled, st.Running, st.Waiting, st.Paused = int(ready), int(scheduled), int(running), int(waiting), int(paused)
		if oldest != nil {
			st.OldestReady = time.Duration(*oldest) * time.Microsecond
		}
		out = append(out, st)
		return nil
	})
	if err != nil {
		return nil, s.wrap(op, err)
	}
	return out, nil
}
