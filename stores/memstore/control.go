package memstore

import (
	"context"
	"fmt"
	"slices"
	"time"

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
	now := s.clock()
	rec.UpdatedAt = now
	s.track(r, now)
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
		s.schedule(r, now)
	case rec.Status == storage.StatusRunning && rec.PauseRequested:
		rec.PauseRequested = false
	default:
		return invalidState("resume", r)
	}
	rec.UpdatedAt = now
	return nil
}

// Terminate ends an unfinished run and delivers req.Notify when set. With
// req.ChildError it also ends every unfinished descendant that did not
// abandon its parent. It returns the IDs it terminated, the run's first.
func (s *Store) Terminate(ctx context.Context, req storage.TerminateRequest) ([]string, error) {
	if err := req.Validate(); err != nil {
		return nil, refuse(err)
	}
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	r := s.runs[req.RunID]
	if r == nil {
		return nil, notFound("terminate", req.RunID)
	}
	if r.rec.Status.Finished() {
		return nil, invalidState("terminate", r)
	}
	now := s.clock()
	errInfo := req.Error
	s.finish(r, storage.StatusTerminated, nil, &errInfo, now)
	ids := []string{r.rec.ID}
	if req.ChildError != nil {
		ids = s.terminateChildren(r, *req.ChildError, req.ChildCancel, ids, now)
	}
	if req.Notify != nil {
		s.sendNotify(req.Notify, now)
	}
	return ids, nil
}

// terminateChildren terminates with errInfo every unfinished descendant of
// root reached through children that terminate with their parent, appending
// their IDs, sorted, to ids. A finished child's descendants are still
// reached; an abandoning child and everything under it are not. A child
// that is cancelled with its parent, reached so, has its cancellation
// requested with reason, and its own children are left to its ending.
func (s *Store) terminateChildren(root *run, errInfo storage.ErrorInfo, reason string, ids []string, now time.Time) []string {
	first := len(ids)
	seen := map[*run]bool{root: true}
	todo := []*run{root}
	for len(todo) > 0 {
		p := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		for _, c := range s.children[p.rec.ID] {
			if c.rec.ParentPolicy == storage.ParentCancel && !c.rec.Status.Finished() {
				s.requestCancel(c, reason, now)
				continue
			}
			if c.rec.ParentPolicy != storage.ParentTerminate || seen[c] {
				continue
			}
			seen[c] = true
			todo = append(todo, c)
			if c.rec.Status.Finished() {
				continue
			}
			e := errInfo
			s.finish(c, storage.StatusTerminated, nil, &e, now)
			ids = append(ids, c.rec.ID)
		}
	}
	slices.Sort(ids[first:])
	return ids
}

// Cancel requests a run's cancellation; the first request wins.
func (s *Store) Cancel(ctx context.Context, req storage.CancelRequest) error {
	if err := req.Validate(); err != nil {
		return refuse(err)
	}
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	r := s.runs[req.RunID]
	if r == nil {
		return notFound("cancel", req.RunID)
	}
	if r.rec.Status.Finished() {
		return invalidState("cancel", r)
	}
	s.requestCancel(r, req.Reason, s.clock())
	return nil
}

// requestCancel records an unfinished run's cancellation, unless one is
// recorded already, and makes a waiting or paused run ready now.
func (s *Store) requestCancel(r *run, reason string, now time.Time) {
	rec := &r.rec
	if rec.CancelRequested {
		return
	}
	rec.CancelRequested, rec.CancelReason = true, reason
	rec.UpdatedAt = now
	switch rec.Status {
	case storage.StatusWaiting:
		if rec.Hold != nil {
			break // held: ready when its hold says
		}
		rec.Status = storage.StatusQueued
		rec.ReadyAt = &now
		s.schedule(r, now)
		s.hub.Signal()
	case storage.StatusPaused:
		if rec.Hold == nil {
			rec.ReadyAt = &now
		}
	}
	s.track(r, now)
}

// Restart ends a run's current execution and queues it to run again in the
// next one: from the top, or from req.FromKey with copies of the
// checkpoints written before it.
func (s *Store) Restart(ctx context.Context, req storage.RestartRequest) error {
	if err := req.Validate(); err != nil {
		return refuse(err)
	}
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	r := s.runs[req.RunID]
	if r == nil {
		return notFound("restart", req.RunID)
	}
	if req.IfExecution > 0 && r.rec.Execution != req.IfExecution {
		return fmt.Errorf("memstore: restart run %q: %w: it is in execution %d, not %d", req.RunID, storage.ErrConflict, r.rec.Execution, req.IfExecution)
	}
	keep := 0
	if req.FromKey != "" {
		i, ok := r.find(req.FromKey)
		if !ok {
			return fmt.Errorf("memstore: restart run %q: %w: no checkpoint of %q in execution %d",
				req.RunID, storage.ErrInvalidArgument, req.FromKey, r.rec.Execution)
		}
		keep = i
	}
	now := s.clock()
	rec := &r.rec
	// A live lease fences the new execution until it expires or its
	// holder lets go (Suspend); only a running run or one restarted under
	// a live lease has a lease that has not expired.
	readyAt := now
	if rec.LeaseUntil.After(now) {
		readyAt = rec.LeaseUntil
	}
	s.clearWait(r)
	r.nextExecution(keep, req.FromKey, now)
	r.rebuffer()
	r.state = nil
	rec.Status = storage.StatusQueued
	rec.Output, rec.Error = nil, nil
	rec.PauseRequested = false
	rec.CancelRequested, rec.CancelReason = false, ""
	rec.Recoveries = 0
	rec.Active = nil
	rec.Progress = nil
	rec.ReadyAt = &readyAt
	rec.UpdatedAt = now
	r.started = false // its next claim starts the new execution
	s.schedule(r, now)
	if !readyAt.After(now) {
		s.hub.Signal()
	}
	return nil
}
