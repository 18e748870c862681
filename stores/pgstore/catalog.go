package pgstore

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stemflow/stem/storage"
)

// PutCatalog upserts the workflow types by name and the event types by
// topic, in one implicit transaction (one round trip). A name or topic given
// twice keeps its last record.
func (s *Store) PutCatalog(ctx context.Context, c storage.Catalog) error {
	const op = "put catalog"
	if err := s.check(op); err != nil {
		return err
	}
	if err := c.Validate(); err != nil {
		return fmt.Errorf("pgstore: %w", err)
	}
	b := &pgx.Batch{}
	if ws := lastByName(c.Workflows, func(w storage.WorkflowType) string { return w.Name }); len(ws) > 0 {
		var (
			names   = make([]string, len(ws))
			vers    = make([]int32, len(ws))
			ins     = make([][]byte, len(ws))
			outs    = make([][]byte, len(ws))
			workers = make([]string, len(ws))
			updated = make([]time.Time, len(ws))
		)
		for i, w := range ws {
			names[i], vers[i], ins[i], outs[i] = w.Name, int32(w.Version), w.InputSchema, w.OutputSchema
			workers[i], updated[i] = w.Worker, w.UpdatedAt
		}
		b.Queue(s.q.putWorkflows, names, vers, ins, outs, workers, updated)
	}
	if es := lastByName(c.Events, func(e storage.EventType) string { return e.Topic }); len(es) > 0 {
		var (
			topics  = make([]string, len(es))
			schemas = make([][]byte, len(es))
			workers = make([]string, len(es))
			updated = make([]time.Time, len(es))
		)
		for i, e := range es {
			topics[i], schemas[i], workers[i], updated[i] = e.Topic, e.PayloadSchema, e.Worker, e.UpdatedAt
		}
		b.Queue(s.q.putEvents, topics, schemas, workers, updated)
	}
	if b.Len() == 0 {
		return nil
	}
	err := s.retrying(ctx, func() error { return s.pool.SendBatch(ctx, b).Close() })
	return s.wrap(op, err)
}

// lastByName keeps the last of the items sharing a name, in their order,
// so that one upsert statement never touches a row twice.
func lastByName[T any](items []T, name func(T) string) []T {
	last := make(map[string]int, len(items))
	for i, it := range items {
		last[name(it)] = i
	}
	if len(last) == len(items) {
		return items
	}
	out := make([]T, 0, len(last))
	for i, it := range items {
		if last[name(it)] == i {
			out = append(out, it)
		}
	}
	return out
}

// GetCatalog returns every workflow and event type, read in one implicit
// transaction and sorted by name and topic (byte order, whatever the
// database's collation).
func (s *Store) GetCatalog(ctx context.Context) (storage.Catalog, error) {
	const op = "get catalog"
	if err := s.check(op); err != nil {
		return storage.Catalog{}, err
	}
	var c storage.Catalog
	b := &pgx.Batch{}
	b.Queue(s.q.getWorkflows).Query(func(rows pgx.Rows) error {
		return forRows(rows, func() error {
			var (
				w        storage.WorkflowType
				version  int32
				in, outS []byte
			)
			if err := rows.Scan(&w.Name, &version, &in, &outS, &w.Worker, &w.UpdatedAt); err != nil {
				return err
			}
			w.Version, w.InputSchema, w.OutputSchema = int(version), json.RawMessage(in), json.RawMessage(outS)
			c.Workflows = append(c.Workflows, w)
			return nil
		})
	})
	b.Queue(s.q.getEvents).Query(func(rows pgx.Rows) error {
		return forRows(rows, func() error {
			var (
				e      storage.EventType
				schema []byte
			)
			if err := rows.Scan(&e.Topic, &schema, &e.Worker, &e.UpdatedAt); err != nil {
				return err
			}
			e.PayloadSchema = json.RawMessage(schema)
			c.Events = append(c.Events, e)
			return nil
		})
	})
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return storage.Catalog{}, s.wrap(op, err)
	}
	sort.Slice(c.Workflows, func(i, j int) bool { return c.Workflows[i].Name < c.Workflows[j].Name })
	sort.Slice(c.Events, func(i, j int) bool { return c.Events[i].Topic < c.Events[j].Topic })
	return c, nil
}
