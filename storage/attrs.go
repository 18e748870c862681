package storage

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// AttrType is the type of a search attribute: what its values are and
// which comparisons a filter may make of them.
type AttrType string

// The attribute types.
const (
	// AttrString values are text of at most MaxAttrString bytes, compared
	// byte for byte: equality and prefix.
	AttrString AttrType = "string"
	// AttrNumber values are finite float64s (integers exact up to 2^53):
	// equality and ranges.
	AttrNumber AttrType = "number"
	// AttrTime values are instants, kept to the microsecond in UTC:
	// equality and ranges.
	AttrTime AttrType = "time"
	// AttrBool values are true or false: equality.
	AttrBool AttrType = "bool"
)

// AttrTypes lists the attribute types.
var AttrTypes = []AttrType{AttrString, AttrNumber, AttrTime, AttrBool}

// Valid reports whether t is one of the attribute types.
func (t AttrType) Valid() bool { return slices.Contains(AttrTypes, t) }

// The bounds of a run's search attributes.
const (
	// MaxAttributes is how many attributes one run holds.
	MaxAttributes = 32
	// MaxAttrName is the longest attribute name, in bytes.
	MaxAttrName = 64
	// MaxAttrString is the longest string value, in bytes.
	MaxAttrString = 256
	// MaxAttrFilters is how many attribute filters one listing combines.
	MaxAttrFilters = 8
)

// Attr is one search attribute of a run: a name and a typed value. Only
// the field of its Type is meaningful; the others are zero.
type Attr struct {
	Name string
	Type AttrType
	// Str is an AttrString's value.
	Str string
	// Num is an AttrNumber's value.
	Num float64
	// Time is an AttrTime's value, in UTC, truncated to the microsecond
	// (NormalizeAttrs makes it so).
	Time time.Time
	// Bool is an AttrBool's value.
	Bool bool
}

// StringAttr, NumberAttr, TimeAttr and BoolAttr build attributes.
func StringAttr(name, v string) Attr { return Attr{Name: name, Type: AttrString, Str: v} }

// NumberAttr is an AttrNumber attribute; see StringAttr.
func NumberAttr(name string, v float64) Attr { return Attr{Name: name, Type: AttrNumber, Num: v} }

// TimeAttr is an AttrTime attribute; see StringAttr.
func TimeAttr(name string, v time.Time) Attr {
	return Attr{Name: name, Type: AttrTime, Time: v.UTC().Truncate(time.Microsecond)}
}

// BoolAttr is an AttrBool attribute; see StringAttr.
func BoolAttr(name string, v bool) Attr { return Attr{Name: name, Type: AttrBool, Bool: v} }

// Value renders the attribute's value as text: a string as it is, a
// number in the shortest form that reads back the same, a time in
// RFC 3339 with the microseconds it has, a bool as true or false.
func (a Attr) Value() string {
	switch a.Type {
	case AttrString:
		return a.Str
	case AttrNumber:
		return strconv.FormatFloat(a.Num, 'g', -1, 64)
	case AttrTime:
		return a.Time.UTC().Format(time.RFC3339Nano)
	case AttrBool:
		return strconv.FormatBool(a.Bool)
	}
	return ""
}

// String renders the attribute as name=value.
func (a Attr) String() string { return a.Name + "=" + a.Value() }

// Equal reports whether a and b have the same name, type and value.
func (a Attr) Equal(b Attr) bool {
	if a.Name != b.Name || a.Type != b.Type {
		return false
	}
	switch a.Type {
	case AttrString:
		return a.Str == b.Str
	case AttrNumber:
		return a.Num == b.Num
	case AttrTime:
		return a.Time.Equal(b.Time)
	case AttrBool:
		return a.Bool == b.Bool
	}
	return true
}

// ParseAttrValue reads text as a value of type t, for a filter or a
// start given on a command line: a number in Go's syntax (1, -2.5, 1e6),
// a time in RFC 3339 (2026-11-28T10:00:00Z) or as a date (2026-11-28,
// midnight UTC), a bool as true or false.
func ParseAttrValue(name string, t AttrType, text string) (Attr, error) {
	switch t {
	case AttrString:
		return StringAttr(name, text), nil
	case AttrNumber:
		f, err := strconv.ParseFloat(strings.TrimSpace(text), 64)
		if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			return Attr{}, fmt.Errorf("%w: attribute %s is a number; %q is not one (write 42, -1.5 or 1e6)", ErrInvalidArgument, name, text)
		}
		return NumberAttr(name, f), nil
	case AttrTime:
		s := strings.TrimSpace(text)
		for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02"} {
			if v, err := time.Parse(layout, s); err == nil {
				return TimeAttr(name, v), nil
			}
		}
		return Attr{}, fmt.Errorf("%w: attribute %s is a time; %q is not one (write 2026-11-28T10:00:00Z or 2026-11-28)", ErrInvalidArgument, name, text)
	case AttrBool:
		b, err := strconv.ParseBool(strings.TrimSpace(text))
		if err != nil {
			return Attr{}, fmt.Errorf("%w: attribute %s is true or false; %q is neither", ErrInvalidArgument, name, text)
		}
		return BoolAttr(name, b), nil
	}
	return Attr{}, fmt.Errorf("%w: attribute %s has unknown type %q (want one of string, number, time, bool)", ErrInvalidArgument, name, t)
}

// CheckAttrName checks an attribute's durable name: 1 to MaxAttrName
// bytes of ASCII letters, digits, '.', '_' and '-'.
func CheckAttrName(name string) error {
	return checkASCIIUpTo("attribute name", name, MaxAttrName, nameChars, nameHint)
}

// checkAttr checks one attribute's name, type and value.
func checkAttr(a Attr) error {
	if err := CheckAttrName(a.Name); err != nil {
		return err
	}
	switch a.Type {
	case AttrString:
		if len(a.Str) > MaxAttrString {
			return fmt.Errorf("attribute %s is %d bytes long, over the limit of %d", a.Name, len(a.Str), MaxAttrString)
		}
		if !utf8.ValidString(a.Str) {
			return fmt.Errorf("attribute %s is not valid UTF-8", a.Name)
		}
		if strings.ContainsRune(a.Str, 0) {
			return fmt.Errorf("attribute %s holds a NUL byte", a.Name)
		}
	case AttrNumber:
		if math.IsInf(a.Num, 0) || math.IsNaN(a.Num) {
			return fmt.Errorf("attribute %s is %v: numbers must be finite", a.Name, a.Num)
		}
	case AttrTime:
		if a.Time.IsZero() {
			return fmt.Errorf("attribute %s is the zero time", a.Name)
		}
		if y := a.Time.Year(); y < 1 || y > 9999 {
			return fmt.Errorf("attribute %s is in year %d, outside 1 to 9999", a.Name, y)
		}
	case AttrBool:
	default:
		return fmt.Errorf("attribute %s has unknown type %q (want one of string, number, time, bool)", a.Name, a.Type)
	}
	return nil
}

// ValidateAttrs checks attributes to set: each well-formed, no name twice,
// at most MaxAttributes. what names the request for the error.
func ValidateAttrs(what string, attrs []Attr) error {
	if len(attrs) > MaxAttributes {
		return invalid(what, "%d attributes, over the limit of %d", len(attrs), MaxAttributes)
	}
	seen := make(map[string]bool, len(attrs))
	for _, a := range attrs {
		if err := checkAttr(a); err != nil {
			return invalid(what, "%s", reason(err))
		}
		if seen[a.Name] {
			return invalid(what, "attribute %s is set twice", a.Name)
		}
		seen[a.Name] = true
	}
	return nil
}

// NormalizeAttrs returns attrs sorted by name, times in UTC truncated to
// the microsecond and the fields other than the type's zeroed: the form
// stores keep and return.
func NormalizeAttrs(attrs []Attr) []Attr {
	if len(attrs) == 0 {
		return nil
	}
	out := make([]Attr, len(attrs))
	for i, a := range attrs {
		n := Attr{Name: a.Name, Type: a.Type}
		switch a.Type {
		case AttrString:
			n.Str = a.Str
		case AttrNumber:
			n.Num = a.Num
			if n.Num == 0 {
				n.Num = 0 // no negative zero
			}
		case AttrTime:
			n.Time = a.Time.UTC().Truncate(time.Microsecond)
		case AttrBool:
			n.Bool = a.Bool
		}
		out[i] = n
	}
	slices.SortFunc(out, func(a, b Attr) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// MergeAttrs returns the run's attributes with set applied: a name set
// replaces the value (and type) it had, a new name is added, and the
// result is normalized. It is an error, with the run's attributes kept,
// when the result would hold more than MaxAttributes.
func MergeAttrs(have, set []Attr) ([]Attr, error) {
	out := slices.Clone(have)
	for _, a := range set {
		i := slices.IndexFunc(out, func(b Attr) bool { return b.Name == a.Name })
		if i >= 0 {
			out[i] = a
		} else {
			out = append(out, a)
		}
	}
	if len(out) > MaxAttributes {
		return have, invalid("set attributes", "the run would hold %d attributes, over the limit of %d", len(out), MaxAttributes)
	}
	return NormalizeAttrs(out), nil
}

// AttrOp is a filter's comparison.
type AttrOp string

// The attribute comparisons.
const (
	OpEq     AttrOp = "="
	OpLt     AttrOp = "<"
	OpLe     AttrOp = "<="
	OpGt     AttrOp = ">"
	OpGe     AttrOp = ">="
	OpPrefix AttrOp = "^="
)

// AttrFilter keeps the runs whose attribute Value.Name compares to Value
// by Op: equality for every type, the ranges for numbers and times,
// prefix for strings. A run without the attribute, or with it of another
// type, does not pass.
type AttrFilter struct {
	Op    AttrOp
	Value Attr
}

// String renders the filter as name op value, as ParseAttrFilter reads it.
func (f AttrFilter) String() string { return f.Value.Name + string(f.Op) + f.Value.Value() }

// Validate checks the filter: a well-formed value and a comparison its
// type has.
func (f AttrFilter) Validate() error {
	if err := checkAttr(f.Value); err != nil {
		return err
	}
	switch f.Op {
	case OpEq:
	case OpLt, OpLe, OpGt, OpGe:
		if f.Value.Type != AttrNumber && f.Value.Type != AttrTime {
			return fmt.Errorf("attribute %s is a %s: %s compares only numbers and times", f.Value.Name, f.Value.Type, f.Op)
		}
	case OpPrefix:
		if f.Value.Type != AttrString {
			return fmt.Errorf("attribute %s is a %s: ^= (prefix) compares only strings", f.Value.Name, f.Value.Type)
		}
		if f.Value.Str == "" {
			return fmt.Errorf("attribute %s: an empty prefix keeps every run; leave the filter out", f.Value.Name)
		}
	default:
		return fmt.Errorf("attribute %s: unknown comparison %q (want =, <, <=, >, >= or ^=)", f.Value.Name, f.Op)
	}
	return nil
}

// Match reports whether attrs (a run's) pass the filter.
func (f AttrFilter) Match(attrs []Attr) bool {
	for _, a := range attrs {
		if a.Name != f.Value.Name {
			continue
		}
		if a.Type != f.Value.Type {
			return false
		}
		if f.Op == OpPrefix {
			return strings.HasPrefix(a.Str, f.Value.Str)
		}
		c := compareAttr(a, f.Value)
		switch f.Op {
		case OpEq:
			return c == 0
		case OpLt:
			return c < 0
		case OpLe:
			return c <= 0
		case OpGt:
			return c > 0
		case OpGe:
			return c >= 0
		}
		return false
	}
	return false
}

// compareAttr orders two values of one type.
func compareAttr(a, b Attr) int {
	switch a.Type {
	case AttrString:
		return strings.Compare(a.Str, b.Str)
	case AttrNumber:
		switch {
		case a.Num < b.Num:
			return -1
		case a.Num > b.Num:
			return 1
		}
		return 0
	case AttrTime:
		return a.Time.Compare(b.Time)
	case AttrBool:
		switch {
		case a.Bool == b.Bool:
			return 0
		case !a.Bool:
			return -1
		}
		return 1
	}
	return 0
}

// ParseAttrFilter reads a filter written name op value (customer=C-7,
// total>=100, order^=88, placed<2026-11-28), the value read as the
// attribute's type: types gives the declared type of each name (from the
// catalog). A name types lacks is read as a string. The operators are
// =, <, <=, >, >= and ^= (prefix).
func ParseAttrFilter(text string, types map[string]AttrType) (AttrFilter, error) {
	i := strings.IndexAny(text, "=<>^")
	if i <= 0 {
		return AttrFilter{}, fmt.Errorf("%w: filter %q: want NAME OP VALUE, such as customer=C-7, total>=100 or order^=88 (OP is =, <, <=, >, >= or ^=)", ErrInvalidArgument, text)
	}
	name := strings.TrimSpace(text[:i])
	rest := text[i:]
	var op AttrOp
	for _, o := range []AttrOp{OpLe, OpGe, OpPrefix, OpEq, OpLt, OpGt} {
		if strings.HasPrefix(rest, string(o)) {
			op = o
			break
		}
	}
	if op == "" {
		return AttrFilter{}, fmt.Errorf("%w: filter %q: unknown comparison at %q (want =, <, <=, >, >= or ^=)", ErrInvalidArgument, text, rest)
	}
	if err := CheckAttrName(name); err != nil {
		return AttrFilter{}, fmt.Errorf("%w: filter %q: %s", ErrInvalidArgument, text, reason(err))
	}
	t, ok := types[name]
	if !ok {
		t = AttrString
	}
	v, err := ParseAttrValue(name, t, rest[len(op):])
	if err != nil {
		return AttrFilter{}, fmt.Errorf("filter %q: %w", text, err)
	}
	f := AttrFilter{Op: op, Value: v}
	if err := f.Validate(); err != nil {
		return AttrFilter{}, fmt.Errorf("%w: filter %q: %s", ErrInvalidArgument, text, reason(err))
	}
	return f, nil
}

// AttrDecl is a search attribute as a workflow declares it, recorded in
// the catalog so that tools read filters in its type.
type AttrDecl struct {
	Name string
	Type AttrType
	// From is the JSON path of the input's field the attribute is taken
	// from at the run's creation: the JSON object keys, dot-separated, as
	// encoding/json names the fields ("customer.id"), or "" for one the
	// workflow sets as it goes.
	From string `json:",omitempty"`
}

// ValidateAttrDecls checks a workflow's declarations: well-formed names
// and types, no name twice, at most MaxAttributes.
func ValidateAttrDecls(what string, decls []AttrDecl) error {
	if len(decls) > MaxAttributes {
		return invalid(what, "%d attributes declared, over the limit of %d", len(decls), MaxAttributes)
	}
	seen := map[string]bool{}
	for _, d := range decls {
		if err := CheckAttrName(d.Name); err != nil {
			return invalid(what, "%s", reason(err))
		}
		if !d.Type.Valid() {
			return invalid(what, "attribute %s has unknown type %q (want one of string, number, time, bool)", d.Name, d.Type)
		}
		if seen[d.Name] {
			return invalid(what, "attribute %s is declared twice", d.Name)
		}
		seen[d.Name] = true
	}
	return nil
}

// RunOrder is the order ListRuns lists runs in.
type RunOrder string

// The run orders.
const (
	// OrderID (the zero value) lists runs by ID.
	OrderID RunOrder = ""
	// OrderCreated lists runs by creation time (CreatedAt), runs created
	// at the same instant by ID.
	OrderCreated RunOrder = "created"
)

// CreatedCursor is the cursor of a listing in OrderCreated: the creation
// time and ID of the last run of the page before, written
// "<unix nanoseconds>/<ID>" in RunPage.Next and ListRunsQuery.After.
func CreatedCursor(created time.Time, id string) string {
	return strconv.FormatInt(created.UnixNano(), 10) + "/" + id
}

// ParseCreatedCursor reads a CreatedCursor.
func ParseCreatedCursor(c string) (time.Time, string, error) {
	ns, id, ok := strings.Cut(c, "/")
	n, err := strconv.ParseInt(ns, 10, 64)
	if !ok || err != nil {
		return time.Time{}, "", fmt.Errorf("cursor %q is not one of a listing by creation time (<unix nanoseconds>/<run ID>)", c)
	}
	return time.Unix(0, n).UTC(), id, nil
}
