package gen

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/stemflow/stem/internal/manifest"
)

// The manifest, stem.manifest.json (package internal/manifest has its
// format), records the shape of every workflow's, step's, event's,
// update's and stream's payloads by key, as of the last generation. Runs in flight hold payloads
// of the recorded shapes and the next build decodes them, so a key whose
// shape changes is judged the way encoding/json decodes (manifest.Compare):
// a compatible change (a field added, a number widened) is recorded and
// needs nothing; a breaking one (a field removed or renamed, a number
// narrowed, another kind) is refused, saying what a run in flight would do
// and, first, the safe route: a new workflow version beside the old one,
// which drains the runs started under it. stemgen refuses too a step that
// becomes autoversion, or stops being one, under one key, whose checkpoint
// keys change. Entries for keys no longer in the code are kept, marked
// retired: stored runs may still hold them, so reusing such a key with an
// incompatible shape is refused too.
//
// A workflow's progress= shape is recorded too: runs store the value they
// published last, which callers decode into the type. Adding or removing
// progress= needs no bump (no stored run holds a value of another shape).
// A workflow's timeout=, queue= and retention= are not recorded: they are
// not shapes, changing them needs no bump, and the runtime records the
// queue and retention an engine registered in the store's catalog, where
// tools read them.
//
// An update's request and reply shapes are recorded under its name and
// version, judged like an event's payload: a run holds requests it has
// not taken yet, and callers read stored replies. A stream's value shape
// likewise: readers decode the values stored in every run still kept.
//
// Declared errors (//stem:error) are recorded too, by durable name: a
// value as manifest.ValueShape, a type as the shape of the fields a failure
// records. Stored failures hold the name and those fields, and a build
// reads them back into what the name declares then, so a type's shape is
// judged like a payload's, and a name that moves from a value to a type,
// or back, is refused: both need a new name. A name the code no longer
// declares is kept, retired, like a key.

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
	// Autoversion says nothing, and this generation records it. One before
	// format 3 did not record the sizes of numbers.
	autoversionKnown := false
	j := &judge{d: d}
	if old != nil {
		next.Workflows = slices.Clone(old.Workflows)
		next.Steps = slices.Clone(old.Steps)
		next.Events = slices.Clone(old.Events)
		next.Updates = slices.Clone(old.Updates)
		next.Streams = slices.Clone(old.Streams)
		next.Errors = slices.Clone(old.Errors)
		autoversionKnown = old.RecordsAutoversion()
		j.opts.OldUnsized = !old.RecordsSizes()
	}

	recorded := recordedAttrs(old)
	present := map[string]bool{}
	for _, w := range m.Workflows {
		if w.Ann.Name == "" {
			continue // reported by the parser
		}
		attrs := j.attrs(w, recorded)
		key := manifest.Key(w.Ann.Name, w.Ann.Version)
		present[key] = true
		if len(w.Params) != 2 || len(w.Results) != 2 || !typed(w.Params[1:], w.Results) {
			continue // reported by check
		}
		if w.Progress != nil && !w.Progress.valid() {
			continue // reported by check
		}
		e := manifest.Workflow{Key: key, Input: w.Input().Shape, Output: w.Output().Shape, Attributes: attrs}
		if w.Progress != nil {
			e.Progress = w.Progress.Shape
		}
		if i := index(next.Workflows, key, func(x manifest.Workflow) string { return x.Key }); i < 0 {
			next.Workflows = append(next.Workflows, e)
		} else {
			was := next.Workflows[i]
			ok := j.workflow(w, key, "input", was.Input, e.Input)
			ok = j.workflow(w, key, "output", was.Output, e.Output) && ok
			if was.Progress != "" && e.Progress != "" {
				ok = j.workflow(w, key, "progress", was.Progress, e.Progress) && ok
			}
			if e.Progress == "" {
				// Removing progress= keeps the recorded shape: adding it
				// back is judged against it.
				e.Progress = was.Progress
			}
			e.Attributes = retireAttrs(e.Attributes, was.Attributes)
			if ok {
				next.Workflows[i] = e
			}
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
		// A transactional step's transaction is not an input, and tx is
		// not recorded: a checkpoint reads back the same with or without
		// it, and its key does not change, so adding or removing it
		// breaks no run in flight.
		e := manifest.Step{Key: key, Input: inputShape(s.Inputs()), Output: out, Autoversion: s.Ann.Autoversion}
		if i := index(next.Steps, key, func(x manifest.Step) string { return x.Key }); i < 0 {
			next.Steps = append(next.Steps, e)
		} else {
			was := next.Steps[i]
			ok := j.step(m, s, "input", was.Input, e.Input)
			ok = j.step(m, s, "output", was.Output, e.Output) && ok
			if autoversionKnown {
				checkAutoversion(s, was.Autoversion, d)
			}
			if ok {
				next.Steps[i] = e
			}
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
		} else if j.event(ev, next.Events[i].Payload, e.Payload) {
			next.Events[i] = e
		}
	}
	for i := range next.Events {
		next.Events[i].Retired = !present[next.Events[i].Key]
	}

	clear(present)
	for _, u := range m.Updates {
		if u.Ann.Name == "" || u.Ann.Reply == "" {
			continue // reported by the parser
		}
		key := u.Ann.Key()
		present[key] = true
		if u.Type == nil || u.Problem != "" || u.TypeParams.IsValid() || !u.Reply.valid() {
			continue // reported by check
		}
		e := manifest.Update{Key: key, Request: u.Shape, Reply: u.Reply.Shape}
		if i := index(next.Updates, key, func(x manifest.Update) string { return x.Key }); i < 0 {
			next.Updates = append(next.Updates, e)
		} else {
			was := next.Updates[i]
			ok := j.update(u, "request", was.Request, e.Request)
			ok = j.update(u, "reply", was.Reply, e.Reply) && ok
			if ok {
				next.Updates[i] = e
			}
		}
	}
	for i := range next.Updates {
		next.Updates[i].Retired = !present[next.Updates[i].Key]
	}

	clear(present)
	for _, s := range m.Streams {
		if s.Ann.Name == "" {
			continue
		}
		key := s.Ann.Key()
		present[key] = true
		if s.Type == nil || s.Problem != "" || s.TypeParams.IsValid() {
			continue // reported by check
		}
		e := manifest.Stream{Key: key, Value: s.Shape}
		if i := index(next.Streams, key, func(x manifest.Stream) string { return x.Key }); i < 0 {
			next.Streams = append(next.Streams, e)
		} else if j.stream(s, next.Streams[i].Value, e.Value) {
			next.Streams[i] = e
		}
	}
	for i := range next.Streams {
		next.Streams[i].Retired = !present[next.Streams[i].Key]
	}

	clear(present)
	for _, de := range m.Errors {
		if de.Ann.Name == "" || present[de.Ann.Name] {
			continue // reported by the parser, or by checkErrors
		}
		key := de.Ann.Name
		present[key] = true
		if de.Problem != "" || de.IsType && de.Shape == "" {
			continue // reported by checkErrors, or by the type checker
		}
		e := manifest.Error{Key: key, Shape: manifest.ValueShape}
		if de.IsType {
			e.Shape = de.Shape
		}
		if i := index(next.Errors, key, func(x manifest.Error) string { return x.Key }); i < 0 {
			next.Errors = append(next.Errors, e)
		} else if j.declaredError(de, next.Errors[i].Shape, e.Shape) {
			next.Errors[i] = e
		}
	}
	for i := range next.Errors {
		next.Errors[i].Retired = !present[next.Errors[i].Key]
	}
	return next.Encode()
}

// recordedAttr is a search attribute's type as a manifest recorded it,
// and the workflow key it is recorded for.
type recordedAttr struct{ typ, key string }

// recordedAttrs returns the type of every search attribute the manifest
// old (nil for none) records, on any workflow, retired or not: runs
// stored with an attribute hold values of that type while they are kept.
// Of two types recorded for one name (which stemgen never writes), the
// first, by workflow key, counts.
func recordedAttrs(old *manifest.Manifest) map[string]recordedAttr {
	out := map[string]recordedAttr{}
	if old == nil {
		return out
	}
	for _, w := range old.Workflows {
		for _, a := range w.Attributes {
			if _, ok := out[a.Name]; !ok {
				out[a.Name] = recordedAttr{a.Type, w.Key}
			}
		}
	}
	return out
}

// attrs returns the manifest's entries for workflow w's search
// attributes, reporting an attribute whose type differs from the one
// recorded for its name: runs stored with it hold values of the old type.
// Attributes whose type is not known (check reports them) are left out.
func (j *judge) attrs(w *Workflow, recorded map[string]recordedAttr) []manifest.Attribute {
	var out []manifest.Attribute
	for _, a := range w.Attrs {
		if a.Ann.Name == "" || !a.typeKnown() {
			continue
		}
		if r, ok := recorded[a.Ann.Name]; ok && r.typ != string(a.Type) {
			j.d.add(attrTypePos(a), "search attribute %s changed its type from %s (recorded for %s) to %s: runs stored with it hold "+
				"%s values, which a filter on %s in the new type would not match, nor the dashboard read. Give the attribute of the new "+
				"type a new name=; %s stays recorded as a %s while runs may hold it",
				a.Ann.Name, r.typ, r.key, a.Type, r.typ, a.Ann.Name, a.Ann.Name, r.typ)
			continue
		}
		out = append(out, manifest.Attribute{Name: a.Ann.Name, Type: string(a.Type), From: a.JSONPath})
	}
	return out
}

// retireAttrs returns a workflow's search attributes now, followed by
// those it recorded before and no longer declares, marked retired, in
// their recorded order: a name keeps its type while runs may hold it.
func retireAttrs(now, was []manifest.Attribute) []manifest.Attribute {
	for _, a := range was {
		if !slices.ContainsFunc(now, func(b manifest.Attribute) bool { return b.Name == a.Name }) {
			a.Retired = true
			now = append(now, a)
		}
	}
	return now
}

// judge judges changed shapes, reporting breaking ones.
type judge struct {
	d    *diagnostics
	opts manifest.CompareOptions
}

// compare returns what breaks when a value of shape was is decoded as
// shape now: nothing when they are equal or the change is compatible. A
// shape that does not parse (an edited manifest) is one break.
func (j *judge) compare(was, now string) []manifest.Break {
	if was == now {
		return nil
	}
	old, err := manifest.ParseShape(was)
	if err != nil {
		return []manifest.Break{{Was: was, Why: fmt.Sprintf("the recorded shape does not read (%v); restore the manifest from version control", err)}}
	}
	next, err := manifest.ParseShape(now)
	if err != nil {
		return []manifest.Break{{Was: was, Now: now, Why: "the shapes differ"}}
	}
	return manifest.Compare(old, next, j.opts)
}

// breaks writes a shape's breaks for a message: the first three, and how
// many more. A break of the whole value says only why: the message says
// what the shape was and is.
func breaks(bs []manifest.Break) string {
	var parts []string
	for i, b := range bs {
		if i == 3 {
			parts = append(parts, fmt.Sprintf("and %d more", len(bs)-i))
			break
		}
		if b.Path == "" {
			parts = append(parts, b.Why)
		} else {
			parts = append(parts, b.String())
		}
	}
	return strings.Join(parts, "; ")
}

// workflow judges a change of workflow w's input, output or progress
// shape, reporting it at version= (or the directive) when it breaks, and
// returns whether it is compatible.
func (j *judge) workflow(w *Workflow, key, what, was, now string) bool {
	bs := j.compare(was, now)
	if len(bs) == 0 {
		return true
	}
	does := map[string]string{
		"input":    "a run decodes its stored input again on every resume",
		"output":   "callers decode the stored output of its runs",
		"progress": "callers decode the progress its runs published last",
	}[what]
	j.d.add(w.Ann.KeyPos("version"), "workflow %s changed its %s shape from %s to %s, incompatibly for runs in flight: %s (%s). "+
		"First, add a new workflow version= (keep the old function, annotated with the old version, until its runs finish): "+
		"annotate the changed function version=%d, and keep the old one beside it, renamed, annotated name=%s version=%d, "+
		"with renamed copies of the types as they were; "+
		"only second, bump version= alone once `stem check` shows no run of %s in flight",
		key, what, was, now, breaks(bs), does, w.Ann.Version+1, w.Ann.Name, w.Ann.Version, key)
	return false
}

// step judges a change of step s's input or output shape, reporting it at
// version= (or the directive) when it breaks, and returns whether it is
// compatible.
func (j *judge) step(m *Package, s *Step, what, was, now string) bool {
	bs := j.compare(was, now)
	if len(bs) == 0 {
		return true
	}
	key := s.Ann.Key()
	does := fmt.Sprintf("a run that checkpointed %s decodes that checkpoint again on every replay", key)
	if what == "input" {
		does = fmt.Sprintf("a run that checkpointed %s replays the result of a call made with an input of the old shape", key)
	}
	var callers []string
	for _, w := range m.Workflows {
		if w.calls(s) && !slices.Contains(callers, w.Ann.Name) {
			callers = append(callers, w.Ann.Name)
		}
	}
	which := "each workflow that calls it"
	if len(callers) > 0 {
		which = strings.Join(callers, " and ")
	}
	j.d.add(s.Ann.KeyPos("version"), "step %s changed its %s shape from %s to %s, incompatibly for runs in flight: %s (%s). "+
		"First, add a new workflow version= to %s (keep the old function, annotated with the old version, until its runs finish), "+
		"whose function calls the changed step at a new version= while the old function calls the step as it was, at version=%d, "+
		"with renamed copies of the types as they were; "+
		"only second, bump the step's version= once `stem check` shows no run holds %s (a bump re-runs the step in every run in flight)",
		key, what, was, now, breaks(bs), does, which, s.Ann.Version, key)
	return false
}

// event judges a change of event ev's payload shape, reporting it at
// version= (or the directive) when it breaks, and returns whether it is
// compatible.
func (j *judge) event(ev *Event, was, now string) bool {
	bs := j.compare(was, now)
	if len(bs) == 0 {
		return true
	}
	j.d.add(ev.Ann.KeyPos("version"), "event %s changed its payload shape from %s to %s, incompatibly for runs in flight: %s "+
		"(a run waiting on topic %s, or holding a delivered payload, decodes it into the new type). "+
		"First, give the new shape a new topic= (keep the old event type, with its topic, while runs wait on it); "+
		"only second, bump version= once `stem check` shows no run in flight waits on or holds one",
		ev.Ann.Key(), was, now, breaks(bs), ev.Ann.Topic)
	return false
}

// update judges a change of update u's request or reply shape, reporting
// it at version= (or the directive) when it breaks, and returns whether
// it is compatible.
func (j *judge) update(u *Update, what, was, now string) bool {
	bs := j.compare(was, now)
	if len(bs) == 0 {
		return true
	}
	does := fmt.Sprintf("a run holding an update %s it has not taken yet decodes its request into the new type", u.Ann.Name)
	if what == "reply" {
		does = fmt.Sprintf("a caller waiting for the reply to an update %s, or reading a stored one, decodes it into the new type", u.Ann.Name)
	}
	j.d.add(u.Ann.KeyPos("version"), "update %s changed its %s shape from %s to %s, incompatibly for updates in flight: %s (%s). "+
		"First, give the new shape a new name= (keep the old update type, with its name, while runs in flight may take "+
		"it and callers read its replies); only second, bump version= once no run in flight holds an update %s it has "+
		"not replied to",
		u.Ann.Key(), what, was, now, breaks(bs), does, u.Ann.Name)
	return false
}

// stream judges a change of stream s's value shape, reporting it at
// version= (or the directive) when it breaks, and returns whether it is
// compatible.
func (j *judge) stream(s *Stream, was, now string) bool {
	bs := j.compare(was, now)
	if len(bs) == 0 {
		return true
	}
	j.d.add(s.Ann.KeyPos("version"), "stream %s changed its value shape from %s to %s, incompatibly for the values "+
		"stored: %s (readers decode the values of stream %s of every run still kept, ended or not, into the new type). "+
		"First, give the new shape a new name= (keep the old value type, with its name, while readers may read runs "+
		"that wrote it); only second, bump version= once no run kept holds values of the old shape",
		s.Ann.Key(), was, now, breaks(bs), s.Ann.Name)
	return false
}

// declaredError judges a change of declared error e's recorded shape (a
// value's manifest.ValueShape, or a type's fields), reporting it at name=
// when stored failures would no longer match it as they did, and returns
// whether it is compatible. Failures hold the name, and a type's fields as
// JSON, which every build that reads them back decodes into the type the
// name declares then.
func (j *judge) declaredError(e *DeclaredError, was, now string) bool {
	const fix = "Declare the changed error under a new name= " +
		"(keep the old declaration, renamed in Go, with name=%s, while stored runs may hold failures recorded with it; " +
		"code matching the old failures keeps matching it beside the new one); " +
		"only second, drop the old declaration once `stem check` shows no run in flight recorded it"
	key := e.Ann.Name
	wasValue, nowValue := was == manifest.ValueShape, now == manifest.ValueShape
	switch {
	case wasValue && nowValue:
		return true
	case wasValue:
		j.d.add(e.Ann.ValuePos("name"), "error %s was declared on a value (matched with errors.Is) and is now declared on type %s (matched with errors.As): "+
			"failures stored with it hold no fields, so errors.Is against the old value is false for them and errors.As rebuilds a zero %s. "+fix,
			key, e.GoName, e.GoName, key)
		return false
	case nowValue:
		j.d.add(e.Ann.ValuePos("name"), "error %s was declared on a type (matched with errors.As) and is now declared on value %s (matched with errors.Is): "+
			"failures stored with it hold the old type's fields, which errors.As no longer rebuilds, and errors.Is matches %s for them instead. "+fix,
			key, e.GoName, e.GoName, key)
		return false
	}
	bs := j.compare(was, now)
	if len(bs) == 0 {
		return true
	}
	j.d.add(e.Ann.ValuePos("name"), "error type %s (%s) changed its shape from %s to %s, incompatibly for failures stored with it: %s "+
		"(a failure recorded with %s holds the fields as JSON, which are decoded into %s wherever it is read back: errors.As then no longer matches it, or reads a field zero). "+fix,
		e.GoName, key, was, now, breaks(bs), key, e.GoName, key)
	return false
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
