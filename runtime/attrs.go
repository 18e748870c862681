package runtime

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/stemflow/stem/storage"
)

// Search attributes: what a run is about, for finding it among thousands.
//
// A workflow declares its attributes (WorkflowAttributes; generated code
// passes its //stem:attr annotations), each with a name and a type. Those
// declared with a From are taken from each run's input when it starts —
// by Start, StartBatch, StartJSON, a child call, a schedule's tick,
// SendOrStart, UpdateOrStart, StartTx —, the others the workflow sets as
// it goes (SetAttributes), durably. A start may set them too
// (WithAttributes). Every name a run holds is declared by its workflow,
// with that type, so every filter on it reads in that type (ParseWhere).
// ListRuns keeps the runs whose attributes pass its Where filters; the
// stores index them.
//
// Attributes are stored as they are, for the index: a Config.Codec does
// not seal them. Keep secrets out of them.

// Attr is one search attribute of a run: a name and a typed value (see
// storage.Attr). Build one with StringAttr, NumberAttr, TimeAttr or
// BoolAttr.
type Attr = storage.Attr

// AttrType is the type of a search attribute: string, number, time or bool.
type AttrType = storage.AttrType

// AttrDecl is a search attribute as a workflow declares it (its
// annotation's //stem:attr): a name, a type, and the input's field it is
// taken from at the start, if any.
type AttrDecl = storage.AttrDecl

// AttrFilter keeps the runs whose attribute compares to a value: see
// storage.AttrFilter and ParseAttrFilter.
type AttrFilter = storage.AttrFilter

// The attribute types.
const (
	AttrString = storage.AttrString
	AttrNumber = storage.AttrNumber
	AttrTime   = storage.AttrTime
	AttrBool   = storage.AttrBool
)

// KindAttr is the step kind of a workflow's setting of its search
// attributes (SetAttributes).
const KindAttr = storage.KindAttr

// The attribute builders.
var (
	StringAttr = storage.StringAttr
	NumberAttr = storage.NumberAttr
	TimeAttr   = storage.TimeAttr
	BoolAttr   = storage.BoolAttr
)

// attrCall is the key prefix of a workflow's settings of its attributes:
// attr:<first name set>, numbered by call order as stream writes are.
const attrCall = "attr:"

// maxAttrPath is the longest From path a declaration may give, in bytes.
const maxAttrPath = 256

// WorkflowAttributes declares the workflow's search attributes (its
// //stem:attr annotations). Those with a From are taken from each run's
// input at its start, by whatever starts it; the others the workflow sets
// with SetAttributes. The engine records them in the store's catalog, so
// tools read filters in each attribute's type.
//
// From is a path of JSON object keys separated by dots ("customer.id"),
// matched as encoding/json matches a struct's fields: the exact key, else
// one that differs only in case. At a start, a JSON string is a string
// attribute's value (or a time's, in RFC 3339), a number a number's, true
// or false a bool's; a path the input lacks, null, or a time.Time's zero
// value ("0001-01-01T00:00:00Z") sets nothing; any
// other value, or one out of bounds (storage.MaxAttrString), refuses the
// start with ErrInvalidArgument naming the workflow, the attribute, the
// path and what was found, with nothing written.
//
// The input is read at the run's creation only: a restart and a
// continue-as-new keep the run's attributes (the next execution's input is
// not read for them; SetAttributes changes them), and a run started under
// a build that declared none has none from its input.
//
// Register refuses, with ErrInvalidArgument, a malformed or repeated name,
// an unknown type, an empty segment in a path, or more than
// storage.MaxAttributes declarations.
func WorkflowAttributes(decls ...AttrDecl) RegisterOption {
	return func(d *workflowDef) { d.attrs = append(d.attrs, decls...) }
}

// WithAttributes sets search attributes of the run at its start, over
// those its workflow takes from its input. Each must be declared by the
// workflow (WorkflowAttributes, or the catalog for a workflow another
// engine runs) with its type; another is ErrInvalidArgument, with
// nothing written.
func WithAttributes(attrs ...Attr) StartOption {
	return func(o *startOptions) { o.attrs = append(o.attrs, attrs...) }
}

// SetAttributes sets search attributes of the run, durably: they are
// written with a checkpoint of the run (kind KindAttr, keyed
// attr:<first name> and numbered by call order), so a replay does not set
// them again, and filters see them from then on. A name set again takes
// the new value. Like every durable call, it takes its place in the run's
// history: code that adds one before calls a run in flight recorded is a
// divergence (see RunInfo.Hold); add it after them.
//
// Each attribute must be declared by the workflow (WorkflowAttributes)
// with its type, and be within bounds (storage.ValidateAttrs); a run
// holds at most storage.MaxAttributes. Otherwise it is ErrInvalidArgument
// and nothing is written. Setting none writes nothing.
func SetAttributes(c *WorkflowContext, attrs ...Attr) error {
	x := c.exec
	x.checkStopped()
	if len(attrs) == 0 {
		return nil
	}
	what := fmt.Sprintf("set attributes of run %s", x.lease.RunID)
	if err := storage.ValidateAttrs(what, attrs); err != nil {
		return err
	}
	def, err := x.engine.registeredVersion(x.workflow, x.claim.Version)
	if err != nil {
		return err
	}
	if err := checkDeclared(what, x.workflow, def.attrs, attrs); err != nil {
		return err
	}
	key, err := x.repeatKey(attrCall+attrs[0].Name, asAttr)
	if err != nil {
		return err
	}
	_, ok, err := x.begin(c.detached, key, key)
	if ok || err != nil {
		return err
	}
	x.replay.reach(x, key) // a replay ends where the run would write
	set := storage.NormalizeAttrs(attrs)
	// The run's attributes change only with its own writes, under its
	// lease: what it holds now says whether the store would refuse the
	// merge, which then refuses it at every replay too (a run's attribute
	// names only grow).
	r, err := x.engine.store.GetRun(context.WithoutCancel(x.ctx), x.lease.RunID)
	if err != nil {
		x.stop(err)
	}
	if _, err := storage.MergeAttrs(r.Attributes, set); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	x.writeWith(storage.Checkpoint{Key: key, Kind: KindAttr, Input: attrsJSON(set)}, nil, false, &cpExtras{attrs: set})
	return nil
}

// attrsJSON renders attributes as a JSON object of their values, by
// name: what a KindAttr checkpoint was given, for operators.
func attrsJSON(attrs []Attr) []byte {
	m := make(map[string]any, len(attrs))
	for _, a := range attrs {
		switch a.Type {
		case AttrNumber:
			m[a.Name] = a.Num
		case AttrBool:
			m[a.Name] = a.Bool
		default:
			m[a.Name] = a.Value()
		}
	}
	b, _ := json.Marshal(m)
	return b
}

// checkAttrDecls is Register's check of the workflow's declarations.
func checkAttrDecls(def *workflowDef) error {
	what := fmt.Sprintf("workflow %q", def.name)
	if err := storage.ValidateAttrDecls(what, def.attrs); err != nil {
		return err
	}
	for _, d := range def.attrs {
		if d.From == "" {
			continue
		}
		if len(d.From) > maxAttrPath {
			return fmt.Errorf("%s: %w: attribute %s: path %q is %d bytes long, over the limit of %d", what, ErrInvalidArgument, d.Name, d.From, len(d.From), maxAttrPath)
		}
		if !utf8.ValidString(d.From) || slices.Contains(strings.Split(d.From, "."), "") {
			return fmt.Errorf("%s: %w: attribute %s: path %q is not JSON object keys separated by dots (customer.id)", what, ErrInvalidArgument, d.Name, d.From)
		}
	}
	return nil
}

// checkDeclared checks that each attribute is declared, with its type,
// among decls (workflow's).
func checkDeclared(what, workflow string, decls []AttrDecl, attrs []Attr) error {
	for _, a := range attrs {
		i := slices.IndexFunc(decls, func(d AttrDecl) bool { return d.Name == a.Name })
		if i < 0 {
			names := make([]string, len(decls))
			for j, d := range decls {
				names[j] = d.Name
			}
			return fmt.Errorf("%s: %w: workflow %q does not declare attribute %s (it declares %s)%s; declare it with //stem:attr (WorkflowAttributes)",
				what, ErrInvalidArgument, workflow, a.Name, listOrNone(names), didYouMean(a.Name, names))
		}
		if d := decls[i]; d.Type != a.Type {
			return fmt.Errorf("%s: %w: attribute %s of workflow %q is declared a %s, not a %s", what, ErrInvalidArgument, a.Name, workflow, d.Type, a.Type)
		}
	}
	return nil
}

// startAttrs returns the attributes a run of workflow starts with: those
// decls take from its input (plain JSON), with set (WithAttributes) over
// them; nil when none.
func startAttrs(workflow string, decls []AttrDecl, input []byte, set []Attr) ([]Attr, error) {
	what := fmt.Sprintf("start of workflow %q", workflow)
	var out []Attr
	if slices.ContainsFunc(decls, func(d AttrDecl) bool { return d.From != "" }) {
		from, err := inputAttrs(workflow, decls, input)
		if err != nil {
			return nil, err
		}
		if err := storage.ValidateAttrs(what, from); err != nil {
			return nil, err
		}
		out = from
	}
	if len(set) > 0 {
		if err := storage.ValidateAttrs(what, set); err != nil {
			return nil, err
		}
		if err := checkDeclared(what, workflow, decls, set); err != nil {
			return nil, err
		}
	}
	merged, err := storage.MergeAttrs(out, set)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return merged, nil
}

// inputAttrs takes the attributes decls declare From the input (plain
// JSON), in the order declared.
func inputAttrs(workflow string, decls []AttrDecl, input []byte) ([]Attr, error) {
	var root any
	if len(bytes.TrimSpace(input)) > 0 {
		dec := json.NewDecoder(bytes.NewReader(input))
		dec.UseNumber()
		if err := dec.Decode(&root); err != nil {
			return nil, fmt.Errorf("%w: input of %s: %v", ErrDecode, workflow, err)
		}
	}
	var out []Attr
	for _, d := range decls {
		if d.From == "" {
			continue
		}
		a, ok, err := inputAttr(d, root)
		if err != nil {
			return nil, fmt.Errorf("%w: start of workflow %q: attribute %s (a %s) from input field %q: %s",
				ErrInvalidArgument, workflow, d.Name, d.Type, d.From, err.Error())
		}
		if ok {
			out = append(out, a)
		}
	}
	return out, nil
}

// inputAttr reads d's value at its path in the input decoded as root;
// ok is false when the path is missing or null.
func inputAttr(d AttrDecl, root any) (a Attr, ok bool, err error) {
	v := root
	segs := strings.Split(d.From, ".")
	for i, seg := range segs {
		if v == nil {
			return Attr{}, false, nil
		}
		obj, isObj := v.(map[string]any)
		if !isObj {
			at := "the input"
			if i > 0 {
				at = fmt.Sprintf("%q", strings.Join(segs[:i], "."))
			}
			return Attr{}, false, fmt.Errorf("found %s at %s, where an object holding %q was expected", describeJSON(v), at, seg)
		}
		v = field(obj, seg)
	}
	switch x := v.(type) {
	case nil:
		return Attr{}, false, nil
	case string:
		switch d.Type {
		case AttrString:
			if len(x) > storage.MaxAttrString {
				return Attr{}, false, fmt.Errorf("found a string of %d bytes, over the limit of %d", len(x), storage.MaxAttrString)
			}
			if strings.ContainsRune(x, 0) {
				return Attr{}, false, fmt.Errorf("found a string holding a NUL character")
			}
			return StringAttr(d.Name, x), true, nil
		case AttrTime:
			t, err := time.Parse(time.RFC3339Nano, x)
			if err != nil {
				return Attr{}, false, fmt.Errorf("found %s, which is not a time in RFC 3339 (2026-11-28T10:00:00Z)", describeJSON(x))
			}
			if t.IsZero() {
				return Attr{}, false, nil // Go's zero time.Time: not set
			}
			if y := t.UTC().Year(); y < 1 || y > 9999 {
				return Attr{}, false, fmt.Errorf("found the time %s, in year %d, outside 1 to 9999", x, y)
			}
			return TimeAttr(d.Name, t), true, nil
		}
	case json.Number:
		if d.Type == AttrNumber {
			f, err := strconv.ParseFloat(string(x), 64)
			if err != nil || math.IsInf(f, 0) {
				return Attr{}, false, fmt.Errorf("found the number %s, out of the range of a float64", x)
			}
			return NumberAttr(d.Name, f), true, nil
		}
	case bool:
		if d.Type == AttrBool {
			return BoolAttr(d.Name, x), true, nil
		}
	}
	return Attr{}, false, fmt.Errorf("found %s, want %s", describeJSON(v), wantJSON(d.Type))
}

// field is obj's value at key, matched as encoding/json matches a struct's
// field: the exact key, else the first, in key order, equal to it under
// case folding.
func field(obj map[string]any, key string) any {
	if v, ok := obj[key]; ok {
		return v
	}
	var match string
	found := false
	for k := range obj {
		if strings.EqualFold(k, key) && (!found || k < match) {
			match, found = k, true
		}
	}
	if !found {
		return nil
	}
	return obj[match]
}

// describeJSON says what a decoded JSON value is, for an error.
func describeJSON(v any) string {
	switch x := v.(type) {
	case string:
		if len(x) > 40 {
			x = x[:40] + "..."
		}
		return fmt.Sprintf("the string %q", x)
	case json.Number:
		return "the number " + string(x)
	case bool:
		return fmt.Sprintf("%t", x)
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	}
	return "null"
}

// wantJSON says which JSON value an attribute type takes.
func wantJSON(t AttrType) string {
	switch t {
	case AttrString:
		return "a string"
	case AttrNumber:
		return "a number"
	case AttrTime:
		return "a string holding an RFC 3339 time"
	}
	return "true or false"
}

// attrIndex is the declared attributes of the workflows an engine knows,
// for reading filters.
type attrIndex struct {
	// types is the type of each name declared with one type.
	types map[string]AttrType
	// conflicts says, for each name declared with several types, which
	// workflow declares which.
	conflicts map[string]string
}

// attrIndex reads the declarations of the catalog's workflows and of
// those registered here (every version).
func (e *Engine) attrIndex(ctx context.Context) (attrIndex, error) {
	if err := e.checkOpen(); err != nil {
		return attrIndex{}, err
	}
	cat, err := e.store.GetCatalog(ctx)
	if err != nil {
		return attrIndex{}, err
	}
	type use struct {
		workflow string
		typ      AttrType
	}
	uses := map[string][]use{}
	note := func(workflow string, decls []AttrDecl) {
		for _, d := range decls {
			if !slices.Contains(uses[d.Name], use{workflow, d.Type}) {
				uses[d.Name] = append(uses[d.Name], use{workflow, d.Type})
			}
		}
	}
	for _, w := range cat.Workflows {
		note(w.Name, w.Attributes)
	}
	e.mu.Lock()
	for _, name := range e.names {
		note(name, e.workflows[name].attrs)
		for _, d := range e.older[name] {
			note(name, d.attrs)
		}
	}
	e.mu.Unlock()
	idx := attrIndex{types: map[string]AttrType{}, conflicts: map[string]string{}}
	for name, us := range uses {
		slices.SortFunc(us, func(a, b use) int {
			return strings.Compare(a.workflow+"\x00"+string(a.typ), b.workflow+"\x00"+string(b.typ))
		})
		if slices.ContainsFunc(us, func(u use) bool { return u.typ != us[0].typ }) {
			parts := make([]string, len(us))
			for i, u := range us {
				parts[i] = fmt.Sprintf("a %s by %s", u.typ, u.workflow)
			}
			idx.conflicts[name] = strings.Join(parts, ", ")
			continue
		}
		idx.types[name] = us[0].typ
	}
	return idx, nil
}

// AttrTypes returns the declared type of every search attribute the
// catalog records, or a workflow registered here declares, by name, for
// reading filters (ParseWhere). A name that workflows declare with
// different types is left out: a filter on it cannot say which it means,
// and ParseWhere refuses one.
func (e *Engine) AttrTypes(ctx context.Context) (map[string]AttrType, error) {
	idx, err := e.attrIndex(ctx)
	return idx.types, err
}

// ParseWhere reads filters written name op value (customer=C-7,
// total>=100, order^=88, placed<2026-11-28), each value in its attribute's
// declared type (AttrTypes), for ListRunsQuery.Where: = compares every
// type, <, <=, > and >= numbers and times, ^= (prefix) strings. At most
// storage.MaxAttrFilters; a run passes when it passes them all. A filter
// that does not parse, on a name no workflow declares (with the nearest
// declared name), on one declared with different types, or that its type
// does not compare so, is ErrInvalidArgument naming the filter's text.
func (e *Engine) ParseWhere(ctx context.Context, texts []string) ([]AttrFilter, error) {
	if len(texts) == 0 {
		return nil, e.checkOpen()
	}
	if len(texts) > storage.MaxAttrFilters {
		return nil, fmt.Errorf("%w: %d attribute filters, over the limit of %d", ErrInvalidArgument, len(texts), storage.MaxAttrFilters)
	}
	idx, err := e.attrIndex(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]AttrFilter, 0, len(texts))
	for _, text := range texts {
		if i := strings.IndexAny(text, "=<>^"); i > 0 {
			name := strings.TrimSpace(text[:i])
			if storage.CheckAttrName(name) == nil {
				if c, ok := idx.conflicts[name]; ok {
					return nil, fmt.Errorf("%w: filter %q: attribute %s is declared as %s; a filter cannot tell which to read: give one of them another name", ErrInvalidArgument, text, name, c)
				}
				if _, ok := idx.types[name]; !ok {
					return nil, unknownAttr(text, name, idx)
				}
			}
		}
		f, err := storage.ParseAttrFilter(text, idx.types)
		if err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	return out, nil
}

// unknownAttr is ParseWhere's refusal of a filter on a name no workflow
// declares.
func unknownAttr(text, name string, idx attrIndex) error {
	names := make([]string, 0, len(idx.types)+len(idx.conflicts))
	for n := range idx.types {
		names = append(names, n)
	}
	for n := range idx.conflicts {
		names = append(names, n)
	}
	slices.Sort(names)
	if len(names) == 0 {
		return fmt.Errorf("%w: filter %q: no workflow declares search attributes (engines record their workflows' //stem:attr in the store's catalog when they run)", ErrInvalidArgument, text)
	}
	return fmt.Errorf("%w: filter %q: no workflow declares attribute %s (declared: %s)%s", ErrInvalidArgument, text, name, strings.Join(names, ", "), didYouMean(name, names))
}
