package runtime

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stemflow/stem/storage"
)

// SupportPackageIsVersion4 is referenced by generated code: each generated
// file names the version of the generated API it was written for, and
// generated code for another version refers to a constant this runtime
// lacks, so it stops compiling at that line (run go generate) instead of
// misbehaving. Version 4: futures (the ...Async and On... forms), typed
// ContinueAsNew, progress and workflow timeouts. (Version 3: child calls
// take ChildOptions and StartChild returns a ChildRun; event types and
// workflow versions are registered for the catalog.)
const SupportPackageIsVersion4 = true

// Config configures an Engine. Its zero value, with a Store, works.
type Config struct {
	// Store holds every run's state. Required. The engine does not close it.
	Store storage.Store
	// Workers is how many runs one engine executes at once. Default 16.
	Workers int
	// LeaseDuration is how long a claimed run stays leased without a write or
	// heartbeat. A worker that dies is replaced after at most this long.
	// Default 30s.
	LeaseDuration time.Duration
	// HeartbeatInterval is how often a run's lease is extended while a step
	// runs (or a retry waits) without a write extending it, and so how soon
	// the engine learns what another process did to the run: a running
	// step's context is cancelled with cause ErrTerminated or ErrRestarted
	// when the run was terminated or restarted, and a requested pause parks
	// the run at its next step boundary. A step that ends sooner costs no
	// heartbeat. Default 1s, or LeaseDuration/4 when shorter. Negative: no
	// heartbeats; a step with a Timeout longer than LeaseDuration still
	// keeps its lease (see StepOptions.Timeout), but one without a Timeout
	// may outlive its lease and run twice (the engine warns once per
	// workflow and step), as with an interval as long as LeaseDuration.
	HeartbeatInterval time.Duration
	// PollInterval is the longest an idle engine waits before asking the
	// store for ready runs again: a safety net, not a clock. After an empty
	// claim the engine sleeps until the store's next wake time for its
	// workflows (the earliest sleep, event timeout or lease expiry), and
	// store notifications and its own runs wake it sooner. A run parked by
	// another engine that stops before the run's wake time is found within
	// PollInterval of it. Default 1s.
	PollInterval time.Duration
	// ClaimBatch caps how many runs one claim leases. Default Workers.
	ClaimBatch int
	// DisableEagerStart makes every run this engine starts wait for a
	// claim. By default, while Run runs, a run started here of a workflow
	// the engine works, on a queue without limits, not delayed, is created
	// already leased to the engine and begins at once when a worker is
	// free and no backlog waits: no claim and no notification, and the
	// run is in the store, handed over on a crash like any other, before
	// its first step.
	DisableEagerStart bool
	// Clock tells the time for sleeps, deadlines and attempt records. Default
	// the system clock. A Clock that is a storage.Timers (a test's virtual
	// clock, package stemtest) also runs the timers that measure a run's
	// time: sleeps, waits, retry backoff, step timeouts, deadlines,
	// heartbeats and the engine's wait for the next wake time. The poll and
	// the back-offs after a store error stay in real time.
	Clock storage.Clock
	// RandomSeed, when set, makes the workflow context's Random and UUID
	// derive their values from it, the run's ID and the call's key
	// instead of drawing them: a run of a given ID gets the same values
	// on every engine with the same seed, whatever crashed in between,
	// so tests can compare separate runs (package stemtest sets one).
	// Each value is still recorded at its call. Leave it nil in
	// production: the values are then random.
	RandomSeed []byte
	// Logger receives the engine's logs. Default: discarded.
	Logger *slog.Logger
	// MaxPayloadBytes caps every payload (input, output, event), checked
	// before decoding and before any write. Default DefaultMaxPayloadBytes.
	MaxPayloadBytes int
	// MaxRecoveries is how many times a run may be recovered from a dead
	// worker without making progress before it errors with ErrPoisonRun.
	// Default 10.
	MaxRecoveries int
	// WorkerID names this engine's worker in leases. Default: unique per
	// process start.
	WorkerID string
	// Codec, when set, seals every payload and error text at rest
	// (NewAESGCMCodec encrypts; give it the new key first and the old ones
	// after to rotate). Plaintext written before it was set still reads.
	// What it cannot open (another key's, tampered, or sealed while the
	// engine has none) is an error matching ErrSealed wherever it is read,
	// and a run the engine cannot open is handed back untouched, for an
	// engine that holds the key.
	Codec Codec
	// ShutdownGrace is how long running steps may go on once Run's context
	// is done (or Close is called) before their contexts are cancelled. Each
	// run is handed back at its next step boundary, so a step that finishes
	// within the grace keeps its result and does not run again elsewhere.
	// Default 10s; negative: cancel at once.
	ShutdownGrace time.Duration
	// HoldRetry is how long a run held for a divergence (see Hold) waits
	// before an engine claims it again: a build deployed meanwhile that
	// matches the run's history continues it then, with no operator's
	// help. Default DefaultHoldRetry (30s).
	HoldRetry time.Duration
	// ParkRetriesAfter is the longest a step's retry waits for its backoff
	// on the worker. A retry due later parks the run on the store's timer,
	// ready when the retry is due, and frees the worker for other runs
	// meanwhile; the failed attempt is recorded first, so whichever engine
	// claims the run makes the next attempt, and the attempt numbers and
	// retry budget go on. A step future's retry (StepAsync) waits on the
	// worker however long its backoff, as the run's other calls may be at
	// work. Default DefaultParkRetriesAfter (1s); negative: never park.
	ParkRetriesAfter time.Duration
	// MaxParallelSteps is how many step futures (StepAsync and the typed
	// ...Async forms) of one run execute at once on this engine; more wait
	// for a slot. Default DefaultMaxParallelSteps.
	MaxParallelSteps int
	// Queues are the queues Run claims runs from, each registered with
	// RegisterQueue (DefaultQueue needs not be). Default: every registered
	// queue and DefaultQueue.
	Queues []string
	// Retention is how long finished runs (complete, errored, terminated)
	// are kept after they end, for workflows registered without their own
	// (WorkflowRetention, the annotation's retention=). Zero keeps them
	// forever, the default. While Run runs, the engine deletes what is past
	// its retention, with everything the runs own, every SweepInterval, in
	// batches that never hold claims up; every engine sharing the store may
	// do so, and the shortest default among them wins for workflows
	// without their own.
	Retention time.Duration
	// SweepInterval is how often a running engine deletes expired runs
	// (see Retention) and records its workflows and queues in the store
	// again. Default 1m.
	SweepInterval time.Duration
	// Services are background work Run runs beside the workers, stopped
	// with them: the schedule package's Service fires cron schedules.
	Services []Service
	// Hooks intercept the engine's starts, executions, step attempts,
	// waits and store calls, the first outermost (package stemotel's
	// trace and measure them). None: nothing is intercepted, at no cost.
	Hooks []Hooks
	// WorkerTTL is how long this engine's record of itself in the store
	// (see Engine.Workers) outlives its last renewal: a running engine
	// renews it every WorkerTTL/3, and removes it when Run returns, so
	// a worker that died drops out of the list within WorkerTTL.
	// Default 30s; at least storage.MinWorkerTTL.
	WorkerTTL time.Duration
}

// A Service is background work an engine runs while its Run runs.
type Service interface {
	// Serve runs until ctx is done. It is called once per Run, on its own
	// goroutine; Run returns after Serve does.
	Serve(ctx context.Context, e *Engine)
}

// Engine executes workflow runs from a Store and is the client that starts
// and controls them. Create one with New, register workflows, then call Run
// to work; an engine that never calls Run is a client only.
type Engine struct {
	cfg      Config
	store    storage.Store // Config.Store, with Hooks.Store around it
	hooks    hooks
	log      *slog.Logger
	clock    storage.Clock
	payloads payloads

	mu        sync.Mutex
	workflows map[string]*workflowDef // the newest version of each name
	// older holds the other registered versions of each name, oldest
	// first: they run the runs started under them, and start none.
	older   map[string][]*workflowDef
	events  map[string]eventDef
	updates map[string]*updateDef
	queues  map[string]storage.Queue
	names   []string // sorted workflow names, for claims
	active  map[string]*execution
	closed  bool
	running bool
	stopRun context.CancelFunc
	runDone chan struct{}
	// watchEverywhere is set with the watch of announcements (see
	// watchFinished) when the store announces every run's end.
	watchEverywhere bool
	// pool is what Run executes runs with, while it runs (see eager.go);
	// eager holds the runs started eagerly whose execution has not begun.
	pool    *workPool
	eager   map[string]bool
	waiters waiters // the callers waiting on runs' results
	// arrivals wakes an execution whose select waits on running steps when
	// this engine sends its run an event or ends a child of it, so that it
	// takes the event (TakeEvent) at once rather than at its next poll.
	arrivals waiters
	// watchStop and watchDone stop and await the watch of the store's
	// finished runs, once started (see watchFinished).
	watchStop context.CancelFunc
	watchDone chan struct{}
	// watchReady is closed once the watch hears.
	watchReady chan struct{}
	// reads carries Wait's reads to the readers, readersActive of them
	// (see waitRead).
	reads         chan waitReadReq
	readersActive atomic.Int32

	wake chan struct{} // local dispatch: runs became ready

	// stepsRunning counts the step functions executing now (StepsRunning).
	stepsRunning atomic.Int64
	// working counts the executions at work now, not waiting on the clock
	// (ExecutionsWorking).
	working atomic.Int64
	// overrides holds the step functions tests put in place of a step's
	// own, by checkpoint key (OverrideStep); overridden says it has ever
	// held one, so steps of engines without any pay one atomic load.
	overrides  sync.Map
	overridden atomic.Bool
	// workflowOverrides holds the workflow functions tests put in place of
	// a registered workflow's own, by name (OverrideWorkflow), as
	// *workflowOverride; workflowOverridden says it has ever held one.
	workflowOverrides  sync.Map
	workflowOverridden atomic.Bool
	// registrations counts the workflows registered, so a Run under way
	// claims one registered after it began (a test's stand-in for a
	// child) from its next claim on.
	registrations atomic.Uint64

	// sealedRuns holds the IDs of runs handed back because this engine
	// cannot open them, so why is logged once per run.
	sealedRuns sync.Map
	// sealed holds the key IDs this engine lacks and the workflows it
	// leaves to the workers that hold them (see lacksKey).
	sealed sealedKeys
	// heldRuns holds the runs (with why) this engine held for a
	// divergence, so it warns once per run and reason.
	heldRuns sync.Map
	// unserved holds, by workflow, the count of runs in flight no live
	// engine registers that the engine last warned of.
	unserved sync.Map
	// unheld holds the workflow and step keys warned of running without a
	// lease the heartbeats keep, so each is warned of once.
	unheld sync.Map
}

// New returns an Engine for the config.
func New(cfg Config) (*Engine, error) {
	if cfg.Store == nil {
		return nil, fmt.Errorf("%w: Config.Store is nil", ErrInvalidArgument)
	}
	if cfg.Workers < 0 || cfg.LeaseDuration < 0 || cfg.PollInterval < 0 || cfg.MaxPayloadBytes < 0 || cfg.MaxRecoveries < 0 || cfg.ClaimBatch < 0 {
		return nil, fmt.Errorf("%w: negative value in Config", ErrInvalidArgument)
	}
	if cfg.Workers == 0 {
		cfg.Workers = 16
	}
	if cfg.LeaseDuration == 0 {
		cfg.LeaseDuration = 30 * time.Second
	}
	if cfg.HeartbeatInterval == 0 {
		cfg.HeartbeatInterval = min(time.Second, cfg.LeaseDuration/4)
	}
	if cfg.PollInterval == 0 {
		cfg.PollInterval = time.Second
	}
	if cfg.ClaimBatch == 0 {
		cfg.ClaimBatch = cfg.Workers
	}
	if cfg.MaxParallelSteps < 0 {
		return nil, fmt.Errorf("%w: negative Config.MaxParallelSteps", ErrInvalidArgument)
	}
	if cfg.MaxParallelSteps == 0 {
		cfg.MaxParallelSteps = DefaultMaxParallelSteps
	}
	cfg.Clock = storage.ClockOr(cfg.Clock)
	if cfg.Logger == nil {
		// Discarded, as documented; storage.LoggerOr's default (warnings
		// to stderr) is the stores'.
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.MaxPayloadBytes == 0 {
		cfg.MaxPayloadBytes = DefaultMaxPayloadBytes
	}
	if cfg.MaxRecoveries == 0 {
		cfg.MaxRecoveries = 10
	}
	if cfg.ShutdownGrace == 0 {
		cfg.ShutdownGrace = 10 * time.Second
	}
	if cfg.ParkRetriesAfter == 0 {
		cfg.ParkRetriesAfter = DefaultParkRetriesAfter
	}
	if cfg.WorkerID == "" {
		cfg.WorkerID = newWorkerID()
	}
	if cfg.Retention < 0 || cfg.SweepInterval < 0 {
		return nil, fmt.Errorf("%w: negative Config.Retention or Config.SweepInterval", ErrInvalidArgument)
	}
	if cfg.SweepInterval == 0 {
		cfg.SweepInterval = time.Minute
	}
	for _, q := range cfg.Queues {
		if err := storage.CheckQueueName(q); err != nil {
			return nil, fmt.Errorf("Config.Queues: %w", err)
		}
	}
	if cfg.WorkerTTL == 0 {
		cfg.WorkerTTL = 30 * time.Second
	}
	if cfg.WorkerTTL < storage.MinWorkerTTL || cfg.WorkerTTL > storage.MaxWorkerTTL {
		return nil, fmt.Errorf("%w: Config.WorkerTTL %v, want %v to %v", ErrInvalidArgument, cfg.WorkerTTL, storage.MinWorkerTTL, storage.MaxWorkerTTL)
	}
	h := composeHooks(cfg.Hooks)
	store := cfg.Store
	if h.Store != nil {
		store = hookedStore{s: cfg.Store, hook: h.Store}
	}
	cfg.RandomSeed = bytes.Clone(cfg.RandomSeed)
	return &Engine{
		cfg:       cfg,
		store:     store,
		hooks:     h,
		log:       cfg.Logger,
		clock:     cfg.Clock,
		payloads:  payloads{limit: cfg.MaxPayloadBytes, codec: cfg.Codec},
		workflows: map[string]*workflowDef{},
		older:     map[string][]*workflowDef{},
		events:    map[string]eventDef{},
		updates:   map[string]*updateDef{},
		queues:    map[string]storage.Queue{},
		active:    map[string]*execution{},
		wake:      make(chan struct{}, 1),
		reads:     make(chan waitReadReq),
	}, nil
}

// WorkerID returns the ID this engine's worker leases runs under.
func (e *Engine) WorkerID() string { return e.cfg.WorkerID }

// workflowDef is a registered workflow, type-erased.
type workflowDef struct {
	name    string
	version int
	inType  reflect.Type
	outType reflect.Type
	// timeout, when above zero, is the deadline a run gets from its start
	// unless it is started with one (the annotation's timeout=).
	timeout time.Duration
	// queue is the workflow's default queue ("": storage.DefaultQueue).
	queue string
	// retention, when set, overrides Config.Retention for its runs.
	retention *time.Duration
	// existing and ended are the start policies of its runs where a
	// start sets none (WorkflowStartPolicies).
	existing ExistingPolicy
	ended    EndedPolicy
	// txSteps are its transactional steps' keys and the transaction type
	// each takes (WorkflowTxSteps).
	txSteps map[string]reflect.Type
	// attrs are the search attributes it declares (WorkflowAttributes).
	attrs []AttrDecl
	// run decodes the input, runs the workflow and encodes its output.
	run func(c *WorkflowContext, input []byte) ([]byte, error)
}

// Register registers fn as the workflow named name: the durable name stored
// with every run, which must not change while runs of it exist. Register
// before Run: the store's catalog and the engine's worker record list what
// was registered when Run began, though a workflow registered while Run
// runs (a test's stand-in for a child workflow) is claimed from the next
// claim on, on the queues the engine already works. A name is 1 to 128
// ASCII letters, digits, '.', '_' and '-' (storage.CheckWorkflowName, the
// generator's rule); another is ErrInvalidArgument.
//
// Every run records the version it started under (WorkflowVersion, default
// 1), and an engine claims only runs of the versions it registers. So one
// name may be registered at several versions, each with its own function:
// new runs start on the newest, and the older ones run the runs started
// under them until those drain. A name registered twice at one version is
// ErrDuplicateWorkflow. Runs stored before versions were recorded (version
// 0) run on the newest.
func Register[In, Out any](e *Engine, name string, fn func(c *WorkflowContext, in In) (Out, error), opts ...RegisterOption) error {
	if name == "" || fn == nil {
		return invalidArg("workflow name and function are required")
	}
	if err := storage.CheckWorkflowName(name); err != nil {
		return err
	}
	def := &workflowDef{
		name:    name,
		version: 1,
		inType:  reflect.TypeFor[In](),
		outType: reflect.TypeFor[Out](),
		run:     runFunc(name, fn),
	}
	for _, o := range opts {
		o(def)
	}
	if def.version < 1 {
		return invalidArg("workflow %q: version %d, want 1 or more", name, def.version)
	}
	if !def.existing.Valid() || !def.ended.Valid() {
		return invalidArg("workflow %q: start policies %q and %q: want an ExistingPolicy and an EndedPolicy", name, def.existing, def.ended)
	}
	if err := e.checkTxSteps(def); err != nil {
		return err
	}
	if err := checkAttrDecls(def); err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return ErrClosed
	}
	cur, ok := e.workflows[name]
	e.registrations.Add(1)
	defer e.signal()
	if !ok {
		e.workflows[name] = def
		e.names = append(e.names, name)
		slices.Sort(e.names)
		return nil
	}
	if cur.version == def.version || slices.ContainsFunc(e.older[name], func(d *workflowDef) bool { return d.version == def.version }) {
		return fmt.Errorf("%w: %q version %d", ErrDuplicateWorkflow, name, def.version)
	}
	if def.version > cur.version {
		e.workflows[name], def = def, cur
	}
	e.older[name] = append(e.older[name], def)
	slices.SortFunc(e.older[name], func(a, b *workflowDef) int { return a.version - b.version })
	return nil
}

// runFunc returns what runs a workflow function on a run's stored input:
// it decodes the input, calls fn and encodes its output.
func runFunc[In, Out any](name string, fn func(c *WorkflowContext, in In) (Out, error)) func(c *WorkflowContext, input []byte) ([]byte, error) {
	return func(c *WorkflowContext, input []byte) ([]byte, error) {
		var in In
		if err := c.exec.engine.payloads.decode("input of "+name, input, &in); err != nil {
			return nil, err
		}
		out, err := fn(c, in)
		if err != nil {
			return nil, err
		}
		return c.exec.engine.payloads.encode("output of "+name, out)
	}
}

// registeredVersion returns the registered workflow that runs a run of
// name stored with version: that version's, or the newest for version 0
// (a run stored before versions were recorded); else ErrUnknownWorkflow.
func (e *Engine) registeredVersion(name string, version int) (*workflowDef, error) {
	def, err := e.registered(name)
	if err != nil || version == 0 || version == def.version {
		return def, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, d := range e.older[name] {
		if d.version == version {
			return d, nil
		}
	}
	return nil, fmt.Errorf("%w: %q version %d is not registered with this engine (it registers %v)", ErrUnknownWorkflow, name, version, e.versionsLocked(name)[1:])
}

// claimVersions is the Versions filter of the engine's claims: for each
// registered name, 0 and every version registered.
func (e *Engine) claimVersions() map[string][]int {
	e.mu.Lock()
	defer e.mu.Unlock()
	vs := make(map[string][]int, len(e.workflows))
	for name := range e.workflows {
		vs[name] = e.versionsLocked(name)
	}
	return vs
}

// versionsLocked lists 0 and the versions of name registered, ascending;
// e.mu is held.
func (e *Engine) versionsLocked(name string) []int {
	vs := []int{0}
	for _, d := range e.older[name] {
		vs = append(vs, d.version)
	}
	return append(vs, e.workflows[name].version)
}

// workflow returns the registered workflow, or ErrUnknownWorkflow; on a
// closed engine, ErrClosed.
func (e *Engine) workflow(name string) (*workflowDef, error) {
	if err := e.checkOpen(); err != nil {
		return nil, err
	}
	return e.registered(name)
}

// registered returns the registered workflow whether or not the engine is
// closed: runs still executing while it shuts down must not fail for that.
func (e *Engine) registered(name string) (*workflowDef, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	def, ok := e.workflows[name]
	if !ok {
		return nil, fmt.Errorf("%w: %q is not registered with this engine", ErrUnknownWorkflow, name)
	}
	return def, nil
}

func (e *Engine) checkOpen() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return ErrClosed
	}
	return nil
}

// signal tells the worker loop that runs may be ready (local dispatch).
func (e *Engine) signal() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// Run works: it claims ready runs of the registered workflows and executes up
// to Config.Workers of them at once until ctx is done or the engine is
// closed. On return every run it held has been released or left to its lease.
// Run may be called once at a time.
func (e *Engine) Run(ctx context.Context) error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return ErrClosed
	}
	if e.running {
		e.mu.Unlock()
		return fmt.Errorf("%w: Run is already running", ErrInvalidState)
	}
	if len(e.names) == 0 {
		e.mu.Unlock()
		return fmt.Errorf("%w: no workflow registered", ErrInvalidArgument)
	}
	queues, err := e.workQueues()
	if err != nil {
		e.mu.Unlock()
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	e.running = true
	e.stopRun = cancel
	e.runDone = make(chan struct{})
	names := slices.Clone(e.names)
	registered := e.registrations.Load()
	e.mu.Unlock()
	versions := e.claimVersions()
	defer func() {
		cancel()
		e.mu.Lock()
		e.running = false
		close(e.runDone)
		e.mu.Unlock()
	}()

	if err := e.checkQueues(ctx, queues); err != nil {
		if ctx.Err() != nil {
			return nil // stopped while starting: not an error, as later
		}
		return err
	}
	e.recordCatalog(ctx)
	queueNames := make([]string, len(queues))
	for i, q := range queues {
		queueNames[i] = q.Name
	}

	var notes <-chan struct{}
	if n, ok := e.cfg.Store.(storage.Notifier); ok {
		notes = n.Notifications(ctx)
	}
	pool := &workPool{ctx: ctx, slots: make(chan struct{}, e.cfg.Workers), freed: make(chan struct{}, 1), unlimited: map[string]bool{}, queued: map[string]bool{}}
	for _, q := range queues {
		if !q.Limited() {
			pool.unlimited[q.Name] = true
		}
	}
	slots, freed := pool.slots, pool.freed
	e.mu.Lock()
	e.pool = pool
	e.mu.Unlock()
	defer func() {
		e.mu.Lock()
		e.pool = nil
		e.mu.Unlock()
		pool.close()
	}()
	record := e.newWorkerRecord(queueNames, names, func() int { return len(slots) })
	record.put(ctx)
	defer record.remove(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { record.keep(ctx) })
	wg.Go(func() { e.sweep(ctx) })
	for _, svc := range e.cfg.Services {
		wg.Go(func() { svc.Serve(ctx, e) })
	}
	// idle counts the empty claims in a row that NextWake said were due:
	// runs ready but passed over because their queues are full. The engine
	// then backs off, doubling from minWake to PollInterval, until a claim
	// takes a run or something wakes it.
	idle := 0
	timer := time.NewTimer(0)
	defer timer.Stop()
	errBackoff := e.cfg.PollInterval / 10
	// While a backlog is waiting (the last claim came back full), claim only
	// once a quarter of the slots are free: one claim statement then leases
	// several runs instead of one per finished run. Without a backlog, a
	// freed slot claims at once.
	threshold := max(1, min(e.cfg.Workers, e.cfg.ClaimBatch)/4)
	backlog := false
	for {
		if n := e.registrations.Load(); n != registered {
			// A workflow registered since: claim its runs too.
			e.mu.Lock()
			names, registered = slices.Clone(e.names), e.registrations.Load()
			e.mu.Unlock()
			versions = e.claimVersions()
		}
		free := cap(slots) - len(slots)
		claimed := 0
		if free > 0 && (free >= threshold || !backlog) {
			runs, err := e.store.Claim(ctx, storage.ClaimRequest{
				Owner:     e.cfg.WorkerID,
				Workflows: e.sealed.claimable(e.clock.Now(), names),
				Limit:     min(free, e.cfg.ClaimBatch),
				LeaseFor:  e.cfg.LeaseDuration,
				Queues:    queues,
				Versions:  versions,
			})
			if err != nil && ctx.Err() == nil {
				e.log.Error("stem: claim failed", "err", err)
				errBackoff = min(max(errBackoff*2, 10*time.Millisecond), e.cfg.PollInterval)
				select {
				case <-ctx.Done():
				case <-time.After(errBackoff):
				}
			} else {
				errBackoff = 0
			}
			backlog = err == nil && len(runs) == min(free, e.cfg.ClaimBatch)
			if err == nil {
				pool.claimed(runs, min(free, e.cfg.ClaimBatch))
			}
			for _, r := range runs {
				claimed++
				select {
				case slots <- struct{}{}:
				default:
					// Eager starts took the slots meanwhile: wait for
					// one to free up.
					select {
					case slots <- struct{}{}:
					case <-ctx.Done():
						e.releaseClaimed(r)
						continue
					}
				}
				if !pool.launch(e, r) {
					<-slots
					e.releaseClaimed(r)
				}
			}
		}
		if ctx.Err() != nil {
			break
		}
		if free = cap(slots) - len(slots); free == 0 || (backlog && free < threshold) {
			// Too few slots are free to claim; wait for one to free up.
			select {
			case <-ctx.Done():
			case <-freed:
			}
			continue
		}
		if claimed > 0 {
			idle = 0
			continue // more may be ready
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		next := e.nextWake(ctx, e.sealed.claimable(e.clock.Now(), names), queueNames, versions)
		wait := e.cfg.PollInterval
		if next.Found && next.After < wait {
			wait = max(next.After, minWake)
		}
		// A run ending wakes an idle engine only when runs are due but
		// were passed over, their queues full: the end may free a place.
		// Whatever else an execution makes claimable (a park, a hand-back,
		// a child, an event to another run) signals the engine itself.
		var freedIdle <-chan struct{}
		if wait <= minWake {
			wait = min(minWake<<min(idle, 20), e.cfg.PollInterval)
			idle++
			next.Found = false
			freedIdle = freed
		}
		// The next wake time is the runs' own time: on a virtual clock (a
		// test's), its timer, however far; the back-off and the poll are
		// the engine's, in real time.
		var onClock <-chan time.Time
		stopClock := func() bool { return false }
		if _, virtual := e.clock.(storage.Timers); virtual && next.Found {
			onClock, stopClock = storage.NewTimer(e.clock, max(next.After, minWake))
			wait = e.cfg.PollInterval
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
		case <-e.wake:
			idle = 0
		case <-notes:
		case <-freedIdle:
			idle = 0
		case <-timer.C:
		case <-onClock:
		}
		stopClock()
		if ctx.Err() != nil {
			break
		}
	}
	wg.Wait()
	return nil
}

// releaseClaimed hands back, ready now, a run claimed (or started
// eagerly) as the engine stopped, before its execution began.
func (e *Engine) releaseClaimed(r storage.ClaimedRun) {
	now := e.clock.Now()
	_, _ = e.store.Suspend(context.Background(), storage.SuspendRequest{Lease: r.Lease, LeaseFor: e.cfg.LeaseDuration, ReadyAt: &now, SuspendState: r.SuspendState})
}

// minWake is the shortest an idle engine sleeps after an empty claim: a run
// due now that the claim did not get (another worker's claim holds it) is
// not polled for in a tight loop.
const minWake = 2 * time.Millisecond

// nextWake is the store's next wake time for the engine's workflows, not
// Found when the store cannot say. An engine whose claim came back empty
// sleeps until then, at most PollInterval, which is only a safety net;
// notifications and local signals wake it sooner.
func (e *Engine) nextWake(ctx context.Context, workflows, queues []string, versions map[string][]int) storage.NextWake {
	w, err := e.store.NextWake(ctx, storage.NextWakeRequest{Workflows: workflows, Queues: queues, Versions: versions})
	if err != nil {
		return storage.NextWake{}
	}
	return w
}

// Close stops the engine: Run returns once the runs it holds are handed back
// (running steps get Config.ShutdownGrace to finish), and later calls return
// ErrClosed. The store stays open.
func (e *Engine) Close() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	stop, done := e.stopRun, e.runDone
	unwatch, watched := e.watchStop, e.watchDone
	e.mu.Unlock()
	if stop != nil {
		stop()
		<-done
	}
	if unwatch != nil {
		unwatch()
		<-watched
	}
	return nil
}

// errShutdown is the cause of an execution's cancellation when its engine
// stops; the run is released for another worker.
var errShutdown = errors.New("stem: engine shutting down")
