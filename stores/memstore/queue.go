package memstore

import "github.com/stemflow/stem/storage"

// queue indexes one workflow's claimable runs in two min-heaps. Entries are
// never removed when a run changes; Claim discards the ones that no longer
// describe the run, and a heap is compacted when stale entries pile up.
type queue struct {
	// ready holds queued and waiting runs by ReadyAt; an entry is current
	// while its gen equals the run's readyGen.
	ready entryHeap
	// leases holds running runs by lease expiry; gen is the lease token. An
	// extended lease keeps its old entry, which Claim pushes again at the
	// new expiry when it surfaces.
	leases entryHeap
	// runs counts the workflow's runs, each with at most one current entry
	// per heap.
	runs int
}

type entry struct {
	at  int64 // Unix nanoseconds
	gen uint64
	r   *run
}

func (q *queue) pushReady(e entry) {
	if len(q.ready) > 2*q.runs+64 {
		q.ready.compact(func(e entry) bool { return e.gen == e.r.readyGen && e.r.readyStatus() })
	}
	q.ready.push(e)
}

func (q *queue) pushLease(e entry) {
	if len(q.leases) > 2*q.runs+64 {
		q.leases.compact(func(e entry) bool {
			return e.r.rec.Status == storage.StatusRunning && uint64(e.r.rec.Token) == e.gen
		})
	}
	q.leases.push(e)
}

// schedule records a change of r's status or ReadyAt: it supersedes r's
// ready entry and, when r is queued or waiting with a ReadyAt, pushes a new
// one.
func (s *Store) schedule(r *run) {
	r.readyGen++
	if r.readyStatus() && r.rec.ReadyAt != nil {
		r.queue.pushReady(entry{at: r.rec.ReadyAt.UnixNano(), gen: r.readyGen, r: r})
	}
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
		if h[p].at <= h[i].at {
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
		if r := l + 1; r < n && h[r].at < h[l].at {
			m = r
		}
		if h[i].at <= h[m].at {
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
