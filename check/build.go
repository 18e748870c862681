package check

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/stemflow/stem/internal/manifest"
)

// ManifestFile is the name of the manifest stemgen keeps beside each
// package's generated code, which Load looks for in directories.
const ManifestFile = manifest.FileName

// ErrNoManifest is returned by Load for a directory that holds no
// manifest (outside testdata, vendor and hidden directories).
var ErrNoManifest = errors.New("no " + ManifestFile + " found")

// Build is what one build of a program can run: the manifests of its
// packages, as stemgen last wrote them. Load or Add fills it; a Build is
// safe for concurrent use once filled.
type Build struct {
	pkgs []*pkg
	// workflows holds, by workflow name, every version some manifest
	// records.
	workflows map[string][]*workflow
	// topics holds, by event topic, whether some manifest has a current
	// (not retired) version of it.
	topics map[string]bool
	// updates holds, by update name, whether some manifest has a current
	// version of it.
	updates map[string]bool
	// noUpdates lists the manifests of a format before 5, which record no
	// updates: while the build has one, waits on updates are not checked.
	noUpdates []string
	// old lists the manifests of format 1, which record no events and no
	// step's autoversion.
	old []string
}

// pkg is one package's manifest.
type pkg struct {
	path  string
	steps map[string]*step
	// autoversionKnown is false for a manifest of format 1, which does not
	// record which steps are autoversion.
	autoversionKnown bool
}

type workflow struct {
	pkg     *pkg
	key     string
	version int
	retired bool
	// input and progress are the shapes of its input and progress=
	// type (progress nil when it has none).
	input, progress *manifest.Shape
}

type step struct {
	key         string
	retired     bool
	autoversion bool
	output      *manifest.Shape
}

// Load reads the manifests at paths into a Build: a path names a manifest
// file, or a directory searched recursively for files named ManifestFile
// (a pattern of the go command's form, "./...", names its directory),
// skipping directories named testdata or vendor and hidden ones (whose
// names begin with '.' or '_'), as the go command does. A path that does
// not exist, a directory without a manifest (ErrNoManifest) and a
// manifest that does not parse are errors that name the path and what is
// wrong.
func Load(paths ...string) (*Build, error) {
	if len(paths) == 0 {
		return nil, errors.New("no path to load manifests from")
	}
	b := &Build{}
	seen := map[string]bool{}
	for _, root := range paths {
		files, err := manifestsAt(root)
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			abs, err := filepath.Abs(f)
			if err != nil {
				abs = f
			}
			if seen[abs] {
				continue
			}
			seen[abs] = true
			data, err := os.ReadFile(f)
			if err != nil {
				return nil, err
			}
			if err := b.Add(f, data); err != nil {
				return nil, err
			}
		}
	}
	return b, nil
}

// manifestsAt returns the manifest files that path names, sorted.
func manifestsAt(root string) ([]string, error) {
	if root == "..." {
		root = "."
	} else if dir, ok := strings.CutSuffix(root, "/..."); ok {
		root = dir
		if root == "" {
			root = "/"
		}
	}
	info, err := os.Stat(root)
	if err != nil {
		return nil, err
	}
	if !info.IsDir() {
		return []string{root}, nil
	}
	var files []string
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && skipDir(d.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		if d.Name() == ManifestFile {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%s: %w (is it the root of the module, or a package that runs go generate with stemgen?)", root, ErrNoManifest)
	}
	slices.Sort(files)
	return files, nil
}

func skipDir(name string) bool {
	return name == "testdata" || name == "vendor" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")
}

// Add adds one package's manifest, read from name (which errors name),
// to the build. A manifest that does not parse, or holds a key or shape
// that is not well formed, is an error naming name and the entry; the
// build is then unchanged.
func (b *Build) Add(name string, data []byte) error {
	m, err := manifest.Parse(data)
	if errors.Is(err, manifest.ErrNewerFormat) {
		return fmt.Errorf("%s: %w: use a stem command of the same release as the stemgen that wrote it", name, err)
	}
	if err != nil {
		return fmt.Errorf("%s: not a manifest stemgen wrote: %v", name, err)
	}
	p := &pkg{path: name, steps: map[string]*step{}, autoversionKnown: m.RecordsAutoversion()}
	var wfs []*workflow
	topics := map[string]bool{}
	bad := func(kind, key, what string, err error) error {
		return fmt.Errorf("%s: %s %q: %s: %v", name, kind, key, what, err)
	}
	shape := func(kind, key, what, s string, optional bool) (*manifest.Shape, error) {
		if s == "" && optional {
			return nil, nil
		}
		sh, err := manifest.ParseShape(s)
		if err != nil {
			return nil, bad(kind, key, what, err)
		}
		return sh, nil
	}
	for _, w := range m.Workflows {
		_, v, ok := manifest.SplitKey(w.Key)
		if !ok {
			return bad("workflow", w.Key, "key", errors.New(`not of the form name@vN`))
		}
		in, err := shape("workflow", w.Key, "input", w.Input, false)
		if err != nil {
			return err
		}
		if _, err := shape("workflow", w.Key, "output", w.Output, false); err != nil {
			return err
		}
		progress, err := shape("workflow", w.Key, "progress", w.Progress, true)
		if err != nil {
			return err
		}
		wfs = append(wfs, &workflow{pkg: p, key: w.Key, version: v, retired: w.Retired, input: in, progress: progress})
	}
	for _, s := range m.Steps {
		if _, _, ok := manifest.SplitKey(s.Key); !ok {
			return bad("step", s.Key, "key", errors.New(`not of the form name@vN`))
		}
		if _, err := shape("step", s.Key, "input", s.Input, false); err != nil {
			return err
		}
		out, err := shape("step", s.Key, "output", s.Output, false)
		if err != nil {
			return err
		}
		if p.steps[s.Key] != nil {
			return bad("step", s.Key, "key", errors.New("listed twice"))
		}
		p.steps[s.Key] = &step{key: s.Key, retired: s.Retired, autoversion: s.Autoversion, output: out}
	}
	for _, e := range m.Events {
		topic, _, ok := manifest.SplitKey(e.Key)
		if !ok {
			return bad("event", e.Key, "key", errors.New(`not of the form topic@vN`))
		}
		if _, err := shape("event", e.Key, "payload", e.Payload, false); err != nil {
			return err
		}
		topics[topic] = topics[topic] || !e.Retired
	}
	updates := map[string]bool{}
	for _, u := range m.Updates {
		name, _, ok := manifest.SplitKey(u.Key)
		if !ok {
			return bad("update", u.Key, "key", errors.New(`not of the form name@vN`))
		}
		updates[name] = updates[name] || !u.Retired
	}
	if b.workflows == nil {
		b.workflows, b.topics, b.updates = map[string][]*workflow{}, map[string]bool{}, map[string]bool{}
	}
	if !m.RecordsInteractions() {
		b.noUpdates = append(b.noUpdates, name)
	}
	for u, current := range updates {
		b.updates[u] = b.updates[u] || current
	}
	b.pkgs = append(b.pkgs, p)
	if m.Format < 2 {
		b.old = append(b.old, name)
	}
	for _, w := range wfs {
		name, _, _ := manifest.SplitKey(w.key)
		b.workflows[name] = append(b.workflows[name], w)
	}
	for t, current := range topics {
		b.topics[t] = b.topics[t] || current
	}
	return nil
}

// Manifests returns the names of the manifests in the build, in the order
// added.
func (b *Build) Manifests() []string {
	out := make([]string, len(b.pkgs))
	for i, p := range b.pkgs {
		out[i] = p.path
	}
	return out
}

// OldManifests returns the names of the manifests written by a stemgen
// before manifests recorded events and which steps are autoversion
// (format 1): while the build has one, waits on event topics are not
// checked, nor the autoversion of that package's steps. Running go
// generate rewrites them.
func (b *Build) OldManifests() []string { return slices.Clone(b.old) }

// Workflows returns the names of the workflows the build records, sorted.
func (b *Build) Workflows() []string {
	names := make([]string, 0, len(b.workflows))
	for n := range b.workflows {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// version returns the build's record of a workflow's version: a current
// one before a retired one, nil when no manifest records it.
func (b *Build) version(name string, v int) *workflow {
	var found *workflow
	for _, w := range b.workflows[name] {
		if w.version == v && (found == nil || found.retired && !w.retired) {
			found = w
		}
	}
	return found
}

// newest returns the highest current version of a workflow, or nil.
func (b *Build) newest(name string) *workflow {
	var best *workflow
	for _, w := range b.workflows[name] {
		if !w.retired && (best == nil || w.version > best.version) {
			best = w
		}
	}
	return best
}

// current lists the current versions of a workflow, ascending.
func (b *Build) current(name string) []int {
	var vs []int
	for _, w := range b.workflows[name] {
		if !w.retired && !slices.Contains(vs, w.version) {
			vs = append(vs, w.version)
		}
	}
	slices.SortFunc(vs, cmp.Compare)
	return vs
}
