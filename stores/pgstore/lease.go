package pgstore

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stemflow/stem/storage"
)

// Claim leases up to req.Limit ready runs. A claim of queues without
// limits is one statement (see the claim query in queries.go); a claim
// naming a limited queue counts places under the queue's lock (see
// claimLimited).
func (s *Store) Claim(ctx context.Context, req storage.ClaimRequest) ([]storage.ClaimedRun, error) {
	const op = "claim"
	if err := s.check(op); err != nil {
		return nil, err
	}
	if err := req.Validate(); err != nil {
		return nil, fmt.Errorf("pgstore: %w", err)
	}
	if req.Empty() {
		return nil, nil
	}
	queues := req.ClaimQueues()
	for _, q := range queues {
		if q.Limited() {
			runs, err := s.claimLimited(ctx, req, queues)
			if err != nil {
				return nil, s.wrap(op, err)
			}
			return runs, nil
		}
	}
	// The claim and the claimed runs' replays, in one round trip and one
	// transaction: the second statement's snapshot sees every write to the
	// runs committed before the claim locked them, and none can commit
	// since without the lock.
	// A claim of one queue (the default, usually) names it alone, in a
	// statement planned once per connection (see onePair).
	queued := queueNames(queues)
	claim, named := s.q.claim, any(queued)
	if len(queued) == 1 {
		claim, named = s.q.claimOne, queued[0]
	}
	b := &pgx.Batch{}
	names, versions := versionArrays(req.Versions)
	b.Queue(claim, s.clock(), req.Workflows, req.Limit, req.Owner, micros(req.LeaseFor), named, names, versions)
	b.Queue(s.q.loadClaimed, queued)
	br := s.pool.SendBatch(ctx, b)
	defer br.Close()
	runs, err := readClaimed(br, req.Owner)
	if err != nil {
		return nil, s.wrap(op, err)
	}
	if err := br.Close(); err != nil {
		return nil, s.wrap(op, err)
	}
	return runs, nil
}

// versionArrays is a versions filter (storage.ClaimRequest.Versions) as
// the two parameters the claim and NextWake take (see pairs.allowed): the
// workflows with an entry, in name order, and a two-dimensional array
// whose row i lists the versions of the entry of the i-th, padded with
// -1 to the longest entry's length (at least one), so that an entry
// listing none still allows nothing.
func versionArrays(versions map[string][]int) (names []string, rows [][]int32) {
	names = slices.Sorted(maps.Keys(versions))
	width := 1
	for _, vs := range versions {
		width = max(width, len(vs))
	}
	rows = make([][]int32, len(names))
	for i, w := range names {
		row := make([]int32, width)
		for j := range row {
			row[j] = -1
		}
		for j, v := range versions[w] {
			row[j] = int32(v)
		}
		rows[i] = row
	}
	if names == nil {
		names = []string{}
	}
	return names, rows
}

// queueNames are the queues' names.
func queueNames(qs []storage.Queue) []string {
	names := make([]string, len(qs))
	for i, q := range qs {
		names[i] = q.Name
	}
	return names
}

// readClaimed reads the rows of a claim's update (claimUpdate) and of the
// loadClaimed statement after it, and returns the runs in claim order:
// priority, highest first, recoveries first within a priority, then
// oldest ReadyAt or lease expiry.
func readClaimed(br pgx.BatchResults, owner string) ([]storage.ClaimedRun, error) {
	rows, err := br.Query()
	if err != nil {
		return nil, err
	}
	type claimed struct {
		run      storage.ClaimedRun
		since    time.Time
		priority int32
		recovery bool
	}
	var out []claimed
	for rows.Next() {
		var (
			c                        claimed
			waitKey, topic, waitKind *string
			deadline                 *time.Time
			also                     waitCases
			version                  int32
			headers                  *string
			cancel                   *string
		)
		c.run.Lease.Owner = owner
		if err := rows.Scan(&c.run.Lease.RunID, &c.run.Lease.Token, &c.run.Workflow, &c.run.ParentID, &c.run.Input,
			&c.run.Recoveries, &c.run.SuspendState, &waitKey, &topic, &waitKind, &deadline, &also.keys, &also.topics, &also.kinds,
			&c.run.Deadline, &c.run.LeaseUntil, &version, &headers, &cancel, &c.since, &c.priority, &c.recovery); err != nil {
			rows.Close()
			return nil, err
		}
		c.run.Version = int(version)
		c.run.CancelRequested, c.run.CancelReason = cancelOf(cancel)
		if c.run.Headers, err = decodeHeaders(headers); err != nil {
			rows.Close()
			return nil, err
		}
		c.run.Wait = makeWait(waitKey, topic, waitKind, deadline, also)
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	replays := make(map[string]*storage.Replay, len(out))
	for i := range out {
		rp := &storage.Replay{}
		out[i].run.Replay = rp
		replays[out[i].run.Lease.RunID] = rp
	}
	err = eachRow(br, func(rows pgx.Rows) error {
		var (
			id  string
			row storage.Replay
		)
		if err := scanReplayRow(rows, &row, &id); err != nil {
			return err
		}
		rp := replays[id]
		if rp == nil {
			return fmt.Errorf("replay of run %q, which the claim did not take", id)
		}
		rp.Execution = row.Execution
		rp.Checkpoints = append(rp.Checkpoints, row.Checkpoints...)
		rp.Pending = append(rp.Pending, row.Pending...)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, nil
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		switch {
		case a.priority != b.priority:
			return a.priority > b.priority
		case a.recovery != b.recovery:
			return a.recovery
		case !a.since.Equal(b.since):
			return a.since.Before(b.since)
		}
		return a.run.Lease.RunID < b.run.Lease.RunID
	})
	runs := make([]storage.ClaimedRun, len(out))
	for i := range out {
		runs[i] = out[i].run
	}
	return runs, nil
}

// NextWake reads how long until the earliest ready time or lease expiry
// of the named workflows and queues, of the versions req.Versions allows,
// on the database's clock.
func (s *Store) NextWake(ctx context.Context, req storage.NextWakeRequest) (storage.NextWake, error) {
	const op = "next wake"
	if err := s.check(op); err != nil {
		return storage.NextWake{}, err
	}
	if err := req.Validate(); err != nil {
		return storage.NextWake{}, fmt.Errorf("pgstore: %w", err)
	}
	if len(req.Workflows) == 0 {
		return storage.NextWake{}, nil
	}
	var us *int64
	next, queues := s.q.nextWake, any(req.QueueNames())
	if named := req.QueueNames(); len(named) == 1 {
		next, queues = s.q.nextWakeOne, named[0]
	}
	names, versions := versionArrays(req.Versions)
	if err := s.pool.QueryRow(ctx, next, s.clock(), req.Workflows, queues, names, versions).Scan(&us); err != nil {
		return storage.NextWake{}, s.wrap(op, err)
	}
	if us == nil {
		return storage.NextWake{}, nil
	}
	return storage.NextWake{Found: true, After: max(0, time.Duration(*us)*time.Microsecond)}, nil
}

// Heartbeat extends the lease, fenced, records the active step when the
// request names one, publishes the progress it carries, and reports a
// requested pause and a requested cancellation, in one statement. A lost lease says why, judged by a
// second statement.
func (s *Store) Heartbeat(ctx context.Context, req storage.HeartbeatRequest) (storage.HeartbeatResult, error) {
	const op = "heartbeat"
	if err := s.check(op); err != nil {
		return storage.HeartbeatResult{}, err
	}
	if err := req.Validate(); err != nil {
		return storage.HeartbeatResult{}, fmt.Errorf("pgstore: %w", err)
	}
	lease := req.Lease
	var (
		key     *string
		attempt int32
		started time.Time
	)
	if a := req.Step; a != nil {
		key, attempt, started = &a.Key, int32(a.Attempt), a.Started
	}
	var res storage.HeartbeatResult
	err := s.pool.QueryRow(ctx, s.q.heartbeat, s.clock(), lease.RunID, lease.Token, micros(req.LeaseFor), key, attempt, started,
		req.Progress).Scan(&res.PauseRequested, &res.CancelRequested)
	if errors.Is(err, pgx.ErrNoRows) {
		return res, s.lost(ctx, op, lease)
	}
	if err != nil {
		return res, s.wrap(op, err)
	}
	return res, nil
}

// lost is the error of a fenced write op whose lease l does not hold, with
// the reason judged from the run as it is now.
func (s *Store) lost(ctx context.Context, op string, l storage.Lease) error {
	var (
		status string
		token  int64
		until  *time.Time
		now    time.Time
	)
	err := s.pool.QueryRow(ctx, `SELECT status, token, lease_until, coalesce($1::timestamptz, now()) FROM `+s.schema+`.runs WHERE id = $2`,
		s.clock(), l.RunID).Scan(&status, &token, &until, &now)
	found := err == nil
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return s.wrap(op, err)
	}
	var lu time.Time
	if until != nil {
		lu = *until
	}
	return fmt.Errorf("pgstore: %s: %w", op, storage.LeaseLost(op, l, found, storage.RunStatus(status), token, lu, now))
}

// leaseLost reports a fenced write refused because the lease no longer
// holds.
func leaseLost(op string, l storage.Lease) error {
	return fmt.Errorf("pgstore: %s run %q token %d: %w", op, l.RunID, l.Token, storage.ErrLeaseLost)
}

// fenced locks the leased run in tx and checks the lease still holds. A
// lost lease says why; the locked run is returned with it (the zero value
// for an unknown run).
func (s *Store) fenced(ctx context.Context, tx pgx.Tx, op string, l storage.Lease) (locked, error) {
	r, ok, err := s.lock(ctx, tx, l.RunID)
	if err != nil {
		return locked{}, err
	}
	if !ok || r.Status != storage.StatusRunning || r.Token != l.Token {
		return r, storage.LeaseLost(op, l, ok, r.Status, r.Token, r.LeaseUntil, r.now)
	}
	return r, nil
}

// letGo applies a release by the holder of a lease that a Restart revoked
// while it was live, for run r locked in tx: the new execution becomes
// ready now and the old lease ends. It reports whether the run became
// queued.
func (s *Store) letGo(ctx context.Context, tx pgx.Tx, r locked) (ready bool, err error) {
	var status string
	err = tx.QueryRow(ctx, `UPDATE `+s.schema+`.runs SET ready_at = $1, lease_until = least(lease_until, $1),
			status = CASE WHEN status = 'waiting' THEN 'queued' ELSE status END, updated_at = $1
		WHERE id = $2 RETURNING status`, r.now, r.ID).Scan(&status)
	if err != nil {
		return false, err
	}
	if status == string(storage.StatusQueued) {
		return true, s.notifyTx(ctx, tx)
	}
	return false, nil
}

// Suspend parks a running run, fenced, in one transaction that first locks
// the run. A refusal is applied first: the refused event checkpoint of the
// current execution is deleted and its attempt recorded.
func (s *Store) Suspend(ctx context.Context, req storage.SuspendRequest) (storage.SuspendResult, error) {
	const op = "suspend"
	if err := s.check(op); err != nil {
		return storage.SuspendResult{}, err
	}
	if err := req.Validate(); err != nil {
		return storage.SuspendResult{}, fmt.Errorf("pgstore: %w", err)
	}
	hold, err := encodeHold(req.Hold)
	if err != nil {
		return storage.SuspendResult{}, fmt.Errorf("pgstore: %s: %w", op, err)
	}
	var cpErr []byte
	if req.Checkpoint != nil {
		var err error
		if cpErr, err = encodeError(req.Checkpoint.Error); err != nil {
			return storage.SuspendResult{}, s.wrap(op, err)
		}
	}
	if req.Checkpoint != nil && req.Wait == nil && req.Refuse == nil {
		// A sleep: one statement, in the checkpoint writers' next batch.
		// A fence that fails is judged again below, to say why.
		call := &ckptCall{park: &parkCall{req: req, errJSON: textOf(cpErr)}, done: make(chan struct{})}
		_, err := s.submit(ctx, call)
		if err == nil {
			if call.park.ready {
				s.poke()
			}
			return call.park.res, nil
		}
		if !errors.Is(err, storage.ErrLeaseLost) {
			return storage.SuspendResult{}, err
		}
	}
	var (
		res   storage.SuspendResult
		ready bool
	)
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		res, ready = storage.SuspendResult{}, false
		r, err := s.fenced(ctx, tx, op, req.Lease)
		var lost *storage.LeaseLostError
		if errors.As(err, &lost) && lost.Loss == storage.LossRestarted && req.Releases(r.now) {
			// The holder of a lease a restart revoked lets go.
			ready, err = s.letGo(ctx, tx, r)
			return err
		}
		if err != nil {
			return err
		}
		if f := req.Refuse; f != nil {
			if err := s.refuse(ctx, tx, r, f); err != nil {
				return err
			}
		}
		wrote := false
		if cp := req.Checkpoint; cp != nil {
			tag, err := tx.Exec(ctx, s.q.insertCkpt, r.now, r.ID, cp.Key, string(cp.Kind), cp.Output, cpErr, r.Execution, cp.Input)
			if err != nil {
				return err
			}
			wrote = tag.RowsAffected() == 1
		}
		if w := req.Wait; w != nil {
			delivered, err := s.deliverNow(ctx, tx, r, w, req.LeaseFor, wrote, false, req.Progress)
			if err != nil || delivered != nil {
				res.Delivered = delivered
				return err
			}
		}
		readyAt := parkReadyAt(req, r.CancelRequested, r.now)
		status := storage.StatusWaiting
		switch {
		case r.PauseRequested:
			status = storage.StatusPaused
			res.Paused = true
		case readyAt != nil && !readyAt.After(r.now):
			status = storage.StatusQueued
			ready = true
		}
		wait := r.Wait // kept unless the request registers a new one
		if req.Wait != nil {
			wait = req.Wait
		}
		var key, topic, kind *string
		var deadline *time.Time
		if wait != nil {
			k, t, kd := wait.Key, wait.Topic, string(wait.Kind)
			key, topic, kind, deadline = &k, &t, &kd, wait.Deadline
		}
		also := alsoOf(wait)
		tag, err := tx.Exec(ctx, s.q.park, r.now, r.ID, r.Token, string(status), readyAt,
			key, topic, kind, deadline, req.SuspendState, wrote, also.keys, also.topics, also.kinds, req.Progress, hold)
		if err != nil {
			return err
		}
		if tag.RowsAffected() != 1 {
			return leaseLost(op, req.Lease)
		}
		if ready {
			return s.notifyTx(ctx, tx)
		}
		return nil
	})
	if err != nil {
		return storage.SuspendResult{}, s.wrap(op, err)
	}
	if ready {
		s.poke()
	}
	return res, nil
}

// parkReadyAt is when a run parked by req at now is ready: req.ReadyAt,
// or now when its cancellation is requested (cancelRequested) and its
// worker has yet to see it, so that a worker takes it again at once. A
// hold is kept as asked. The parks of a batch (parkMany) judge the same
// in SQL.
func parkReadyAt(req storage.SuspendRequest, cancelRequested bool, now time.Time) *time.Time {
	if cancelRequested && !req.CancelSeen && req.Hold == nil && (req.ReadyAt == nil || req.ReadyAt.After(now)) {
		return &now
	}
	return req.ReadyAt
}

// refuse takes back the event checkpoint f names from the run locked in tx
// and records the attempt that says why.
func (s *Store) refuse(ctx context.Context, tx pgx.Tx, r locked, f *storage.Refusal) error {
	tag, err := tx.Exec(ctx, s.q.refuseCkpt, r.ID, r.Execution, f.Key)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("run %q: refuse %q: no event checkpoint of the key in execution %d: %w",
			r.ID, f.Key, r.Execution, storage.ErrInvalidState)
	}
	a := f.Attempt
	_, err = tx.Exec(ctx, s.q.insertAttempt, r.ID, r.Execution, a.Key, int32(a.Number), a.Started, a.Ended, a.Error, a.RetryAt)
	return err
}

// TakeEvent resolves a wait without parking, fenced, as Suspend's
// delivery does, in one transaction that first locks the run; see
// storage.Store. The step still running stays the run's active one.
func (s *Store) TakeEvent(ctx context.Context, req storage.TakeEventRequest) (*storage.Checkpoint, error) {
	const op = "take event"
	if err := s.check(op); err != nil {
		return nil, err
	}
	if err := req.Validate(); err != nil {
		return nil, fmt.Errorf("pgstore: %w", err)
	}
	var cp *storage.Checkpoint
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		r, err := s.fenced(ctx, tx, op, req.Lease)
		if err != nil {
			return err
		}
		cp, err = s.deliverNow(ctx, tx, r, req.Wait, req.LeaseFor, false, true, nil)
		return err
	})
	if err != nil {
		return nil, s.wrap(op, err)
	}
	return cp, nil
}

// deliverNow resolves the wait w of run r, locked in tx, at once if it
// can (see satisfy): then, and only then, it extends the lease by
// leaseFor (when positive), resets recoveries when anything was written
// (wrote, or the event), publishes progress and clears the active step
// unless keepActive, and returns the checkpoint; otherwise nil, having
// changed nothing.
func (s *Store) deliverNow(ctx context.Context, tx pgx.Tx, r locked, w *storage.Wait, leaseFor time.Duration,
	wrote, keepActive bool, progress []byte) (*storage.Checkpoint, error) {
	delivered, consumed, err := s.satisfy(ctx, tx, r, w)
	if err != nil || delivered == nil {
		return nil, err
	}
	var lf any
	if leaseFor > 0 {
		lf = micros(leaseFor)
	}
	if _, err := tx.Exec(ctx, s.q.extendLease, r.now, r.ID, r.Token, lf, wrote || consumed, progress, keepActive); err != nil {
		return nil, err
	}
	return delivered, nil
}

// satisfy looks for what resolves wait at once, for the run locked in tx:
// a checkpoint already stored for the key of one of its cases (the first
// such case), or else the oldest event buffered on the topic of any case,
// which it consumes and writes as that case's checkpoint (consumed).
func (s *Store) satisfy(ctx context.Context, tx pgx.Tx, r locked, w *storage.Wait) (cp *storage.Checkpoint, consumed bool, err error) {
	cases := w.Cases()
	keys := make([]string, len(cases))
	for i, c := range cases {
		keys[i] = c.Key
	}
	existing, err := scanCheckpoint(tx.QueryRow(ctx, s.q.caseCkpt, r.ID, r.Execution, keys))
	if err == nil {
		return &existing, false, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return nil, false, err
	}
	var (
		topic   string
		payload []byte
	)
	err = tx.QueryRow(ctx, s.q.takeEvent, r.ID, w.Topics()).Scan(&topic, &payload)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	c, ok := w.Case(topic)
	if !ok {
		return nil, false, fmt.Errorf("run %q: took an event of topic %q, on which the wait has no case", r.ID, topic)
	}
	if _, err := tx.Exec(ctx, s.q.insertCkpt, r.now, r.ID, c.Key, string(c.DeliveryKind()), payload, nil, r.Execution, nil); err != nil {
		return nil, false, err
	}
	written, err := scanCheckpoint(tx.QueryRow(ctx, s.q.getCheckpoint, r.ID, r.Execution, c.Key))
	if err != nil {
		return nil, false, err
	}
	return &written, true, nil
}

// Complete finishes a run and its execution, fenced, and delivers
// req.Notify and, with req.ChildError, terminates its descendants and
// requests the cancellation of the children cancelled with their parent
// (as Terminate does) in the same transaction. A completion without Notify
// goes through the checkpoint writers' batches instead.
func (s *Store) Complete(ctx context.Context, req storage.CompleteRequest) error {
	const op = "complete"
	if err := s.check(op); err != nil {
		return err
	}
	if err := req.Validate(); err != nil {
		return fmt.Errorf("pgstore: %w", err)
	}
	errJSON, err := encodeError(req.Error)
	if err != nil {
		return s.wrap(op, err)
	}
	childJSON, err := encodeError(req.ChildError)
	if err != nil {
		return s.wrap(op, err)
	}
	if req.Notify == nil {
		// The fence is checked by the statement that writes, which the
		// checkpoint writers run in the transaction of their next batch,
		// followed there by the cascade to the descendants.
		call := &ckptCall{fin: &finCall{req: req, errJSON: textOf(errJSON), childJSON: textOf(childJSON)}, done: make(chan struct{})}
		_, err := s.submit(ctx, call)
		if err == nil && call.fin.woke {
			s.poke()
		}
		return err
	}
	ready := false
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		ready, err = s.completeTx(ctx, tx, op, req, errJSON, childJSON)
		return err
	})
	if err != nil {
		return s.wrap(op, err)
	}
	if ready {
		s.poke()
	}
	return nil
}

// completeTx is Complete's transaction, in tx: it finishes the run and
// its execution, fenced, terminates its descendants with childJSON (the
// encoded req.ChildError), and delivers req.Notify. It reports whether a
// run became ready to claim (the ready notification is queued in tx).
func (s *Store) completeTx(ctx context.Context, tx pgx.Tx, op string, req storage.CompleteRequest, errJSON, childJSON []byte) (ready bool, err error) {
	r, err := s.fenced(ctx, tx, op, req.Lease)
	if err != nil {
		return false, err
	}
	var n int
	if err := tx.QueryRow(ctx, s.q.complete, s.completeArgs(r.now, r.ID, r.Token, string(req.Status), req.Output, errJSON, req.Progress)...).Scan(&n); err != nil {
		return false, err
	}
	if n != 1 {
		return false, leaseLost(op, req.Lease)
	}
	woke, err := s.closeChildren(ctx, tx, r.now, r.ID, childJSON, req.ChildCancel)
	if err != nil {
		return false, err
	}
	if req.Notify != nil {
		if ready, err = s.deliverNotify(ctx, tx, *req.Notify, r.now); err != nil {
			return false, err
		}
	}
	if woke && !ready {
		return true, s.notifyTx(ctx, tx)
	}
	return ready, nil
}
