// Package pgstore is a Postgres implementation of storage.Store, for many
// workers on many machines sharing one database.
//
// Workers claim runs with one statement that locks a bounded batch with
// FOR UPDATE SKIP LOCKED, so concurrent claims never block on each other and
// never hand one run to two workers; a run whose lease expired is claimable
// again by the same statement, so recovery needs no sweeper. Every write made
// under a lease checks the run's status and fencing token in the statement
// that writes. Lease expiry and readiness are judged on the database clock
// (now()), so a worker with a skewed clock cannot steal a lease.
//
// A run's executions are rows of their own table, written by the statement
// or transaction that creates, completes, terminates, restarts or
// continues the run as new; checkpoints and attempts are keyed by their
// execution's number, and every read and fenced write names the run's
// current one, so a restart keeps the earlier executions readable without
// touching them and a replay reads only the current one's rows, however
// many came before. Terminate's cascade to a run's descendants is one
// recursive statement that locks them in ID order; so is a completion's
// (Complete with a child error), in its transaction, or for the
// completions of a checkpoint writers' batch, one statement after theirs
// in the batch's transaction.
//
// A run's wait is columns of its row: the first case's key, topic and kind,
// and the further cases' as three parallel arrays, NULL for a plain wait.
// Emit finds the runs waiting on its topic through two indexes, a B-tree of
// first topics and a partial GIN index of the arrays. A run's deadline and
// its published progress are columns too; progress is written by the fenced
// statement of the write that carries it, in the checkpoint writers'
// batches as well, where a batch with no progress sends one NULL for it.
//
// A run's headers (storage.NewRun.Headers) are a column of JSON text its
// creation writes and nothing changes after, in no index, NULL for a run
// without headers; a claim returns it with the run.
//
// A run's hold (storage.RunRecord.Hold) is a column of JSON text too, in
// no index, written by the statement of the Suspend that holds the run and
// set NULL by the claim's update, so holds cost a claim nothing more.
//
// A run's workflow version is a column its creation writes and nothing
// changes after, in no index. A claim and NextWake take the versions
// filter (storage.ClaimRequest.Versions) as two array parameters, the
// workflows with an entry and a row of versions for each, slice each
// workflow's row out once, and test it on every run their bounded scans
// read, before the scan's limit: a run of a version the worker does not
// run is passed over without being locked or counted. It is still read,
// so runs of such a version ready ahead of the others cost each claim that
// passes over them a read each.
//
// ListRuns walks the ID order, forwards or backwards, of the index of its
// workflow, status or parent filter, or of the primary key, and stops at
// the page's end; in creation order it walks runs_created_idx, or the
// workflow's or status's creation index, the cursor a row comparison in
// the index condition; each listing is planned with its values. An ID
// prefix is a range of that order when the ID column's collation sorts
// byte for byte (C, POSIX, C.UTF-8: Open reads it), and a starts_with
// filter under any other. CountRuns of a workflow is an index-only scan
// of runs_workflow_id_idx, which includes the status.
//
// A run's search attributes are a JSON column of its row, which every
// statement that returns runs returns with them, and rows of their own
// table, one per name, the value in the column of its type and the run's
// creation time copied beside it, in one index per type of (name, value,
// creation time, run): a listing by an attribute's value in creation
// order walks that range and stops at the page's end, however many runs
// the store holds. A create writes both in its statement, a checkpoint
// that carries attributes by one more statement in its batch (a plain
// checkpoint sends nothing more); see attrs.go.
//
// Writes that make runs ready send a NOTIFY on a channel named after the
// schema (<schema>_ready); the store implements storage.Notifier with one
// listening connection that fans the hints out to subscribers. Writes that
// end runs announce each run's ID on a second channel (<schema>_ended),
// which the store implements storage.FinishNotifier with. One connection
// listens on both, so that a store holds one listening backend, not two,
// and a write that notifies both channels wakes one; the price is that a
// process that only works runs hears completions no one awaits, and one
// that only awaits results hears ready hints no one claims on, both
// dropped by the hub at once. Both only make things faster: with
// Options.DisableNotify, polling alone still runs everything.
//
// Behind a transaction pooler (Options.TransactionPooler; PgBouncer with
// pool_mode=transaction) the store keeps nothing in a session: its
// statements are sent unnamed (pgx's QueryExecModeCacheDescribe), its
// advisory locks are transaction-level as everywhere, and its listener
// connects to Options.ListenURL, the database's direct URL; without one
// it does not LISTEN, but reads the server's snapshot of transactions
// every Options.NotifyPoll and wakes its subscribers when anything
// committed a write. Without the option, Open and New refuse a
// transaction pooler the store would rely on the sessions of. See
// pooler.go.
//
// A run's updates (storage.Interactor) are rows of their own table,
// recorded under the run's row lock by SendUpdate's transaction, which
// delivers each as SendEvent delivers an event. A checkpoint that carries
// a reply or stream writes sends one more statement after the checkpoint
// statement, in its transaction and, from the writers, its round trip,
// which writes them only for the checkpoints that statement wrote, takes
// the streams' offsets from their lengths, inserts every value by one
// insert, and announces each reply and stream written on the ended
// channel; a plain checkpoint sends nothing more. A stream's read is a
// range of its values' primary key, with its length and the run's status
// read by the same statement.
//
// The schema is created and upgraded by Migrate, which Open and New call.
// Migrations are embedded, numbered, and applied under an advisory lock, so
// processes starting together never race. A tool that only inspects or
// operates a store opens it with Options.OpenExisting, which creates
// nothing and refuses a schema that holds no current store.
//
// Connecting is bounded by Options.ConnectTimeout and every statement,
// batch and transaction by Options.CallTimeout, whatever the caller's
// context; an error names the operation and the server ("pgstore: claim on
// 127.0.0.1:5432: no answer within 30s: ..."), and a server that stops
// answering is logged once, not once per failed call.
//
// A create that carries a start policy, an event or a start key
// (storage.NewRun.OnExisting, OnEnded, Event, Key) runs in a transaction
// of its own, under a transaction-level advisory lock of its key and the
// row lock of the run its ID names; a replacement resets that row in
// place, keeping its fencing token, after deleting what the run and its
// descendants own. Start keys are rows of their own table, naming their
// holder. The store implements storage.TxStore: the same statements sent
// on the application's pgx.Tx, and transactional steps whose checkpoint is
// written on the step's transaction after it returns.
//
// The files follow the layout every store shares: runs.go creates, reads
// and lists runs; start.go applies the policies, events and keys of a
// create; tx.go is the transactional store; lease.go claims, heartbeats,
// suspends and completes them (the fenced writes); checkpoint.go reads
// and writes checkpoints and attempts, through the group-commit writers
// of writer.go; events.go delivers events; interact.go keeps updates and
// streams; attrs.go keeps search attributes; control.go pauses, resumes,
// terminates and restarts; executions.go lists a run's executions;
// catalog.go records what workers serve; queue.go enforces queues' limits
// in a limited claim and counts QueueStats; schedule.go keeps schedules;
// purge.go deletes finished runs; workers.go keeps the records engines
// keep of themselves; notify.go and listen.go are the LISTEN/NOTIFY
// listener; pooler.go is the transaction pooler mode and the poll that
// stands in for the listener there. The SQL lives in queries.go, row
// decoding in scan.go, the schema in migrate.go and migrations/, the check
// of OpenExisting in existing.go; timeout.go bounds every statement and
// reports each call to a storage.Health, which logs a server that stops
// answering.
package pgstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/stemflow/stem/storage"
)

var (
	_ storage.Store          = (*Store)(nil)
	_ storage.Notifier       = (*Store)(nil)
	_ storage.FinishNotifier = (*Store)(nil)
)

// DefaultSchema is the schema the store's tables live in when
// Options.Schema is empty.
const DefaultSchema = "stem"

// defaultMaxConns is the pool size Open uses when the URL does not set
// pool_max_conns: enough for 32 concurrent workers each holding a connection
// for one statement.
const defaultMaxConns = 32

// maxSchemaLen keeps the notification channel name, the schema plus
// channelSuffix, within Postgres's 63-byte identifier limit.
const maxSchemaLen = 63 - len(channelSuffix)

const channelSuffix = "_ready"

// endedSuffix names the channel on which runs' ends are announced, each
// notification's payload the run's ID. It is as long as channelSuffix.
const endedSuffix = "_ended"

var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Options configures a Store. The zero value works.
type Options struct {
	// Schema is the Postgres schema holding the store's tables, created by
	// Migrate when missing; empty means DefaultSchema. It must be an
	// identifier: a letter or underscore, then letters, digits or
	// underscores, at most 57 bytes. Stores with different schemas in one
	// database are fully independent.
	Schema string

	// Clock, when set, replaces the database clock for every judgement of
	// lease expiry and readiness and for every timestamp the store writes.
	// Tests substitute it; nil means the database's now().
	Clock storage.Clock

	// DisableNotify turns off LISTEN/NOTIFY and in-process wake-ups: writes
	// send no notifications and Notifications never fires. Workers then
	// rely on polling alone.
	DisableNotify bool

	// ListenerRetry is the longest pause between attempts to reconnect the
	// notification listener after its connection fails; zero means 5s.
	ListenerRetry time.Duration

	// CheckpointWriters is how many checkpoint statements the store keeps
	// in flight at once; each carries every checkpoint queued when it
	// starts (group commit). Zero means 2. More writers cut latency when
	// the server has idle cores; fewer make bigger, cheaper batches.
	CheckpointWriters int

	// SkipMigrate makes Open and New leave the schema alone; the caller
	// runs Migrate itself (or the schema is managed elsewhere).
	SkipMigrate bool

	// OpenExisting is for tools that inspect or operate a store a worker
	// created: Open and New create no schema, table or row, and fail with
	// storage.ErrNotStore, naming the server and the schema, when the
	// schema is missing, holds no Stem store, or is at a schema version
	// other than the one this code reads (older: a worker's Open, or
	// Migrate, upgrades it; newer: upgrade the tool).
	OpenExisting bool

	// ConnectTimeout bounds establishing each connection (TCP, TLS and
	// authentication). Zero means the URL's connect_timeout, or
	// DefaultConnectTimeout (5s) when the URL sets none. Open only: with
	// New, the caller's pool config decides.
	ConnectTimeout time.Duration

	// CallTimeout bounds every statement, batch and transaction the store
	// sends, even when the caller's context has no deadline, so that a
	// server that stops answering fails calls instead of hanging them; a
	// call it ends reports "no answer within" the timeout and the server.
	// Zero means DefaultCallTimeout (30s). The LISTEN connection is exempt
	// but pings the server after a quiet CallTimeout, so it notices a dead
	// connection.
	CallTimeout time.Duration

	// TransactionPooler says that the URL (or the pool New is given) is a
	// transaction pooler's, such as PgBouncer's with pool_mode=transaction,
	// which runs each transaction of a client on whichever server
	// connection is free: nothing the store does then relies on the state
	// of a session (see pooler.go). Open sets the pool's
	// DefaultQueryExecMode to pgx.QueryExecModeCacheDescribe, which
	// prepares no named statement, unless the URL's
	// default_query_exec_mode names another such mode (exec or
	// simple_protocol); New refuses a pool whose mode prepares named
	// statements. Notifications are heard on a connection to ListenURL
	// when it is set; without it the store does not LISTEN, and polls
	// every NotifyPoll instead. The URL parameter stem_pooler=transaction
	// of package storeurl sets it.
	//
	// Without it, Open and New refuse a pool they find pooling
	// transactions (a second client's statement runs on the server
	// process that ran the first's) when the store would rely on its
	// sessions there: the pool's mode prepares named statements, or
	// notifications would LISTEN through it.
	TransactionPooler bool

	// ListenURL is a Postgres URL the store's LISTEN connection uses
	// instead of the pool's configuration: the same database reached
	// directly, past a transaction pooler, so that notifications work
	// behind one. Empty means the pool's configuration or, with
	// TransactionPooler, no LISTEN at all. The URL parameter
	// stem_listen_url of package storeurl sets it.
	ListenURL string

	// NotifyPoll is how often a store that does not LISTEN
	// (TransactionPooler without ListenURL) asks the server whether
	// anything was written since it last asked, one statement that reads
	// no table; when something was, it wakes this process's Notifications
	// subscribers, and tells its Finished subscribers that ends may have
	// been missed, at most once per second. Zero means 250ms.
	NotifyPoll time.Duration

	// Logger receives the store's diagnostics: at warn level, a server
	// that stops answering (once per episode: "not answering since", then
	// "answering again after") and a notification listener that fails
	// otherwise (its connection terminated, say); at info, migrations
	// applied. Nil means storage.LoggerOr's default, which passes warnings
	// and errors to slog.Default() (stderr unless the program set another)
	// and drops the rest; pass a discarding logger for silence.
	Logger *slog.Logger
}

// Store is a storage.Store on Postgres. It is safe for concurrent use by
// many goroutines and many processes.
type Store struct {
	pool       *dbPool
	ownPool    bool
	schema     string // quoted identifier
	schemaName string // the schema as given, for messages
	host       string // the server, host:port, for messages
	health     *storage.Health
	channel    string // notification channel of ready hints (raw name)
	// endedChannel is the channel of runs' ends (raw name).
	endedChannel string
	now          func() time.Time
	notify       bool
	// txPooler is Options.TransactionPooler: the pool's connections are a
	// transaction pooler's.
	txPooler bool
	// listenCfg is the configuration of the LISTEN connection, from
	// Options.ListenURL; nil means the pool's (or, with txPooler, polling).
	listenCfg *pgx.ConnConfig
	// pollEvery is Options.NotifyPoll or its default.
	pollEvery time.Duration
	retry     time.Duration
	log       *slog.Logger
	q         queries
	// bytewiseIDs is whether the runs' ID column sorts byte for byte, so
	// that an ID prefix is a range of its order (readIDCollation).
	bytewiseIDs atomic.Bool
	// planListings makes ListRuns send its statements unnamed, each
	// planned with its values, where the pool would prepare and cache
	// them (its default mode): after five executions a prepared
	// statement may keep a generic plan, which guesses how many runs a
	// status or an ID range passes and, guessing few, reads every run
	// they pass and sorts them instead of walking an index to the page's
	// end. The statement's description is still cached.
	planListings bool

	closed    atomic.Bool
	closeOnce sync.Once
	stop      context.CancelFunc
	stopCtx   context.Context
	wg        sync.WaitGroup
	hub       storage.Hub
	listener  listener

	// rated holds the name of each queue that a claim through this store
	// named with a rate (the queue's name, as a string key): a run
	// created leased on such a queue records its start in queue_starts,
	// as its claim would have (see createSQL). Like memstore, the store
	// learns a queue's rate from the claims that name it; the runs of a
	// queue no claim here named with a rate record no start.
	rated sync.Map

	ckptQueue   chan *ckptCall
	writersGone chan struct{}
	// slots holds a token for each write that may be in flight, by a
	// writer or inline (writeInline).
	slots chan struct{}
	// closeMu is read-held by each inline write; Close takes it once the
	// store is stopped, so that it closes the pool after them.
	closeMu sync.RWMutex
	// batches and batched count checkpoint statements and the checkpoints
	// they carried (benchmarks report the mean batch).
	batches, batched atomic.Int64
}

// Open connects to the database at url (a Postgres URL or DSN, as pgxpool
// parses it), migrates the schema unless Options.SkipMigrate or
// Options.OpenExisting, and returns a Store that owns its pool: Close
// closes it. Unless the URL sets pool_max_conns the pool holds up to 32
// connections. Connecting is bounded by Options.ConnectTimeout.
func Open(ctx context.Context, url string, opts Options) (*Store, error) {
	if opts.ConnectTimeout < 0 {
		return nil, fmt.Errorf("pgstore: negative ConnectTimeout %v: %w", opts.ConnectTimeout, storage.ErrInvalidArgument)
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		// pgx's parse errors redact the password.
		return nil, fmt.Errorf("pgstore: parse url: %w", err)
	}
	if err := refuseStemParams(cfg.ConnConfig.RuntimeParams); err != nil {
		return nil, err
	}
	if opts.TransactionPooler {
		if err := poolerExecMode(url, cfg.ConnConfig); err != nil {
			return nil, err
		}
	}
	if !strings.Contains(url, "pool_max_conns") {
		cfg.MaxConns = defaultMaxConns
	}
	switch {
	case opts.ConnectTimeout > 0:
		cfg.ConnConfig.ConnectTimeout = opts.ConnectTimeout
	case cfg.ConnConfig.ConnectTimeout == 0:
		cfg.ConnConfig.ConnectTimeout = DefaultConnectTimeout
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("pgstore: connect to %s: %w", hostOf(&cfg.ConnConfig.Config), err)
	}
	s, err := newStore(ctx, pool, true, opts)
	if err != nil {
		pool.Close()
		return nil, err
	}
	return s, nil
}

// refuseStemParams refuses a URL parameter starting with stem_, which pgx
// would send to the server as a setting: such a parameter is meant for
// package storeurl (stem_schema, stem_pooler, stem_listen_url), which
// removes it before the URL gets here, or is a misspelling of one. Options
// says what they say.
func refuseStemParams(params map[string]string) error {
	keys := make([]string, 0, len(params))
	for k := range params {
		if strings.HasPrefix(strings.ToLower(k), "stem_") {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return nil
	}
	slices.Sort(keys)
	msg := fmt.Sprintf("pgstore: unknown URL parameter %q", keys[0])
	if near := storage.Nearest(strings.ToLower(keys[0]), []string{"stem_schema", "stem_pooler", "stem_listen_url"}); near != "" && near != keys[0] {
		msg += fmt.Sprintf("; did you mean %s?", near)
	}
	return fmt.Errorf("%s (Open passes no stem_ parameter to the server: set Options.Schema, TransactionPooler and ListenURL, or open the URL with package storeurl, which reads stem_schema, stem_pooler and stem_listen_url): %w", msg, storage.ErrInvalidArgument)
}

// New returns a Store on a pool the caller owns: Close leaves the pool
// open. It migrates the schema unless Options.SkipMigrate. Several stores
// (with different schemas, say) may share one pool.
func New(ctx context.Context, pool *pgxpool.Pool, opts Options) (*Store, error) {
	if pool == nil {
		return nil, fmt.Errorf("pgstore: new: nil pool: %w", storage.ErrInvalidArgument)
	}
	return newStore(ctx, pool, false, opts)
}

func newStore(ctx context.Context, pool *pgxpool.Pool, own bool, opts Options) (*Store, error) {
	schema := opts.Schema
	if schema == "" {
		schema = DefaultSchema
	}
	if !identRE.MatchString(schema) || len(schema) > maxSchemaLen {
		return nil, fmt.Errorf("pgstore: schema %q is not a plain identifier of at most %d bytes: %w",
			schema, maxSchemaLen, storage.ErrInvalidArgument)
	}
	if opts.ListenerRetry < 0 || opts.CheckpointWriters < 0 || opts.CallTimeout < 0 || opts.ConnectTimeout < 0 || opts.NotifyPoll < 0 {
		return nil, fmt.Errorf("pgstore: negative ListenerRetry, CheckpointWriters, CallTimeout, ConnectTimeout or NotifyPoll: %w", storage.ErrInvalidArgument)
	}
	if opts.TransactionPooler {
		if mode := pool.Config().ConnConfig.DefaultQueryExecMode; !poolerSafe(mode) {
			return nil, fmt.Errorf("pgstore: a transaction pooler: the pool's DefaultQueryExecMode %v prepares named statements, which live in one server connection: use pgx.QueryExecModeCacheDescribe (or Exec, or SimpleProtocol): %w",
				mode, storage.ErrInvalidArgument)
		}
	}
	listenCfg, err := listenConfig(opts)
	if err != nil {
		return nil, err
	}
	log := storage.LoggerOr(opts.Logger)
	retry := opts.ListenerRetry
	if retry == 0 {
		retry = 5 * time.Second
	}
	quoted := pgx.Identifier{schema}.Sanitize()
	host := hostOf(&pool.Config().ConnConfig.Config)
	s := &Store{
		ownPool:      own,
		schema:       quoted,
		schemaName:   schema,
		host:         host,
		channel:      schema + channelSuffix,
		endedChannel: schema + endedSuffix,
		notify:       !opts.DisableNotify,
		txPooler:     opts.TransactionPooler,
		listenCfg:    listenCfg,
		pollEvery:    cmp.Or(opts.NotifyPoll, defaultNotifyPoll),
		retry:        retry,
		log:          log.With("store", "pgstore", "schema", schema),
		q:            buildQueries(quoted, !opts.DisableNotify),
	}
	s.health = storage.NewHealth(s.log, "pgstore: database at "+host)
	s.pool = &dbPool{Pool: pool, timeout: cmp.Or(opts.CallTimeout, DefaultCallTimeout), health: s.health}
	s.planListings = pool.Config().ConnConfig.DefaultQueryExecMode == pgx.QueryExecModeCacheStatement
	if opts.Clock != nil {
		s.now = opts.Clock.Now
	}
	s.stopCtx, s.stop = context.WithCancel(context.Background())
	s.initListeners()
	if !opts.TransactionPooler {
		// Failing to connect is reported as a failure of what Open does
		// first otherwise.
		first := "read the collation of runs.id in schema " + schema
		switch {
		case opts.OpenExisting:
			first = "open existing schema " + schema
		case !opts.SkipMigrate:
			first = "migrate schema " + schema
		}
		if err := s.refuseTxPooling(ctx, first); err != nil {
			s.stop()
			return nil, err
		}
	}
	switch {
	case opts.OpenExisting:
		if err := s.checkExisting(ctx); err != nil {
			s.stop()
			return nil, err
		}
	case !opts.SkipMigrate:
		if err := s.Migrate(ctx); err != nil {
			s.stop()
			return nil, err
		}
	}
	// Migrate reads it once the schema is current; the other paths here.
	if opts.OpenExisting || opts.SkipMigrate {
		if err := s.readIDCollation(ctx); err != nil {
			s.stop()
			return nil, err
		}
	}
	writers := opts.CheckpointWriters
	if writers == 0 {
		writers = defaultWriters
	}
	s.startWriters(writers)
	return s, nil
}

// Close stops the notification listener, closes every Notifications
// channel and, when the store owns its pool (Open), closes the pool. Calls
// after Close, Close included, return storage.ErrClosed.
func (s *Store) Close() error {
	first := false
	s.closeOnce.Do(func() {
		first = true
		// Marked under the listener's lock, so no listener starts once
		// Close waits for the store's goroutines.
		s.listener.mu.Lock()
		s.closed.Store(true)
		s.listener.mu.Unlock()
		s.stop()
		// Inline writes hold closeMu for reading: wait for them.
		s.closeMu.Lock()
		s.closeMu.Unlock()
		s.wg.Wait()
		s.hub.Close()
		if s.ownPool {
			s.pool.Pool.Close()
		}
	})
	if !first {
		return fmt.Errorf("pgstore: close: %w", storage.ErrClosed)
	}
	return nil
}

// Pool returns the connection pool the store uses.
func (s *Store) Pool() *pgxpool.Pool { return s.pool.Pool }

// clock is the bound value of every statement's clock parameter: NULL means
// the database's now().
func (s *Store) clock() any {
	if s.now == nil {
		return nil
	}
	return s.now()
}

// check returns ErrClosed once the store is closed.
func (s *Store) check(op string) error {
	if s.closed.Load() {
		return fmt.Errorf("pgstore: %s: %w", op, storage.ErrClosed)
	}
	return nil
}

// wrap prefixes err with the operation, leaving sentinels matchable; an
// error that is not one of the contract's sentinels names the server too
// ("pgstore: claim on 127.0.0.1:5432: ..."). An error caused by closing
// the store underneath a call reports ErrClosed. An error that means the
// server did not answer is recorded in the store's health, which logs the
// first of an episode. A merge of too many search attributes refused by
// the database is storage.ErrInvalidArgument (see attrLimitError).
func (s *Store) wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	if isSentinel(err) {
		return fmt.Errorf("pgstore: %s: %w", op, err)
	}
	if refused := attrLimitError(err); refused != nil {
		return fmt.Errorf("pgstore: %s: %w", op, refused)
	}
	if s.closed.Load() {
		return fmt.Errorf("pgstore: %s on %s: %w (%v)", op, s.host, storage.ErrClosed, err)
	}
	err = fmt.Errorf("pgstore: %s on %s: %w", op, s.host, err)
	if !s.txPooler && lostPrepared(err) {
		err = fmt.Errorf("%w (%s)", err, lostPreparedHint)
	}
	if notAnswering(err) {
		s.health.Fail(op, err)
	}
	return err
}

func isSentinel(err error) bool {
	for _, s := range []error{storage.ErrLeaseLost, storage.ErrRunNotFound, storage.ErrInvalidState, storage.ErrInvalidArgument, storage.ErrClosed,
		storage.ErrScheduleNotFound, storage.ErrConflict, storage.ErrUpdateNotFound} {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

// inTx runs fn in a READ COMMITTED transaction, retrying it from the start
// when Postgres aborts it as a deadlock victim or serialization failure
// (two transactions locking the same runs in different orders).
func (s *Store) inTx(ctx context.Context, fn func(pgx.Tx) error) error {
	for attempt := 0; ; attempt++ {
		err := pgx.BeginFunc(ctx, s.pool, fn)
		if err == nil || attempt >= 20 || !retryable(err) || ctx.Err() != nil {
			return err
		}
	}
}

// retrying runs fn again while Postgres aborts it as a deadlock victim or
// serialization failure, for statements sent outside inTx (Emit locks many
// runs, a checkpoint batch many more).
func (s *Store) retrying(ctx context.Context, fn func() error) error {
	for attempt := 0; ; attempt++ {
		err := fn()
		if err == nil || attempt >= 20 || !retryable(err) || ctx.Err() != nil {
			return err
		}
	}
}

func retryable(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code == "40P01" || pe.Code == "40001"
	}
	return false
}

// micros is a duration as whole microseconds, Postgres's time resolution.
func micros(d time.Duration) int64 { return d.Microseconds() }

// locked is a run read under FOR UPDATE, with the store clock's time.
type locked struct {
	storage.RunRecord
	now time.Time
}

// lock reads and locks a run inside tx; ok is false when no run has the ID.
func (s *Store) lock(ctx context.Context, tx pgx.Tx, id string) (r locked, ok bool, err error) {
	return s.readAt(ctx, tx, s.clock(), id, true)
}

// lockExisting locks the run like lock, and reports a missing run as
// storage.ErrRunNotFound.
func (s *Store) lockExisting(ctx context.Context, tx pgx.Tx, id string) (locked, error) {
	r, ok, err := s.lock(ctx, tx, id)
	if err == nil && !ok {
		err = fmt.Errorf("run %q: %w", id, storage.ErrRunNotFound)
	}
	return r, err
}
