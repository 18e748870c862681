package sqlitestore

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/stemflow/stem/storage"
)

// PutCatalog records the workflows, queues and event types an engine
// serves, replacing earlier records of the same name or topic; see
// storage.Store.
func (s *Store) PutCatalog(ctx context.Context, c storage.Catalog) error {
	if err := c.Validate(); err != nil {
		return fmt.Errorf("sqlitestore: %w", err)
	}
	return s.write(ctx, "put catalog", func(w *wtx) error {
		for _, wf := range c.Workflows {
			var retention any
			if wf.Retention != nil {
				retention = int64(*wf.Retention)
			}
			var timeout any // NULL: no timeout
			if wf.Timeout > 0 {
				timeout = int64(wf.Timeout)
			}
			if _, err := w.exec(`INSERT INTO workflow_types (name, version, input_schema, output_schema, worker, updated_at, queue, retention, timeout, attributes)
				VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)
				ON CONFLICT (name) DO UPDATE SET version = excluded.version, input_schema = excluded.input_schema,
					output_schema = excluded.output_schema, worker = excluded.worker, updated_at = excluded.updated_at,
					queue = excluded.queue, retention = excluded.retention, timeout = excluded.timeout,
					attributes = excluded.attributes`,
				wf.Name, wf.Version, bytesArg(wf.InputSchema), bytesArg(wf.OutputSchema), wf.Worker, nanos(wf.UpdatedAt),
				wf.Queue, retention, timeout, encodeAttrDecls(wf.Attributes)); err != nil {
				return err
			}
		}
		for _, q := range c.Queues {
			if _, err := w.exec(`INSERT INTO queue_types (name, concurrency, partition_concurrency, rate, rate_period, worker, updated_at)
				VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
				ON CONFLICT (name) DO UPDATE SET concurrency = excluded.concurrency,
					partition_concurrency = excluded.partition_concurrency, rate = excluded.rate,
					rate_period = excluded.rate_period, worker = excluded.worker, updated_at = excluded.updated_at`,
				q.Name, q.Concurrency, q.PartitionConcurrency, q.Rate, int64(q.RatePeriod), q.Worker, nanos(q.UpdatedAt)); err != nil {
				return err
			}
		}
		for _, ev := range c.Events {
			if _, err := w.exec(`INSERT INTO event_types (topic, payload_schema, worker, updated_at)
				VALUES (?1, ?2, ?3, ?4)
				ON CONFLICT (topic) DO UPDATE SET payload_schema = excluded.payload_schema,
					worker = excluded.worker, updated_at = excluded.updated_at`,
				ev.Topic, bytesArg(ev.PayloadSchema), ev.Worker, nanos(ev.UpdatedAt)); err != nil {
				return err
			}
		}
		return nil
	})
}

// GetCatalog returns every recorded workflow, queue and event type, sorted
// by name and topic.
func (s *Store) GetCatalog(ctx context.Context) (storage.Catalog, error) {
	var c storage.Catalog
	err := s.read(ctx, "get catalog", true, func(rc *conn) error {
		c = storage.Catalog{}
		if err := rc.query(`SELECT name, version, input_schema, output_schema, worker, updated_at, queue, retention, timeout, attributes
			FROM workflow_types ORDER BY name`, func(r row) error {
			wt := storage.WorkflowType{
				Name:         r.str(0),
				Version:      int(r.int64(1)),
				InputSchema:  json.RawMessage(r.bytes(2)),
				OutputSchema: json.RawMessage(r.bytes(3)),
				Worker:       r.str(4),
				UpdatedAt:    r.time(5),
				Queue:        r.str(6),
			}
			if !r.isNull(7) {
				d := time.Duration(r.int64(7))
				wt.Retention = &d
			}
			if !r.isNull(8) {
				wt.Timeout = time.Duration(r.int64(8))
			}
			if !r.isNull(9) {
				if err := json.Unmarshal(r.bytes(9), &wt.Attributes); err != nil {
					return fmt.Errorf("workflow %q: stored attributes: %w", wt.Name, err)
				}
				if len(wt.Attributes) == 0 {
					wt.Attributes = nil
				}
			}
			c.Workflows = append(c.Workflows, wt)
			return nil
		}); err != nil {
			return err
		}
		if err := rc.query(`SELECT name, concurrency, partition_concurrency, rate, rate_period, worker, updated_at
			FROM queue_types ORDER BY name`, func(r row) error {
			c.Queues = append(c.Queues, storage.QueueType{
				Queue: storage.Queue{
					Name:                 r.str(0),
					Concurrency:          int(r.int64(1)),
					PartitionConcurrency: int(r.int64(2)),
					Rate:                 int(r.int64(3)),
					RatePeriod:           time.Duration(r.int64(4)),
				},
				Worker:    r.str(5),
				UpdatedAt: r.time(6),
			})
			return nil
		}); err != nil {
			return err
		}
		return rc.query(`SELECT topic, payload_schema, worker, updated_at FROM event_types ORDER BY topic`, func(r row) error {
			c.Events = append(c.Events, storage.EventType{
				Topic:         r.str(0),
				PayloadSchema: json.RawMessage(r.bytes(1)),
				Worker:        r.str(2),
				UpdatedAt:     r.time(3),
			})
			return nil
		})
	})
	if err != nil {
		return storage.Catalog{}, err
	}
	return c, nil
}

// encodeAttrDecls returns the attributes column of a workflow's declared
// search attributes: a JSON array in the order declared, NULL for none.
func encodeAttrDecls(decls []storage.AttrDecl) any {
	if len(decls) == 0 {
		return nil
	}
	b, _ := json.Marshal(decls) // strings only: cannot fail
	return string(b)
}
