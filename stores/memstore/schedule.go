package memstore

import (
	"context"
	"errors"

	"github.com/stemflow/stem/storage"
)

var errTodo = errors.New("memstore: not implemented yet")

// WriteSchedule implements storage.Store.
func (s *Store) WriteSchedule(ctx context.Context, w storage.ScheduleWrite) (storage.ScheduleWriteResult, error) {
	return storage.ScheduleWriteResult{}, errTodo
}

// GetSchedule implements storage.Store.
func (s *Store) GetSchedule(ctx context.Context, id string) (storage.Schedule, error) {
	return storage.Schedule{}, errTodo
}

// ListSchedules implements storage.Store.
func (s *Store) ListSchedules(ctx context.Context, q storage.ScheduleQuery) (storage.SchedulePage, error) {
	return storage.SchedulePage{}, nil
}

// DeleteSchedule implements storage.Store.
func (s *Store) DeleteSchedule(ctx context.Context, id string) error { return errTodo }

// Purge implements storage.Store.
func (s *Store) Purge(ctx context.Context, req storage.PurgeRequest) (storage.PurgeResult, error) {
	return storage.PurgeResult{}, errTodo
}

// QueueStats implements storage.Store.
func (s *Store) QueueStats(ctx context.Context, queues []string) ([]storage.QueueStats, error) {
	return nil, errTodo
}
