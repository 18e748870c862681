package redisstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stemflow/stem/storage"
)

// DefaultPrefix is the key prefix used when Options.Prefix is empty.
const DefaultPrefix = "stem:"

// Options configures a Store. The zero value works.
type Options struct {
	// Prefix starts every key the store touches (default "stem:"), so that
	// applications and tests sharing a server never see each other's keys.
	// With Redis Cluster it must contain a hash tag, such as "{stem}:".
	Prefix string
	// Clock, when set, is the clock that judges readiness and lease expiry,
	// passed to every script. Nil means the server's own clock (TIME), read
	// inside the script, which is what production wants: one clock for all
	// workers however skewed their machines are. Tests substitute it. (So
	// unlike other stores' options, nil is not storage.SystemClock.)
	Clock storage.Clock
	// AllowEvictingPolicy lets the store run on a server whose
	// maxmemory-policy is not noeviction, with a logged warning. An evicted
	// key is a lost or corrupted run, so leave it false outside experiments.
	AllowEvictingPolicy bool
	// PolicyCheckInterval is how often Claim reads the server's
	// maxmemory-policy again (New reads it first): while it is not
	// noeviction, and AllowEvictingPolicy is not set, Claim refuses to take
	// work. Zero means DefaultPolicyCheckInterval (15s).
	PolicyCheckInterval time.Duration
	// OpenExisting is for tools that inspect or operate a store a worker
	// created: Open and New write no key, and fail with
	// storage.ErrNotStore, naming the server and the prefix, when the
	// prefix holds no Stem store or one of a version this code does not
	// know. A prefix holds a store when its version key (v) is set, which
	// a worker's Open and New do, or, for a store from before version
	// keys, when it has the all-runs index or a catalog. A store of an
	// older key layout is refused too, saying so: a worker's Open (without
	// OpenExisting) upgrades it in place. Opened so, a
	// store does not refuse an evicting maxmemory-policy (it logs a
	// warning), since reading loses nothing; Claim still refuses.
	OpenExisting bool
	// ConnectTimeout bounds connecting: with Open, establishing each
	// connection and the first PING (connection, handshake and reply), so
	// that a server that accepts connections and never answers fails Open
	// in time. Zero means the URL's dial_timeout, or DefaultConnectTimeout
	// (5s) when the URL sets none. With New it bounds the first PING only;
	// the caller's client dials with its own DialTimeout.
	ConnectTimeout time.Duration
	// CallTimeout bounds every call the store makes, even when the caller's
	// context has no deadline, so that a server that stops answering fails
	// calls instead of hanging them; a call it ends reports "no answer
	// within" the timeout and the server. Zero means DefaultCallTimeout
	// (10s). With Open it bounds every command, retries included, and is
	// the client's socket timeout unless the URL sets read_timeout or
	// write_timeout. With New it bounds the scripts through their context,
	// which the caller's client honours only with ContextTimeoutEnabled;
	// its ReadTimeout and WriteTimeout bound the rest. The wake-up
	// subscription is exempt: go-redis pings it when it is quiet.
	CallTimeout time.Duration
	// WaitReplicas, when more than zero, makes every write wait until that
	// many replicas of its master hold it (WAIT, on the write's own
	// connection) before the call returns, and fail when fewer do within
	// WaitTimeout: the write is then applied on the master, and the caller
	// (the engine) repeats it, which every write of the store allows.
	// Replication is asynchronous, so without it a master that fails over
	// right after acknowledging a write can lose it: a checkpoint lost so
	// runs its step again. With one replica per master, WaitReplicas 1
	// closes that window for a single failure; Redis still gives no
	// guarantee when a master and the replicas holding a write all fail.
	// It costs the replication round trip on every write.
	WaitReplicas int
	// WaitTimeout bounds each write's wait for WaitReplicas; zero means
	// DefaultWaitTimeout (1s).
	WaitTimeout time.Duration

	// shard, set by a Cluster only, is 1 + the index of the shard the
	// store is: the shards after the first leave the scripts' loading to
	// it.
	shard int

	// Logger receives the store's diagnostics: at error level, Claim
	// refusing an evicting maxmemory-policy (once per episode); at warn
	// level, a server that stops answering (once per episode: "not
	// answering since", then "answering again after"), an evicting policy
	// allowed or one that cannot be read; at info level, what the server's
	// persistence settings mean for durability (a worker that wants that
	// note once passes a logger that shows info). Nil means
	// storage.LoggerOr's default, which passes warnings and errors to
	// slog.Default() (stderr unless the program set another) and drops the
	// rest; pass a discarding logger for silence.
	Logger *slog.Logger
}

// Store is a storage.Store on Redis. It is safe for concurrent use.
type Store struct {
	client      redis.UniversalClient
	owned       bool
	keys        keyspace
	now         func() time.Time
	logger      *slog.Logger
	host        string // the server, host:port, for messages
	callTimeout time.Duration
	health      *storage.Health
	// shard is Options.shard: 0, or 1 + the store's index among a
	// Cluster's shards.
	shard int
	// waitReplicas and waitTimeout are Options.WaitReplicas and
	// WaitTimeout.
	waitReplicas int
	waitTimeout  time.Duration
	gate         policyGate

	// hub fans the wake channel's messages out to Notifications, and the
	// ended channel's to Finished.
	hub    storage.Hub
	closed atomic.Bool
	done   chan struct{}
	// closeMu orders Close with Notifications and Finished, which start
	// the subscriptions that Close stops.
	closeMu sync.Mutex
	// listeningWake and listeningEnded record the subscriptions started,
	// to the wake and the ended channels.
	listeningWake, listeningEnded bool
	subs                          sync.WaitGroup

	// findPlan and findBytes, set by tests only, make find.lua follow
	// one plan ("walk", "eq" or "sort") and compare strings byte by byte
	// in Lua ("1") whatever its judgement and the server's collation.
	findPlan, findBytes string
}

var (
	_ storage.Store          = (*Store)(nil)
	_ storage.Notifier       = (*Store)(nil)
	_ storage.FinishNotifier = (*Store)(nil)
)

// defaultPoolSize is the connection pool Open uses when the URL does not
// set pool_size: enough for 32 concurrent workers each in a call, with the
// subscription and callers beside them. The client's own default, ten per
// CPU, would hold back an engine of 32 workers on a small machine.
const defaultPoolSize = 40

// Open connects to the Redis server at url (redis://[user:pass@]host:port/db
// or rediss:// for TLS) and returns a store that owns the connection: Close
// closes it. Connecting is bounded by Options.ConnectTimeout, and every
// command by Options.CallTimeout. Unless the URL sets pool_size, the pool
// holds up to 40 connections.
func Open(ctx context.Context, url string, opts Options) (*Store, error) {
	if opts.ConnectTimeout < 0 || opts.CallTimeout < 0 {
		return nil, fmt.Errorf("redisstore: negative ConnectTimeout or CallTimeout: %w", storage.ErrInvalidArgument)
	}
	o, err := redis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("redisstore: parsing url: %w", err)
	}
	clientLimits(url, opts, &o.DialTimeout, &o.ReadTimeout, &o.WriteTimeout, &o.PoolSize)
	o.ContextTimeoutEnabled = true
	client := redis.NewClient(o)
	s, err := newStore(ctx, client, opts, o.DialTimeout)
	if err != nil {
		_ = client.Close()
		return nil, err
	}
	s.owned = true
	return s, nil
}

// clientLimits sets what Open and OpenCluster set of the client they make:
// the dial timeout (Options.ConnectTimeout, else the URL's, else
// DefaultConnectTimeout), the read and write timeouts (the URL's, else the
// call timeout) and the pool size (at least defaultPoolSize unless the URL
// sets pool_size).
func clientLimits(url string, opts Options, dial, read, write *time.Duration, pool *int) {
	call := cmp.Or(opts.CallTimeout, DefaultCallTimeout)
	*dial = cmp.Or(opts.ConnectTimeout, *dial, DefaultConnectTimeout)
	*read = cmp.Or(*read, call)
	*write = cmp.Or(*write, call)
	if !strings.Contains(url, "pool_size") {
		*pool = max(*pool, defaultPoolSize)
	}
}

// New returns a store on a client the caller owns: Close leaves it open.
//
// It checks the server first: it must answer, run Lua scripts with
// shebangs (Redis 7.0 or later), and have maxmemory-policy noeviction
// (see Options.AllowEvictingPolicy). When the server does not permit
// CONFIG (managed Redis often does not), the policy cannot be checked: New
// logs a warning and goes on. Then, unless Options.OpenExisting, it marks
// the prefix as a Stem store (its version key) if it is not one yet.
func New(ctx context.Context, client redis.UniversalClient, opts Options) (*Store, error) {
	if opts.ConnectTimeout < 0 {
		return nil, fmt.Errorf("redisstore: negative ConnectTimeout: %w", storage.ErrInvalidArgument)
	}
	return newStore(ctx, client, opts, 0)
}

// newStore is New. A client Open made comes with the timeout it dials
// with: then a hook bounds every command of the client by the call
// timeout, and the first PING (connecting and the handshake) by the
// connect timeout.
func newStore(ctx context.Context, client redis.UniversalClient, opts Options, dialTimeout time.Duration) (*Store, error) {
	if client == nil {
		return nil, fmt.Errorf("redisstore: nil client: %w", storage.ErrInvalidArgument)
	}
	if opts.CallTimeout < 0 || opts.PolicyCheckInterval < 0 || opts.WaitReplicas < 0 || opts.WaitTimeout < 0 {
		return nil, fmt.Errorf("redisstore: negative CallTimeout, PolicyCheckInterval, WaitReplicas or WaitTimeout: %w", storage.ErrInvalidArgument)
	}
	hooked := dialTimeout > 0
	connect := cmp.Or(dialTimeout, opts.ConnectTimeout, DefaultConnectTimeout)
	s := &Store{
		client:       client,
		keys:         keyspace{prefix: cmp.Or(opts.Prefix, DefaultPrefix)},
		logger:       storage.LoggerOr(opts.Logger),
		host:         hostOf(client),
		callTimeout:  cmp.Or(opts.CallTimeout, DefaultCallTimeout),
		waitReplicas: opts.WaitReplicas,
		waitTimeout:  cmp.Or(opts.WaitTimeout, DefaultWaitTimeout),
		gate: policyGate{
			allow:    opts.AllowEvictingPolicy,
			interval: cmp.Or(opts.PolicyCheckInterval, DefaultPolicyCheckInterval),
		},
		done: make(chan struct{}),
	}
	s.health = storage.NewHealth(s.logger, "redisstore: server at "+s.host)
	if hooked {
		client.AddHook(boundHook{s})
	}
	if opts.Clock != nil {
		s.now = opts.Clock.Now
	}
	switch client.(type) {
	case *redis.ClusterClient, *redis.Ring:
		if !hasHashTag(s.keys.prefix) {
			return nil, fmt.Errorf("redisstore: prefix %q has no hash tag: with a sharded client every key of the store must live in one slot, so use a prefix such as \"{stem}:\": %w", s.keys.prefix, storage.ErrInvalidArgument)
		}
	}
	start := time.Now()
	if err := s.ping(ctx, connect); err != nil {
		return nil, fmt.Errorf("redisstore: connect: %w", s.onHost(err))
	}
	// The checks and loads that follow are bounded as a whole, for a
	// client the caller made too.
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if err := s.checkServer(ctx, opts.AllowEvictingPolicy || opts.OpenExisting); err != nil {
		return nil, err
	}
	if err := s.checkStore(ctx, opts.OpenExisting); err != nil {
		return nil, err
	}
	for _, sc := range allScripts {
		if opts.shard > 1 {
			break
		}
		if err := s.outcome(ctx, start, "script load", sc.Load(ctx, client).Err()); err != nil {
			return nil, fmt.Errorf("redisstore: loading scripts (Redis 7.0 or later is required): %w", s.onHost(err))
		}
	}
	return s, nil
}

// ping sends PING, bounded by timeout: on a new client, that is connecting
// and the handshake too.
func (s *Store) ping(ctx context.Context, timeout time.Duration) error {
	start := time.Now()
	pctx, cancel := context.WithDeadlineCause(ctx, start.Add(timeout), errConnectTimeout)
	defer cancel()
	err := s.client.Ping(pctx).Err()
	var ne net.Error
	// The socket's own read timeout can fire a moment before the connect
	// deadline on a loaded machine: either way the server did not answer
	// in time.
	if err != nil && (context.Cause(pctx) == errConnectTimeout || errors.As(err, &ne) && ne.Timeout()) {
		err = &storage.NoAnswerError{Timeout: timeout, Err: err}
	}
	return s.outcome(pctx, start, "ping", err)
}

// hasHashTag reports whether key has a non-empty {...} section, which Redis
// Cluster hashes instead of the whole key.
func hasHashTag(key string) bool {
	i := strings.IndexByte(key, '{')
	if i < 0 {
		return false
	}
	j := strings.IndexByte(key[i+1:], '}')
	return j > 0
}

// checkServer reads the eviction policy and the persistence settings.
func (s *Store) checkServer(ctx context.Context, allowEvicting bool) error {
	policy, err := s.readPolicy(ctx)
	if err != nil {
		return err
	}
	if err := s.judgePolicy(policy, allowEvicting); err != nil {
		return err
	}
	s.gate.set(policy)
	if s.shard <= 1 {
		// A Cluster's shards share servers: its first says it for all.
		s.logPersistence(ctx)
	}
	return nil
}

// readPolicy returns the server's maxmemory-policy, or "" when the server
// does not let this client read it (managed Redis often disables CONFIG).
func (s *Store) readPolicy(ctx context.Context) (string, error) {
	res, err := s.client.ConfigGet(ctx, "maxmemory-policy").Result()
	var rerr redis.Error
	switch {
	case errors.As(err, &rerr):
		s.logger.Debug("redisstore: CONFIG GET maxmemory-policy refused", "error", err)
		return "", nil
	case err != nil:
		return "", fmt.Errorf("redisstore: reading maxmemory-policy: %w", s.onHost(err))
	}
	return res["maxmemory-policy"], nil
}

// judgePolicy acts on a maxmemory-policy read by readPolicy: an unknown one
// ("") and an evicting one that is allowed are logged as warnings; an
// evicting one that is not allowed is the error New returns.
func (s *Store) judgePolicy(policy string, allowEvicting bool) error {
	if policy == "" {
		s.logger.Warn("redisstore: cannot read maxmemory-policy (CONFIG not permitted?); make sure it is noeviction, or evicted keys will be lost runs")
		return nil
	}
	warn, err := checkPolicy(policy, allowEvicting)
	if err != nil {
		return err
	}
	if warn != "" {
		s.logger.Warn(warn, "maxmemory-policy", policy)
	}
	return nil
}

// checkPolicy decides on a maxmemory-policy: noeviction is fine, any other
// is refused unless allowed, and then returns a warning to log.
func checkPolicy(policy string, allow bool) (warning string, err error) {
	if policy == "noeviction" {
		return "", nil
	}
	if !allow {
		return "", fmt.Errorf("redisstore: server maxmemory-policy is %q, not noeviction: under memory pressure Redis would delete keys, and each evicted key is a lost or corrupted workflow run; set maxmemory-policy noeviction (or Options.AllowEvictingPolicy to accept the risk)", policy)
	}
	return "redisstore: DANGER: maxmemory-policy is not noeviction; Redis may evict keys under memory pressure and runs will be lost or corrupted", nil
}

// logPersistence reports the durability the server's settings give.
func (s *Store) logPersistence(ctx context.Context) {
	aof, err := s.client.ConfigGet(ctx, "appendonly").Result()
	if err != nil {
		return
	}
	fsync, err := s.client.ConfigGet(ctx, "appendfsync").Result()
	if err != nil {
		return
	}
	switch {
	case aof["appendonly"] != "yes":
		s.logger.Info("redisstore: append-only file is off: a Redis crash or restart loses recent (or all) runs; use appendonly yes with appendfsync always for durable checkpoints")
	case fsync["appendfsync"] != "always":
		s.logger.Info("redisstore: appendfsync is not always: a crash can lose about a second of acknowledged checkpoints", "appendfsync", fsync["appendfsync"])
	}
}

// Close releases the store; with Open, it closes the connection too. Calls
// after Close return storage.ErrClosed.
func (s *Store) Close() error {
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	if s.closed.Swap(true) {
		return storage.ErrClosed
	}
	close(s.done)
	s.subs.Wait()
	s.hub.Close()
	if s.owned {
		if err := s.client.Close(); err != nil {
			return fmt.Errorf("redisstore: closing: %w", err)
		}
	}
	return nil
}

// clockArg is the scripts' clock argument: "" for the server's TIME.
func (s *Store) clockArg() string {
	if s.now == nil {
		return ""
	}
	return micros(s.now())
}

// checkOpen reports ErrClosed after Close, for the calls that do not go
// through run.
func (s *Store) checkOpen() error {
	if s.closed.Load() {
		return storage.ErrClosed
	}
	return nil
}

// wrapErr turns the client's errors after Close into ErrClosed, and names
// the server in any other error that is not the server's own reply. (The
// calls record in the store's health whether the server answered: run for
// scripts, the hook for every command of a client Open made.)
func (s *Store) wrapErr(err error) error {
	if errors.Is(err, redis.ErrClosed) || s.closed.Load() {
		return storage.ErrClosed
	}
	if answered(err) {
		return err
	}
	return s.onHost(err)
}
