package sqlitestore

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/stemflow/stem/storage"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// DefaultMaxWAL is Options.MaxWAL's default: 4 MiB.
const DefaultMaxWAL = 4 << 20

// DefaultIdleCheckpoint is Options.IdleCheckpoint's default.
const DefaultIdleCheckpoint = time.Second

// ckptWait bounds how long a RESTART or TRUNCATE checkpoint made by the
// writer waits for reads still using the log (and for another Store's
// write lock on the file); beyond it the checkpoint gives up and is tried
// again later, so a slow reader delays writes by at most this much.
const ckptWait = 250 * time.Millisecond

// walDefaults validates the options that bound the write-ahead log and
// fills in their defaults.
func walDefaults(opts *Options) error {
	if opts.MaxWAL < 0 {
		return fmt.Errorf("sqlitestore: open: %w: negative MaxWAL %d", storage.ErrInvalidArgument, opts.MaxWAL)
	}
	if opts.MaxWAL == 0 {
		opts.MaxWAL = DefaultMaxWAL
	}
	if opts.IdleCheckpoint == 0 {
		opts.IdleCheckpoint = DefaultIdleCheckpoint
	}
	return nil
}

// walWatch is the writer's control of the write-ahead log (the file
// <path>-wal). SQLite appends every commit to the log; a checkpoint copies
// the log into the database file, and the next write transaction after a
// complete checkpoint starts the log over from its beginning (SQLite then
// truncates the file to journal_size_limit, MaxWAL/2 here). Under steady
// load the background checkpointer alone never catches up: by the time its
// copy ends the writer has appended more, so the log never starts over and
// grows without bound. The writer, between two batches, is the one moment
// nothing of this Store is appending, so it does what needs the log still:
//
//   - once the file passes MaxWAL/2 it wakes the checkpointer for a PASSIVE
//     copy (off the commit path), and again at each further MaxWAL/4;
//   - once the file passes MaxWAL it makes a RESTART checkpoint itself,
//     which copies what is left, waits (at most ckptWait) for reads still on
//     the log, and so makes its next transaction start the log over: the
//     file stays within MaxWAL plus one batch;
//   - after a batch failed because the disk was full, it checkpoints before
//     the next batch, so once space is freed the log's contents move into
//     the database file and the log's file is reused rather than extended;
//   - once it has been idle for IdleCheckpoint, a TRUNCATE checkpoint copies
//     the whole log and truncates its file to zero bytes.
//
// Reads never hold a transaction beyond one method call, so none keeps the
// log from starting over for long; a reader in another process holding one
// snapshot for long can, until it ends.
type walWatch struct {
	s    *Store
	path string // the WAL file
	// limit is the file size past which the writer makes a RESTART
	// checkpoint: MaxWAL, or less after the disk was full. nextPassive is
	// the size past which the checkpointer is next woken; retryAt the size
	// from which a RESTART that failed is retried.
	limit, nextPassive, retryAt int64
	lastSize                    int64
	// dirty is set by a commit since the last TRUNCATE checkpoint; full
	// while the last batch failed for want of disk space.
	dirty, full bool
	idle        *time.Timer
	// setWait and restoreWait set the connection's busy_timeout for a
	// checkpoint and back.
	setWait, restoreWait string
}

func (s *Store) newWALWatch() *walWatch {
	wait := min(ckptWait, s.opts.BusyTimeout)
	return &walWatch{
		s:           s,
		path:        s.path + "-wal",
		limit:       s.opts.MaxWAL,
		nextPassive: s.opts.MaxWAL / 2,
		setWait:     "PRAGMA busy_timeout = " + strconv.FormatInt(wait.Milliseconds(), 10),
		restoreWait: "PRAGMA busy_timeout = " + strconv.FormatInt(s.opts.BusyTimeout.Milliseconds(), 10),
	}
}

// init sets journal_size_limit on the writer's connection: when the log
// starts over, SQLite truncates its file to MaxWAL/2, keeping that much
// allocated for the next commits (which then need no new disk space).
func (ww *walWatch) init(c *conn) error {
	_, err := c.exec("PRAGMA journal_size_limit = " + strconv.FormatInt(ww.s.opts.MaxWAL/2, 10))
	return err
}

// next waits for the next request, making a TRUNCATE checkpoint whenever
// the writer has been idle for IdleCheckpoint since a commit. ok is false
// once the queue is closed and drained.
func (ww *walWatch) next(c *conn, queue <-chan *request) (r *request, ok bool) {
	for {
		if !ww.dirty || ww.s.opts.IdleCheckpoint < 0 {
			r, ok = <-queue
			return r, ok
		}
		if ww.idle == nil {
			ww.idle = time.NewTimer(ww.s.opts.IdleCheckpoint)
		} else {
			ww.idle.Reset(ww.s.opts.IdleCheckpoint)
		}
		select {
		case r, ok = <-queue:
			ww.idle.Stop()
			return r, ok
		case <-ww.idle.C:
			if ww.checkpoint(c, "TRUNCATE") {
				ww.dirty = false
				ww.limit = ww.s.opts.MaxWAL
				ww.started()
				ww.lastSize = 0
			}
		}
	}
}

// beforeBatch checkpoints first when the last batch failed for want of
// disk space, so that the log's contents move into the database file (as
// soon as the space that needs is there) and the batch reuses the log's
// file from its beginning.
func (ww *walWatch) beforeBatch(c *conn) {
	if ww.full {
		ww.checkpoint(c, "RESTART")
	}
}

// afterBatch looks at the log's size after a batch, which failed for want
// of disk space when full is set, and checkpoints as walWatch describes.
func (ww *walWatch) afterBatch(c *conn, full bool) {
	ww.dirty = true
	size, err := ww.size()
	if err != nil {
		ww.full = full
		return
	}
	if full && !ww.full {
		ww.s.logger.Warn("sqlitestore: disk full: writes fail until space is freed on the file system holding the database", "path", ww.s.path, "wal_bytes", size)
		// Space is short: from now on keep the log within the file it
		// already has (but not below MaxWAL/8, not to checkpoint after
		// every batch), so that the space freed goes to the database
		// file, until an idle TRUNCATE gives the log's space back.
		ww.limit = min(ww.s.opts.MaxWAL, max(size, ww.s.opts.MaxWAL/8))
		ww.started()
	}
	ww.full = full
	if size < ww.lastSize { // the log started over
		ww.started()
	}
	ww.lastSize = size
	limit := ww.limit
	if size <= limit {
		ww.retryAt = 0
		if size > ww.nextPassive {
			select {
			case ww.s.ckptSignal <- struct{}{}:
			default:
			}
			ww.nextPassive = size + limit/4
		}
		return
	}
	if size >= ww.retryAt && !full && !ww.checkpoint(c, "RESTART") {
		// Something held the log for ckptWait: try again once it has
		// grown some more, not after every batch.
		ww.retryAt = size + limit/4
	}
}

// started resets the thresholds once the log has started over.
func (ww *walWatch) started() {
	ww.nextPassive = ww.limit / 2
	ww.retryAt = 0
}

func (ww *walWatch) size() (int64, error) {
	fi, err := os.Stat(ww.path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

// checkpoint runs PRAGMA wal_checkpoint(mode) on the writer's connection,
// holding new reads of this Store back, and reports whether every frame of
// the log was copied and, for RESTART and TRUNCATE, no reader still uses
// the log. It waits at most about ckptWait: for reads under way and another
// Store's write lock (under busy_timeout), and for the checkpointer's
// PASSIVE copy to end (SQLite fails a checkpoint at once while another
// runs). A failure is logged, not returned to callers: the log is only
// larger until the next try.
func (ww *walWatch) checkpoint(c *conn, mode string) (done bool) {
	resume := ww.s.reads.pause()
	defer resume()
	if _, err := c.exec(ww.setWait); err != nil {
		return false
	}
	var busy, logFrames, copied int64
	var err error
	for deadline := time.Now().Add(ckptWait); ; {
		_, err = c.queryRow("PRAGMA wal_checkpoint("+mode+")", func(r row) {
			busy, logFrames, copied = r.int64(0), r.int64(1), r.int64(2)
		})
		// -1 frames: the checkpoint could not start, most likely because
		// the checkpointer's copy is under way.
		if err != nil || busy == 0 || logFrames >= 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	if _, e := c.exec(ww.restoreWait); err == nil {
		err = e
	}
	if err != nil {
		if !isBusy(err) && !ww.full {
			ww.s.logger.Warn("sqlitestore: wal checkpoint", "path", ww.s.path, "mode", mode, "err", err)
		}
		return false
	}
	return busy == 0 && copied == logFrames
}

// isFull reports whether err is SQLITE_FULL: the file system holding the
// database (or its log) has no space left.
func isFull(err error) bool {
	var se *sqlite.Error
	if errors.As(err, &se) {
		return se.Code()&0xff == sqlite3.SQLITE_FULL
	}
	return false
}

// isIOErr reports whether err is SQLITE_IOERR (or an extended IOERR code).
func isIOErr(err error) bool {
	var se *sqlite.Error
	if errors.As(err, &se) {
		return se.Code()&0xff == sqlite3.SQLITE_IOERR
	}
	return false
}

// fileError names the database file in an error that came from its file
// system, for an operator to act on.
func (s *Store) fileError(err error) error {
	switch {
	case isFull(err):
		return fmt.Errorf("disk full writing %s (nothing of this call was written; writes resume once space is freed, without reopening the store): %w", s.path, err)
	case isIOErr(err):
		return fmt.Errorf("I/O error on %s: %w", s.path, err)
	}
	return err
}
