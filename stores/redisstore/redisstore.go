package redisstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
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
	// Logger receives warnings about the server's configuration (its
	// persistence settings, a policy it could not read); nil discards them.
	Logger *slog.Logger
}

// Store is a storage.Store on Redis. It is safe for concurrent use.
type Store struct {
	client redis.UniversalClient
	owned  bool
	keys   keyspace
	now    func() time.Time
	logger *slog.Logger

	// hub fans the wake channel's messages out to Notifications.
	hub    storage.Hub
	closed atomic.Bool
	done   chan struct{}
	// closeMu orders Close with Notifications, which starts the one
	// subscription (listening) that Close stops.
	closeMu   sync.Mutex
	listening bool
	subs      sync.WaitGroup
}

var (
	_ storage.Store    = (*Store)(nil)
	_ storage.Notifier = (*Store)(nil)
)

// Open connects to the Redis server at url (redis://[user:pass@]host:port/db
// or rediss:// for TLS) and returns a store that owns the connection: Close
// closes it.
func Open(ctx context.Context, url string, opts Options) (*Store, error) {
	o, err := redis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("redisstore: parsing url: %w", err)
	}
	client := redis.NewClient(o)
	s, err := New(ctx, client, opts)
	if err != nil {
		_ = client.Close()
		return nil, err
	}
	s.owned = true
	return s, nil
}

// New returns a store on a client the caller owns: Close leaves it open.
//
// It checks the server first: it must answer, run Lua scripts with
// shebangs (Redis 7.0 or later), and have maxmemory-policy noeviction
// (see Options.AllowEvictingPolicy). When the server does not permit
// CONFIG (managed Redis often does not), the policy cannot be checked: New
// logs a warning and goes on.
func New(ctx context.Context, client redis.UniversalClient, opts Options) (*Store, error) {
	if client == nil {
		return nil, fmt.Errorf("redisstore: nil client: %w", storage.ErrInvalidArgument)
	}
	s := &Store{
		client: client,
		keys:   keyspace{prefix: cmp.Or(opts.Prefix, DefaultPrefix)},
		logger: storage.LoggerOr(opts.Logger),
		done:   make(chan struct{}),
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
	if err := client.Ping(ctx).Err(); err != nil {
		return nil, fmt.Errorf("redisstore: connecting: %w", err)
	}
	if err := s.checkServer(ctx, opts.AllowEvictingPolicy); err != nil {
		return nil, err
	}
	for _, sc := range allScripts {
		if err := sc.Load(ctx, client).Err(); err != nil {
			return nil, fmt.Errorf("redisstore: loading scripts (Redis 7.0 or later is required): %w", err)
		}
	}
	return s, nil
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
	s.logPersistence(ctx)
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
		return "", fmt.Errorf("redisstore: reading maxmemory-policy: %w", err)
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

// wrapErr turns the client's errors after Close into ErrClosed.
func (s *Store) wrapErr(err error) error {
	if errors.Is(err, redis.ErrClosed) || s.closed.Load() {
		return storage.ErrClosed
	}
	return err
}
