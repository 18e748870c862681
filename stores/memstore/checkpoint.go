package memstore

import (
	"context"
	"time"

	"github.com/stemflow/stem/storage"
)

// indexFrom is the checkpoint count from which lookups use cpIndex.
const indexFrom = 16

func (r *run) find(key string) (int, bool) {
	if r.cpIndex != nil {
		i, ok := r.cpIndex[key]
		return i, ok
	}
	for i := range r.cps {
		if r.cps[i].Key == key {
			return i, true
		}
	}
	return 0, false
}

// write appends a checkpoint whose Output the run already owns.
func (r *run) write(key string, kind storage.CheckpointKind, output []byte, errInfo *storage.ErrorInfo, now time.Time) int {
	r.seq++
	r.cps = append(r.cps, storage.Checkpoint{
		Key:       key,
		Kind:      kind,
		Output:    output,
		Error:     cloneError(errInfo),
		Seq:       r.seq,
		CreatedAt: now,
	})
	i := len(r.cps) - 1
	switch {
	case r.cpIndex != nil:
		r.cpIndex[key] = i
	case len(r.cps) >= indexFrom:
		r.cpIndex = make(map[string]int, 2*len(r.cps))
		for j := range r.cps {
			r.cpIndex[r.cps[j].Key] = j
		}
	}
	r.rec.Recoveries = 0
	return i
}

// LoadCheckpoints returns every checkpoint of a run, in sequence order.
func (s *Store) LoadCheckpoints(ctx context.Context, runID string) ([]storage.Checkpoint, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	r := s.runs[runID]
	if r == nil {
		return nil, notFound("load checkpoints of", runID)
	}
	if len(r.cps) == 0 {
		return nil, nil
	}
	out := make([]storage.Checkpoint, len(r.cps))
	n := 0
	for i := range r.cps {
		n += len(r.cps[i].Output)
	}
	// One buffer for every output; each slice is capped so that appending
	// to one never overwrites the next.
	buf := make([]byte, 0, n)
	for i := range r.cps {
		out[i] = r.cps[i]
		if o := r.cps[i].Output; o != nil {
			start := len(buf)
			buf = append(buf, o...)
			out[i].Output = buf[start:len(buf):len(buf)]
		}
		out[i].Error = cloneError(r.cps[i].Error)
	}
	return out, nil
}

// Checkpoint records a step's result under the lease, fenced.
func (s *Store) Checkpoint(ctx context.Context, req storage.CheckpointRequest) (storage.CheckpointResult, error) {
	if err := req.Validate(); err != nil {
		return storage.CheckpointResult{}, refuse(err)
	}
	if err := s.lock(ctx); err != nil {
		return storage.CheckpointResult{}, err
	}
	defer s.mu.Unlock()
	r := s.leased(req.Lease)
	if r == nil {
		return storage.CheckpointResult{}, leaseLost("checkpoint", req.Lease)
	}
	now := s.clock()
	rec := &r.rec
	rec.LeaseUntil = now.Add(req.LeaseFor)
	rec.UpdatedAt = now
	cp := &req.Checkpoint
	if i, ok := r.find(cp.Key); ok {
		existing := cloneCheckpoint(r.cps[i])
		return storage.CheckpointResult{Existing: &existing}, nil
	}
	r.write(cp.Key, cp.Kind, clone(cp.Output), cp.Error, now)
	r.attempts = append(r.attempts, req.Attempts...)
	if rec.Wait != nil && rec.Wait.Key == cp.Key {
		s.clearWait(r)
	}
	if !rec.PauseRequested {
		return storage.CheckpointResult{}, nil
	}
	rec.PauseRequested = false
	rec.Status = storage.StatusPaused
	readyAt := now
	rec.ReadyAt = &readyAt
	r.release(now)
	s.schedule(r)
	return storage.CheckpointResult{Paused: true}, nil
}

// RecordAttempts appends attempts under the lease, fenced, and extends it.
func (s *Store) RecordAttempts(ctx context.Context, req storage.RecordAttemptsRequest) error {
	if err := req.Validate(); err != nil {
		return refuse(err)
	}
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	r := s.leased(req.Lease)
	if r == nil {
		return leaseLost("record attempts of", req.Lease)
	}
	now := s.clock()
	r.rec.LeaseUntil = now.Add(req.LeaseFor)
	r.rec.UpdatedAt = now
	r.attempts = append(r.attempts, req.Attempts...)
	return nil
}

// ListSteps returns a run's checkpoints in sequence order with their
// attempts.
func (s *Store) ListSteps(ctx context.Context, runID string) ([]storage.StepRecord, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	r := s.runs[runID]
	if r == nil {
		return nil, notFound("list steps of", runID)
	}
	if len(r.cps) == 0 {
		return nil, nil
	}
	var byKey map[string][]storage.Attempt
	if len(r.attempts) > 0 {
		byKey = make(map[string][]storage.Attempt)
		for _, a := range r.attempts {
			byKey[a.Key] = append(byKey[a.Key], a)
		}
	}
	out := make([]storage.StepRecord, len(r.cps))
	for i := range r.cps {
		out[i] = storage.StepRecord{Checkpoint: cloneCheckpoint(r.cps[i]), Attempts: byKey[r.cps[i].Key]}
	}
	return out, nil
}
