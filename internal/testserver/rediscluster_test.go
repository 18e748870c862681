package testserver_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stemflow/stem/internal/testserver"
)

// clusterNode returns the node at addr as the cluster sees it.
func clusterNode(t *testing.T, cl *testserver.Cluster, addr string) testserver.ClusterNode {
	t.Helper()
	nodes, err := cl.Nodes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		if n.Addr == addr {
			return n
		}
	}
	t.Fatalf("no node %s in %+v", addr, nodes)
	panic("unreachable")
}

// replicaOf returns the address of a replica of the master at addr.
func replicaOf(t *testing.T, cl *testserver.Cluster, addr string) string {
	t.Helper()
	id := clusterNode(t, cl, addr).ID
	nodes, err := cl.Nodes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		if n.MasterID == id {
			return n.Addr
		}
	}
	t.Fatalf("master %s has no replica: %+v", addr, nodes)
	panic("unreachable")
}

// waitReplicated blocks until every master's writes so far are on at
// least one replica (WAIT), so that a failover loses none of them.
func waitReplicated(t *testing.T, c *redis.ClusterClient) {
	t.Helper()
	err := c.ForEachMaster(context.Background(), func(ctx context.Context, m *redis.Client) error {
		n, err := m.Wait(ctx, 1, 10*time.Second).Result()
		if err == nil && n < 1 {
			err = fmt.Errorf("WAIT on %s: acknowledged by %d replicas", m.Options().Addr, n)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// checkKeys fails the test unless every key k<i> for i in [from, to) holds
// "v<i>".
func checkKeys(t *testing.T, c *redis.ClusterClient, from, to int) {
	t.Helper()
	ctx := context.Background()
	for i := from; i < to; i++ {
		k := "k" + strconv.Itoa(i)
		if v, err := c.Get(ctx, k).Result(); err != nil || v != "v"+strconv.Itoa(i) {
			t.Fatalf("GET %s (slot %d) = %q, %v; want v%d", k, testserver.SlotOf(k), v, err, i)
		}
	}
}

// TestRedisClusterFailover: a cluster of three masters with a replica
// each serves keys across all slots; a killed master's replica takes
// over with every replicated key, writes work again, the killed node
// comes back as the new master's replica, and a manual failover gives it
// its slots back, with nothing lost.
func TestRedisClusterFailover(t *testing.T) {
	t.Parallel()
	cl := testserver.RedisCluster(t)
	ctx := context.Background()
	c := cl.Client()

	if got := len(cl.Addrs()); got != 6 {
		t.Fatalf("%d nodes, want 6", got)
	}
	if want := "redis+cluster://" + strings.Join(cl.Addrs(), ","); cl.URL() != want {
		t.Fatalf("URL() = %q, want %q", cl.URL(), want)
	}
	masters, err := cl.MasterAddrs(ctx)
	if err != nil || len(masters) != 3 {
		t.Fatalf("MasterAddrs() = %v, %v; want 3 masters", masters, err)
	}
	served := 0
	for _, m := range masters {
		for _, r := range clusterNode(t, cl, m).Slots {
			served += r.To - r.From + 1
		}
	}
	if served != testserver.ClusterSlots {
		t.Fatalf("the masters serve %d slots, want %d", served, testserver.ClusterSlots)
	}

	const keys = 1000
	slots := map[int]bool{}
	for i := range keys {
		k := "k" + strconv.Itoa(i)
		slots[testserver.SlotOf(k)] = true
		if err := c.Set(ctx, k, "v"+strconv.Itoa(i), 0).Err(); err != nil {
			t.Fatalf("SET %s: %v", k, err)
		}
	}
	waitReplicated(t, c)
	t.Logf("%d keys in %d slots", keys, len(slots))

	victim, err := cl.MasterOfSlot(ctx, testserver.SlotOf("k0"))
	if err != nil {
		t.Fatal(err)
	}
	heir := replicaOf(t, cl, victim)
	if err := cl.Kill(heir + "x"); err == nil {
		t.Fatal("Kill of an address that is no node: no error")
	}
	if err := cl.KillMaster(ctx, heir); err == nil {
		t.Fatalf("KillMaster of replica %s: no error", heir)
	}
	if err := cl.KillMaster(ctx, victim); err != nil {
		t.Fatal(err)
	}
	if err := cl.WaitFailover(ctx, victim); err != nil {
		t.Fatal(err)
	}
	if n := clusterNode(t, cl, heir); n.Role != "master" || len(n.Slots) == 0 {
		t.Fatalf("after the failover the replica %s is %+v, want a master serving slots", heir, n)
	}
	if n := clusterNode(t, cl, victim); !n.Failed() || len(n.Slots) != 0 {
		t.Fatalf("after the failover the killed master %s is %+v, want failed, serving nothing", victim, n)
	}
	if m, err := cl.MasterOfSlot(ctx, testserver.SlotOf("k0")); err != nil || m != heir {
		t.Fatalf("MasterOfSlot(k0) = %s, %v; want %s", m, err, heir)
	}

	// The client learns the new slot map in the background (see Cluster):
	// the first command may still go to the dead master.
	testserver.AnswersAgain(t, "GET k0", func() error { return c.Get(ctx, "k0").Err() })
	checkKeys(t, c, 0, keys)
	for i := keys; i < 2*keys; i++ {
		k := "k" + strconv.Itoa(i)
		if err := c.Set(ctx, k, "v"+strconv.Itoa(i), 0).Err(); err != nil {
			t.Fatalf("SET %s after the failover: %v", k, err)
		}
	}
	checkKeys(t, c, keys, 2*keys)

	if err := cl.Restart(ctx, victim); err != nil {
		t.Fatal(err)
	}
	if n := clusterNode(t, cl, victim); n.Role != "replica" || n.MasterID != clusterNode(t, cl, heir).ID {
		t.Fatalf("restarted, the old master %s is %+v, want a replica of %s", victim, n, heir)
	}
	if err := cl.ManualFailover(ctx, victim); err != nil {
		t.Fatal(err)
	}
	if n := clusterNode(t, cl, heir); n.Role != "replica" {
		t.Fatalf("after the manual failover %s is %+v, want a replica", heir, n)
	}
	// A manual failover waits for the replica to catch up: nothing is
	// lost, and the client follows the MOVED replies.
	checkKeys(t, c, 0, 2*keys)
}

// TestRedisClusterReshard: slots move from one master to another while a
// writer keeps writing single keys and pairs of keys under one hash tag;
// every acknowledged write is there afterwards.
func TestRedisClusterReshard(t *testing.T) {
	t.Parallel()
	cl := testserver.RedisCluster(t)
	ctx := context.Background()
	c := cl.Client()
	masters, err := cl.MasterAddrs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	from, to := masters[0], masters[1]
	before := map[string]int{}
	for _, m := range masters {
		for _, r := range clusterNode(t, cl, m).Slots {
			before[m] += r.To - r.From + 1
		}
	}

	const keys = 2000
	for i := range keys {
		k := "k" + strconv.Itoa(i)
		if err := c.Set(ctx, k, "v"+strconv.Itoa(i), 0).Err(); err != nil {
			t.Fatalf("SET %s: %v", k, err)
		}
	}

	stop := make(chan struct{})
	var (
		wg       sync.WaitGroup
		acked    int   // pairs written and acknowledged, {w<i>}a and {w<i>}b for i < acked
		retried  int   // TRYAGAIN and CLUSTERDOWN replies the writer retried
		writeErr error // the first error the writer could not retry
	)
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			a, b := fmt.Sprintf("{w%d}a", i), fmt.Sprintf("{w%d}b", i)
			for {
				// A multi-key command meets TRYAGAIN while its slot's keys
				// are split between two nodes; go-redis retries a few
				// times, then returns it, and so does a store.
				err := c.MSet(ctx, a, i, b, i).Err()
				if err == nil {
					break
				}
				if !redis.IsTryAgainError(err) && !redis.IsClusterDownError(err) {
					writeErr = fmt.Errorf("MSET %s %s: %w", a, b, err)
					return
				}
				retried++
				time.Sleep(10 * time.Millisecond)
			}
			if i > 0 {
				k := "k" + strconv.Itoa(i%keys)
				if v, err := c.Get(ctx, k).Result(); err != nil || v != "v"+strconv.Itoa(i%keys) {
					writeErr = fmt.Errorf("GET %s during the reshard = %q, %v", k, v, err)
					return
				}
			}
			acked = i + 1
		}
	})
	// Let the writer get going, so the reshard meets it.
	for deadline := time.Now().Add(testserver.HangLimit); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if n, _ := c.Exists(ctx, "{w10}a").Result(); n == 1 {
			break
		}
	}
	const moved = 1000
	reshardErr := cl.Reshard(ctx, from, to, moved)
	close(stop)
	wg.Wait()
	if reshardErr != nil {
		t.Fatal(reshardErr)
	}
	if writeErr != nil {
		t.Fatal(writeErr)
	}
	t.Logf("the writer wrote %d pairs during the reshard, retrying %d times", acked, retried)

	after := map[string]int{}
	for _, m := range masters {
		for _, r := range clusterNode(t, cl, m).Slots {
			after[m] += r.To - r.From + 1
		}
	}
	if after[from] != before[from]-moved || after[to] != before[to]+moved {
		t.Fatalf("slots before %v, after %v: want %d moved from %s to %s", before, after, moved, from, to)
	}
	movedKeys := 0
	for i := range keys {
		if m, err := cl.MasterOfSlot(ctx, testserver.SlotOf("k"+strconv.Itoa(i))); err == nil && m == to {
			movedKeys++
		}
	}
	if movedKeys == 0 {
		t.Fatalf("no key of the %d is on %s after the reshard: nothing was migrated", keys, to)
	}
	checkKeys(t, c, 0, keys)
	for i := range acked {
		for _, k := range []string{fmt.Sprintf("{w%d}a", i), fmt.Sprintf("{w%d}b", i)} {
			if v, err := c.Get(ctx, k).Result(); err != nil || v != strconv.Itoa(i) {
				t.Fatalf("GET %s after the reshard = %q, %v; want %d", k, v, err, i)
			}
		}
	}
}

// TestRedisClusterFreeze: a master that stops answering (SIGSTOP, as in a
// partition) is failed over like a dead one; thawed, it finds itself a
// replica of the node that took its slots, and nothing replicated is lost.
func TestRedisClusterFreeze(t *testing.T) {
	t.Parallel()
	cl := testserver.RedisCluster(t)
	ctx := context.Background()
	c := cl.Client()
	const keys = 300
	for i := range keys {
		k := "k" + strconv.Itoa(i)
		if err := c.Set(ctx, k, "v"+strconv.Itoa(i), 0).Err(); err != nil {
			t.Fatalf("SET %s: %v", k, err)
		}
	}
	waitReplicated(t, c)
	victim, err := cl.MasterOfSlot(ctx, testserver.SlotOf("k0"))
	if err != nil {
		t.Fatal(err)
	}
	heir := replicaOf(t, cl, victim)
	if err := cl.Freeze(victim); err != nil {
		t.Fatal(err)
	}
	if err := cl.WaitFailover(ctx, victim); err != nil {
		t.Fatal(err)
	}
	// A frozen node accepts connections and answers nothing: a client
	// whose slot map still names it waits ReadTimeout (3s by default)
	// per try, twice, before trying elsewhere. A short one finds the
	// promoted replica sooner.
	quick := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs(), ReadTimeout: 300 * time.Millisecond})
	defer quick.Close()
	testserver.AnswersAgain(t, "SET k0", func() error { return quick.Set(ctx, "k0", "v0", 0).Err() })
	if err := cl.Thaw(victim); err != nil {
		t.Fatal(err)
	}
	if err := cl.WaitHealthy(ctx); err != nil {
		t.Fatal(err)
	}
	if n := clusterNode(t, cl, victim); n.Role != "replica" || n.MasterID != clusterNode(t, cl, heir).ID {
		t.Fatalf("thawed, the old master %s is %+v, want a replica of %s", victim, n, heir)
	}
	checkKeys(t, c, 0, keys)
}

// TestRedisClusterStats: after ResetStats, CommandStats counts the
// commands each node ran since, on the master serving them and on its
// replica, and a script's commands under their own names.
func TestRedisClusterStats(t *testing.T) {
	t.Parallel()
	cl := testserver.RedisCluster(t, testserver.ClusterArgs("--appendonly", "yes"), testserver.ClusterNodeTimeout(2*time.Second))
	ctx := context.Background()
	c := cl.Client()
	if err := c.Set(ctx, "warm", "up", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ResetStats(ctx); err != nil {
		t.Fatal(err)
	}
	const sets = 100
	for i := range sets {
		if err := c.Set(ctx, fmt.Sprintf("{s}%d", i), i, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Eval(ctx, "redis.call('set', KEYS[1], 'x') return 1", []string{"{s}x"}).Err(); err != nil {
		t.Fatal(err)
	}
	waitReplicated(t, c)
	master, err := cl.MasterOfSlot(ctx, testserver.SlotOf("{s}"))
	if err != nil {
		t.Fatal(err)
	}
	replica := replicaOf(t, cl, master)
	stats, err := cl.CommandStats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(stats) != 6 {
		t.Fatalf("stats of %d nodes, want 6", len(stats))
	}
	for addr, st := range stats {
		if st.CPUSeconds < 0 {
			t.Errorf("%s: CPUSeconds = %v", addr, st.CPUSeconds)
		}
		want := int64(0)
		switch addr {
		case master:
			want = sets + 1
			if st.Role != "master" || st.Commands["eval"].Calls != 1 {
				t.Errorf("master %s: %+v, want role master and 1 eval", addr, st)
			}
		case replica:
			want = sets + 1
			if st.Role != "replica" {
				t.Errorf("replica %s: role %s", addr, st.Role)
			}
		}
		if got := st.Commands["set"].Calls; got != want {
			t.Errorf("%s (%s): %d SET calls since ResetStats, want %d", addr, st.Role, got, want)
		}
		if addr == master || addr == replica {
			if st.Keys < sets+1 {
				t.Errorf("%s: %d keys, want at least %d", addr, st.Keys, sets+1)
			}
		}
	}
	if cfg, err := c.ConfigGet(ctx, "appendonly").Result(); err != nil || cfg["appendonly"] != "yes" {
		t.Fatalf("appendonly = %v, %v; want yes from ClusterArgs", cfg, err)
	}
	if cfg, err := c.ConfigGet(ctx, "cluster-node-timeout").Result(); err != nil || cfg["cluster-node-timeout"] != "2000" {
		t.Fatalf("cluster-node-timeout = %v, %v; want 2000 from ClusterNodeTimeout", cfg, err)
	}
}

// TestRedisClusterSlotOf: SlotOf agrees with CLUSTER KEYSLOT, hash tags included, and
// with the values the Redis Cluster specification gives.
func TestRedisClusterSlotOf(t *testing.T) {
	t.Parallel()
	for key, want := range map[string]int{"123456789": 0x31C3, "foo": 12182, "bar": 5061} {
		if got := testserver.SlotOf(key); got != want {
			t.Errorf("SlotOf(%q) = %d, want %d", key, got, want)
		}
	}
	if testserver.SlotOf("{user1000}.following") != testserver.SlotOf("{user1000}.followers") {
		t.Error("keys with one hash tag are in different slots")
	}
	if testserver.SlotOf("foo{{bar}}zap") != testserver.SlotOf("{bar") {
		t.Error(`"foo{{bar}}zap" does not hash "{bar"`)
	}

	rd := testserver.Redis(t, "--cluster-enabled", "yes")
	c := rd.Client()
	keys := []string{
		"", "a", "{a}b", "{a}c", "a{b}c", "x{}y", "{}{b}", "{}", "{", "}", "}{a}",
		"{{a}}", "foo{{bar}}zap", "foo{bar}{zap}", "{user1000}.following",
		"stem:{run:42}:events", "\xff\x00binary", "ключ{тег}",
	}
	for i := range 200 {
		keys = append(keys, "k"+strconv.Itoa(i), fmt.Sprintf("{t%d}x", i))
	}
	for _, k := range keys {
		want, err := c.ClusterKeySlot(context.Background(), k).Result()
		if err != nil {
			t.Fatalf("CLUSTER KEYSLOT %q: %v", k, err)
		}
		if got := testserver.SlotOf(k); int64(got) != want {
			t.Errorf("SlotOf(%q) = %d, CLUSTER KEYSLOT says %d", k, got, want)
		}
	}
}

// TestStartRedisClusterOptions: a configuration redis-cli cannot create is
// refused before any server starts.
func TestStartRedisClusterOptions(t *testing.T) {
	t.Parallel()
	_, err := testserver.StartRedisCluster(t.TempDir(), testserver.ClusterMasters(2))
	if err == nil || errors.Is(err, testserver.ErrNoRedisBinaries) {
		t.Fatalf("two masters: %v, want an error saying at least 3", err)
	}
}

// TestRedisClusterMoveSlot: one slot's keys move to another master, which
// then serves the slot, and every key reads back through the client.
func TestRedisClusterMoveSlot(t *testing.T) {
	cl := testserver.RedisCluster(t)
	ctx := context.Background()
	c := cl.Client()
	const tag = "{moving}"
	slot := testserver.SlotOf(tag)
	for i := range 250 {
		if err := c.Set(ctx, fmt.Sprintf("%s:%d", tag, i), i, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	from, err := cl.MasterOfSlot(ctx, slot)
	if err != nil {
		t.Fatal(err)
	}
	masters, err := cl.MasterAddrs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	to := masters[0]
	if to == from {
		to = masters[1]
	}
	if err := cl.MoveSlot(ctx, slot, to); err != nil {
		t.Fatal(err)
	}
	if now, err := cl.MasterOfSlot(ctx, slot); err != nil || now != to {
		t.Fatalf("slot %d served by %s (%v) after the move, want %s", slot, now, err, to)
	}
	for i := range 250 {
		if v, err := c.Get(ctx, fmt.Sprintf("%s:%d", tag, i)).Int(); err != nil || v != i {
			t.Fatalf("key %d after the move: %d, %v", i, v, err)
		}
	}
	if err := cl.MoveSlot(ctx, slot, to); err == nil {
		t.Fatal("a move to the master that serves the slot succeeded")
	}
}
