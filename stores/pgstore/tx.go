package pgstore

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stemflow/stem/storage"
)

var _ storage.TxStore = (*Store)(nil)

// The transactional store: the application's transaction is a pgx.Tx on
// the store's database, from any pool or connection (every statement
// names the store's schema). CreateRunsTx, SendEventTx and EmitTx send on
// it the statements their pool methods send in a transaction of their
// own, with the ready and ended notifications queued in it, which
// Postgres delivers when it commits and drops when it rolls back: engines
// in every process, this one included (through the store's LISTEN
// connection), learn of the writes after the commit, never before, and
// nothing here wakes them sooner. Each call's statements are bounded by
// Options.CallTimeout from the call's start, as the store's own are; the
// transaction as a whole is the application's to bound.
//
// Locks these calls take are held until the application's transaction
// ends: a run an event is delivered to, or that a create replaces, stays
// locked meanwhile, and its lease holder's fenced writes wait for it, as
// they would for any transaction of the application's that locked the
// run.
//
// CheckpointTx begins its own transaction on a pooled connection, lets the
// step write in it, and sends the checkpoint writers' statement on it
// after the step returns (see CheckpointTx).

// TxType is pgx.Tx: the transactions the Tx methods take and transactional
// steps are handed.
func (s *Store) TxType() reflect.Type { return reflect.TypeFor[pgx.Tx]() }

// appTx is a transaction BeginTx began, as storage.AppTx.
type appTx struct{ tx pgx.Tx }

// Tx returns the pgx.Tx.
func (a appTx) Tx() any { return a.tx }

// Commit commits the transaction.
func (a appTx) Commit(ctx context.Context) error {
	if err := a.tx.Commit(ctx); err != nil {
		return fmt.Errorf("pgstore: commit: %w", err)
	}
	return nil
}

// Rollback rolls the transaction back; after Commit, or a Rollback, it
// does nothing.
func (a appTx) Rollback(ctx context.Context) error {
	if err := a.tx.Rollback(ctx); err != nil && !errors.Is(err, pgx.ErrTxClosed) {
		return fmt.Errorf("pgstore: roll back: %w", err)
	}
	return nil
}

// BeginTx begins a transaction on a connection of the store's pool, at
// the database's default isolation level, for the application's writes and
// the Tx methods; it is not bounded by Options.CallTimeout.
func (s *Store) BeginTx(ctx context.Context) (storage.AppTx, error) {
	const op = "begin transaction"
	if err := s.check(op); err != nil {
		return nil, err
	}
	tx, err := s.pool.Pool.Begin(ctx)
	if err != nil {
		return nil, s.wrap(op, err)
	}
	return appTx{tx}, nil
}

// onTx is the application's transaction tx, which must be a pgx.Tx, with
// every statement bounded by Options.CallTimeout from now (it is never
// committed or rolled back through the result).
func (s *Store) onTx(op string, tx any) (pgx.Tx, error) {
	t, ok := tx.(pgx.Tx)
	if !ok || t == nil {
		return nil, fmt.Errorf("pgstore: %s: %w: the transaction is a %T, want a %v", op, storage.ErrInvalidArgument, tx, s.TxType())
	}
	return &boundTx{Tx: t, p: s.pool, deadline: time.Now().Add(s.pool.timeout)}, nil
}

// CreateRunsTx is CreateRuns in the application's transaction tx: the
// creation statement, or each run with its policies, event and key (see
// start.go), sent on tx. A run created leased is refused.
func (s *Store) CreateRunsTx(ctx context.Context, tx any, runs []storage.NewRun) ([]storage.CreateResult, error) {
	const op = "create runs"
	if err := s.check(op); err != nil {
		return nil, err
	}
	if err := storage.ValidateNewRuns(runs); err != nil {
		return nil, fmt.Errorf("pgstore: %w", err)
	}
	for _, r := range runs {
		if r.Lease != nil {
			return nil, fmt.Errorf("pgstore: %s: %w: run %q is leased at creation in a transaction, which may never commit",
				op, storage.ErrInvalidArgument, r.ID)
		}
	}
	t, err := s.onTx(op, tx)
	if err != nil {
		return nil, err
	}
	if len(runs) == 0 {
		return []storage.CreateResult{}, nil
	}
	out, _, err := s.createIn(ctx, t, runs)
	if err != nil {
		return nil, s.wrap(op, err)
	}
	return out, nil
}

// SendEventTx is SendEvent in the application's transaction tx.
func (s *Store) SendEventTx(ctx context.Context, tx any, ev storage.Event) (bool, error) {
	const op = "send event"
	if err := s.check(op); err != nil {
		return false, err
	}
	if err := ev.Validate(); err != nil {
		return false, fmt.Errorf("pgstore: %w", err)
	}
	t, err := s.onTx(op, tx)
	if err != nil {
		return false, err
	}
	var now time.Time
	if err := t.QueryRow(ctx, s.q.txNow, s.clock()).Scan(&now); err != nil {
		return false, s.wrap(op, err)
	}
	r, found, err := s.readAt(ctx, t, now, ev.RunID, true)
	switch {
	case err != nil:
		return false, s.wrap(op, err)
	case !found:
		return false, fmt.Errorf("pgstore: %s: run %q: %w", op, ev.RunID, storage.ErrRunNotFound)
	case r.Status.Finished():
		return false, fmt.Errorf("pgstore: %s: run %q is %s: %w", op, ev.RunID, r.Status, storage.ErrInvalidState)
	}
	delivered, _, err := s.send(ctx, t, r, ev)
	if err != nil {
		return false, s.wrap(op, err)
	}
	return delivered, nil
}

// EmitTx is Emit in the application's transaction tx: Emit's statement,
// sent on tx.
func (s *Store) EmitTx(ctx context.Context, tx any, req storage.EmitRequest) ([]string, error) {
	const op = "emit"
	if err := s.check(op); err != nil {
		return nil, err
	}
	if err := req.Validate(); err != nil {
		return nil, fmt.Errorf("pgstore: %w", err)
	}
	t, err := s.onTx(op, tx)
	if err != nil {
		return nil, err
	}
	var now time.Time
	if err := t.QueryRow(ctx, s.q.txNow, s.clock()).Scan(&now); err != nil {
		return nil, s.wrap(op, err)
	}
	args := []any{now, req.Topic, req.Payload}
	if s.notify {
		args = append(args, s.channel)
	}
	rows, err := t.Query(ctx, s.q.emit, args...)
	if err != nil {
		return nil, s.wrap(op, err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, s.wrap(op, err)
	}
	return ids, nil
}

// CheckpointTx runs a transactional step: it begins a transaction on a
// connection of the store's pool, calls step with it (a pgx.Tx), and then,
// on the same transaction, writes the checkpoint with step's output by the
// checkpoint writers' statement for one run (checkpointStatement: fenced,
// write-once, the pause rules), with the reply and stream writes and the
// search attributes the request carries when it is written (see
// interact.go and attrs.go), and commits. A merge that would leave the
// run more than storage.MaxAttributes attributes is
// storage.ErrInvalidArgument, rolling the step's writes back. A
// reply to an update the run does not have is refused before the
// checkpoint is written (storage.ErrInvalidArgument), rolling the step's
// writes back. The run's row is locked only by that statement, after
// step returns, so the step's duration never holds the run, nor the
// writers' batches that write to it. A step that fails, a checkpoint the
// key had already (Existing) and a lease that no longer holds
// (ErrLeaseLost) roll the step's writes back.
//
// The step's duration is not bounded by Options.CallTimeout (ctx bounds
// it); the statements after it are. A checkpoint's time, and its lease's
// extension, are taken when the step has returned, not when the
// transaction began.
func (s *Store) CheckpointTx(ctx context.Context, req storage.CheckpointRequest,
	step func(ctx context.Context, tx any) ([]byte, error)) (storage.CheckpointResult, error) {
	const op = "checkpoint"
	if err := s.check(op); err != nil {
		return storage.CheckpointResult{}, err
	}
	if err := req.Validate(); err != nil {
		return storage.CheckpointResult{}, fmt.Errorf("pgstore: %w", err)
	}
	if req.Complete != nil {
		return storage.CheckpointResult{}, fmt.Errorf("pgstore: %s: %w: a transactional step's checkpoint carries no completion", op, storage.ErrInvalidArgument)
	}
	if step == nil {
		return storage.CheckpointResult{}, fmt.Errorf("pgstore: %s: %w: no step", op, storage.ErrInvalidArgument)
	}
	tx, err := s.pool.Pool.Begin(ctx)
	if err != nil {
		return storage.CheckpointResult{}, s.wrap(op, err)
	}
	defer func() {
		// After a commit this does nothing; after a panic in step, or a
		// failed write, it ends the transaction, bounded even when ctx is
		// done.
		rctx, cancel := context.WithTimeout(context.Background(), s.pool.timeout)
		defer cancel()
		tx.Rollback(rctx)
	}()
	out, err := step(ctx, tx)
	if err != nil {
		return storage.CheckpointResult{}, err
	}
	req.Checkpoint.Output = out
	call, err := s.checkpointCall(req)
	if err != nil {
		return storage.CheckpointResult{}, s.wrap(op, err)
	}
	bt := &boundTx{Tx: tx, p: s.pool, deadline: time.Now().Add(s.pool.timeout)}
	res, err := s.checkpointOn(ctx, bt, call)
	if err != nil {
		if errors.Is(err, storage.ErrLeaseLost) {
			return storage.CheckpointResult{}, err
		}
		return storage.CheckpointResult{}, s.wrap(op, err)
	}
	if res.Existing != nil {
		return res, nil // rolled back by the deferred Rollback
	}
	if err := bt.Commit(ctx); err != nil {
		return storage.CheckpointResult{}, s.wrap(op, err)
	}
	return res, nil
}

// checkpointOn writes call's checkpoint in tx with the statement the
// checkpoint writers send for it alone, at the store clock's time of the
// call (txNow): its result, with Existing set when the key had a
// checkpoint in the run's current execution, or ErrLeaseLost.
func (s *Store) checkpointOn(ctx context.Context, tx pgx.Tx, call *ckptCall) (storage.CheckpointResult, error) {
	var now time.Time
	if err := tx.QueryRow(ctx, s.q.txNow, s.clock()).Scan(&now); err != nil {
		return storage.CheckpointResult{}, err
	}
	if err := s.checkReply(ctx, tx, &call.req); err != nil {
		return storage.CheckpointResult{}, err
	}
	return s.checkpointIn(ctx, tx, call, now)
}

// checkpointIn writes call's checkpoint in tx with the statement the
// checkpoint writers send for it alone, at now (a time, or the store
// clock's argument): its result, with Existing set when the key had a
// checkpoint in the run's current execution, or ErrLeaseLost. When it
// wrote the checkpoint, the reply and stream writes the call carries
// follow, by the interact statement (interactIn), and its search
// attributes, by the setAttrs statement (attrsIn), which fails tx when
// the run would hold too many.
func (s *Store) checkpointIn(ctx context.Context, tx pgx.Tx, call *ckptCall, now any) (storage.CheckpointResult, error) {
	const op = "checkpoint"
	q, args := s.checkpointStatement([]*ckptCall{call})
	args[0] = now
	var (
		ord                              int64
		written, pause, pauseReq, cancel bool
		execution                        int32
	)
	err := tx.QueryRow(ctx, q, args...).Scan(&ord, &written, &pause, &execution, &pauseReq, &cancel)
	if errors.Is(err, pgx.ErrNoRows) {
		return storage.CheckpointResult{}, leaseLost(op, call.req.Lease)
	}
	if err != nil {
		return storage.CheckpointResult{}, err
	}
	res := storage.CheckpointResult{CancelRequested: cancel}
	if written {
		res.Paused, res.PauseRequested = pause, pauseReq
		if call.inter != nil {
			if err := s.interactIn(ctx, tx, call, now); err != nil {
				return storage.CheckpointResult{}, err
			}
		}
		if len(call.req.Attributes) > 0 {
			if err := s.attrsIn(ctx, tx, call); err != nil {
				return storage.CheckpointResult{}, err
			}
		}
		return res, nil
	}
	existing, err := scanCheckpoint(tx.QueryRow(ctx, s.q.getCheckpoint, call.req.Lease.RunID, execution, call.req.Checkpoint.Key))
	if errors.Is(err, pgx.ErrNoRows) {
		// Taken back since by a refusal, which needs the lease too.
		return storage.CheckpointResult{}, leaseLost(op, call.req.Lease)
	}
	if err != nil {
		return storage.CheckpointResult{}, err
	}
	res.Existing = &existing
	return res, nil
}
