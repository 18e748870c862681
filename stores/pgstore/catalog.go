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

// PutCatalog upserts the workflow types by name, the event types by topic
// and the queues by name, in one implicit transaction (one round trip). A
// name or topic given twice keeps its last record. A workflow's declared
// search attributes are a column of JSON text, in the order declared.
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
			queues  = make([]string, len(ws))
			keep    = make([]*int64, len(ws))
			timeout = make([]*int64, len(ws))
			attrs   = make([]*string, len(ws))
		)
		for i, w := range ws {
			names[i], vers[i], ins[i], outs[i] = w.Name, int32(w.Version), w.InputSchema, w.OutputSchema
			workers[i], updated[i], queues[i] = w.Worker, w.UpdatedAt, w.Queue
			if w.Retention != nil {
				ns := int64(*w.Retention)
				keep[i] = &ns
			}
			if w.Timeout > 0 { // NULL: no timeout
				ns := int64(w.Timeout)
				timeout[i] = &ns
			}
			if len(w.Attributes) > 0 { // NULL: none declared
				js, err := json.Marshal(w.Attributes)
				if err != nil {
					return fmt.Errorf("pgstore: %s: workflow %q: attributes: %w", op, w.Name, err)
				}
				str := string(js)
				attrs[i] = &str
			}
		}
		b.Queue(s.q.putWorkflows, names, vers, ins, outs, workers, updated, queues, keep, timeout, attrs)
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
	if qs := lastByName(c.Queues, func(q storage.QueueType) string { return q.Name }); len(qs) > 0 {
		var (
			names   = make([]string, len(qs))
			conc    = make([]int32, len(qs))
			part    = make([]int32, len(qs))
			rate    = make([]int32, len(qs))
			period  = make([]int64, len(qs))
			workers = make([]string, len(qs))
			updated = make([]time.Time, len(qs))
		)
		for i, q := range qs {
			names[i], conc[i], part[i], rate[i] = q.Name, int32(q.Concurrency), int32(q.PartitionConcurrency), int32(q.Rate)
			period[i], workers[i], updated[i] = int64(q.RatePeriod), q.Worker, q.UpdatedAt
		}
		b.Queue(s.q.putQueues, names, conc, part, rate, period, workers, updated)
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

// GetCatalog returns every workflow type, event type and queue, read in one implicit
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
				keep     *int64
				timeout  *int64
				attrs    *string
			)
			if err := rows.Scan(&w.Name, &version, &in, &outS, &w.Worker, &w.UpdatedAt, &w.Queue, &keep, &timeout, &attrs); err != nil {
				return err
			}
			if attrs != nil {
				if err := json.Unmarshal([]byte(*attrs), &w.Attributes); err != nil {
					return fmt.Errorf("workflow %q: decode attributes: %w", w.Name, err)
				}
				if len(w.Attributes) == 0 {
					w.Attributes = nil
				}
			}
			if timeout != nil {
				w.Timeout = time.Duration(*timeout)
			}
			if keep != nil {
				d := time.Duration(*keep)
				w.Retention = &d
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
	b.Queue(s.q.getQueues).Query(func(rows pgx.Rows) error {
		return forRows(rows, func() error {
			var (
				q                storage.QueueType
				conc, part, rate int32
				period           int64
			)
			if err := rows.Scan(&q.Name, &conc, &part, &rate, &period, &q.Worker, &q.UpdatedAt); err != nil {
				return err
			}
			q.Concurrency, q.PartitionConcurrency, q.Rate, q.RatePeriod = int(conc), int(part), int(rate), time.Duration(period)
			c.Queues = append(c.Queues, q)
			return nil
		})
	})
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return storage.Catalog{}, s.wrap(op, err)
	}
	sort.Slice(c.Workflows, func(i, j int) bool { return c.Workflows[i].Name < c.Workflows[j].Name })
	sort.Slice(c.Events, func(i, j int) bool { return c.Events[i].Topic < c.Events[j].Topic })
	sort.Slice(c.Queues, func(i, j int) bool { return c.Queues[i].Name < c.Queues[j].Name })
	return c, nil
}
