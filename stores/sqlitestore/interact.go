package sqlitestore

import (
	"context"
	"errors"

	"github.com/stemflow/stem/storage"
)

// errInteract stands for updates and streams until this store carries them.
var errInteract = errors.New("sqlitestore: updates and streams are not implemented yet")

// SendUpdate implements storage.Interactor.
func (s *Store) SendUpdate(ctx context.Context, req storage.UpdateRequest) (storage.UpdateResult, error) {
	return storage.UpdateResult{}, errInteract
}

// GetUpdate implements storage.Interactor.
func (s *Store) GetUpdate(ctx context.Context, runID, id string) (storage.UpdateRecord, error) {
	return storage.UpdateRecord{}, errInteract
}

// ListUpdates implements storage.Interactor.
func (s *Store) ListUpdates(ctx context.Context, q storage.UpdatesQuery) ([]storage.UpdateRecord, error) {
	return nil, errInteract
}

// ReadStream implements storage.Interactor.
func (s *Store) ReadStream(ctx context.Context, q storage.StreamQuery) (storage.StreamPage, error) {
	return storage.StreamPage{}, errInteract
}

// ListStreams implements storage.Interactor.
func (s *Store) ListStreams(ctx context.Context, runID string) ([]storage.StreamInfo, error) {
	return nil, errInteract
}
