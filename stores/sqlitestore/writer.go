package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	goruntime "runtime"
	"slices"
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

	// leaseOnly marks a write that only takes or keeps a lease (see
	// writeLease): with SyncFull, a batch of nothing else commits without
	// an fsync of its own.
	leaseOnly bool

	// turn, when set, makes the request a turn at the file (see
	// takeTurn): fn is nil, and the writer, between its transactions,
	// closes turn and waits for back, so that the caller writes in a
	// transaction of its own on another connection without waiting on
	// SQLite's lock.
	turn, back chan struct{}

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
	// finished holds the runs the batch's requests ended, and the
	// announcements of the replies and stream writes they made
	// (storage.UpdateAnnouncement, StreamAnnouncement); after the commit
	// the writer tells the store's Hub (see Finished).
	finished []string
	// lazy is set while the connection is at synchronous=NORMAL for a
	// batch of lease-only writes on a SyncFull store (see writeLease); the
	// next batch that is not sets FULL back before it begins.
	lazy bool
}

// write queues fn for the writer and waits until the transaction holding it
// has committed (or fn failed). If ctx ends before the writer took the
// request, nothing is written and ctx's error is returned; once taken, the
// call waits for the outcome, so an error always means nothing was written.
func (s *Store) write(ctx context.Context, op string, fn func(w *wtx) error) error {
	return s.enqueue(ctx, op, false, fn)
}

// writeLease is write for a request that only takes or keeps leases
// (Claim, Heartbeat). With SyncFull, a batch made of such requests alone
// commits at synchronous=NORMAL: its frames are appended to the WAL without
// an fsync, and the next commit that is fsynced (any other write, or the
// checkpointer's copy, within about a second) makes them durable with it,
// since an fsync of the log covers every frame before it and recovery
// after a power loss keeps a prefix of the commits, never a later one
// without an earlier one. The caller is answered once the commit is
// visible to every connection; only a power loss or an operating-system
// crash before the next fsync can take it back.
//
// Why that keeps every guarantee of SyncFull:
//
//   - Every process that can have seen such a write dies with it. A WAL
//     database is only ever shared by processes on one machine (they
//     coordinate through the shared-memory index, <path>-shm; SQLite does
//     not support WAL over a network file system), and what such a commit
//     survives is exactly what kills them: an application crash keeps it
//     (it is in the operating system's cache), a power loss or an
//     operating-system crash loses it and every process on the machine.
//   - Fencing holds. A lost claim took token T+1; after the machine
//     restarts the run is back as it was before the claim (token T, queued,
//     waiting, or running with its old lease), so the next claim takes
//     T+1 again. Two holders of T+1 never live at once: the first died in
//     the power loss. Nothing durable refers to the lost one either: the
//     first fenced write of its holder that is fsynced (a checkpoint, a
//     suspension, a completion) makes the claim durable with it, as any
//     later commit does, so when the claim is lost so is every write made
//     under it. The same holds for a lost heartbeat: the lease falls back
//     to an earlier expiry, whose holder is dead anyway.
//   - Nothing a user asked for, or was told, depends on it: CreateRuns,
//     Checkpoint, Suspend, Complete, RecordAttempts, events, Pause,
//     Resume, Terminate and Restart use write and stay fsynced before they
//     return, and a batch that holds any of them is fsynced whole. What a
//     power loss can take back is that a run was claimed (it is queued or
//     waiting again, or running under its expired lease, as when a worker
//     dies before its first write) and how far a lease had been extended
//     and which step it named active.
//
// The one count that can come out lower is a run's Recoveries after a
// step that crashes the operating system itself (not its process) before
// any fsync: a process that dies leaves its claim, and its count, durable.
func (s *Store) writeLease(ctx context.Context, op string, fn func(w *wtx) error) error {
	return s.enqueue(ctx, op, true, fn)
}

// enqueue is write and writeLease.
func (s *Store) enqueue(ctx context.Context, op string, leaseOnly bool, fn func(w *wtx) error) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("sqlitestore: %s: %w", op, err)
	}
	if s.opts.ReadOnly && !s.isClosed.Load() {
		return s.refuseReadOnly(op)
	}
	r := &request{fn: fn, leaseOnly: leaseOnly, done: make(chan struct{})}
	if err := s.queueFor(ctx, op, r, r.done); err != nil {
		return err
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
		foreign := s.newForeignWatch(c)
		defer foreign.stop()
		started <- nil
		started = nil
		w := &wtx{conn: c}
		batch := make([]*request, 0, s.opts.MaxBatch)
		var turns []*request // the batch's turns at the file, given after it
		last := 0            // size of the previous batch
		for {
			r, ok := wal.next(c, s.queue, foreign)
			if !ok {
				return nil
			}
			// The callers answered last time are likely to be back with
			// their next write in a moment: give them the CPU briefly, so
			// that they share this commit instead of paying for the next.
			for i := 0; i < yieldRounds && len(s.queue)+1 < last; i++ {
				goruntime.Gosched()
			}
			batch, turns = append(batch[:0], r), turns[:0]
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
			batch = slices.DeleteFunc(batch, func(r *request) bool {
				if r.turn != nil {
					turns = append(turns, r)
				}
				return r.turn != nil
			})
			if len(batch) > 0 {
				wal.beforeBatch(c)
				if wrote, full := s.commitBatch(w, batch); wrote {
					wal.afterBatch(c, full)
				}
			}
			for _, r := range turns {
				s.giveTurn(r)
			}
			foreign.due(c)
			clear(batch)
			clear(turns)
		}
	})
	if started != nil {
		if err == nil {
			err = errors.New("writer stopped")
		}
		started <- err
	}
}

// queueFor queues r for the writer and waits until taken is closed (the
// request done, or its turn given). If ctx ends before the writer took
// it, r is abandoned and ctx's error returned; once taken, it waits.
func (s *Store) queueFor(ctx context.Context, op string, r *request, taken <-chan struct{}) error {
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
	case <-taken:
	case <-ctx.Done():
		if r.state.CompareAndSwap(statePending, stateAbandoned) {
			return fmt.Errorf("sqlitestore: %s: %w", op, ctx.Err())
		}
		<-taken
	}
	return nil
}

// takeTurn waits for the writer to stand aside, between its transactions,
// and runs fn meanwhile: a write in a transaction of fn's own on another
// connection (a transactional step's) then takes SQLite's lock at once,
// instead of retrying against the writer's. The writer goes on when fn
// returns; every other write waits meanwhile, as SQLite's one lock makes
// it wait anyway. If ctx ends before the writer stood aside, fn is not
// run and ctx's error is returned.
func (s *Store) takeTurn(ctx context.Context, op string, fn func()) error {
	r := &request{turn: make(chan struct{}), back: make(chan struct{}), done: make(chan struct{})}
	if err := s.queueFor(ctx, op, r, r.turn); err != nil {
		return err
	}
	defer close(r.back)
	fn()
	return nil
}

// giveTurn stands the writer aside for a turn at the file (takeTurn)
// until its caller is done; a turn its caller gave up is passed over.
func (s *Store) giveTurn(r *request) {
	if !r.state.CompareAndSwap(statePending, stateTaken) {
		return
	}
	close(r.turn)
	<-r.back
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
	err := s.setDurability(w, batch)
	if err == nil {
		err = s.runBatch(w, batch)
	}
	if err != nil {
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

// setDurability puts the writer's connection at the synchronous mode the
// batch commits with: NORMAL for a batch of lease-only writes on a SyncFull
// store (see writeLease), the store's own mode otherwise. Failing to go
// back to FULL fails the batch, so that no write is ever committed less
// durably than it should; failing to leave it only costs an fsync.
func (s *Store) setDurability(w *wtx, batch []*request) error {
	if s.opts.Synchronous != SyncFull {
		return nil
	}
	lazy := true
	for _, r := range batch {
		lazy = lazy && r.leaseOnly
	}
	switch {
	case lazy && !w.lazy:
		if _, err := w.exec("PRAGMA synchronous = NORMAL"); err == nil {
			w.lazy = true
			s.lazy.Add(1)
		}
	case lazy:
		s.lazy.Add(1)
	case w.lazy:
		if _, err := w.exec("PRAGMA synchronous = FULL"); err != nil {
			return err
		}
		w.lazy = false
	}
	return nil
}

func (s *Store) runBatch(w *wtx, batch []*request) error {
	// BEGIN IMMEDIATE waits busy_timeout for another writer (another Store
	// on the file); beyond that we keep waiting rather than fail callers.
	if _, err := retryBusy(context.Background(), s.logger, func() (int64, error) { return w.exec("BEGIN IMMEDIATE") }); err != nil {
		return err
	}
	if len(batch) == 1 {
		// Alone in its transaction, a request needs no savepoint: if it
		// fails, the transaction is rolled back whole, and nothing is left
		// to commit.
		r := batch[0]
		if r.err = r.fn(w); r.err != nil {
			w.finished = w.finished[:0]
			if _, err := w.exec("ROLLBACK"); err != nil {
				return errors.Join(r.err, err)
			}
			return nil
		}
		return s.commit(w)
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
	return s.commit(w)
}

// commit commits the writer's transaction, retrying while another
// connection holds a lock it needs.
func (s *Store) commit(w *wtx) error {
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
