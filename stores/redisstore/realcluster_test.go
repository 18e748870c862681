package redisstore

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stemflow/stem/internal/crashtest"
	"github.com/stemflow/stem/internal/enginetest"
	"github.com/stemflow/stem/internal/testserver"
	"github.com/stemflow/stem/storage"
	"github.com/stemflow/stem/stores/storetest"
)

// The tests in this file run on a Redis Cluster of three masters with one
// replica each, started from redis-server and redis-cli on free ports:
// one shared by the tests that only use it, and private ones for those
// that kill, fail over or reshard its nodes.

var shared struct {
	once sync.Once
	c    *testserver.Cluster
	err  error
}

// sharedCluster returns the package's shared cluster, starting it on first
// use (TestMain stops it), or skips the test when the binaries are absent.
func sharedCluster(t testing.TB) *testserver.Cluster {
	t.Helper()
	shared.once.Do(func() { shared.c, shared.err = testserver.StartRedisCluster("") })
	if errors.Is(shared.err, testserver.ErrNoRedisBinaries) {
		t.Skipf("no Redis Cluster: %v", shared.err)
	}
	if shared.err != nil {
		t.Fatalf("starting a Redis Cluster: %v", shared.err)
	}
	return shared.c
}

// stopSharedCluster stops the shared cluster if a test started it.
func stopSharedCluster() {
	if shared.c != nil {
		shared.c.Close()
	}
}

// cleanupClusterPrefix deletes every key under prefix on every master when
// the test ends. SCAN is fine here: it is test cleanup.
func cleanupClusterPrefix(tb testing.TB, c *redis.ClusterClient, prefix string) {
	tb.Cleanup(func() {
		ctx := context.Background()
		err := c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
			iter := m.Scan(ctx, 0, prefix+"*", 1000).Iterator()
			for iter.Next(ctx) {
				m.Unlink(ctx, iter.Val())
			}
			return iter.Err()
		})
		if err != nil {
			tb.Logf("cleanup of %s: %v", prefix, err)
		}
	})
}

// newClusterStore opens a Cluster store of n shards on a fresh prefix of
// the cluster, through a client of its own; it is closed and its keys
// deleted at cleanup.
func newClusterStore(tb testing.TB, rc *testserver.Cluster, clock storage.Clock, n, wait int) *Cluster {
	tb.Helper()
	prefix := testPrefix(tb)
	cleanupClusterPrefix(tb, rc.Client(), prefix)
	s, err := OpenCluster(context.Background(), rc.URL(), ClusterOptions{Shards: n, Options: Options{Prefix: prefix, Clock: clock, Logger: quietLogger(), WaitReplicas: wait}})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = s.Close() })
	return s
}

// TestRealClusterConformance runs the suite on a three-master cluster:
// sixteen shards, every write waiting for its replica, and one shard,
// which has the whole contract.
func TestRealClusterConformance(t *testing.T) {
	rc := sharedCluster(t)
	for _, n := range []int{16, 1} {
		t.Run("shards="+strconv.Itoa(n), func(t *testing.T) {
			storetest.Run(t, func(t *testing.T, clock storage.Clock) storage.Store {
				return newClusterStore(t, rc, clock, n, min(n-1, 1))
			})
		})
	}
}

// TestRealClusterScenarios runs engines through every end-to-end scenario
// on the cluster, sixteen shards.
func TestRealClusterScenarios(t *testing.T) {
	rc := sharedCluster(t)
	enginetest.Run(t, func(t *testing.T) storage.Store {
		return newClusterStore(t, rc, nil, 16, 0)
	})
}

// clusterCrashConfig is a crash test on a fresh prefix of cluster rc,
// sixteen shards, each write waiting for wait replicas.
func clusterCrashConfig(t *testing.T, rc *testserver.Cluster, wait int) crashtest.Config {
	return clusterCrashConfigAt(t, rc, rc.URL(), wait)
}

// clusterCrashConfigAt is clusterCrashConfig with the store opened at url,
// a URL of rc with the store's parameters (shards=1, say).
func clusterCrashConfigAt(t *testing.T, rc *testserver.Cluster, url string, wait int) crashtest.Config {
	prefix := testPrefix(t)
	cleanupClusterPrefix(t, rc.Client(), prefix)
	cfg := crashConfigOf(func() (storage.Store, error) {
		return OpenCluster(context.Background(), url, ClusterOptions{Options: Options{Prefix: prefix, Logger: quietLogger(), WaitReplicas: wait}})
	}, envCrashPrefix+"="+prefix, envCrashCluster+"="+url, envCrashWait+"="+strconv.Itoa(wait))
	// A cluster's calls wait for its bus and, with wait, for replicas: a
	// longer lease than one server's keeps slow calls from expiring it.
	cfg.Lease = time.Second
	cfg.Timeout = 2 * time.Minute
	return cfg
}

// TestRealClusterChaosKill: four worker processes share 1000 ten-step runs
// on the cluster (sixteen shards) while random ones are killed with
// SIGKILL and replaced: every run completes once, every step key has
// exactly one checkpoint, every step ran. Under -short, 300 runs.
func TestRealClusterChaosKill(t *testing.T) {
	crashtest.Run(t, withKills(clusterCrashConfig(t, sharedCluster(t), 0)))
}

// TestRealClusterFailover: three worker processes share 300 ten-step runs
// on a private cluster whose every write waits for its replica; a third of
// the way through, a master is killed with SIGKILL, its replica promoted,
// and the old master started again as a replica. No worker is restarted.
// Every run completes once with one checkpoint per step key, and no step
// began again after its checkpoint was acknowledged (crashtest checks it
// from the workers' logs): the steps that ran again, counted in the log,
// are those whose checkpoints were never acknowledged.
func TestRealClusterFailover(t *testing.T) {
	rc := testserver.RedisCluster(t)
	cfg := clusterCrashConfig(t, rc, 1)
	cfg.Runs = 300
	cfg.Disrupt = func(t *testing.T) {
		ctx := context.Background()
		masters, err := rc.MasterAddrs(ctx)
		if err != nil {
			t.Fatal(err)
		}
		victim := masters[0]
		if err := rc.KillMaster(ctx, victim); err != nil {
			t.Fatal(err)
		}
		if err := rc.WaitFailover(ctx, victim); err != nil {
			t.Fatal(err)
		}
		if err := rc.Restart(ctx, victim); err != nil {
			t.Fatal(err)
		}
	}
	crashtest.Run(t, cfg)
}

// TestRealClusterReshard: three worker processes share 1000 ten-step runs
// on a private cluster while the slots of two shards, with their keys,
// move from their master to another (as redis-cli --cluster reshard moves
// each slot: importing, migrating, MIGRATE in batches, the new owner told
// to every master): every run completes once, with one checkpoint per
// step key, and no step began again after its checkpoint was
// acknowledged.
func TestRealClusterReshard(t *testing.T) {
	rc := testserver.RedisCluster(t)
	cfg := clusterCrashConfig(t, rc, 0)
	cfg.Runs = 1000
	cfg.StepDuration = 20 * time.Millisecond
	cfg.Disrupt = func(t *testing.T) {
		ctx := context.Background()
		masters, err := rc.MasterAddrs(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, i := range []int{0, DefaultShards - 1} {
			slot := testserver.SlotOf(shardPrefix("", i, DefaultShards))
			from, err := rc.MasterOfSlot(ctx, slot)
			if err != nil {
				t.Fatal(err)
			}
			to := masters[0]
			if to == from {
				to = masters[1]
			}
			if err := rc.MoveSlot(ctx, slot, to); err != nil {
				t.Fatal(err)
			}
		}
	}
	crashtest.Run(t, cfg)
}

// TestRealClusterChaosKeys: singleton and debounce keys hold across four
// processes starting runs at once on the cluster, sixteen shards
// (crashtest.RunKeys): each key's runs are judged on its shard.
func TestRealClusterChaosKeys(t *testing.T) {
	crashtest.RunKeys(t, clusterCrashConfig(t, sharedCluster(t), 0))
}

// TestRealClusterChaosSchedule: four worker processes, killed at random,
// start one run per tick of a schedule on the cluster, sixteen shards
// (crashtest.RunFourScheduleWorkers).
func TestRealClusterChaosSchedule(t *testing.T) {
	crashtest.RunFourScheduleWorkers(t, clusterCrashConfig(t, sharedCluster(t), 0))
}

// TestRealClusterFrozenMaster: while a master answers nothing (SIGSTOP),
// a call to a run on one of its shards fails within the store's call
// timeout, naming it, and a claim still takes the runs of the shards on
// other masters; thawed (and failed over meanwhile), everything answers
// again and no run was lost.
func TestRealClusterFrozenMaster(t *testing.T) {
	rc := testserver.RedisCluster(t, testserver.ClusterArgs("--cluster-require-full-coverage", "no"))
	ctx := context.Background()
	prefix := testPrefix(t)
	// Every write waits for its replica: the creates must survive the
	// frozen master's failover.
	s, err := OpenCluster(ctx, rc.URL(), ClusterOptions{Shards: 6, Options: Options{Prefix: prefix, Logger: quietLogger(), CallTimeout: time.Second, WaitReplicas: 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var ids []string
	for i := range 60 {
		ids = append(ids, "run-"+strconv.Itoa(i))
	}
	for _, id := range ids {
		if _, err := s.CreateRuns(ctx, []storage.NewRun{{ID: id, Workflow: "wf"}}); err != nil {
			t.Fatal(err)
		}
	}
	victim, err := rc.MasterOfSlot(ctx, testserver.SlotOf(s.ShardPrefixes()[0]))
	if err != nil {
		t.Fatal(err)
	}
	if err := rc.Freeze(victim); err != nil {
		t.Fatal(err)
	}
	var frozen, live string
	for _, id := range ids {
		m, _ := rc.MasterOfSlot(ctx, testserver.SlotOf(s.ShardPrefixes()[s.home(id)]))
		if m == victim && frozen == "" {
			frozen = id
		}
		if m != victim && live == "" {
			live = id
		}
	}
	_, err = s.GetRun(ctx, frozen)
	var na *storage.NoAnswerError
	if !errors.As(err, &na) {
		t.Fatalf("GetRun of a run on the frozen master: %v, want no answer within the call timeout", err)
	}
	if _, err := s.GetRun(ctx, live); err != nil {
		t.Fatalf("GetRun of a run on a live master: %v", err)
	}
	got, err := s.Claim(ctx, storage.ClaimRequest{Owner: "w", Workflows: []string{"wf"}, Limit: 100, LeaseFor: time.Minute})
	if err != nil || len(got) == 0 {
		t.Fatalf("a claim while a master is frozen: %d runs, %v; want the live shards' runs", len(got), err)
	}
	if err := rc.WaitFailover(ctx, victim); err != nil {
		t.Fatal(err)
	}
	if err := rc.Thaw(victim); err != nil {
		t.Fatal(err)
	}
	if err := rc.WaitHealthy(ctx); err != nil {
		t.Fatal(err)
	}
	claimed := len(got)
	testserver.AnswersAgain(t, "redis cluster", func() error {
		more, err := s.Claim(ctx, storage.ClaimRequest{Owner: "w", Workflows: []string{"wf"}, Limit: 100, LeaseFor: time.Minute})
		claimed += len(more)
		return err
	})
	for claimed < len(ids) {
		more, err := s.Claim(ctx, storage.ClaimRequest{Owner: "w", Workflows: []string{"wf"}, Limit: 100, LeaseFor: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if len(more) == 0 {
			t.Fatalf("claimed %d of %d runs after the thaw", claimed, len(ids))
		}
		claimed += len(more)
	}
}

// TestRealClusterChaosFreeze: one of four workers on the cluster (sixteen
// shards) is frozen with SIGSTOP for three leases while the others take
// its runs over, then thawed: every write it sends under a superseded
// lease is rejected, and the runs still complete once each.
func TestRealClusterChaosFreeze(t *testing.T) {
	cfg := clusterCrashConfig(t, sharedCluster(t), 0)
	cfg.Processes = 4
	cfg.Runs = 300
	cfg.StepDuration = 20 * time.Millisecond
	cfg.Freeze = true
	crashtest.Run(t, cfg)
}

// TestRealClusterChaosQueueLimit: on a cluster store of one shard, which
// has queue limits, a limit of 3 holds across four worker processes
// killed at random (crashtest.RunQueueLimit).
func TestRealClusterChaosQueueLimit(t *testing.T) {
	rc := sharedCluster(t)
	crashtest.RunQueueLimit(t, clusterCrashConfigAt(t, rc, rc.URL()+"?shards=1", 0))
}
