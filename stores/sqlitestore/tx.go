package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"sync"

	"github.com/stemflow/stem/storage"
)

var _ storage.TxStore = (*Store)(nil)

// The application's transactions (storage.TxStore).
//
// CreateRunsTx, SendEventTx and EmitTx run the store's own write code (the
// methods of wtx, as the writer runs them) on the application's *sql.Tx,
// through a conn made by newTxConn, inside a savepoint of the
// application's transaction: a call that fails leaves that transaction as
// it was, and one that succeeds is committed or rolled back with the
// application's own writes. The transaction must be on the store's file
// (checked, one statement per call) and should have begun IMMEDIATE, as
// BeginTx's do: one begun DEFERRED that read before writing can fail with
// SQLITE_BUSY when another connection wrote meanwhile.
//
// Engines learn of what such a transaction wrote after its commit: the
// store's writer reads SQLite's data_version, which changes when any other
// connection commits to the file, this process's own included, and wakes
// its Notifications and tells its Finished subscribers that they may have
// missed ends (see foreign.go), within a tenth of a second. A transaction
// begun by BeginTx is committed through the store, which tells them at
// once, naming the runs it ended.
//
// SQLite has one write lock per file: while an application's transaction
// or a transactional step (CheckpointTx) is open, the store's writer, and
// every other writer of the file, waits for it (under busy_timeout, then
// retrying). Keep them short, and never wait inside one for a write of the
// store's own methods: that write waits for the transaction, which waits
// for it.

// TxType is *sql.Tx: the transactions CreateRunsTx, SendEventTx and EmitTx
// take, and CheckpointTx hands to its step.
func (s *Store) TxType() reflect.Type { return reflect.TypeFor[*sql.Tx]() }

// appDB is the store's writable database handle for the application's
// transactions and transactional steps, opened at first use.
type appDB struct {
	mu     sync.Mutex
	db     *sql.DB
	file   string // the main database file, as SQLite names it
	closed bool
	// txs holds the transactions BeginTx began, by their *sql.Tx, until
	// they end, so that what the store's calls in them wrote is told to
	// the Hub at their commit.
	txs sync.Map // *sql.Tx -> *appTx
	// turn is the connection transactional steps run on, one at a time
	// (in the writer's turns), and turnConn its driver connection with
	// the checkpoint's statements prepared once, as the writer's are.
	turn     *sql.Conn
	turnConn *conn
	turnDC   any
}

// appDatabase returns the store's appDB handle, opening it at first use:
// connections with the pragmas of the writer's (WAL, busy_timeout, foreign
// keys, the synchronous mode) whose transactions begin IMMEDIATE.
func (s *Store) appDatabase(op string) (*sql.DB, error) {
	if s.opts.ReadOnly && !s.isClosed.Load() {
		return nil, s.refuseReadOnly(op)
	}
	a := &s.app
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed || s.isClosed.Load() {
		return nil, fmt.Errorf("sqlitestore: %s: %w", op, storage.ErrClosed)
	}
	if a.db != nil {
		return a.db, nil
	}
	db, err := sql.Open("sqlite", dsn(s.path, s.opts, false))
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: %s: open %s: %w", op, s.path, err)
	}
	var file string
	if err := db.QueryRow(`SELECT file FROM pragma_database_list WHERE name = 'main'`).Scan(&file); err != nil {
		db.Close()
		return nil, fmt.Errorf("sqlitestore: %s: open %s: %w", op, s.path, err)
	}
	if a.file, err = filepath.Abs(file); err != nil {
		db.Close()
		return nil, fmt.Errorf("sqlitestore: %s: open %s: %w", op, s.path, err)
	}
	a.db = db
	return db, nil
}

// closeApp closes the appDB handle, if it was opened; Close calls it.
func (s *Store) closeApp() error {
	a := &s.app
	a.dropTurn()
	a.mu.Lock()
	defer a.mu.Unlock()
	a.closed = true
	if a.db == nil {
		return nil
	}
	return a.db.Close()
}

// sameFile reports whether file, the main database file of a connection
// as SQLite names it, is the store's: the same cleaned absolute path, or
// failing that the same file once symbolic links are resolved.
func (a *appDB) sameFile(file string) bool {
	if file == "" {
		return false // a temporary or in-memory database
	}
	if abs, err := filepath.Abs(file); err == nil && abs == a.file {
		return true
	}
	x, err1 := filepath.EvalSymlinks(file)
	y, err2 := filepath.EvalSymlinks(a.file)
	return err1 == nil && err2 == nil && x == y
}

// BeginTx begins an IMMEDIATE transaction on the store's file, on a
// connection of the store's own (opened at first use, with the store's
// pragmas), for the application's writes and CreateRunsTx, SendEventTx
// and EmitTx. Commit it or roll it back through the AppTx: its commit
// tells this store's engines at once of the runs it made ready or ended.
// Waiting for the file's write lock past busy_timeout retries, as the
// store's writer does, until ctx ends.
func (s *Store) BeginTx(ctx context.Context) (storage.AppTx, error) {
	const op = "begin tx"
	db, err := s.appDatabase(op)
	if err != nil {
		return nil, err
	}
	tx, err := retryBusy(ctx, s.logger, func() (*sql.Tx, error) { return db.BeginTx(ctx, nil) })
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: %s: %w", op, s.fileError(err))
	}
	a := &appTx{s: s, tx: tx}
	s.app.txs.Store(tx, a)
	return a, nil
}

// appTx is a transaction BeginTx began, with what the store's calls in it
// have to tell the Hub once it commits.
type appTx struct {
	s  *Store
	tx *sql.Tx

	mu       sync.Mutex
	wake     bool
	finished []string
}

// Tx returns the *sql.Tx.
func (a *appTx) Tx() any { return a.tx }

// Commit commits the transaction, then wakes the store's engines for the
// runs it made ready and tells its Finished subscribers the runs it ended.
func (a *appTx) Commit(ctx context.Context) error {
	defer a.s.app.txs.Delete(a.tx)
	if err := a.tx.Commit(); err != nil {
		return fmt.Errorf("sqlitestore: commit tx: %w", a.s.fileError(err))
	}
	a.announce()
	return nil
}

// Rollback rolls the transaction back; after Commit or Rollback it does
// nothing.
func (a *appTx) Rollback(ctx context.Context) error {
	defer a.s.app.txs.Delete(a.tx)
	if err := a.tx.Rollback(); err != nil && !errors.Is(err, sql.ErrTxDone) {
		return fmt.Errorf("sqlitestore: roll back tx: %w", err)
	}
	return nil
}

// note records what a call in the transaction has to tell after commit.
func (a *appTx) note(w *wtx) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.wake = a.wake || w.wake
	a.finished = append(a.finished, w.finished...)
}

// announce tells the Hub, after the transaction's commit, what the
// store's calls in it noted, as the writer does after its own commits.
func (a *appTx) announce() {
	a.mu.Lock()
	wake, finished := a.wake, a.finished
	a.mu.Unlock()
	if wake {
		a.s.hub.Signal()
	}
	if len(finished) > 0 {
		a.s.hub.Finished(finished...)
	}
}

// inTx runs fn in tx, the application's transaction, inside a savepoint:
// an error rolls fn's writes back and leaves tx as it was. tx must be a
// *sql.Tx on the store's file. What fn has to tell the Hub is told when
// tx commits, if BeginTx began it; otherwise the writer hears the commit
// (see above).
func (s *Store) inTx(ctx context.Context, op string, tx any, fn func(w *wtx) error) error {
	stx, ok := tx.(*sql.Tx)
	if !ok || stx == nil {
		return fmt.Errorf("sqlitestore: %s: %w: the transaction is a %T, want a non-nil %v", op, storage.ErrInvalidArgument, tx, s.TxType())
	}
	if _, err := s.appDatabase(op); err != nil {
		return err
	}
	w := &wtx{conn: newTxConn(ctx, stx)}
	var file string
	if _, err := w.queryRow(`SELECT file FROM pragma_database_list WHERE name = 'main'`, func(r row) { file = r.str(0) }); err != nil {
		return fmt.Errorf("sqlitestore: %s: %w", op, err)
	}
	if !s.app.sameFile(file) {
		return fmt.Errorf("sqlitestore: %s: %w: the transaction is on %q, not on the store's file %q", op, storage.ErrInvalidArgument, file, s.app.file)
	}
	if _, err := w.exec(`SAVEPOINT stem`); err != nil {
		return fmt.Errorf("sqlitestore: %s: %w", op, s.fileError(err))
	}
	if err := fn(w); err != nil {
		_, rerr := w.exec(`ROLLBACK TO stem`)
		if rerr == nil {
			_, rerr = w.exec(`RELEASE stem`)
		}
		if rerr != nil {
			err = errors.Join(err, fmt.Errorf("roll back to the savepoint: %w", rerr))
		}
		return fmt.Errorf("sqlitestore: %s: %w", op, s.fileError(err))
	}
	if _, err := w.exec(`RELEASE stem`); err != nil {
		return fmt.Errorf("sqlitestore: %s: %w", op, s.fileError(err))
	}
	if a, ok := s.app.txs.Load(stx); ok {
		a.(*appTx).note(w)
	}
	return nil
}

// CreateRunsTx is CreateRuns in tx, the application's *sql.Tx on the
// store's file: the runs exist when tx commits, not before, and not at
// all if it rolls back. A run with a Lease is refused.
func (s *Store) CreateRunsTx(ctx context.Context, tx any, runs []storage.NewRun) ([]storage.CreateResult, error) {
	const op = "create runs tx"
	if err := storage.ValidateNewRuns(runs); err != nil {
		return nil, fmt.Errorf("sqlitestore: %w", err)
	}
	for _, r := range runs {
		if r.Lease != nil {
			return nil, fmt.Errorf("sqlitestore: %s: %w: run %q is leased at creation, which a transaction that may never commit cannot be", op, storage.ErrInvalidArgument, r.ID)
		}
	}
	var out []storage.CreateResult
	err := s.inTx(ctx, op, tx, func(w *wtx) (err error) {
		out, err = w.createRuns(runs, s.now())
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// SendEventTx is SendEvent in tx (see CreateRunsTx).
func (s *Store) SendEventTx(ctx context.Context, tx any, ev storage.Event) (bool, error) {
	if err := ev.Validate(); err != nil {
		return false, fmt.Errorf("sqlitestore: %w", err)
	}
	var delivered bool
	err := s.inTx(ctx, "send event tx", tx, func(w *wtx) (err error) {
		delivered, err = w.sendEvent(ev, s.now().UnixNano())
		return err
	})
	if err != nil {
		return false, err
	}
	return delivered, nil
}

// EmitTx is Emit in tx (see CreateRunsTx).
func (s *Store) EmitTx(ctx context.Context, tx any, req storage.EmitRequest) ([]string, error) {
	if err := req.Validate(); err != nil {
		return nil, fmt.Errorf("sqlitestore: %w", err)
	}
	var ids []string
	err := s.inTx(ctx, "emit tx", tx, func(w *wtx) (err error) {
		ids, err = w.emit(req, s.now().UnixNano())
		return err
	})
	if err != nil {
		return nil, err
	}
	return ids, nil
}

// CheckpointTx runs a transactional step: on a connection of the store's
// own (see BeginTx) it begins an IMMEDIATE transaction, calls step with
// it, and writes req's checkpoint with step's output in it exactly as
// Checkpoint does (fenced by the lease, write-once, the pause rules), then
// commits the step's writes and the checkpoint together and wakes the
// store's engines as Checkpoint would. A step's error rolls its writes
// back and is returned as it is; a checkpoint the key has already
// (Existing) or a lost lease (storage.ErrLeaseLost) rolls them back too.
//
// The fence is checked after step returns, in the same transaction as the
// write, so nothing the step does waits for it. The transaction holds the
// file's write lock from its beginning (IMMEDIATE: a step that reads and
// then writes never fails for another writer's commit in between), so the
// store's writer waits while the step runs: keep transactional steps
// short.
func (s *Store) CheckpointTx(ctx context.Context, req storage.CheckpointRequest, step func(ctx context.Context, tx any) ([]byte, error)) (storage.CheckpointResult, error) {
	const op = "checkpoint tx"
	if err := req.Validate(); err != nil {
		return storage.CheckpointResult{}, fmt.Errorf("sqlitestore: %w", err)
	}
	switch {
	case req.Complete != nil:
		return storage.CheckpointResult{}, fmt.Errorf("sqlitestore: %s: %w: a transactional step's checkpoint cannot complete its run", op, storage.ErrInvalidArgument)
	case step == nil:
		return storage.CheckpointResult{}, fmt.Errorf("sqlitestore: %s: %w: no step", op, storage.ErrInvalidArgument)
	}
	db, err := s.appDatabase(op)
	if err != nil {
		return storage.CheckpointResult{}, err
	}
	// The step's transaction waits for its turn at the file, which this
	// store's writer gives between its batches, rather than retrying
	// against the writer's lock (SQLite's busy handler sleeps a
	// millisecond and more per try).
	var (
		res     storage.CheckpointResult
		stepErr error
	)
	if err := s.takeTurn(ctx, op, func() { res, stepErr = s.checkpointTx(ctx, db, req, step) }); err != nil {
		return storage.CheckpointResult{}, err
	}
	return res, stepErr
}

// checkpointTx is CheckpointTx in the writer's turn, on the turn's
// connection: the step's *sql.Tx there, then the checkpoint's statements
// on the same connection, in the same transaction, prepared once.
func (s *Store) checkpointTx(ctx context.Context, db *sql.DB, req storage.CheckpointRequest, step func(ctx context.Context, tx any) ([]byte, error)) (storage.CheckpointResult, error) {
	const op = "checkpoint tx"
	sc, err := s.app.turnConnection(ctx, db)
	if err != nil {
		return storage.CheckpointResult{}, fmt.Errorf("sqlitestore: %s: %w", op, s.fileError(err))
	}
	tx, err := retryBusy(ctx, s.logger, func() (*sql.Tx, error) { return sc.BeginTx(ctx, nil) })
	if err != nil {
		// A connection that cannot begin is dropped (no transaction is
		// open on it): the next turn opens another.
		s.app.dropTurn()
		return storage.CheckpointResult{}, fmt.Errorf("sqlitestore: %s: begin: %w", op, s.fileError(err))
	}
	// Registered as BeginTx's are, so that what the step's own calls in
	// it (CreateRunsTx, ...) note is told with the checkpoint's at commit.
	a := &appTx{s: s, tx: tx}
	s.app.txs.Store(tx, a)
	defer s.app.txs.Delete(tx)
	committed := false
	defer func() {
		if !committed {
			tx.Rollback()
		}
	}()
	out, err := step(ctx, tx)
	if err != nil {
		return storage.CheckpointResult{}, err
	}
	req.Checkpoint.Output = out
	var (
		w   *wtx
		res storage.CheckpointResult
	)
	err = sc.Raw(func(dc any) error {
		c, err := s.app.turnStatements(dc)
		if err != nil {
			return err
		}
		w = &wtx{conn: c}
		res, err = w.checkpoint(req, s.now())
		return err
	})
	if err != nil {
		return storage.CheckpointResult{}, fmt.Errorf("sqlitestore: %s: %w", op, s.fileError(err))
	}
	if res.Existing != nil {
		return res, nil // the deferred rollback takes the step's writes back
	}
	if err := tx.Commit(); err != nil {
		return storage.CheckpointResult{}, fmt.Errorf("sqlitestore: %s: commit: %w", op, s.fileError(err))
	}
	committed = true
	a.note(w)
	a.announce()
	return res, nil
}

// turnConnection returns the turn's connection, opening it at first use.
// Only the writer's turns use it, one at a time.
func (a *appDB) turnConnection(ctx context.Context, db *sql.DB) (*sql.Conn, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.turn == nil {
		sc, err := db.Conn(ctx)
		if err != nil {
			return nil, err
		}
		a.turn = sc
	}
	return a.turn, nil
}

// turnStatements returns the turn connection's driver connection dc with
// its statements cache, made at first use.
func (a *appDB) turnStatements(dc any) (*conn, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.turnConn != nil && a.turnDC == dc {
		return a.turnConn, nil
	}
	if a.turnConn != nil {
		a.turnConn.closeStmts()
	}
	c, err := newConn(dc)
	if err != nil {
		return nil, err
	}
	a.turnConn, a.turnDC = c, dc
	return c, nil
}

// dropTurn closes the turn's connection when it could not begin, or at
// Close, so that the next turn opens another. No transaction may be open
// on it: closing waits for it.
func (a *appDB) dropTurn() {
	a.mu.Lock()
	sc, c := a.turn, a.turnConn
	a.turn, a.turnConn, a.turnDC = nil, nil, nil
	a.mu.Unlock()
	if sc == nil {
		return
	}
	if c != nil {
		_ = sc.Raw(func(any) error { return c.closeStmts() })
	}
	_ = sc.Close()
}
