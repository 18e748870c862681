package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stemflow/stem/storage"
)

// Creates that carry a start policy (NewRun.OnExisting, OnEnded), an event
// (signal-with-start) or a start key cannot ride the checkpoint writers'
// batches, whose one INSERT ... ON CONFLICT DO NOTHING only tells created
// from existing. They run in a transaction of their own (or of the
// application's: CreateRunsTx), one run after another in call order, each
// judged under locks that make concurrent creates of one ID or one key
// take turns:
//
//   - a start key: a transaction-level advisory lock of the key (keyLock),
//     taken before its record is read, so that one create at a time finds
//     the key held or free and records the run it creates;
//   - an ID with a run: the run's row, locked (FOR UPDATE) before its
//     status is judged whenever the create may write to it (replace it,
//     deliver its event); a create that can only return or refuse what it
//     finds reads it without a lock;
//   - an ID without a run: INSERT ... ON CONFLICT DO NOTHING, which waits
//     for a concurrent insert of the ID to commit; a create that loses
//     that race reads the winner's run and judges it as if it had found it
//     first.
//
// A replacement updates the replaced run's row in place (see resetRun)
// after deleting what the run and its descendants own, so that the row
// lock is held from the judgement to the commit and a concurrent create
// waiting for it finds the new run.

// maxCreateTries bounds how often a create finds no run under its ID and
// then loses the insert to a concurrent create: each loss means another
// create committed the ID, which the next read finds, unless the
// transaction's snapshot cannot see it (an application's transaction at
// REPEATABLE READ or SERIALIZABLE, where Postgres reports a serialization
// failure first).
const maxCreateTries = 5

// carriesPolicy reports whether a create needs the transactional path: a
// run with a start policy, an event or a start key.
func carriesPolicy(runs []storage.NewRun) bool {
	for _, r := range runs {
		if r.OnExisting != storage.ExistingReturn || r.OnEnded != storage.EndedReturn || r.Event != nil || r.Key != nil {
			return true
		}
	}
	return false
}

// createIn creates runs in tx, as CreateRuns does: with the creation
// statement when none carries a policy, an event or a key, and otherwise
// one run after another (createOne), in call order. ready reports that a
// run became ready to claim (the notification is queued in tx).
func (s *Store) createIn(ctx context.Context, tx pgx.Tx, runs []storage.NewRun) (out []storage.CreateResult, ready bool, err error) {
	var now time.Time
	if err := tx.QueryRow(ctx, s.q.txNow, s.clock()).Scan(&now); err != nil {
		return nil, false, err
	}
	if !carriesPolicy(runs) {
		return s.createPlain(ctx, tx, now, runs)
	}
	out = make([]storage.CreateResult, len(runs))
	for i, r := range runs {
		res, woke, err := s.createOne(ctx, tx, now, r)
		if err != nil {
			return nil, false, err
		}
		out[i], ready = res, ready || woke
	}
	return out, ready, nil
}

// createPlain creates runs without policies in tx with the checkpoint
// writers' creation statement and read, at now.
func (s *Store) createPlain(ctx context.Context, tx pgx.Tx, now time.Time, runs []storage.NewRun) ([]storage.CreateResult, bool, error) {
	call := &createCall{runs: runs}
	createSQL, createArgs := s.createArgs([]*ckptCall{{create: call}})
	createArgs[0] = now
	b := &pgx.Batch{}
	b.Queue(createSQL, createArgs...)
	b.Queue(s.q.selectRuns, createArgs[1])
	br := tx.SendBatch(ctx, b)
	created := make(map[string]bool)
	records := make(map[string]storage.RunRecord)
	if err := s.readCreated(br, created, records); err != nil {
		br.Close()
		return nil, false, err
	}
	if err := br.Close(); err != nil {
		return nil, false, err
	}
	if err := call.results(created, records); err != nil {
		return nil, false, err
	}
	return call.out, createdReady(call.out), nil
}

// createOne applies one create with its policies in tx at now (the spec's
// order: the key, the ID, a replacement, the event). ready reports that
// a run became ready to claim: created so, or woken by the event.
func (s *Store) createOne(ctx context.Context, tx pgx.Tx, now time.Time, r storage.NewRun) (res storage.CreateResult, ready bool, err error) {
	if r.Key != nil {
		res, ready, joined, err := s.joinKey(ctx, tx, now, r)
		if err != nil || joined {
			return res, ready, err
		}
	}
	// Lock the run when the create may write to it: replace it or deliver
	// its event.
	lock := r.Event != nil || r.OnExisting == storage.ExistingReplace ||
		r.OnEnded == storage.EndedReuse || r.OnEnded == storage.EndedReuseFailed
	for range maxCreateTries {
		x, found, err := s.readAt(ctx, tx, now, r.ID, lock)
		if err != nil {
			return storage.CreateResult{}, false, err
		}
		if found {
			return s.createOver(ctx, tx, now, r, x)
		}
		rec, inserted, err := s.insertRun(ctx, tx, now, r)
		if err != nil {
			return storage.CreateResult{}, false, err
		}
		if inserted {
			res := storage.CreateResult{Created: true, Run: rec}
			if err := s.afterCreate(ctx, tx, now, r); err != nil {
				return storage.CreateResult{}, false, err
			}
			return res, rec.Status == storage.StatusQueued, nil
		}
		// A concurrent create of the ID committed first: judge its run.
	}
	return storage.CreateResult{}, false, fmt.Errorf("run %q: created by another transaction %d times over and not visible to this one: %w",
		r.ID, maxCreateTries, storage.ErrConflict)
}

// createOver applies create r's policies to x, the run its ID names (locked
// when r may write to it): returns it, refuses the create, replaces it,
// and delivers r's event.
func (s *Store) createOver(ctx context.Context, tx pgx.Tx, now time.Time, r storage.NewRun, x locked) (storage.CreateResult, bool, error) {
	refuse := func(why storage.StartRefusal) (storage.CreateResult, bool, error) {
		return storage.CreateResult{Refused: why, Run: x.RunRecord}, false, nil
	}
	if !x.Status.Finished() {
		switch r.OnExisting {
		case storage.ExistingFail:
			return refuse(storage.RefusedExists)
		case storage.ExistingReplace:
			return s.replace(ctx, tx, now, r, x)
		}
		return s.deliver(ctx, tx, r, x, storage.CreateResult{Run: x.RunRecord})
	}
	switch r.OnEnded {
	case storage.EndedReject:
		return refuse(storage.RefusedEnded)
	case storage.EndedReuse:
		return s.replace(ctx, tx, now, r, x)
	case storage.EndedReuseFailed:
		if x.Status == storage.StatusComplete {
			return refuse(storage.RefusedEnded)
		}
		return s.replace(ctx, tx, now, r, x)
	}
	if r.Event != nil {
		// An ended run returned takes no event.
		return refuse(storage.RefusedEnded)
	}
	return storage.CreateResult{Run: x.RunRecord}, false, nil
}

// deliver delivers r's event, if any, to the unfinished run x locked in
// tx, as SendEvent does, and completes res: the record as the delivery
// left it, and whether the event resolved a wait. ready reports that x
// became ready to claim.
func (s *Store) deliver(ctx context.Context, tx pgx.Tx, r storage.NewRun, x locked, res storage.CreateResult) (storage.CreateResult, bool, error) {
	if r.Event == nil {
		return res, false, nil
	}
	ev := *r.Event
	ev.RunID = x.ID
	delivered, ready, err := s.send(ctx, tx, x, ev)
	if err != nil {
		return storage.CreateResult{}, false, err
	}
	res.Delivered = delivered
	if delivered {
		if res.Run, err = scanRun(tx.QueryRow(ctx, s.q.getRun, x.ID)); err != nil {
			return storage.CreateResult{}, false, err
		}
	}
	return res, ready, nil
}

// afterCreate finishes a create that made run r: the run holds r's key,
// and r's event is buffered for it.
func (s *Store) afterCreate(ctx context.Context, tx pgx.Tx, now time.Time, r storage.NewRun) error {
	if k := r.Key; k != nil {
		if _, err := tx.Exec(ctx, s.q.putKey, r.Workflow, k.Key, r.ID); err != nil {
			return err
		}
	}
	if ev := r.Event; ev != nil {
		if _, err := tx.Exec(ctx, s.q.bufferEvent, now, r.ID, ev.Topic, ev.Payload); err != nil {
			return err
		}
	}
	return nil
}

// readAt reads the run id in tx, locking it when lock is set, with now as
// its time (a time, or the store clock's argument, which the statement
// reads as the server's time when nil); found is false when no run has
// the ID.
func (s *Store) readAt(ctx context.Context, tx pgx.Tx, now any, id string, lock bool) (r locked, found bool, err error) {
	sql := s.q.readRun
	if lock {
		sql = s.q.lockRun
	}
	rec, err := scanRun(tx.QueryRow(ctx, sql, now, id), &r.now)
	if errors.Is(err, pgx.ErrNoRows) {
		return locked{}, false, nil
	}
	if err != nil {
		return locked{}, false, err
	}
	r.RunRecord = rec
	return r, true, nil
}

// insertRun inserts run r with the creation statement, unless its ID is
// taken (inserted false): a debounced run ready Debounce after now.
func (s *Store) insertRun(ctx context.Context, tx pgx.Tx, now time.Time, r storage.NewRun) (rec storage.RunRecord, inserted bool, err error) {
	if k := r.Key; k != nil && k.Debounce > 0 {
		at := now.Add(k.Debounce)
		r.StartAt = &at
	}
	createSQL, args := s.createArgs([]*ckptCall{{create: &createCall{runs: []storage.NewRun{r}}}})
	args[0] = now
	var id string
	err = tx.QueryRow(ctx, createSQL, args...).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return storage.RunRecord{}, false, nil
	}
	if err != nil {
		return storage.RunRecord{}, false, err
	}
	rec, err = scanRun(tx.QueryRow(ctx, s.q.getRun, r.ID))
	return rec, err == nil, err
}

// keyLock is the name whose hash is the advisory lock of a start key of
// the store's schema: lengths keep distinct (workflow, key) pairs distinct
// names.
func (s *Store) keyLock(workflow, key string) string {
	return "stem.pgstore.key:" + s.schemaName + ":" + strconv.Itoa(len(workflow)) + ":" + workflow + ":" + key
}

// joinKey takes the lock of r's start key and joins its holder when the
// key is held: a singleton's holder that has not ended, or a debounce
// window's run not yet claimed (queued, ready after now), whose input,
// headers and search attributes become r's unless the key keeps the
// first. r's event goes to the holder. joined is false, with nothing
// written, when the key is free; the lock is kept until tx ends, so that
// the create that follows records its run as the key's holder before any
// other create of the key reads it.
func (s *Store) joinKey(ctx context.Context, tx pgx.Tx, now time.Time, r storage.NewRun) (res storage.CreateResult, ready, joined bool, err error) {
	k := r.Key
	if _, err := tx.Exec(ctx, s.q.lockKey, s.keyLock(r.Workflow, k.Key)); err != nil {
		return res, false, false, err
	}
	var holder string
	err = tx.QueryRow(ctx, s.q.getKey, r.Workflow, k.Key).Scan(&holder)
	if errors.Is(err, pgx.ErrNoRows) {
		return res, false, false, nil
	}
	if err != nil {
		return res, false, false, err
	}
	update := k.Debounce > 0 && !k.KeepFirst
	h, found, err := s.readAt(ctx, tx, now, holder, update || r.Event != nil)
	if err != nil || !found {
		// A record whose run is gone holds nothing.
		return res, false, false, err
	}
	if k.Debounce == 0 && h.Status.Finished() ||
		k.Debounce > 0 && (h.Status != storage.StatusQueued || h.ReadyAt == nil || !h.ReadyAt.After(now)) {
		return res, false, false, nil
	}
	res = storage.CreateResult{Joined: true, Run: h.RunRecord}
	if update {
		b := &pgx.Batch{}
		b.Queue(s.q.joinInput, now, h.ID, r.Input, encodeHeaders(r.Headers), encodeAttrs(r.Attributes))
		b.Queue(s.q.deleteAttrs, h.ID)
		if len(r.Attributes) > 0 {
			var rows attrRows
			rows.add(h.ID, r.Attributes)
			b.Queue(s.q.insertAttrs, rows.args()...)
		}
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return res, false, false, err
		}
		if res.Run, err = scanRun(tx.QueryRow(ctx, s.q.getRun, h.ID)); err != nil {
			return res, false, false, err
		}
	}
	res, ready, err = s.deliver(ctx, tx, r, h, res)
	return res, ready, true, err
}

// replace replaces the run x, locked in tx, with run r, in tx: refused
// (RefusedFamily, nothing written) when an unfinished descendant does not
// end with x; otherwise x and its unfinished descendants end as Terminate
// ends them, and x, its descendants and all they own (search attributes
// included) are deleted, as Purge deletes a run, and r is created in x's
// place, with r's attributes.
//
// The termination is not written before the deletion removes it: what
// remains of it after the commit is what Terminate's leaves of runs
// deleted then, its announcements on the ended channel, and the end of
// every lease of x (the new run keeps x's fencing token, see resetRun)
// and of its descendants (their rows are gone, and a run created later
// under one of their IDs goes on from its token, see dropFamily).
// Terminate's cascade
// requests the cancellation of unfinished children cancelled with their
// parent, and leaves abandoned ones alone; the family check refuses the
// replacement of a run that has any, so every unfinished descendant is
// one Terminate would terminate.
func (s *Store) replace(ctx context.Context, tx pgx.Tx, now time.Time, r storage.NewRun, x locked) (storage.CreateResult, bool, error) {
	rows, err := tx.Query(ctx, s.q.family, x.ID)
	if err != nil {
		return storage.CreateResult{}, false, err
	}
	var (
		descendants []string
		ended       []string
		blocked     bool
	)
	if !x.Status.Finished() {
		ended = append(ended, x.ID)
	}
	err = forRows(rows, func() error {
		var id, status, policy string
		if err := rows.Scan(&id, &status, &policy); err != nil {
			return err
		}
		descendants = append(descendants, id)
		if !storage.RunStatus(status).Finished() {
			ended = append(ended, id)
			blocked = blocked || storage.ParentPolicy(policy) != storage.ParentTerminate
		}
		return nil
	})
	if err != nil {
		return storage.CreateResult{}, false, err
	}
	if blocked {
		return storage.CreateResult{Refused: storage.RefusedFamily, Run: x.RunRecord}, false, nil
	}
	if k := r.Key; k != nil && k.Debounce > 0 {
		at := now.Add(k.Debounce)
		r.StartAt = &at
	}
	var (
		owner  *string
		lease  int64
		rated  = []string{}
		family = append([]string{x.ID}, descendants...)
	)
	if l := r.Lease; l != nil {
		owner, lease = &l.Owner, micros(l.For)
		if _, ok := s.rated.Load(r.QueueOf()); ok {
			rated = append(rated, r.QueueOf())
		}
	}
	args := []any{now, x.ID, r.Workflow, string(r.ParentPolicy), r.Input, r.StartAt, r.Deadline, r.QueueOf(), r.Partition,
		int32(r.Priority), int32(r.Version), encodeHeaders(r.Headers), owner, lease, rated, encodeAttrs(r.Attributes)}
	if s.notify {
		args = append(args, s.channel)
	}
	b := &pgx.Batch{}
	b.Queue(s.q.dropFamily, family, descendants)
	b.Queue(s.q.resetRun, args...)
	if len(r.Attributes) > 0 {
		var rows attrRows
		rows.add(x.ID, r.Attributes)
		b.Queue(s.q.insertAttrs, rows.args()...)
	}
	if s.notify && len(ended) > 0 {
		b.Queue(s.q.notifyFinished, s.endedChannel, ended)
	}
	br := tx.SendBatch(ctx, b)
	defer br.Close()
	if _, err := br.Exec(); err != nil {
		return storage.CreateResult{}, false, err
	}
	rec, err := scanRun(br.QueryRow())
	if err != nil {
		return storage.CreateResult{}, false, err
	}
	if len(r.Attributes) > 0 {
		if _, err := br.Exec(); err != nil {
			return storage.CreateResult{}, false, err
		}
	}
	if err := br.Close(); err != nil {
		return storage.CreateResult{}, false, err
	}
	if err := s.afterCreate(ctx, tx, now, r); err != nil {
		return storage.CreateResult{}, false, err
	}
	res := storage.CreateResult{Created: true, Replaced: true, ReplacedStatus: x.Status, Run: rec}
	return res, rec.Status == storage.StatusQueued, nil
}
