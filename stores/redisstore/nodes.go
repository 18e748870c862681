package redisstore

import (
	"bufio"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stemflow/stem/storage"
)

var (
	_ storage.NodeReporter = (*Store)(nil)
	_ storage.NodeReporter = (*Cluster)(nil)
)

// NodeStats implements storage.NodeReporter: the server's figures, from
// INFO.
func (s *Store) NodeStats(ctx context.Context) ([]storage.NodeStat, error) {
	if cc, ok := s.client.(*redis.ClusterClient); ok {
		return clusterNodeStats(ctx, cc, []*Store{s})
	}
	st, err := nodeStat(ctx, s.client, s.host)
	if err != nil {
		return nil, err
	}
	st.Parts = 1
	return []storage.NodeStat{st}, nil
}

// NodeStats implements storage.NodeReporter: each master's figures, from
// INFO, with the shards whose slot it serves.
func (c *Cluster) NodeStats(ctx context.Context) ([]storage.NodeStat, error) {
	if err := c.checkOpen(); err != nil {
		return nil, err
	}
	if cc, ok := c.client.(*redis.ClusterClient); ok {
		return clusterNodeStats(ctx, cc, c.shards)
	}
	return c.shards[0].NodeStats(ctx)
}

// clusterNodeStats reads every master's figures and counts the shards
// whose slot each serves.
func clusterNodeStats(ctx context.Context, cc *redis.ClusterClient, shards []*Store) ([]storage.NodeStat, error) {
	var mu sync.Mutex
	var out []storage.NodeStat
	err := cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		st, err := nodeStat(ctx, m, m.Options().Addr)
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		out = append(out, st)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("redisstore: node stats: %w", err)
	}
	for _, s := range shards {
		m, err := cc.MasterForKey(ctx, s.keys.prefix)
		if err != nil {
			return nil, fmt.Errorf("redisstore: node stats: %w", err)
		}
		if i := slices.IndexFunc(out, func(n storage.NodeStat) bool { return n.Node == m.Options().Addr }); i >= 0 {
			out[i].Parts++
		}
	}
	slices.SortFunc(out, func(a, b storage.NodeStat) int { return strings.Compare(a.Node, b.Node) })
	return out, nil
}

// nodeStat reads one node's INFO: its script calls and every command it
// executed (commandstats), its processor time (cpu) and its keys
// (keyspace).
func nodeStat(ctx context.Context, c redis.Cmdable, addr string) (storage.NodeStat, error) {
	info, err := c.Info(ctx, "commandstats", "cpu", "keyspace").Result()
	if err != nil {
		return storage.NodeStat{}, fmt.Errorf("INFO of %s: %w", addr, err)
	}
	st := storage.NodeStat{Node: addr, CallsAre: "script calls", OperationsAre: "commands"}
	var cpu float64
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), ":")
		if !ok {
			continue
		}
		switch {
		case strings.HasPrefix(k, "cmdstat_"):
			calls := infoField(v, "calls")
			st.Operations += calls
			if k == "cmdstat_evalsha" || k == "cmdstat_eval" || k == "cmdstat_evalsha_ro" || k == "cmdstat_eval_ro" {
				st.Calls += calls
			}
		case k == "used_cpu_sys" || k == "used_cpu_user":
			f, _ := strconv.ParseFloat(v, 64)
			cpu += f
		case strings.HasPrefix(k, "db"):
			st.Keys += infoField(v, "keys")
		}
	}
	st.CPU = time.Duration(cpu * float64(time.Second))
	return st, nil
}

// infoField is the number of a name=value field of an INFO line.
func infoField(line, name string) int64 {
	for f := range strings.SplitSeq(line, ",") {
		if k, v, ok := strings.Cut(f, "="); ok && k == name {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return 0
}
