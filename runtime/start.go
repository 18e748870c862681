package runtime

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"time"

	"github.com/stemflow/stem/storage"
)

// ExistingPolicy says what a start does when a run with its ID exists and
// has not ended: see IfExists.
type ExistingPolicy = storage.ExistingPolicy

// EndedPolicy says what a start does when the run with its ID has ended:
// see IfEnded.
type EndedPolicy = storage.EndedPolicy

// The start policies (see IfExists and IfEnded).
const (
	ExistingReturn   = storage.ExistingReturn
	ExistingFail     = storage.ExistingFail
	ExistingReplace  = storage.ExistingReplace
	EndedReturn      = storage.EndedReturn
	EndedReuse       = storage.EndedReuse
	EndedReject      = storage.EndedReject
	EndedReuseFailed = storage.EndedReuseFailed
)

// StartKey makes a run a singleton or a debounced run of its workflow: see
// WithSingleton and WithDebounce.
type StartKey = storage.StartKey

// RefusedError is a start its policy refused: the ID's run, its status and
// the rule. It matches ErrStartRefused.
type RefusedError = storage.RefusedError

// ErrStartRefused matches a start its policy refused (a *RefusedError):
// IfExists(ExistingFail) on a run that has not ended, IfEnded(EndedReject)
// on one that has, and the like.
var ErrStartRefused = storage.ErrStartRefused

// IfExists says what the start does when a run with its ID (WithID) exists
// and has not ended:
//
//	ExistingReturn   return the existing run, writing nothing (the default)
//	ExistingFail     fail with a *RefusedError (ErrStartRefused), writing nothing
//	ExistingReplace  terminate the existing run and start the new one in its place
//
// It overrides the workflow's existing= annotation. The store judges it in
// the same atomic change that creates the run, so concurrent starts of one
// ID agree: one creates, the others see it. A replacement deletes the old
// run with its history and its children (they end with it as with
// Terminate), so the new run's children can take their IDs; a child that
// does not end with its parent (ParentCloseAbandon or ParentCloseCancel)
// and has not ended refuses it (ErrStartRefused).
func IfExists(p ExistingPolicy) StartOption {
	return func(o *startOptions) {
		if !p.Valid() {
			o.err = fmt.Errorf("%w: IfExists(%q): want ExistingReturn, ExistingFail or ExistingReplace", ErrInvalidArgument, p)
		}
		o.existing = &p
	}
}

// IfEnded says what the start does when the run with its ID (WithID) has
// ended:
//
//	EndedReturn       return the ended run, writing nothing (the default)
//	EndedReuse        start a new run in its place, whatever its end
//	EndedReject       fail with a *RefusedError (ErrStartRefused)
//	EndedReuseFailed  start a new run in its place if it errored or was
//	                  terminated; fail (ErrStartRefused) if it completed
//
// It overrides the workflow's ended= annotation. A new run in an ended
// run's place deletes the ended one with its history and children, as
// IfExists(ExistingReplace) does.
func IfEnded(p EndedPolicy) StartOption {
	return func(o *startOptions) {
		if !p.Valid() {
			o.err = fmt.Errorf("%w: IfEnded(%q): want EndedReturn, EndedReuse, EndedReject or EndedReuseFailed", ErrInvalidArgument, p)
		}
		o.ended = &p
	}
}

// WithSingleton starts the run only if no run of its workflow holding key
// is queued, running, waiting or paused: while one is, the start returns
// that run and writes nothing. The store checks it in the start's atomic
// change, across processes.
func WithSingleton(key string) StartOption {
	return func(o *startOptions) { o.key = &StartKey{Key: key} }
}

// WithDebounce collapses the starts of the workflow with key within window
// into one run: the first start opens the window and creates the run,
// ready when the window closes; each later start before then joins that
// run (its handle is the run's) and replaces its input with its own, so
// the run starts with the window's last input. A start after the run
// began opens a new window. The store checks it in the start's atomic
// change, across processes.
func WithDebounce(key string, window time.Duration) StartOption {
	return func(o *startOptions) {
		if window <= 0 {
			o.err = fmt.Errorf("%w: WithDebounce(%q, %v): the window must be above zero", ErrInvalidArgument, key, window)
		}
		o.key = &StartKey{Key: key, Debounce: window}
	}
}

// WithDebounceFirst is WithDebounce keeping the window's first input
// instead of its last.
func WithDebounceFirst(key string, window time.Duration) StartOption {
	return func(o *startOptions) {
		if window <= 0 {
			o.err = fmt.Errorf("%w: WithDebounceFirst(%q, %v): the window must be above zero", ErrInvalidArgument, key, window)
		}
		o.key = &StartKey{Key: key, Debounce: window, KeepFirst: true}
	}
}

// WorkflowStartPolicies gives the workflow's starts their policies for an
// ID that exists (the annotation's existing=) and one that ended
// (ended=), where a start sets none (IfExists, IfEnded).
func WorkflowStartPolicies(existing ExistingPolicy, ended EndedPolicy) RegisterOption {
	return func(def *workflowDef) { def.existing, def.ended = existing, ended }
}

// startPolicies sets a create's policies: the start's (set, or the
// item's), else the workflow's; a replacing one gets the terms the old
// run ends with.
func (e *Engine) startPolicies(def *workflowDef, r *storage.NewRun, existing ExistingPolicy, ended EndedPolicy, set *startOptions) error {
	r.OnExisting, r.OnEnded = def.existing, def.ended
	if existing != "" {
		r.OnExisting = existing
	}
	if ended != "" {
		r.OnEnded = ended
	}
	if set != nil && set.existing != nil {
		r.OnExisting = *set.existing
	}
	if set != nil && set.ended != nil {
		r.OnEnded = *set.ended
	}
	if !r.OnExisting.Valid() || !r.OnEnded.Valid() {
		return invalidArg("run %q: start policies %q and %q: want an ExistingPolicy and an EndedPolicy", r.ID, r.OnExisting, r.OnEnded)
	}
	if r.OnExisting == ExistingReplace || r.OnEnded == EndedReuse || r.OnEnded == EndedReuseFailed {
		r.Replace = e.replaceTerms()
	}
	return nil
}

// replaceTerms are what a run a start replaces ends with.
func (e *Engine) replaceTerms() *storage.ReplaceTerms {
	const why = "replaced by a new start of its ID"
	return &storage.ReplaceTerms{
		Error:       storage.ErrorInfo{Message: e.payloads.sealText("stem: run terminated: " + why), Code: storage.CodeTerminated},
		ChildError:  storage.ErrorInfo{Message: e.payloads.sealText("stem: run terminated: its parent was " + why), Code: storage.CodeTerminated},
		ChildCancel: "its parent was " + why,
	}
}

// SendOrStart delivers an event to the run id of the workflow registered
// as name, starting that run with input in if it does not exist, in one
// atomic store change (signal-with-start): concurrent calls for one ID
// create one run, which receives every call's event. An existing run gets
// the event as SendEvent gives it; an ended one refuses it
// (ErrStartRefused) unless IfEnded lets a new run start in its place, which
// then gets it. The payload is checked as SendEvent checks it. Generated
// code has a typed form per workflow and event.
func SendOrStart[In, Out any](ctx context.Context, e *Engine, name, id string, in In, topic string, payload any, opts ...StartOption) (*Run[Out], error) {
	return sendOrStart[In, Out](ctx, e, nil, name, id, in, topic, payload, opts)
}

func sendOrStart[In, Out any](ctx context.Context, e *Engine, tx any, name, id string, in In, topic string, payload any, opts []StartOption) (*Run[Out], error) {
	if err := e.checkOpen(); err != nil {
		return nil, err
	}
	if id == "" {
		return nil, invalidArg("SendOrStart of %q on topic %q: an empty run ID (the event needs the run it goes to)", name, topic)
	}
	b, err := e.checkedPayload(ctx, topic, payload)
	if err != nil {
		return nil, err
	}
	opts = append(opts, WithID(id))
	return start[In, Out](ctx, e, name, in, opts, startHow{event: &storage.Event{RunID: id, Topic: topic, Payload: b}, tx: tx})
}

// StartTx starts a run as Start does, inside tx, the application's
// transaction on the store's database: a pgx.Tx on Postgres, a *sql.Tx on
// SQLite (on the store's file). The run exists exactly when tx commits,
// with the application's rows: a rollback leaves nothing, and no engine
// hears of the run before the commit. The handle's Result reads the run
// once it exists. Stores without transactions (Redis, the in-memory
// store) refuse it with ErrInvalidArgument, saying why.
func StartTx[In, Out any](ctx context.Context, e *Engine, tx any, name string, in In, opts ...StartOption) (*Run[Out], error) {
	if tx == nil {
		return nil, invalidArg("StartTx of %q: a nil transaction", name)
	}
	return start[In, Out](ctx, e, name, in, opts, startHow{tx: tx})
}

// SendOrStartTx is SendOrStart inside tx (see StartTx).
func SendOrStartTx[In, Out any](ctx context.Context, e *Engine, tx any, name, id string, in In, topic string, payload any, opts ...StartOption) (*Run[Out], error) {
	if tx == nil {
		return nil, invalidArg("SendOrStartTx of %q: a nil transaction", name)
	}
	return sendOrStart[In, Out](ctx, e, tx, name, id, in, topic, payload, opts)
}

// SendEventTx is SendEvent inside tx, the application's transaction (see
// StartTx): the event is delivered exactly when tx commits.
func (e *Engine) SendEventTx(ctx context.Context, tx any, runID, topic string, payload any) error {
	ts, err := e.txStore("SendEventTx")
	if err != nil {
		return err
	}
	b, err := e.checkedPayload(ctx, topic, payload)
	if err != nil {
		return err
	}
	return e.hookTx(ctx, "SendEventTx", func(ctx context.Context) error {
		_, err := ts.SendEventTx(ctx, tx, storage.Event{RunID: runID, Topic: topic, Payload: b})
		return err
	})
}

// EmitTx is Emit inside tx, the application's transaction (see StartTx):
// it delivers to the runs waiting on topic when tx's statement runs, and
// the deliveries take effect exactly when tx commits. It returns how many
// runs it reached.
func (e *Engine) EmitTx(ctx context.Context, tx any, topic string, payload any) (int, error) {
	ts, err := e.txStore("EmitTx")
	if err != nil {
		return 0, err
	}
	b, err := e.checkedPayload(ctx, topic, payload)
	if err != nil {
		return 0, err
	}
	var ids []string
	err = e.hookTx(ctx, "EmitTx", func(ctx context.Context) error {
		ids, err = ts.EmitTx(ctx, tx, storage.EmitRequest{Topic: topic, Payload: b})
		return err
	})
	return len(ids), err
}

// BeginTx begins a transaction on the store's database, for an application
// whose rows live there: pass AppTx.Tx() to StartTx, SendEventTx and
// EmitTx, and use it for the application's own writes (a pgx.Tx on
// Postgres, a *sql.Tx on SQLite). Stores without transactions refuse it.
func (e *Engine) BeginTx(ctx context.Context) (storage.AppTx, error) {
	ts, err := e.txStore("BeginTx")
	if err != nil {
		return nil, err
	}
	return ts.BeginTx(ctx)
}

// txStore returns the engine's store as a storage.TxStore, or the error
// that says why op cannot run on it.
func (e *Engine) txStore(op string) (storage.TxStore, error) {
	if err := e.checkOpen(); err != nil {
		return nil, err
	}
	ts, ok := e.cfg.Store.(storage.TxStore)
	if !ok {
		return nil, fmt.Errorf("%w: %s: the engine's store (%T) cannot write inside an application's transaction; Postgres (pgstore) and SQLite (sqlitestore) can", ErrInvalidArgument, op, e.cfg.Store)
	}
	return ts, nil
}

// hookTx runs a call of the transactional store through Hooks.Store, as
// every other store call is run, under op.
func (e *Engine) hookTx(ctx context.Context, op string, call func(context.Context) error) error {
	if e.hooks.Store == nil {
		return call(ctx)
	}
	return e.hooks.Store(ctx, op, call)
}

// createTx creates runs inside tx (StartTx): not eagerly, since the run
// may never be committed, and without waking this engine, which hears
// of the runs after the commit as of any other process's.
func (e *Engine) createTx(ctx context.Context, tx any, runs []storage.NewRun) ([]storage.CreateResult, error) {
	ts, err := e.txStore("StartTx")
	if err != nil {
		return nil, err
	}
	for i := range runs {
		if err := validRunID(runs[i].ID); err != nil {
			return nil, err
		}
	}
	create := func(ctx context.Context, runs []storage.NewRun) (res []storage.CreateResult, err error) {
		err = e.hookTx(ctx, "CreateRunsTx", func(ctx context.Context) error {
			res, err = ts.CreateRunsTx(ctx, tx, runs)
			return err
		})
		return res, err
	}
	var res []storage.CreateResult
	if e.hooks.Start == nil {
		res, err = create(ctx, runs)
	} else {
		res, err = e.starting(ctx, "", runs, create)
	}
	if err != nil {
		return nil, err
	}
	if err := e.created(runs, res); err != nil {
		return nil, err
	}
	return res, nil
}

// TxStep runs fn as a transactional step: fn gets the store's transaction
// (a pgx.Tx on Postgres, a *sql.Tx on SQLite, as Tx) and its writes and
// the step's checkpoint commit together, so a crash at any point leaves
// both or neither and the step never applies twice. A failed attempt
// rolls back everything it wrote before it is retried (StepOptions). Each
// attempt is a transaction of its own: one run's failure never rolls back
// another's writes. Keep what fn does to the database: a call to another
// service inside it is not rolled back.
//
// A store that cannot run it (Redis, the in-memory store), or whose
// transactions are not Tx, fails the step with a permanent error naming
// both; generated code refuses it at registration already. Tx may be any,
// for code that runs on either store (and passes the transaction on to
// StartTx, say).
func TxStep[T, Tx any](c *WorkflowContext, key string, opts StepOptions, fn func(sc StepContext, tx Tx) (T, error)) (T, error) {
	opts.tx = reflect.TypeFor[Tx]()
	return runStep(c, key, opts, func(sc StepContext) (T, error) {
		tx, err := stepTx[Tx](sc, key)
		if err != nil {
			var zero T
			return zero, err
		}
		return fn(sc, tx)
	}, false)
}

// TxDo runs fn as a transactional step that returns no value; see TxStep.
func TxDo[Tx any](c *WorkflowContext, key string, opts StepOptions, fn func(sc StepContext, tx Tx) error) error {
	opts.tx = reflect.TypeFor[Tx]()
	_, err := runStep(c, key, opts, func(sc StepContext) (struct{}, error) {
		tx, err := stepTx[Tx](sc, key)
		if err != nil {
			return struct{}{}, err
		}
		return struct{}{}, fn(sc, tx)
	}, true)
	return err
}

// stepTx is the transaction of the transactional step keyed key, as Tx.
func stepTx[Tx any](sc StepContext, key string) (Tx, error) {
	var zero Tx
	s, ok := sc.(*stepContext)
	if !ok || s.tx == nil {
		return zero, Permanent(fmt.Errorf("%w: step %q is transactional and was called without the store's transaction", ErrInvalidArgument, key))
	}
	tx, ok := s.tx.(Tx)
	if !ok {
		return zero, Permanent(fmt.Errorf("%w: step %q takes a %v and the store's transaction is a %T", ErrInvalidArgument, key, reflect.TypeFor[Tx](), s.tx))
	}
	return tx, nil
}

// WorkflowTxSteps declares the workflow's transactional steps (generated
// code passes every step the workflow's package marks tx), each with the
// transaction type it takes, so that Register refuses the workflow on an
// engine whose store cannot run them, naming the step, the type and the
// store.
func WorkflowTxSteps(steps map[string]reflect.Type) RegisterOption {
	return func(def *workflowDef) { def.txSteps = steps }
}

// checkTxSteps is Register's check of the workflow's transactional steps
// against the engine's store.
func (e *Engine) checkTxSteps(def *workflowDef) error {
	for _, key := range slices.Sorted(maps.Keys(def.txSteps)) {
		want := def.txSteps[key]
		ts, ok := e.cfg.Store.(storage.TxStore)
		if !ok {
			return fmt.Errorf("%w: workflow %q has transactional step %q, which the engine's store (%T) cannot run: it has no transactions; Postgres (pgstore) and SQLite (sqlitestore) run them",
				ErrInvalidArgument, def.name, key, e.cfg.Store)
		}
		if got := ts.TxType(); want != anyTx && got != want {
			return fmt.Errorf("%w: workflow %q has transactional step %q, which takes a %v, and the engine's store (%T) runs steps in a %v",
				ErrInvalidArgument, def.name, key, want, e.cfg.Store, got)
		}
	}
	return nil
}

// start starts one run as Start does, as how says.
func start[In, Out any](ctx context.Context, e *Engine, name string, in In, opts []StartOption, how startHow) (*Run[Out], error) {
	var o startOptions
	for _, f := range opts {
		f(&o)
	}
	if o.err != nil {
		return nil, o.err
	}
	o.resolve(e.clock.Now())
	it := BatchItem[In]{ID: o.id, Input: in, StartAt: o.at, Deadline: o.deadline,
		Queue: o.queue, Partition: o.partition, Priority: o.priority, Key: o.key, Attributes: o.attrs}
	how.set = &o
	runs, err := startRuns[In, Out](ctx, e, name, []BatchItem[In]{it}, how)
	if err != nil {
		var refused *RefusedError
		if errors.As(err, &refused) {
			return nil, refused
		}
		return nil, err
	}
	return runs[0], nil
}
