package redisstore

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/stemflow/stem/storage"
)

// PutCatalog implements storage.Store: one script upserts every workflow
// type into the catalog's workflows hash (cat:w, by name), every event
// type into its events hash (cat:e, by topic) and every queue into its
// queues hash (cat:q, by name). Within one call, the last record of a
// name or topic wins.
func (s *Store) PutCatalog(ctx context.Context, c storage.Catalog) error {
	if err := c.Validate(); err != nil {
		return fmt.Errorf("redisstore: %w", err)
	}
	if err := s.checkOpen(); err != nil {
		return err
	}
	if len(c.Workflows) == 0 && len(c.Events) == 0 && len(c.Queues) == 0 {
		return nil
	}
	args := make([]any, 0, 2+2*(len(c.Workflows)+len(c.Events)+len(c.Queues)))
	args = append(args, len(c.Workflows), len(c.Events))
	for _, w := range c.Workflows {
		enc, err := encodeCatalogEntry(catalogEntry{
			Version: w.Version, Input: w.InputSchema, Output: w.OutputSchema,
			Queue: w.Queue, Retention: w.Retention, Timeout: w.Timeout,
			Attributes: w.Attributes, Worker: w.Worker, Updated: w.UpdatedAt,
		})
		if err != nil {
			return err
		}
		args = append(args, w.Name, enc)
	}
	for _, e := range c.Events {
		enc, err := encodeCatalogEntry(catalogEntry{Payload: e.PayloadSchema, Worker: e.Worker, Updated: e.UpdatedAt})
		if err != nil {
			return err
		}
		args = append(args, e.Topic, enc)
	}
	for _, q := range c.Queues {
		enc, err := encodeCatalogEntry(catalogEntry{
			Concurrency: q.Concurrency, PartitionConcurrency: q.PartitionConcurrency,
			Rate: q.Rate, RatePeriod: q.RatePeriod, Worker: q.Worker, Updated: q.UpdatedAt,
		})
		if err != nil {
			return err
		}
		args = append(args, q.Name, enc)
	}
	keys := []string{s.keys.catalogWorkflows(), s.keys.catalogEvents(), s.keys.catalogQueues()}
	v, err := s.run(ctx, putCatalogScript, keys, args...)
	if err != nil {
		return fmt.Errorf("redisstore: put catalog: %w", err)
	}
	_, err = status("put catalog", "", v)
	return err
}

// GetCatalog implements storage.Store.
func (s *Store) GetCatalog(ctx context.Context) (storage.Catalog, error) {
	var c storage.Catalog
	keys := []string{s.keys.catalogWorkflows(), s.keys.catalogEvents(), s.keys.catalogQueues()}
	v, err := s.run(ctx, getCatalogScript, keys)
	if err != nil {
		return c, fmt.Errorf("redisstore: get catalog: %w", err)
	}
	list, ok := v.([]any)
	if !ok || len(list) != 3 {
		return c, fmt.Errorf("redisstore: get catalog: unexpected reply")
	}
	var hashes [3]map[string]string
	for i := range hashes {
		if hashes[i], err = pairsToMap(list[i]); err != nil {
			return c, err
		}
	}
	for name, enc := range hashes[0] {
		e, err := decodeCatalogEntry(name, enc)
		if err != nil {
			return c, err
		}
		c.Workflows = append(c.Workflows, storage.WorkflowType{
			Name: name, Version: e.Version,
			InputSchema: json.RawMessage(e.Input), OutputSchema: json.RawMessage(e.Output),
			Queue: e.Queue, Retention: e.Retention, Timeout: e.Timeout,
			Attributes: e.Attributes, Worker: e.Worker, UpdatedAt: e.Updated,
		})
	}
	for topic, enc := range hashes[1] {
		e, err := decodeCatalogEntry(topic, enc)
		if err != nil {
			return c, err
		}
		c.Events = append(c.Events, storage.EventType{
			Topic: topic, PayloadSchema: json.RawMessage(e.Payload), Worker: e.Worker, UpdatedAt: e.Updated,
		})
	}
	for name, enc := range hashes[2] {
		e, err := decodeCatalogEntry(name, enc)
		if err != nil {
			return c, err
		}
		c.Queues = append(c.Queues, storage.QueueType{
			Queue: storage.Queue{
				Name: name, Concurrency: e.Concurrency, PartitionConcurrency: e.PartitionConcurrency,
				Rate: e.Rate, RatePeriod: e.RatePeriod,
			},
			Worker: e.Worker, UpdatedAt: e.Updated,
		})
	}
	slices.SortFunc(c.Workflows, func(a, b storage.WorkflowType) int { return cmp.Compare(a.Name, b.Name) })
	slices.SortFunc(c.Events, func(a, b storage.EventType) int { return cmp.Compare(a.Topic, b.Topic) })
	slices.SortFunc(c.Queues, func(a, b storage.QueueType) int { return cmp.Compare(a.Name, b.Name) })
	return c, nil
}
