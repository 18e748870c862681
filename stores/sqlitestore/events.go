package sqlitestore

import (
	"context"
	"errors"
	"fmt"

	"github.com/stemflow/stem/storage"
)

// Emit delivers an event to every run waiting on the topic; see
// storage.Store.
func (s *Store) Emit(ctx context.Context, req storage.EmitRequest) ([]string, error) {
	if err := req.Validate(); err != nil {
		return nil, fmt.Errorf("sqlitestore: %w", err)
	}
	topic, payload := req.Topic, req.Payload
	var ids []string
	err := s.write(ctx, "emit", func(w *wtx) error {
		ids = nil
		n := s.now().UnixNano()
		var waiting []waiter
		if err := w.query(`SELECT id, status, wait_key, wait_kind, ref, execution FROM runs WHERE wait_topic = ?1 ORDER BY id`, func(r row) error {
			waiting = append(waiting, waiter{id: r.str(0), status: storage.RunStatus(r.str(1)), wait: scanWaitKey(r, 2), ref: r.int64(4), execution: r.int64(5)})
			return nil
		}, topic); err != nil {
			return err
		}
		for _, wt := range waiting {
			if err := w.deliver(wt, payload, n); err != nil {
				return err
			}
			ids = append(ids, wt.id)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return ids, nil
}

// SendEvent delivers an event to one run, or buffers it; see storage.Store.
func (s *Store) SendEvent(ctx context.Context, ev storage.Event) (bool, error) {
	if err := ev.Validate(); err != nil {
		return false, fmt.Errorf("sqlitestore: %w", err)
	}
	var delivered bool
	err := s.write(ctx, "send event", func(w *wtx) error {
		var err error
		delivered, err = w.sendEvent(ev, s.now().UnixNano())
		return err
	})
	if err != nil {
		return false, err
	}
	return delivered, nil
}

// waiter is a run waiting on a topic.
type waiter struct {
	ref       int64
	execution int64
	id        string
	status    storage.RunStatus
	// wait holds the wait's Key and Kind.
	wait storage.Wait
}

// scanWaitKey reads wait_key and wait_kind from i on: what a delivery
// needs of a wait.
func scanWaitKey(r row, i int) storage.Wait {
	return storage.Wait{Key: r.str(i), Kind: storage.CheckpointKind(r.str(i + 1))}
}

// sendEvent delivers ev to its run if the run waits on the topic, and
// buffers it for the run otherwise.
func (w *wtx) sendEvent(ev storage.Event, now int64) (bool, error) {
	var wt waiter
	var topic *string
	found, err := w.queryRow(`SELECT status, wait_key, wait_kind, wait_topic, ref, execution FROM runs WHERE id = ?1`, func(r row) {
		wt = waiter{id: ev.RunID, status: storage.RunStatus(r.str(0)), wait: scanWaitKey(r, 1), ref: r.int64(4), execution: r.int64(5)}
		if !r.isNull(3) {
			t := r.str(3)
			topic = &t
		}
	}, ev.RunID)
	if err != nil {
		return false, err
	}
	if !found {
		return false, storage.ErrRunNotFound
	}
	if wt.status.Finished() {
		return false, fmt.Errorf("%w: send an event to a %s run", storage.ErrInvalidState, wt.status)
	}
	if topic != nil && *topic == ev.Topic {
		return true, w.deliver(wt, ev.Payload, now)
	}
	_, err = w.exec(`INSERT INTO events (run_ref, topic, payload, created_at) VALUES (?1, ?2, ?3, ?4)`,
		wt.ref, ev.Topic, bytesArg(ev.Payload), now)
	return false, err
}

// deliver writes payload as the checkpoint of the run's wait, removes the
// wait and makes a waiting run queued (a paused one stays paused), ready
// now.
func (w *wtx) deliver(wt waiter, payload []byte, now int64) error {
	written, err := w.insertCheckpoint(wt.ref, wt.execution, &storage.Checkpoint{Key: wt.wait.Key, Kind: wt.wait.DeliveryKind(), Output: payload}, nil, now)
	if err != nil {
		return err
	}
	_, err = w.exec(`UPDATE runs SET
			status = iif(status = 'waiting', 'queued', status),
			ready_at = CASE
				WHEN status = 'paused' THEN ?2
				WHEN status IN ('waiting', 'queued') AND (ready_at IS NULL OR ready_at > ?2) THEN ?2
				ELSE ready_at END,
			recoveries = iif(?3, 0, recoveries),
			wait_key = NULL, wait_topic = NULL, wait_kind = NULL, wait_deadline = NULL,
			updated_at = ?2
		WHERE ref = ?1`, wt.ref, now, written)
	if wt.status == storage.StatusWaiting || wt.status == storage.StatusQueued {
		w.wake = true
	}
	return err
}

// takeBuffered consumes the run's oldest buffered event of the wait's topic
// and writes its payload as the checkpoint of the wait's key in the run's
// execution exec; found reports
// whether there was one.
func (w *wtx) takeBuffered(ref, exec int64, wt *storage.Wait, now int64) (found bool, err error) {
	var evID int64
	var payload []byte
	found, err = w.queryRow(`SELECT id, payload FROM events WHERE run_ref = ?1 AND topic = ?2 ORDER BY id LIMIT 1`,
		func(r row) { evID, payload = r.int64(0), r.bytes(1) }, ref, wt.Topic)
	if err != nil || !found {
		return false, err
	}
	if _, err := w.exec(`DELETE FROM events WHERE id = ?1`, evID); err != nil {
		return false, err
	}
	if _, err := w.insertCheckpoint(ref, exec, &storage.Checkpoint{Key: wt.Key, Kind: wt.DeliveryKind(), Output: payload}, nil, now); err != nil {
		return false, err
	}
	return true, nil
}

// deliverNotify delivers a finishing run's event to its target as SendEvent
// would. A target that no longer exists or has finished cannot take it; the
// event is dropped rather than keep the sender from finishing.
func (w *wtx) deliverNotify(ev *storage.Event, now int64) error {
	if ev == nil {
		return nil
	}
	_, err := w.sendEvent(*ev, now)
	if err != nil && (errors.Is(err, storage.ErrRunNotFound) || errors.Is(err, storage.ErrInvalidState)) {
		return nil
	}
	return err
}
