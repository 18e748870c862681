package pgstore

import (
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/stemflow/stem/storage"
)

// Every statement the store sends is bounded, whatever deadline its caller's
// context has (or lacks): a server that accepts connections and never
// replies costs a call Options.CallTimeout, never a hang. The bound is
// applied in one place, the pool the store's methods talk to (dbPool): each
// statement, batch and transaction gets its own deadline, and a transaction
// one deadline for all its statements. Connecting is bounded by
// Options.ConnectTimeout. The LISTEN connection waits for notifications
// without a bound but pings the server when it has been quiet for a while,
// so it notices a dead connection (see waitNotification).

const (
	// DefaultConnectTimeout bounds establishing one connection (TCP, TLS,
	// authentication) when neither Options.ConnectTimeout nor the URL's
	// connect_timeout sets it.
	DefaultConnectTimeout = 5 * time.Second
	// DefaultCallTimeout bounds each statement, batch or transaction when
	// Options.CallTimeout is zero.
	DefaultCallTimeout = 30 * time.Second
)

// dbPool is the pool as the store's methods see it: pgxpool.Pool with a
// deadline on every statement, and a record in the store's health of every
// statement the server answered.
type dbPool struct {
	*pgxpool.Pool
	timeout time.Duration
	health  *storage.Health
}

// result classifies the outcome of a statement run under cctx, started at
// start: a server that answered (success, a Postgres error, no rows) is
// recorded as answering; an error caused by the store's own deadline comes
// back as a *storage.NoAnswerError.
func (p *dbPool) result(cctx context.Context, start time.Time, err error) error {
	if err != nil && storage.CallTimedOut(cctx) {
		return &storage.NoAnswerError{Timeout: p.timeout, Err: err}
	}
	var pe *pgconn.PgError
	if err == nil || errors.As(err, &pe) || errors.Is(err, pgx.ErrNoRows) {
		p.health.OK(start)
	}
	return err
}

// Exec is pgxpool.Pool.Exec, bounded.
func (p *dbPool) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	start := time.Now()
	cctx, cancel := storage.BoundCall(ctx, start.Add(p.timeout))
	defer cancel()
	tag, err := p.Pool.Exec(cctx, sql, args...)
	return tag, p.result(cctx, start, err)
}

// Query is pgxpool.Pool.Query, bounded until the rows are closed.
func (p *dbPool) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	start := time.Now()
	cctx, cancel := storage.BoundCall(ctx, start.Add(p.timeout))
	rows, err := p.Pool.Query(cctx, sql, args...)
	if err != nil {
		cancel()
		return nil, p.result(cctx, start, err)
	}
	return &boundRows{Rows: rows, p: p, ctx: cctx, cancel: cancel, start: start}, nil
}

// QueryRow is pgxpool.Pool.QueryRow, bounded until the row is scanned.
func (p *dbPool) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	start := time.Now()
	cctx, cancel := storage.BoundCall(ctx, start.Add(p.timeout))
	return &boundRow{row: p.Pool.QueryRow(cctx, sql, args...), p: p, ctx: cctx, cancel: cancel, start: start}
}

// SendBatch is pgxpool.Pool.SendBatch, bounded until the results are
// closed.
func (p *dbPool) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	start := time.Now()
	cctx, cancel := storage.BoundCall(ctx, start.Add(p.timeout))
	return &boundBatch{BatchResults: p.Pool.SendBatch(cctx, b), p: p, ctx: cctx, cancel: cancel, start: start}
}

// Begin is pgxpool.Pool.Begin; the transaction's statements, commit and
// rollback share one deadline, a call timeout from now.
func (p *dbPool) Begin(ctx context.Context) (pgx.Tx, error) {
	start := time.Now()
	deadline := start.Add(p.timeout)
	cctx, cancel := storage.BoundCall(ctx, deadline)
	defer cancel()
	tx, err := p.Pool.Begin(cctx)
	if err != nil {
		return nil, p.result(cctx, start, err)
	}
	return &boundTx{Tx: tx, p: p, deadline: deadline}, nil
}

// boundRows cancels its statement's deadline when closed.
type boundRows struct {
	pgx.Rows
	p      *dbPool
	ctx    context.Context
	cancel context.CancelFunc
	start  time.Time
}

func (r *boundRows) Err() error { return r.p.result(r.ctx, r.start, r.Rows.Err()) }

func (r *boundRows) Close() {
	r.Rows.Close()
	r.p.result(r.ctx, r.start, r.Rows.Err())
	r.cancel()
}

// boundRow cancels its statement's deadline once scanned.
type boundRow struct {
	row    pgx.Row
	p      *dbPool
	ctx    context.Context
	cancel context.CancelFunc
	start  time.Time
}

func (r *boundRow) Scan(dest ...any) error {
	defer r.cancel()
	return r.p.result(r.ctx, r.start, r.row.Scan(dest...))
}

// boundBatch cancels its batch's deadline when closed.
type boundBatch struct {
	pgx.BatchResults
	p      *dbPool
	ctx    context.Context
	cancel context.CancelFunc
	start  time.Time
}

// Query is the next statement's rows; their errors, like the batch's, say
// when the server did not answer in time.
func (b *boundBatch) Query() (pgx.Rows, error) {
	rows, err := b.BatchResults.Query()
	if err != nil {
		return rows, b.p.result(b.ctx, b.start, err)
	}
	return &batchRows{Rows: rows, b: b}, nil
}

// Exec is the next statement's result, with errors as Query's.
func (b *boundBatch) Exec() (pgconn.CommandTag, error) {
	tag, err := b.BatchResults.Exec()
	return tag, b.p.result(b.ctx, b.start, err)
}

// batchRows are one statement's rows of a bound batch.
type batchRows struct {
	pgx.Rows
	b *boundBatch
}

func (r *batchRows) Err() error { return r.b.p.result(r.b.ctx, r.b.start, r.Rows.Err()) }

func (b *boundBatch) Close() error {
	defer b.cancel()
	return b.p.result(b.ctx, b.start, b.BatchResults.Close())
}

// boundTx runs every statement of a transaction under the transaction's
// deadline.
type boundTx struct {
	pgx.Tx
	p        *dbPool
	deadline time.Time
}

func (t *boundTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	start := time.Now()
	cctx, cancel := storage.BoundCall(ctx, t.deadline)
	defer cancel()
	tag, err := t.Tx.Exec(cctx, sql, args...)
	return tag, t.p.result(cctx, start, err)
}

func (t *boundTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	start := time.Now()
	cctx, cancel := storage.BoundCall(ctx, t.deadline)
	rows, err := t.Tx.Query(cctx, sql, args...)
	if err != nil {
		cancel()
		return nil, t.p.result(cctx, start, err)
	}
	return &boundRows{Rows: rows, p: t.p, ctx: cctx, cancel: cancel, start: start}, nil
}

func (t *boundTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	start := time.Now()
	cctx, cancel := storage.BoundCall(ctx, t.deadline)
	return &boundRow{row: t.Tx.QueryRow(cctx, sql, args...), p: t.p, ctx: cctx, cancel: cancel, start: start}
}

func (t *boundTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	start := time.Now()
	cctx, cancel := storage.BoundCall(ctx, t.deadline)
	return &boundBatch{BatchResults: t.Tx.SendBatch(cctx, b), p: t.p, ctx: cctx, cancel: cancel, start: start}
}

func (t *boundTx) Commit(ctx context.Context) error {
	start := time.Now()
	cctx, cancel := storage.BoundCall(ctx, t.deadline)
	defer cancel()
	return t.p.result(cctx, start, t.Tx.Commit(cctx))
}

// Rollback gets the transaction's deadline too: past it, the connection
// is closed instead (a server that does not answer cannot roll back).
func (t *boundTx) Rollback(ctx context.Context) error {
	start := time.Now()
	cctx, cancel := storage.BoundCall(ctx, t.deadline)
	defer cancel()
	return t.p.result(cctx, start, t.Tx.Rollback(cctx))
}

// notAnswering reports whether err means the server did not answer: the
// store's call timeout passed, connecting failed, or the connection broke.
// A Postgres error is an answer; a call its caller cancelled, or ended by
// the caller's own deadline, says nothing about the server.
func notAnswering(err error) bool {
	var (
		na *storage.NoAnswerError
		ce *pgconn.ConnectError
		pe *pgconn.PgError
		ne net.Error
	)
	switch {
	case err == nil || errors.As(err, &pe):
		return false
	case errors.As(err, &na), errors.As(err, &ce):
		return true
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return false
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return true
	case errors.As(err, &ne):
		return true
	}
	return false
}

// hostOf names the server a pool connects to, as host:port (or the
// socket directory), never with the user or password.
func hostOf(cfg *pgconn.Config) string {
	if strings.HasPrefix(cfg.Host, "/") {
		return cfg.Host
	}
	return net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port)))
}
