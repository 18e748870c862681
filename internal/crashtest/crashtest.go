// Package crashtest is the multi-process crash harness the stores share:
// worker processes (the test binary re-executed) run 10-step workflows
// against one store while the harness kills them with SIGKILL, or freezes
// one with SIGSTOP, and then checks what users rely on: every run completes,
// every step key has exactly one checkpoint, no run completes twice, every
// step ran at least once, no step began again under a later lease after
// the store had acknowledged its checkpoint, and a frozen worker's stale
// writes are all rejected.
//
// A store's test package wires it in two places:
//
//	func TestMain(m *testing.M) {
//		crashtest.MaybeWorker(openStoreFromEnv) // never returns in a worker
//		os.Exit(m.Run())
//	}
//
//	func TestChaos(t *testing.T) { crashtest.Run(t, crashtest.Config{...}) }
package crashtest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stemflow/stem/storage"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/schedule"
)

// Workflow is the durable name of the harness's workflow.
const Workflow = "crashtest.ten"

// Steps is how many steps each run has.
const Steps = 10

const (
	envWorker  = "STEM_CRASHTEST_WORKER"
	envDir     = "STEM_CRASHTEST_DIR"
	envLease   = "STEM_CRASHTEST_LEASE"
	envWorkers = "STEM_CRASHTEST_CONCURRENCY"
	envStepDur = "STEM_CRASHTEST_STEP"
	envLimit   = "STEM_CRASHTEST_QUEUE_LIMIT"
	envTicks   = "STEM_CRASHTEST_SCHEDULES"
	envTxTable = "STEM_CRASHTEST_TX_TABLE"
)

// Queue is the queue the harness's runs are on when Config.QueueLimit is
// set.
const Queue = "crashtest"

// Register registers the harness workflow on e. Each step appends one line
// "<runID> <key>" to the side-effect log in dir before returning, so the log
// shows every execution of every step, re-executions included.
func Register(e *runtime.Engine, dir string, stepDur time.Duration) error {
	return register(e, dir, stepDur, 0, "")
}

// register is Register, on a queue of queueLimit concurrency when it is
// set. Each step then also appends "B <ns> <run>" to spans.<pid>.log when
// it begins and "E <ns> <run>" when it ends, so the harness can tell how
// many runs executed steps at any moment.
//
// With txTable set, each step is a transactional one (runtime.TxStep)
// that also inserts "<runID> <key>" into that table of the store's
// database, in the step's transaction.
func register(e *runtime.Engine, dir string, stepDur time.Duration, queueLimit int, txTable string) error {
	var spans *os.File
	var opts []runtime.RegisterOption
	if queueLimit > 0 {
		if err := e.RegisterQueue(runtime.Queue{Name: Queue, Concurrency: queueLimit}); err != nil {
			return err
		}
		opts = append(opts, runtime.WorkflowQueue(Queue))
		f, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("spans.%d.log", os.Getpid())), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return err
		}
		spans = f
	}
	span := func(edge, run string) {
		if spans != nil {
			fmt.Fprintf(spans, "%s %d %s\n", edge, time.Now().UnixNano(), run)
		}
	}
	log, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("effects.%d.log", os.Getpid())), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	return runtime.Register(e, Workflow, func(c *runtime.WorkflowContext, in int) (int, error) {
		sum := in
		for i := range Steps {
			body := func(sc runtime.StepContext, tx any) (int, error) {
				// The side effect comes first, then the step's work: a worker
				// killed mid-step leaves an effect whose step runs again.
				span("B", sc.RunID())
				defer span("E", sc.RunID())
				if _, err := fmt.Fprintf(log, "%s %s %d\n", sc.RunID(), sc.Key(), time.Now().UnixNano()); err != nil {
					return 0, err
				}
				if tx != nil {
					// The transactional effect, which a kill before the
					// step's commit takes back.
					if err := insertEffect(sc, tx, txTable, sc.RunID(), sc.Key()); err != nil {
						return 0, err
					}
				}
				if stepDur > 0 {
					time.Sleep(time.Duration(rand.Int64N(int64(stepDur) + 1)))
				}
				return sum + i, nil
			}
			key, opts := fmt.Sprintf("step%d@v1", i), runtime.StepOptions{Retries: 3, Backoff: time.Millisecond}
			var v int
			var err error
			if txTable != "" {
				v, err = runtime.TxStep(c, key, opts, body)
			} else {
				v, err = runtime.Step(c, key, opts, func(sc runtime.StepContext) (int, error) { return body(sc, nil) })
			}
			if err != nil {
				return 0, err
			}
			sum = v
		}
		return sum, nil
	}, opts...)
}

// MaybeWorker turns the test binary into a crash-test worker when the harness
// started it: it opens the store with open, runs an engine on it until the
// process is killed, and never returns. In any other process it returns at
// once. Call it first thing in TestMain.
func MaybeWorker(open func() (storage.Store, error)) {
	if os.Getenv(envWorker) != "1" {
		return
	}
	if os.Getenv(envStarter) == "1" {
		os.Exit(starter(open))
	}
	os.Exit(worker(open))
}

func worker(open func() (storage.Store, error)) int {
	dir := os.Getenv(envDir)
	lease, _ := time.ParseDuration(os.Getenv(envLease))
	stepDur, _ := time.ParseDuration(os.Getenv(envStepDur))
	workers, _ := strconv.Atoi(os.Getenv(envWorkers))
	limit, _ := strconv.Atoi(os.Getenv(envLimit))
	store, err := open()
	if err != nil {
		fmt.Fprintln(os.Stderr, "crashtest worker: open store:", err)
		return 2
	}
	rec, err := newRecorder(store, filepath.Join(dir, fmt.Sprintf("writes.%d.log", os.Getpid())))
	if err != nil {
		fmt.Fprintln(os.Stderr, "crashtest worker:", err)
		return 2
	}
	cfg := runtime.Config{
		Store: rec, Workers: workers, LeaseDuration: lease, PollInterval: 20 * time.Millisecond,
		MaxRecoveries: 1000,
	}
	if os.Getenv(envTicks) == "1" {
		cfg.Services = []runtime.Service{schedule.Service{Poll: 20 * time.Millisecond}}
	}
	txTable := os.Getenv(envTxTable)
	if txTable != "" {
		cfg.Store = txRecorder{rec}
	}
	e, err := runtime.New(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "crashtest worker:", err)
		return 2
	}
	if err := register(e, dir, stepDur, limit, txTable); err != nil {
		fmt.Fprintln(os.Stderr, "crashtest worker:", err)
		return 2
	}
	if err := registerTick(e); err != nil {
		fmt.Fprintln(os.Stderr, "crashtest worker:", err)
		return 2
	}
	if err := e.Run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "crashtest worker:", err)
		return 2
	}
	return 0
}

// recorder is the worker's view of the store: it passes every call through
// and appends one line per claim and fenced write to a log, with the wall
// time, so the harness can tell which writes a frozen worker made after it
// was thawed, and which completions succeeded.
type recorder struct {
	storage.Store
	mu  sync.Mutex
	out *os.File
	// acks logs "<ns> <run> <key> <token>" for each checkpoint the store
	// acknowledged, ns the wall time the answer came back and token the
	// lease's.
	acks *os.File
}

func newRecorder(s storage.Store, path string) (*recorder, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	a, err := os.OpenFile(filepath.Join(filepath.Dir(path), fmt.Sprintf("acks.%d.log", os.Getpid())), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	return &recorder{Store: s, out: f, acks: a}, nil
}

func (r *recorder) note(began time.Time, op, runID string, token int64, err error) {
	res := "ok"
	switch {
	case errors.Is(err, storage.ErrLeaseLost):
		res = "lost"
	case err != nil:
		res = "error"
	}
	r.mu.Lock()
	fmt.Fprintf(r.out, "%d %d %s %s %d %s\n", began.UnixNano(), time.Now().UnixNano(), op, runID, token, res)
	r.mu.Unlock()
}

func (r *recorder) Claim(ctx context.Context, req storage.ClaimRequest) ([]storage.ClaimedRun, error) {
	began := time.Now()
	runs, err := r.Store.Claim(ctx, req)
	for _, c := range runs {
		r.note(began, "claim", c.Lease.RunID, c.Lease.Token, nil)
	}
	return runs, err
}

func (r *recorder) Checkpoint(ctx context.Context, req storage.CheckpointRequest) (storage.CheckpointResult, error) {
	began := time.Now()
	res, err := r.Store.Checkpoint(ctx, req)
	r.note(began, "checkpoint", req.Lease.RunID, req.Lease.Token, err)
	if err == nil && req.Checkpoint.Key != "" {
		r.mu.Lock()
		fmt.Fprintf(r.acks, "%d %s %s %d\n", time.Now().UnixNano(), req.Lease.RunID, req.Checkpoint.Key, req.Lease.Token)
		r.mu.Unlock()
	}
	return res, err
}

func (r *recorder) Heartbeat(ctx context.Context, req storage.HeartbeatRequest) (storage.HeartbeatResult, error) {
	began := time.Now()
	res, err := r.Store.Heartbeat(ctx, req)
	r.note(began, "heartbeat", req.Lease.RunID, req.Lease.Token, err)
	return res, err
}

func (r *recorder) TakeEvent(ctx context.Context, req storage.TakeEventRequest) (*storage.Checkpoint, error) {
	began := time.Now()
	cp, err := r.Store.TakeEvent(ctx, req)
	r.note(began, "takeevent", req.Lease.RunID, req.Lease.Token, err)
	return cp, err
}

func (r *recorder) Complete(ctx context.Context, req storage.CompleteRequest) error {
	began := time.Now()
	err := r.Store.Complete(ctx, req)
	r.note(began, "complete", req.Lease.RunID, req.Lease.Token, err)
	return err
}

// Config describes one crash test.
type Config struct {
	// Open opens the store under test in the harness's own process; it is
	// used to start runs, to finish them and to verify.
	Open func(tb testing.TB) storage.Store
	// Env is added to every worker process's environment: whatever the
	// worker's open function needs to reach the same store.
	Env []string
	// Runs is how many 10-step runs to execute.
	Runs int
	// Processes is how many worker processes run at once.
	Processes int
	// Concurrency is each worker's Config.Workers.
	Concurrency int
	// Lease is the workers' lease length.
	Lease time.Duration
	// StepDuration bounds a random sleep inside each step, so workers hold
	// runs mid-step when they are killed.
	StepDuration time.Duration
	// KillEvery is the mean interval between SIGKILLs of a random worker,
	// each replaced at once. Zero: no kills.
	KillEvery time.Duration
	// Kills caps the number of SIGKILLs (zero: no cap while runs remain).
	Kills int
	// FinishInProcess stops every worker after the kills and finishes the
	// remaining runs with an engine in the harness's process (a reopened
	// store), instead of letting the workers finish.
	FinishInProcess bool
	// Freeze, when set, SIGSTOPs one worker for three leases and until the
	// others have completed every run (taking over the frozen worker's),
	// then SIGCONTs it, and checks that every write it sends after thawing
	// under a superseded lease is rejected. Not for stores whose writers
	// block each other (a frozen SQLite writer may hold the file's lock).
	Freeze bool
	// Disrupt, when set, is called once on the test's goroutine when a
	// third of the runs are complete, while the workers keep running: to
	// restart the store's server under them, say. The workers are never
	// restarted: they must recover by themselves. The harness reopens its
	// own store (Open) afterwards, and fails the test when the runs all
	// finished before Disrupt returned.
	Disrupt func(t *testing.T)
	// QueueLimit, when set, puts the runs on a queue (Queue) with this
	// concurrency limit, and checks from the steps' own logs that no more
	// runs than that ever executed steps at one moment, kills included (a
	// killed worker's steps end when it is killed).
	QueueLimit int
	// TxSteps makes every step transactional (runtime.TxStep), writing its
	// effect as a row of a table in the store's database in the step's
	// transaction, and checks that every step's row is there exactly
	// once: a kill between the write and the commit takes the write back
	// with the step. The store must be a storage.TxStore.
	TxSteps bool
	// Timeout bounds the whole test.
	Timeout time.Duration
}

// Report is what a crash test saw.
type Report struct {
	Kills         int
	StepRuns      int // executions of step bodies, from the side-effect log
	ReExecutions  int // StepRuns minus Runs×Steps
	StaleRejected int // writes of the frozen worker rejected after thawing
	// CompleteAtKill is how many runs were complete at each kill.
	CompleteAtKill []int
	// MaxExecuting is, with QueueLimit, the most runs seen executing steps
	// at one moment.
	MaxExecuting int
	Elapsed      time.Duration
}

// Run executes a crash test and fails t on any broken invariant, and also
// when it could not test what was asked: the runs finished before every
// requested kill, or (with Freeze) the thawed worker sent no stale write to
// reject.
func Run(t *testing.T, cfg Config) Report {
	t.Helper()
	if cfg.Timeout == 0 {
		cfg.Timeout = 2 * time.Minute
	}
	if cfg.Concurrency == 0 {
		cfg.Concurrency = 16
	}
	began := time.Now()
	dir := t.TempDir()
	store := cfg.Open(t)
	ctx, cancel := context.WithTimeout(context.Background(), cfg.Timeout)
	defer cancel()

	client, err := runtime.New(runtime.Config{Store: store, LeaseDuration: cfg.Lease, PollInterval: 20 * time.Millisecond, MaxRecoveries: 1000})
	if err != nil {
		t.Fatal(err)
	}
	txTable := ""
	if cfg.TxSteps {
		txTable = createEffects(ctx, t, store)
	}
	if err := register(client, dir, cfg.StepDuration, cfg.QueueLimit, txTable); err != nil {
		t.Fatal(err)
	}
	items := make([]runtime.BatchItem[int], cfg.Runs)
	for i := range items {
		items[i] = runtime.BatchItem[int]{ID: fmt.Sprintf("crash-%05d", i), Input: i}
	}
	for lo := 0; lo < len(items); lo += 500 {
		if _, err := runtime.StartBatch[int, int](ctx, client, Workflow, items[lo:min(lo+500, len(items))]); err != nil {
			t.Fatal(err)
		}
	}

	procs := &processes{t: t, cfg: cfg, dir: dir, txTable: txTable}
	defer procs.stopAll()
	for range cfg.Processes {
		procs.start()
	}

	rep := Report{}
	if cfg.Disrupt != nil {
		waitProgress(ctx, t, store, cfg.Runs/3, procs)
		cfg.Disrupt(t)
		store = cfg.Open(t)
		done, err := countComplete(ctx, store)
		if err != nil {
			t.Fatalf("after the disruption: %v", err)
		}
		if done == cfg.Runs {
			t.Fatal("the runs all finished before the disruption ended: the test disrupted nothing; give it more work")
		}
		t.Logf("crash test: disruption over with %d of %d runs complete", done, cfg.Runs)
	}
	var frozenPid int
	var contAt time.Time
	if cfg.Freeze {
		// Let the workers get going, then freeze one mid-flight.
		waitProgress(ctx, t, store, cfg.Runs/10, procs)
		p := procs.random()
		frozenPid = p.Process.Pid
		if err := p.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		// Frozen for three leases at least, and until the other workers have
		// finished every run, which makes them take over the frozen one's.
		time.Sleep(3 * cfg.Lease)
		waitProgress(ctx, t, store, cfg.Runs, procs)
		contAt = time.Now()
		if err := p.Process.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		// Give the thawed worker the chance to send its stale writes.
		waitWrite(ctx, t, filepath.Join(dir, fmt.Sprintf("writes.%d.log", frozenPid)), contAt)
	}
	for cfg.KillEvery > 0 && (cfg.Kills == 0 || rep.Kills < cfg.Kills) {
		d := cfg.KillEvery/2 + time.Duration(rand.Int64N(int64(cfg.KillEvery)))
		select {
		case <-ctx.Done():
			t.Fatalf("timed out after %d kills", rep.Kills)
		case <-time.After(d):
		}
		done, err := countComplete(ctx, store)
		if err != nil {
			t.Fatal(err)
		}
		if done == cfg.Runs {
			break
		}
		procs.kill(procs.random())
		rep.Kills++
		rep.CompleteAtKill = append(rep.CompleteAtKill, done)
		if !cfg.FinishInProcess || cfg.Kills == 0 || rep.Kills < cfg.Kills {
			procs.start()
		}
	}
	if cfg.Kills > 0 && rep.Kills < cfg.Kills {
		t.Fatalf("the runs finished before kill %d of %d: the test crashed nothing; give it more work or kill sooner", rep.Kills+1, cfg.Kills)
	}
	if cfg.FinishInProcess {
		procs.stopAll()
		finisher, err := runtime.New(runtime.Config{Store: store, Workers: cfg.Concurrency, LeaseDuration: cfg.Lease, PollInterval: 20 * time.Millisecond, MaxRecoveries: 1000})
		if err != nil {
			t.Fatal(err)
		}
		if err := register(finisher, dir, 0, cfg.QueueLimit, txTable); err != nil {
			t.Fatal(err)
		}
		runCtx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); finisher.Run(runCtx) }()
		defer func() { stop(); <-done }()
	}
	for {
		n, err := countComplete(ctx, store)
		if err != nil {
			t.Fatal(err)
		}
		if n == cfg.Runs {
			break
		}
		procs.checkAlive()
		if ctx.Err() != nil {
			t.Fatalf("only %d of %d runs complete before the timeout (%d kills)", n, cfg.Runs, rep.Kills)
		}
		time.Sleep(50 * time.Millisecond)
	}
	procs.checkAlive()
	procs.stopAll()
	rep.Elapsed = time.Since(began)

	verifyCheckpoints(ctx, t, store, cfg.Runs)
	rep.StepRuns = verifyEffects(t, dir, cfg.Runs)
	if txTable != "" {
		verifyTxEffects(ctx, t, store, txTable, cfg.Runs)
	}
	rep.ReExecutions = rep.StepRuns - cfg.Runs*Steps
	writes := readWrites(t, dir)
	verifyOneCompletion(t, writes)
	verifyNoStepAfterAck(t, dir, writes)
	if cfg.Freeze {
		rep.StaleRejected = verifyFrozen(t, writes, frozenPid, contAt)
	}
	if cfg.QueueLimit > 0 {
		rep.MaxExecuting = verifySpans(t, dir, procs.killedAt, cfg.QueueLimit)
	}
	t.Logf("crash test: %d runs × %d steps, %d processes, %d kills (runs complete at each: %v), %d step executions (%d re-executions, none after its checkpoint was acknowledged), %d stale writes rejected, %v",
		cfg.Runs, Steps, cfg.Processes, rep.Kills, rep.CompleteAtKill, rep.StepRuns, rep.ReExecutions, rep.StaleRejected, rep.Elapsed.Round(time.Millisecond))
	return rep
}

type processes struct {
	t      testing.TB
	cfg    Config
	dir    string
	mu     sync.Mutex
	live   []*exec.Cmd
	exited map[*exec.Cmd]chan struct{} // closed when the process has exited
	// killedAt is when each killed worker (by process ID) was seen dead.
	killedAt map[int]time.Time
	// ticks makes the workers serve schedules.
	ticks bool
	// txTable is the table of the transactional steps' effects, if any.
	txTable string
}

func (p *processes) start() {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), p.cfg.Env...)
	cmd.Env = append(cmd.Env,
		envWorker+"=1",
		envDir+"="+p.dir,
		envLease+"="+p.cfg.Lease.String(),
		envWorkers+"="+strconv.Itoa(p.cfg.Concurrency),
		envStepDur+"="+p.cfg.StepDuration.String(),
		envLimit+"="+strconv.Itoa(p.cfg.QueueLimit),
	)
	if p.ticks {
		cmd.Env = append(cmd.Env, envTicks+"=1")
	}
	if p.txTable != "" {
		cmd.Env = append(cmd.Env, envTxTable+"="+p.txTable)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	p.mu.Lock()
	if p.exited == nil {
		p.exited = map[*exec.Cmd]chan struct{}{}
	}
	p.live = append(p.live, cmd)
	p.exited[cmd] = exited
	p.mu.Unlock()
}

// checkAlive fails the test when a worker process exited without being
// killed: a worker must outlive whatever happens to the store.
func (p *processes) checkAlive() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.live {
		select {
		case <-p.exited[c]:
			p.t.Fatalf("worker process %d exited by itself (%v): workers must survive what the test does to the store", c.Process.Pid, c.ProcessState)
		default:
		}
	}
}

func (p *processes) random() *exec.Cmd {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.live[rand.IntN(len(p.live))]
}

func (p *processes) kill(cmd *exec.Cmd) {
	_ = cmd.Process.Signal(syscall.SIGCONT)
	_ = cmd.Process.Kill()
	p.mu.Lock()
	exited := p.exited[cmd]
	p.mu.Unlock()
	<-exited
	p.mu.Lock()
	if p.killedAt == nil {
		p.killedAt = map[int]time.Time{}
	}
	p.killedAt[cmd.Process.Pid] = time.Now()
	for i, c := range p.live {
		if c == cmd {
			p.live = append(p.live[:i], p.live[i+1:]...)
			break
		}
	}
	delete(p.exited, cmd)
	p.mu.Unlock()
}

func (p *processes) stopAll() {
	p.mu.Lock()
	live := append([]*exec.Cmd(nil), p.live...)
	p.mu.Unlock()
	for _, c := range live {
		p.kill(c)
	}
}

func countComplete(ctx context.Context, s storage.Store) (int, error) {
	n, after := 0, ""
	for {
		page, err := s.ListRuns(ctx, storage.ListRunsQuery{Workflow: Workflow, Status: storage.StatusComplete, After: after, Limit: 1000})
		if err != nil {
			return 0, err
		}
		n += len(page.Runs)
		if page.Next == "" {
			return n, nil
		}
		after = page.Next
	}
}

func waitProgress(ctx context.Context, t testing.TB, s storage.Store, n int, procs *processes) {
	for {
		done, err := countComplete(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		if done >= n {
			return
		}
		procs.checkAlive()
		if ctx.Err() != nil {
			t.Fatal("no progress before the timeout")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitWrite waits until the write log at path holds a write sent after t.
func waitWrite(ctx context.Context, t *testing.T, path string, after time.Time) {
	t.Helper()
	for {
		found := false
		forLines(t, path, func(line string) {
			var began int64
			if _, err := fmt.Sscanf(line, "%d", &began); err == nil && time.Unix(0, began).After(after) {
				found = true
			}
		})
		if found {
			return
		}
		if ctx.Err() != nil {
			t.Fatal("the thawed worker sent no write before the timeout")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// verifyCheckpoints checks that every run holds exactly one checkpoint per
// step key and nothing else, and the right result.
func verifyCheckpoints(ctx context.Context, t *testing.T, s storage.Store, runs int) {
	t.Helper()
	for i := range runs {
		id := fmt.Sprintf("crash-%05d", i)
		replay, err := s.LoadReplay(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		cps := replay.Checkpoints
		seen := map[string]int{}
		for _, cp := range cps {
			seen[cp.Key]++
		}
		for k := range Steps {
			if key := fmt.Sprintf("step%d@v1", k); seen[key] != 1 {
				t.Fatalf("run %s: %d checkpoints of %s, want exactly 1", id, seen[key], key)
			}
		}
		if len(cps) != Steps {
			t.Fatalf("run %s: %d checkpoints, want %d", id, len(cps), Steps)
		}
		r, err := s.GetRun(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if want := strconv.Itoa(i + 45); string(r.Output) != want {
			t.Fatalf("run %s: output %s, want %s", id, r.Output, want)
		}
	}
}

// verifyEffects checks that every step ran at least once and returns how
// many step executions the side-effect logs hold.
func verifyEffects(t *testing.T, dir string, runs int) int {
	t.Helper()
	seen := map[string]bool{}
	total := 0
	forEffects(t, dir, func(step string, _ time.Time, _ int) {
		total++
		seen[step] = true
	})
	for i := range runs {
		for k := range Steps {
			if line := fmt.Sprintf("crash-%05d step%d@v1", i, k); !seen[line] {
				t.Fatalf("side-effect log has no execution of %q", line)
			}
		}
	}
	return total
}

// forEffects calls f with each step execution of the side-effect logs:
// "<run> <key>", when it began, and the process that ran it.
func forEffects(t testing.TB, dir string, f func(step string, began time.Time, pid int)) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "effects.*.log"))
	for _, file := range files {
		pid, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(filepath.Base(file), "effects."), ".log"))
		forLines(t, file, func(line string) {
			i := strings.LastIndexByte(line, ' ')
			if i < 0 {
				return // a line cut short by SIGKILL
			}
			ns, err := strconv.ParseInt(line[i+1:], 10, 64)
			if err != nil {
				return
			}
			f(line[:i], time.Unix(0, ns), pid)
		})
	}
}

// ack is a checkpoint the store acknowledged: when, under which lease.
type ack struct {
	at    time.Time
	token int64
}

// verifyNoStepAfterAck checks that no step began, under a lease claimed
// after the store had acknowledged its checkpoint to another holder, or
// under the same lease after that acknowledgement: a step runs again only
// when its checkpoint was never stored (its worker died, or the write
// failed), never once the store said it held it. A holder whose lease was
// taken over while it was frozen may still begin the step under its older
// lease; its writes are fenced, and it is not counted. The lease a step
// ran under is its process's latest claim of the run before the step
// began (a run created leased, which no claim names, is not judged).
func verifyNoStepAfterAck(t *testing.T, dir string, writes map[int][]write) {
	t.Helper()
	late := stepsAfterAck(t, dir, writes)
	for i, l := range late {
		if i == 5 {
			break
		}
		t.Errorf("%s: the store lost it", l)
	}
	if len(late) > 0 {
		t.Fatalf("%d step executions began after their checkpoints were acknowledged", len(late))
	}
}

// stepsAfterAck describes each step execution that verifyNoStepAfterAck
// refuses.
func stepsAfterAck(t testing.TB, dir string, writes map[int][]write) []string {
	t.Helper()
	acked := map[string]ack{}
	files, _ := filepath.Glob(filepath.Join(dir, "acks.*.log"))
	for _, f := range files {
		forLines(t, f, func(line string) {
			var ns, token int64
			var run, key string
			if _, err := fmt.Sscanf(line, "%d %s %s %d", &ns, &run, &key, &token); err != nil {
				return // a line cut short by SIGKILL
			}
			a := ack{time.Unix(0, ns), token}
			if prev, ok := acked[run+" "+key]; !ok || a.at.Before(prev.at) {
				acked[run+" "+key] = a
			}
		})
	}
	// Each process's claims, by run, in the order made.
	claims := map[int]map[string][]write{}
	for pid, ws := range writes {
		for _, w := range ws {
			if w.op == "claim" {
				if claims[pid] == nil {
					claims[pid] = map[string][]write{}
				}
				claims[pid][w.run] = append(claims[pid][w.run], w)
			}
		}
	}
	var late []string
	forEffects(t, dir, func(step string, began time.Time, pid int) {
		a, ok := acked[step]
		if !ok {
			return
		}
		run, _, _ := strings.Cut(step, " ")
		token := int64(-1)
		for _, c := range claims[pid][run] {
			if !c.at.After(began) {
				token = c.token
			}
		}
		if token < 0 || token < a.token || token == a.token && !began.After(a.at) {
			return
		}
		late = append(late, fmt.Sprintf("step %s began at %s under lease %d, after its checkpoint was acknowledged at %s under lease %d",
			step, began.Format(time.RFC3339Nano), token, a.at.Format(time.RFC3339Nano), a.token))
	})
	return late
}

// write is one logged store call: began when it was sent, at when its
// answer came back. A store across a network may apply a write sent before a
// freeze and answer it only after the thaw, so staleness is judged by began.
type write struct {
	began time.Time
	at    time.Time
	op    string
	run   string
	token int64
	res   string
}

// readWrites parses every worker's write log, by process ID.
func readWrites(t *testing.T, dir string) map[int][]write {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "writes.*.log"))
	out := map[int][]write{}
	for _, f := range files {
		pid, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(filepath.Base(f), "writes."), ".log"))
		forLines(t, f, func(line string) {
			var w write
			var began, ns int64
			if _, err := fmt.Sscanf(line, "%d %d %s %s %d %s", &began, &ns, &w.op, &w.run, &w.token, &w.res); err != nil {
				return // a line cut short by SIGKILL
			}
			w.began, w.at = time.Unix(0, began), time.Unix(0, ns)
			out[pid] = append(out[pid], w)
		})
	}
	return out
}

// verifyOneCompletion checks that no run was completed twice.
func verifyOneCompletion(t *testing.T, writes map[int][]write) {
	t.Helper()
	completed := map[string]int{}
	for _, ws := range writes {
		for _, w := range ws {
			if w.op == "complete" && w.res == "ok" {
				completed[w.run]++
			}
		}
	}
	for run, n := range completed {
		if n > 1 {
			t.Fatalf("run %s completed %d times", run, n)
		}
	}
}

// verifyFrozen checks that every write the frozen worker sent after it was
// thawed was rejected when another worker had claimed the run with a higher
// token before the write was sent; it returns how many such stale writes
// there were.
func verifyFrozen(t *testing.T, writes map[int][]write, frozen int, contAt time.Time) int {
	t.Helper()
	// The earliest time each (run, token) was claimed by another process.
	type claimKey struct {
		run   string
		token int64
	}
	var others []write
	for pid, ws := range writes {
		if pid == frozen {
			continue
		}
		for _, w := range ws {
			if w.op == "claim" {
				others = append(others, w)
			}
		}
	}
	supersededAt := func(run string, token int64) (time.Time, bool) {
		var first time.Time
		for _, c := range others {
			if c.run == run && c.token > token && (first.IsZero() || c.at.Before(first)) {
				first = c.at
			}
		}
		return first, !first.IsZero()
	}
	stale := 0
	for _, w := range writes[frozen] {
		if w.op == "claim" || !w.began.After(contAt) {
			continue
		}
		at, ok := supersededAt(w.run, w.token)
		if !ok || !at.Before(w.began) {
			continue // nobody had taken the run over: the lease was still its own
		}
		if w.res == "ok" {
			t.Fatalf("frozen worker's stale %s of run %s (token %d) landed after another worker claimed it", w.op, w.run, w.token)
		}
		stale++
	}
	if stale == 0 {
		t.Fatalf("the frozen worker made no stale write after thawing: the test saw nothing")
	}
	return stale
}

func forLines(t testing.TB, path string, fn func(string)) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if line := sc.Text(); line != "" {
			fn(line)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
}

// Throughput measures cfg.Runs runs executed by cfg.Processes worker
// processes with no kills, and reports steps/s from the moment the workers
// are started until every run is complete (their start-up included). The
// store's test binary must call MaybeWorker in TestMain, as for Run. All
// iterations share one store; each starts runs under IDs of its own.
func Throughput(b *testing.B, cfg Config) {
	if cfg.Concurrency == 0 {
		cfg.Concurrency = 16
	}
	if cfg.Lease == 0 {
		cfg.Lease = 30 * time.Second
	}
	dir := b.TempDir()
	store := cfg.Open(b)
	client, err := runtime.New(runtime.Config{Store: store})
	if err != nil {
		b.Fatal(err)
	}
	defer client.Close()
	if err := Register(client, dir, 0); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	var steps, iter int
	var elapsed time.Duration
	for b.Loop() {
		b.StopTimer()
		before, err := countComplete(ctx, store)
		if err != nil {
			b.Fatal(err)
		}
		for lo := 0; lo < cfg.Runs; lo += 500 {
			items := make([]runtime.BatchItem[int], min(500, cfg.Runs-lo))
			for i := range items {
				items[i] = runtime.BatchItem[int]{ID: fmt.Sprintf("tp%d-%05d", iter, lo+i), Input: lo + i}
			}
			if _, err := runtime.StartBatch[int, int](ctx, client, Workflow, items); err != nil {
				b.Fatal(err)
			}
		}
		iter++
		procs := &processes{t: b, cfg: cfg, dir: dir}
		b.StartTimer()
		began := time.Now()
		for range cfg.Processes {
			procs.start()
		}
		for {
			n, err := countComplete(ctx, store)
			if err != nil {
				b.Fatal(err)
			}
			if n == before+cfg.Runs {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		elapsed += time.Since(began)
		steps += cfg.Runs * Steps
		b.StopTimer()
		procs.stopAll()
		b.StartTimer()
	}
	b.ReportMetric(float64(steps)/elapsed.Seconds(), "steps/s")
}
