package redisstore

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stemflow/stem/storage"

	"github.com/redis/go-redis/v9"
)

// DefaultPrefix is the key prefix used when Options.Prefix is empty.
const DefaultPrefix = "stem:"

// Options configures a Store. The zero value works.
type Options struct {
	// Prefix starts every key the store touches (default "stem:"), so that
	// applications and tests sharing a server never see each other's keys.
	// With Redis Cluster it must contain a hash tag, such as "{stem}:".
	Prefix string
	// Now, when set, is the clock that judges readiness and lease expiry,
	// passed to every script. Nil means the server's own clock (TIME), read
	// inside the script, which is what production wants: one clock for all
	// workers however skewed their machines are. Tests substitute it.
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
	prefix string
	now    func() time.Time
	logger *slog.Logger

	closed  atomic.Bool
	done    chan struct{}
	closeMu sync.Mutex
	subs    sync.WaitGroup
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
		prefix: opts.Prefix,
		logger: storage.LoggerOr(opts.Logger),
		done:   make(chan struct{}),
	}
	if opts.Clock != nil {
		s.now = opts.Clock.Now
	}
	if s.prefix == "" {
		s.prefix = DefaultPrefix
	}
	switch client.(type) {
	case *redis.ClusterClient, *redis.Ring:
		if !hasHashTag(s.prefix) {
			return nil, fmt.Errorf("redisstore: prefix %q has no hash tag: with a sharded client every key of the store must live in one slot, so use a prefix such as \"{stem}:\": %w", s.prefix, storage.ErrInvalidArgument)
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
	if s.owned {
		if err := s.client.Close(); err != nil {
			return fmt.Errorf("redisstore: closing: %w", err)
		}
	}
	return nil
}

// Notifications implements storage.Notifier with Redis pub/sub: the scripts
// publish on the prefix's "wake" channel whenever they make a run ready now.
// They are hints only; the channel is closed when ctx is done or the store
// closes.
func (s *Store) Notifications(ctx context.Context) <-chan struct{} {
	out := make(chan struct{}, 1)
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	if s.closed.Load() {
		close(out)
		return out
	}
	ps := s.client.Subscribe(ctx, s.key("wake"))
	// Wait for the server's confirmation, so that every change after this
	// call returns is seen. A failure only costs the hints: the engine polls.
	if _, err := ps.Receive(ctx); err != nil && ctx.Err() == nil {
		s.logger.Warn("redisstore: subscribing to wake-ups failed; workers fall back to polling", "error", err)
	}
	s.subs.Add(1)
	go func() {
		defer s.subs.Done()
		defer close(out)
		defer ps.Close()
		msgs := ps.Channel()
		for {
			select {
			case <-ctx.Done():
				return
			case <-s.done:
				return
			case _, ok := <-msgs:
				if !ok {
					return
				}
				select {
				case out <- struct{}{}:
				default:
				}
			}
		}
	}()
	return out
}

func (s *Store) key(parts ...string) string {
	return s.prefix + strings.Join(parts, "")
}

func (s *Store) runKey(id string) string   { return s.prefix + "r:" + id }
func (s *Store) cpKey(id string) string    { return s.prefix + "c:" + id }
func (s *Store) attKey(id string) string   { return s.prefix + "a:" + id }
func (s *Store) readyKey(wf string) string { return s.prefix + "q:" + wf }
func (s *Store) leaseKey(wf string) string { return s.prefix + "l:" + wf }

// clockArg is the scripts' clock argument: "" for the server's TIME.
func (s *Store) clockArg() string {
	if s.now == nil {
		return ""
	}
	return micros(s.now())
}

// run calls a script with the prefix and clock as ARGV[1] and ARGV[2].
func (s *Store) run(ctx context.Context, sc *redis.Script, keys []string, args ...any) (any, error) {
	if s.closed.Load() {
		return nil, storage.ErrClosed
	}
	argv := make([]any, 0, len(args)+2)
	argv = append(argv, s.prefix, s.clockArg())
	argv = append(argv, args...)
	v, err := sc.Run(ctx, s.client, keys, argv...).Result()
	if err != nil {
		return nil, s.wrapErr(err)
	}
	return v, nil
}

func (s *Store) wrapErr(err error) error {
	if errors.Is(err, redis.ErrClosed) || s.closed.Load() {
		return storage.ErrClosed
	}
	return err
}

// status splits a script's reply into its status word and the rest, and
// maps the error words to the runtime's sentinels.
func status(op, id string, v any) ([]any, error) {
	list, ok := v.([]any)
	if !ok || len(list) == 0 {
		return nil, fmt.Errorf("redisstore: %s: unexpected reply %v", op, v)
	}
	word, _ := list[0].(string)
	switch word {
	case "NOTFOUND":
		return nil, fmt.Errorf("redisstore: %s %q: %w", op, id, storage.ErrRunNotFound)
	case "INVALID":
		return nil, fmt.Errorf("redisstore: %s %q: %w", op, id, storage.ErrInvalidState)
	case "LEASELOST":
		return nil, fmt.Errorf("redisstore: %s %q: %w", op, id, storage.ErrLeaseLost)
	}
	return list, nil
}

func (s *Store) checkOpen() error {
	if s.closed.Load() {
		return storage.ErrClosed
	}
	return nil
}

// createBatch caps the runs one create script handles, so a huge batch
// does not hold the server for long.
const createBatch = 128

// CreateRuns implements storage.Store.
func (s *Store) CreateRuns(ctx context.Context, runs []storage.NewRun) ([]storage.CreateResult, error) {
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	for _, r := range runs {
		if r.ID == "" {
			return nil, fmt.Errorf("redisstore: create: empty run ID: %w", storage.ErrInvalidArgument)
		}
		if r.Workflow == "" {
			return nil, fmt.Errorf("redisstore: create %q: empty workflow name: %w", r.ID, storage.ErrInvalidArgument)
		}
	}
	out := make([]storage.CreateResult, 0, len(runs))
	for chunk := range slices.Chunk(runs, createBatch) {
		keys := make([]string, len(chunk))
		args := make([]any, 0, 4*len(chunk))
		for i, r := range chunk {
			keys[i] = s.runKey(r.ID)
			args = append(args, r.ID, r.Workflow, r.ParentID, mark(r.Input))
		}
		v, err := s.run(ctx, createScript, keys, args...)
		if err != nil {
			return nil, fmt.Errorf("redisstore: create: %w", err)
		}
		list, ok := v.([]any)
		if !ok || len(list) != len(chunk) {
			return nil, fmt.Errorf("redisstore: create: unexpected reply")
		}
		for _, item := range list {
			pair, ok := item.([]any)
			if !ok || len(pair) != 2 {
				return nil, fmt.Errorf("redisstore: create: unexpected reply")
			}
			m, err := pairsToMap(pair[1])
			if err != nil {
				return nil, err
			}
			rec, err := decodeRun(m)
			if err != nil {
				return nil, err
			}
			created, _ := pair[0].(int64)
			out = append(out, storage.CreateResult{Created: created == 1, Run: rec})
		}
	}
	return out, nil
}

// GetRun implements storage.Store.
func (s *Store) GetRun(ctx context.Context, id string) (storage.RunRecord, error) {
	if err := s.checkOpen(); err != nil {
		return storage.RunRecord{}, err
	}
	m, err := s.client.HGetAll(ctx, s.runKey(id)).Result()
	if err != nil {
		return storage.RunRecord{}, fmt.Errorf("redisstore: get %q: %w", id, s.wrapErr(err))
	}
	if len(m) == 0 {
		return storage.RunRecord{}, fmt.Errorf("redisstore: get %q: %w", id, storage.ErrRunNotFound)
	}
	return decodeRun(m)
}

// ListRuns implements storage.Store. It reads the lexicographic index that
// matches the filter, so a page costs its size, never a scan.
func (s *Store) ListRuns(ctx context.Context, q storage.ListRunsQuery) (storage.RunPage, error) {
	if err := s.checkOpen(); err != nil {
		return storage.RunPage{}, err
	}
	if q.Status != "" && !q.Status.Valid() {
		return storage.RunPage{}, fmt.Errorf("redisstore: list: unknown status %q: %w", q.Status, storage.ErrInvalidArgument)
	}
	limit := q.Limit
	if limit <= 0 {
		limit = 100
	}
	var idx string
	switch {
	case q.Workflow != "" && q.Status != "":
		idx = s.key("iws:", string(q.Status), ":", q.Workflow)
	case q.Workflow != "":
		idx = s.key("iw:", q.Workflow)
	case q.Status != "":
		idx = s.key("is:", string(q.Status))
	default:
		idx = s.key("ia")
	}
	start := "-"
	if q.After != "" {
		start = "(" + q.After
	}
	v, err := s.run(ctx, listScript, []string{idx}, start, limit+1)
	if err != nil {
		return storage.RunPage{}, fmt.Errorf("redisstore: list: %w", err)
	}
	list, ok := v.([]any)
	if !ok {
		return storage.RunPage{}, fmt.Errorf("redisstore: list: unexpected reply")
	}
	var page storage.RunPage
	for _, item := range list {
		m, err := pairsToMap(item)
		if err != nil {
			return storage.RunPage{}, err
		}
		rec, err := decodeRun(m)
		if err != nil {
			return storage.RunPage{}, err
		}
		page.Runs = append(page.Runs, rec)
	}
	if len(page.Runs) > limit {
		page.Runs = page.Runs[:limit]
		page.Next = page.Runs[limit-1].ID
	}
	return page, nil
}

// Claim implements storage.Store. One script reads the ready and lease sets
// of the requested workflows (all workflows when none are named), orders
// the candidates by ReadyAt (lease expiry for recoveries) and leases up to
// Limit of them.
func (s *Store) Claim(ctx context.Context, req storage.ClaimRequest) ([]storage.ClaimedRun, error) {
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	if req.Owner == "" {
		return nil, fmt.Errorf("redisstore: claim: empty owner: %w", storage.ErrInvalidArgument)
	}
	if req.LeaseFor <= 0 {
		return nil, fmt.Errorf("redisstore: claim: lease length %v: %w", req.LeaseFor, storage.ErrInvalidArgument)
	}
	if req.Limit <= 0 || len(req.Workflows) == 0 {
		return nil, nil
	}
	wfs := slices.Clone(req.Workflows)
	slices.Sort(wfs)
	wfs = slices.Compact(wfs)
	keys := make([]string, 0, 2*len(wfs))
	args := make([]any, 0, 3+len(wfs))
	args = append(args, req.Owner, req.Limit, durMicros(req.LeaseFor))
	for _, wf := range wfs {
		keys = append(keys, s.readyKey(wf), s.leaseKey(wf))
		args = append(args, wf)
	}
	v, err := s.run(ctx, claimScript, keys, args...)
	if err != nil {
		return nil, fmt.Errorf("redisstore: claim: %w", err)
	}
	list, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("redisstore: claim: unexpected reply")
	}
	out := make([]storage.ClaimedRun, 0, len(list))
	for _, item := range list {
		c, err := decodeClaim(req.Owner, item)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// decodeClaim reads {id, token, {wf, pa, in, rec, ss, wk, wt, wn, wd, lu}}.
func decodeClaim(owner string, item any) (storage.ClaimedRun, error) {
	var c storage.ClaimedRun
	parts, ok := item.([]any)
	if !ok || len(parts) != 3 {
		return c, fmt.Errorf("redisstore: claim: unexpected reply")
	}
	f, ok := parts[2].([]any)
	if !ok || len(f) != 10 {
		return c, fmt.Errorf("redisstore: claim: unexpected reply")
	}
	tok, _ := parts[1].(int64)
	c.Lease = storage.Lease{RunID: str(parts[0]), Owner: owner, Token: tok}
	c.Workflow = str(f[0])
	c.ParentID = str(f[1])
	c.Input = unmark(str(f[2]))
	rec, err := parseInt(str(f[3]))
	if err != nil {
		return c, err
	}
	c.Recoveries = int(rec)
	c.SuspendState = unmark(str(f[4]))
	if c.Wait, err = decodeWait(str(f[5]), str(f[6]), str(f[7]), str(f[8])); err != nil {
		return c, err
	}
	if c.LeaseUntil, err = fromMicros(str(f[9])); err != nil {
		return c, err
	}
	return c, nil
}

// LoadCheckpoints implements storage.Store.
func (s *Store) LoadCheckpoints(ctx context.Context, runID string) ([]storage.Checkpoint, error) {
	cps, _, err := s.readSteps(ctx, runID, false)
	return cps, err
}

// ListSteps implements storage.Store.
func (s *Store) ListSteps(ctx context.Context, runID string) ([]storage.StepRecord, error) {
	cps, atts, err := s.readSteps(ctx, runID, true)
	if err != nil {
		return nil, err
	}
	byKey := make(map[string][]storage.Attempt)
	for _, a := range atts {
		byKey[a.Key] = append(byKey[a.Key], a)
	}
	if len(cps) == 0 {
		return nil, nil
	}
	out := make([]storage.StepRecord, len(cps))
	for i, cp := range cps {
		out[i] = storage.StepRecord{Checkpoint: cp, Attempts: byKey[cp.Key]}
	}
	return out, nil
}

// readSteps reads a run's checkpoints (sorted by sequence) and, if asked,
// its attempts, in one script so they are consistent with each other.
func (s *Store) readSteps(ctx context.Context, runID string, attempts bool) ([]storage.Checkpoint, []storage.Attempt, error) {
	flag := ""
	if attempts {
		flag = "1"
	}
	v, err := s.run(ctx, stepsScript, []string{s.runKey(runID), s.cpKey(runID), s.attKey(runID)}, flag)
	if err != nil {
		return nil, nil, fmt.Errorf("redisstore: reading steps of %q: %w", runID, err)
	}
	list, err := status("read steps of", runID, v)
	if err != nil {
		return nil, nil, err
	}
	if len(list) != 3 {
		return nil, nil, fmt.Errorf("redisstore: reading steps of %q: unexpected reply", runID)
	}
	m, err := pairsToMap(list[1])
	if err != nil {
		return nil, nil, err
	}
	var cps []storage.Checkpoint
	for k, v := range m {
		cp, err := decodeCheckpoint(k, v)
		if err != nil {
			return nil, nil, err
		}
		cps = append(cps, cp)
	}
	slices.SortFunc(cps, func(a, b storage.Checkpoint) int { return cmp.Compare(a.Seq, b.Seq) })
	raw, _ := list[2].([]any)
	var atts []storage.Attempt
	for _, x := range raw {
		a, err := decodeAttempt(str(x))
		if err != nil {
			return nil, nil, err
		}
		atts = append(atts, a)
	}
	return cps, atts, nil
}

// validLease checks a fenced call's lease.
func validLease(op string, l storage.Lease) error {
	if l.RunID == "" {
		return fmt.Errorf("redisstore: %s: empty run ID: %w", op, storage.ErrInvalidArgument)
	}
	return nil
}

// validExtension checks a fenced call's lease and the lease length it
// extends to.
func validExtension(op string, l storage.Lease, leaseFor time.Duration) error {
	if leaseFor <= 0 {
		return fmt.Errorf("redisstore: %s: lease length %v: %w", op, leaseFor, storage.ErrInvalidArgument)
	}
	return validLease(op, l)
}

// Checkpoint implements storage.Store.
func (s *Store) Checkpoint(ctx context.Context, req storage.CheckpointRequest) (storage.CheckpointResult, error) {
	var res storage.CheckpointResult
	if err := validExtension("checkpoint", req.Lease, req.LeaseFor); err != nil {
		return res, err
	}
	cp := req.Checkpoint
	if err := validKey("checkpoint", cp.Key, cp.Kind); err != nil {
		return res, err
	}
	errJSON, err := encodeError(cp.Error)
	if err != nil {
		return res, err
	}
	atts, err := encodeAttempts(req.Attempts)
	if err != nil {
		return res, err
	}
	id := req.Lease.RunID
	args := make([]any, 0, 7+len(atts))
	args = append(args, req.Lease.Token, durMicros(req.LeaseFor), id, cp.Key, string(cp.Kind), errJSON, mark(cp.Output))
	args = append(args, atts...)
	v, err := s.run(ctx, checkpointScript, []string{s.runKey(id), s.cpKey(id), s.attKey(id)}, args...)
	if err != nil {
		return res, fmt.Errorf("redisstore: checkpoint %q: %w", id, err)
	}
	list, err := status("checkpoint", id, v)
	if err != nil {
		return res, err
	}
	switch list[0] {
	case "PAUSED":
		res.Paused = true
	case "EXISTS":
		old, err := decodeCheckpoint(cp.Key, str(list[1]))
		if err != nil {
			return res, err
		}
		res.Existing = &old
	}
	return res, nil
}

func validKey(op, key string, kind storage.CheckpointKind) error {
	if key == "" {
		return fmt.Errorf("redisstore: %s: empty checkpoint key: %w", op, storage.ErrInvalidArgument)
	}
	if strings.ContainsRune(string(kind), '\n') {
		return fmt.Errorf("redisstore: %s: checkpoint kind %q: %w", op, kind, storage.ErrInvalidArgument)
	}
	return nil
}

// RecordAttempts implements storage.Store.
func (s *Store) RecordAttempts(ctx context.Context, req storage.RecordAttemptsRequest) error {
	lease, leaseFor, attempts := req.Lease, req.LeaseFor, req.Attempts
	if err := validExtension("record attempts", lease, leaseFor); err != nil {
		return err
	}
	atts, err := encodeAttempts(attempts)
	if err != nil {
		return err
	}
	return s.attempts(ctx, "record attempts", lease, leaseFor, atts)
}

// Heartbeat implements storage.Store.
func (s *Store) Heartbeat(ctx context.Context, req storage.HeartbeatRequest) error {
	lease, leaseFor := req.Lease, req.LeaseFor
	if err := validExtension("heartbeat", lease, leaseFor); err != nil {
		return err
	}
	return s.attempts(ctx, "heartbeat", lease, leaseFor, nil)
}

func (s *Store) attempts(ctx context.Context, op string, lease storage.Lease, leaseFor time.Duration, atts []any) error {
	id := lease.RunID
	args := make([]any, 0, 3+len(atts))
	args = append(args, lease.Token, durMicros(leaseFor), id)
	args = append(args, atts...)
	v, err := s.run(ctx, attemptsScript, []string{s.runKey(id), s.attKey(id)}, args...)
	if err != nil {
		return fmt.Errorf("redisstore: %s %q: %w", op, id, err)
	}
	_, err = status(op, id, v)
	return err
}

// Suspend implements storage.Store.
func (s *Store) Suspend(ctx context.Context, req storage.SuspendRequest) (storage.SuspendResult, error) {
	var res storage.SuspendResult
	if err := validLease("suspend", req.Lease); err != nil {
		return res, err
	}
	id := req.Lease.RunID
	args := make([]any, 0, 15)
	args = append(args, req.Lease.Token, durMicros(req.LeaseFor), id)
	if cp := req.Checkpoint; cp != nil {
		if err := validKey("suspend", cp.Key, cp.Kind); err != nil {
			return res, err
		}
		errJSON, err := encodeError(cp.Error)
		if err != nil {
			return res, err
		}
		args = append(args, "1", cp.Key, string(cp.Kind), errJSON, mark(cp.Output))
	} else {
		args = append(args, "", "", "", "", "")
	}
	if w := req.Wait; w != nil {
		if err := validKey("suspend", w.Key, w.Kind); err != nil {
			return res, err
		}
		if w.Topic == "" {
			return res, fmt.Errorf("redisstore: suspend: empty wait topic: %w", storage.ErrInvalidArgument)
		}
		deadline := ""
		if w.Deadline != nil {
			deadline = micros(*w.Deadline)
		}
		args = append(args, "1", w.Key, w.Topic, string(w.Kind), deadline)
	} else {
		args = append(args, "", "", "", "", "")
	}
	ready := ""
	if req.ReadyAt != nil {
		ready = micros(*req.ReadyAt)
	}
	args = append(args, ready, mark(req.SuspendState))
	v, err := s.run(ctx, suspendScript, []string{s.runKey(id), s.cpKey(id)}, args...)
	if err != nil {
		return res, fmt.Errorf("redisstore: suspend %q: %w", id, err)
	}
	list, err := status("suspend", id, v)
	if err != nil {
		return res, err
	}
	switch list[0] {
	case "PAUSED":
		res.Paused = true
	case "DELIVERED":
		cp, err := decodeCheckpoint(req.Wait.Key, str(list[1]))
		if err != nil {
			return res, err
		}
		res.Delivered = &cp
	}
	return res, nil
}

// Complete implements storage.Store. A Notify whose target run does not
// exist or has finished is dropped: the child's result must not be lost
// because its parent went away.
func (s *Store) Complete(ctx context.Context, req storage.CompleteRequest) error {
	if err := validLease("complete", req.Lease); err != nil {
		return err
	}
	if req.Status != storage.StatusComplete && req.Status != storage.StatusErrored {
		return fmt.Errorf("redisstore: complete: status %q: %w", req.Status, storage.ErrInvalidArgument)
	}
	errJSON, err := encodeError(req.Error)
	if err != nil {
		return err
	}
	nargs, err := notifyArgs("complete", req.Notify)
	if err != nil {
		return err
	}
	id := req.Lease.RunID
	args := append([]any{req.Lease.Token, "", id, string(req.Status), mark(req.Output), errJSON}, nargs...)
	v, err := s.run(ctx, completeScript, []string{s.runKey(id)}, args...)
	if err != nil {
		return fmt.Errorf("redisstore: complete %q: %w", id, err)
	}
	_, err = status("complete", id, v)
	return err
}

func notifyArgs(op string, ev *storage.Event) ([]any, error) {
	if ev == nil {
		return []any{"", "", ""}, nil
	}
	if ev.RunID == "" || ev.Topic == "" {
		return nil, fmt.Errorf("redisstore: %s: notify needs a run ID and a topic: %w", op, storage.ErrInvalidArgument)
	}
	return []any{ev.RunID, ev.Topic, mark(ev.Payload)}, nil
}

// Pause implements storage.Store.
func (s *Store) Pause(ctx context.Context, runID string) error {
	return s.simple(ctx, "pause", pauseScript, runID)
}

// Resume implements storage.Store.
func (s *Store) Resume(ctx context.Context, runID string) error {
	return s.simple(ctx, "resume", resumeScript, runID)
}

// Restart implements storage.Store.
func (s *Store) Restart(ctx context.Context, runID string) error {
	return s.simple(ctx, "restart", restartScript, runID)
}

func (s *Store) simple(ctx context.Context, op string, sc *redis.Script, id string) error {
	keys := []string{s.runKey(id)}
	if sc == restartScript {
		keys = append(keys, s.cpKey(id), s.attKey(id))
	}
	v, err := s.run(ctx, sc, keys, id)
	if err != nil {
		return fmt.Errorf("redisstore: %s %q: %w", op, id, err)
	}
	_, err = status(op, id, v)
	return err
}

// Terminate implements storage.Store. A Notify is handled as in Complete.
func (s *Store) Terminate(ctx context.Context, req storage.TerminateRequest) error {
	errJSON, err := encodeError(&req.Error)
	if err != nil {
		return err
	}
	nargs, err := notifyArgs("terminate", req.Notify)
	if err != nil {
		return err
	}
	id := req.RunID
	v, err := s.run(ctx, terminateScript, []string{s.runKey(id)}, append([]any{id, errJSON}, nargs...)...)
	if err != nil {
		return fmt.Errorf("redisstore: terminate %q: %w", id, err)
	}
	_, err = status("terminate", id, v)
	return err
}

// Emit implements storage.Store.
func (s *Store) Emit(ctx context.Context, req storage.EmitRequest) ([]string, error) {
	topic, payload := req.Topic, req.Payload
	if topic == "" {
		return nil, fmt.Errorf("redisstore: emit: empty topic: %w", storage.ErrInvalidArgument)
	}
	v, err := s.run(ctx, emitScript, []string{s.key("w:", topic)}, topic, mark(payload), rand.Text())
	if err != nil {
		return nil, fmt.Errorf("redisstore: emit %q: %w", topic, err)
	}
	list, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("redisstore: emit: unexpected reply")
	}
	if len(list) == 0 {
		return nil, nil
	}
	ids := make([]string, 0, len(list))
	for _, x := range list {
		ids = append(ids, str(x))
	}
	return ids, nil
}

// SendEvent implements storage.Store.
func (s *Store) SendEvent(ctx context.Context, ev storage.Event) (bool, error) {
	if ev.RunID == "" || ev.Topic == "" {
		return false, fmt.Errorf("redisstore: send event: needs a run ID and a topic: %w", storage.ErrInvalidArgument)
	}
	v, err := s.run(ctx, sendScript, []string{s.runKey(ev.RunID)}, ev.RunID, ev.Topic, mark(ev.Payload), rand.Text())
	if err != nil {
		return false, fmt.Errorf("redisstore: send event to %q: %w", ev.RunID, err)
	}
	list, err := status("send event", ev.RunID, v)
	if err != nil {
		return false, err
	}
	if len(list) < 2 {
		return false, fmt.Errorf("redisstore: send event: unexpected reply")
	}
	n, _ := list[1].(int64)
	return n == 1, nil
}
