package sqlitestore

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/stemflow/stem/storage"
)

// PutCatalog records the workflows and event types an engine serves,
// replacing earlier records of the same name or topic; see storage.Store.
func (s *Store) PutCatalog(ctx context.Context, c storage.Catalog) error {
	if err := c.Validate(); err != nil {
		return fmt.Errorf("sqlitestore: %w", err)
	}
	return s.write(ctx, "put catalog", func(w *wtx) error {
		for _, wf := range c.Workflows {
			if _, err := w.exec(`INSERT INTO workflow_types (name, version, input_schema, output_schema, worker, updated_at)
				VALUES (?1, ?2, ?3, ?4, ?5, ?6)
				ON CONFLICT (name) DO UPDATE SET version = excluded.version, input_schema = excluded.input_schema,
					output_schema = excluded.output_schema, worker = excluded.worker, updated_at = excluded.updated_at`,
				wf.Name, wf.Version, bytesArg(wf.InputSchema), bytesArg(wf.OutputSchema), wf.Worker, nanos(wf.UpdatedAt)); err != nil {
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

// GetCatalog returns every recorded workflow and event type, sorted by name
// and topic.
func (s *Store) GetCatalog(ctx context.Context) (storage.Catalog, error) {
	var c storage.Catalog
	err := s.read(ctx, "get catalog", true, func(rc *conn) error {
		c = storage.Catalog{}
		if err := rc.query(`SELECT name, version, input_schema, output_schema, worker, updated_at FROM workflow_types ORDER BY name`, func(r row) error {
			c.Workflows = append(c.Workflows, storage.WorkflowType{
				Name:         r.str(0),
				Version:      int(r.int64(1)),
				InputSchema:  json.RawMessage(r.bytes(2)),
				OutputSchema: json.RawMessage(r.bytes(3)),
				Worker:       r.str(4),
				UpdatedAt:    r.time(5),
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
