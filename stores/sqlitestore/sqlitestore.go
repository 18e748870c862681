// Package sqlitestore is the embedded default storage.Store: one SQLite file
// in WAL mode, written through modernc.org/sqlite (pure Go, no cgo).
//
//	store, err := sqlitestore.Open("stem.db", sqlitestore.Options{})
//
// # Writes: one writer, group commit
//
// Every write method (Claim, Checkpoint, Suspend, Complete, CreateRuns, ...)
// becomes a request on a queue owned by one writer goroutine, which holds the
// store's only write connection. The writer takes every request queued at
// that moment (up to Options.MaxBatch), opens one BEGIN IMMEDIATE
// transaction, runs each request inside its own SAVEPOINT, and commits once.
// A request that fails (storage.ErrLeaseLost, storage.ErrInvalidState, a SQL
// error) is rolled back to its savepoint alone; the others in the batch are
// unaffected, and each is still fenced by its own lease token. Each caller is
// answered only after the COMMIT holding its request returned, so when a
// method returns its write is as durable as the Synchronous mode promises
// (see SyncFull for its one exception, leases). Many workers' checkpoints
// thus share one commit (and, with SyncFull, one fsync). A caller whose context ends before the writer took its request
// gets the context's error and nothing is written; once taken, the call
// waits for the outcome, so an error always means nothing was written.
//
// Copying the WAL into the database file (a WAL checkpoint, which fsyncs)
// happens on a connection of its own, off the commit path, except when the
// WAL file passes Options.MaxWAL: then the writer finishes the copy between
// two batches, so that the log starts over and the file stays bounded under
// steady load; an idle writer truncates it to zero bytes (see wal.go). A
// write that fails because the disk is full says so, naming the file, and
// writes resume on the same Store once space is freed.
//
// # Schema
//
// The embedded, numbered migrations (migrations/NNN_name.up.sql, applied by
// Migrate) create: runs, one small row per run with the state a step
// changes (status, lease, token, wait, readiness, current execution, the
// step running now, the deadline), the workflow version it started
// under, its hold, if any (JSON, cleared by the claim's own update), and
// its requested cancellation's reason (NULL: none), so the per-step
// update stays cheap
// whatever the payload sizes; a wait's first case lives in columns of its
// own and its further cases, if any, as JSON beside them, their topics
// indexed in wait_topics (kept in step by a trigger) so that Emit finds a
// run waiting on a topic in any case by index; run_data, the run's input,
// output, error, suspension state, published progress (written only by
// a write that publishes one) and the headers it carries to every claim
// (read with its input, NULL for none); executions, one row per execution of a run
// (started, ended, the status and error it ended with, continued for a
// continue-as-new, where a restart from a step forked it);
// checkpoints, appended in write order (their rowid is the sequence
// number), each belonging to an execution and unique per (run, execution,
// key), with the attempts that produced each encoded in its row; attempts
// recorded on their own (failed attempts before a retry, refused event
// payloads), in their execution too; events buffered for runs not yet
// waiting on them; the catalog (workflow_types, queue_types,
// event_types); schedules, written whole by revision; queue_starts,
// the recent starts of rate-limited queues (and a mark for each, see
// queues.go); workers, the records
// engines keep of themselves; start_keys, the run that holds each
// start key of a workflow (storage.StartKey); updates, a run's updates by
// ID and by sequence, with their replies; and streams and stream_values,
// a run's streams and their values, keyed by (run, stream, offset) so
// that a read from an offset is one range; and run_attrs, a run's search
// attributes, one row per name with the value in its type's column and
// the run's creation microsecond and ID beside it, so that each type's
// index reads the runs of one name and value in creation order (see
// attrs.go). Tables keyed by run use the
// run's row number, assigned in creation order, so runs created and
// claimed together share pages. A claim reads an index over when each run
// becomes claimable (ready, or its lease expired), ordered by queue,
// priority and recoveries first: a range per priority, each stopping at
// the limit however many runs are ready (see queues.go); its entries end
// with the run's workflow and version, so that a claim passes over the
// runs of versions its worker does not run without reading their rows. A limited queue's
// places are counts read in the claim's transaction, which SQLite's one
// writer serialises across every process on the file. Finished runs are
// indexed by their end, for Purge, and every run by its creation
// microsecond and ID (runs_created), for listings in creation order.
//
// A write method finds the run's current execution in the row it already
// reads to check the lease, so stamping checkpoints and attempts with it
// costs no statement; creating, finishing and restarting a run write its
// execution's row in the same transaction.
//
// # Reads
//
// GetRun, ListRuns, LoadReplay, ListSteps, ListExecutions and GetCatalog
// use a separate pool of read-only connections; WAL lets them run while
// the writer commits. LoadReplay is one statement, and so is a page of
// ListRuns, the runs' attributes included (a seek of run_attrs per run).
// A page in creation order, or filtered by an attribute's equality, is
// read from an index in its order and stops at its end; a range or
// prefix of an attribute reads that range of its index and sorts its
// runs (see listQuery).
//
// # Several stores on one file
//
// Several Store instances, in one process or many, may open the same file.
// Each has its own writer; SQLite's write lock (BEGIN IMMEDIATE, waited for
// under busy_timeout and retried beyond it, so SQLITE_BUSY never reaches a
// caller) serialises their transactions, and every fenced check is made
// inside the transaction that writes, so they stay correct. Only one writer
// makes progress at a time, so for throughput share one Store per process.
// A process stopped (not killed) while it holds the write lock stops every
// writer on the file until it resumes.
//
// # The application's transactions
//
// Store is a storage.TxStore: CreateRunsTx, SendEventTx and EmitTx write
// into the application's own *sql.Tx on the store's file (BeginTx begins
// one), and CheckpointTx runs a step in a transaction of its own with its
// checkpoint, each with the same code the writer runs. Those commits are
// not the writer's: it hears them as another connection's, as it hears
// another process's (see tx.go). While such a transaction is open it
// holds the file's one write lock, and the writer waits for it.
//
// # Opening without creating
//
// Open creates the file and migrates its schema, as a worker wants. A tool
// that must not sets Options.OpenExisting (read-write, never creating or
// migrating) or Options.ReadOnly (read-only connections, no writer, no
// pragma that writes): either refuses with storage.ErrNotStore a path that
// holds no file, an empty file, another application's database or a Stem
// store at a schema version other than SchemaVersion, and leaves the file
// exactly as it was. StoredSchemaVersion reads a file's version the same
// way.
//
// Open refuses another application's database too (a file with tables,
// none of them Stem's), naming some of its tables, so that a worker
// pointed at the wrong file does not add Stem's tables to it unannounced;
// Options.ShareFile is how a program says it means to share the file.
//
// # Clock
//
// SQLite has no clock of its own that every process would share, so lease
// expiry, readiness and every timestamp are judged on Options.Clock.
//
// # Files
//
// The methods sit by the rule they keep, as in every Stem store: runs.go
// (creating and reading runs), start.go (the start rules of a create:
// keys, policies for an ID that has a run, replacing it, its event),
// tx.go (the application's transactions and transactional steps,
// storage.TxStore), lease.go (claiming, keeping, parking and
// ending a lease), checkpoint.go (checkpoints and attempts, written and
// read), events.go, control.go (pause, resume, terminate, restart),
// executions.go (listing them, continue-as-new), queues.go (how a claim
// picks its runs, NextWake, QueueStats), schedules.go, purge.go,
// catalog.go, notify.go, workers.go, interact.go (updates and
// streams, storage.Interactor) and attrs.go (search attributes: their
// rows, their filters' SQL). This store's own machinery is in
// writer.go (the group-commit writer and the checkpointer), wal.go
// (bounding the WAL), read.go (the read pool), conn.go (statements on a
// driver connection), attempts.go (the encoding of the
// attempts stored with a checkpoint), migrate.go and existing.go (opening
// without creating: OpenExisting, ReadOnly).
package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stemflow/stem/storage"

	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver
)

var (
	_ storage.Store          = (*Store)(nil)
	_ storage.Notifier       = (*Store)(nil)
	_ storage.FinishNotifier = (*Store)(nil)
)

// Synchronous is SQLite's synchronous setting, which decides what a committed
// write survives. The database always runs in WAL mode.
type Synchronous int

const (
	// SyncNormal (the default) does not fsync on commit; the WAL is synced
	// when it is checkpointed into the database file. A committed write
	// survives a crash of the process, but the last commits before a power
	// loss or an operating system crash may be lost (the database stays
	// consistent: it rolls back to an earlier commit, never to a torn one).
	SyncNormal Synchronous = iota
	// SyncFull fsyncs the WAL on every commit: a committed write survives
	// process crashes, operating system crashes and power loss. Group commit
	// shares each fsync among all the requests of a batch. A batch of
	// nothing but Claim and Heartbeat calls is the exception: it is made
	// durable by the next fsync (the next other write, or within about a
	// second), since a power loss that takes it back also ends every
	// process that saw it; the fencing argument is on writeLease in
	// writer.go.
	SyncFull
)

// String returns the pragma value: "NORMAL" or "FULL".
func (s Synchronous) String() string {
	switch s {
	case SyncNormal:
		return "NORMAL"
	case SyncFull:
		return "FULL"
	}
	return "Synchronous(" + strconv.Itoa(int(s)) + ")"
}

// Options configures a Store. The zero value works.
type Options struct {
	// Synchronous is the durability mode; the zero value is SyncNormal.
	Synchronous Synchronous
	// Clock is the store's clock: lease expiry, readiness and every stored
	// timestamp are judged on it. Nil means the system clock. Tests
	// substitute it.
	Clock storage.Clock
	// MaxBatch caps how many write requests share one transaction. Zero
	// means 256.
	MaxBatch int
	// ReadConns caps the read-only connections. Zero means 4.
	ReadConns int
	// BusyTimeout is how long a connection waits for a lock another
	// connection (another Store on the same file) holds before SQLite
	// reports it busy; the writer then retries, so no caller sees
	// SQLITE_BUSY. Zero means 10s.
	BusyTimeout time.Duration
	// SkipMigrate stops Open from calling Migrate; the caller must call it
	// before using the store.
	SkipMigrate bool
	// OpenExisting opens a Stem store that is already there, read-write,
	// and never creates or migrates one: a missing or empty file, a file
	// another application made (no Stem tables) or a store at a schema
	// version other than SchemaVersion is refused with storage.ErrNotStore,
	// and nothing about the file changes (not even its journal mode).
	OpenExisting bool
	// ReadOnly opens an existing Stem store (refused as with OpenExisting)
	// for reading only: read-only connections, no writer, no migration, no
	// pragma that writes. Every write method returns ErrReadOnly. Other
	// Stores, in this process or others, may write the file meanwhile.
	ReadOnly bool
	// ShareFile lets Open add Stem's tables to a file that already holds
	// another application's tables (a SQLite database with tables, none of
	// them Stem's). Without it such a file is refused with
	// storage.ErrNotStore and ErrForeignFile, naming the file and some of
	// its tables, and left unchanged, so that a worker pointed at the wrong
	// file does not quietly write into it. A new or empty file and a Stem
	// store are opened either way. Stem's tables (runs, events, checkpoints
	// and others, see the migrations) must not have the names of the
	// application's.
	ShareFile bool
	// MaxWAL bounds the write-ahead log file (<path>-wal), in bytes. Every
	// commit appends to the log until a checkpoint copies it into the
	// database file and the log starts over. Once the file passes MaxWAL the
	// writer checkpoints it between two batches, waiting up to a second for
	// reads still using it, so the file stays within MaxWAL plus one batch's
	// pages however steady the load; a reader in another process that
	// holds one snapshot for long can hold it past that until it ends.
	// After the disk was full, the log starting over is also what lets
	// writes resume once the space to copy it into the database file is
	// freed. When the log starts over, its file is kept up to MaxWAL
	// (SQLite's journal_size_limit), so that the next commits overwrite
	// blocks the file already has instead of growing it: with SyncFull, an
	// fsync that must also record a larger file costs about twice as much
	// (ext4 measured). Zero means DefaultMaxWAL (4 MiB).
	MaxWAL int64
	// IdleCheckpoint is how long the writer waits with nothing to write
	// before copying the whole log into the database file and truncating
	// the log's file to zero bytes, returning its disk space. Zero means
	// DefaultIdleCheckpoint (one second); negative never truncates it (the
	// log's file then keeps up to MaxWAL).
	IdleCheckpoint time.Duration
	// Logger receives warnings (a lock held long by another writer).
	// Nil means storage.LoggerOr's default: warnings and errors go to
	// slog.Default() (stderr unless the program set another).
	Logger *slog.Logger
}

// Store is a storage.Store on one SQLite file. It is safe for concurrent use.
type Store struct {
	path   string
	opts   Options
	now    func() time.Time
	logger *slog.Logger

	wdb *sql.DB // the writer's database handle: one connection
	rdb *sql.DB // read-only connections

	// mu guards closed against enqueue: enqueuers hold it shared while
	// sending, Close holds it exclusively to stop them before closing queue.
	mu     sync.RWMutex
	closed bool
	queue  chan *request

	writerDone chan struct{}
	// The checkpointer copies the WAL into the database file when the
	// writer signals that it has grown, and every second.
	ckptSignal chan struct{}
	ckptStop   chan struct{}
	ckptDone   chan struct{}
	stats      writerStats  // owned by the writer goroutine
	taken      atomic.Int64 // requests the writer has taken, for tests
	lazy       atomic.Int64 // batches committed without an fsync (see writeLease), for tests
	closeOnce  sync.Once
	closeErr   error
	isClosed   atomic.Bool

	reads readPool

	// claims keeps the claim statements last built (see claimCache).
	claims claimCache

	// hub fans the writer's "runs may be ready" hints out to
	// Notifications.
	hub storage.Hub

	// app is the handle of the application's transactions and the
	// transactional steps (see tx.go).
	app appDB
}

// Open opens (creating if needed) the SQLite database at path, applies the
// embedded migrations (unless Options.SkipMigrate) and starts the writer.
// With Options.OpenExisting or Options.ReadOnly it creates and migrates
// nothing, and refuses a path that holds no current Stem store. A file
// another application made (tables, none of them Stem's) is refused with
// ErrForeignFile unless Options.ShareFile.
func Open(path string, opts Options) (*Store, error) {
	if err := checkPath(path); err != nil {
		return nil, err
	}
	if opts.Synchronous != SyncNormal && opts.Synchronous != SyncFull {
		return nil, fmt.Errorf("sqlitestore: open: %w: unknown synchronous mode %d", storage.ErrInvalidArgument, int(opts.Synchronous))
	}
	if opts.MaxBatch < 0 || opts.ReadConns < 0 || opts.BusyTimeout < 0 {
		return nil, fmt.Errorf("sqlitestore: open: %w: negative option", storage.ErrInvalidArgument)
	}
	if opts.MaxBatch == 0 {
		opts.MaxBatch = 256
	}
	if opts.ReadConns == 0 {
		opts.ReadConns = 4
	}
	if opts.BusyTimeout == 0 {
		opts.BusyTimeout = 10 * time.Second
	}
	if err := walDefaults(&opts); err != nil {
		return nil, err
	}
	s := &Store{
		path:       path,
		opts:       opts,
		now:        storage.ClockOr(opts.Clock).Now,
		logger:     storage.LoggerOr(opts.Logger),
		queue:      make(chan *request, 4*opts.MaxBatch),
		writerDone: make(chan struct{}),
		ckptSignal: make(chan struct{}, 1),
		ckptStop:   make(chan struct{}),
		ckptDone:   make(chan struct{}),
	}
	if opts.ReadOnly || opts.OpenExisting {
		if err := checkExisting(context.Background(), path, opts); err != nil {
			return nil, err
		}
	} else if !opts.ShareFile {
		if err := checkNotForeign(context.Background(), path, opts); err != nil {
			return nil, err
		}
	}
	if opts.ReadOnly {
		return s.openReadOnly()
	}

	var err error
	s.wdb, err = sql.Open("sqlite", dsn(path, opts, false))
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: open %s: %w", path, err)
	}
	// The writer and the checkpointer pin one connection each; Migrate
	// and ProbeCommits borrow a third.
	s.wdb.SetMaxOpenConns(3)
	s.wdb.SetMaxIdleConns(3)
	s.wdb.SetConnMaxLifetime(0)
	s.wdb.SetConnMaxIdleTime(0)

	ctx := context.Background()
	if !opts.SkipMigrate && !opts.OpenExisting {
		if err := s.Migrate(ctx); err != nil {
			s.wdb.Close()
			return nil, err
		}
	}

	s.rdb, err = sql.Open("sqlite", dsn(path, opts, true))
	if err != nil {
		s.wdb.Close()
		return nil, fmt.Errorf("sqlitestore: open %s: %w", path, err)
	}
	s.rdb.SetMaxOpenConns(opts.ReadConns)
	s.rdb.SetMaxIdleConns(opts.ReadConns)
	s.rdb.SetConnMaxLifetime(0)
	s.rdb.SetConnMaxIdleTime(0)
	s.reads.init(s.rdb, opts.ReadConns)

	wconn, err := retryBusy(ctx, s.logger, func() (*sql.Conn, error) { return s.wdb.Conn(ctx) })
	if err != nil {
		s.rdb.Close()
		s.wdb.Close()
		return nil, fmt.Errorf("sqlitestore: open %s: writer connection: %w", path, err)
	}
	cconn, err := retryBusy(ctx, s.logger, func() (*sql.Conn, error) { return s.wdb.Conn(ctx) })
	if err != nil {
		wconn.Close()
		s.rdb.Close()
		s.wdb.Close()
		return nil, fmt.Errorf("sqlitestore: open %s: checkpointer connection: %w", path, err)
	}
	started := make(chan error, 1)
	go s.runWriter(wconn, started)
	if err := <-started; err != nil {
		<-s.writerDone
		cconn.Close()
		s.rdb.Close()
		s.wdb.Close()
		return nil, fmt.Errorf("sqlitestore: open %s: %w", path, err)
	}
	go s.runCheckpointer(cconn)
	return s, nil
}

// dsn builds the connection string. Every connection gets the pragmas: WAL,
// busy_timeout, foreign keys and the synchronous mode; write transactions
// begin IMMEDIATE, so a writer takes the lock up front (waiting under
// busy_timeout) instead of failing on upgrade. Read connections are
// query_only.
func dsn(path string, opts Options, readOnly bool) string {
	q := url.Values{}
	q.Add("_pragma", "busy_timeout("+strconv.FormatInt(opts.BusyTimeout.Milliseconds(), 10)+")")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "foreign_keys(1)")
	q.Add("_pragma", "synchronous("+opts.Synchronous.String()+")")
	if readOnly {
		q.Add("_pragma", "query_only(1)")
	} else {
		q.Set("_txlock", "immediate")
		// WAL checkpoints (copying the log into the database file, with
		// fsyncs) run on a connection of their own, off the commit path.
		q.Add("_pragma", "wal_autocheckpoint(0)")
	}
	return path + "?" + q.Encode()
}

// Close stops the writer after it has committed every request already
// queued (which may wait for another process's write lock on the file), and
// closes the database. Later calls return storage.ErrClosed.
func (s *Store) Close() error {
	first := false
	s.closeOnce.Do(func() {
		first = true
		s.mu.Lock()
		s.closed = true
		s.isClosed.Store(true)
		close(s.queue)
		s.mu.Unlock()
		<-s.writerDone
		close(s.ckptStop)
		<-s.ckptDone
		s.hub.Close()
		err := s.closeApp()
		if e := s.reads.close(); err == nil {
			err = e
		}
		if e := s.rdb.Close(); err == nil {
			err = e
		}
		if s.wdb != nil { // nil when opened read-only
			if e := s.wdb.Close(); err == nil {
				err = e
			}
		}
		if err != nil {
			s.closeErr = fmt.Errorf("sqlitestore: close: %w", err)
		}
	})
	if !first {
		return fmt.Errorf("sqlitestore: close: %w", storage.ErrClosed)
	}
	return s.closeErr
}

// retryBusy runs f until it returns something other than SQLITE_BUSY, so a
// lock held longer than busy_timeout by another connection delays the caller
// instead of failing it.
func retryBusy[T any](ctx context.Context, logger *slog.Logger, f func() (T, error)) (T, error) {
	for attempt := 1; ; attempt++ {
		v, err := f()
		if err == nil || !isBusy(err) {
			return v, err
		}
		logger.Warn("sqlitestore: database busy, retrying", "attempt", attempt, "err", err)
		select {
		case <-ctx.Done():
			return v, ctx.Err()
		case <-time.After(time.Duration(min(attempt, 10)) * 10 * time.Millisecond):
		}
	}
}
