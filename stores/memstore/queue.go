package memstore

import (
	"context"
	"slices"
	"time"

	"github.com/stemflow/stem/storage"
)

// queueState is one queue's runs: a claim index per workflow and version,
// and the counts its limits and QueueStats are judged by, kept up to date
// at every change of a run's status (track).
type queueState struct {
	// workflows holds the claim indexes of each workflow with runs on the
	// queue, one per version its runs record: a claim restricted to some
	// versions (ClaimRequest.Versions) looks only at theirs, so the runs of
	// the others cost it nothing.
	workflows map[string]map[int]*index
	// queued, running, waiting and paused count the queue's unfinished runs
	// by status; running is the places held.
	queued, running, waiting, paused int
	// partitions counts the running runs of each partition key.
	partitions map[string]int
	// delayed holds the queued runs whose ReadyAt was ahead when they last
	// changed (delayed starts, restarts fenced by a live lease), so
	// QueueStats tells scheduled from ready without scanning the queue.
	delayed map[*run]struct{}
	// starts is a ring of the queue's latest start times (Unix
	// nanoseconds), made by the first claim that gives the queue a rate and
	// as long as the largest rate since: it holds the starts a rate window
	// can need. nStarts of it are used; nextStart is where the next goes.
	starts    []int64
	nStarts   int
	nextStart int
}

// queueOf returns the state of the named queue, making it.
func (s *Store) queueOf(name string) *queueState {
	q := s.queues[name]
	if q == nil {
		q = &queueState{workflows: make(map[string]map[int]*index)}
		s.queues[name] = q
	}
	return q
}

// track brings the queue's counts up to date with r's status and ReadyAt:
// every method that changes them calls it, through schedule, finish or
// claim where those run.
func (s *Store) track(r *run, now time.Time) {
	q := r.q
	st := r.rec.Status
	if st != r.counted {
		q.count(r.counted, -1)
		q.count(st, 1)
		if p := r.rec.Partition; p != "" {
			switch {
			case st == storage.StatusRunning:
				if q.partitions == nil {
					q.partitions = make(map[string]int)
				}
				q.partitions[p]++
			case r.counted == storage.StatusRunning:
				if q.partitions[p]--; q.partitions[p] <= 0 {
					delete(q.partitions, p)
				}
			}
		}
		r.counted = st
	}
	delayed := st == storage.StatusQueued && r.rec.ReadyAt != nil && r.rec.ReadyAt.After(now)
	if delayed != r.delayed {
		if delayed {
			if q.delayed == nil {
				q.delayed = make(map[*run]struct{})
			}
			q.delayed[r] = struct{}{}
		} else {
			delete(q.delayed, r)
		}
		r.delayed = delayed
	}
}

// count adds d to the count of status st; finished runs are not counted.
func (q *queueState) count(st storage.RunStatus, d int) {
	switch st {
	case storage.StatusQueued:
		q.queued += d
	case storage.StatusRunning:
		q.running += d
	case storage.StatusWaiting:
		q.waiting += d
	case storage.StatusPaused:
		q.paused += d
	}
}

// full reports whether the queue has no free place under lim.
func (q *queueState) full(lim *storage.Queue) bool {
	return lim.Concurrency > 0 && q.running >= lim.Concurrency
}

// passOver reports whether a ready run r may not be claimed under lim now:
// its partition has no free place, or it would start and the rate window
// is full.
func (q *queueState) passOver(r *run, lim *storage.Queue, now int64) bool {
	if lim.PartitionConcurrency > 0 && r.rec.Partition != "" && q.partitions[r.rec.Partition] >= lim.PartitionConcurrency {
		return true
	}
	if r.started || lim.Rate <= 0 || q.nStarts < lim.Rate {
		return false
	}
	// The rate's latest starts: the oldest of them still in the window
	// fills it.
	i := (q.nextStart - lim.Rate + len(q.starts)) % len(q.starts)
	return q.starts[i] > now-int64(lim.RatePeriod)
}

// keepStarts makes the ring hold at least rate starts, keeping the latest.
func (q *queueState) keepStarts(rate int) {
	if len(q.starts) >= rate {
		return
	}
	ring := make([]int64, rate)
	for i := range q.nStarts {
		ring[i] = q.starts[(q.nextStart-q.nStarts+i+len(q.starts))%len(q.starts)]
	}
	q.starts, q.nextStart = ring, q.nStarts%rate
}

// recordStart records a start at now, once a claim has given the queue a
// rate.
func (q *queueState) recordStart(now int64) {
	if len(q.starts) == 0 {
		return
	}
	q.starts[q.nextStart] = now
	q.nextStart = (q.nextStart + 1) % len(q.starts)
	q.nStarts = min(q.nStarts+1, len(q.starts))
}

// stats counts the queue's runs as QueueStats reports them.
func (q *queueState) stats(name string, now time.Time) storage.QueueStats {
	st := storage.QueueStats{Queue: name, Running: q.running, Waiting: q.waiting, Paused: q.paused}
	for r := range q.delayed {
		if r.rec.Status == storage.StatusQueued && r.rec.ReadyAt != nil && r.rec.ReadyAt.After(now) {
			st.Scheduled++
		}
	}
	st.Ready = q.queued - st.Scheduled
	if st.Ready > 0 {
		st.OldestReady = now.Sub(q.oldestReady(now))
	}
	return st
}

// oldestReady returns the earliest ReadyAt of the queue's ready runs,
// found among its claim indexes' entries (a stale entry names a run that
// no longer qualifies, or qualifies through its current entry too).
func (q *queueState) oldestReady(now time.Time) time.Time {
	oldest := now
	for _, byVersion := range q.workflows {
		for _, ix := range byVersion {
			for _, h := range []entryHeap{ix.ready, ix.waiting} {
				for _, e := range h {
					rec := &e.r.rec
					if rec.Status == storage.StatusQueued && rec.ReadyAt != nil && rec.ReadyAt.Before(oldest) {
						oldest = *rec.ReadyAt
					}
				}
			}
		}
	}
	return oldest
}

// QueueStats counts the runs of each named queue by state, from the counts
// kept with every change; only delayed starts are looked at one by one.
func (s *Store) QueueStats(ctx context.Context, queues []string) ([]storage.QueueStats, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	now := s.clock()
	out := make([]storage.QueueStats, len(queues))
	for i, name := range queues {
		if q := s.queues[name]; q != nil {
			out[i] = q.stats(name, now)
		} else {
			out[i] = storage.QueueStats{Queue: name}
		}
	}
	return out, nil
}

// indexOf returns the claim index of workflow's runs of version v on the
// queue, making it.
func (q *queueState) indexOf(workflow string, v int) *index {
	byVersion := q.workflows[workflow]
	if byVersion == nil {
		byVersion = make(map[int]*index)
		q.workflows[workflow] = byVersion
	}
	ix := byVersion[v]
	if ix == nil {
		ix = &index{}
		byVersion[v] = ix
	}
	return ix
}

// indexes calls yield with each claim index of workflow on the queue whose
// version versions allows (storage.VersionIn).
func (q *queueState) indexes(workflow string, versions map[string][]int, yield func(*index)) {
	byVersion := q.workflows[workflow]
	if len(byVersion) == 0 {
		return
	}
	allowed, ok := versions[workflow]
	if !ok {
		for _, ix := range byVersion {
			yield(ix)
		}
		return
	}
	for i, v := range allowed {
		if ix := byVersion[v]; ix != nil && !slices.Contains(allowed[:i], v) {
			yield(ix)
		}
	}
}

// index holds the claimable runs of one workflow version on one queue in
// four heaps.
// Entries are never removed when a run changes; Claim discards the ones
// that no longer describe the run, and a heap is compacted when stale
// entries pile up.
//
// A claim wants the highest priority first, but a run is claimable only
// from its ReadyAt or lease expiry on: so entries wait in a heap by time
// (waiting, leases) until they are due, and move then to a heap by
// priority (ready, expired), where claims take them.
type index struct {
	// waiting holds queued and waiting runs by ReadyAt, ahead of it; an
	// entry is current while its gen equals the run's readyGen.
	waiting entryHeap
	// ready holds the due ones by priority, then ReadyAt.
	ready entryHeap
	// leases holds running runs by lease expiry; gen is the lease token.
	// An extended lease keeps its old entry, which is pushed again at the
	// new expiry when it surfaces.
	leases entryHeap
	// expired holds the running runs whose lease had expired when they
	// surfaced (recoveries), by priority, then expiry.
	expired entryHeap
	// runs counts the index's runs, each with at most one current entry
	// per kind.
	runs int
}

type entry struct {
	at  int64 // Unix nanoseconds
	gen uint64
	r   *run
	// prio is the run's priority in the ready and expired heaps, 0 in the
	// others, which order by time alone.
	prio int
}

// before orders the heaps: higher prio first, then earlier at.
func (e entry) before(o entry) bool {
	return e.prio > o.prio || e.prio == o.prio && e.at < o.at
}

func readyCurrent(e entry) bool {
	return e.gen == e.r.readyGen && e.r.readyStatus() && e.r.rec.ReadyAt != nil
}

func leaseCurrent(e entry) bool {
	return e.r.rec.Status == storage.StatusRunning && uint64(e.r.rec.Token) == e.gen
}

func (ix *index) pushReady(h *entryHeap, e entry) {
	if len(*h) > 2*ix.runs+64 {
		h.compact(readyCurrent)
	}
	h.push(e)
}

func (ix *index) pushLease(h *entryHeap, e entry) {
	if len(*h) > 2*ix.runs+64 {
		h.compact(leaseCurrent)
	}
	h.push(e)
}

// promote moves the entries due by now from the time heaps to the
// priority heaps, discarding the stale ones and pushing an extended
// lease's entry again at its expiry.
func (ix *index) promote(now int64) {
	for len(ix.waiting) > 0 && ix.waiting[0].at <= now {
		e := ix.waiting.pop()
		if readyCurrent(e) {
			e.prio = e.r.rec.Priority
			ix.pushReady(&ix.ready, e)
		}
	}
	for len(ix.leases) > 0 && ix.leases[0].at <= now {
		e := ix.leases.pop()
		if !leaseCurrent(e) {
			continue
		}
		e.at = e.r.rec.LeaseUntil.UnixNano()
		if e.at > now {
			ix.pushLease(&ix.leases, e)
			continue
		}
		e.prio = e.r.rec.Priority
		ix.pushLease(&ix.expired, e)
	}
}

// schedule records a change of r's status or ReadyAt: it brings the
// queue's counts up to date, supersedes r's ready entry and, when r is
// queued or waiting with a ReadyAt, pushes a new one, among the due when
// it is due by now.
func (s *Store) schedule(r *run, now time.Time) {
	s.track(r, now)
	r.readyGen++
	if !r.readyStatus() || r.rec.ReadyAt == nil {
		return
	}
	e := entry{at: r.rec.ReadyAt.UnixNano(), gen: r.readyGen, r: r}
	if e.at <= now.UnixNano() {
		e.prio = r.rec.Priority
		r.ix.pushReady(&r.ix.ready, e)
		return
	}
	r.ix.pushReady(&r.ix.waiting, e)
}

type entryHeap []entry

func (h *entryHeap) push(e entry) {
	*h = append(*h, e)
	h.up(len(*h) - 1)
}

func (h *entryHeap) pop() entry {
	old := *h
	n := len(old) - 1
	e := old[0]
	old[0] = old[n]
	old[n] = entry{}
	*h = old[:n]
	if n > 0 {
		h.down(0)
	}
	return e
}

func (h entryHeap) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !h[i].before(h[p]) {
			return
		}
		h[p], h[i] = h[i], h[p]
		i = p
	}
}

func (h entryHeap) down(i int) {
	n := len(h)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && h[r].before(h[l]) {
			m = r
		}
		if !h[m].before(h[i]) {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}

// compact drops the entries keep rejects and restores the heap order.
func (h *entryHeap) compact(keep func(entry) bool) {
	old := *h
	n := 0
	for _, e := range old {
		if keep(e) {
			old[n] = e
			n++
		}
	}
	clear(old[n:])
	*h = old[:n]
	for i := n/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}
