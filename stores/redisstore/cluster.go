package redisstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stemflow/stem/internal/slots"
	"github.com/stemflow/stem/storage"
)

// DefaultShards is how many shards a new Cluster store spreads its runs
// over when ClusterOptions.Shards is zero.
const DefaultShards = 16

// maxShards bounds ClusterOptions.Shards: every claim that finds nothing
// and every listing asks each shard.
const maxShards = 1024

// ClusterOptions configures a Cluster store.
type ClusterOptions struct {
	// Options are those of a single-server store; Prefix starts every key
	// and must hold no hash tag ({...}): the store adds one per shard.
	Options
	// Shards is how many shards the store spreads runs over, each one hash
	// slot, which the cluster places on its masters (1 to 1024). A store
	// records the number it was created with: zero means that number, or
	// DefaultShards for a new store; another number than the recorded one
	// is refused, since runs already stored would not be found.
	//
	// With one shard every key of the store lives in one slot and the store
	// has the whole contract, on one master's throughput. With more, queue
	// limits (storage.FeatureQueueLimits) are refused with
	// storage.ErrUnsupported, since bounding a queue needs one atomic
	// change across runs that different shards hold, and priority and
	// ready order hold within each shard (storage.FeatureGlobalOrder).
	Shards int
}

// Cluster is a storage.Store on a Redis Cluster (or, for tests and
// migrations, on one server): runs are spread over a fixed number of
// shards, each a complete store of this package's layout under a prefix
// with its own hash tag, so that every script touches one slot.
//
// A run lives on its family's shard: a run without a parent on the shard
// its ID's root hashes to (the ID up to its first '/' or '@', so that the
// children the engine names parent/key and the runs a schedule names
// schedule@tick land with their parent or schedule), a child on its
// parent's, and a run created with a start key on the shard its workflow
// and key hash to, where every create with the key is judged. A run whose
// ID hashes elsewhere than the shard it lives on has a locator key on the
// shard its ID hashes to, written before the run and never changed, which
// the store reads to find it (and remembers, as it remembers where the
// runs it created and claimed live). A keyed create whose ID already
// lives on another shard is refused with storage.ErrUnsupported.
//
// What spans shards is a sequence of single-shard calls, each safe to
// repeat: a claim asks the shards in turn, starting at a different one
// each time, until it has its limit; an Emit delivers on every shard; a
// listing reads a page from every shard and merges them; counts, queue
// statistics and purges add up the shards'. Catalog and worker records
// live on the first shard, schedules on the shard their ID hashes to,
// with the runs their ticks start. Announcements (wake-ups and ends) go to
// channels every shard shares.
type Cluster struct {
	client redis.UniversalClient
	owned  bool
	shards []*Store
	prefix string
	// turn is where the next claim starts.
	turn atomic.Uint32
	// swept is when this process last swept each shard's outbox
	// (outbox.go), in Unix nanoseconds.
	swept sweepClock
	// where remembers the shard of a run ID: an int.
	where  sync.Map
	wheres atomic.Int64
}

var (
	_ storage.Store               = (*Cluster)(nil)
	_ storage.Notifier            = (*Cluster)(nil)
	_ storage.EveryFinishNotifier = (*Cluster)(nil)
	_ storage.Interactor          = (*Cluster)(nil)
	_ storage.Partial             = (*Cluster)(nil)
	_ storage.CommitProber        = (*Cluster)(nil)
)

// IsClusterURL reports whether url names a Redis Cluster store:
// redis+cluster:// or rediss+cluster://.
func IsClusterURL(url string) bool {
	return strings.HasPrefix(url, "redis+cluster://") || strings.HasPrefix(url, "rediss+cluster://")
}

// parseClusterURL reads redis+cluster://[user:pass@]host:port[,host:port...][?shards=N&...]
// (rediss+cluster:// for TLS): the nodes to start from, the client's
// options as go-redis reads them, and the shards parameter.
func parseClusterURL(raw string) (*redis.ClusterOptions, clusterURLParams, error) {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok || !IsClusterURL(raw) {
		return nil, clusterURLParams{}, fmt.Errorf("redisstore: %q is not a redis+cluster:// or rediss+cluster:// URL: %w", redactURL(raw), storage.ErrInvalidArgument)
	}
	auth, hostsAndQuery := "", rest
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		auth, hostsAndQuery = rest[:at+1], rest[at+1:]
	}
	hosts, query, _ := strings.Cut(hostsAndQuery, "?")
	hosts = strings.TrimSuffix(hosts, "/")
	if hosts == "" {
		return nil, clusterURLParams{}, fmt.Errorf("redisstore: cluster URL %q names no node: %w", redactURL(raw), storage.ErrInvalidArgument)
	}
	values, err := url.ParseQuery(query)
	if err != nil {
		return nil, clusterURLParams{}, fmt.Errorf("redisstore: cluster URL %q: %v: %w", redactURL(raw), err, storage.ErrInvalidArgument)
	}
	shards := 0
	if v := values.Get("shards"); v != "" {
		if shards, err = strconv.Atoi(v); err != nil || shards < 1 || shards > maxShards {
			return nil, clusterURLParams{}, fmt.Errorf("redisstore: cluster URL: shards=%q is not a number from 1 to %d: %w", v, maxShards, storage.ErrInvalidArgument)
		}
		values.Del("shards")
	}
	wait := -1
	if v := values.Get("wait_replicas"); v != "" {
		if wait, err = strconv.Atoi(v); err != nil || wait < 0 {
			return nil, clusterURLParams{}, fmt.Errorf("redisstore: cluster URL: wait_replicas=%q is not a number of replicas: %w", v, storage.ErrInvalidArgument)
		}
		values.Del("wait_replicas")
	}
	nodes := strings.Split(hosts, ",")
	for _, n := range nodes[1:] {
		values.Add("addr", n)
	}
	plain := strings.TrimSuffix(scheme, "+cluster") + "://" + auth + nodes[0]
	if len(values) > 0 {
		plain += "?" + values.Encode()
	}
	o, err := redis.ParseClusterURL(plain)
	if err != nil {
		msg := err.Error()
		if _, name, ok := strings.Cut(msg, "unexpected option: "); ok {
			if near := storage.Nearest(name, clusterURLOptions); near != "" && near != name {
				msg += "; did you mean " + near + "?"
			}
		}
		return nil, clusterURLParams{}, fmt.Errorf("redisstore: cluster URL: %s: %w", msg, storage.ErrInvalidArgument)
	}
	return o, clusterURLParams{shards: shards, wait: wait}, nil
}

// clusterURLParams are the parameters of a cluster URL that are the
// store's, not the client's: shards, and wait_replicas (-1 when absent).
type clusterURLParams struct {
	shards, wait int
}

// clusterURLOptions are the parameters a cluster URL takes: shards, and
// those go-redis's ParseClusterURL reads (for a did-you-mean).
var clusterURLOptions = []string{
	"shards", "wait_replicas", "addr", "protocol", "client_name", "dial_timeout", "read_timeout", "write_timeout",
	"pool_fifo", "pool_size", "pool_timeout", "min_idle_conns", "max_idle_conns", "max_active_conns",
	"conn_max_idle_time", "conn_max_lifetime", "max_retries", "min_retry_backoff", "max_retry_backoff",
	"max_redirects", "read_only", "route_by_latency", "route_randomly", "skip_verify",
}

// redactURL hides the password of a URL for messages.
func redactURL(raw string) string {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return raw
	}
	at := strings.LastIndex(rest, "@")
	if at < 0 {
		return raw
	}
	user, _, hasPass := strings.Cut(rest[:at], ":")
	if !hasPass {
		return raw
	}
	return scheme + "://" + user + ":xxxxx@" + rest[at+1:]
}

// OpenCluster connects to the Redis Cluster at url
// (redis+cluster://host:port[,host:port...], rediss+cluster:// for TLS;
// the client's options as go-redis's ParseClusterURL reads them, and
// shards=N for ClusterOptions.Shards) and returns a store that owns the
// connections: Close closes them. Unless the URL sets pool_size, each node's
// pool holds up to 40 connections.
func OpenCluster(ctx context.Context, url string, opts ClusterOptions) (*Cluster, error) {
	if opts.ConnectTimeout < 0 || opts.CallTimeout < 0 {
		return nil, fmt.Errorf("redisstore: negative ConnectTimeout or CallTimeout: %w", storage.ErrInvalidArgument)
	}
	o, params, err := parseClusterURL(url)
	if err != nil {
		return nil, err
	}
	if params.shards != 0 && opts.Shards != 0 && params.shards != opts.Shards {
		return nil, fmt.Errorf("redisstore: the URL says shards=%d and the options %d: %w", params.shards, opts.Shards, storage.ErrInvalidArgument)
	}
	opts.Shards = cmp.Or(opts.Shards, params.shards)
	if params.wait >= 0 {
		if opts.WaitReplicas != 0 && opts.WaitReplicas != params.wait {
			return nil, fmt.Errorf("redisstore: the URL says wait_replicas=%d and the options %d: %w", params.wait, opts.WaitReplicas, storage.ErrInvalidArgument)
		}
		opts.WaitReplicas = params.wait
	}
	clientLimits(url, opts.Options, &o.DialTimeout, &o.ReadTimeout, &o.WriteTimeout, &o.PoolSize)
	o.ContextTimeoutEnabled = true
	client := redis.NewClusterClient(o)
	c, err := newCluster(ctx, client, opts, true)
	if err != nil {
		_ = client.Close()
		return nil, err
	}
	c.owned = true
	return c, nil
}

// NewCluster returns a Cluster store on a client the caller owns (a
// *redis.ClusterClient, or any client of one server): Close leaves it
// open. The checks are New's.
func NewCluster(ctx context.Context, client redis.UniversalClient, opts ClusterOptions) (*Cluster, error) {
	if client == nil {
		return nil, fmt.Errorf("redisstore: nil client: %w", storage.ErrInvalidArgument)
	}
	return newCluster(ctx, client, opts, false)
}

// newCluster is NewCluster. A client OpenCluster made gets the hook that
// bounds each of its commands by the call timeout (as Open's does),
// reporting to the first shard's health.
func newCluster(ctx context.Context, client redis.UniversalClient, opts ClusterOptions, hooked bool) (*Cluster, error) {
	prefix := cmp.Or(opts.Prefix, DefaultPrefix)
	if strings.ContainsAny(prefix, "{}") {
		return nil, fmt.Errorf("redisstore: cluster prefix %q holds a brace: the store adds each shard's hash tag itself: %w", prefix, storage.ErrInvalidArgument)
	}
	if opts.Shards < 0 || opts.Shards > maxShards {
		return nil, fmt.Errorf("redisstore: Shards %d is not from 1 to %d: %w", opts.Shards, maxShards, storage.ErrInvalidArgument)
	}
	n, err := shardCount(ctx, client, prefix, opts)
	if err != nil {
		return nil, err
	}
	c := &Cluster{client: client, prefix: prefix, shards: make([]*Store, n), swept: make(sweepClock, n)}
	for i := range n {
		so := opts.Options
		so.Prefix = shardPrefix(prefix, i, n)
		so.shard = i + 1
		s, err := newStore(ctx, client, so, 0)
		if err != nil {
			c.closeShards()
			return nil, fmt.Errorf("redisstore: shard %d of %d: %w", i, n, err)
		}
		c.shards[i] = s
	}
	if hooked {
		client.AddHook(boundHook{c.shards[0]})
	}
	return c, nil
}

// shardCount reads the number of shards the store at prefix was created
// with (its key <prefix>shards), and records opts.Shards (or
// DefaultShards) for a new store. Opened with OpenExisting, a prefix
// without the record is not a store.
func shardCount(ctx context.Context, client redis.UniversalClient, prefix string, opts ClusterOptions) (int, error) {
	key := prefix + "shards"
	cctx, cancel := context.WithTimeout(ctx, cmp.Or(opts.ConnectTimeout, DefaultConnectTimeout)+cmp.Or(opts.CallTimeout, DefaultCallTimeout))
	defer cancel()
	got, err := client.Get(cctx, key).Result()
	switch {
	case errors.Is(err, redis.Nil) && opts.OpenExisting:
		return 0, fmt.Errorf("redisstore: no Stem cluster store at prefix %q (no key %s; a worker's OpenCluster, or stem init, creates it): %w", prefix, key, storage.ErrNotStore)
	case errors.Is(err, redis.Nil):
		n, err := client.Exists(cctx, prefix+"v").Result()
		if err != nil {
			return 0, fmt.Errorf("redisstore: looking for a store at prefix %q: %w", prefix, err)
		}
		if n > 0 {
			return 0, fmt.Errorf("redisstore: the prefix %q holds a store of one server's layout (its key %sv), which a cluster store would not see: open it with a redis:// URL, or give the cluster store a prefix of its own: %w",
				prefix, prefix, storage.ErrNotStore)
		}
		want := cmp.Or(opts.Shards, DefaultShards)
		ok, err := client.SetNX(cctx, key, strconv.Itoa(want), 0).Result()
		if err != nil {
			return 0, fmt.Errorf("redisstore: recording the shard count of the cluster store at prefix %q: %w", prefix, err)
		}
		if ok {
			return want, nil
		}
		return shardCount(ctx, client, prefix, opts)
	case err != nil:
		return 0, fmt.Errorf("redisstore: reading the shard count of the cluster store at prefix %q: %w", prefix, err)
	}
	n, err := strconv.Atoi(got)
	if err != nil || n < 1 || n > maxShards {
		return 0, fmt.Errorf("redisstore: key %s holds %q, not a shard count: %w", key, got, storage.ErrNotStore)
	}
	if opts.Shards != 0 && opts.Shards != n {
		return 0, fmt.Errorf("redisstore: the store at prefix %q has %d shards, not %d: its runs would not be found (open it with shards=%d, or use another prefix): %w",
			prefix, n, opts.Shards, n, storage.ErrInvalidArgument)
	}
	return n, nil
}

// shardPrefix is the prefix of shard i of n: the store's prefix and a hash
// tag {i.j} whose slot lies in the i-th of n equal ranges of the 16384
// slots (j the first that does), so that a cluster whose masters hold equal
// ranges holds equal numbers of shards. The tag's form is what the scripts
// strip to name the channels every shard shares (channelPrefix).
func shardPrefix(prefix string, i, n int) string {
	lo, hi := i*slots.Count/n, (i+1)*slots.Count/n
	for j := 0; ; j++ {
		tag := strconv.Itoa(i) + "." + strconv.Itoa(j)
		if s := slots.Of(tag); s >= lo && s < hi {
			return prefix + "{" + tag + "}:"
		}
	}
}

// channelPrefix is the prefix of the pub/sub channels of a store with the
// prefix: the prefix itself, or for a shard of a Cluster store, the prefix
// before its shard's tag, so that every shard announces on one channel.
// It mirrors channel_prefix in scripts/lib/keys.lua.
func channelPrefix(prefix string) string {
	rest, ok := strings.CutSuffix(prefix, "}:")
	if !ok {
		return prefix
	}
	i := strings.LastIndexByte(rest, '{')
	if i < 0 {
		return prefix
	}
	a, b, ok := strings.Cut(rest[i+1:], ".")
	if !ok || !allDigits(a) || !allDigits(b) {
		return prefix
	}
	return rest[:i]
}

func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// root is the part of a run ID that places it: up to its first '/' (the
// engine names a child parent/key) or '@' (a schedule's tick
// schedule@tick).
func root(id string) string {
	if i := strings.IndexAny(id, "/@"); i >= 0 {
		return id[:i]
	}
	return id
}

// home is the shard the ID's root hashes to.
func (c *Cluster) home(id string) int { return hashShard(len(c.shards), root(id)) }

// hashShard is the shard of n that parts, NUL-separated, hash to.
func hashShard(n int, parts ...string) int {
	h := fnv.New32a()
	for i, p := range parts {
		if i > 0 {
			_, _ = h.Write([]byte{0})
		}
		_, _ = h.Write([]byte(p))
	}
	return int(h.Sum32() % uint32(n))
}

// locator is the key on the ID's home shard that names the shard its run
// lives on when that is another (a child whose parent lives elsewhere, a
// schedule's run named otherwise).
func (c *Cluster) locator(id string) string {
	return c.shards[c.home(id)].keys.prefix + "loc:" + id
}

// maxRemembered bounds the shards of run IDs a Cluster remembers; past it
// they are forgotten and read again.
const maxRemembered = 1 << 20

// remember records that the run id lives on shard i.
func (c *Cluster) remember(id string, i int) {
	if len(c.shards) == 1 {
		return
	}
	if _, loaded := c.where.Swap(id, i); !loaded && c.wheres.Add(1) > maxRemembered {
		c.where.Clear()
		c.wheres.Store(0)
	}
}

// locate returns the shard the run id lives on (or would, when there is no
// such run): remembered, or named by its locator, or its home.
func (c *Cluster) locate(ctx context.Context, id string) (int, error) {
	if len(c.shards) == 1 {
		return 0, nil
	}
	if v, ok := c.where.Load(id); ok {
		return v.(int), nil
	}
	h := c.home(id)
	var got string
	err := c.shards[h].hcall(ctx, "locate", func(ctx context.Context) error {
		var err error
		got, err = c.client.Get(ctx, c.locator(id)).Result()
		return err
	})
	if errors.Is(err, redis.Nil) {
		return h, nil
	}
	if err != nil {
		return 0, fmt.Errorf("redisstore: locating run %q: %w", id, err)
	}
	i, err := strconv.Atoi(got)
	if err != nil || i < 0 || i >= len(c.shards) {
		return 0, fmt.Errorf("redisstore: locator of run %q holds %q, not a shard of %d", id, got, len(c.shards))
	}
	c.remember(id, i)
	return i, nil
}

// of returns the shard the run id lives on.
func (c *Cluster) of(ctx context.Context, id string) (*Store, error) {
	if err := c.checkOpen(); err != nil {
		return nil, err
	}
	if id == "" {
		// Let the shard's validation name the missing ID.
		return c.shards[0], nil
	}
	i, err := c.locate(ctx, id)
	if err != nil {
		return nil, err
	}
	return c.shards[i], nil
}

// place records that the run id is to live on shard i, which is not its
// home: its locator, written unless one exists. It returns the shard the
// run lives on: i, or the one an earlier locator names.
func (c *Cluster) place(ctx context.Context, id string, i int) (int, error) {
	s := c.shards[c.home(id)]
	key := c.locator(id)
	var ok bool
	err := s.write(ctx, "place", key, func(p redis.Pipeliner) func() error {
		cmd := p.SetNX(ctx, key, strconv.Itoa(i), 0)
		return func() error {
			ok = cmd.Val()
			return cmd.Err()
		}
	})
	if err != nil {
		return 0, fmt.Errorf("redisstore: placing run %q: %w", id, err)
	}
	if !ok {
		c.where.Delete(id)
		return c.locate(ctx, id)
	}
	c.remember(id, i)
	return i, nil
}

func (c *Cluster) checkOpen() error {
	if c.shards[0].closed.Load() {
		return storage.ErrClosed
	}
	return nil
}

// Shards reports how many shards the store spreads runs over.
func (c *Cluster) Shards() int { return len(c.shards) }

// ShardPrefixes returns each shard's key prefix, with its hash tag, in
// shard order: what a tool that reads the keys (or places the slots) needs.
func (c *Cluster) ShardPrefixes() []string {
	out := make([]string, len(c.shards))
	for i, s := range c.shards {
		out[i] = s.keys.prefix
	}
	return out
}

// Lacks implements storage.Partial: with more than one shard, queue
// limits and one order across the store (each shard claims and purges in
// its order, and claims visit the shards in turn).
func (c *Cluster) Lacks(f storage.Feature) bool {
	switch f {
	case storage.FeatureQueueLimits, storage.FeatureGlobalOrder:
		return len(c.shards) > 1
	}
	return false
}

// WhyLacks implements storage.Partial.
func (c *Cluster) WhyLacks(f storage.Feature) string {
	if !c.Lacks(f) {
		return ""
	}
	return fmt.Sprintf("a Redis Cluster store of %d shards has %s only within each shard; a store created with shards=1 (under a prefix of its own: the count is fixed when a store is created) keeps every run in one slot and has them", len(c.shards), f)
}

// refused is the error of a request that uses a feature the store lacks.
func (c *Cluster) refused(f storage.Feature, what string) error {
	return fmt.Errorf("redisstore: %s uses %s: %s: %w", what, f, c.WhyLacks(f), storage.ErrUnsupported)
}

// Close closes every shard and, when OpenCluster made the client, the
// client.
func (c *Cluster) Close() error {
	if err := c.checkOpen(); err != nil {
		return err
	}
	c.closeShards()
	if c.owned {
		if err := c.client.Close(); err != nil {
			return fmt.Errorf("redisstore: closing: %w", err)
		}
	}
	return nil
}

func (c *Cluster) closeShards() {
	for _, s := range c.shards {
		if s != nil {
			_ = s.Close()
		}
	}
}

// each calls f on every shard at once and returns the first error.
func (c *Cluster) each(f func(i int, s *Store) error) error {
	if len(c.shards) == 1 {
		return f(0, c.shards[0])
	}
	errs := make([]error, len(c.shards))
	var wg sync.WaitGroup
	for i, s := range c.shards {
		wg.Go(func() { errs[i] = f(i, s) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// gather calls f on every shard at once and returns their answers in
// shard order, and the first error (the answers of the shards that
// answered are there too).
func gather[T any](c *Cluster, f func(*Store) (T, error)) ([]T, error) {
	out := make([]T, len(c.shards))
	err := c.each(func(i int, s *Store) error {
		var err error
		out[i], err = f(s)
		return err
	})
	return out, err
}

// mergePage merges the shards' pages of one listing, each in the
// listing's order (cmp) and holding more when more is set: the first
// size items of all, and whether more follow. A shard whose page was cut
// returned size items, all of which sort before what it left, so the
// merged page misses nothing.
func mergePage[T any](parts [][]T, more bool, size int, cmp func(a, b T) int) ([]T, bool) {
	all := slices.Concat(parts...)
	slices.SortFunc(all, cmp)
	if len(all) > size {
		return all[:size], true
	}
	return all, more
}

// CreateRuns implements storage.Store: each run on its family's shard,
// the runs of each shard in one call to it. A batch that spans shards is
// not one atomic change: a failure can leave the runs of some shards
// created, and the same batch again (creates are idempotent by ID)
// finishes it.
func (c *Cluster) CreateRuns(ctx context.Context, runs []storage.NewRun) ([]storage.CreateResult, error) {
	if err := storage.ValidateNewRuns(runs); err != nil {
		return nil, fmt.Errorf("redisstore: %w", err)
	}
	if err := c.checkOpen(); err != nil {
		return nil, err
	}
	if len(c.shards) == 1 {
		return c.shards[0].CreateRuns(ctx, runs)
	}
	at := make([]int, len(runs))
	for i := range runs {
		var err error
		if runs[i].Key != nil {
			at[i], err = c.placeKeyed(ctx, runs[i].ID, keyShard(len(c.shards), runs[i].Workflow, runs[i].Key.Key))
		} else {
			at[i], err = c.placeNew(ctx, runs[i].ID, runs[i].ParentID)
		}
		if err != nil {
			return nil, err
		}
	}
	out := make([]storage.CreateResult, len(runs))
	for i, s := range c.shards {
		var part []storage.NewRun
		var idx []int
		for j := range runs {
			if at[j] == i {
				part = append(part, runs[j])
				idx = append(idx, j)
			}
		}
		if len(part) == 0 {
			continue
		}
		res, err := s.CreateRuns(ctx, part)
		if err != nil {
			return nil, err
		}
		for k, r := range res {
			out[idx[k]] = r
			// A start key's holder (a join) lives on this shard too.
			c.remember(r.Run.ID, i)
		}
	}
	return out, nil
}

// placeNew is the shard a new run lives on: where a run of its ID lives
// (or lived), else its parent's shard, else its home; a run placed off its
// home gets its locator first.
func (c *Cluster) placeNew(ctx context.Context, id, parent string) (int, error) {
	i, err := c.locate(ctx, id)
	if err != nil || parent == "" {
		return i, err
	}
	p, err := c.locate(ctx, parent)
	if err != nil || p == i {
		return i, err
	}
	if i != c.home(id) {
		// A locator placed the ID already: it stays where it is.
		return i, nil
	}
	return c.place(ctx, id, p)
}

// keyShard is the shard of n that keeps a workflow's start key, and every
// run created with it.
func keyShard(n int, workflow, key string) int { return hashShard(n, workflow, key) }

// placeKeyed is the shard a run created with a start key lives on: the
// key's shard, so that every create with the key is judged there in one
// script. A run of the ID that lives elsewhere already (it was created
// without the key, or with another) cannot be judged with the key there:
// that create is refused.
func (c *Cluster) placeKeyed(ctx context.Context, id string, target int) (int, error) {
	i, err := c.locate(ctx, id)
	if err != nil || i == target {
		return i, err
	}
	conflict := func(at int) error {
		return fmt.Errorf("redisstore: run %q lives on shard %d, and its start key is kept on shard %d: a cluster store judges a key only among the runs on its shard; start the keyed run under another ID: %w",
			id, at, target, storage.ErrUnsupported)
	}
	if i != c.home(id) {
		return 0, conflict(i)
	}
	var n int64
	s := c.shards[i]
	if err := s.hcall(ctx, "place", func(ctx context.Context) error {
		var err error
		n, err = c.client.Exists(ctx, s.keys.run(id)).Result()
		return err
	}); err != nil {
		return 0, err
	}
	if n > 0 {
		return 0, conflict(i)
	}
	at, err := c.place(ctx, id, target)
	if err == nil && at != target {
		return 0, conflict(at)
	}
	return at, err
}

// GetRun implements storage.Store.
func (c *Cluster) GetRun(ctx context.Context, id string) (storage.RunRecord, error) {
	s, err := c.of(ctx, id)
	if err != nil {
		return storage.RunRecord{}, err
	}
	return s.GetRun(ctx, id)
}

// ListRuns implements storage.Store: the children of a parent from its
// shard, any other listing a page from every shard, merged.
func (c *Cluster) ListRuns(ctx context.Context, q storage.ListRunsQuery) (storage.RunPage, error) {
	if err := q.Validate(); err != nil {
		return storage.RunPage{}, fmt.Errorf("redisstore: %w", err)
	}
	if q.ParentID != "" {
		s, err := c.of(ctx, q.ParentID)
		if err != nil {
			return storage.RunPage{}, err
		}
		return s.ListRuns(ctx, q)
	}
	pages, err := gather(c, func(s *Store) (storage.RunPage, error) { return s.ListRuns(ctx, q) })
	if err != nil {
		return storage.RunPage{}, err
	}
	if len(pages) == 1 {
		return pages[0], nil
	}
	parts := make([][]storage.RunRecord, len(pages))
	more := false
	for i, p := range pages {
		parts[i] = p.Runs
		more = more || p.Next != ""
	}
	runs, more := mergePage(parts, more, q.PageSize(), func(a, b storage.RunRecord) int {
		d := 0
		if q.Order == storage.OrderCreated {
			d = a.CreatedAt.Compare(b.CreatedAt)
		}
		if d == 0 {
			d = strings.Compare(a.ID, b.ID)
		}
		if q.Descending {
			return -d
		}
		return d
	})
	page := storage.RunPage{Runs: runs}
	if more && len(runs) > 0 {
		page.Next = q.NextCursor(&runs[len(runs)-1])
	}
	return page, nil
}

// CountRuns implements storage.Store: the shards' counts added up.
func (c *Cluster) CountRuns(ctx context.Context, q storage.CountRunsQuery) (storage.RunCounts, error) {
	counts, err := gather(c, func(s *Store) (storage.RunCounts, error) { return s.CountRuns(ctx, q) })
	if err != nil {
		return nil, err
	}
	out := storage.RunCounts{}
	for _, m := range counts {
		for st, n := range m {
			out[st] += n
		}
	}
	return out, nil
}

// Claim implements storage.Store: the shards in turn, from a different
// one each call, until the claim has its limit. A shard that fails is
// passed over; the error is returned only when no shard leased a run.
func (c *Cluster) Claim(ctx context.Context, req storage.ClaimRequest) ([]storage.ClaimedRun, error) {
	if err := req.Validate(); err != nil {
		return nil, fmt.Errorf("redisstore: %w", err)
	}
	if err := c.checkOpen(); err != nil {
		return nil, err
	}
	if len(c.shards) > 1 {
		for _, q := range req.Queues {
			if q.Limited() {
				return nil, c.refused(storage.FeatureQueueLimits, fmt.Sprintf("the claim of queue %q", q.Name))
			}
		}
	}
	n := len(c.shards)
	start := int(c.turn.Add(1) % uint32(n))
	var out []storage.ClaimedRun
	var firstErr error
	for k := 0; k < n && len(out) < req.Limit; k++ {
		i := (start + k) % n
		c.maybeSweep(ctx, i)
		r := req
		r.Limit = req.Limit - len(out)
		got, err := c.shards[i].Claim(ctx, r)
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			if ctx.Err() != nil || errors.Is(err, storage.ErrClosed) {
				break
			}
			continue
		}
		for _, g := range got {
			c.remember(g.Lease.RunID, i)
		}
		out = append(out, got...)
	}
	if len(out) == 0 && firstErr != nil {
		return nil, firstErr
	}
	return out, nil
}

// NextWake implements storage.Store: the soonest of the shards'.
func (c *Cluster) NextWake(ctx context.Context, req storage.NextWakeRequest) (storage.NextWake, error) {
	wakes, err := gather(c, func(s *Store) (storage.NextWake, error) { return s.NextWake(ctx, req) })
	if err != nil {
		return storage.NextWake{}, err
	}
	var out storage.NextWake
	for _, w := range wakes {
		if w.Found && (!out.Found || w.After < out.After) {
			out = w
		}
	}
	return out, nil
}

// LoadReplay implements storage.Store.
func (c *Cluster) LoadReplay(ctx context.Context, runID string) (storage.Replay, error) {
	s, err := c.of(ctx, runID)
	if err != nil {
		return storage.Replay{}, err
	}
	return s.LoadReplay(ctx, runID)
}

// Checkpoint implements storage.Store.
func (c *Cluster) Checkpoint(ctx context.Context, req storage.CheckpointRequest) (storage.CheckpointResult, error) {
	if err := req.Validate(); err != nil {
		return storage.CheckpointResult{}, fmt.Errorf("redisstore: %w", err)
	}
	s, err := c.of(ctx, req.Lease.RunID)
	if err != nil {
		return storage.CheckpointResult{}, err
	}
	if req.Complete == nil || req.Complete.Notify == nil {
		return s.Checkpoint(ctx, req)
	}
	var res storage.CheckpointResult
	err = c.notifyAcross(ctx, s, req.Lease.RunID, req.Complete.Status, req.Complete.Notify, func(ev *storage.Event) error {
		r, done := req, *req.Complete
		done.Notify = ev
		r.Complete = &done
		var err error
		res, err = s.Checkpoint(ctx, r)
		return err
	})
	return res, err
}

// RecordAttempts implements storage.Store.
func (c *Cluster) RecordAttempts(ctx context.Context, req storage.RecordAttemptsRequest) error {
	s, err := c.of(ctx, req.Lease.RunID)
	if err != nil {
		return err
	}
	return s.RecordAttempts(ctx, req)
}

// Heartbeat implements storage.Store.
func (c *Cluster) Heartbeat(ctx context.Context, req storage.HeartbeatRequest) (storage.HeartbeatResult, error) {
	s, err := c.of(ctx, req.Lease.RunID)
	if err != nil {
		return storage.HeartbeatResult{}, err
	}
	return s.Heartbeat(ctx, req)
}

// Suspend implements storage.Store.
func (c *Cluster) Suspend(ctx context.Context, req storage.SuspendRequest) (storage.SuspendResult, error) {
	s, err := c.of(ctx, req.Lease.RunID)
	if err != nil {
		return storage.SuspendResult{}, err
	}
	return s.Suspend(ctx, req)
}

// TakeEvent implements storage.Store.
func (c *Cluster) TakeEvent(ctx context.Context, req storage.TakeEventRequest) (*storage.Checkpoint, error) {
	s, err := c.of(ctx, req.Lease.RunID)
	if err != nil {
		return nil, err
	}
	return s.TakeEvent(ctx, req)
}

// Complete implements storage.Store.
func (c *Cluster) Complete(ctx context.Context, req storage.CompleteRequest) error {
	if err := req.Validate(); err != nil {
		return fmt.Errorf("redisstore: %w", err)
	}
	s, err := c.of(ctx, req.Lease.RunID)
	if err != nil {
		return err
	}
	return c.notifyAcross(ctx, s, req.Lease.RunID, req.Status, req.Notify, func(ev *storage.Event) error {
		r := req
		r.Notify = ev
		return s.Complete(ctx, r)
	})
}

// Pause implements storage.Store.
func (c *Cluster) Pause(ctx context.Context, runID string) error {
	s, err := c.of(ctx, runID)
	if err != nil {
		return err
	}
	return s.Pause(ctx, runID)
}

// Resume implements storage.Store.
func (c *Cluster) Resume(ctx context.Context, runID string) error {
	s, err := c.of(ctx, runID)
	if err != nil {
		return err
	}
	return s.Resume(ctx, runID)
}

// Terminate implements storage.Store: the run's descendants live on its
// shard.
func (c *Cluster) Terminate(ctx context.Context, req storage.TerminateRequest) ([]string, error) {
	if err := req.Validate(); err != nil {
		return nil, fmt.Errorf("redisstore: %w", err)
	}
	s, err := c.of(ctx, req.RunID)
	if err != nil {
		return nil, err
	}
	var ids []string
	err = c.notifyAcross(ctx, s, req.RunID, storage.StatusTerminated, req.Notify, func(ev *storage.Event) error {
		r := req
		r.Notify = ev
		var err error
		ids, err = s.Terminate(ctx, r)
		return err
	})
	return ids, err
}

// Cancel implements storage.Store.
func (c *Cluster) Cancel(ctx context.Context, req storage.CancelRequest) error {
	s, err := c.of(ctx, req.RunID)
	if err != nil {
		return err
	}
	return s.Cancel(ctx, req)
}

// Restart implements storage.Store.
func (c *Cluster) Restart(ctx context.Context, req storage.RestartRequest) error {
	s, err := c.of(ctx, req.RunID)
	if err != nil {
		return err
	}
	return s.Restart(ctx, req)
}

// ContinueAsNew implements storage.Store.
func (c *Cluster) ContinueAsNew(ctx context.Context, req storage.ContinueRequest) error {
	s, err := c.of(ctx, req.Lease.RunID)
	if err != nil {
		return err
	}
	return s.ContinueAsNew(ctx, req)
}

// ListExecutions implements storage.Store.
func (c *Cluster) ListExecutions(ctx context.Context, runID string) ([]storage.ExecutionRecord, error) {
	s, err := c.of(ctx, runID)
	if err != nil {
		return nil, err
	}
	return s.ListExecutions(ctx, runID)
}

// Emit implements storage.Store: delivered on every shard, each shard's
// delivery one atomic change. An Emit that fails on a shard may have
// delivered on others; its IDs are those of every shard that answered.
func (c *Cluster) Emit(ctx context.Context, req storage.EmitRequest) ([]string, error) {
	ids, err := gather(c, func(s *Store) ([]string, error) { return s.Emit(ctx, req) })
	out := slices.Concat(ids...)
	slices.Sort(out)
	return out, err
}

// SendEvent implements storage.Store.
func (c *Cluster) SendEvent(ctx context.Context, ev storage.Event) (bool, error) {
	s, err := c.of(ctx, ev.RunID)
	if err != nil {
		return false, err
	}
	return s.SendEvent(ctx, ev)
}

// ListSteps implements storage.Store.
func (c *Cluster) ListSteps(ctx context.Context, q storage.StepsQuery) (storage.History, error) {
	s, err := c.of(ctx, q.RunID)
	if err != nil {
		return storage.History{}, err
	}
	return s.ListSteps(ctx, q)
}

// PutCatalog implements storage.Store: the catalog lives on the first
// shard. With more than one shard a queue with limits is refused.
func (c *Cluster) PutCatalog(ctx context.Context, cat storage.Catalog) error {
	if err := c.checkOpen(); err != nil {
		return err
	}
	if len(c.shards) > 1 {
		for _, q := range cat.Queues {
			if q.Limited() {
				return c.refused(storage.FeatureQueueLimits, fmt.Sprintf("queue %q of the catalog", q.Name))
			}
		}
	}
	return c.shards[0].PutCatalog(ctx, cat)
}

// GetCatalog implements storage.Store.
func (c *Cluster) GetCatalog(ctx context.Context) (storage.Catalog, error) {
	if err := c.checkOpen(); err != nil {
		return storage.Catalog{}, err
	}
	return c.shards[0].GetCatalog(ctx)
}

// QueueStats implements storage.Store: each queue's figures added up over
// the shards, its oldest ready run the oldest of theirs.
func (c *Cluster) QueueStats(ctx context.Context, queues []string) ([]storage.QueueStats, error) {
	stats, err := gather(c, func(s *Store) ([]storage.QueueStats, error) { return s.QueueStats(ctx, queues) })
	if err != nil {
		return nil, err
	}
	if len(stats) == 1 {
		return stats[0], nil
	}
	var out []storage.QueueStats
	at := map[string]int{}
	for _, list := range stats {
		for _, q := range list {
			i, ok := at[q.Queue]
			if !ok {
				at[q.Queue] = len(out)
				out = append(out, q)
				continue
			}
			o := &out[i]
			o.Ready += q.Ready
			o.Scheduled += q.Scheduled
			o.Running += q.Running
			o.Waiting += q.Waiting
			o.Paused += q.Paused
			o.OldestReady = max(o.OldestReady, q.OldestReady)
		}
	}
	slices.SortFunc(out, func(a, b storage.QueueStats) int { return strings.Compare(a.Queue, b.Queue) })
	return out, nil
}

// WriteSchedule implements storage.Store: on the shard the schedule's ID
// hashes to, with the runs of its ticks (placed there by locators when
// their IDs hash elsewhere).
func (c *Cluster) WriteSchedule(ctx context.Context, w storage.ScheduleWrite) (storage.ScheduleWriteResult, error) {
	if err := c.checkOpen(); err != nil {
		return storage.ScheduleWriteResult{}, err
	}
	i := c.home(w.Schedule.ID)
	if len(c.shards) > 1 && w.Schedule.ID != "" {
		if err := w.Validate(); err != nil {
			return storage.ScheduleWriteResult{}, fmt.Errorf("redisstore: %w", err)
		}
		for _, r := range w.Runs {
			if r.Key != nil && keyShard(len(c.shards), r.Workflow, r.Key.Key) != i {
				return storage.ScheduleWriteResult{}, fmt.Errorf("redisstore: run %q of schedule %q has a start key kept on another shard than the schedule's, which one script cannot judge: %w",
					r.ID, w.Schedule.ID, storage.ErrUnsupported)
			}
			at, err := c.locate(ctx, r.ID)
			if err != nil {
				return storage.ScheduleWriteResult{}, err
			}
			if at == i {
				continue
			}
			if at == c.home(r.ID) {
				// No locator yet: place the run with its schedule.
				if at, err = c.place(ctx, r.ID, i); err != nil {
					return storage.ScheduleWriteResult{}, err
				}
			}
			if at != i {
				return storage.ScheduleWriteResult{}, fmt.Errorf("redisstore: run %q of schedule %q lives on shard %d, not the schedule's %d: %w", r.ID, w.Schedule.ID, at, i, storage.ErrConflict)
			}
		}
	}
	return c.shards[i].WriteSchedule(ctx, w)
}

// GetSchedule implements storage.Store.
func (c *Cluster) GetSchedule(ctx context.Context, id string) (storage.Schedule, error) {
	if err := c.checkOpen(); err != nil {
		return storage.Schedule{}, err
	}
	return c.shards[c.home(id)].GetSchedule(ctx, id)
}

// DeleteSchedule implements storage.Store.
func (c *Cluster) DeleteSchedule(ctx context.Context, id string) error {
	if err := c.checkOpen(); err != nil {
		return err
	}
	return c.shards[c.home(id)].DeleteSchedule(ctx, id)
}

// ListSchedules implements storage.Store: a page from every shard,
// merged in the query's order.
func (c *Cluster) ListSchedules(ctx context.Context, q storage.ScheduleQuery) (storage.SchedulePage, error) {
	pages, err := gather(c, func(s *Store) (storage.SchedulePage, error) { return s.ListSchedules(ctx, q) })
	if err != nil {
		return storage.SchedulePage{}, err
	}
	if len(pages) == 1 {
		return pages[0], nil
	}
	parts := make([][]storage.Schedule, len(pages))
	more := false
	for i, p := range pages {
		parts[i] = p.Schedules
		more = more || p.Next != ""
	}
	all, more := mergePage(parts, more, q.PageSize(), func(a, b storage.Schedule) int {
		if q.DueBy != nil {
			if d := a.CheckAt.Compare(b.CheckAt); d != 0 {
				return d
			}
		}
		return strings.Compare(a.ID, b.ID)
	})
	page := storage.SchedulePage{Schedules: all}
	if more && len(all) > 0 && q.DueBy == nil {
		page.Next = all[len(all)-1].ID
	}
	return page, nil
}

// Purge implements storage.Store: shard by shard, each taking what is
// left of the limit.
func (c *Cluster) Purge(ctx context.Context, req storage.PurgeRequest) (storage.PurgeResult, error) {
	var out storage.PurgeResult
	for _, s := range c.shards {
		r := req
		if req.Limit > 0 {
			if out.Runs >= req.Limit {
				break
			}
			r.Limit = req.Limit - out.Runs
		}
		got, err := s.Purge(ctx, r)
		if err != nil {
			return out, err
		}
		out.Runs += got.Runs
		out.Events += got.Events
	}
	return out, nil
}

// PutWorker implements storage.Store: worker records live on the first
// shard.
func (c *Cluster) PutWorker(ctx context.Context, req storage.PutWorkerRequest) error {
	return c.shards[0].PutWorker(ctx, req)
}

// RemoveWorker implements storage.Store.
func (c *Cluster) RemoveWorker(ctx context.Context, id string) error {
	return c.shards[0].RemoveWorker(ctx, id)
}

// ListWorkers implements storage.Store.
func (c *Cluster) ListWorkers(ctx context.Context) ([]storage.Worker, error) {
	return c.shards[0].ListWorkers(ctx)
}

// Notifications implements storage.Notifier: every shard announces on the
// first shard's channel.
func (c *Cluster) Notifications(ctx context.Context) <-chan struct{} {
	return c.shards[0].Notifications(ctx)
}

// Finished implements storage.FinishNotifier, on the channel every shard
// announces ends on.
func (c *Cluster) Finished(ctx context.Context) <-chan string {
	return c.shards[0].Finished(ctx)
}

// HearsEveryFinish implements storage.EveryFinishNotifier.
func (c *Cluster) HearsEveryFinish() bool { return true }

// ProbeCommits implements storage.CommitProber, on the first shard.
func (c *Cluster) ProbeCommits(ctx context.Context, conns int, d time.Duration) (storage.CommitProbe, error) {
	return c.shards[0].ProbeCommits(ctx, conns, d)
}

// SendUpdate implements storage.Interactor.
func (c *Cluster) SendUpdate(ctx context.Context, req storage.UpdateRequest) (storage.UpdateResult, error) {
	s, err := c.of(ctx, req.RunID)
	if err != nil {
		return storage.UpdateResult{}, err
	}
	return s.SendUpdate(ctx, req)
}

// GetUpdate implements storage.Interactor.
func (c *Cluster) GetUpdate(ctx context.Context, runID, id string) (storage.UpdateRecord, error) {
	s, err := c.of(ctx, runID)
	if err != nil {
		return storage.UpdateRecord{}, err
	}
	return s.GetUpdate(ctx, runID, id)
}

// ListUpdates implements storage.Interactor.
func (c *Cluster) ListUpdates(ctx context.Context, q storage.UpdatesQuery) ([]storage.UpdateRecord, error) {
	s, err := c.of(ctx, q.RunID)
	if err != nil {
		return nil, err
	}
	return s.ListUpdates(ctx, q)
}

// ReadStream implements storage.Interactor.
func (c *Cluster) ReadStream(ctx context.Context, q storage.StreamQuery) (storage.StreamPage, error) {
	s, err := c.of(ctx, q.RunID)
	if err != nil {
		return storage.StreamPage{}, err
	}
	return s.ReadStream(ctx, q)
}

// ListStreams implements storage.Interactor.
func (c *Cluster) ListStreams(ctx context.Context, runID string) ([]storage.StreamInfo, error) {
	s, err := c.of(ctx, runID)
	if err != nil {
		return nil, err
	}
	return s.ListStreams(ctx, runID)
}
