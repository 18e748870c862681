package gen

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"go/token"
	"os"
	"path/filepath"
	"slices"
)

// manifest is stem.manifest.json: the shape of every step's and workflow's
// inputs and outputs (and of a workflow's progress), by checkpoint key, as
// of the last generation. A key
// whose shape changes without a version bump would make in-flight runs
// decode a result (or input) of the old shape into the new type, so
// stemgen refuses it. Entries for keys no longer in the code are kept:
// stored runs may still hold them, so reusing such a key with another shape
// is refused too.
type manifest struct {
	Comment   string          `json:"comment"`
	Workflows []manifestEntry `json:"workflows"`
	Steps     []manifestEntry `json:"steps"`
}

// manifestEntry is the shape of one checkpoint key ("charge@v2") or
// versioned workflow name ("orders.fulfil@v1").
//
// Progress is the shape of a workflow's progress= type: runs store the
// value they published last, which callers decode into the type, so a
// changed shape needs a version bump too. Adding or removing progress= does
// not (no stored run holds a value of another shape). A workflow's
// timeout=, queue= and retention= are not recorded: they are not shapes,
// changing them needs no bump, and the runtime records the queue and
// retention an engine registered in the store's catalog, where tools read
// them. Recording them here too would also add fields an older stemgen
// refuses (the manifest is read with DisallowUnknownFields).
type manifestEntry struct {
	Key      string `json:"key"`
	Input    string `json:"input"`
	Output   string `json:"output"`
	Progress string `json:"progress,omitempty"`
}

const manifestComment = "Maintained by stemgen: the shape of each step's and workflow's inputs and outputs (and of a workflow's progress), by key. " +
	"A changed shape needs a version bump. Commit this file; do not edit it."

// readManifest reads the package's manifest, or returns nil when it has
// none.
func readManifest(lp *loadedPackage, d *diagnostics) *manifest {
	path := filepath.Join(lp.dir, ManifestFileName)
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		d.addPath(path, err.Error())
		return nil
	}
	var m manifest
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		d.addPath(path, fmt.Sprintf("cannot read the manifest (%v); restore it from version control, or delete it to start over", err))
		return nil
	}
	return &m
}

// checkManifest compares the package's shapes with the old manifest,
// reporting changed shapes at the annotation's version= (or the directive),
// and returns the new manifest's content.
func checkManifest(m *Package, old *manifest, d *diagnostics) []byte {
	next := &manifest{Comment: manifestComment}
	if old != nil {
		next.Workflows = slices.Clone(old.Workflows)
		next.Steps = slices.Clone(old.Steps)
	}
	merge := func(entries *[]manifestEntry, e manifestEntry, kind string, pos token.Pos) {
		i := slices.IndexFunc(*entries, func(x manifestEntry) bool { return x.Key == e.Key })
		if i < 0 {
			*entries = append(*entries, e)
			return
		}
		was := (*entries)[i]
		if was.Input != e.Input {
			d.add(pos, "%s %s changed its input type shape; bump version= (recorded %s, now %s)", kind, e.Key, was.Input, e.Input)
		}
		if was.Output != e.Output {
			d.add(pos, "%s %s changed its output type shape; bump version= (recorded %s, now %s)", kind, e.Key, was.Output, e.Output)
		}
		if was.Progress != "" && e.Progress != "" && was.Progress != e.Progress {
			d.add(pos, "%s %s changed its progress type shape; bump version= (recorded %s, now %s)", kind, e.Key, was.Progress, e.Progress)
		}
		if e.Progress == "" && was.Progress != "" {
			// Removing progress= keeps the recorded shape: adding it back
			// with another shape is a change.
			e.Progress = was.Progress
		}
		(*entries)[i] = e
	}
	for _, w := range m.Workflows {
		if len(w.Params) != 2 || len(w.Results) != 2 || !typed(w.Params[1:], w.Results) {
			continue // reported by check
		}
		if w.Progress != nil && !w.Progress.valid() {
			continue // reported by check
		}
		key := fmt.Sprintf("%s@v%d", w.Ann.Name, w.Ann.Version)
		e := manifestEntry{Key: key, Input: w.Input().Shape, Output: w.Output().Shape}
		if w.Progress != nil {
			e.Progress = w.Progress.Shape
		}
		merge(&next.Workflows, e, "workflow", w.Ann.KeyPos("version"))
	}
	for _, s := range m.Steps {
		if !typed(s.Params, s.Results) {
			continue
		}
		out := "()"
		if o := s.Output(); o != nil {
			out = o.Shape
		}
		merge(&next.Steps, manifestEntry{Key: s.Ann.Key(), Input: inputShape(s.Inputs()), Output: out}, "step", s.Ann.KeyPos("version"))
	}
	byKey := func(x, y manifestEntry) int { return cmp.Compare(x.Key, y.Key) }
	slices.SortFunc(next.Workflows, byKey)
	slices.SortFunc(next.Steps, byKey)
	if next.Workflows == nil {
		next.Workflows = []manifestEntry{}
	}
	if next.Steps == nil {
		next.Steps = []manifestEntry{}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(next); err != nil {
		panic(err) // plain strings always encode
	}
	return buf.Bytes()
}

// typed reports whether every parameter and result type-checked.
func typed(lists ...[]*Param) bool {
	for _, ps := range lists {
		for _, p := range ps {
			if p.Role == RoleInvalid {
				return false
			}
		}
	}
	return true
}
