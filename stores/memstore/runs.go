package memstore

import (
	"context"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/stemflow/stem/storage"
)

// CreateRuns inserts runs, each as its start policies, event and key say
// (start.go), in one critical section each.
func (s *Store) CreateRuns(ctx context.Context, runs []storage.NewRun) ([]storage.CreateResult, error) {
	if err := storage.ValidateNewRuns(runs); err != nil {
		return nil, refuse(err)
	}
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	return s.create(runs, s.clock()), nil
}

// create judges and inserts runs as CreateRuns does; the caller holds the
// mutex. A new run ready to claim wakes the subscribers of Notifications.
func (s *Store) create(runs []storage.NewRun, now time.Time) []storage.CreateResult {
	out := make([]storage.CreateResult, len(runs))
	created := false
	for i := range runs {
		out[i] = s.start(&runs[i], now)
		if out[i].Created && runs[i].Lease == nil {
			created = true
		}
	}
	if created {
		s.hub.Signal()
	}
	return out
}

// insert creates the run nr describes, whose ID has no run. Its lease
// token so far is the one a run of its ID that a replacement deleted left
// in s.retired, which it takes out, or zero. A debounced run is ready when
// its window closes; a run with a start key holds it.
func (s *Store) insert(nr *storage.NewRun, now time.Time) *run {
	token := s.retired[nr.ID]
	delete(s.retired, nr.ID)
	q := s.queueOf(nr.QueueOf())
	ix := q.indexOf(nr.Workflow, nr.Version)
	ix.runs++
	readyAt := now
	if nr.StartAt != nil && nr.StartAt.After(now) {
		readyAt = *nr.StartAt
	}
	if k := nr.Key; k != nil && k.Debounce > 0 {
		readyAt = now.Add(k.Debounce)
	}
	r := &run{
		rec: storage.RunRecord{
			ID:           nr.ID,
			Workflow:     nr.Workflow,
			ParentID:     nr.ParentID,
			ParentPolicy: nr.ParentPolicy,
			Status:       storage.StatusQueued,
			Input:        clone(nr.Input),
			ReadyAt:      &readyAt,
			Deadline:     cloneTime(nr.Deadline),
			Queue:        nr.QueueOf(),
			Partition:    nr.Partition,
			Priority:     nr.Priority,
			Version:      nr.Version,
			Headers:      cloneHeaders(nr.Headers),
			Attributes:   storage.NormalizeAttrs(nr.Attributes),
			Token:        token,
			Execution:    1,
			StartedAt:    now,
			CreatedAt:    now,
			UpdatedAt:    now,
		},
		q:  q,
		ix: ix,
	}
	s.runs[nr.ID] = r
	if nr.ParentID != "" {
		s.children[nr.ParentID] = append(s.children[nr.ParentID], r)
	}
	if n := len(s.ids); n > 0 && s.ids[n-1] > nr.ID {
		s.idsDirty = true
	}
	s.ids = append(s.ids, nr.ID)
	if k := nr.Key; k != nil {
		r.key = &startKey{nr.Workflow, k.Key}
		s.keys[*r.key] = r
	}
	if l := nr.Lease; l != nil {
		// An eager start: leased at creation, as a claim would.
		r.rec.ReadyAt = nil
		s.claim(r, storage.ClaimRequest{Owner: l.Owner, LeaseFor: l.For}, now, false)
	} else {
		s.schedule(r, now)
	}
	return r
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

// ListRuns returns runs ordered by ID, filtered by the query, at most
// q.PageSize() of them.
func (s *Store) ListRuns(ctx context.Context, q storage.ListRunsQuery) (storage.RunPage, error) {
	if err := q.Validate(); err != nil {
		return storage.RunPage{}, refuse(err)
	}
	limit := q.PageSize()
	if err := s.lock(ctx); err != nil {
		return storage.RunPage{}, err
	}
	defer s.mu.Unlock()
	if q.Order == storage.OrderCreated || len(q.Where) > 0 {
		return s.listOrdered(q), nil
	}
	ids := s.ids
	if q.ParentID != "" {
		ids = s.childIDs(q.ParentID)
	} else if s.idsDirty {
		slices.Sort(s.ids)
		s.idsDirty = false
		ids = s.ids
	}
	// The IDs the prefix and the cursor leave, as the indexes [lo, hi).
	b := q.IDRange()
	lo, hi := sort.SearchStrings(ids, b.From), len(ids)
	if !b.FromIncluded && lo < len(ids) && ids[lo] == b.From {
		lo++
	}
	if b.HasTo {
		hi = sort.SearchStrings(ids, b.To)
	}
	var page storage.RunPage
	for n := range max(hi-lo, 0) {
		i := lo + n
		if q.Descending {
			i = hi - 1 - n
		}
		r := s.runs[ids[i]]
		if !q.Listed(&r.rec) {
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

// CountRuns counts the runs in each status, by a pass over every run.
func (s *Store) CountRuns(ctx context.Context, q storage.CountRunsQuery) (storage.RunCounts, error) {
	if err := q.Validate(); err != nil {
		return nil, refuse(err)
	}
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	counts := storage.RunCounts{}
	for _, r := range s.runs {
		if q.Workflow == "" || r.rec.Workflow == q.Workflow {
			counts[r.rec.Status]++
		}
	}
	return counts, nil
}

// childIDs returns the IDs of the children of parent, sorted.
func (s *Store) childIDs(parent string) []string {
	children := s.children[parent]
	ids := make([]string, len(children))
	for i, c := range children {
		ids[i] = c.rec.ID
	}
	slices.Sort(ids)
	return ids
}

// setAttrs replaces a run's search attributes with attrs, normalized.
// The memory store keeps no index of them: a listing that filters by
// them, or lists by creation time, passes over every run (listOrdered).
func (s *Store) setAttrs(r *run, attrs []storage.Attr) {
	r.rec.Attributes = attrs
}

// listOrdered lists a page of q in creation order, or in ID order with
// attribute filters, by a pass over every run: what a store with indexes
// reads through them, the memory store sorts.
func (s *Store) listOrdered(q storage.ListRunsQuery) storage.RunPage {
	limit := q.PageSize()
	var match []*run
	for _, r := range s.runs {
		if q.ParentID != "" && r.rec.ParentID != q.ParentID {
			continue
		}
		if q.Listed(&r.rec) && q.Past(&r.rec) {
			match = append(match, r)
		}
	}
	slices.SortFunc(match, func(a, b *run) int {
		c := 0
		if q.Order == storage.OrderCreated {
			c = a.rec.CreatedAt.Compare(b.rec.CreatedAt)
		}
		if c == 0 {
			c = strings.Compare(a.rec.ID, b.rec.ID)
		}
		if q.Descending {
			return -c
		}
		return c
	})
	var page storage.RunPage
	for _, r := range match {
		if len(page.Runs) == limit {
			page.Next = q.NextCursor(&page.Runs[limit-1])
			break
		}
		page.Runs = append(page.Runs, r.record())
	}
	return page
}
