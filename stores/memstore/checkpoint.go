package memstore

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/stemflow/stem/storage"
)

// indexFrom is the checkpoint count from which lookups use cpIndex.
const indexFrom = 16

// find returns the position in cps of the current execution's checkpoint of
// key.
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

// write appends a checkpoint whose Output the run already owns to the
// current execution.
func (r *run) write(key string, kind storage.CheckpointKind, output []byte, errInfo *storage.ErrorInfo, now time.Time) int {
	r.seq++
	r.cps = append(r.cps, storage.Checkpoint{
		Key:       key,
		Kind:      kind,
		Output:    output,
		Error:     cloneError(errInfo),
		Seq:       r.seq,
		Execution: r.rec.Execution,
		CreatedAt: now,
	})
	i := len(r.cps) - 1
	switch {
	case r.cpIndex != nil:
		r.cpIndex[key] = i
	case len(r.cps) >= indexFrom:
		r.reindex()
	}
	r.rec.Recoveries = 0
	return i
}

// remove deletes the current execution's checkpoint at position i.
func (r *run) remove(i int) {
	r.cps = slices.Delete(r.cps, i, i+1)
	if r.cpIndex != nil {
		r.reindex()
	}
}

// reindex rebuilds cpIndex from cps.
func (r *run) reindex() {
	r.cpIndex = make(map[string]int, 2*len(r.cps))
	for j := range r.cps {
		r.cpIndex[r.cps[j].Key] = j
	}
}

// LoadReplay returns the current execution's checkpoints, in sequence
// order, and the attempts of its keys without a checkpoint.
func (s *Store) LoadReplay(ctx context.Context, runID string) (storage.Replay, error) {
	if err := s.lock(ctx); err != nil {
		return storage.Replay{}, err
	}
	defer s.mu.Unlock()
	r := s.runs[runID]
	if r == nil {
		return storage.Replay{}, notFound("load replay of", runID)
	}
	return r.replay(), nil
}

// replay is the run's current execution's checkpoints and pending
// attempts, copied; the store's lock is held.
func (r *run) replay() storage.Replay {
	rp := storage.Replay{Execution: r.rec.Execution}
	if r.loose {
		for _, a := range r.attempts {
			if _, ok := r.find(a.Key); !ok {
				rp.Pending = append(rp.Pending, cloneAttempt(a, 0))
			}
		}
		// Until the next write that may leave an attempt without its
		// checkpoint, there is nothing to look for.
		r.loose = len(rp.Pending) > 0
	}
	if len(r.cps) == 0 {
		return rp
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
	rp.Checkpoints = out
	return rp
}

// Checkpoint records a step's result under the lease, fenced, with the
// reply and the stream writes it carries when it is written (interact.go).
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
	u, err := replyTo(r, req.Reply)
	if err != nil {
		return storage.CheckpointResult{}, err
	}
	now := s.clock()
	rec := &r.rec
	rec.LeaseUntil = now.Add(req.LeaseFor)
	rec.UpdatedAt = now
	rec.Active = nil
	r.publish(req.Progress)
	cp := &req.Checkpoint
	if i, ok := r.find(cp.Key); ok {
		existing := cloneCheckpoint(r.cps[i])
		return storage.CheckpointResult{Existing: &existing, CancelRequested: rec.CancelRequested}, nil
	}
	merged, err := storage.MergeAttrs(r.rec.Attributes, req.Attributes)
	if err != nil {
		return storage.CheckpointResult{}, refuse(err)
	}
	i := r.write(cp.Key, cp.Kind, clone(cp.Output), cp.Error, now)
	r.cps[i].Input = clone(cp.Input)
	if len(req.Attributes) > 0 {
		s.setAttrs(r, merged)
	}
	for _, a := range req.Attempts {
		r.attempts = append(r.attempts, cloneAttempt(a, rec.Execution))
		if a.Key != cp.Key {
			r.loose = true
		}
	}
	if rec.Wait.HasKey(cp.Key) {
		s.clearWait(r)
	}
	s.interact(r, u, req.Reply, req.Streams, now)
	if !rec.PauseRequested {
		res := storage.CheckpointResult{CancelRequested: rec.CancelRequested}
		if c := req.Completion(); c != nil {
			s.complete(r, *c, now)
			res.Completed = true
		}
		return res, nil
	}
	if req.Busy {
		return storage.CheckpointResult{PauseRequested: true, CancelRequested: rec.CancelRequested}, nil
	}
	rec.PauseRequested = false
	rec.Status = storage.StatusPaused
	readyAt := now
	rec.ReadyAt = &readyAt
	r.release(now)
	s.schedule(r, now)
	return storage.CheckpointResult{Paused: true, CancelRequested: rec.CancelRequested}, nil
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
	r.rec.Active = nil
	for _, a := range req.Attempts {
		r.attempts = append(r.attempts, cloneAttempt(a, r.rec.Execution))
	}
	if len(req.Attempts) > 0 {
		r.loose = true
	}
	return nil
}

// ListSteps returns one execution's checkpoints in sequence order with
// their attempts, and the attempts of its keys without a checkpoint.
func (s *Store) ListSteps(ctx context.Context, q storage.StepsQuery) (storage.History, error) {
	if err := q.Validate(); err != nil {
		return storage.History{}, refuse(err)
	}
	if err := s.lock(ctx); err != nil {
		return storage.History{}, err
	}
	defer s.mu.Unlock()
	r := s.runs[q.RunID]
	if r == nil {
		return storage.History{}, notFound("list steps of", q.RunID)
	}
	n := q.Execution
	switch {
	case n == 0 || n == r.rec.Execution:
		return history(r.rec.Execution, r.cps, r.attempts), nil
	case n < r.rec.Execution:
		e := &r.past[n-1]
		return history(n, e.cps, e.attempts), nil
	}
	return storage.History{}, fmt.Errorf("memstore: list steps of run %q: %w: execution %d: the run has %d",
		q.RunID, storage.ErrInvalidArgument, n, r.rec.Execution)
}

// history copies one execution's steps: each checkpoint with its attempts,
// and the attempts of keys without a checkpoint.
func history(execution int, cps []storage.Checkpoint, attempts []storage.Attempt) storage.History {
	h := storage.History{Execution: execution}
	var byKey map[string][]storage.Attempt
	if len(attempts) > 0 {
		byKey = make(map[string][]storage.Attempt)
		for _, a := range attempts {
			byKey[a.Key] = append(byKey[a.Key], cloneAttempt(a, 0))
		}
	}
	if len(cps) > 0 {
		h.Steps = make([]storage.StepRecord, len(cps))
		for i := range cps {
			h.Steps[i] = storage.StepRecord{Checkpoint: cloneCheckpoint(cps[i]), Attempts: byKey[cps[i].Key]}
			delete(byKey, cps[i].Key)
		}
	}
	if len(byKey) > 0 {
		for _, a := range attempts {
			if _, ok := byKey[a.Key]; ok {
				h.Pending = append(h.Pending, cloneAttempt(a, 0))
			}
		}
	}
	return h
}
