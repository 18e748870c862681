package redisstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/stemflow/stem/storage"
)

// A prefix holds a Stem store when its version key (v) names the version
// of the key layout, which the Open (or New) of a worker writes when it is
// missing. A prefix without one but with the all-runs index or a catalog
// holds a store written before version keys, of layout 1.
//
// A worker's Open of a store of layout 1, 2 or 3 upgrades it in place to the
// current layout in one script (scripts/upgrade.lua), which is atomic, so
// that any number of workers may open it at once; workers of the older
// code must be stopped first, since they would go on writing the older
// layout. Opened with OpenExisting, which writes nothing, an older store
// is refused with storage.ErrNotStore saying so.

// storeVersion is the version of the key layout this code reads and
// writes: 2 added queues (lanes, levels, per-queue indexes), finished
// indexes, buffered events' topics and schedules to layout 1. Workflow
// versions came within layout 2 and need no upgrade: a run of version 0,
// as every run stored before is, keeps its keys, and only the runs of
// other versions have lanes and versions sets of their own (doc.go); nor
// do runs' headers, a field a run stored before simply lacks. 3 puts
// every queued run in its queue's set of queued runs by ReadyAt
// (qf:<queue>), where 2 put only those queued before they were due, so
// that QueueStats finds the oldest ready run there: the upgrade adds the
// others. Start keys came within layout 3 and need no upgrade: their
// records (sk:<wf>:<key>) and the run hash's sk field are new, and a
// store without them has no key held. 4 adds the indexes of runs by
// creation (ic, icw:<wf>), which the upgrade fills with every run stored
// before; search attributes came with it and need no upgrade (a run
// stored before has none: no at field, no entry in their indexes).
const storeVersion = 4

// upgradable reports whether a store of layout version v (as its version
// key holds it) is one a worker's Open upgrades.
func upgradable(v string) bool { return v == "1" || v == "2" || v == "3" }

// version is the key that marks the prefix as a Stem store and holds its
// layout's version (v).
func (k keyspace) version() string { return k.prefix + "v" }

var upgradeScript = newScript("upgrade")

func init() { allScripts = append(allScripts, upgradeScript) }

// checkStore looks for the store under the prefix. Without existing it
// marks the prefix as a store when it is not one yet, and upgrades a
// store of layout 1, 2 or 3; with existing it only reads, and a prefix with
// no store, or with one of an older layout, is storage.ErrNotStore. A
// store of a version this code does not know is storage.ErrNotStore
// either way.
func (s *Store) checkStore(ctx context.Context, existing bool) error {
	op := "open store under prefix " + strconv.Quote(s.keys.prefix)
	got, err := s.client.Get(ctx, s.keys.version()).Result()
	switch {
	case err == nil:
		if got == strconv.Itoa(storeVersion) {
			return nil
		}
		if !upgradable(got) {
			return s.unknownVersion(op, got)
		}
	case !errors.Is(err, redis.Nil):
		var re redis.Error
		if errors.As(err, &re) {
			// WRONGTYPE: some other application's key.
			return fmt.Errorf("redisstore: %s on %s: %s is not a Stem version key (%v): %w", op, s.host, s.keys.version(), err, storage.ErrNotStore)
		}
		return fmt.Errorf("redisstore: %s: %w", op, s.onHost(err))
	}
	if got == "" && s.shard == 0 {
		n, err := s.client.Exists(ctx, s.keys.prefix+"shards").Result()
		if err != nil {
			return fmt.Errorf("redisstore: %s: %w", op, s.onHost(err))
		}
		if n > 0 {
			return fmt.Errorf("redisstore: %s on %s: the prefix holds a cluster store (its key %sshards): open it with a redis+cluster:// URL (OpenCluster or NewCluster): %w",
				op, s.host, s.keys.prefix, storage.ErrNotStore)
		}
	}
	if existing {
		if got == "" {
			n, err := s.client.Exists(ctx, s.keys.indexAll(), s.keys.catalogWorkflows(), s.keys.catalogEvents()).Result()
			if err != nil {
				return fmt.Errorf("redisstore: %s: %w", op, s.onHost(err))
			}
			if n == 0 {
				return fmt.Errorf("redisstore: %s on %s: no Stem store there (a worker's Open creates it): %w", op, s.host, storage.ErrNotStore)
			}
		}
		return fmt.Errorf("redisstore: %s on %s: the store has key layout %s and this code reads layout %d; open it once without OpenExisting (as a worker does), which upgrades it in place, after stopping the workers of the older code: %w",
			op, s.host, cmp.Or(got, "1"), storeVersion, storage.ErrNotStore)
	}
	v, err := upgradeScript.Run(ctx, s.client, []string{s.keys.version()},
		s.keys.prefix, s.clockArg(), storeVersion, globEscape(s.keys.prefix)).Result()
	if err != nil {
		return fmt.Errorf("redisstore: %s: upgrading the store to key layout %d: %w", op, storeVersion, s.onHost(err))
	}
	if list, ok := v.([]any); ok && len(list) == 2 && list[0] == "VERSION" {
		return s.unknownVersion(op, str(list[1]))
	}
	return nil
}

// unknownVersion is the error of a store whose version key holds a
// version this code does not know.
func (s *Store) unknownVersion(op, got string) error {
	return fmt.Errorf("redisstore: %s on %s: its version key %s holds %q, and this code knows version %d; upgrade the code: %w",
		op, s.host, s.keys.version(), got, storeVersion, storage.ErrNotStore)
}

// globEscape escapes the characters a SCAN pattern gives meaning to.
func globEscape(s string) string {
	var b strings.Builder
	for _, c := range s {
		if strings.ContainsRune(`*?[]\`, c) {
			b.WriteByte('\\')
		}
		b.WriteRune(c)
	}
	return b.String()
}
