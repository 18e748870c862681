package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/stemflow/stem/storage"
)

// A prefix holds a Stem store when its version key (v) names the version
// of the key layout, which the Open (or New) of a worker writes when it is
// missing. A prefix without one but with the all-runs index or a catalog
// holds a store written before version keys: it is a store too, and a
// worker's Open gives it its version key.

// storeVersion is the version of the key layout this code reads and
// writes.
const storeVersion = 1

// version is the key that marks the prefix as a Stem store and holds its
// layout's version (v).
func (k keyspace) version() string { return k.prefix + "v" }

// checkStore looks for the store under the prefix. Without existing it
// marks the prefix as a store when it is not one yet; with existing it only
// reads, and a prefix with no store is storage.ErrNotStore. A store of a
// version this code does not know is storage.ErrNotStore either way.
func (s *Store) checkStore(ctx context.Context, existing bool) error {
	op := "open store under prefix " + strconv.Quote(s.keys.prefix)
	got, err := s.client.Get(ctx, s.keys.version()).Result()
	switch {
	case err == nil:
		if got != strconv.Itoa(storeVersion) {
			return fmt.Errorf("redisstore: %s on %s: its version key %s holds %q, and this code knows version %d; upgrade the code: %w",
				op, s.host, s.keys.version(), got, storeVersion, storage.ErrNotStore)
		}
		return nil
	case !errors.Is(err, redis.Nil):
		var re redis.Error
		if errors.As(err, &re) {
			// WRONGTYPE: some other application's key.
			return fmt.Errorf("redisstore: %s on %s: %s is not a Stem version key (%v): %w", op, s.host, s.keys.version(), err, storage.ErrNotStore)
		}
		return fmt.Errorf("redisstore: %s: %w", op, s.onHost(err))
	}
	if existing {
		n, err := s.client.Exists(ctx, s.keys.indexAll(), s.keys.catalogWorkflows(), s.keys.catalogEvents()).Result()
		if err != nil {
			return fmt.Errorf("redisstore: %s: %w", op, s.onHost(err))
		}
		if n == 0 {
			return fmt.Errorf("redisstore: %s on %s: no Stem store there (a worker's Open creates it): %w", op, s.host, storage.ErrNotStore)
		}
		return nil
	}
	if err := s.client.SetNX(ctx, s.keys.version(), storeVersion, 0).Err(); err != nil {
		return fmt.Errorf("redisstore: %s: marking the prefix as a store: %w", op, s.onHost(err))
	}
	return nil
}
