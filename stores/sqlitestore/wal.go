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
// complete checkpoint starts the log over from its beginning, overwriting
// the file (SQLite then truncates the file to journal_size_limit, MaxWAL
// here, when it is larger). Under steady load the background checkpointer
// alone never catches up: by the time its copy ends the writer has
// appended more, so the log never starts over and grows without bound. The
// writer, between two batches, is the one moment nothing of this Store is
// appending, so it does what needs the log still:
//
//   - once the log passes MaxWAL/2 it wakes the checkpointer for a PASSIVE
//     copy (off the commit path), and again at each further MaxWAL/4;
//   - once the log passes MaxWAL, or the file does, it makes a RESTART
//     checkpoint itself, which copies what is left, waits (at most
//     ckptWait) for reads still on the log, and so makes its next
//     transaction start the log over: the file stays within MaxWAL plus one
//     batch;
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
	// limit is the log length past which the writer makes a RESTART
	// checkpoint: MaxWAL, or less after the disk was full. nextPassive is
	// the length past which the checkpointer is next woken; retryAt the
	// length (or file size) from which a RESTART that failed is retried.
	limit, nextPassive, retryAt int64
	// logLen is the log's length as far as the writer knows: the frames it
	// appended since the log last started over, from the pages SQLite
	// reports its connection wrote (DBStatusCacheWrite), times frame, the
	// size of one. The file's size cannot tell, since the file is kept at
	// MaxWAL when the log starts over. logLen runs high after the log
	// started over behind the writer's back (a complete PASSIVE copy while
	// it was idle): the writer then checkpoints early, with little to
	// copy. It runs low by what other Stores on the file append: those
	// grow the file past MaxWAL, which the writer checks too.
	logLen, frame int64
	status        sqlite.DBStatus
	lastSize      int64 // the file's size after the last batch
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
// starts over, SQLite truncates its file to MaxWAL, keeping that much
// allocated for the next commits. Those then need no new disk space, and
// each overwrites blocks the file has instead of appending: a commit's
// fsync (SyncFull) then only flushes data, not a new file size and block
// map as well, which costs half as much on ext4 (about 100 µs against 200
// µs measured on this project's machines). Keeping less (MaxWAL/2, say)
// makes half of every cycle of the log grow the file again. init also
// learns the size of a frame, to measure the log by.
func (ww *walWatch) init(c *conn) error {
	st, ok := c.dc.(sqlite.DBStatus)
	if !ok {
		return fmt.Errorf("driver connection %T cannot report the pages it wrote", c.dc)
	}
	ww.status = st
	var pageSize int64
	if _, err := c.queryRow("PRAGMA page_size", func(r row) { pageSize = r.int64(0) }); err != nil {
		return err
	}
	ww.frame = pageSize + walFrameHeader
	ww.appended()
	_, err := c.exec("PRAGMA journal_size_limit = " + strconv.FormatInt(ww.s.opts.MaxWAL, 10))
	return err
}

// walFrameHeader is the size of a WAL frame's header, before its page.
const walFrameHeader = 24

// appended returns how many bytes of frames the writer's connection has
// appended to the log since the last call.
func (ww *walWatch) appended() int64 {
	pages, _, err := ww.status.Status(sqlite.DBStatusCacheWrite, true)
	if err != nil {
		return 0
	}
	return int64(pages) * ww.frame
}

// restarted notes that the log has been copied whole and starts over with
// the next transaction.
func (ww *walWatch) restarted() {
	ww.appended() // pages a checkpoint wrote, if any, are not the log's
	ww.logLen = 0
	ww.started()
}

// next waits for the next request, making a TRUNCATE checkpoint whenever
// the writer has been idle for IdleCheckpoint since a commit, and checking
// for other processes' commits (foreign) meanwhile. ok is false once the
// queue is closed and drained.
func (ww *walWatch) next(c *conn, queue <-chan *request, foreign *foreignWatch) (r *request, ok bool) {
	var idle <-chan time.Time
	if ww.dirty && ww.s.opts.IdleCheckpoint >= 0 {
		if ww.idle == nil {
			ww.idle = time.NewTimer(ww.s.opts.IdleCheckpoint)
		} else {
			ww.idle.Reset(ww.s.opts.IdleCheckpoint)
		}
		idle = ww.idle.C
	}
	for {
		select {
		case r, ok = <-queue:
			if ww.idle != nil {
				ww.idle.Stop()
			}
			return r, ok
		case <-foreign.tick.C:
			foreign.check(c)
		case <-idle:
			idle = nil
			if ww.checkpoint(c, "TRUNCATE") {
				ww.dirty = false
				ww.limit = ww.s.opts.MaxWAL
				ww.restarted()
				ww.lastSize = 0
			} else {
				ww.idle.Reset(ww.s.opts.IdleCheckpoint) // tried again later
				idle = ww.idle.C
			}
		}
	}
}

// beforeBatch checkpoints first when the last batch failed for want of
// disk space, so that the log's contents move into the database file (as
// soon as the space that needs is there) and the batch reuses the log's
// file from its beginning.
func (ww *walWatch) beforeBatch(c *conn) {
	if ww.full && ww.checkpoint(c, "RESTART") {
		ww.restarted()
	}
}

// afterBatch looks at the log's size after a batch, which failed for want
// of disk space when full is set, and checkpoints as walWatch describes.
func (ww *walWatch) afterBatch(c *conn, full bool) {
	ww.dirty = true
	added := ww.appended()
	size, err := ww.size()
	if err != nil {
		ww.logLen += added
		ww.full = full
		return
	}
	if size < ww.lastSize {
		// SQLite truncated the file, which it does when the log starts
		// over (after another Store's checkpoint): the log is this batch.
		ww.logLen = 0
		ww.started()
	}
	ww.logLen += added
	ww.lastSize = size
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
	limit, n := ww.limit, ww.logLen
	// The file is kept at MaxWAL when the log starts over, so it is only
	// larger when the log is: frames of other Stores make it so.
	if size > ww.s.opts.MaxWAL {
		n = max(n, size)
	}
	if n <= limit {
		ww.retryAt = 0
		if n > ww.nextPassive {
			select {
			case ww.s.ckptSignal <- struct{}{}:
			default:
			}
			ww.nextPassive = n + limit/4
		}
		return
	}
	if n < ww.retryAt || full {
		return
	}
	if ww.checkpoint(c, "RESTART") {
		ww.restarted()
		return
	}
	// Something held the log for ckptWait: try again once it has grown
	// some more, not after every batch.
	ww.retryAt = n + limit/4
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
