package main

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"slices"
	"strings"

	"github.com/stemflow/stem/check"
	"github.com/stemflow/stem/storage"
)

// exitStranded is stem check's exit code when it found runs in flight the
// build could not continue.
const exitStranded = 3

const checkDetail = `Reads the manifests of a build (the stem.manifest.json files stemgen keeps
beside each package's generated code) under each PATH (default "."),
searched recursively, skipping testdata, vendor and hidden directories,
or given as files; then reads every run in flight in the store (queued,
running, waiting or paused) and lists each one the build could not
continue:

  - a workflow the build does not have, or a version of it the build does
    not register (absent, or retired); a run stored before versions were
    kept is checked as its workflow's newest version
  - a step checkpoint whose key the build does not have, or retired, or
    that changed to or from autoversion
  - a wait on an event topic no //stem:event type of the build declares
  - an input, published progress or step result that does not decode
    into the build's type, with where in it (items[2].qty)

Each problem is one line: the run, its workflow@version and status, the
key and the reason; then a summary ("N of M in-flight runs could not
continue") and what to do. Payloads sealed by a codec cannot be checked:
they are counted. It only reads. --workflow limits it to the runs of
those workflows (comma-separated or repeated): a store shared by several
programs holds runs one build does not serve.

Put it in CI before a deploy. Exit status: 0 every run can continue; 3
some cannot (listed); 2 bad input (a missing path, a directory without a
manifest, a manifest that does not parse: the error says which file and
what); 1 the store could not be read.`

func checkCmd(fs *flag.FlagSet) func(*call, []string) error {
	var given []string
	fs.Func("workflow", "only runs of workflow `NAME` (comma-separated, or repeat the flag)", func(s string) error {
		given = append(given, s)
		return nil
	})
	return func(c *call, paths []string) error {
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
		rep, err := check.Store(c.ctx, c.store, build, check.Options{Workflows: workflows})
		if err != nil {
			return err
		}
		if c.out.json {
			if err := c.out.encode(jsonCheckOf(build, rep)); err != nil {
				return err
			}
		} else if err := printCheck(c, build, rep); err != nil {
			return err
		}
		if !rep.OK() {
			return exitCode(exitStranded)
		}
		return nil
	}
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

func printCheck(c *call, build *check.Build, rep check.Report) error {
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
	// OldManifests are the manifests of format 1 (see check.Build).
	OldManifests []string          `json:"old_manifests"`
	Checked      int               `json:"checked"`
	Stranded     int               `json:"stranded"`
	Unversioned  int               `json:"unversioned"`
	Sealed       int               `json:"sealed"`
	SealedRuns   int               `json:"sealed_runs"`
	Problems     []jsonCheckResult `json:"problems"`
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

func jsonCheckOf(build *check.Build, rep check.Report) jsonCheck {
	out := jsonCheck{Manifests: build.Manifests(), OldManifests: append([]string{}, build.OldManifests()...), Checked: rep.Checked, Stranded: rep.Stranded, Unversioned: rep.Unversioned,
		Sealed: rep.Sealed, SealedRuns: rep.SealedRuns, Problems: []jsonCheckResult{}}
	for _, p := range rep.Problems {
		out.Problems = append(out.Problems, jsonCheckResult{RunID: p.RunID, Workflow: p.Workflow, Version: p.Version, CheckedAs: p.CheckedAs,
			Status: string(p.Status), Kind: string(p.Kind), Key: p.Key, Path: p.Path, Reason: p.Reason, Fix: p.Fix})
	}
	return out
}
