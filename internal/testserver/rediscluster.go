package testserver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stemflow/stem/internal/slots"
)

// ClusterSlots is the number of hash slots of a Redis Cluster.
const ClusterSlots = slots.Count

// clusterWaitLimit bounds a wait for the cluster to settle when the
// caller's context has no deadline of its own.
const clusterWaitLimit = 60 * time.Second

// ErrNoRedisBinaries is returned, wrapped, by StartRedisCluster when
// redis-server or redis-cli is not installed; RedisCluster skips the test
// on it.
var ErrNoRedisBinaries = errors.New("redis-server or redis-cli not installed")

// ClusterOption configures a cluster started by RedisCluster or
// StartRedisCluster.
type ClusterOption func(*clusterConfig)

type clusterConfig struct {
	masters     int
	replicas    int
	nodeTimeout time.Duration
	args        []string
}

// ClusterMasters sets the number of masters, 3 by default and at least 3
// (what redis-cli --cluster create accepts).
func ClusterMasters(n int) ClusterOption { return func(c *clusterConfig) { c.masters = n } }

// ClusterReplicas sets the number of replicas of each master, 1 by default.
func ClusterReplicas(n int) ClusterOption { return func(c *clusterConfig) { c.replicas = n } }

// ClusterNodeTimeout sets cluster-node-timeout, 1s by default: how long a
// node may not answer before the others suspect it, so it sets how soon a
// killed master's replica is promoted (about twice this, in practice).
func ClusterNodeTimeout(d time.Duration) ClusterOption {
	return func(c *clusterConfig) { c.nodeTimeout = d }
}

// ClusterArgs adds configuration given to every node after the defaults,
// as redis-server takes it on its command line, e.g. "--appendonly",
// "yes", "--appendfsync", "always", or "--cluster-require-full-coverage",
// "no".
func ClusterArgs(args ...string) ClusterOption {
	return func(c *clusterConfig) { c.args = append(c.args, args...) }
}

// Cluster is a private Redis Cluster: redis-server processes in
// directories of their own, listening on 127.0.0.1 on free ports, joined
// by redis-cli --cluster create. Its methods are safe for concurrent use
// and return errors rather than failing a test, so a test may kill a
// master or reshard from a goroutine while others keep working, and
// code without a testing.TB (a TestMain) can share one cluster.
//
// A go-redis ClusterClient caches the slot map. It reloads it after a
// MOVED or ASK reply, a READONLY error, and otherwise only every
// ClusterStateReloadInterval (60s by default): after a master is killed
// and its replica promoted, a client that only met connection errors
// keeps sending that master's slots to the dead address. The methods
// that change the topology (WaitFailover, ManualFailover, Restart,
// Reshard, WaitHealthy) call ReloadState on the cluster's own Client, which
// reloads in the background: the first commands after them may still meet
// the old map. A store that must live through a failover calls
// ReloadState itself when a node stops answering. A frozen node (Freeze)
// is worse than a dead one: it accepts connections and answers nothing,
// so each command sent to it waits the client's ReadTimeout (3s by
// default) and go-redis tries the same node twice before another: about
// 10s for the first command after the failover with default options.
type Cluster struct {
	bin, cli string
	dir      string
	ownDir   bool // dir was made by StartRedisCluster and is removed by Close
	cfg      clusterConfig
	nodes    []*clusterNode // in start order, what Addrs returns

	mu       sync.Mutex
	client   *redis.ClusterClient
	baseline map[string]cpuMark // by addr: CPU time when ResetStats ran
	closed   bool
}

// clusterNode is one redis-server of a Cluster.
type clusterNode struct {
	process
	dir     string
	busPort int
	admin   *redis.Client // guarded by mu; nil while not running
}

// cpuMark is a node's CPU time when ResetStats ran, and which process
// it was (a node restarted since counts from zero).
type cpuMark struct {
	pid               string
	seconds, children float64
}

func (n *clusterNode) addr() string { return "127.0.0.1:" + strconv.Itoa(n.port) }

// RedisCluster starts a private Redis Cluster for the test, by default
// three masters with one replica each, and stops it when the test ends;
// it skips the test when redis-server or redis-cli is not installed. It
// returns once every node reports cluster_state:ok, all 16384 slots are
// served, every replica is in sync with its master and all nodes agree on
// who serves which slot. The nodes keep nothing on disk unless ClusterArgs
// says so.
func RedisCluster(t testing.TB, opts ...ClusterOption) *Cluster {
	t.Helper()
	c, err := StartRedisCluster(t.TempDir(), opts...)
	if errors.Is(err, ErrNoRedisBinaries) {
		t.Skipf("testserver: %v; install the distribution's redis-server and redis-tools packages", err)
	}
	if err != nil {
		t.Fatalf("testserver: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// StartRedisCluster starts a Redis Cluster as RedisCluster does, for code
// that has no testing.TB, such as a TestMain that shares one cluster among
// a package's tests. The nodes' directories go under dir; with dir "" the
// cluster makes a temporary directory and Close removes it. The caller
// calls Close. When the binaries are missing the error wraps
// ErrNoRedisBinaries.
func StartRedisCluster(dir string, opts ...ClusterOption) (*Cluster, error) {
	cfg := clusterConfig{masters: 3, replicas: 1, nodeTimeout: time.Second}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.masters < 3 {
		return nil, fmt.Errorf("start redis cluster: %d masters: redis-cli --cluster create needs at least 3", cfg.masters)
	}
	if cfg.replicas < 0 {
		return nil, fmt.Errorf("start redis cluster: %d replicas per master", cfg.replicas)
	}
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("start redis cluster: %w: %v", ErrNoRedisBinaries, err)
	}
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		return nil, fmt.Errorf("start redis cluster: %w: %v", ErrNoRedisBinaries, err)
	}
	c := &Cluster{bin: bin, cli: cli, dir: dir, cfg: cfg}
	if dir == "" {
		if c.dir, err = os.MkdirTemp("", "stem-rediscluster-"); err != nil {
			return nil, fmt.Errorf("start redis cluster: %w", err)
		}
		c.ownDir = true
	}
	if err := c.start(); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// start launches the nodes, all at once, joins them and waits until the
// cluster is healthy.
func (c *Cluster) start() error {
	n := c.cfg.masters * (1 + c.cfg.replicas)
	c.nodes = make([]*clusterNode, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		c.nodes[i] = &clusterNode{process: process{name: "redis-server"}}
		wg.Go(func() { errs[i] = c.firstStart(c.nodes[i], i) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("start redis cluster: %w", err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), clusterWaitLimit)
	defer cancel()
	args := []string{"--cluster", "create"}
	args = append(args, c.Addrs()...)
	args = append(args, "--cluster-replicas", strconv.Itoa(c.cfg.replicas), "--cluster-yes")
	if err := c.redisCLI(ctx, args...); err != nil {
		return fmt.Errorf("start redis cluster: %w", err)
	}
	if err := c.WaitHealthy(ctx); err != nil {
		return fmt.Errorf("start redis cluster: %w", err)
	}
	return nil
}

// firstStart picks free ports for node i and starts it, with new ports
// when another process took one first.
func (c *Cluster) firstStart(n *clusterNode, i int) error {
	for attempt := 1; ; attempt++ {
		var err error
		if n.port, err = freePort(); err != nil {
			return err
		}
		if n.busPort, err = freePort(); err != nil {
			return err
		}
		n.dir = filepath.Join(c.dir, fmt.Sprintf("node%d-%d", i, n.port))
		if err := os.MkdirAll(n.dir, 0o755); err != nil {
			return fmt.Errorf("start redis-server: %w", err)
		}
		err = c.startNode(n)
		if err == nil || attempt == 3 || !strings.Contains(err.Error(), "already in use") {
			return err
		}
	}
}

// startNode starts the node's process on its port and directory and waits
// until it answers PING. nodes.conf in its directory keeps its identity,
// so a node started again rejoins as itself.
func (c *Cluster) startNode(n *clusterNode) error {
	if err := n.lockStopped(); err != nil {
		return err
	}
	args := append(redisArgs(n.port, n.dir),
		"--cluster-enabled", "yes",
		"--cluster-config-file", "nodes.conf",
		"--cluster-port", strconv.Itoa(n.busPort),
		"--cluster-node-timeout", strconv.FormatInt(c.cfg.nodeTimeout.Milliseconds(), 10),
		// A replica's full sync starts at once instead of waiting 5s
		// for more replicas to share the transfer.
		"--repl-diskless-sync-delay", "0",
	)
	args = append(args, c.cfg.args...)
	cmd := exec.Command(c.bin, args...)
	cmd.Dir = n.dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	addr := n.addr()
	err := n.launch(cmd, n.dir, filepath.Join(n.dir, "redis.log"), 10*time.Millisecond, "not answering PING",
		func(context.Context) bool { return pong(addr) })
	if err != nil {
		return err
	}
	n.mu.Lock()
	n.admin = redis.NewClient(&redis.Options{
		Addr: addr, MaxRetries: -1, DialerRetries: 1,
		DialTimeout: time.Second, ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second,
		ContextTimeoutEnabled: true, PoolSize: 2,
	})
	n.frozen = false
	n.mu.Unlock()
	return nil
}

// redisCLI runs redis-cli with args, its output appended to redis-cli.log
// in the cluster's directory and quoted in the error when it fails.
func (c *Cluster) redisCLI(ctx context.Context, args ...string) error {
	logPath := filepath.Join(c.dir, "redis-cli.log")
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("redis-cli: open log: %w", err)
	}
	defer logf.Close()
	start, _ := logf.Seek(0, 2)
	fmt.Fprintf(logf, "$ redis-cli %s\n", strings.Join(args, " "))
	cmd := exec.CommandContext(ctx, c.cli, args...)
	// redis-cli colours its --cluster output on an xterm TERM, even into
	// a file.
	cmd.Env = append(os.Environ(), "TERM=dumb")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("redis-cli %s: %w; log %s:\n%s", strings.Join(args[:2], " "), err, logPath, logSince(logPath, start))
	}
	// redis-cli --cluster reports some failures on its output with exit
	// status 0.
	if out := logSince(logPath, start); strings.Contains(out, "[ERR]") {
		return fmt.Errorf("redis-cli %s failed; log %s:\n%s", strings.Join(args[:2], " "), logPath, out)
	}
	return nil
}

// Close stops every node with SIGKILL, closes the clients and, when
// StartRedisCluster made the directory, removes it. Calling it again does
// nothing.
func (c *Cluster) Close() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	cl := c.client
	c.client = nil
	c.mu.Unlock()
	if cl != nil {
		_ = cl.Close()
	}
	for _, n := range c.nodes {
		if n != nil {
			_ = c.killNode(n)
		}
	}
	if c.ownDir {
		_ = os.RemoveAll(c.dir)
	}
}

// Addrs returns the host:port of every node, masters and replicas, in the
// order they were started. It stays the same across kills, restarts and
// failovers.
func (c *Cluster) Addrs() []string {
	out := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		out[i] = n.addr()
	}
	return out
}

// URL is the store URL of the cluster, redis+cluster://HOST:PORT,HOST:PORT,...
// naming every node.
func (c *Cluster) URL() string { return "redis+cluster://" + strings.Join(c.Addrs(), ",") }

// Client returns a go-redis cluster client seeded with every node, the
// same one on every call, closed by Close. See Cluster on when it reloads
// the slot map.
func (c *Cluster) Client() *redis.ClusterClient {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.client == nil {
		c.client = redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
	}
	return c.client
}

// reloadClient asks the cluster's client, if made, to reload its slot map.
func (c *Cluster) reloadClient(ctx context.Context) {
	c.mu.Lock()
	cl := c.client
	c.mu.Unlock()
	if cl != nil {
		cl.ReloadState(ctx)
	}
}

// node returns the node listening on addr.
func (c *Cluster) node(addr string) (*clusterNode, error) {
	for _, n := range c.nodes {
		if n.addr() == addr {
			return n, nil
		}
	}
	return nil, fmt.Errorf("no node of the cluster at %s (nodes: %s)", addr, strings.Join(c.Addrs(), " "))
}

// live returns the admin client of the node when it runs and is not
// frozen, else nil.
func (n *clusterNode) live() *redis.Client {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil || n.frozen {
		return nil
	}
	return n.admin
}

// ClusterNode is one node as the cluster sees it, from CLUSTER NODES.
type ClusterNode struct {
	ID       string
	Addr     string      // host:port
	Role     string      // "master" or "replica"
	MasterID string      // the master's ID, for a replica
	Slots    []SlotRange // the slots a master serves, in the order listed
	// Flags are the node's flags as listed, e.g. "master", "slave",
	// "fail", "fail?" (suspected by this node), "myself".
	Flags []string
	// Migrating and Importing list slots being moved: a slot this
	// master is giving away, or receiving, in the middle of a reshard.
	Migrating, Importing []int
}

// SlotRange is the slots From to To, both included.
type SlotRange struct{ From, To int }

// Failed reports whether the node is flagged as failing ("fail") or
// suspected ("fail?").
func (n ClusterNode) Failed() bool {
	return slices.Contains(n.Flags, "fail") || slices.Contains(n.Flags, "fail?")
}

// parseClusterNodes parses a CLUSTER NODES reply.
func parseClusterNodes(s string) ([]ClusterNode, error) {
	var out []ClusterNode
	for line := range strings.Lines(s) {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if len(f) < 8 {
			return nil, fmt.Errorf("parse CLUSTER NODES line %q: %d fields, want at least 8", line, len(f))
		}
		addr, _, _ := strings.Cut(f[1], "@")
		n := ClusterNode{ID: f[0], Addr: addr, Flags: strings.Split(f[2], ","), Role: "master"}
		if slices.Contains(n.Flags, "slave") {
			n.Role = "replica"
			n.MasterID = f[3]
		}
		for _, s := range f[8:] {
			if strings.HasPrefix(s, "[") {
				// [slot->-id] migrating, [slot-<-id] importing.
				body := strings.Trim(s, "[]")
				if i := strings.Index(body, "->-"); i >= 0 {
					if v, err := strconv.Atoi(body[:i]); err == nil {
						n.Migrating = append(n.Migrating, v)
					}
				} else if i := strings.Index(body, "-<-"); i >= 0 {
					if v, err := strconv.Atoi(body[:i]); err == nil {
						n.Importing = append(n.Importing, v)
					}
				}
				continue
			}
			lo, hi, ok := strings.Cut(s, "-")
			if !ok {
				hi = lo
			}
			from, err1 := strconv.Atoi(lo)
			to, err2 := strconv.Atoi(hi)
			if err1 != nil || err2 != nil {
				return nil, fmt.Errorf("parse CLUSTER NODES slots %q in line %q", s, line)
			}
			n.Slots = append(n.Slots, SlotRange{from, to})
		}
		out = append(out, n)
	}
	return out, nil
}

// Nodes returns the cluster's nodes as the first running node (in Addrs
// order) that answers sees them: right after a fault the nodes' views may
// differ for a while; WaitHealthy waits until they agree.
func (c *Cluster) Nodes(ctx context.Context) ([]ClusterNode, error) {
	var errs []error
	for _, n := range c.nodes {
		a := n.live()
		if a == nil {
			continue
		}
		s, err := a.ClusterNodes(ctx).Result()
		if err != nil {
			errs = append(errs, fmt.Errorf("CLUSTER NODES on %s: %w", n.addr(), err))
			continue
		}
		return parseClusterNodes(s)
	}
	if len(errs) == 0 {
		return nil, errors.New("cluster nodes: no node is running")
	}
	return nil, errors.Join(errs...)
}

// MasterAddrs returns the host:port of the masters that serve slots, as
// Nodes sees them, in Addrs order.
func (c *Cluster) MasterAddrs(ctx context.Context) ([]string, error) {
	nodes, err := c.Nodes(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, a := range c.Addrs() {
		for _, n := range nodes {
			if n.Addr == a && n.Role == "master" && len(n.Slots) > 0 {
				out = append(out, a)
			}
		}
	}
	return out, nil
}

// MasterOfSlot returns the host:port of the master serving slot, as Nodes
// sees it.
func (c *Cluster) MasterOfSlot(ctx context.Context, slot int) (string, error) {
	nodes, err := c.Nodes(ctx)
	if err != nil {
		return "", err
	}
	for _, n := range nodes {
		for _, r := range n.Slots {
			if r.From <= slot && slot <= r.To {
				return n.Addr, nil
			}
		}
	}
	return "", fmt.Errorf("slot %d: no master serves it", slot)
}

// SlotOf returns the hash slot of key as Redis Cluster computes it (see
// slots.Of).
func SlotOf(key string) int { return slots.Of(key) }

// Kill kills the node at addr with SIGKILL and waits for it to exit:
// what it had not replicated or written to disk is lost, as in a crash.
// Killing a stopped node does nothing.
func (c *Cluster) Kill(addr string) error {
	n, err := c.node(addr)
	if err != nil {
		return err
	}
	return c.killNode(n)
}

// KillMaster kills the node at addr as Kill does, after checking that it
// is a master serving slots; WaitFailover then waits for its replica to
// take over.
func (c *Cluster) KillMaster(ctx context.Context, addr string) error {
	n, err := c.node(addr)
	if err != nil {
		return err
	}
	a := n.live()
	if a == nil {
		return fmt.Errorf("kill master %s: not running", addr)
	}
	s, err := a.ClusterNodes(ctx).Result()
	if err != nil {
		return fmt.Errorf("kill master %s: %w", addr, err)
	}
	nodes, err := parseClusterNodes(s)
	if err != nil {
		return fmt.Errorf("kill master %s: %w", addr, err)
	}
	for _, v := range nodes {
		if slices.Contains(v.Flags, "myself") && (v.Role != "master" || len(v.Slots) == 0) {
			return fmt.Errorf("kill master %s: it is a %s serving %d slot ranges", addr, v.Role, len(v.Slots))
		}
	}
	return c.killNode(n)
}

func (c *Cluster) killNode(n *clusterNode) error {
	n.mu.Lock()
	cmd, exited, admin := n.cmd, n.exited, n.admin
	n.admin = nil
	n.mu.Unlock()
	if admin != nil {
		_ = admin.Close()
	}
	if cmd == nil {
		return nil
	}
	var err error
	// SIGKILL ends a stopped process too, so no thaw is needed.
	if e := cmd.Process.Kill(); e != nil && !errors.Is(e, os.ErrProcessDone) {
		err = fmt.Errorf("kill redis-server on port %d: %w", n.port, e)
	}
	<-exited
	n.mu.Lock()
	n.cmd, n.frozen = nil, false
	n.mu.Unlock()
	return err
}

// Freeze stops the node at addr with SIGSTOP: its ports still accept
// connections but it answers nothing, to the clients or to the other
// nodes, until Thaw. A frozen master is failed over like a dead one, and
// finds itself a replica when thawed.
func (c *Cluster) Freeze(addr string) error {
	return c.signalNode(addr, "freeze", syscall.SIGSTOP, true)
}

// Thaw resumes a frozen node with SIGCONT.
func (c *Cluster) Thaw(addr string) error { return c.signalNode(addr, "thaw", syscall.SIGCONT, false) }

func (c *Cluster) signalNode(addr, op string, sig syscall.Signal, frozen bool) error {
	n, err := c.node(addr)
	if err != nil {
		return err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return fmt.Errorf("%s redis-server at %s: not running", op, addr)
	}
	if err := signalTree(n.cmd.Process.Pid, sig); err != nil {
		return fmt.Errorf("%s redis-server at %s: %w", op, addr, err)
	}
	n.frozen = frozen
	return nil
}

// Restart starts the killed node at addr again on the same port,
// directory and configuration, and waits until the cluster is healthy
// with it: a master that was failed over rejoins as a replica of the node
// that took its slots, and is in sync with it when Restart returns.
func (c *Cluster) Restart(ctx context.Context, addr string) error {
	n, err := c.node(addr)
	if err != nil {
		return err
	}
	if err := c.startNode(n); err != nil {
		return err
	}
	return c.WaitHealthy(ctx)
}

// WaitFailover waits until a replica of the killed or frozen master at
// oldMaster has taken over its slots and the cluster is healthy again
// without it (see WaitHealthy). Redis promotes the replica by itself once
// the other masters have marked the old one failed, which takes about
// twice the cluster node timeout.
func (c *Cluster) WaitFailover(ctx context.Context, oldMaster string) error {
	if _, err := c.node(oldMaster); err != nil {
		return err
	}
	return c.waitHealthy(ctx, "failover of "+oldMaster, func(nodes []ClusterNode) string {
		for _, n := range nodes {
			if n.Addr == oldMaster && len(n.Slots) > 0 {
				return oldMaster + " still serves slots"
			}
		}
		return ""
	})
}

// ManualFailover runs CLUSTER FAILOVER on the replica at replicaAddr and
// waits until it is a master serving its old master's slots, the old
// master has become its replica, and the cluster is healthy: a
// failover without loss, as an operator does before maintenance.
func (c *Cluster) ManualFailover(ctx context.Context, replicaAddr string) error {
	n, err := c.node(replicaAddr)
	if err != nil {
		return err
	}
	a := n.live()
	if a == nil {
		return fmt.Errorf("manual failover to %s: not running", replicaAddr)
	}
	s, err := a.ClusterNodes(ctx).Result()
	if err != nil {
		return fmt.Errorf("manual failover to %s: %w", replicaAddr, err)
	}
	nodes, err := parseClusterNodes(s)
	if err != nil {
		return fmt.Errorf("manual failover to %s: %w", replicaAddr, err)
	}
	var id, masterID string
	for _, v := range nodes {
		if slices.Contains(v.Flags, "myself") {
			id, masterID = v.ID, v.MasterID
		}
	}
	if masterID == "" {
		return fmt.Errorf("manual failover to %s: not a replica", replicaAddr)
	}
	if err := a.ClusterFailover(ctx).Err(); err != nil {
		return fmt.Errorf("manual failover: CLUSTER FAILOVER on %s: %w", replicaAddr, err)
	}
	return c.waitHealthy(ctx, "manual failover to "+replicaAddr, func(nodes []ClusterNode) string {
		for _, n := range nodes {
			if n.ID == id && (n.Role != "master" || len(n.Slots) == 0) {
				return replicaAddr + " is not yet a master serving slots"
			}
			if n.ID == masterID && n.MasterID != id {
				return "the old master " + n.Addr + " is not yet its replica"
			}
		}
		return ""
	})
}

// Reshard moves slots hash slots from the master at from to the master at
// to with redis-cli --cluster reshard, which migrates their keys a few at
// a time while clients keep working (they meet ASK and MOVED replies, and
// TRYAGAIN for a multi-key command whose keys are split between the two
// nodes for a moment), then waits until the cluster is healthy and every
// node agrees on the new owners.
func (c *Cluster) Reshard(ctx context.Context, from, to string, slots int) error {
	nodes, err := c.Nodes(ctx)
	if err != nil {
		return fmt.Errorf("reshard: %w", err)
	}
	var fromID, toID string
	for _, n := range nodes {
		if n.Role != "master" {
			continue
		}
		switch n.Addr {
		case from:
			fromID = n.ID
		case to:
			toID = n.ID
		}
	}
	if fromID == "" || toID == "" {
		return fmt.Errorf("reshard %d slots from %s to %s: both must be masters", slots, from, to)
	}
	if err := c.redisCLI(ctx, "--cluster", "reshard", from,
		"--cluster-from", fromID, "--cluster-to", toID,
		"--cluster-slots", strconv.Itoa(slots), "--cluster-yes"); err != nil {
		return fmt.Errorf("reshard: %w", err)
	}
	return c.waitHealthy(ctx, "reshard", nil)
}

// MoveSlot moves one hash slot, with its keys, from the master that
// serves it to the master at to, as redis-cli --cluster reshard moves each
// of its slots: the target is set importing and the source migrating, the
// keys are migrated in batches (clients meet ASK and TRYAGAIN meanwhile),
// and then every master is told the new owner. It waits until the
// cluster is healthy again.
func (c *Cluster) MoveSlot(ctx context.Context, slot int, to string) error {
	from, err := c.MasterOfSlot(ctx, slot)
	if err != nil {
		return fmt.Errorf("move slot %d: %w", slot, err)
	}
	if from == to {
		return fmt.Errorf("move slot %d: %s serves it already", slot, to)
	}
	nodes, err := c.Nodes(ctx)
	if err != nil {
		return fmt.Errorf("move slot %d: %w", slot, err)
	}
	ids := map[string]string{}
	var masters []string
	for _, n := range nodes {
		if n.Role == "master" && !n.Failed() {
			ids[n.Addr] = n.ID
			masters = append(masters, n.Addr)
		}
	}
	src, dst := c.liveAdmin(from), c.liveAdmin(to)
	if src == nil || dst == nil || ids[to] == "" {
		return fmt.Errorf("move slot %d from %s to %s: both must be running masters", slot, from, to)
	}
	if err := dst.Do(ctx, "cluster", "setslot", slot, "importing", ids[from]).Err(); err != nil {
		return fmt.Errorf("move slot %d: importing on %s: %w", slot, to, err)
	}
	if err := src.Do(ctx, "cluster", "setslot", slot, "migrating", ids[to]).Err(); err != nil {
		return fmt.Errorf("move slot %d: migrating on %s: %w", slot, from, err)
	}
	host, port, _ := strings.Cut(to, ":")
	for {
		keys, err := src.ClusterGetKeysInSlot(ctx, slot, 100).Result()
		if err != nil {
			return fmt.Errorf("move slot %d: %w", slot, err)
		}
		if len(keys) == 0 {
			break
		}
		args := []any{"migrate", host, port, "", 0, 10000, "keys"}
		for _, k := range keys {
			args = append(args, k)
		}
		if err := src.Do(ctx, args...).Err(); err != nil {
			return fmt.Errorf("move slot %d: MIGRATE to %s: %w", slot, to, err)
		}
	}
	for _, m := range append([]string{to, from}, masters...) {
		if a := c.liveAdmin(m); a != nil {
			if err := a.Do(ctx, "cluster", "setslot", slot, "node", ids[to]).Err(); err != nil {
				return fmt.Errorf("move slot %d: telling %s its owner: %w", slot, m, err)
			}
		}
	}
	return c.waitHealthy(ctx, "move slot", nil)
}

// liveAdmin is the admin client of the node at addr when it runs, else
// nil.
func (c *Cluster) liveAdmin(addr string) *redis.Client {
	n, err := c.node(addr)
	if err != nil {
		return nil
	}
	return n.live()
}

// WaitHealthy waits until the cluster, counting only the nodes that run
// and are not frozen, is healthy: each node reports cluster_state:ok with
// all 16384 slots served, the nodes agree on which master serves which
// slot and on which node replicates which, every slot is served by a
// running node, no node is suspected or
// failed by another, no slot is being migrated, and every replica's link
// to its master is up. It then asks the cluster's Client to reload its
// slot map.
func (c *Cluster) WaitHealthy(ctx context.Context) error {
	return c.waitHealthy(ctx, "healthy cluster", nil)
}

// waitHealthy waits as WaitHealthy does, and also until more, given the
// agreed view, returns "" (else what is not yet so).
func (c *Cluster) waitHealthy(ctx context.Context, what string, more func([]ClusterNode) string) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, clusterWaitLimit)
		defer cancel()
	}
	for {
		why := c.unhealthy(ctx)
		if why == "" && more != nil {
			nodes, err := c.Nodes(ctx)
			if err != nil {
				why = err.Error()
			} else {
				why = more(nodes)
			}
		}
		if why == "" {
			c.reloadClient(ctx)
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for %s: %w; last: %s", what, ctx.Err(), why)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// unhealthy returns why the cluster is not healthy, or "".
func (c *Cluster) unhealthy(ctx context.Context) string {
	running := map[string]bool{}
	var live []*clusterNode
	for _, n := range c.nodes {
		if n.live() != nil {
			running[n.addr()] = true
			live = append(live, n)
		}
	}
	if len(live) == 0 {
		return "no node is running"
	}
	var agreed string
	for _, n := range live {
		a := n.live()
		if a == nil {
			return n.addr() + " stopped"
		}
		addr := n.addr()
		info, err := a.ClusterInfo(ctx).Result()
		if err != nil {
			return fmt.Sprintf("CLUSTER INFO on %s: %v", addr, err)
		}
		fields := infoFields(info)
		if fields["cluster_state"] != "ok" || fields["cluster_slots_ok"] != "16384" {
			return fmt.Sprintf("%s: cluster_state:%s cluster_slots_ok:%s", addr, fields["cluster_state"], fields["cluster_slots_ok"])
		}
		s, err := a.ClusterNodes(ctx).Result()
		if err != nil {
			return fmt.Sprintf("CLUSTER NODES on %s: %v", addr, err)
		}
		nodes, err := parseClusterNodes(s)
		if err != nil {
			return err.Error()
		}
		if len(nodes) != len(c.nodes) {
			return fmt.Sprintf("%s knows %d nodes of %d", addr, len(nodes), len(c.nodes))
		}
		addrOf := map[string]string{}
		for _, v := range nodes {
			addrOf[v.ID] = v.Addr
		}
		var owners []string
		for _, v := range nodes {
			if running[v.Addr] && v.Failed() {
				return fmt.Sprintf("%s flags running node %s %s", addr, v.Addr, strings.Join(v.Flags, ","))
			}
			if running[v.Addr] {
				// The nodes must agree on who replicates whom, too.
				owners = append(owners, fmt.Sprintf("%s:%s:%s", v.Addr, v.Role, addrOf[v.MasterID]))
			}
			if len(v.Migrating) > 0 || len(v.Importing) > 0 {
				return fmt.Sprintf("%s sees slots in migration at %s", addr, v.Addr)
			}
			if len(v.Slots) == 0 {
				continue
			}
			if !running[v.Addr] {
				return fmt.Sprintf("%s sees slots served by %s, which is down", addr, v.Addr)
			}
			owners = append(owners, fmt.Sprintf("%s%v", v.Addr, v.Slots))
		}
		slices.Sort(owners)
		view := strings.Join(owners, " ")
		if agreed == "" {
			agreed = view
		} else if view != agreed {
			return fmt.Sprintf("nodes disagree on roles and slots: %s vs %s", agreed, view)
		}
		repl, err := a.Info(ctx, "replication").Result()
		if err != nil {
			return fmt.Sprintf("INFO replication on %s: %v", addr, err)
		}
		rf := infoFields(repl)
		if rf["role"] == "slave" {
			master := rf["master_host"] + ":" + rf["master_port"]
			if rf["master_link_status"] != "up" {
				return fmt.Sprintf("replica %s: link to %s %s", addr, master, rf["master_link_status"])
			}
			if !running[master] {
				return fmt.Sprintf("replica %s follows %s, which is down", addr, master)
			}
		}
	}
	return ""
}

// waitReplicasCaughtUp waits until every running replica has processed
// its master's replication stream up to the master's offset when the wait
// began (INFO replication: the replica's slave_repl_offset reaching the
// master's master_repl_offset).
func (c *Cluster) waitReplicasCaughtUp(ctx context.Context) error {
	offsets := map[string]int64{}
	for _, n := range c.nodes {
		if a := n.live(); a != nil {
			repl, err := a.Info(ctx, "replication").Result()
			if err != nil {
				return fmt.Errorf("INFO replication on %s: %w", n.addr(), err)
			}
			if rf := infoFields(repl); rf["role"] == "master" {
				offsets[n.addr()], _ = strconv.ParseInt(rf["master_repl_offset"], 10, 64)
			}
		}
	}
	ctx, cancel := context.WithTimeout(ctx, clusterWaitLimit)
	defer cancel()
	for _, n := range c.nodes {
		a := n.live()
		for a != nil {
			repl, err := a.Info(ctx, "replication").Result()
			if err != nil {
				return fmt.Errorf("INFO replication on %s: %w", n.addr(), err)
			}
			rf := infoFields(repl)
			want, ok := offsets[rf["master_host"]+":"+rf["master_port"]]
			if got, _ := strconv.ParseInt(rf["slave_repl_offset"], 10, 64); rf["role"] != "slave" || !ok || got >= want {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("replica %s did not catch up with its master: %w", n.addr(), ctx.Err())
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	return nil
}

// infoFields parses the key:value lines of an INFO or CLUSTER INFO reply.
func infoFields(s string) map[string]string {
	m := map[string]string{}
	for line := range strings.Lines(s) {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			m[k] = v
		}
	}
	return m
}

// NodeStats are one node's figures since ResetStats (or since it started,
// if later): what a benchmark divides by the steps it ran.
type NodeStats struct {
	Role string // "master" or "replica"
	// Commands are the calls per command, by the name INFO commandstats
	// gives it: lower case, a subcommand after '|' ("cluster|info").
	// A command a script runs counts under its own name as well as the
	// EVAL, EVALSHA or FCALL that ran it; a replica counts the commands
	// its master sends it (a script's writes arrive as those commands);
	// the harness's own INFO and CONFIG RESETSTAT count too.
	Commands map[string]CommandStat
	// Calls is the sum of Commands' calls.
	Calls int64
	// Processed is total_commands_processed, which counts as Calls does.
	Processed int64
	// CPUSeconds is the server process's user and system CPU time,
	// used_cpu_user plus used_cpu_sys, all its threads.
	CPUSeconds float64
	// ChildCPUSeconds is the CPU time of the children the server forked
	// and waited for: RDB saves, AOF rewrites, disk-based full syncs
	// (used_cpu_user_children plus used_cpu_sys_children).
	ChildCPUSeconds float64
	// NetInputBytes and NetOutputBytes count the bytes the node read and
	// wrote, replication included.
	NetInputBytes, NetOutputBytes int64
	// Keys is the number of keys in database 0 now.
	Keys int64
}

// CommandStat is one command's figures from INFO commandstats.
type CommandStat struct {
	Calls       int64
	Usec        int64 // server time spent in the command, in microseconds
	FailedCalls int64
}

// CommandStats returns the figures of every running node, by host:port.
// CONFIG RESETSTAT does not reset a server's CPU time, so CPUSeconds and
// ChildCPUSeconds are counted from what ResetStats saw (from zero for a
// node restarted since).
func (c *Cluster) CommandStats(ctx context.Context) (map[string]NodeStats, error) {
	out := map[string]NodeStats{}
	for _, n := range c.nodes {
		a := n.live()
		if a == nil {
			continue
		}
		s, err := a.Info(ctx, "server", "replication", "stats", "cpu", "commandstats", "keyspace").Result()
		if err != nil {
			return nil, fmt.Errorf("command stats: INFO on %s: %w", n.addr(), err)
		}
		st, mark := parseNodeStats(s)
		c.mu.Lock()
		base, ok := c.baseline[n.addr()]
		c.mu.Unlock()
		if ok && base.pid == mark.pid {
			st.CPUSeconds -= base.seconds
			st.ChildCPUSeconds -= base.children
		}
		out[n.addr()] = st
	}
	return out, nil
}

// parseNodeStats reads NodeStats from an INFO reply, and the process's
// identity and CPU time.
func parseNodeStats(s string) (NodeStats, cpuMark) {
	f := infoFields(s)
	st := NodeStats{Role: "master", Commands: map[string]CommandStat{}}
	if f["role"] == "slave" {
		st.Role = "replica"
	}
	num := func(k string) int64 { v, _ := strconv.ParseInt(f[k], 10, 64); return v }
	st.Processed = num("total_commands_processed")
	st.NetInputBytes = num("total_net_input_bytes")
	st.NetOutputBytes = num("total_net_output_bytes")
	sys, _ := strconv.ParseFloat(f["used_cpu_sys"], 64)
	user, _ := strconv.ParseFloat(f["used_cpu_user"], 64)
	st.CPUSeconds = sys + user
	csys, _ := strconv.ParseFloat(f["used_cpu_sys_children"], 64)
	cuser, _ := strconv.ParseFloat(f["used_cpu_user_children"], 64)
	st.ChildCPUSeconds = csys + cuser
	for k, v := range f {
		switch {
		case strings.HasPrefix(k, "cmdstat_"):
			var cs CommandStat
			for kv := range strings.SplitSeq(v, ",") {
				name, val, _ := strings.Cut(kv, "=")
				x, _ := strconv.ParseInt(val, 10, 64)
				switch name {
				case "calls":
					cs.Calls = x
				case "usec":
					cs.Usec = x
				case "failed_calls":
					cs.FailedCalls = x
				}
			}
			st.Commands[strings.TrimPrefix(k, "cmdstat_")] = cs
			st.Calls += cs.Calls
		case k == "db0":
			for kv := range strings.SplitSeq(v, ",") {
				if name, val, _ := strings.Cut(kv, "="); name == "keys" {
					st.Keys, _ = strconv.ParseInt(val, 10, 64)
				}
			}
		}
	}
	return st, cpuMark{pid: f["process_id"] + "/" + f["run_id"], seconds: st.CPUSeconds, children: st.ChildCPUSeconds}
}

// ResetStats runs CONFIG RESETSTAT on every running node and notes each
// one's CPU time, so that CommandStats counts from now.
func (c *Cluster) ResetStats(ctx context.Context) error {
	// A write made before the reset must reach the replicas first, or a
	// replica would count it after the reset.
	if err := c.waitReplicasCaughtUp(ctx); err != nil {
		return fmt.Errorf("reset stats: %w", err)
	}
	base := map[string]cpuMark{}
	for _, n := range c.nodes {
		a := n.live()
		if a == nil {
			continue
		}
		if err := a.ConfigResetStat(ctx).Err(); err != nil {
			return fmt.Errorf("reset stats on %s: %w", n.addr(), err)
		}
		s, err := a.Info(ctx, "server", "cpu").Result()
		if err != nil {
			return fmt.Errorf("reset stats: INFO on %s: %w", n.addr(), err)
		}
		_, base[n.addr()] = parseNodeStats(s)
	}
	c.mu.Lock()
	c.baseline = base
	c.mu.Unlock()
	return nil
}
