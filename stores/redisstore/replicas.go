package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// DefaultWaitTimeout is how long a write waits for Options.WaitReplicas
// when Options.WaitTimeout is zero.
const DefaultWaitTimeout = time.Second

// errNotReplicated is a write that its master applied and acknowledged
// but fewer replicas than Options.WaitReplicas confirmed in time: a
// failover now could lose it. The call fails, so the engine repeats it
// (every write of the store is safe to repeat, or fenced).
var errNotReplicated = errors.New("redisstore: the write reached too few replicas in time")

// runWaited runs a script that writes, followed by WAIT on the same
// connection, so that the call returns once s.waitReplicas replicas of the
// master hold the write (see Options.WaitReplicas).
func (s *Store) runWaited(ctx context.Context, sc *redis.Script, keys []string, argv []any) (any, error) {
	var res any
	err := s.waited(ctx, keys[0], func(p redis.Pipeliner) func() error {
		cmd := p.EvalSha(ctx, sc.Hash(), keys, argv...)
		return func() error {
			res = cmd.Val()
			return cmd.Err()
		}
	}, sc)
	return res, err
}

// waited sends the commands queue adds to a pipeline on the connection of
// the master that holds key, then WAIT, and returns the commands' error
// (read by the function queue returns), or errNotReplicated. A reply that
// the slot moved reloads the cluster's map and sends again, as does a
// script the server does not hold (after loading sc, when given): in
// both cases nothing ran.
func (s *Store) waited(ctx context.Context, key string, queue func(redis.Pipeliner) func() error, sc *redis.Script) error {
	for attempt := 0; ; attempt++ {
		var conn redis.Cmdable = s.client
		cc, isCluster := s.client.(*redis.ClusterClient)
		if isCluster {
			node, err := cc.MasterForKey(ctx, key)
			if err != nil {
				return err
			}
			conn = node
		}
		p := conn.Pipeline()
		read := queue(p)
		w := p.Do(ctx, "wait", s.waitReplicas, max(s.waitTimeout.Milliseconds(), 1))
		_, _ = p.Exec(ctx)
		err := read()
		if err != nil && attempt < 3 {
			msg := err.Error()
			switch {
			case strings.HasPrefix(msg, "NOSCRIPT") && sc != nil:
				if err := sc.Load(ctx, conn).Err(); err != nil {
					return err
				}
				continue
			case isCluster && (strings.HasPrefix(msg, "MOVED ") || strings.HasPrefix(msg, "ASK ") || strings.HasPrefix(msg, "TRYAGAIN") || strings.HasPrefix(msg, "CLUSTERDOWN")):
				cc.ReloadState(ctx)
				select {
				case <-ctx.Done():
					return err
				case <-time.After(time.Duration(attempt+1) * 50 * time.Millisecond):
				}
				continue
			}
		}
		if err != nil {
			return err
		}
		n, werr := w.Int64()
		if werr != nil {
			return fmt.Errorf("%w: WAIT: %v", errNotReplicated, werr)
		}
		if n < int64(s.waitReplicas) {
			return fmt.Errorf("%w: %d of %d within %v", errNotReplicated, n, s.waitReplicas, s.waitTimeout)
		}
		return nil
	}
}

// write sends one plain write of the store's (not a script) on key,
// bounded and reported as hcall does, and followed by WAIT when the store
// waits for replicas.
func (s *Store) write(ctx context.Context, op, key string, queue func(redis.Pipeliner) func() error) error {
	return s.hcall(ctx, op, func(ctx context.Context) error {
		if s.waitReplicas > 0 {
			return s.waited(ctx, key, queue, nil)
		}
		p := s.client.Pipeline()
		read := queue(p)
		_, _ = p.Exec(ctx)
		return read()
	})
}
