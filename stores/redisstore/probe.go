package redisstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stemflow/stem/storage"
)

var _ storage.CommitProber = (*Store)(nil)

// probeScript is scripts/probe.lua: one INCR, the cheapest script call.
var probeScript = newScript("probe")

func init() { allScripts = append(allScripts, probeScript) }

// probe is the counter a running ProbeCommits increments (probe); it is
// deleted when the probe returns.
func (k keyspace) probe() string { return k.prefix + "probe" }

// ProbeCommits measures the server's ceiling for this store (see
// storage.CommitProber): EVALSHA calls of a script that increments one
// counter, the floor under every one of the store's scripts, from conns
// connections at once (at most the client's pool size) for d. What a call
// costs beyond the round trip is the server's to say: with appendfsync
// always, each is written to the append-only file before it is answered.
// The counter is the key probe under the store's prefix, deleted before
// ProbeCommits returns; the script stays in the server's script cache, as
// the store's others do.
func (s *Store) ProbeCommits(ctx context.Context, conns int, d time.Duration) (p storage.CommitProbe, err error) {
	const op = "probe commits"
	if err := s.checkOpen(); err != nil {
		return p, fmt.Errorf("redisstore: %s: %w", op, err)
	}
	if err := storage.CheckProbe(conns, d); err != nil {
		return p, fmt.Errorf("redisstore: %w", err)
	}
	if c, ok := s.client.(*redis.Client); ok {
		conns = min(conns, c.Options().PoolSize)
	}
	key := s.keys.probe()
	defer func() {
		// Deleted whatever ended the probe, the caller's context included.
		cctx, cancel := s.bound(context.WithoutCancel(ctx))
		defer cancel()
		if derr := s.client.Del(cctx, key).Err(); derr != nil {
			err = errors.Join(err, fmt.Errorf("redisstore: %s: delete %s: %w", op, key, s.wrapErr(derr)))
		}
	}()
	p, err = storage.MeasureCommits(ctx, conns, d, func(ctx context.Context, _ int) error {
		_, err := s.run(ctx, probeScript, []string{key})
		return err
	})
	if err != nil {
		return storage.CommitProbe{}, fmt.Errorf("redisstore: %s: %w", op, err)
	}
	p.Commit = "trivial EVALSHA calls"
	return p, nil
}
