package gen

import (
	"errors"
	"fmt"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/stemflow/stem/internal/manifest"
)

// The manifest, stem.manifest.json (package internal/manifest has its
// format), records the shape of every workflow's, step's and event's
// payloads by key, as of the last generation. A key whose shape changes
// without a version bump would make in-flight runs decode a payload of the
// old shape into the new type, so stemgen refuses it; so it refuses a step
// that becomes autoversion, or stops being one, under one key, whose
// checkpoint keys change. Entries for keys no longer in the code are kept,
// marked retired: stored runs may still hold them, so reusing such a key
// with another shape is refused too.
//
// A workflow's progress= shape is recorded too: runs store the value they
// published last, which callers decode into the type, so a changed shape
// needs a version bump. Adding or removing progress= does not (no stored
// run holds a value of another shape). A workflow's timeout=, queue= and
// retention= are not recorded: they are not shapes, changing them needs no
// bump, and the runtime records the queue and retention an engine
// registered in the store's catalog, where tools read them.

// readManifest reads the package's manifest, or returns nil when it has
// none.
func readManifest(lp *loadedPackage, d *diagnostics) *manifest.Manifest {
	path := filepath.Join(lp.dir, ManifestFileName)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		d.addPath(path, err.Error())
		return nil
	}
	m, err := manifest.Parse(b)
	if errors.Is(err, manifest.ErrNewerFormat) {
		d.addPath(path, fmt.Sprintf("cannot read the manifest (%v): run the stemgen of a module version at least as new as the one that wrote it", err))
		return nil
	}
	if err != nil {
		d.addPath(path, fmt.Sprintf("cannot read the manifest (%v); restore it from version control, or delete it to start over", err))
		return nil
	}
	return m
}

// checkManifest compares the package's shapes with the old manifest (nil
// when there is none), reporting every change that would strand in-flight
// runs at the annotation's token that fixes it, and returns the new
// manifest's content.
func checkManifest(m *Package, old *manifest.Manifest, d *diagnostics) []byte {
	next := &manifest.Manifest{}
	// A manifest of format 1 did not record autoversion: its steps'
	// Autoversion says nothing, and this generation records it.
	autoversionKnown := false
	if old != nil {
		next.Workflows = slices.Clone(old.Workflows)
		next.Steps = slices.Clone(old.Steps)
		next.Events = slices.Clone(old.Events)
		autoversionKnown = old.RecordsAutoversion()
	}
	changed := func(pos token.Pos, kind, key, what, was, now string) {
		if was != now {
			d.add(pos, "%s %s changed its %s type shape; bump version= (recorded %s, now %s)", kind, key, what, was, now)
		}
	}

	present := map[string]bool{}
	for _, w := range m.Workflows {
		if w.Ann.Name == "" {
			continue // reported by the parser
		}
		key := manifest.Key(w.Ann.Name, w.Ann.Version)
		present[key] = true
		if len(w.Params) != 2 || len(w.Results) != 2 || !typed(w.Params[1:], w.Results) {
			continue // reported by check
		}
		if w.Progress != nil && !w.Progress.valid() {
			continue // reported by check
		}
		e := manifest.Workflow{Key: key, Input: w.Input().Shape, Output: w.Output().Shape}
		if w.Progress != nil {
			e.Progress = w.Progress.Shape
		}
		pos := w.Ann.KeyPos("version")
		if i := index(next.Workflows, key, func(x manifest.Workflow) string { return x.Key }); i < 0 {
			next.Workflows = append(next.Workflows, e)
		} else {
			was := next.Workflows[i]
			changed(pos, "workflow", key, "input", was.Input, e.Input)
			changed(pos, "workflow", key, "output", was.Output, e.Output)
			if was.Progress != "" && e.Progress != "" {
				changed(pos, "workflow", key, "progress", was.Progress, e.Progress)
			}
			if e.Progress == "" {
				// Removing progress= keeps the recorded shape: adding it
				// back with another shape is a change.
				e.Progress = was.Progress
			}
			next.Workflows[i] = e
		}
	}
	for i := range next.Workflows {
		next.Workflows[i].Retired = !present[next.Workflows[i].Key]
	}

	clear(present)
	for _, s := range m.Steps {
		if s.Ann.Name == "" {
			continue
		}
		key := s.Ann.Key()
		present[key] = true
		if !typed(s.Params, s.Results) {
			continue
		}
		out := "()"
		if o := s.Output(); o != nil {
			out = o.Shape
		}
		e := manifest.Step{Key: key, Input: inputShape(s.Inputs()), Output: out, Autoversion: s.Ann.Autoversion}
		pos := s.Ann.KeyPos("version")
		if i := index(next.Steps, key, func(x manifest.Step) string { return x.Key }); i < 0 {
			next.Steps = append(next.Steps, e)
		} else {
			was := next.Steps[i]
			changed(pos, "step", key, "input", was.Input, e.Input)
			changed(pos, "step", key, "output", was.Output, e.Output)
			if autoversionKnown {
				checkAutoversion(s, was.Autoversion, d)
			}
			next.Steps[i] = e
		}
	}
	for i := range next.Steps {
		next.Steps[i].Retired = !present[next.Steps[i].Key]
	}

	clear(present)
	for _, ev := range m.Events {
		if ev.Ann.Topic == "" {
			continue
		}
		key := ev.Ann.Key()
		present[key] = true
		if ev.Type == nil || ev.Problem != "" || ev.TypeParams.IsValid() {
			continue // reported by check
		}
		e := manifest.Event{Key: key, Payload: ev.Shape}
		if i := index(next.Events, key, func(x manifest.Event) string { return x.Key }); i < 0 {
			next.Events = append(next.Events, e)
		} else {
			if was := next.Events[i]; was.Payload != e.Payload {
				d.add(ev.Ann.KeyPos("version"), "event %s changed its payload type shape (recorded %s, now %s): "+
					"runs waiting on topic %s, or holding a delivered payload, would decode the old shape into the new type; "+
					"give the new shape a new topic=, or bump version= once `stem check` shows no run in flight holds one",
					key, was.Payload, e.Payload, ev.Ann.Topic)
			}
			next.Events[i] = e
		}
	}
	for i := range next.Events {
		next.Events[i].Retired = !present[next.Events[i].Key]
	}
	return next.Encode()
}

// checkAutoversion reports a step whose autoversion flag differs from the
// one recorded for its key: its checkpoint keys would change under runs in
// flight.
func checkAutoversion(s *Step, was bool, d *diagnostics) {
	key := s.Ann.Key()
	const consequence = "so in-flight runs would run the step again under %s and fail as non-deterministic; bump version="
	switch {
	case s.Ann.Autoversion && !was:
		d.add(s.Ann.KeyPos("autoversion"), "step %s became autoversion: its checkpoint keys change from %s to %s#0, %s#1, ..., "+
			consequence, key, key, key, key, "new idempotency keys")
	case !s.Ann.Autoversion && was:
		d.add(s.Ann.KeyPos("autoversion"), "step %s is no longer autoversion: its checkpoint keys change from %s#0, %s#1, ... back to %s, "+
			consequence, key, key, key, key, "a new idempotency key")
	}
}

// index returns the index of the entry with key k, or -1.
func index[E any](entries []E, k string, key func(E) string) int {
	return slices.IndexFunc(entries, func(e E) bool { return key(e) == k })
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
