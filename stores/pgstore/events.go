package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stemflow/stem/storage"
)

// Emit delivers an event to every run waiting on the topic, in one
// statement; see the emit query in queries.go.
func (s *Store) Emit(ctx context.Context, req storage.EmitRequest) ([]string, error) {
	const op = "emit"
	if err := s.check(op); err != nil {
		return nil, err
	}
	if err := req.Validate(); err != nil {
		return nil, fmt.Errorf("pgstore: %w", err)
	}
	args := []any{s.clock(), req.Topic, req.Payload}
	if s.notify {
		args = append(args, s.channel)
	}
	var ids []string
	err := s.retrying(ctx, func() error {
		ids = nil
		rows, err := s.pool.Query(ctx, s.q.emit, args...)
		if err != nil {
			return err
		}
		ids, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	if err != nil {
		return nil, s.wrap(op, err)
	}
	if len(ids) > 0 {
		s.poke()
	}
	return ids, nil
}

// SendEvent delivers an event to one run, or buffers it for the run's next
// wait on the topic.
func (s *Store) SendEvent(ctx context.Context, ev storage.Event) (bool, error) {
	const op = "send event"
	if err := s.check(op); err != nil {
		return false, err
	}
	if err := ev.Validate(); err != nil {
		return false, fmt.Errorf("pgstore: %w", err)
	}
	var delivered, ready bool
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		r, err := s.lockExisting(ctx, tx, ev.RunID)
		if err != nil {
			return err
		}
		if r.Status.Finished() {
			return fmt.Errorf("run %q is %s: %w", ev.RunID, r.Status, storage.ErrInvalidState)
		}
		delivered, ready, err = s.send(ctx, tx, r, ev)
		return err
	})
	if err != nil {
		return false, s.wrap(op, err)
	}
	if ready {
		s.poke()
	}
	return delivered, nil
}

// deliverNotify delivers a finishing run's event inside its transaction. A
// target that does not exist or has finished cannot take it and the event
// is dropped: a child's completion must not fail because its parent is
// gone. ready reports that the target became claimable now.
func (s *Store) deliverNotify(ctx context.Context, tx pgx.Tx, ev storage.Event, now time.Time) (ready bool, err error) {
	r, ok, err := s.lock(ctx, tx, ev.RunID)
	if err != nil || !ok || r.Status.Finished() {
		return false, err
	}
	r.now = now
	_, ready, err = s.send(ctx, tx, r, ev)
	return ready, err
}

// send delivers ev to the run locked in tx if a case of its wait is on
// the topic: the payload becomes that case's checkpoint, of the case's
// kind, in the run's current execution (unless the key has one there), the
// whole wait is removed and the run woken. Otherwise the event is
// buffered.
func (s *Store) send(ctx context.Context, tx pgx.Tx, r locked, ev storage.Event) (delivered, ready bool, err error) {
	c, ok := r.Wait.Case(ev.Topic)
	if !ok {
		_, err := tx.Exec(ctx, s.q.bufferEvent, r.now, r.ID, ev.Topic, ev.Payload)
		return false, false, err
	}
	tag, err := tx.Exec(ctx, s.q.insertCkpt, r.now, r.ID, c.Key, string(c.DeliveryKind()), ev.Payload, nil, r.Execution, nil)
	if err != nil {
		return false, false, err
	}
	if _, err := tx.Exec(ctx, s.q.deliver, r.now, r.ID, tag.RowsAffected() == 1); err != nil {
		return false, false, err
	}
	ready = r.Status == storage.StatusWaiting || r.Status == storage.StatusQueued
	if ready {
		if err := s.notifyTx(ctx, tx); err != nil {
			return false, false, err
		}
	}
	return true, ready, nil
}
