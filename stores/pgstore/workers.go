package pgstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/stemflow/stem/storage"
)

// PutWorker records a worker, stamped with the store's clock, and deletes
// the records that expired, in one implicit transaction (one round trip).
// The record is written first, so the deletion, which skips the records
// other statements hold, never waits while holding a lock: concurrent puts
// and lists never wait for each other in a cycle.
func (s *Store) PutWorker(ctx context.Context, req storage.PutWorkerRequest) error {
	const op = "put worker"
	if err := s.check(op); err != nil {
		return err
	}
	if err := req.Validate(); err != nil {
		return fmt.Errorf("pgstore: %w", err)
	}
	w := req.Worker
	queues, workflows := w.Queues, w.Workflows
	if queues == nil {
		queues = []string{}
	}
	if workflows == nil {
		workflows = []string{}
	}
	err := s.retrying(ctx, func() error {
		now := s.clock()
		b := &pgx.Batch{}
		b.Queue(s.q.putWorker, now, w.ID, w.Host, int64(w.PID), w.StartedAt, queues, workflows, int64(w.InFlight), micros(req.TTL), orNull(w.KeyIDs), orNull(w.MissingKeyIDs))
		b.Queue(s.q.expireWorkers, now)
		return s.pool.SendBatch(ctx, b).Close()
	})
	return s.wrap(op, err)
}

// RemoveWorker deletes a worker's record, if any.
func (s *Store) RemoveWorker(ctx context.Context, id string) error {
	const op = "remove worker"
	if err := s.check(op); err != nil {
		return err
	}
	if err := storage.ValidateRemoveWorker(id); err != nil {
		return fmt.Errorf("pgstore: %w", err)
	}
	_, err := s.pool.Exec(ctx, s.q.removeWorker, id)
	return s.wrap(op, err)
}

// ListWorkers deletes the expired records and reads the live ones by ID,
// in one implicit transaction (one round trip), both on one reading of
// the clock.
func (s *Store) ListWorkers(ctx context.Context) ([]storage.Worker, error) {
	const op = "list workers"
	if err := s.check(op); err != nil {
		return nil, err
	}
	var out []storage.Worker
	err := s.retrying(ctx, func() error {
		out = []storage.Worker{}
		now := s.clock()
		b := &pgx.Batch{}
		b.Queue(s.q.expireWorkers, now)
		b.Queue(s.q.listWorkers, now)
		br := s.pool.SendBatch(ctx, b)
		defer br.Close()
		if _, err := br.Exec(); err != nil {
			return err
		}
		if err := eachRow(br, func(rows pgx.Rows) error {
			var (
				w            storage.Worker
				pid, running int64
			)
			if err := rows.Scan(&w.ID, &w.Host, &pid, &w.StartedAt, &w.Queues, &w.Workflows, &running, &w.Heartbeat, &w.ExpiresAt, &w.KeyIDs, &w.MissingKeyIDs); err != nil {
				return err
			}
			w.PID, w.InFlight = int(pid), int(running)
			if len(w.Queues) == 0 {
				w.Queues = nil
			}
			if len(w.Workflows) == 0 {
				w.Workflows = nil
			}
			out = append(out, w)
			return nil
		}); err != nil {
			return err
		}
		return br.Close()
	})
	if err != nil {
		return nil, s.wrap(op, err)
	}
	return out, nil
}

// orNull is a worker's key IDs as stored: NULL when it lists none.
func orNull(ids []string) any {
	if len(ids) == 0 {
		return nil
	}
	return ids
}
