package memstore

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/stemflow/stem/storage"
)

// PutWorker records a worker, stamped with the store's clock, and drops
// the records that expired.
func (s *Store) PutWorker(ctx context.Context, req storage.PutWorkerRequest) error {
	if err := req.Validate(); err != nil {
		return refuse(err)
	}
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	now := s.clock()
	s.expireWorkers(now)
	w := req.Worker
	w.Queues, w.Workflows = slices.Clone(w.Queues), slices.Clone(w.Workflows)
	w.KeyIDs, w.MissingKeyIDs = cloneKeyIDs(w.KeyIDs), cloneKeyIDs(w.MissingKeyIDs)
	w.Heartbeat, w.ExpiresAt = now, now.Add(req.TTL)
	s.workers[w.ID] = w
	return nil
}

// RemoveWorker deletes a worker's record, if any.
func (s *Store) RemoveWorker(ctx context.Context, id string) error {
	if err := storage.ValidateRemoveWorker(id); err != nil {
		return refuse(err)
	}
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	delete(s.workers, id)
	return nil
}

// ListWorkers returns the live workers by ID, dropping the expired.
func (s *Store) ListWorkers(ctx context.Context) ([]storage.Worker, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	s.expireWorkers(s.clock())
	out := make([]storage.Worker, 0, len(s.workers))
	for _, w := range s.workers {
		w.Queues, w.Workflows = slices.Clone(w.Queues), slices.Clone(w.Workflows)
		w.KeyIDs, w.MissingKeyIDs = cloneKeyIDs(w.KeyIDs), cloneKeyIDs(w.MissingKeyIDs)
		out = append(out, w)
	}
	slices.SortFunc(out, func(a, b storage.Worker) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// expireWorkers deletes the records whose ExpiresAt is not after now; the
// caller holds the mutex.
func (s *Store) expireWorkers(now time.Time) {
	for id, w := range s.workers {
		if !w.ExpiresAt.After(now) {
			delete(s.workers, id)
		}
	}
}

// cloneKeyIDs copies a worker's key IDs; an empty list is nil, as the
// other stores read it back.
func cloneKeyIDs(ids []string) []string {
	if len(ids) == 0 {
		return nil
	}
	return slices.Clone(ids)
}
