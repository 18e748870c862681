package memstore

import (
	"cmp"
	"context"
	"slices"
	"strings"

	"github.com/stemflow/stem/storage"
)

// Purge deletes up to req.Limit finished runs that match it, oldest
// EndedAt first, with everything they own. It looks at every run: an
// in-memory store holds no more than fits a critical section's scan.
func (s *Store) Purge(ctx context.Context, req storage.PurgeRequest) (storage.PurgeResult, error) {
	if err := req.Validate(); err != nil {
		return storage.PurgeResult{}, refuse(err)
	}
	if err := s.lock(ctx); err != nil {
		return storage.PurgeResult{}, err
	}
	defer s.mu.Unlock()
	statuses := req.PurgeStatuses()
	var doomed []*run
	for _, r := range s.runs {
		rec := &r.rec
		if !rec.Status.Finished() || rec.EndedAt == nil || !rec.EndedAt.Before(req.FinishedBefore) ||
			!slices.Contains(statuses, rec.Status) ||
			len(req.Workflows) > 0 && !slices.Contains(req.Workflows, rec.Workflow) ||
			slices.Contains(req.Except, rec.Workflow) {
			continue
		}
		doomed = append(doomed, r)
	}
	slices.SortFunc(doomed, func(a, b *run) int {
		return cmp.Or(a.rec.EndedAt.Compare(*b.rec.EndedAt), strings.Compare(a.rec.ID, b.rec.ID))
	})
	doomed = doomed[:min(req.Limit, len(doomed))]
	res := storage.PurgeResult{Runs: len(doomed)}
	for _, r := range doomed {
		res.Events += len(r.events)
	}
	if req.DryRun || len(doomed) == 0 {
		return res, nil
	}
	s.forgetAll(doomed)
	return res, nil
}

// forgetAll forgets the finished runs given and drops their IDs from
// s.ids.
func (s *Store) forgetAll(runs []*run) {
	gone := make(map[string]bool, len(runs))
	for _, r := range runs {
		s.forget(r)
		gone[r.rec.ID] = true
	}
	s.ids = slices.DeleteFunc(s.ids, func(id string) bool { return gone[id] })
}

// forget removes a finished run from the store but for s.ids: its record,
// executions, checkpoints, attempts, buffered events, updates and streams
// go with the run; it leaves its parent's children, its index's count and
// the start key it holds. A finished run holds no wait, no place in its
// queue and no current heap entry. Its own children stay indexed under
// its ID, which they still name.
func (s *Store) forget(r *run) {
	delete(s.runs, r.rec.ID)
	r.ix.runs--
	if r.key != nil && s.keys[*r.key] == r {
		delete(s.keys, *r.key)
	}
	if p := r.rec.ParentID; p != "" {
		kids := slices.DeleteFunc(s.children[p], func(c *run) bool { return c == r })
		if len(kids) == 0 {
			delete(s.children, p)
		} else {
			s.children[p] = kids
		}
	}
}
