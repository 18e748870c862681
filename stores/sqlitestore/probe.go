package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/stemflow/stem/storage"
)

var _ storage.CommitProber = (*Store)(nil)

// probeTable is the scratch table ProbeCommits creates in the store's file
// and drops before it returns.
const probeTable = "stem_probe"

// ProbeCommits measures the file's ceiling (see storage.CommitProber):
// single-row INSERTs, each committed on its own, so each pays one full
// commit in the store's synchronous mode (with SyncFull, one fsync). They
// come from one connection whatever conns asks, as SQLite lets one
// connection write at a time (more would only queue for the lock), opened
// with the store's own pragmas, and go to the scratch table stem_probe in
// the store's file, created IF NOT EXISTS (a probe that was killed leaves
// one, which the next reuses) and dropped before ProbeCommits returns.
//
// The store's writer goes on meanwhile, taking turns with the probe for the
// file's write lock. The probe keeps the write-ahead log bounded as the
// writer does after each of its batches (see walWatch), so each commit pays
// what one batch of the writer pays besides its statements, and at the end
// it truncates the log as an idle writer does.
func (s *Store) ProbeCommits(ctx context.Context, conns int, d time.Duration) (p storage.CommitProbe, err error) {
	const op = "probe commits"
	switch {
	case s.isClosed.Load():
		return p, fmt.Errorf("sqlitestore: %s: %w", op, storage.ErrClosed)
	case s.opts.ReadOnly:
		return p, s.refuseReadOnly(op)
	}
	if err := storage.CheckProbe(conns, d); err != nil {
		return p, fmt.Errorf("sqlitestore: %w", err)
	}
	sc, err := retryBusy(ctx, s.logger, func() (*sql.Conn, error) { return s.wdb.Conn(ctx) })
	if err != nil {
		return p, fmt.Errorf("sqlitestore: %s on %s: connect: %w", op, s.path, err)
	}
	defer sc.Close()
	err = sc.Raw(func(dc any) (err error) {
		c, err := newConn(dc)
		if err != nil {
			return err
		}
		defer c.closeStmts()
		exec := func(ctx context.Context, query string, args ...any) error {
			_, err := retryBusy(ctx, s.logger, func() (int64, error) { return c.exec(query, args...) })
			return err
		}
		if err := exec(ctx, `CREATE TABLE IF NOT EXISTS `+probeTable+` (id INTEGER PRIMARY KEY, run_id TEXT NOT NULL, payload BLOB) STRICT`); err != nil {
			return fmt.Errorf("create %s: %w", probeTable, err)
		}
		ww := s.newWALWatch()
		defer func() {
			// A statement still prepared on the table would keep it from
			// being dropped.
			err = errors.Join(err, c.closeStmts())
			if derr := exec(context.WithoutCancel(ctx), `DROP TABLE IF EXISTS `+probeTable); derr != nil {
				err = errors.Join(err, fmt.Errorf("drop %s: %w", probeTable, derr))
			}
			ww.checkpoint(c, "TRUNCATE")
		}()
		if err := ww.init(c); err != nil {
			return err
		}
		insert := `INSERT INTO ` + probeTable + ` (run_id, payload) VALUES (?1, ?2)`
		payload := []byte(`{"result":"0123456789abcdef"}`)
		p, err = storage.MeasureCommits(ctx, 1, d, func(ctx context.Context, _ int) error {
			if err := exec(ctx, insert, "probe", payload); err != nil {
				return err
			}
			ww.afterBatch(c, false)
			return nil
		})
		return err
	})
	if err != nil {
		return storage.CommitProbe{}, fmt.Errorf("sqlitestore: %s on %s: %w", op, s.path, err)
	}
	p.Commit = "one-row commits, synchronous=" + s.opts.Synchronous.String()
	return p, nil
}
