package memstore

import (
	"context"

	"github.com/stemflow/stem/storage"
)

// Pause pauses a run, or requests a running run's pause.
func (s *Store) Pause(ctx context.Context, runID string) error {
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	r := s.runs[runID]
	if r == nil {
		return notFound("pause", runID)
	}
	rec := &r.rec
	switch rec.Status {
	case storage.StatusPaused:
		return nil
	case storage.StatusRunning:
		if rec.PauseRequested {
			return nil
		}
		rec.PauseRequested = true
	case storage.StatusQueued, storage.StatusWaiting:
		rec.Status = storage.StatusPaused
	default:
		return invalidState("pause", r)
	}
	rec.UpdatedAt = s.clock()
	return nil
}

// Resume undoes Pause.
func (s *Store) Resume(ctx context.Context, runID string) error {
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	r := s.runs[runID]
	if r == nil {
		return notFound("resume", runID)
	}
	rec := &r.rec
	now := s.clock()
	switch {
	case rec.Status == storage.StatusPaused:
		if rec.ReadyAt != nil && !rec.ReadyAt.After(now) {
			rec.Status = storage.StatusQueued
			s.hub.Signal()
		} else {
			rec.Status = storage.StatusWaiting
		}
		s.schedule(r)
	case rec.Status == storage.StatusRunning && rec.PauseRequested:
		rec.PauseRequested = false
	default:
		return invalidState("resume", r)
	}
	rec.UpdatedAt = now
	return nil
}

// Terminate ends an unfinished run and delivers req.Notify when set.
func (s *Store) Terminate(ctx context.Context, req storage.TerminateRequest) error {
	if err := req.Validate(); err != nil {
		return refuse(err)
	}
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	r := s.runs[req.RunID]
	if r == nil {
		return notFound("terminate", req.RunID)
	}
	if r.rec.Status.Finished() {
		return invalidState("terminate", r)
	}
	now := s.clock()
	errInfo := req.Error
	s.finish(r, storage.StatusTerminated, nil, &errInfo, now)
	if req.Notify != nil {
		s.sendNotify(req.Notify, now)
	}
	return nil
}

// Restart drops a run's progress and queues it to run again from the top.
func (s *Store) Restart(ctx context.Context, runID string) error {
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	r := s.runs[runID]
	if r == nil {
		return notFound("restart", runID)
	}
	now := s.clock()
	rec := &r.rec
	r.release(now)
	s.clearWait(r)
	r.cps, r.cpIndex, r.attempts, r.state = nil, nil, nil, nil
	rec.Status = storage.StatusQueued
	rec.Output, rec.Error = nil, nil
	rec.PauseRequested = false
	rec.Recoveries = 0
	readyAt := now
	rec.ReadyAt = &readyAt
	rec.UpdatedAt = now
	s.schedule(r)
	s.hub.Signal()
	return nil
}
