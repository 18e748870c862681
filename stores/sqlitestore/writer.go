package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	goruntime "runtime"
	"sync/atomic"
	"time"

	"github.com/stemflow/stem/storage"
)

// request is one write method's call, queued for the writer.
type request struct {
	// fn does the write on the writer's connection, inside the request's
	// savepoint. An error rolls the savepoint back: nothing of the request
	// is written. fn stores its results in variables of the calling method.
	fn func(w *wtx) error

	// state moves from pending to taken (by the writer) or to abandoned (by
	// a caller whose context ended first); whoever moves it first decides.
	state atomic.Int32
	done  chan struct{}
	err   error
}

const (
	statePending int32 = iota
	stateTaken
	stateAbandoned
)

// wtx is what a request's fn writes through: the writer's connection, in a
// transaction, inside the request's savepoint.
type wtx struct {
	*conn
	// wake is set by a request that made a run ready to claim now; after
	// the commit the writer signals the store's Hub (see Notifications).
	wake bool
	// finished holds the runs the batch's requests ended; after the commit
	// the writer tells the store's Hub (see Finished).
	finished []string
}

// write queues fn for the writer and waits until the transaction holding it
// has committed (or fn failed). If ctx ends before the writer took the
// request, nothing is written and ctx's error is returned; once taken, the
// call waits for the outcome, so an error always means nothing was written.
func (s *Store) write(ctx context.Context, op string, fn func(w *wtx) error) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("sqlitestore: %s: %w", op, err)
	}
	if s.opts.ReadOnly && !s.isClosed.Load() {
		return s.refuseReadOnly(op)
	}
	r := &request{fn: fn, done: make(chan struct{})}
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return fmt.Errorf("sqlitestore: %s: %w", op, storage.ErrClosed)
	}
	select {
	case s.queue <- r:
	case <-ctx.Done():
		s.mu.RUnlock()
		return fmt.Errorf("sqlitestore: %s: %w", op, ctx.Err())
	}
	s.mu.RUnlock()
	select {
	case <-r.done:
	case <-ctx.Done():
		if r.state.CompareAndSwap(statePending, stateAbandoned) {
			return fmt.Errorf("sqlitestore: %s: %w", op, ctx.Err())
		}
		<-r.done
	}
	if r.err != nil {
		return fmt.Errorf("sqlitestore: %s: %w", op, s.fileError(r.err))
	}
	return nil
}

// runWriter owns the write connection until the queue is closed and
// drained. It reports on started once its connection is ready.
func (s *Store) runWriter(sc *sql.Conn, started chan<- error) {
	defer close(s.writerDone)
	defer sc.Close()
	err := sc.Raw(func(dc any) error {
		c, err := newConn(dc)
		if err != nil {
			return err
		}
		defer c.closeStmts()
		// Prepare the transaction statements up front, so that a broken
		// connection shows at Open.
		for _, q := range []string{"BEGIN IMMEDIATE", "COMMIT", "ROLLBACK", "SAVEPOINT req", "RELEASE req", "ROLLBACK TO req"} {
			if _, err := c.stmt(q); err != nil {
				return err
			}
		}
		wal := s.newWALWatch()
		if err := wal.init(c); err != nil {
			return err
		}
		started <- nil
		started = nil
		w := &wtx{conn: c}
		batch := make([]*request, 0, s.opts.MaxBatch)
		last := 0 // size of the previous batch
		for {
			r, ok := wal.next(c, s.queue)
			if !ok {
				return nil
			}
			// The callers answered last time are likely to be back with
			// their next write in a moment: give them the CPU briefly, so
			// that they share this commit instead of paying for the next.
			for i := 0; i < yieldRounds && len(s.queue)+1 < last; i++ {
				goruntime.Gosched()
			}
			batch = append(batch[:0], r)
		drain:
			for len(batch) < s.opts.MaxBatch {
				select {
				case r, ok := <-s.queue:
					if !ok {
						break drain
					}
					batch = append(batch, r)
				default:
					break drain
				}
			}
			last = len(batch)
			wal.beforeBatch(c)
			if wrote, full := s.commitBatch(w, batch); wrote {
				wal.afterBatch(c, full)
			}
			clear(batch)
		}
	})
	if started != nil {
		if err == nil {
			err = errors.New("writer stopped")
		}
		started <- err
	}
}

// commitBatch runs the batch's requests in one transaction, each in its own
// savepoint, commits, and answers every caller. wrote reports that it tried
// (some request was still wanted); full that the disk was full.
func (s *Store) commitBatch(w *wtx, batch []*request) (wrote, full bool) {
	n := 0
	for _, r := range batch {
		if r.state.CompareAndSwap(statePending, stateTaken) {
			batch[n] = r
			n++
		}
	}
	batch = batch[:n]
	s.taken.Add(int64(n))
	if n == 0 {
		return false, false
	}
	w.wake = false
	w.finished = w.finished[:0]
	t0 := time.Now()
	s.stats.batches++
	s.stats.requests += len(batch)
	if err := s.runBatch(w, batch); err != nil {
		// The transaction is gone: nothing of the batch was written.
		w.exec("ROLLBACK")
		w.wake = false
		w.finished = w.finished[:0]
		for _, r := range batch {
			r.err = err
		}
	}
	s.stats.busy += time.Since(t0)
	if w.wake {
		s.hub.Signal()
	}
	if len(w.finished) > 0 {
		s.hub.Finished(w.finished...)
	}
	for _, r := range batch {
		if r.err != nil && isFull(r.err) {
			full = true
		}
		close(r.done)
	}
	return true, full
}

func (s *Store) runBatch(w *wtx, batch []*request) error {
	// BEGIN IMMEDIATE waits busy_timeout for another writer (another Store
	// on the file); beyond that we keep waiting rather than fail callers.
	if _, err := retryBusy(context.Background(), s.logger, func() (int64, error) { return w.exec("BEGIN IMMEDIATE") }); err != nil {
		return err
	}
	for _, r := range batch {
		if _, err := w.exec("SAVEPOINT req"); err != nil {
			return err
		}
		mark := len(w.finished)
		if r.err = r.fn(w); r.err != nil {
			w.finished = w.finished[:mark] // rolled back: nothing ended
			if _, err := w.exec("ROLLBACK TO req"); err != nil {
				return errors.Join(r.err, err)
			}
		}
		if _, err := w.exec("RELEASE req"); err != nil {
			return err
		}
	}
	for attempt := 1; ; attempt++ {
		tc := time.Now()
		_, err := w.exec("COMMIT")
		s.stats.commit += time.Since(tc)
		if err == nil {
			return nil
		}
		if !isBusy(err) {
			return err
		}
		s.logger.Warn("sqlitestore: commit busy, retrying", "attempt", attempt, "err", err)
		time.Sleep(time.Duration(min(attempt, 10)) * 10 * time.Millisecond)
	}
}

// yieldRounds bounds how often the writer yields waiting for callers.
const yieldRounds = 4

// runCheckpointer copies the WAL into the database file (a PASSIVE
// checkpoint: it never blocks the writer or readers) when the writer
// signals that the log has grown (see walWatch) and every second, until the
// store closes. Once the whole log is copied, the writer's next transaction
// starts the log over; walWatch makes sure that happens under load too.
func (s *Store) runCheckpointer(sc *sql.Conn) {
	defer close(s.ckptDone)
	defer sc.Close()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	ctx := context.Background()
	for {
		select {
		case <-s.ckptStop:
			return
		case <-s.ckptSignal:
		case <-tick.C:
		}
		var busy, logFrames, done int
		if err := sc.QueryRowContext(ctx, `PRAGMA wal_checkpoint(PASSIVE)`).Scan(&busy, &logFrames, &done); err != nil {
			s.logger.Warn("sqlitestore: wal checkpoint", "path", s.path, "err", err)
		}
	}
}

// writerTook reports whether the writer has taken n requests in all. Tests
// use it to know a request is in the writer's hands.
func (s *Store) writerTook(n int64) bool { return s.taken.Load() >= n }

// writerStats describes the writer's work; owned by the writer goroutine,
// read by benchmarks after Close.
type writerStats struct {
	batches, requests int
	busy, commit      time.Duration // in transactions; in COMMIT
}
