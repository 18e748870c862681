package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"

	"golang.org/x/mod/modfile"

	"github.com/stemflow/stem/internal/gen"
)

// exitCannotJudge is stem check's exit code when it could not judge the
// runs: the build's generated code is stale or does not generate, the
// replay program failed, or runs could not be replayed.
const exitCannotJudge = 4

// cannotJudge is why stem check could not judge the build: details (the
// generator's diagnostics, the files out of date, a program's stderr),
// then the reason in one line.
type cannotJudge struct {
	details []string
	reason  string
}

func (c *cannotJudge) Error() string { return "could not judge: " + c.reason }

// stopped says why the check stopped once ctx ended: an interrupt, or
// the command's timeout; nil while ctx goes on.
func stopped(ctx context.Context) *cannotJudge {
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return &cannotJudge{reason: "the check ran out of time"}
	case ctx.Err() != nil:
		return &cannotJudge{reason: "interrupted"}
	}
	return nil
}

// checkModule is one module of the build: its root (where its go.mod is),
// its path, and the directories of its packages that have a manifest.
type checkModule struct {
	root, path string
	// dirs are absolute, sorted; manifests are the manifests' names as
	// loaded, in the same order.
	dirs      []string
	manifests []string
}

// manifestOnlyHint says how to judge anyway, on a machine or a module
// where the code cannot be generated or built.
const manifestOnlyHint = "pass --manifest-only to judge from the manifests alone"

// modulesOf groups the manifests by the module they belong to, sorted by
// root. A manifest outside a module cannot be judged against its code.
func modulesOf(manifests []string) ([]checkModule, error) {
	byRoot := map[string]*checkModule{}
	var roots []string
	for _, name := range manifests {
		abs, err := filepath.Abs(name)
		if err != nil {
			return nil, &cannotJudge{reason: fmt.Sprintf("%s: %v", name, err)}
		}
		dir := filepath.Dir(abs)
		root := moduleRootOf(dir)
		if root == "" {
			return nil, &cannotJudge{reason: fmt.Sprintf("%s is not in a Go module (no go.mod in its directory or above): its code cannot be generated or replayed; %s", name, manifestOnlyHint)}
		}
		m := byRoot[root]
		if m == nil {
			gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
			if err != nil {
				return nil, &cannotJudge{reason: err.Error()}
			}
			path := modfile.ModulePath(gomod)
			if path == "" {
				return nil, &cannotJudge{reason: fmt.Sprintf("%s names no module", filepath.Join(root, "go.mod"))}
			}
			m = &checkModule{root: root, path: path}
			byRoot[root] = m
			roots = append(roots, root)
		}
		if !slices.Contains(m.dirs, dir) {
			m.dirs = append(m.dirs, dir)
			m.manifests = append(m.manifests, name)
		}
	}
	slices.Sort(roots)
	out := make([]checkModule, len(roots))
	for i, r := range roots {
		out[i] = *byRoot[r]
	}
	return out, nil
}

// moduleRootOf returns the directory of the go.mod at or above dir, or "".
func moduleRootOf(dir string) string {
	for {
		if st, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil && !st.IsDir() {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

// needGo returns why stem check cannot generate or build the module's
// code when the go command is not on PATH.
func needGo() error {
	if _, err := exec.LookPath("go"); err != nil {
		return &cannotJudge{reason: fmt.Sprintf("no go command on PATH (%v): stem check generates and builds the module's code to judge it; %s", err, manifestOnlyHint)}
	}
	return nil
}

// checkFresh runs the generator, in memory, on the packages of each
// module that have a manifest, and refuses to judge (cannotJudge) when it
// reports a problem (the code does not generate: a refused shape change,
// say) or when a file it generates differs from the one on disk, as
// stemgen -check judges: a manifest that is not what the code generates
// does not describe the build. Paths are shown relative to wd.
func checkFresh(ctx context.Context, mods []checkModule, wd string) error {
	rel := func(path string) string {
		if r, err := filepath.Rel(wd, path); err == nil {
			return r
		}
		return path
	}
	var details []string
	diagnostics, stale := 0, 0
	for _, m := range mods {
		res, err := gen.Generate(ctx, gen.Config{Dir: m.root, Patterns: m.dirs})
		if err != nil {
			if s := stopped(ctx); s != nil {
				return s
			}
			return &cannotJudge{reason: fmt.Sprintf("the code of module %s does not load: %v", m.path, err)}
		}
		for _, d := range res.Diagnostics {
			details = append(details, d.Rel(wd))
			diagnostics++
		}
		generated := map[string]bool{}
		for _, f := range res.Files {
			generated[f.Path] = true
			old, err := os.ReadFile(f.Path)
			exists := err == nil
			if err != nil && !errors.Is(err, os.ErrNotExist) {
				return &cannotJudge{reason: fmt.Sprintf("%s: %v", rel(f.Path), err)}
			}
			if f.Content == nil && exists || f.Content != nil && (!exists || !bytes.Equal(old, f.Content)) {
				details = append(details, fmt.Sprintf("%s is out of date: run go generate", rel(f.Path)))
				stale++
			}
		}
		if len(res.Diagnostics) > 0 {
			continue // the packages with problems generate nothing
		}
		for i, dir := range m.dirs {
			if path := filepath.Join(dir, gen.ManifestFileName); !generated[path] {
				details = append(details, fmt.Sprintf("%s: the code in its directory generates no manifest (no //stem: annotation, or no Go package there)", m.manifests[i]))
				stale++
			}
		}
	}
	switch {
	case diagnostics > 0:
		return &cannotJudge{details: details, reason: fmt.Sprintf("the build's code does not generate (%s): its manifests do not describe it; fix the code, or %s as they are", plural(diagnostics, "error"), manifestOnlyHint)}
	case stale > 0:
		return &cannotJudge{details: details, reason: fmt.Sprintf("%s out of date: the build's manifests may not describe its code; run go generate, or %s as they are", pronoun(stale, "a generated file is", fmt.Sprintf("%d generated files are", stale)), manifestOnlyHint)}
	}
	return nil
}
