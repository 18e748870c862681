package sqlitestore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/stemflow/stem/storage"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// conn is one driver connection with its statements, each prepared once. It
// is used by one goroutine at a time, inside (*sql.Conn).Raw, which talks to
// the driver directly: no per-call argument conversion or reflection, and a
// zero-length BLOB stays distinguishable from NULL.
//
// A conn made by newTxConn runs the same statements on a *sql.Tx instead
// (an application's transaction, or CheckpointTx's), through database/sql,
// so that the store's write code (the methods of wtx) runs unchanged in a
// transaction it does not own. It is a branch in exec and query rather
// than an interface over the two: through an interface the compiler can
// no longer see that the callbacks and arguments of a statement do not
// outlive it, and every statement of the writer would allocate its
// callback's closure, the variables it captures and its arguments.
type conn struct {
	dc    driver.Conn
	tx    *sql.Tx // set by newTxConn: statements run on it, dc is nil
	ctx   context.Context
	stmts map[string]driver.Stmt
	args  []driver.NamedValue
	dest  []driver.Value
	// vals and ptrs are the arguments and scan destinations of a
	// statement on tx, reused.
	vals []any
	ptrs []any
}

func newConn(dc any) (*conn, error) {
	d, ok := dc.(driver.Conn)
	if !ok {
		return nil, fmt.Errorf("unexpected driver connection %T", dc)
	}
	if _, ok := d.(driver.ConnPrepareContext); !ok {
		return nil, fmt.Errorf("driver connection %T cannot prepare with a context", dc)
	}
	return &conn{dc: d, ctx: context.Background(), stmts: make(map[string]driver.Stmt)}, nil
}

// newTxConn returns a conn whose statements run on tx under ctx.
func newTxConn(ctx context.Context, tx *sql.Tx) *conn {
	return &conn{tx: tx, ctx: ctx}
}

func (c *conn) stmt(query string) (driver.Stmt, error) {
	if st, ok := c.stmts[query]; ok {
		return st, nil
	}
	st, err := c.dc.(driver.ConnPrepareContext).PrepareContext(context.Background(), query)
	if err != nil {
		return nil, err
	}
	c.stmts[query] = st
	return st, nil
}

// closeStmts finalizes every prepared statement.
func (c *conn) closeStmts() error {
	var errs []error
	for q, st := range c.stmts {
		errs = append(errs, st.Close())
		delete(c.stmts, q)
	}
	return errors.Join(errs...)
}

func (c *conn) bind(args []any) []driver.NamedValue {
	c.args = c.args[:0]
	for i, a := range args {
		var v driver.Value
		switch x := a.(type) {
		case int:
			v = int64(x)
		case int64, float64, string, []byte, nil:
			v = x
		case bool:
			if x {
				v = int64(1)
			} else {
				v = int64(0)
			}
		default:
			panic(fmt.Sprintf("sqlitestore: unsupported argument type %T", a))
		}
		c.args = append(c.args, driver.NamedValue{Ordinal: i + 1, Value: v})
	}
	return c.args
}

// exec runs a statement and returns the number of rows it changed.
func (c *conn) exec(query string, args ...any) (int64, error) {
	if c.tx != nil {
		return c.txExec(query, c.bind(args))
	}
	st, err := c.stmt(query)
	if err != nil {
		return 0, err
	}
	res, err := st.(driver.StmtExecContext).ExecContext(c.ctx, c.bind(args))
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// query runs a statement and calls each for every row. The row is only
// valid during the call.
func (c *conn) query(query string, each func(r row) error, args ...any) error {
	if c.tx != nil {
		return c.txQuery(query, each, c.bind(args))
	}
	st, err := c.stmt(query)
	if err != nil {
		return err
	}
	return c.queryStmt(st, each, args)
}

// queryOnce is query with a statement prepared for this call alone and
// finalized after it, not kept: for statements whose text varies with
// the request in more shapes than are worth keeping prepared (a listing
// with several attribute filters).
func (c *conn) queryOnce(query string, each func(r row) error, args ...any) error {
	if c.tx != nil {
		return c.txQuery(query, each, c.bind(args))
	}
	if _, ok := c.stmts[query]; ok {
		return c.query(query, each, args...)
	}
	st, err := c.dc.(driver.ConnPrepareContext).PrepareContext(context.Background(), query)
	if err != nil {
		return err
	}
	defer st.Close()
	return c.queryStmt(st, each, args)
}

// queryStmt runs the prepared statement st as query does.
func (c *conn) queryStmt(st driver.Stmt, each func(r row) error, args []any) error {
	rows, err := st.(driver.StmtQueryContext).QueryContext(c.ctx, c.bind(args))
	if err != nil {
		return err
	}
	n := len(rows.Columns())
	if cap(c.dest) < n {
		c.dest = make([]driver.Value, n)
	}
	dest := c.dest[:n]
	for {
		if err := rows.Next(dest); err != nil {
			rows.Close()
			if err == io.EOF {
				return nil
			}
			return err
		}
		if err := each(row(dest)); err != nil {
			rows.Close()
			return err
		}
	}
}

// queryRow runs a statement and calls scan with its first row; found is
// false when there was none.
func (c *conn) queryRow(query string, scan func(r row), args ...any) (found bool, err error) {
	err = c.query(query, func(r row) error {
		scan(r)
		found = true
		return errStopRows
	}, args...)
	if err == errStopRows {
		err = nil
	}
	return found, err
}

var errStopRows = errors.New("stop")

// txValues returns the bound arguments as database/sql takes them, in
// c.vals: a copy, so that the caller's own arguments do not escape.
func (c *conn) txValues(args []driver.NamedValue) []any {
	c.vals = c.vals[:0]
	for _, a := range args {
		c.vals = append(c.vals, a.Value)
	}
	return c.vals
}

// txExec is exec on c.tx.
func (c *conn) txExec(query string, args []driver.NamedValue) (int64, error) {
	res, err := c.tx.ExecContext(c.ctx, query, c.txValues(args)...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// txQuery is query on c.tx. Each column is scanned into an any, which
// database/sql fills with the driver's value as it is (a BLOB copied, an
// empty one still a non-nil slice), so rows read the same on both paths.
func (c *conn) txQuery(query string, each func(r row) error, args []driver.NamedValue) error {
	rows, err := c.tx.QueryContext(c.ctx, query, c.txValues(args)...)
	if err != nil {
		return err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return err
	}
	n := len(cols)
	if cap(c.dest) < n {
		c.dest = make([]driver.Value, n)
	}
	dest := c.dest[:n]
	scanned := make([]any, n)
	c.ptrs = c.ptrs[:0]
	for i := range scanned {
		c.ptrs = append(c.ptrs, &scanned[i])
	}
	for rows.Next() {
		if err := rows.Scan(c.ptrs...); err != nil {
			return err
		}
		for i, v := range scanned {
			dest[i] = v
		}
		if err := each(row(dest)); err != nil {
			return err
		}
	}
	return rows.Err()
}

// row is one result row as the driver returns it: int64, float64, string,
// []byte (a BLOB, possibly empty) or nil (NULL).
type row []driver.Value

func (r row) int64(i int) int64 {
	v, _ := r[i].(int64)
	return v
}

func (r row) str(i int) string {
	switch v := r[i].(type) {
	case string:
		return v
	case []byte:
		return string(v)
	}
	return ""
}

func (r row) isNull(i int) bool { return r[i] == nil }

// bytes returns a BLOB column: nil for NULL, a non-nil slice (maybe empty)
// otherwise, so what was stored empty comes back empty, not absent.
func (r row) bytes(i int) []byte {
	switch v := r[i].(type) {
	case []byte:
		if v == nil {
			return []byte{}
		}
		return v
	case string:
		return []byte(v)
	}
	return nil
}

// time returns a time column stored as Unix nanoseconds; NULL is the zero
// time.
func (r row) time(i int) time.Time {
	if r[i] == nil {
		return time.Time{}
	}
	return fromNanos(r.int64(i))
}

// timePtr returns a nullable time column.
func (r row) timePtr(i int) *time.Time {
	if r[i] == nil {
		return nil
	}
	t := fromNanos(r.int64(i))
	return &t
}

// errorInfo returns the error stored in the message and code columns at i
// and i+1; NULL message means no error.
func (r row) errorInfo(i int) *storage.ErrorInfo {
	if r[i] == nil {
		return nil
	}
	code, detail, _ := strings.Cut(r.str(i+1), codeDetailSep)
	return &storage.ErrorInfo{Message: r.str(i), Code: code, Detail: detail}
}

// codeDetailSep parts an error's code from its detail in the error_code
// column, which holds the code, or the code, a newline and the detail:
// codes never hold a newline, so the first one ends the code.
const codeDetailSep = "\n"

func fromNanos(n int64) time.Time { return time.Unix(0, n).UTC() }

// nanos converts a time to the stored form: Unix nanoseconds, or NULL for
// the zero time.
func nanos(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UnixNano()
}

func nanosPtr(t *time.Time) any {
	if t == nil {
		return nil
	}
	return nanos(*t)
}

// bytesArg keeps nil (stored as NULL) apart from empty (a zero-length BLOB).
func bytesArg(b []byte) any {
	if b == nil {
		return nil
	}
	return b
}

func errMsg(e *storage.ErrorInfo) any {
	if e == nil {
		return nil
	}
	return e.Message
}

func errCode(e *storage.ErrorInfo) any {
	if e == nil {
		return nil
	}
	if e.Detail != "" {
		return e.Code + codeDetailSep + e.Detail
	}
	return e.Code
}

// isBusy reports whether err is SQLITE_BUSY (or an extended BUSY code):
// another connection holds a lock longer than busy_timeout.
func isBusy(err error) bool {
	var se *sqlite.Error
	if errors.As(err, &se) {
		return se.Code()&0xff == sqlite3.SQLITE_BUSY
	}
	return false
}
