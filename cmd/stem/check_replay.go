package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/stemflow/stem/internal/manifest"
	"github.com/stemflow/stem/runtime"
)

// programReplayer is stem check's check.Replayer: on the first call it
// builds and runs the replay program in each module of the build (see
// check_program.go), merges their reports, and then answers every batch
// from them.
type programReplayer struct {
	modules []checkModule
	// store is the store URL and keys the codec keys, newest first, both
	// handed to the programs in their environment.
	store string
	keys  [][]byte
	// wd is what paths in messages are relative to.
	wd string

	ran    bool
	report runtime.ReplayReport
	err    error
}

// Replay answers for opts.RunIDs from the programs' report: their
// divergences, the runs they could not open, and as replayed the others
// they replayed. A run they did not see (no longer in flight when they
// ran) is neither.
func (p *programReplayer) Replay(ctx context.Context, opts runtime.ReplayOptions) (runtime.ReplayReport, error) {
	if !p.ran {
		p.ran = true
		p.report, p.err = p.replayAll(ctx)
	}
	if p.err != nil {
		return runtime.ReplayReport{}, p.err
	}
	var out runtime.ReplayReport
	want := map[string]bool{}
	for _, id := range opts.RunIDs {
		want[id] = true
	}
	for _, d := range p.report.Divergences {
		if want[d.RunID] {
			out.Divergences = append(out.Divergences, d)
		}
	}
	for _, s := range p.report.Skipped {
		if want[s.RunID] {
			out.Skipped = append(out.Skipped, s)
		}
	}
	// The programs count the runs they replayed, not which: share the
	// count out over the batches, at most one per run asked for.
	n := min(p.report.Replayed, len(opts.RunIDs)-len(out.Skipped))
	out.Replayed, p.report.Replayed = n, p.report.Replayed-n
	return out, nil
}

// moduleReport is one program's report and what its module registers.
type moduleReport struct {
	report runtime.ReplayReport
	// registered are the workflows its packages register (from their
	// manifests, which checkFresh found current); mains the workflows of
	// its main packages, which it could not import, with the package.
	registered map[string]bool
	mains      map[string]string
}

// replayAll runs the program of every module and merges their reports. A
// program replays every run in flight and names each run of a workflow
// it does not register; such a run is left to the module that registers
// it, or, when its workflow is declared in a main package no program can
// import, listed as not replayed.
func (p *programReplayer) replayAll(ctx context.Context) (runtime.ReplayReport, error) {
	var reports []moduleReport
	for _, m := range p.modules {
		r, err := p.replayModule(ctx, m)
		if err != nil {
			return runtime.ReplayReport{}, err
		}
		reports = append(reports, r)
	}
	registered, mains := map[string]bool{}, map[string]string{}
	for _, r := range reports {
		for w := range r.registered {
			registered[w] = true
		}
		for w, pkg := range r.mains {
			mains[w] = pkg
		}
	}
	var out runtime.ReplayReport
	seen := map[string]bool{}
	for _, r := range reports {
		out.Replayed += r.report.Replayed
		for _, d := range r.report.Divergences {
			if !r.registered[d.Workflow] {
				switch pkg, inMain := mains[d.Workflow]; {
				case registered[d.Workflow]:
					continue // another module's program replayed it
				case inMain:
					if !seen[d.RunID] {
						seen[d.RunID] = true
						out.Skipped = append(out.Skipped, runtime.SkippedRun{RunID: d.RunID, Workflow: d.Workflow,
							Reason: fmt.Sprintf("its workflow is declared in package main (%s), which stem check cannot import to replay it: move the workflow to a package of its own", pkg)})
					}
					continue
				}
			}
			if !seen[d.RunID] {
				seen[d.RunID] = true
				out.Divergences = append(out.Divergences, d)
			}
		}
		for _, s := range r.report.Skipped {
			if !seen[s.RunID] {
				seen[s.RunID] = true
				out.Skipped = append(out.Skipped, s)
			}
		}
	}
	return out, nil
}

// replayModule writes the replay program of one module in a directory at
// its root, builds and runs it, and removes the directory, whatever
// happens (an interrupt cancels ctx, which ends the go command or the
// program first).
func (p *programReplayer) replayModule(ctx context.Context, m checkModule) (moduleReport, error) {
	out := moduleReport{registered: map[string]bool{}, mains: map[string]string{}}
	regs, mains, err := programPackages(ctx, m.root, m.dirs)
	if err != nil {
		return out, p.interrupted(ctx, err)
	}
	// What each package registers, from its manifest.
	for i, dir := range m.dirs {
		names, err := currentWorkflows(m.manifests[i])
		if err != nil {
			return out, &cannotJudge{reason: err.Error()}
		}
		isMain := slices.ContainsFunc(mains, func(d string) bool { return sameDir(d, dir) })
		for _, n := range names {
			if isMain {
				out.mains[n] = p.rel(dir)
			} else {
				out.registered[n] = true
			}
		}
	}
	src, err := programSource(regs)
	if err != nil {
		return out, &cannotJudge{reason: err.Error()}
	}
	dir, err := os.MkdirTemp(m.root, programDir)
	if err != nil {
		return out, &cannotJudge{reason: fmt.Sprintf("write the replay program in module %s: %v", m.path, err)}
	}
	defer os.RemoveAll(dir)
	if err := os.WriteFile(filepath.Join(dir, "main.go"), src, 0o644); err != nil {
		return out, &cannotJudge{reason: fmt.Sprintf("write the replay program: %v", err)}
	}
	bin := filepath.Join(dir, "stem-check")
	if err := p.build(ctx, m, dir, bin); err != nil {
		return out, err
	}
	reportFile := filepath.Join(dir, "report.json")
	cmd := exec.CommandContext(ctx, bin)
	cmd.Dir = m.root
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool {
		name, _, _ := strings.Cut(kv, "=")
		return name == envStore || name == envReport || name == envCodecKeys
	})
	cmd.Env = append(cmd.Env, envStore+"="+p.store, envReport+"="+reportFile)
	if len(p.keys) > 0 {
		hexKeys := make([]string, len(p.keys))
		for i, k := range p.keys {
			hexKeys[i] = hex.EncodeToString(k)
		}
		cmd.Env = append(cmd.Env, envCodecKeys+"="+strings.Join(hexKeys, ","))
	}
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Run(); err != nil {
		return out, p.interrupted(ctx, &cannotJudge{details: lines(stderr.String()),
			reason: fmt.Sprintf("the replay program of module %s failed (%v)", m.path, err)})
	}
	data, err := os.ReadFile(reportFile)
	if err == nil {
		err = json.Unmarshal(data, &out.report)
	}
	if err != nil {
		return out, &cannotJudge{details: lines(stderr.String()), reason: fmt.Sprintf("the replay program of module %s wrote no report: %v", m.path, err)}
	}
	return out, nil
}

// build builds the program in dir into bin with the go command on PATH,
// in the module's root, so that the module's go.mod decides every
// version. A module whose go.sum lacks what the program needs beyond the
// module's own imports (the drivers of stores its code does not open) is
// built again from a copy of its go.mod and go.sum, in dir, that the go
// command may complete (-mod=mod): the module's own files are left as
// they are.
func (p *programReplayer) build(ctx context.Context, m checkModule, dir, bin string) error {
	root := m.root
	pkg := relDir(root, dir)
	// No symbol table or DWARF: the program is run once, and links faster.
	stderr, err := goCommand(ctx, root, "build", "-ldflags=-s -w", "-o", bin, pkg)
	if err != nil && needsSums(stderr) {
		modfile := filepath.Join(dir, "check.mod")
		if copyFile(filepath.Join(root, "go.mod"), modfile) == nil {
			copyFile(filepath.Join(root, "go.sum"), filepath.Join(dir, "check.sum"))
			again, err2 := goCommand(ctx, root, "build", "-mod=mod", "-modfile="+modfile, "-ldflags=-s -w", "-o", bin, pkg)
			if err2 == nil {
				return nil
			}
			stderr += again
		}
	}
	if err != nil {
		return p.interrupted(ctx, &cannotJudge{details: lines(stderr),
			reason: fmt.Sprintf("the replay program stem check wrote in module %s does not build", m.path)})
	}
	return nil
}

// needsSums reports whether the go command failed for want of go.sum
// entries or requirements of the program's imports.
func needsSums(stderr string) bool {
	return strings.Contains(stderr, "missing go.sum entry") || strings.Contains(stderr, "no required module provides package")
}

// goCommand runs the go command on PATH in dir and returns its combined
// output.
func goCommand(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

func copyFile(from, to string) error {
	data, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, data, 0o644)
}

// interrupted is why the check stopped when ctx ended (an interrupt or
// the command's timeout) rather than what failed for it, else err.
func (p *programReplayer) interrupted(ctx context.Context, err error) error {
	if s := stopped(ctx); s != nil {
		return s
	}
	return err
}

func (p *programReplayer) rel(path string) string {
	if r, err := filepath.Rel(p.wd, path); err == nil {
		return r
	}
	return path
}

// currentWorkflows returns the names of the workflows a manifest records
// a current (not retired) version of.
func currentWorkflows(name string) ([]string, error) {
	data, err := os.ReadFile(name)
	if err != nil {
		return nil, err
	}
	m, err := manifest.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", name, err)
	}
	var names []string
	for _, w := range m.Workflows {
		if n, _, ok := manifest.SplitKey(w.Key); ok && !w.Retired && !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	return names, nil
}

// lines splits a program's output into its lines, without the empty last.
func lines(s string) []string {
	s = strings.TrimRight(s, "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// codecKeys returns the keys of the payload codec, newest first, from the
// same flags and variable as globals.codec (nil without a key), for the
// replay program, which builds the same codec.
func (g *globals) codecKeys() ([][]byte, error) {
	switch {
	case g.codecKey != "":
		return decodeKey(g.codecKey, "--codec-key")
	case g.codecKeyFile != "":
		b, err := os.ReadFile(g.codecKeyFile)
		if err != nil {
			return nil, fmt.Errorf("--codec-key-file: %v", err)
		}
		keys, err := decodeKey(string(b), "the file "+g.codecKeyFile)
		if err != nil && validKeyLen(len(b)) {
			return [][]byte{b}, nil // the raw key bytes
		}
		return keys, err
	case os.Getenv("STEM_CODEC_KEY") != "":
		return decodeKey(os.Getenv("STEM_CODEC_KEY"), "$STEM_CODEC_KEY")
	}
	return nil, nil
}

// sameDir reports whether two absolute paths name one directory, through
// symbolic links too.
func sameDir(a, b string) bool {
	if a == b {
		return true
	}
	ra, err1 := filepath.EvalSymlinks(a)
	rb, err2 := filepath.EvalSymlinks(b)
	return err1 == nil && err2 == nil && ra == rb
}
