package sqlitestore

import (
	"context"
	"encoding/json"
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
	var ids []string
	err := s.write(ctx, "emit", func(w *wtx) (err error) {
		ids, err = w.emit(req, s.now().UnixNano())
		return err
	})
	if err != nil {
		return nil, err
	}
	return ids, nil
}

// emit is Emit in the writing transaction, at now: it returns the IDs of
// the runs it delivered to.
func (w *wtx) emit(req storage.EmitRequest, now int64) ([]string, error) {
	var waiting []waiter
	if err := w.query(emitQuery, func(r row) error {
		wt, err := scanWaiter(r)
		waiting = append(waiting, wt)
		return err
	}, req.Topic); err != nil {
		return nil, err
	}
	var ids []string
	for _, wt := range waiting {
		c, ok := wt.wait.Case(req.Topic)
		if !ok {
			return nil, fmt.Errorf("run %q waits on topic %q by wait_topics, but no case of its wait has it", wt.id, req.Topic)
		}
		if err := w.deliver(wt, c, req.Payload, now); err != nil {
			return nil, err
		}
		ids = append(ids, wt.id)
	}
	return ids, nil
}

// emitQuery selects the runs waiting on topic ?1, by ID, with the columns
// scanWaiter reads: those whose wait's first case has it, by
// runs_wait_topic, and those with it in a further case, by wait_topics.
// Topics are distinct across a wait's cases, so no run comes twice.
const emitQuery = `SELECT id, status, ref, execution, ` + waitCols + ` FROM runs WHERE wait_topic = ?1
	UNION ALL
	SELECT r.id, r.status, r.ref, r.execution, r.wait_key, r.wait_topic, r.wait_kind, r.wait_deadline, r.wait_also
		FROM wait_topics t JOIN runs r ON r.ref = t.run_ref WHERE t.topic = ?1
	ORDER BY 1`

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

// waiter is a run and its wait (nil: none).
type waiter struct {
	ref       int64
	execution int64
	id        string
	status    storage.RunStatus
	wait      *storage.Wait
}

// scanWaiter reads id, status, ref, execution and waitCols.
func scanWaiter(r row) (waiter, error) {
	wt := waiter{id: r.str(0), status: storage.RunStatus(r.str(1)), ref: r.int64(2), execution: r.int64(3)}
	var err error
	if wt.wait, err = scanWait(r, 4); err != nil {
		err = fmt.Errorf("run %q: %w", wt.id, err)
	}
	return wt, err
}

// sendEvent delivers ev to its run if a case of the run's wait has the
// topic, and buffers it for the run otherwise.
func (w *wtx) sendEvent(ev storage.Event, now int64) (bool, error) {
	var wt waiter
	var scanErr error
	found, err := w.queryRow(`SELECT id, status, ref, execution, `+waitCols+` FROM runs WHERE id = ?1`, func(r row) {
		wt, scanErr = scanWaiter(r)
	}, ev.RunID)
	if err == nil {
		err = scanErr
	}
	if err != nil {
		return false, err
	}
	if !found {
		return false, storage.ErrRunNotFound
	}
	if wt.status.Finished() {
		return false, fmt.Errorf("%w: send an event to a %s run", storage.ErrInvalidState, wt.status)
	}
	return w.deliverOrBuffer(wt, ev.Topic, ev.Payload, now)
}

// deliverOrBuffer delivers payload on topic to the unfinished run wt if a
// case of its wait has the topic, and buffers it for the run otherwise;
// delivered reports which. SendEvent and SendUpdate deliver with it.
func (w *wtx) deliverOrBuffer(wt waiter, topic string, payload []byte, now int64) (delivered bool, err error) {
	if c, ok := wt.wait.Case(topic); ok {
		return true, w.deliver(wt, c, payload, now)
	}
	_, err = w.exec(`INSERT INTO events (run_ref, topic, payload, created_at) VALUES (?1, ?2, ?3, ?4)`,
		wt.ref, topic, bytesArg(payload), now)
	return false, err
}

// deliver writes payload as the checkpoint of the case c of the run's
// wait, removes the whole wait and makes a waiting run queued (a paused
// one stays paused), ready now.
func (w *wtx) deliver(wt waiter, c storage.WaitCase, payload []byte, now int64) error {
	written, err := w.insertCheckpoint(wt.ref, wt.execution, &storage.Checkpoint{Key: c.Key, Kind: c.DeliveryKind(), Output: payload}, nil, now)
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
			`+clearWait+`,
			updated_at = ?2
		WHERE ref = ?1`, wt.ref, now, written)
	if wt.status == storage.StatusWaiting || wt.status == storage.StatusQueued {
		w.wake = true
	}
	return err
}

// takeBuffered consumes the run's oldest buffered event of a topic of the
// wait's cases and writes its payload as the checkpoint of that case's key,
// of its kind, in the run's execution exec; found reports whether there was
// one, key the case's key.
func (w *wtx) takeBuffered(ref, exec int64, wt *storage.Wait, now int64) (key string, found bool, err error) {
	// Each topic's oldest by the index events_run_topic; the oldest of
	// those wins.
	var evID int64
	var c storage.WaitCase
	for _, wc := range wt.Cases() {
		var id int64
		ok, err := w.queryRow(`SELECT id FROM events WHERE run_ref = ?1 AND topic = ?2 ORDER BY id LIMIT 1`,
			func(r row) { id = r.int64(0) }, ref, wc.Topic)
		if err != nil {
			return "", false, err
		}
		if ok && (!found || id < evID) {
			evID, c, found = id, wc, true
		}
	}
	if !found {
		return "", false, nil
	}
	var payload []byte
	if _, err := w.queryRow(`DELETE FROM events WHERE id = ?1 RETURNING payload`, func(r row) { payload = r.bytes(0) }, evID); err != nil {
		return "", false, err
	}
	if _, err := w.insertCheckpoint(ref, exec, &storage.Checkpoint{Key: c.Key, Kind: c.DeliveryKind(), Output: payload}, nil, now); err != nil {
		return "", false, err
	}
	return c.Key, true, nil
}

// caseKeys returns the keys of the wait's cases as a JSON array, for
// json_each.
func caseKeys(wt *storage.Wait) string {
	keys := make([]string, 0, 1+len(wt.Also))
	for _, c := range wt.Cases() {
		keys = append(keys, c.Key)
	}
	b, _ := json.Marshal(keys) // strings only: cannot fail
	return string(b)
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
