package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/stemflow/stem/storage"
)

// Behind a transaction pooler (Options.TransactionPooler: PgBouncer with
// pool_mode=transaction, and the poolers of most managed Postgres
// offerings), each transaction of a client, and each statement sent
// outside one, may run on another server connection, so the store keeps
// nothing in a session from one to the next:
//
//   - No named prepared statement. The pool's statements are sent in
//     pgx.QueryExecModeCacheDescribe: the first execution of a statement
//     on a client connection asks the server for its description (the
//     parameter and result types) with the unnamed statement, in a round
//     trip of its own, and every execution, that first one included,
//     parses, binds and runs it as the unnamed statement in one round
//     trip, which no server connection keeps past its end. It is the
//     fastest mode that is safe there: one round trip per statement, as
//     with prepared statements, and binary parameters and results, where
//     QueryExecModeExec and SimpleProtocol send and read text (bytea as
//     hex, timestamps and arrays parsed), and QueryExecModeDescribeExec
//     needs two round trips, which a pooler may run on two server
//     connections. The price against the direct default, which prepares
//     each statement once per connection, is the server parsing and
//     planning each statement every time; planning with the values is
//     what ListRuns asks for anyway (see Store.planListings). The
//     descriptions a client connection caches are the same on every
//     server connection of the database. pgx batches, in this mode,
//     describe their new statements in one round trip and send the
//     statements unnamed in another, each batch in one transaction of
//     its own or of the caller's.
//   - Advisory locks are transaction-level only (pg_advisory_xact_lock:
//     start keys, limited queues, migrations), as they are without a
//     pooler; no statement sets a session's parameter, makes a
//     temporary table or relies on search_path (every statement names
//     the store's schema).
//   - NOTIFY works: it is queued by a statement or transaction and sent
//     when it commits, whatever the connection. LISTEN needs a session,
//     so the listener connects to Options.ListenURL, a direct URL of the
//     same database, when it is set; when it is not, the store does not
//     LISTEN, and polls instead (see poll).
//
// Without Options.TransactionPooler, Open and New look for a transaction
// pooler (refuseTxPooling) and refuse one the store would rely on the
// sessions of; a statement failing later because a prepared statement
// went missing, or was prepared already, says what the cause likely is.

// defaultNotifyPoll is how often a store that does not LISTEN polls,
// when Options.NotifyPoll is zero.
const defaultNotifyPoll = 250 * time.Millisecond

// pollGapEvery is the shortest time between two notices to Finished
// subscribers that ends may have been missed, while the server keeps being
// written to: each makes every caller waiting on a run read it again.
const pollGapEvery = time.Second

// poolerSafe reports whether mode leaves no statement prepared in the
// server connection a statement ran on.
func poolerSafe(mode pgx.QueryExecMode) bool {
	switch mode {
	case pgx.QueryExecModeCacheDescribe, pgx.QueryExecModeExec, pgx.QueryExecModeSimpleProtocol:
		return true
	}
	return false
}

// poolerExecMode sets cfg's DefaultQueryExecMode for a transaction
// pooler: QueryExecModeCacheDescribe, unless url names a mode itself
// (default_query_exec_mode), which must then be one that is safe there.
func poolerExecMode(url string, cfg *pgx.ConnConfig) error {
	if !strings.Contains(url, "default_query_exec_mode") {
		cfg.DefaultQueryExecMode = pgx.QueryExecModeCacheDescribe
		return nil
	}
	if !poolerSafe(cfg.DefaultQueryExecMode) {
		return fmt.Errorf("pgstore: the URL's default_query_exec_mode=%v prepares named statements, which a transaction pooler loses between transactions: use cache_describe (the default in pooler mode), exec or simple_protocol: %w",
			cfg.DefaultQueryExecMode, storage.ErrInvalidArgument)
	}
	return nil
}

// listenConfig parses Options.ListenURL; nil when it is empty.
func listenConfig(opts Options) (*pgx.ConnConfig, error) {
	if opts.ListenURL == "" {
		return nil, nil
	}
	cfg, err := pgx.ParseConfig(opts.ListenURL)
	if err != nil {
		// pgx's parse errors redact the password.
		return nil, fmt.Errorf("pgstore: parse ListenURL: %w: %w", err, storage.ErrInvalidArgument)
	}
	if err := refuseStemParams(cfg.RuntimeParams); err != nil {
		return nil, fmt.Errorf("%w (in ListenURL)", err)
	}
	switch {
	case opts.ConnectTimeout > 0:
		cfg.ConnectTimeout = opts.ConnectTimeout
	case cfg.ConnectTimeout == 0:
		cfg.ConnectTimeout = DefaultConnectTimeout
	}
	return cfg, nil
}

// polls reports whether the store learns of other processes' writes by
// polling (poll) rather than by LISTEN.
func (s *Store) polls() bool { return s.txPooler && s.listenCfg == nil }

// refuseTxPooling looks at whether the pool's connections go through a
// transaction pooler, and refuses one when the store, not told it is
// behind one (Options.TransactionPooler), would rely on its sessions: its
// mode prepares named statements, or the listener would LISTEN through
// it.
//
// A client connection whose backend key (the process ID Postgres gives a
// client at connection) is not the process serving its statement
// (pg_backend_pid) is a pooler's or a proxy's. Then a second client
// connection, taken while the first is held idle, asks too: a session
// pooler has given the first client a server connection of its own, so
// the second's statement runs on another; a transaction pooler hands the
// second the server connection the first's statement ended on when it is
// the one idle (or the most recently idle, as PgBouncer picks). So a
// second statement on the same server process proves transaction pooling;
// another one proves nothing (other clients may have taken it), and the
// store goes on. Both statements are sent in the simple protocol, which
// prepares nothing. Their errors are reported as op's, what the store
// does next on the pool.
func (s *Store) refuseTxPooling(ctx context.Context, op string) error {
	mode := s.pool.Config().ConnConfig.DefaultQueryExecMode
	if poolerSafe(mode) && (!s.notify || s.listenCfg != nil) {
		return nil // nothing here would rely on a session
	}
	pooled, err := s.txPooled(ctx)
	if err != nil {
		return s.wrap(op, err)
	}
	if !pooled {
		return nil
	}
	return fmt.Errorf("pgstore: %s pools transactions (as PgBouncer does with pool_mode=transaction): a statement or transaction may run on any server connection, and this store would rely on its sessions (prepared statements, LISTEN); open it in pooler mode, Options.TransactionPooler (stem_pooler=transaction in a store URL), with ListenURL (stem_listen_url) set to the database's direct URL for notifications: %w",
		s.host, storage.ErrInvalidArgument)
}

// txPooled reports whether a second client connection's statement ran on
// the server process the first's did, while the first stayed connected;
// see refuseTxPooling.
func (s *Store) txPooled(ctx context.Context) (bool, error) {
	var first *pgxpool.Conn
	if err := s.connCall(ctx, func(ctx context.Context) (err error) {
		first, err = s.pool.Acquire(ctx)
		return err
	}); err != nil {
		return false, err
	}
	defer first.Release()
	pid1, err := s.serverPID(ctx, first)
	if err != nil {
		return false, err
	}
	if first.Conn().PgConn().PID() == pid1 || s.pool.Config().MaxConns < 2 {
		return false, nil
	}
	// A pool whose other connections are all taken proves nothing either.
	actx, cancel := context.WithTimeout(ctx, min(s.pool.timeout, DefaultConnectTimeout))
	defer cancel()
	second, err := s.pool.Acquire(actx)
	if err != nil {
		return false, nil
	}
	defer second.Release()
	pid2, err := s.serverPID(ctx, second)
	return err == nil && pid2 == pid1, err
}

// serverPID is the server process serving c's statement.
func (s *Store) serverPID(ctx context.Context, c *pgxpool.Conn) (uint32, error) {
	var pid uint32
	err := s.connCall(ctx, func(ctx context.Context) error {
		return c.QueryRow(ctx, `SELECT pg_backend_pid()`, pgx.QueryExecModeSimpleProtocol).Scan(&pid)
	})
	return pid, err
}

// lostPreparedHint is added to an error that lostPrepared matches, in a
// store not in pooler mode.
const lostPreparedHint = "a prepared statement of this connection is missing from the server, or there already: is the URL a transaction pooler's, such as PgBouncer's with pool_mode=transaction? Then open the store with Options.TransactionPooler (stem_pooler=transaction in a store URL)"

// lostPrepared reports whether err is the server's refusal of a prepared
// statement the client believes it prepared (invalid_sql_statement_name),
// or of one it prepares again (duplicate_prepared_statement): what a
// transaction pooler's server connections say to a client that prepares.
func lostPrepared(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "26000" || pe.Code == "42P05")
}

// poll is the store's way of hearing other processes' writes when it
// does not LISTEN (polls): every Options.NotifyPoll it reads the server's
// snapshot of transactions (txid_current_snapshot(): the next transaction
// ID and those in progress), one statement reading no table. Any
// transaction that wrote and committed since the last read, in this
// database or another of the server, changes it, whatever the server
// connection either read ran on; a read-only transaction, which every
// idle claim is, does not. When it changed, every Notifications
// subscriber is woken, as a ready notification would, and every Finished
// subscriber is told that ends may have been missed (storage.Missed), at
// most once per pollGapEvery, as a listener that reconnected does: each
// caller awaiting a run reads it again. A failed read is retried at the
// next tick and compared with the last good one, so writes made while the
// server or pooler was away are noticed once it answers. l's ready is
// closed after the first read, so that Finished returns once an end after
// it would change what the next read sees.
func (s *Store) poll(l *listener) {
	defer s.wg.Done()
	ctx := s.stopCtx
	tick := time.NewTicker(s.pollEvery)
	defer tick.Stop()
	var (
		last  string
		have  bool
		owed  bool
		gapAt time.Time
	)
	for {
		snap, err := s.readSnapshot(ctx)
		switch {
		case err != nil && ctx.Err() != nil:
			return
		case err != nil:
			s.pollFailed(err)
		default:
			if have && snap != last {
				s.hub.Signal()
				owed = true
			}
			last, have = snap, true
			l.readyOnce.Do(func() { close(l.ready) })
		}
		if now := time.Now(); owed && now.Sub(gapAt) >= pollGapEvery {
			gapAt, owed = now, false
			s.hub.Gap()
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// readSnapshot reads the server's snapshot of transactions, as text.
func (s *Store) readSnapshot(ctx context.Context) (string, error) {
	var snap string
	err := s.pool.QueryRow(ctx, `SELECT txid_current_snapshot()::text`).Scan(&snap)
	return snap, err
}

// pollFailed reports a failed poll: one that means the server does not
// answer goes to the store's health, which logs once per episode.
func (s *Store) pollFailed(err error) {
	if notAnswering(err) {
		s.health.Fail("poll for writes", err)
		return
	}
	s.log.Warn("pgstore: polling for other processes' writes failed; retrying", "err", err, "after", s.pollEvery)
}
