package redisstore

import (
	"context"
	"crypto/rand"
	"fmt"

	"github.com/stemflow/stem/storage"
)

// Emit implements storage.Store. The call carries a random operation ID, so
// that the script, should the client send it again, returns its first reply
// instead of delivering twice.
func (s *Store) Emit(ctx context.Context, req storage.EmitRequest) ([]string, error) {
	if err := req.Validate(); err != nil {
		return nil, fmt.Errorf("redisstore: %w", err)
	}
	v, err := s.run(ctx, emitScript, []string{s.keys.waiting(req.Topic)}, req.Topic, mark(req.Payload), rand.Text())
	if err != nil {
		return nil, fmt.Errorf("redisstore: emit %q: %w", req.Topic, err)
	}
	list, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("redisstore: emit: unexpected reply")
	}
	if len(list) == 0 {
		return nil, nil
	}
	ids := make([]string, 0, len(list))
	for _, x := range list {
		ids = append(ids, str(x))
	}
	return ids, nil
}

// SendEvent implements storage.Store. Like Emit, it carries an operation
// ID, so a repeated call never buffers or delivers the event twice.
func (s *Store) SendEvent(ctx context.Context, ev storage.Event) (bool, error) {
	return s.sendEvent(ctx, ev, rand.Text())
}

// sendEvent is SendEvent under the operation ID op: the same op again
// within its time (a minute; a day for one starting "ob:") returns the
// first reply and delivers nothing.
func (s *Store) sendEvent(ctx context.Context, ev storage.Event, op string) (bool, error) {
	if err := ev.Validate(); err != nil {
		return false, fmt.Errorf("redisstore: %w", err)
	}
	v, err := s.run(ctx, sendScript, []string{s.keys.run(ev.RunID)}, ev.RunID, ev.Topic, mark(ev.Payload), op)
	if err != nil {
		return false, fmt.Errorf("redisstore: send event to %q: %w", ev.RunID, err)
	}
	list, err := status("send event", ev.RunID, v)
	if err != nil {
		return false, err
	}
	if len(list) < 2 {
		return false, fmt.Errorf("redisstore: send event: unexpected reply")
	}
	n, _ := list[1].(int64)
	return n == 1, nil
}

// notifyArgs are the script arguments of a Complete's or Terminate's
// Notify, delivered as by SendEvent in the same script: its run ID ("" for
// none), topic and marked payload.
func notifyArgs(ev *storage.Event) []any {
	if ev == nil {
		return []any{"", "", ""}
	}
	return []any{ev.RunID, ev.Topic, mark(ev.Payload)}
}
