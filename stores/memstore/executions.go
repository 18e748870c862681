package memstore

import (
	"context"
	"time"

	"github.com/stemflow/stem/storage"
)

// execution is an earlier execution of a run, kept readable after a
// Restart replaced it.
type execution struct {
	rec      storage.ExecutionRecord
	cps      []storage.Checkpoint
	attempts []storage.Attempt
}

// current describes the run's current execution, sharing nothing with r.
func (r *run) current() storage.ExecutionRecord {
	return storage.ExecutionRecord{
		Number:     r.rec.Execution,
		StartedAt:  r.rec.StartedAt,
		EndedAt:    cloneTime(r.rec.EndedAt),
		Status:     r.rec.Status,
		Error:      cloneError(r.rec.Error),
		ForkedFrom: r.forkedFrom,
		FromKey:    r.fromKey,
	}
}

// nextExecution ends the current execution (now, unless it ended already)
// and begins the next one, started now, holding copies of the first keep
// checkpoints of the old one.
func (r *run) nextExecution(keep int, fromKey string, now time.Time) {
	old := r.current()
	if old.EndedAt == nil {
		ended := now
		old.EndedAt = &ended
	}
	r.past = append(r.past, execution{rec: old, cps: r.cps, attempts: r.attempts})
	r.rec.Execution++
	r.rec.StartedAt = now
	r.rec.EndedAt = nil
	r.forkedFrom, r.fromKey = 0, ""
	r.cps, r.cpIndex, r.attempts, r.loose = nil, nil, nil, false
	if fromKey == "" {
		return
	}
	r.forkedFrom, r.fromKey = old.Number, fromKey
	if keep == 0 {
		return
	}
	// The old checkpoints are never modified in place, so the copies may
	// share their outputs and errors.
	r.cps = make([]storage.Checkpoint, keep, keep+8)
	for i, cp := range r.past[len(r.past)-1].cps[:keep] {
		r.seq++
		cp.Seq = r.seq
		cp.Execution = r.rec.Execution
		cp.ForkedFrom = old.Number
		r.cps[i] = cp
	}
	if keep >= indexFrom {
		r.reindex()
	}
}

// ListExecutions returns a run's executions, oldest first.
func (s *Store) ListExecutions(ctx context.Context, runID string) ([]storage.ExecutionRecord, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	r := s.runs[runID]
	if r == nil {
		return nil, notFound("list executions of", runID)
	}
	out := make([]storage.ExecutionRecord, 0, len(r.past)+1)
	for i := range r.past {
		e := r.past[i].rec
		e.EndedAt = cloneTime(e.EndedAt)
		e.Error = cloneError(e.Error)
		out = append(out, e)
	}
	return append(out, r.current()), nil
}

// ContinueAsNew ends the current execution as continued and begins the
// next with the new input and nothing else, releasing the lease, fenced.
// With req.ChildError it also ends, as Complete does, every unfinished
// descendant that did not abandon its parent.
func (s *Store) ContinueAsNew(ctx context.Context, req storage.ContinueRequest) error {
	if err := req.Validate(); err != nil {
		return refuse(err)
	}
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	r := s.leased(req.Lease)
	if r == nil {
		return s.lost("continue as new", req.Lease)
	}
	now := s.clock()
	rec := &r.rec
	r.publish(req.Progress)
	s.clearWait(r)
	rec.Status = storage.StatusContinued // what the ended execution records
	r.nextExecution(0, "", now)
	r.state = nil
	rec.Input = clone(req.Input)
	rec.Output, rec.Error = nil, nil
	rec.Recoveries = 0
	rec.Active = nil
	r.release(now)
	readyAt := now
	rec.ReadyAt = &readyAt
	rec.UpdatedAt = now
	rec.Status = storage.StatusQueued
	if rec.PauseRequested {
		rec.PauseRequested = false
		rec.Status = storage.StatusPaused
	}
	s.schedule(r, now)
	if req.ChildError != nil {
		s.terminateChildren(r, *req.ChildError, req.ChildCancel, nil, now)
	}
	if rec.Status == storage.StatusQueued {
		s.hub.Signal()
	}
	return nil
}
