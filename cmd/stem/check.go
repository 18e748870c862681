package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/stemflow/stem/check"
	"github.com/stemflow/stem/internal/manifest"
	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/storage"
)

// exitStranded is stem check's exit code when it found runs in flight the
// build could not continue.
const exitStranded = 3

const checkDetail = `Reads the manifests of a build (the stem.manifest.json files stemgen keeps
beside each package's generated code) under each PATH (default "."),
searched recursively, skipping testdata, vendor and hidden directories,
or given as files. It first runs the generator, in memory, on the packages
that have one: if their code does not generate (the errors are printed as
path:line:col: message) or a generated file differs from what is on disk
("shop/stem.manifest.json is out of date: run go generate"), the manifests
may not describe the build, and it stops there. Then it reads every run in
flight in the store (queued, running, waiting or paused) and lists each
one the build could not continue:

  - a workflow the build does not have, or a version of it the build does
    not register (absent, or retired); a run stored before versions were
    kept is checked as its workflow's newest version
  - a step checkpoint whose key the build does not have, or retired, or
    that changed to or from autoversion
  - a wait on an event topic no //stem:event type of the build declares
  - an input, published progress or step result that does not decode
    into the build's type, with where in it (items[2].qty)
  - a run whose replay through the build's code parts from its history,
    at the first divergent call, with the key the code calls and the one
    the run recorded there (a step inserted before where it parked, or
    removed, or reordered)

It notes too the declared error names (//stem:error) the build's manifests
keep as retired: a run whose recorded failure holds one still finishes, but
errors.Is and errors.As against that error are false in this build.

To replay, it writes a program in a directory .stem-check-* at the root
of each module (removed when it ends, also on an interrupt), that
registers every workflow of the packages with zero-valued steps (a replay
runs no step), builds it with the go command on PATH, and runs it on the
store, which it reads only; the store URL and the codec keys reach it in
its environment. Runs sealed by a codec need the workers' keys
(--codec-key, --codec-key-file or $STEM_CODEC_KEY); those it cannot open
are listed as not replayed.

Each problem is one line: the run, its workflow@version and status, the
key and the reason; then a summary ("N of M in-flight runs could not
continue"), how many runs were replayed, and what to do. Payloads sealed
by a codec cannot be checked against the manifests: they are counted. It
only reads. --workflow limits it to the runs of those workflows
(comma-separated or repeated): a store shared by several programs holds
runs one build does not serve. --manifest-only judges from the manifests
as they are, without generating or replaying (for a machine without the
Go toolchain), and says so.

Put it in CI before a deploy. Exit status: 0 every run in flight passes
the manifest check and its replay; 3 some cannot continue (listed, with
the first divergent call of a replay), whatever else was found; 4 it
could not judge: the code does not generate, a generated file is out of
date, the replay program did not build or failed (its output is
printed), the check was interrupted, or runs could not be replayed; 2 bad
input (a missing path, a directory without a manifest, a manifest that
does not parse: the error says which file and what); 1 the store could
not be read.`

func checkCmd(fs *flag.FlagSet) func(*call, []string) error {
	var given []string
	fs.Func("workflow", "only runs of workflow `NAME` (comma-separated, or repeat the flag)", func(s string) error {
		given = append(given, s)
		return nil
	})
	manifestOnly := fs.Bool("manifest-only", false, "judge from the manifests alone: no generator run, no replay (for a machine without the Go toolchain)")
	return func(c *call, paths []string) error {
		parent := c.ctx // ends at the command's timeout
		var workflows []string
		for _, s := range given {
			names, err := splitList("--workflow", s)
			if err != nil {
				return err
			}
			for _, n := range names {
				if err := storage.CheckWorkflowName(n); err != nil {
					return usagef("--workflow: %s", nameReason(err))
				}
				if !slices.Contains(workflows, n) {
					workflows = append(workflows, n)
				}
			}
		}
		if len(paths) == 0 {
			paths = []string{"."}
		}
		build, err := check.Load(paths...)
		if err != nil {
			return inputError{loadError(err)}
		}
		if _, err := c.open(); err != nil {
			return err
		}
		opts := check.Options{Workflows: workflows}
		if !*manifestOnly {
			// An interrupt ends the go command and the replay program and
			// removes what stem check wrote in the module.
			ctx, stop := signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
			defer stop()
			c.ctx = ctx
			replayer, err := prepareReplay(ctx, c.g, build)
			if err != nil {
				return c.cannotJudge(err)
			}
			opts.Replayer = replayer
		}
		rep, err := check.Store(c.ctx, c.store, build, opts)
		if err != nil {
			// The replay could not judge, or an interrupt ended the
			// check; a store that does not answer in time is the store's
			// failure.
			var cj *cannotJudge
			if errors.As(err, &cj) || c.ctx.Err() != nil && parent.Err() == nil {
				return c.cannotJudge(err)
			}
			return err
		}
		if c.out.json {
			if err := c.out.encode(jsonCheckOf(build, rep, *manifestOnly)); err != nil {
				return err
			}
		} else if err := printCheck(c, build, rep, *manifestOnly); err != nil {
			return err
		}
		switch {
		case !rep.OK():
			return exitCode(exitStranded)
		case len(rep.NotReplayed) > 0:
			return exitCode(exitCannotJudge)
		}
		return nil
	}
}

// prepareReplay makes sure the build's manifests are what its code
// generates, and returns the replayer that will replay the runs through
// the code; or why it cannot (a cannotJudge).
func prepareReplay(ctx context.Context, g *globals, build *check.Build) (*programReplayer, error) {
	wd, err := os.Getwd()
	if err != nil {
		return nil, &cannotJudge{reason: err.Error()}
	}
	if err := needGo(); err != nil {
		return nil, err
	}
	mods, err := modulesOf(build.Manifests())
	if err != nil {
		return nil, err
	}
	if err := checkFresh(ctx, mods, wd); err != nil {
		return nil, err
	}
	keys, err := g.codecKeys()
	if err != nil {
		return nil, &cannotJudge{reason: err.Error()}
	}
	return &programReplayer{modules: mods, store: g.storeURL(), keys: keys, wd: wd}, nil
}

// cannotJudge prints why the check could not judge the build, and ends
// the command with exitCannotJudge.
func (c *call) cannotJudge(err error) error {
	var cj *cannotJudge
	if !errors.As(err, &cj) {
		if cj = stopped(c.ctx); cj == nil {
			cj = &cannotJudge{reason: err.Error()}
		}
	}
	if c.out.json {
		if err := c.out.encode(jsonCannotJudge{CouldNotJudge: cj.reason, Details: append([]string{}, cj.details...)}); err != nil {
			return err
		}
		return exitCode(exitCannotJudge)
	}
	for _, l := range cj.details {
		fmt.Fprintln(c.out.w, clean(l))
	}
	fmt.Fprintf(c.out.w, "could not judge: %s\n", clean(cj.reason))
	return exitCode(exitCannotJudge)
}

// jsonCannotJudge is stem check --json's output when it could not judge.
type jsonCannotJudge struct {
	CouldNotJudge string   `json:"could_not_judge"`
	Details       []string `json:"details"`
}

// loadError says what is wrong with a path or manifest, naming it.
func loadError(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Sprintf("%s: no such file or directory", pe.Path)
		}
		return fmt.Sprintf("%s: %v", pe.Path, pe.Err)
	}
	return err.Error()
}

// maxNotReplayed is how many runs not replayed the text output lists.
const maxNotReplayed = 10

func printCheck(c *call, build *check.Build, rep check.Report, manifestOnly bool) error {
	w := c.out.w
	for _, p := range rep.Problems {
		fmt.Fprintln(w, clean(p.String()))
	}
	n := len(build.Manifests())
	manifests := "1 manifest"
	if n != 1 {
		manifests = fmt.Sprintf("%d manifests", n)
	}
	fmt.Fprintf(w, "%d of %d in-flight runs could not continue (checked against %s)\n", rep.Stranded, rep.Checked, manifests)
	switch {
	case manifestOnly:
		fmt.Fprintln(w, "judged from the manifests alone (--manifest-only): neither checked that they are what the code generates, nor replayed the runs through the code")
	case rep.Checked > 0:
		fmt.Fprintf(w, "replayed %s through the build's code\n", plural(rep.Replayed, "run"))
	}
	for i, s := range rep.NotReplayed {
		if i == maxNotReplayed {
			fmt.Fprintf(w, "not replayed: and %d more\n", len(rep.NotReplayed)-maxNotReplayed)
			break
		}
		fmt.Fprintf(w, "not replayed: %s (%s): %s\n", clean(s.RunID), clean(s.Workflow), clean(trimPrefixes(s.Reason)))
	}
	if rep.Unversioned > 0 {
		fmt.Fprintf(w, "note: %s no version (stored before versions were kept): checked as the newest version of %s the build has\n",
			count(rep.Unversioned, "run records", "runs record"), pronoun(rep.Unversioned, "its workflow", "their workflows"))
	}
	if rep.Sealed > 0 {
		fmt.Fprintf(w, "note: %s (in %s) %s sealed by a codec: %s shape was not checked\n",
			plural(rep.Sealed, "payload"), plural(rep.SealedRuns, "run"), pronoun(rep.Sealed, "is", "are"), pronoun(rep.Sealed, "its", "their"))
	}
	for _, old := range build.OldManifests() {
		fmt.Fprintf(w, "note: %s was written by an older stemgen, before manifests recorded events and autoversion: waits on event topics and autoversion steps were not checked (go generate rewrites it)\n", clean(old))
	}
	if names := retiredErrors(build); len(names) > 0 {
		fmt.Fprintf(w, "note: the build no longer declares %s %s (retired in its manifests): a run whose failure recorded %s still finishes, but errors.Is and errors.As against %s are false in this build\n",
			pronoun(len(names), "the error", "the errors"), clean(strings.Join(names, ", ")), pronoun(len(names), "it", "one"), pronoun(len(names), "it", "them"))
	}
	if len(rep.NotReplayed) > 0 && rep.OK() {
		hint := ""
		if c.codec == nil && slices.ContainsFunc(rep.NotReplayed, func(s runtime.SkippedRun) bool { return strings.Contains(s.Reason, "sealed") }) {
			hint = " (a run sealed by the workers' codec needs their key: --codec-key, --codec-key-file or $STEM_CODEC_KEY)"
		}
		fmt.Fprintf(w, "could not judge: %s in flight could not be replayed through the build's code%s\n", plural(len(rep.NotReplayed), "run"), hint)
	}
	if len(rep.Problems) == 0 {
		return nil
	}
	// What to do, once per fix, with the keys and how many runs it is for.
	type todo struct {
		keys []string
		runs map[string]bool
	}
	var order []string
	todos := map[string]*todo{}
	for _, p := range rep.Problems {
		t := todos[p.Fix]
		if t == nil {
			t = &todo{runs: map[string]bool{}}
			todos[p.Fix] = t
			order = append(order, p.Fix)
		}
		key, _, _ := strings.Cut(p.Key, "#") // one line for a step's iterations
		if key == "" {
			key = p.Workflow
		}
		if !slices.Contains(t.keys, key) {
			t.keys = append(t.keys, key)
		}
		t.runs[p.RunID] = true
	}
	fmt.Fprintln(w, "what to do:")
	for _, fix := range order {
		t := todos[fix]
		keys := t.keys
		if len(keys) > 5 {
			keys = append(keys[:5:5], fmt.Sprintf("and %d more", len(t.keys)-5))
		}
		fmt.Fprintf(w, "  %s (%s): %s\n", clean(strings.Join(keys, ", ")), plural(len(t.runs), "run"), clean(fix))
	}
	return nil
}

// retiredErrors returns the declared error names the build's manifests
// keep as retired and none of them declares now, sorted. Load parsed the
// manifests already: one that no longer reads contributes none.
func retiredErrors(build *check.Build) []string {
	current := map[string]bool{}
	var retired []string
	for _, path := range build.Manifests() {
		m, err := manifest.Read(path)
		if err != nil {
			continue
		}
		for _, e := range m.Errors {
			if !e.Retired {
				current[e.Key] = true
			} else if !slices.Contains(retired, e.Key) {
				retired = append(retired, e.Key)
			}
		}
	}
	retired = slices.DeleteFunc(retired, func(k string) bool { return current[k] })
	slices.Sort(retired)
	return retired
}

// count is n with its noun: "1 run record", "2 runs record".
func count(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

func pronoun(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

type jsonCheck struct {
	Manifests []string `json:"manifests"`
	// ManifestOnly: the runs were judged from the manifests alone.
	ManifestOnly bool `json:"manifest_only"`
	// OldManifests are the manifests of format 1 (see check.Build).
	OldManifests []string `json:"old_manifests"`
	// RetiredErrors are the declared error names the manifests keep as
	// retired (see retiredErrors).
	RetiredErrors []string          `json:"retired_errors"`
	Checked       int               `json:"checked"`
	Stranded      int               `json:"stranded"`
	Unversioned   int               `json:"unversioned"`
	Sealed        int               `json:"sealed"`
	SealedRuns    int               `json:"sealed_runs"`
	Problems      []jsonCheckResult `json:"problems"`
	// Replayed counts the runs replayed through the build's code;
	// NotReplayed lists those that could not be.
	Replayed    int               `json:"replayed"`
	NotReplayed []jsonNotReplayed `json:"not_replayed"`
}

type jsonNotReplayed struct {
	RunID    string `json:"run_id"`
	Workflow string `json:"workflow"`
	Reason   string `json:"reason"`
}

type jsonCheckResult struct {
	RunID     string `json:"run_id"`
	Workflow  string `json:"workflow"`
	Version   int    `json:"version"`
	CheckedAs int    `json:"checked_as"`
	Status    string `json:"status"`
	Kind      string `json:"kind"`
	Key       string `json:"key"`
	Path      string `json:"path,omitempty"`
	Reason    string `json:"reason"`
	Fix       string `json:"fix"`
}

func jsonCheckOf(build *check.Build, rep check.Report, manifestOnly bool) jsonCheck {
	out := jsonCheck{Manifests: build.Manifests(), ManifestOnly: manifestOnly, OldManifests: append([]string{}, build.OldManifests()...),
		RetiredErrors: append([]string{}, retiredErrors(build)...), Checked: rep.Checked, Stranded: rep.Stranded, Unversioned: rep.Unversioned,
		Sealed: rep.Sealed, SealedRuns: rep.SealedRuns, Problems: []jsonCheckResult{}, Replayed: rep.Replayed, NotReplayed: []jsonNotReplayed{}}
	for _, s := range rep.NotReplayed {
		out.NotReplayed = append(out.NotReplayed, jsonNotReplayed{RunID: s.RunID, Workflow: s.Workflow, Reason: s.Reason})
	}
	for _, p := range rep.Problems {
		out.Problems = append(out.Problems, jsonCheckResult{RunID: p.RunID, Workflow: p.Workflow, Version: p.Version, CheckedAs: p.CheckedAs,
			Status: string(p.Status), Kind: string(p.Kind), Key: p.Key, Path: p.Path, Reason: p.Reason, Fix: p.Fix})
	}
	return out
}
