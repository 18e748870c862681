package sqlitestore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/stemflow/stem/storage"
)

// readPool hands out pinned read-only connections, each with its own
// prepared statements.
type readPool struct {
	db   *sql.DB
	free chan *readConn
	mu   sync.Mutex
	all  []*readConn
	max  int
	// paused is set while the writer checkpoints the WAL and wants it to
	// itself: a channel closed when the checkpoint ends, which new reads
	// wait for (reads already under way finish). Without it, reads started
	// one after another can keep the checkpoint from ever copying the
	// whole log (see walWatch).
	paused atomic.Pointer[chan struct{}]
}

// pause holds new reads back until resume is called.
func (p *readPool) pause() (resume func()) {
	ch := make(chan struct{})
	p.paused.Store(&ch)
	return func() {
		p.paused.Store(nil)
		close(ch)
	}
}

// admit waits while the pool is paused.
func (p *readPool) admit(ctx context.Context) error {
	if ch := p.paused.Load(); ch != nil {
		select {
		case <-*ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

type readConn struct {
	sc *sql.Conn
	c  *conn
}

func (p *readPool) init(db *sql.DB, max int) {
	p.db = db
	p.max = max
	p.free = make(chan *readConn, max)
}

func (p *readPool) get(ctx context.Context) (*readConn, error) {
	select {
	case rc := <-p.free:
		return p.reopen(ctx, rc)
	default:
	}
	p.mu.Lock()
	if len(p.all) < p.max {
		sc, err := p.db.Conn(ctx)
		if err != nil {
			p.mu.Unlock()
			return nil, err
		}
		rc := &readConn{sc: sc}
		p.all = append(p.all, rc)
		p.mu.Unlock()
		return rc, nil
	}
	p.mu.Unlock()
	select {
	case rc := <-p.free:
		return p.reopen(ctx, rc)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// reopen gives rc a new connection if discard closed its last one; on
// failure rc goes back to the pool, still without one.
func (p *readPool) reopen(ctx context.Context, rc *readConn) (*readConn, error) {
	if rc.sc != nil {
		return rc, nil
	}
	sc, err := p.db.Conn(ctx)
	if err != nil {
		p.put(rc)
		return nil, err
	}
	rc.sc = sc
	return rc, nil
}

func (p *readPool) put(rc *readConn) { p.free <- rc }

// discard closes rc's connection, whose state is in doubt, and puts rc
// back without one, for the next get to open a fresh one. The statements
// are finalized and the driver connection closed rather than handed back to
// database/sql's pool (Raw does that on driver.ErrBadConn), so nothing
// reuses it.
func (p *readPool) discard(rc *readConn) {
	p.mu.Lock()
	rc.sc.Raw(func(any) error {
		if rc.c != nil {
			rc.c.closeStmts()
		}
		return driver.ErrBadConn
	})
	rc.sc.Close() // already closed by Raw: ErrConnDone
	rc.sc, rc.c = nil, nil
	p.mu.Unlock()
	p.put(rc)
}

// close finalizes the statements and closes every connection. The caller
// guarantees no read is in progress.
func (p *readPool) close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	var errs []error
	for _, rc := range p.all {
		if rc.sc == nil {
			continue // discarded, not reopened
		}
		if rc.c != nil {
			errs = append(errs, rc.sc.Raw(func(any) error { return rc.c.closeStmts() }))
		}
		errs = append(errs, rc.sc.Close())
	}
	p.all = nil
	return errors.Join(errs...)
}

// errDoubtfulConn ends a read whose connection a failed attempt left in
// doubt, instead of retrying on it.
var errDoubtfulConn = errors.New("read connection left in doubt by a failed attempt")

// read runs f on a read connection; with snapshot, inside one read
// transaction so that all its statements see one state of the database
// (without, each statement sees the latest). It retries when SQLite reports
// the database busy.
func (s *Store) read(ctx context.Context, op string, snapshot bool, f func(c *conn) error) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("sqlitestore: %s: %w", op, err)
	}
	if err := s.reads.admit(ctx); err != nil {
		return fmt.Errorf("sqlitestore: %s: %w", op, err)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return fmt.Errorf("sqlitestore: %s: %w", op, storage.ErrClosed)
	}
	// Opening a connection runs the pragmas, which may meet a lock.
	rc, err := retryBusy(ctx, s.logger, func() (*readConn, error) { return s.reads.get(ctx) })
	if err != nil {
		return fmt.Errorf("sqlitestore: %s: %w", op, err)
	}
	// doubtful is set when a snapshot read could not be sure to have ended
	// its transaction: the connection is then closed, not reused, since one
	// left inside a read transaction would answer every later read from
	// that transaction's old snapshot of the database.
	var doubtful bool
	defer func() {
		if doubtful {
			s.reads.discard(rc)
		} else {
			s.reads.put(rc)
		}
	}()
	_, err = retryBusy(ctx, s.logger, func() (struct{}, error) {
		return struct{}{}, rc.sc.Raw(func(dc any) error {
			if doubtful {
				// A retry after a failure that left the connection in
				// doubt: not on this one.
				return errDoubtfulConn
			}
			if rc.c == nil {
				c, err := newConn(dc)
				if err != nil {
					return err
				}
				rc.c = c
			}
			c := rc.c
			c.ctx = ctx
			defer func() { c.ctx = context.Background() }()
			if !snapshot {
				return f(c)
			}
			// BEGIN DEFERRED takes no lock and waits for nothing, so it
			// runs without ctx: the driver reports a call whose context
			// ended while it ran as failed with the context's error even
			// when the statement took effect (its interrupt comes too late
			// to stop it), which for BEGIN would leave the connection
			// inside a transaction nobody ends.
			if err := ctx.Err(); err != nil {
				return err
			}
			c.ctx = context.Background()
			if _, err := c.exec("BEGIN DEFERRED"); err != nil {
				doubtful = true
				return err
			}
			c.ctx = ctx
			err := f(c)
			// Nor may ctx interrupt ending the transaction.
			c.ctx = context.Background()
			if err == nil {
				_, err = c.exec("COMMIT")
			}
			if err != nil {
				if _, rerr := c.exec("ROLLBACK"); rerr != nil {
					// Still in the transaction, or out of it by a way
					// not foreseen: either way, not to be trusted.
					doubtful = true
				}
			}
			return err
		})
	})
	if err != nil {
		if ctx.Err() != nil && !errors.Is(err, storage.ErrRunNotFound) {
			err = ctx.Err()
		}
		return fmt.Errorf("sqlitestore: %s: %w", op, err)
	}
	return nil
}
