// Package check finds, before a deploy, the runs in flight in a store that
// a build of the program could not continue: runs of a workflow or a
// workflow version the build no longer has, runs holding checkpoints of
// steps it retired or changed to or from autoversion, runs waiting on an
// event topic it no longer declares, and runs whose stored input, progress
// or step results no longer decode into its types. It reads the build's
// stem.manifest.json files (which stemgen keeps beside each package's
// generated code) and the store, and writes nothing.
//
// `stem check` runs it from the command line, for CI before a deploy, on
// the manifests under the module's root:
//
//	stem check --store postgres://… .
//
// A program or a test can run it too, and, given an engine with the
// build's workflows registered, also replay each run against the code
// (runtime.Engine.Replay), which finds what a manifest cannot: code that
// asks for its steps in another order. Any Replayer can stand in for the
// engine: stem check's builds a program in the module that registers the
// build's workflows, runs it on the store, and answers from its report.
//
//	build, err := check.Load(".")
//	...
//	report, err := check.Store(ctx, store, build, check.Options{Engine: engine})
//	for _, p := range report.Problems {
//		fmt.Println(p)
//	}
package check

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/stemflow/stem/internal/manifest"
	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/storage"
)

// InFlight are the statuses of the runs a check reads: the runs a new
// build would continue.
var InFlight = []storage.RunStatus{storage.StatusQueued, storage.StatusRunning, storage.StatusWaiting, storage.StatusPaused}

// Kind says what kind of Problem a run has.
type Kind string

// The kinds of Problem.
const (
	// KindWorkflow: the build has no version of the run's workflow.
	KindWorkflow Kind = "workflow"
	// KindVersion: the build does not register the run's workflow
	// version (absent, or retired).
	KindVersion Kind = "version"
	// KindStep: the run holds a checkpoint of a step key the build does
	// not have (absent, or retired).
	KindStep Kind = "step"
	// KindAutoversion: the run holds an iteration (key#N) of a step the
	// build's is not autoversion, or a plain key of one that is.
	KindAutoversion Kind = "autoversion"
	// KindEvent: the run waits on an event topic the build declares no
	// current event type for.
	KindEvent Kind = "event"
	// KindUpdate: the run waits for an update the build declares no
	// current //stem:update type for.
	KindUpdate Kind = "update"
	// KindShape: the run's input, the progress it published, or a step's
	// stored result, does not decode into the build's type for it.
	KindShape Kind = "shape"
	// KindReplay: replaying the run against the build's code diverged
	// (Options.Engine).
	KindReplay Kind = "replay"
)

// Problem is one reason a run in flight could not continue on the build.
type Problem struct {
	RunID    string
	Workflow string
	// Version is the workflow version the run records; 0 when it was
	// stored before versions were kept.
	Version int
	// CheckedAs is the version the run was checked against: Version, or
	// for a run of version 0 the newest version the build has (0 when it
	// has none).
	CheckedAs int
	Status    storage.RunStatus
	Kind      Kind
	// Key is what the problem is about: the workflow's key
	// ("orders.fulfil@v1"), a checkpoint's key ("pack@v1#2"), or an
	// event topic.
	Key string
	// Path is, for a KindShape problem, where in the payload it does not
	// decode: "items[2].qty"; "" for the payload as a whole.
	Path string
	// Reason says what is wrong; Fix what to do about it.
	Reason string
	Fix    string
}

// String is the problem on one line: run, workflow@version, key, reason.
func (p Problem) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s (%s, %s): ", p.RunID, p.workflowKey(), p.Status)
	if p.Key != "" && p.Kind != KindWorkflow && p.Kind != KindVersion {
		b.WriteString(p.Key + ": ")
	}
	b.WriteString(p.Reason)
	return b.String()
}

// workflowKey names the run's workflow and version: "orders.fulfil@v1",
// or "orders.fulfil@v? (as v2)" for a run of unknown version.
func (p Problem) workflowKey() string {
	switch {
	case p.Version > 0:
		return manifest.Key(p.Workflow, p.Version)
	case p.CheckedAs > 0:
		return fmt.Sprintf("%s@v? (checked as v%d)", p.Workflow, p.CheckedAs)
	}
	return p.Workflow + "@v?"
}

// Report is what a check found.
type Report struct {
	// Checked counts the runs in flight that were checked.
	Checked int
	// Stranded counts the runs with at least one problem.
	Stranded int
	// Problems lists them, by run ID, each run's in the order found.
	Problems []Problem
	// Unversioned counts the runs recorded without a version (stored
	// before versions were kept), checked against the newest version of
	// their workflow the build has.
	Unversioned int
	// Sealed counts the payloads (inputs, progress and step results) sealed by a
	// codec, whose shape could not be checked; SealedRuns the runs that
	// hold one.
	Sealed     int
	SealedRuns int
	// Replayed counts the runs replayed (Options.Engine); NotReplayed
	// lists those the engine could not open (sealed with a key its codec
	// lacks).
	Replayed    int
	NotReplayed []runtime.SkippedRun
}

// OK reports whether every run in flight could continue.
func (r Report) OK() bool { return r.Stranded == 0 }

// Options tunes Store.
type Options struct {
	// Workflows limits the check to the runs of these workflows; nil
	// checks every run in flight (a store shared by several programs
	// holds runs of workflows one build does not have).
	Workflows []string
	// Engine, when set, also replays each run in flight against the
	// workflows registered with it (Engine.Replay), and reports each
	// divergence as a KindReplay problem. It must be an engine on the
	// same store, with the build's workflows registered; it need not be
	// running.
	Engine *runtime.Engine
	// Replayer, when set and Engine is not, replays the runs instead of
	// Engine: a replay made elsewhere (stem check builds a program from
	// the module and runs it). It is asked for the runs in flight the
	// check read, a batch at a time, by ID; a run it leaves out of its
	// report, being no longer in flight, is neither replayed nor a problem.
	Replayer Replayer
	// PageSize is how many runs one read lists; zero means
	// storage.DefaultPageSize.
	PageSize int
}

// Replayer replays stored runs through a build's code, as
// runtime.Engine.Replay does: *runtime.Engine is one.
type Replayer interface {
	Replay(ctx context.Context, opts runtime.ReplayOptions) (runtime.ReplayReport, error)
}

// replayBatch is how many runs one Engine.Replay call names.
const replayBatch = 500

// Store checks every run in flight in store (queued, running, waiting or
// paused) against build, and reports the runs the build could not
// continue. It only reads. Runs that end or start while it reads may be
// missed; a run is reported once.
func Store(ctx context.Context, store storage.Store, build *Build, opts Options) (Report, error) {
	if build == nil || len(build.pkgs) == 0 {
		return Report{}, errors.New("check: the build has no manifest")
	}
	c := &checker{ctx: ctx, store: store, build: build}
	workflows := opts.Workflows
	if len(workflows) == 0 {
		workflows = []string{""}
	}
	seen := map[string]bool{}
	var ids []string
	runs := map[string]checked{}
	for _, wf := range workflows {
		for _, st := range InFlight {
			q := storage.ListRunsQuery{Workflow: wf, Status: st, Limit: opts.PageSize}
			for {
				page, err := store.ListRuns(ctx, q)
				if err != nil {
					return Report{}, fmt.Errorf("check: list %s runs: %w", st, err)
				}
				for _, r := range page.Runs {
					if seen[r.ID] {
						continue
					}
					seen[r.ID] = true
					got, err := c.run(r)
					if err != nil {
						return Report{}, err
					}
					ids = append(ids, r.ID)
					runs[r.ID] = got
				}
				if page.Next == "" {
					break
				}
				q.After = page.Next
			}
		}
	}
	var replayer Replayer
	switch {
	case opts.Engine != nil:
		replayer = opts.Engine
	case opts.Replayer != nil:
		replayer = opts.Replayer
	}
	if replayer != nil && len(ids) > 0 {
		slices.Sort(ids)
		for start := 0; start < len(ids); start += replayBatch {
			if err := c.replay(replayer, ids[start:min(start+replayBatch, len(ids))], runs); err != nil {
				return Report{}, err
			}
		}
	}
	rep := c.report
	rep.Checked = len(seen)
	slices.SortStableFunc(rep.Problems, func(a, b Problem) int { return strings.Compare(a.RunID, b.RunID) })
	stranded := map[string]bool{}
	for _, p := range rep.Problems {
		stranded[p.RunID] = true
	}
	rep.Stranded = len(stranded)
	return rep, nil
}

// checked is what a check of the manifests found of a run.
type checked struct {
	status storage.RunStatus
	// as is the version the run was checked as.
	as int
	// unrunnable is set when the build has not its workflow or version.
	unrunnable bool
}

type checker struct {
	ctx    context.Context
	store  storage.Store
	build  *Build
	report Report
	// lastSealed is the run whose sealed payload was counted last.
	lastSealed string
}

func (c *checker) add(p Problem) { c.report.Problems = append(c.report.Problems, p) }

// replay replays runs with replayer and adds their divergences, but not
// that no registered function can run a run whose workflow or version the
// manifests already showed missing.
func (c *checker) replay(replayer Replayer, ids []string, runs map[string]checked) error {
	rep, err := replayer.Replay(c.ctx, runtime.ReplayOptions{RunIDs: ids})
	if errors.Is(err, storage.ErrRunNotFound) && len(ids) > 1 {
		// A run deleted since it was listed: replay the others one by one.
		for _, id := range ids {
			if err := c.replay(replayer, []string{id}, runs); err != nil {
				return err
			}
		}
		return nil
	}
	if errors.Is(err, storage.ErrRunNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("check: replay: %w", err)
	}
	c.report.Replayed += rep.Replayed
	c.report.NotReplayed = append(c.report.NotReplayed, rep.Skipped...)
	for _, d := range rep.Divergences {
		r := runs[d.RunID]
		if d.Key == "" && r.unrunnable {
			continue
		}
		p := Problem{RunID: d.RunID, Workflow: d.Workflow, Version: d.Version, CheckedAs: r.as, Status: r.status,
			Kind: KindReplay, Key: d.Key, Reason: "replay diverges: " + d.Message,
			Fix: "the code no longer makes the run's calls as the run recorded them: let the run finish on the build that started it, keep the old code path as its own workflow version, or terminate the run"}
		c.add(p)
	}
	return nil
}

// run checks one run.
func (c *checker) run(r storage.RunRecord) (checked, error) {
	got := checked{status: r.Status, as: r.Version}
	base := Problem{RunID: r.ID, Workflow: r.Workflow, Version: r.Version, CheckedAs: r.Version, Status: r.Status}
	problem := func(kind Kind, key, reason, fix string) Problem {
		p := base
		p.Kind, p.Key, p.Reason, p.Fix = kind, key, reason, fix
		return p
	}
	// shape checks a stored payload against its shape in the build: a
	// sealed one is counted, one that would not decode is a problem at
	// key, saying what does not decode, where in it, and the fix.
	shape := func(key string, sh *manifest.Shape, payload []byte, what, fix string) {
		m, sealed := checkPayload(sh, payload)
		switch {
		case sealed:
			c.sealed(r.ID)
		case m != nil:
			p := problem(KindShape, key, what+": "+m.Error(), fix)
			p.Path = m.Path
			c.add(p)
		}
	}
	b := c.build
	if len(b.workflows[r.Workflow]) == 0 {
		c.add(problem(KindWorkflow, r.Workflow, fmt.Sprintf("the build has no workflow %s", r.Workflow),
			"keep the workflow in the build until its runs finish, or terminate them; if another program serves it, check that program's build (or limit the check to this build's workflows)"))
		got.unrunnable = true
		return got, nil
	}
	var wf *workflow
	if r.Version == 0 {
		c.report.Unversioned++
		wf = b.newest(r.Workflow)
		if wf == nil {
			c.add(problem(KindVersion, r.Workflow, fmt.Sprintf("the run records no version, and the build has no current version of %s: every version it records is retired", r.Workflow),
				"keep a version of the workflow in the build until its runs finish, or terminate them"))
			got.unrunnable = true
			return got, nil
		}
		base.CheckedAs, got.as = wf.version, wf.version
	} else {
		key := manifest.Key(r.Workflow, r.Version)
		wf = b.version(r.Workflow, r.Version)
		has := versionList(b.current(r.Workflow))
		fix := fmt.Sprintf("keep the workflow function annotated name=%s version=%d in the build until these runs finish, or terminate them", r.Workflow, r.Version)
		switch {
		case wf == nil:
			c.add(problem(KindVersion, key, fmt.Sprintf("the build does not have %s (%s)", key, has), fix))
			got.unrunnable = true
			return got, nil
		case wf.retired:
			c.add(problem(KindVersion, key, fmt.Sprintf("%s is retired in the build: no function is annotated with it (%s)", key, has), fix))
			got.unrunnable = true
		}
	}
	wkey := wf.key
	shape(wkey, wf.input, r.Input, "the run's input does not decode into the build's input type",
		fmt.Sprintf("the input type of %s changed shape without a version bump: bump version= of the workflow, and keep the old version's function until these runs finish", wkey))
	shape(wkey, wf.progress, r.Progress, "the progress the run published does not decode into the build's progress type",
		fmt.Sprintf("the progress type of %s changed shape without a version bump: bump version= of the workflow, and keep the old version's function until these runs finish", wkey))

	if r.Wait != nil && len(b.old) == 0 {
		for _, wc := range r.Wait.Cases() {
			if wc.DeliveryKind() != storage.KindEvent || strings.HasPrefix(wc.Topic, storage.ReservedTopicPrefix) {
				continue
			}
			current, known := b.topics[wc.Topic]
			if current {
				continue
			}
			reason := fmt.Sprintf("waits (as %s) on event topic %s, which no //stem:event type of the build declares", wc.Key, wc.Topic)
			if known {
				reason = fmt.Sprintf("waits (as %s) on event topic %s, which the build retired: no //stem:event type declares it now", wc.Key, wc.Topic)
			}
			c.add(problem(KindEvent, wc.Topic, reason,
				"keep the event type (topic="+wc.Topic+") in the build until these runs have it, deliver the event before the deploy, or terminate the runs"))
		}
	}
	if r.Wait != nil && len(b.noUpdates) == 0 {
		for _, wc := range r.Wait.Cases() {
			name, ok := storage.UpdateNameOf(wc.Topic)
			if wc.DeliveryKind() != storage.KindUpdate || !ok {
				continue
			}
			current, known := b.updates[name]
			if current {
				continue
			}
			reason := fmt.Sprintf("waits (as %s) for update %s, which no //stem:update type of the build declares", wc.Key, name)
			if known {
				reason = fmt.Sprintf("waits (as %s) for update %s, which the build retired: no //stem:update type declares it now", wc.Key, name)
			}
			c.add(problem(KindUpdate, name, reason,
				"keep the update type (name="+name+") in the build until these runs have taken it, or terminate the runs"))
		}
	}

	replay, err := c.store.LoadReplay(c.ctx, r.ID)
	if errors.Is(err, storage.ErrRunNotFound) {
		return got, nil // deleted since it was listed
	}
	if err != nil {
		return got, fmt.Errorf("check: read the checkpoints of run %s: %w", r.ID, err)
	}
	steps := wf.pkg.steps
	for _, cp := range replay.Checkpoints {
		if cp.Kind != storage.KindStep || runtime.IsHelperKey(cp.Key) {
			continue // a recorded Now, Random, UUID or SideEffect value is no step of the build
		}
		key, iter, iterated := strings.Cut(cp.Key, "#")
		s := steps[key]
		switch {
		case s == nil:
			c.add(problem(KindStep, cp.Key, fmt.Sprintf("holds a checkpoint of step %s, which the build does not have (not in %s)", key, wf.pkg.path),
				stepFix(key)))
			continue
		case s.retired:
			c.add(problem(KindStep, cp.Key, fmt.Sprintf("holds a checkpoint of step %s, which the build retired: no step of the package has that key now", key),
				stepFix(key)))
		}
		switch {
		case !wf.pkg.autoversionKnown:
		case iterated && !s.autoversion:
			c.add(problem(KindAutoversion, cp.Key, fmt.Sprintf("holds iteration %s of step %s, which the build's step is not autoversion", iter, key),
				autoversionFix))
			continue
		case !iterated && s.autoversion:
			c.add(problem(KindAutoversion, cp.Key, fmt.Sprintf("holds step %s once, which the build's step is autoversion (its checkpoints are %s#0, #1, ...)", key, key),
				autoversionFix))
			continue
		}
		if cp.Error != nil {
			continue
		}
		shape(cp.Key, s.output, cp.Output, "the step's stored result does not decode into the build's result type",
			fmt.Sprintf("the result type of step %s changed shape without a version bump: bump the step's version= so these runs run it again", key))
	}
	return got, nil
}

const autoversionFix = "keep the step's autoversion as it was until these runs finish: a step that changes to or from autoversion needs a version bump (version=), so runs in flight keep their checkpoints apart"

func stepFix(key string) string {
	return fmt.Sprintf("keep the step with key %s in the build until these runs finish (a run resuming without it runs the step again under another key, or diverges), or terminate or restart the runs", key)
}

// sealed counts a sealed payload of run id.
func (c *checker) sealed(id string) {
	c.report.Sealed++
	if c.lastSealed != id {
		c.report.SealedRuns++
		c.lastSealed = id
	}
}

// checkPayload checks a stored payload against a shape: sealed when it is
// not JSON (a codec sealed it), else the mismatch or nil.
func checkPayload(sh *manifest.Shape, payload []byte) (m *manifest.Mismatch, sealed bool) {
	if sh == nil || len(strings.TrimSpace(string(payload))) == 0 {
		return nil, false
	}
	if !json.Valid(payload) {
		return nil, true
	}
	return sh.Check(payload), false
}

// versionList says which versions of a workflow the build has.
func versionList(vs []int) string {
	if len(vs) == 0 {
		return "it has no current version of the workflow"
	}
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = fmt.Sprintf("v%d", v)
	}
	return "it has " + strings.Join(parts, ", ")
}
