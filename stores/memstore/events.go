package memstore

import (
	"context"
	"slices"
	"time"

	"github.com/stemflow/stem/storage"
)

// bufferedEvent is an event sent to a run before it waited on the topic.
type bufferedEvent struct {
	topic   string
	payload []byte
}

// Emit delivers an event to every run waiting on the topic.
func (s *Store) Emit(ctx context.Context, req storage.EmitRequest) ([]string, error) {
	if err := req.Validate(); err != nil {
		return nil, refuse(err)
	}
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	waiting := s.waits[req.Topic]
	if len(waiting) == 0 {
		return nil, nil
	}
	now := s.clock()
	ids := make([]string, 0, len(waiting))
	for id := range waiting {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		s.deliver(s.runs[id], req.Topic, clone(req.Payload), now)
	}
	return ids, nil
}

// SendEvent delivers an event to one run, or buffers it for the run.
func (s *Store) SendEvent(ctx context.Context, ev storage.Event) (bool, error) {
	if err := ev.Validate(); err != nil {
		return false, refuse(err)
	}
	if err := s.lock(ctx); err != nil {
		return false, err
	}
	defer s.mu.Unlock()
	r := s.runs[ev.RunID]
	if r == nil {
		return false, notFound("send event to", ev.RunID)
	}
	if r.rec.Status.Finished() {
		return false, invalidState("send event to", r)
	}
	return s.send(r, ev.Topic, clone(ev.Payload), s.clock()), nil
}

// sendNotify delivers a finishing run's Notify event. A target that does not
// exist or has finished cannot take it, and the event is dropped: a child's
// completion must not fail because its parent is gone.
func (s *Store) sendNotify(ev *storage.Event, now time.Time) {
	t := s.runs[ev.RunID]
	if t == nil || t.rec.Status.Finished() {
		return
	}
	s.send(t, ev.Topic, clone(ev.Payload), now)
}

// send delivers payload (owned) to r if it waits on topic, or buffers it.
func (s *Store) send(r *run, topic string, payload []byte, now time.Time) bool {
	if _, ok := r.rec.Wait.Case(topic); ok {
		s.deliver(r, topic, payload, now)
		return true
	}
	r.events = append(r.events, bufferedEvent{topic: topic, payload: payload})
	return false
}

// deliver writes payload (owned) as the checkpoint of the case of r's wait
// on topic, removes the whole wait and makes a waiting run ready now.
func (s *Store) deliver(r *run, topic string, payload []byte, now time.Time) {
	rec := &r.rec
	c, _ := rec.Wait.Case(topic)
	s.clearWait(r)
	if _, ok := r.find(c.Key); !ok {
		r.write(c.Key, c.DeliveryKind(), payload, nil, now)
	}
	rec.UpdatedAt = now
	switch rec.Status {
	case storage.StatusWaiting, storage.StatusQueued:
		rec.Status = storage.StatusQueued
		if rec.ReadyAt == nil || rec.ReadyAt.After(now) {
			readyAt := now
			rec.ReadyAt = &readyAt
			s.schedule(r, now)
		} else {
			s.track(r, now)
		}
		s.hub.Signal()
	case storage.StatusPaused:
		readyAt := now
		rec.ReadyAt = &readyAt
	}
}

// buffered returns the index of r's oldest buffered event on a topic of
// any case of w, or -1.
func (r *run) buffered(w *storage.Wait) int {
	for i := range r.events {
		if _, ok := w.Case(r.events[i].topic); ok {
			return i
		}
	}
	return -1
}

// publish makes progress (when not nil) the run's published progress.
func (r *run) publish(progress []byte) {
	if progress != nil {
		r.rec.Progress = clone(progress)
	}
}

// setWait registers w as r's wait, replacing any earlier one.
func (s *Store) setWait(r *run, w *storage.Wait) {
	s.clearWait(r)
	r.rec.Wait = cloneWait(w)
	for _, topic := range w.Topics() {
		m := s.waits[topic]
		if m == nil {
			m = make(map[string]*run)
			s.waits[topic] = m
		}
		m[r.rec.ID] = r
	}
}

// clearWait removes r's wait, if any, from r and from the wait index.
func (s *Store) clearWait(r *run) {
	w := r.rec.Wait
	if w == nil {
		return
	}
	r.rec.Wait = nil
	for _, topic := range w.Topics() {
		if m := s.waits[topic]; m != nil {
			delete(m, r.rec.ID)
			if len(m) == 0 {
				delete(s.waits, topic)
			}
		}
	}
}
