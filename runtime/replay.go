package runtime

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/stemflow/stem/storage"
)

// ReplayOptions chooses the stored runs Engine.Replay replays.
type ReplayOptions struct {
	// Workflows limits the replay to these workflows; nil replays every
	// run stored, and reports each unfinished run of a workflow the engine
	// does not register as a divergence: no build with this code can
	// continue it (a workflow renamed or dropped).
	Workflows []string
	// RunIDs limits it to these runs; nil replays every run of Workflows.
	RunIDs []string
	// Statuses limits it to runs in these statuses; nil replays them all,
	// finished runs included.
	Statuses []RunStatus
	// Limit caps how many runs are replayed; zero replays all.
	Limit int
}

// Divergence is a stored run the current code would not continue as it
// ran.
type Divergence struct {
	RunID    string
	Workflow string
	// Version is the workflow version the run was stored with.
	Version int
	// Execution is the execution replayed.
	Execution int
	// Key is the checkpoint key where the code and the run part: the key
	// the code asked for, or the stored key it never reached. "" when the
	// run diverges at its end (another result), or cannot be replayed at
	// all (its version is not registered).
	Key string
	// Message says what differs.
	Message string
}

// String formats the divergence for a report: run, workflow, key, why.
func (d Divergence) String() string {
	s := fmt.Sprintf("run %s (%s@v%d, execution %d)", d.RunID, d.Workflow, d.Version, d.Execution)
	if d.Key != "" {
		s += " at " + d.Key
	}
	return s + ": " + d.Message
}

// SkippedRun is a run Engine.Replay could not replay, and why: its input or
// checkpoints are sealed with a key this engine's codec lacks.
type SkippedRun struct {
	RunID    string
	Workflow string
	Reason   string
}

// ReplayReport is what Engine.Replay found.
type ReplayReport struct {
	// Replayed counts the runs replayed.
	Replayed int
	// Divergences lists the runs that would diverge, in the order replayed.
	Divergences []Divergence
	// Skipped lists the runs that could not be opened.
	Skipped []SkippedRun
}

// Replay replays stored runs against the workflows registered with the
// engine, without executing steps and without writing to the store: each
// run's workflow function is called with its stored input and every call
// it makes is answered from the run's checkpoints (of its current
// execution). The replay of a run ends where the code asks for something
// the run has not recorded (a step to run, a sleep or wait to begin, a
// child to start): the frontier, where the run would go on live.
//
// A run diverges where a live execution would hold it (see RunInfo.Hold):
// when the code makes its calls in another order than the run recorded
// them, reaches the frontier or returns while calls the run recorded were
// never made (the code no longer reaches them, or makes them under other
// keys), or a recorded result no longer decodes into the code's type;
// when the runtime's own checks catch it (ErrNonDeterminism, a step called
// twice); when a finished run's result differs from what the code now
// returns; and when no registered version can run it. Use it in a test against a copy of production's
// store, or before a deploy (see package check).
//
// The engine need not be running; a store error ends the replay with the
// error and the report so far. An unknown workflow in opts is
// ErrUnknownWorkflow, an unknown run ErrRunNotFound, with nothing replayed.
func (e *Engine) Replay(ctx context.Context, opts ReplayOptions) (ReplayReport, error) {
	var rep ReplayReport
	if err := e.checkOpen(); err != nil {
		return rep, err
	}
	e.mu.Lock()
	registered := slices.Clone(e.names)
	e.mu.Unlock()
	names := opts.Workflows
	if len(names) == 0 {
		names = registered
	}
	for _, n := range names {
		if !slices.Contains(registered, n) {
			return rep, fmt.Errorf("%w: replay of %q: it is not registered with this engine (registered: %s)%s", ErrUnknownWorkflow, n, listOrNone(registered), didYouMean(n, registered))
		}
	}
	for _, st := range opts.Statuses {
		if !st.Valid() {
			return rep, invalidArg("replay: unknown run status %q", st)
		}
	}
	var runs []storage.RunRecord
	for _, id := range opts.RunIDs {
		r, err := e.store.GetRun(ctx, id)
		if err != nil {
			return rep, fmt.Errorf("replay of run %q: %w", id, err)
		}
		runs = append(runs, r)
	}
	// visit replays one run; done says the limit is reached.
	visit := func(r storage.RunRecord) (done bool, err error) {
		if len(opts.Statuses) > 0 && !slices.Contains(opts.Statuses, r.Status) {
			return false, nil
		}
		d, skip, err := e.replayRun(ctx, r)
		if err != nil {
			return true, err
		}
		switch {
		case skip != nil:
			rep.Skipped = append(rep.Skipped, *skip)
			return false, nil
		case d != nil:
			rep.Divergences = append(rep.Divergences, *d)
		}
		rep.Replayed++
		return opts.Limit > 0 && rep.Replayed >= opts.Limit, nil
	}
	if opts.RunIDs != nil {
		for _, r := range runs {
			if done, err := visit(r); done || err != nil {
				return rep, err
			}
		}
		return rep, nil
	}
	if len(opts.Workflows) == 0 {
		return rep, e.replayAll(ctx, registered, visit, &rep)
	}
	for _, n := range names {
		q := storage.ListRunsQuery{Workflow: n}
		for {
			page, err := e.store.ListRuns(ctx, q)
			if err != nil {
				return rep, err
			}
			for _, r := range page.Runs {
				if done, err := visit(r); done || err != nil {
					return rep, err
				}
			}
			if page.Next == "" {
				break
			}
			q.After = page.Next
		}
	}
	return rep, nil
}

// replayAll visits every stored run of a registered workflow, and reports
// each unfinished run of any other workflow as a divergence, for
// Engine.Replay with no workflows named.
func (e *Engine) replayAll(ctx context.Context, registered []string, visit func(storage.RunRecord) (bool, error), rep *ReplayReport) error {
	var q storage.ListRunsQuery
	for {
		page, err := e.store.ListRuns(ctx, q)
		if err != nil {
			return err
		}
		for _, r := range page.Runs {
			if !slices.Contains(registered, r.Workflow) {
				if !r.Status.Finished() {
					rep.Divergences = append(rep.Divergences, Divergence{RunID: r.ID, Workflow: r.Workflow, Version: r.Version, Execution: r.Execution,
						Message: fmt.Sprintf("workflow %q is not registered with this engine (registered: %s): no worker of this build can continue the run%s",
							r.Workflow, listOrNone(registered), didYouMean(r.Workflow, registered))})
				}
				continue
			}
			if done, err := visit(r); done || err != nil {
				return err
			}
		}
		if page.Next == "" {
			return nil
		}
		q.After = page.Next
	}
}

// replayer is an execution's replay state (execution.replay).
type replayer struct {
	// seen holds the keys the code asked for that the run recorded; it is
	// written under the execution's cpMu (lookup).
	seen map[string]bool
	// frontier is the key where the code asked for what the run did not
	// record, once reached.
	frontier string
	reached  bool
	// continued is set when the code continued as new.
	continued bool
	// caught is what the runtime's own checks caught, and caughtKey the
	// key where (when they say).
	caught    string
	caughtKey string
}

// reach ends the replay at key, the frontier, unwinding the workflow
// goroutine. On a live execution (r nil) it does nothing.
func (r *replayer) reach(x *execution, key string) {
	if r == nil {
		return
	}
	r.frontier, r.reached = key, true
	x.unwind()
}

// diverge ends the replay with what the runtime's checks caught.
func (r *replayer) diverge(x *execution, msg string) {
	r.caught = msg
	x.unwind()
}

// settled is settle for a replay: a step future the code started and
// never awaited would run before the run ends, so it is the frontier.
func (r *replayer) settled(x *execution) {
	for _, f := range x.list {
		if f.kind == futureStep && f.done != nil && f.cp == nil {
			r.reach(x, f.key)
		}
	}
}

// replayRun replays one run. It returns the divergence, if any, or why the
// run cannot be opened; err is a store's error.
func (e *Engine) replayRun(ctx context.Context, r storage.RunRecord) (*Divergence, *SkippedRun, error) {
	diverged := func(key, format string, args ...any) *Divergence {
		return &Divergence{RunID: r.ID, Workflow: r.Workflow, Version: r.Version, Execution: r.Execution, Key: key, Message: fmt.Sprintf(format, args...)}
	}
	def, err := e.registeredVersion(r.Workflow, r.Version)
	if err != nil {
		return diverged("", "no registered function can run it: %v", err), nil, nil
	}
	stored, err := e.store.LoadReplay(ctx, r.ID)
	if err != nil {
		return nil, nil, fmt.Errorf("replay of run %s: %w", r.ID, err)
	}
	rp := &replayer{seen: map[string]bool{}}
	claim := storage.ClaimedRun{Lease: storage.Lease{RunID: r.ID}, Workflow: r.Workflow, ParentID: r.ParentID, Input: r.Input,
		Wait: r.Wait, Deadline: r.Deadline, Version: r.Version}
	xctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	x := &execution{
		engine: e, claim: claim, lease: claim.Lease, workflow: r.Workflow, ctx: xctx, cancel: cancel,
		stopping: make(chan struct{}), log: slog.New(slog.DiscardHandler), pauseSeen: make(chan struct{}),
		used: map[string]bool{}, counters: map[string]int{}, lastExtend: e.clock.Now(), inType: def.inType, replay: rp,
	}
	x.canc.init(xctx)
	skipped := func(err error) *SkippedRun {
		return &SkippedRun{RunID: r.ID, Workflow: r.Workflow, Reason: err.Error()}
	}
	input, err := e.payloads.raw(fmt.Sprintf("input of run %s (workflow %s)", r.ID, r.Workflow), r.Input)
	if err != nil {
		return nil, skipped(err), nil
	}
	if err := x.load(stored); err != nil {
		return nil, skipped(err), nil
	}

	out, runErr, returned := x.call(def, input)

	if rp.caught != "" {
		return diverged(rp.caughtKey, "%s", rp.caught), nil, nil
	}
	var missed []storage.Checkpoint
	for _, cp := range stored.Checkpoints {
		if !rp.seen[cp.Key] {
			missed = append(missed, cp)
		}
	}
	slices.SortFunc(missed, func(a, b storage.Checkpoint) int { return int(a.Seq - b.Seq) })
	keys := make([]string, len(missed))
	for i, cp := range missed {
		keys[i] = cp.Key
	}
	never := strings.Join(keys, ", ")
	switch {
	case rp.reached && len(missed) > 0:
		return diverged(rp.frontier, "the code asks for %s, which the run did not record, and never reaches what the run recorded: %s", rp.frontier, never), nil, nil
	case rp.reached:
		return nil, nil, nil // caught up: the run goes on from here
	case rp.continued && len(missed) > 0:
		return diverged(keys[0], "the code continues as new without reaching what the run recorded: %s", never), nil, nil
	case rp.continued && r.Status.Finished():
		return diverged("", "the code continues as new where the run ended %s", r.Status), nil, nil
	case rp.continued:
		return nil, nil, nil
	case !returned:
		return nil, nil, context.Cause(xctx)
	case len(missed) > 0:
		return diverged(keys[0], "the code returns without reaching what the run recorded: %s", never), nil, nil
	case errors.Is(runErr, ErrDuplicateStep) || errors.Is(runErr, ErrNonDeterminism):
		return diverged("", "%v", runErr), nil, nil
	}
	switch r.Status {
	case StatusComplete:
		if runErr != nil {
			return diverged("", "the code fails (%v) where the run completed", runErr), nil, nil
		}
		want, err := e.payloads.raw("output of run "+r.ID, r.Output)
		if err != nil {
			return nil, skipped(err), nil
		}
		if !sameJSON(out, want) {
			return diverged("", "the code returns %s where the run returned %s", out, want), nil, nil
		}
	case StatusErrored:
		if runErr == nil {
			return diverged("", "the code completes (returning %s) where the run failed", out), nil, nil
		}
	}
	return nil, nil, nil
}

// sameJSON reports whether two JSON documents are equal once compacted.
func sameJSON(a, b []byte) bool {
	var ca, cb bytes.Buffer
	if json.Compact(&ca, a) != nil || json.Compact(&cb, b) != nil {
		return bytes.Equal(a, b)
	}
	return bytes.Equal(ca.Bytes(), cb.Bytes())
}
