package sqlitestore

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/stemflow/stem/storage"
)

// PutWorker records a worker, stamped with the store's clock, replacing
// its earlier record, and deletes the records that expired, in one write.
func (s *Store) PutWorker(ctx context.Context, req storage.PutWorkerRequest) error {
	if err := req.Validate(); err != nil {
		return fmt.Errorf("sqlitestore: %w", err)
	}
	wk := req.Worker
	queues, workflows := encodeNames(wk.Queues), encodeNames(wk.Workflows)
	keyIDs, missing := encodeNames(nonEmpty(wk.KeyIDs)), encodeNames(nonEmpty(wk.MissingKeyIDs))
	return s.write(ctx, "put worker", func(w *wtx) error {
		now := s.now()
		n := now.UnixNano()
		if _, err := w.exec(`DELETE FROM workers WHERE expires_at <= ?1`, n); err != nil {
			return err
		}
		_, err := w.exec(`INSERT INTO workers (id, host, pid, started_at, queues, workflows, in_flight, heartbeat, expires_at, key_ids, missing_key_ids)
			VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)
			ON CONFLICT (id) DO UPDATE SET host = excluded.host, pid = excluded.pid, started_at = excluded.started_at,
				queues = excluded.queues, workflows = excluded.workflows, in_flight = excluded.in_flight,
				heartbeat = excluded.heartbeat, expires_at = excluded.expires_at,
				key_ids = excluded.key_ids, missing_key_ids = excluded.missing_key_ids`,
			wk.ID, wk.Host, wk.PID, wk.StartedAt.UnixNano(), queues, workflows, wk.InFlight, n, now.Add(req.TTL).UnixNano(), keyIDs, missing)
		return err
	})
}

// RemoveWorker deletes a worker's record, if any.
func (s *Store) RemoveWorker(ctx context.Context, id string) error {
	if err := storage.ValidateRemoveWorker(id); err != nil {
		return fmt.Errorf("sqlitestore: %w", err)
	}
	return s.write(ctx, "remove worker", func(w *wtx) error {
		_, err := w.exec(`DELETE FROM workers WHERE id = ?1`, id)
		return err
	})
}

// ListWorkers returns the live workers by ID. It is a read, on a read
// connection: it passes over the expired records, which the next
// PutWorker deletes, so that listing the workers never waits for the
// writer and works on a store opened ReadOnly.
func (s *Store) ListWorkers(ctx context.Context) ([]storage.Worker, error) {
	var out []storage.Worker
	err := s.read(ctx, "list workers", false, func(c *conn) error {
		out = []storage.Worker{}
		return c.query(`SELECT id, host, pid, started_at, queues, workflows, in_flight, heartbeat, expires_at, key_ids, missing_key_ids
			FROM workers WHERE expires_at > ?1 ORDER BY id`, func(r row) error {
			wk := storage.Worker{
				ID:        r.str(0),
				Host:      r.str(1),
				PID:       int(r.int64(2)),
				StartedAt: r.time(3),
				InFlight:  int(r.int64(6)),
				Heartbeat: r.time(7),
				ExpiresAt: r.time(8),
			}
			var err error
			if wk.Queues, err = decodeNames(r, 4); err == nil {
				wk.Workflows, err = decodeNames(r, 5)
			}
			if err == nil {
				wk.KeyIDs, err = decodeNames(r, 9)
			}
			if err == nil {
				wk.MissingKeyIDs, err = decodeNames(r, 10)
			}
			if err != nil {
				return fmt.Errorf("worker %q: %w", wk.ID, err)
			}
			out = append(out, wk)
			return nil
		}, s.now().UnixNano())
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// encodeNames returns a worker's queues or workflows as stored: a JSON
// array, NULL for nil (an empty list stays empty).
func encodeNames(names []string) any {
	if names == nil {
		return nil
	}
	b, _ := json.Marshal(names) // strings only: cannot fail
	return string(b)
}

// decodeNames reads the queues or workflows column at i: nil when NULL.
func decodeNames(r row, i int) ([]string, error) {
	if r.isNull(i) {
		return nil, nil
	}
	var names []string
	if err := json.Unmarshal(r.bytes(i), &names); err != nil {
		return nil, fmt.Errorf("stored names: %w", err)
	}
	return names, nil
}

// nonEmpty is ids, or nil when it is empty: a worker's key IDs are stored
// as NULL when it lists none.
func nonEmpty(ids []string) []string {
	if len(ids) == 0 {
		return nil
	}
	return ids
}
