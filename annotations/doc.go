// Package annotations defines the //stem: directives that mark workflows,
// steps, events, updates and streams in Go source, and parses them
// strictly.
//
// A directive is a Go directive comment (see go.dev/doc/comment#directives):
// "//stem:" directly followed by the directive's name, with no space after
// "//", then arguments separated by spaces. It belongs in the doc comment of
// the declaration it marks; gofmt keeps directives at the end of the doc
// comment, and go doc does not show them.
//
// # Grammar
//
//	directive = "//stem:" name { space+ argument } .
//	name      = "workflow" | "attr" | "step" | "event" | "update" | "stream" | "error" | "allow" .
//	argument  = key "=" value | flag .
//	key, flag = lower-case word from the tables below .
//	value     = any run of characters without spaces (no quotes) .
//
// Every key may appear at most once. One declaration carries one
// directive, except that //stem:attr follows a //stem:workflow as often
// as the workflow has search attributes. Unknown keys, keys without a value,
// flags with a value, quoted arguments and malformed values are errors, each
// reported at the position of the offending token.
//
// # //stem:workflow
//
// Marks func Name(ctx *NameContext, in In) (Out, error) as a workflow.
//
//	name=<workflow name>  required: the durable name stored with every run
//	version=<n>           optional, default 1: bump it to acknowledge a change
//	                      of the input, output or progress type's shape
//	timeout=<d>           optional: every run gets a deadline d after its
//	                      start, unless the start sets one; past it the run
//	                      ends with runtime.ErrDeadline
//	progress=<Type>       optional: a type declared in the same package, a
//	                      JSON payload like an input, that the run publishes
//	                      as its progress: the workflow's context gets
//	                      SetProgress(Type) and its run handle Progress and
//	                      WaitProgress
//	queue=<queue>         optional: the workflow's default queue, where its
//	                      runs are started unless the start names another
//	                      (default: the engine's default queue, "default");
//	                      the engine must have the queue registered
//	retention=<d>|forever optional: how long the workflow's finished runs are
//	                      kept after they end, overriding the engine's
//	                      default; forever keeps them forever
//	existing=<policy>     optional, default return: what a start of an ID
//	                      (runtime.WithID) whose run exists and has not
//	                      ended does: return returns that run, writing
//	                      nothing; fail fails with runtime.ErrStartRefused;
//	                      replace terminates it and starts the new run in
//	                      its place
//	ended=<policy>        optional, default return: what a start of an ID
//	                      whose run has ended does: return returns the ended
//	                      run; reuse starts a new run in its place; reject
//	                      fails with runtime.ErrStartRefused; reuse-failed
//	                      reuses it if it errored or was terminated and
//	                      rejects the start if it completed
//
// A start's runtime.IfExists and runtime.IfEnded override existing= and
// ended=; the store judges them in the atomic change that creates the run,
// so concurrent starts of one ID agree. A run replaced (replace, reuse)
// is deleted with its history and children.
//
// The package's manifest records each workflow's name, version and type
// shapes, not its timeout=, queue=, retention=, existing= or ended=: they
// are not shapes, so changing them needs no version bump.
//
// Several functions may carry the same name= with different version=s: a
// build keeps the previous version's function registered beside the new
// one, so the runs started under it (runs record their version) go on on
// it while new runs start on the newest. The same name and version twice
// is an error.
//
// # //stem:attr
//
// Declares a search attribute of the workflow whose //stem:workflow it
// follows, in the same doc comment: a typed, named value stored with each
// run, that listings filter on (runtime.ListRunsQuery.Where, stem runs
// --where 'customer=C-7', the dashboard, bulk actions). Repeat it for
// each attribute, up to storage.MaxAttributes (32) per workflow.
//
//	name=<attribute name> required: the durable name filters use, 1 to 64
//	                      ASCII letters, digits, '.', '_' and '-'
//	type=<type>           string, number, time or bool; required without
//	                      from=, and with from= it must agree with the
//	                      field's type
//	from=<field path>     optional: the Go path of a field of the
//	                      workflow's input (Customer.ID), read at each
//	                      run's start; without it the workflow sets the
//	                      attribute as it goes
//
// A field gives its type: a string kind is a string, an integer or float
// kind a number (float64; integers exact up to 2^53), time.Time a time,
// a bool kind a bool, and a pointer to one of them the same, a nil
// pointer setting nothing. Every field on the path is exported and
// encoded by encoding/json (no json:"-"); the path goes through structs
// and pointers to structs, and through embedded structs as encoding/json
// promotes their fields. The store keeps the attribute under the input's
// JSON path (the json tags' names), which the generated Register records.
// A field whose type encodes itself (other than time.Time), or with the
// ,string tag option, is refused: its JSON is not the value.
//
// The workflow's context gets Set<Name>Attr(v) error for each attribute
// (v a string, float64, time.Time or bool), a durable call that sets it
// once: a replay does not set it again. <Name> is the attribute's name in
// Go case, each part between '.', '_' and '-' capitalized and a common
// initialism upper-cased (order.id gives SetOrderIDAttr).
// Like a step, a setter's call takes its place in the run's history: add
// a new one after the calls that runs in flight recorded.
//
// The package's manifest records each workflow's attributes. Adding or
// removing one needs nothing; changing the type of a name is refused, as
// stored runs hold values of the old type: give the new type a new name.
// One name has one type in the whole package.
//
//	//stem:workflow name=orders.fulfil
//	//stem:attr name=customer from=Customer.ID
//	//stem:attr name=total type=number
//	func Fulfil(ctx *FulfilContext, order Order) (Receipt, error)
//
// # //stem:step
//
// Marks a method of the package's step receiver type, or a plain function,
// whose first parameter is runtime.StepContext or context.Context, followed
// by any number of inputs, returning (T, error) or error.
//
//	name=<step name>      required: the durable step name
//	version=<n>           optional, default 1: the checkpoint key is name@vN;
//	                      bumping it makes in-flight runs run the step again
//	retries=<n>|forever   optional, default 0: retries after a failed attempt;
//	                      forever retries until an attempt succeeds
//	backoff=<d>[..<max>]  optional: delay before the first retry, doubled per
//	                      retry up to max (runtime defaults: 100ms..1m); a
//	                      retry due later than the engine's ParkRetriesAfter
//	                      (default 1s) parks the run and frees the worker
//	jitter=<f>            optional, 0 to 1, default 0.5: the fraction of each
//	                      delay that is randomized (a delay d waits between
//	                      d*(1-f) and d); jitter=0 waits exact delays
//	timeout=<d>           optional: bound on each attempt
//	autoversion           flag: the step may run many times in one run, keyed
//	                      name@vN#0, #1, ... by call order; adding or removing
//	                      it changes the keys, so it needs a version bump
//	tx                    flag: the step is transactional; see below
//
// A transactional step (tx) takes the store's transaction right after its
// context, and its writes there commit together with its checkpoint: a
// crash leaves both or neither, a failed attempt rolls back what it wrote
// before it is retried, and the step never applies twice. Only the
// database's writes are rolled back: a call to another service from the
// step is not. The parameter is exactly pgx.Tx (github.com/jackc/pgx/v5),
// for Postgres (pgstore), or *sql.Tx (database/sql), for SQLite
// (sqlitestore); the generator reports any other type, or a missing
// parameter: transactional steps run in a Postgres or SQLite transaction,
// and Redis and the in-memory store have none. The generated Register
// functions of the package refuse to register its workflows on a store
// without transactions, or with transactions of another type, naming the
// step. A transactional step has no future form (no <Step>Async method):
// the runtime runs it only as a call that waits (runtime.TxStep, TxDo).
// tx changes neither the checkpoint key nor the shapes the manifest
// records, so adding or removing it needs no version bump.
//
//	//stem:step name=record-payment tx
//	func (s *Steps) RecordPayment(ctx runtime.StepContext, tx pgx.Tx, p Payment) (Receipt, error)
//
// # //stem:event
//
// Marks a type as the payload of a typed event.
//
//	topic=<topic>         required: the event topic
//	version=<n>           optional, default 1: bump it to acknowledge a change
//	                      of the payload type's shape, once no run in flight
//	                      waits on the topic or holds a delivered payload
//	                      (`stem check` tells); or give the new shape a new
//	                      topic
//
// # //stem:update
//
// Marks a type as the request of an update: a caller sends it to a run
// and waits for the workflow's reply (the generated Update<Type>, or
// Update<Type>OrStart<Workflow>, which starts the run first when it does
// not exist); the workflow takes it where it chooses (On<Type>,
// Await<Type>) and replies to it (Reply, Fail). A request sent again
// under the same update ID is handled once.
//
//	name=<update name>    required: the durable name callers send it by
//	reply=<Type>          required: a type declared in the same package, a
//	                      JSON payload, that the workflow replies with
//	validate=<Func>       optional: a function declared in the same package,
//	                      func(<request type>) error, that the engine runs
//	                      on every request before anything is written; an
//	                      error refuses the update (runtime.ErrUpdateRefused)
//	version=<n>           optional, default 1: bump it to acknowledge a change
//	                      of the request's or the reply's shape, once no run
//	                      in flight holds a request of the old shape it has
//	                      not taken, nor a caller a reply it has not read; or
//	                      give the new shape a new name
//
// The generated Register functions register every update of the package
// with its types and validator, so the engine checks a request before it
// sends it, and records them in the store's catalog for tools.
//
//	// Cancel asks a run of Fulfil to give up the order while it cools off.
//	//
//	//stem:update name=orders.cancel reply=Cancelled validate=checkCancel
//	type Cancel struct{ Reason string }
//
//	func checkCancel(c Cancel) error
//
// # //stem:stream
//
// Marks a type as the value of a stream: a run appends values to its
// stream of the name, from the workflow (Append<Type>, Close<Type>Stream)
// or from a step (Append<Type>InStep, written with the step's checkpoint),
// and readers read them in order as they are written (Stream<Type>), from
// any offset, in any process.
//
//	name=<stream name>    required: the durable name of the stream
//	version=<n>           optional, default 1: bump it to acknowledge a change
//	                      of the value type's shape, once no run still kept
//	                      holds values of the old shape; or give the new
//	                      shape a new name
//
//	//stem:stream name=orders.log
//	type LogLine struct{ Text string }
//
// # //stem:error
//
// Declares an error under a durable name, in the doc comment of a package
// variable or constant (an error value, matched with errors.Is) or of a
// type (an error type, matched with errors.As; its exported fields are
// recorded as JSON). A failure whose chain holds it keeps that identity
// through the store: in the workflow, from Result, in another process and
// after a replay. Undeclared errors keep only their text.
//
//	name=<name>           required: the durable name recorded with failures;
//	                      renaming it while runs in flight recorded it makes
//	                      them read back as text only
//
//	//stem:error name=bank.insufficient_funds
//	var ErrInsufficientFunds = errors.New("insufficient funds")
//
// # //stem:allow
//
// A line comment inside workflow code, not a doc comment: it allows the
// kinds of nondeterminism it names (flags: time, rand, goroutine, select,
// map, io, global) on its own line, or on the next line when it stands
// alone, so the determinism analyzer (package determinism, run by stemgen
// and by go vet -vettool) does not report a deliberate exception there.
// Say why in an ordinary comment beside it.
//
//	start := time.Now() //stem:allow time
//
// # Values
//
// Names are durable: they are stored with runs and checkpoints, so renaming
// a Go identifier never changes them. They are never derived from Go
// identifiers; name= (topic= for events) is required.
//
//   - A workflow, step, update or stream name is 1 to 128 ASCII letters,
//     digits, '.', '_' and '-' (so never '@', '#' or '/', which checkpoint
//     keys and idempotency keys use as separators).
//   - A topic is 1 to 128 ASCII letters, digits, '.', '_', '-', '/' and ':',
//     and does not start with "stem.", which the runtime reserves.
//   - A version is a positive decimal integer without sign or leading zeros.
//   - retries is a non-negative decimal integer, or the word forever.
//   - jitter is a decimal from 0 to 1 (0, 0.25, 1), without sign or
//     exponent.
//   - A queue name follows the rule of a workflow name.
//   - An attribute name is 1 to 64 ASCII letters, digits, '.', '_' and
//     '-'; an attribute type is string, number, time or bool; a from= path
//     is Go identifiers separated by '.'.
//   - A duration is a positive Go duration (time.ParseDuration): 200ms, 30s,
//     1m30s. A backoff maximum is not less than its start.
//   - A retention is a positive Go duration, which has no unit of days
//     (write 720h for 30 days), or the word forever. retention=0s is
//     refused rather than read as forever, so that keeping runs forever is
//     always written out as such.
//   - existing= is return, fail or replace; ended= is return, reuse,
//     reject or reuse-failed.
//   - A progress type, and an update's reply type, is a Go identifier
//     naming a type the package declares (not an import's, not generic);
//     the generator reports an unknown name with the closest declared
//     type, as the parser does for keys.
//   - An update's validator is a Go identifier naming a function the
//     package declares, of type func(<request type>) error; the generator
//     reports an unknown name with the closest declared function, and a
//     function of another type.
//
// # Example
//
//	// Fulfil reserves stock, waits for the warehouse, then charges.
//	//
//	//stem:workflow name=orders.fulfil timeout=72h progress=FulfilProgress queue=orders retention=2160h
//	//stem:attr name=customer from=Customer
//	//stem:attr name=stage type=string
//	func Fulfil(ctx *FulfilContext, order Order) (Receipt, error)
//
//	//stem:step name=reserve retries=5 backoff=200ms..30s timeout=10s
//	func (s *Steps) Reserve(ctx runtime.StepContext, order Order) (Reservation, error)
//
//	//stem:step name=pack autoversion
//	func (s *Steps) Pack(ctx runtime.StepContext, item Item) (Parcel, error)
//
//	//stem:event topic=shipment.ready
//	type ShipmentReady struct{ Tracking string }
//
//	//stem:update name=orders.cancel reply=Cancelled validate=checkCancel
//	type Cancel struct{ Reason string }
//
//	//stem:stream name=orders.log
//	type LogLine struct{ Text string }
//
//	// FulfilProgress is what a run of Fulfil publishes as it goes.
//	type FulfilProgress struct{ Stage string }
//
// A misspelled directive (//stem:stpe) is an error, as is a known directive
// written with a space after the slashes, which Go would treat as prose.
package annotations
