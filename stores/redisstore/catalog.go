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
// type into the catalog's workflows hash (cat:w, by name) and every event
// type into its events hash (cat:e, by topic). Within one call, the last
// record of a name or topic wins.
func (s *Store) PutCatalog(ctx context.Context, c storage.Catalog) error {
	if err := c.Validate(); err != nil {
		return fmt.Errorf("redisstore: %w", err)
	}
	if err := s.checkOpen(); err != nil {
		return err
	}
	if len(c.Workflows) == 0 && len(c.Events) == 0 {
		return nil
	}
	args := make([]any, 0, 1+2*(len(c.Workflows)+len(c.Events)))
	args = append(args, len(c.Workflows))
	for _, w := range c.Workflows {
		enc, err := encodeCatalogEntry(catalogEntry{
			Version: w.Version, Input: w.InputSchema, Output: w.OutputSchema,
			Worker: w.Worker, Updated: w.UpdatedAt,
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
	v, err := s.run(ctx, putCatalogScript, []string{s.keys.catalogWorkflows(), s.keys.catalogEvents()}, args...)
	if err != nil {
		return fmt.Errorf("redisstore: put catalog: %w", err)
	}
	_, err = status("put catalog", "", v)
	return err
}

// GetCatalog implements storage.Store.
func (s *Store) GetCatalog(ctx context.Context) (storage.Catalog, error) {
	var c storage.Catalog
	v, err := s.run(ctx, getCatalogScript, []string{s.keys.catalogWorkflows(), s.keys.catalogEvents()})
	if err != nil {
		return c, fmt.Errorf("redisstore: get catalog: %w", err)
	}
	list, ok := v.([]any)
	if !ok || len(list) != 2 {
		return c, fmt.Errorf("redisstore: get catalog: unexpected reply")
	}
	wfs, err := pairsToMap(list[0])
	if err != nil {
		return c, err
	}
	evs, err := pairsToMap(list[1])
	if err != nil {
		return c, err
	}
	for name, enc := range wfs {
		e, err := decodeCatalogEntry(name, enc)
		if err != nil {
			return c, err
		}
		c.Workflows = append(c.Workflows, storage.WorkflowType{
			Name: name, Version: e.Version,
			InputSchema: json.RawMessage(e.Input), OutputSchema: json.RawMessage(e.Output),
			Worker: e.Worker, UpdatedAt: e.Updated,
		})
	}
	for topic, enc := range evs {
		e, err := decodeCatalogEntry(topic, enc)
		if err != nil {
			return c, err
		}
		c.Events = append(c.Events, storage.EventType{
			Topic: topic, PayloadSchema: json.RawMessage(e.Payload), Worker: e.Worker, UpdatedAt: e.Updated,
		})
	}
	slices.SortFunc(c.Workflows, func(a, b storage.WorkflowType) int { return cmp.Compare(a.Name, b.Name) })
	slices.SortFunc(c.Events, func(a, b storage.EventType) int { return cmp.Compare(a.Topic, b.Topic) })
	return c, nil
}
