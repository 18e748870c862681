package memstore

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/stemflow/stem/storage"
)

// stream is one of a run's streams. values own their bytes and are never
// modified once appended.
type stream struct {
	values  []storage.StreamValue
	closed  bool
	updated time.Time
}

// SendUpdate records an update for a run and delivers it as SendEvent
// delivers an event on the update's topic, in one critical section; see
// storage.Interactor.
func (s *Store) SendUpdate(ctx context.Context, req storage.UpdateRequest) (storage.UpdateResult, error) {
	if err := req.Validate(); err != nil {
		return storage.UpdateResult{}, refuse(err)
	}
	if err := s.lock(ctx); err != nil {
		return storage.UpdateResult{}, err
	}
	defer s.mu.Unlock()
	r := s.runs[req.RunID]
	if r == nil {
		return storage.UpdateResult{}, notFound("send update to", req.RunID)
	}
	if u := r.updates[req.ID]; u != nil {
		return storage.UpdateResult{Update: cloneUpdate(u)}, nil
	}
	if r.rec.Status.Finished() {
		return storage.UpdateResult{}, invalidState("send update to", r)
	}
	now := s.clock()
	u := &storage.UpdateRecord{
		RunID:     req.RunID,
		ID:        req.ID,
		Name:      req.Name,
		Payload:   clone(req.Payload),
		Headers:   cloneHeaders(req.Headers),
		Seq:       int64(len(r.updateList)) + 1,
		State:     storage.UpdatePending,
		CreatedAt: now,
	}
	if r.updates == nil {
		r.updates = make(map[string]*storage.UpdateRecord)
	}
	r.updates[u.ID] = u
	r.updateList = append(r.updateList, u)
	delivered := s.send(r, storage.UpdateTopic(req.Name), clone(req.Payload), now)
	return storage.UpdateResult{Update: cloneUpdate(u), Created: true, Delivered: delivered}, nil
}

// GetUpdate returns a run's update, or ErrUpdateNotFound.
func (s *Store) GetUpdate(ctx context.Context, runID, id string) (storage.UpdateRecord, error) {
	if err := storage.ValidateRunRef("get update", runID); err != nil {
		return storage.UpdateRecord{}, err
	}
	if err := storage.CheckUpdateID(id); err != nil {
		return storage.UpdateRecord{}, fmt.Errorf("memstore: get update: %w", err)
	}
	if err := s.lock(ctx); err != nil {
		return storage.UpdateRecord{}, err
	}
	defer s.mu.Unlock()
	if r := s.runs[runID]; r != nil {
		if u := r.updates[id]; u != nil {
			return cloneUpdate(u), nil
		}
	}
	return storage.UpdateRecord{}, fmt.Errorf("memstore: get update %q of run %q: %w", id, runID, storage.ErrUpdateNotFound)
}

// ListUpdates returns a page of a run's updates in Seq order.
func (s *Store) ListUpdates(ctx context.Context, q storage.UpdatesQuery) ([]storage.UpdateRecord, error) {
	if err := q.Validate(); err != nil {
		return nil, refuse(err)
	}
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	r := s.runs[q.RunID]
	if r == nil || q.After >= int64(len(r.updateList)) {
		return nil, nil
	}
	page := r.updateList[q.After:]
	page = page[:min(len(page), q.PageSize())]
	out := make([]storage.UpdateRecord, len(page))
	for i, u := range page {
		out[i] = cloneUpdate(u)
	}
	return out, nil
}

// ReadStream returns a page of a run's stream with the stream's length,
// whether it is closed and the run's status, in one critical section.
func (s *Store) ReadStream(ctx context.Context, q storage.StreamQuery) (storage.StreamPage, error) {
	if err := q.Validate(); err != nil {
		return storage.StreamPage{}, refuse(err)
	}
	if err := s.lock(ctx); err != nil {
		return storage.StreamPage{}, err
	}
	defer s.mu.Unlock()
	r := s.runs[q.RunID]
	if r == nil {
		return storage.StreamPage{}, notFound("read stream of", q.RunID)
	}
	page := storage.StreamPage{Next: q.From, RunStatus: r.rec.Status}
	st := r.streams[q.Stream]
	if st == nil {
		return page, nil
	}
	page.Length, page.Closed = int64(len(st.values)), st.closed
	if q.From >= page.Length {
		return page, nil
	}
	vals := st.values[q.From:]
	vals = vals[:min(len(vals), q.PageSize())]
	page.Values = make([]storage.StreamValue, len(vals))
	for i, v := range vals {
		v.Value = clone(v.Value)
		page.Values[i] = v
	}
	page.Next = q.From + int64(len(vals))
	return page, nil
}

// ListStreams returns a run's streams, by name.
func (s *Store) ListStreams(ctx context.Context, runID string) ([]storage.StreamInfo, error) {
	if err := storage.ValidateRunRef("list streams", runID); err != nil {
		return nil, err
	}
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	r := s.runs[runID]
	if r == nil {
		return nil, notFound("list streams of", runID)
	}
	out := make([]storage.StreamInfo, 0, len(r.streams))
	for name, st := range r.streams {
		out = append(out, storage.StreamInfo{Name: name, Length: int64(len(st.values)), Closed: st.closed, UpdatedAt: st.updated})
	}
	slices.SortFunc(out, func(a, b storage.StreamInfo) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// replyTo returns the update of r a checkpoint's reply names (nil when it
// has none), or ErrInvalidArgument when r has no update of the ID; the
// caller writes nothing then.
func replyTo(r *run, reply *storage.UpdateReply) (*storage.UpdateRecord, error) {
	if reply == nil {
		return nil, nil
	}
	u := r.updates[reply.ID]
	if u == nil {
		return nil, fmt.Errorf("memstore: checkpoint run %q: %w: reply to update %q: the run has no update of the ID",
			r.rec.ID, storage.ErrInvalidArgument, reply.ID)
	}
	return u, nil
}

// interact writes what a written checkpoint carries for r's updates and
// streams: the reply to u (from replyTo; nil: none), unless u has one
// already, and the stream writes, in order. Each reply and each stream
// written is announced to the finished subscribers.
func (s *Store) interact(r *run, u *storage.UpdateRecord, reply *storage.UpdateReply, writes []storage.StreamWrite, now time.Time) {
	var said []string
	if u != nil && u.State != storage.UpdateReplied {
		u.State = storage.UpdateReplied
		u.Reply = clone(reply.Output)
		u.Error = cloneError(reply.Error)
		u.RepliedAt = &now
		said = append(said, storage.UpdateAnnouncement(r.rec.ID, u.ID))
	}
	for i, w := range writes {
		st := r.streams[w.Stream]
		if st == nil {
			if r.streams == nil {
				r.streams = make(map[string]*stream)
			}
			st = &stream{}
			r.streams[w.Stream] = st
		}
		if len(w.Values) > 0 {
			st.closed = false
		}
		for _, v := range w.Values {
			st.values = append(st.values, storage.StreamValue{Offset: int64(len(st.values)), Value: clone(v), WrittenAt: now})
		}
		if w.Close {
			st.closed = true
		}
		st.updated = now
		if !slices.ContainsFunc(writes[:i], func(e storage.StreamWrite) bool { return e.Stream == w.Stream }) {
			said = append(said, storage.StreamAnnouncement(r.rec.ID, w.Stream))
		}
	}
	if len(said) > 0 {
		s.hub.Finished(said...)
	}
}

// rebuffer buffers again, after a Restart has set up the new execution's
// checkpoints, the updates of r that are pending and whose payload is not
// the output of an update delivery of the new execution: those the old
// execution took without replying would never reach the new one. The
// run's buffered updates are dropped first, so each is buffered once, and
// the updates go after its other events, in Seq order.
func (r *run) rebuffer() {
	if len(r.updateList) == 0 {
		return
	}
	r.events = slices.DeleteFunc(r.events, func(e bufferedEvent) bool {
		return strings.HasPrefix(e.topic, storage.UpdateTopicPrefix)
	})
	var taken map[string]bool
	for i := range r.cps {
		if cp := &r.cps[i]; cp.Kind == storage.KindUpdate {
			if taken == nil {
				taken = make(map[string]bool)
			}
			taken[string(cp.Output)] = true
		}
	}
	for _, u := range r.updateList {
		if u.State == storage.UpdatePending && !taken[string(u.Payload)] {
			r.events = append(r.events, bufferedEvent{topic: storage.UpdateTopic(u.Name), payload: clone(u.Payload)})
		}
	}
}

// cloneUpdate copies an update record, sharing nothing with u.
func cloneUpdate(u *storage.UpdateRecord) storage.UpdateRecord {
	c := *u
	c.Payload = clone(u.Payload)
	c.Headers = cloneHeaders(u.Headers)
	c.Reply = clone(u.Reply)
	c.Error = cloneError(u.Error)
	c.RepliedAt = cloneTime(u.RepliedAt)
	return c
}
