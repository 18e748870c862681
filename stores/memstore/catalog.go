package memstore

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/stemflow/stem/storage"
)

// PutCatalog records workflow and event types and queues, replacing
// earlier records of the same name or topic.
func (s *Store) PutCatalog(ctx context.Context, c storage.Catalog) error {
	if err := c.Validate(); err != nil {
		return refuse(err)
	}
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	for _, w := range c.Workflows {
		w.InputSchema, w.OutputSchema = cloneJSON(w.InputSchema), cloneJSON(w.OutputSchema)
		w.Retention = cloneDuration(w.Retention)
		w.Attributes = cloneDecls(w.Attributes)
		s.workflows[w.Name] = w
	}
	for _, e := range c.Events {
		e.PayloadSchema = cloneJSON(e.PayloadSchema)
		s.eventTypes[e.Topic] = e
	}
	for _, q := range c.Queues {
		s.queueTypes[q.Name] = q
	}
	return nil
}

// GetCatalog returns every recorded workflow, event type and queue, sorted
// by name and topic.
func (s *Store) GetCatalog(ctx context.Context) (storage.Catalog, error) {
	if err := s.lock(ctx); err != nil {
		return storage.Catalog{}, err
	}
	defer s.mu.Unlock()
	var c storage.Catalog
	for _, w := range s.workflows {
		w.InputSchema, w.OutputSchema = cloneJSON(w.InputSchema), cloneJSON(w.OutputSchema)
		w.Retention = cloneDuration(w.Retention)
		w.Attributes = cloneDecls(w.Attributes)
		c.Workflows = append(c.Workflows, w)
	}
	for _, e := range s.eventTypes {
		e.PayloadSchema = cloneJSON(e.PayloadSchema)
		c.Events = append(c.Events, e)
	}
	slices.SortFunc(c.Workflows, func(a, b storage.WorkflowType) int { return strings.Compare(a.Name, b.Name) })
	for _, q := range s.queueTypes {
		c.Queues = append(c.Queues, q)
	}
	slices.SortFunc(c.Events, func(a, b storage.EventType) int { return strings.Compare(a.Topic, b.Topic) })
	slices.SortFunc(c.Queues, func(a, b storage.QueueType) int { return strings.Compare(a.Name, b.Name) })
	return c, nil
}

func cloneJSON(m json.RawMessage) json.RawMessage {
	return json.RawMessage(clone(m))
}

func cloneDuration(d *time.Duration) *time.Duration {
	if d == nil {
		return nil
	}
	c := *d
	return &c
}

// cloneDecls copies a workflow's attribute declarations; none is nil.
func cloneDecls(d []storage.AttrDecl) []storage.AttrDecl {
	if len(d) == 0 {
		return nil
	}
	return slices.Clone(d)
}
