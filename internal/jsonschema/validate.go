package jsonschema

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// ErrMalformedSchema is wrapped by the error Validate returns when the
// schema is not JSON, or not a schema of the subset this package supports.
var ErrMalformedSchema = errors.New("malformed schema")

// ErrMalformedDocument is wrapped by the error Validate returns when the
// document is not a single well-formed JSON value.
var ErrMalformedDocument = errors.New("malformed JSON document")

// maxProblems is how many problems a ValidationError lists at most.
const maxProblems = 5

// Problem is one reason a document does not match a schema.
type Problem struct {
	// Path locates the offending value in the document, JSONPath style:
	// "$" is the document, ".name" or ["name"] an object member, [2] an
	// array element.
	Path string
	// Message says what is wrong, for example "want string, got number".
	Message string
}

// String returns the problem as "path: message".
func (p Problem) String() string { return p.Path + ": " + p.Message }

// ValidationError is the error Validate returns for a well-formed document
// that the schema refuses. It lists the first problems in document order.
type ValidationError struct {
	Problems []Problem
	// Truncated reports that there are more problems than listed.
	Truncated bool
}

// Error lists the problems, "path: message", separated by semicolons.
func (e *ValidationError) Error() string {
	var b strings.Builder
	b.WriteString("document does not match schema: ")
	for i, p := range e.Problems {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(p.String())
	}
	if e.Truncated {
		b.WriteString("; and more")
	}
	return b.String()
}

// Validate reports whether the JSON document doc matches schema, a schema
// produced by For. It returns nil if it does, a *ValidationError naming
// the path of the first few problems if it does not, and an error wrapping
// ErrMalformedDocument or ErrMalformedSchema if either cannot be read.
//
// Validate supports exactly the keywords For emits: type (a name or an
// array of names), properties, additionalProperties, propertyNames, items,
// minItems, maxItems, minimum, maximum, anyOf, $ref (to "#" or
// "#/$defs/..." at the root), $defs, format "date-time", contentEncoding
// "base64", and contentMediaType "application/json" with contentSchema;
// annotations ($schema, $id, $comment, title, description, examples,
// default, deprecated, readOnly, writeOnly) are ignored. Any other keyword
// makes the schema malformed rather than being silently skipped. Where
// JSON Schema leaves assertions optional, Validate follows encoding/json:
// format, contentEncoding and contentSchema are checked, and "integer"
// means an integer literal (1.0 and 1e2 are not integers to the decoder;
// -0 is refused too, as strconv.ParseUint refuses it).
// Duplicate object members, which encoding/json resolves by letting the
// last one win, are reported as problems.
func Validate(schema, doc []byte) error {
	sv, err := parseJSON(schema)
	if err != nil {
		return fmt.Errorf("jsonschema: %w: %v", ErrMalformedSchema, err)
	}
	c := &compiler{defs: map[string]*node{}}
	root, err := c.compileRoot(sv.toAny())
	if err != nil {
		return fmt.Errorf("jsonschema: %w: %v", ErrMalformedSchema, err)
	}
	dv, err := parseJSON(doc)
	if err != nil {
		return fmt.Errorf("jsonschema: %w: %v", ErrMalformedDocument, err)
	}
	// Schemas For emits take at most a handful of steps per value, and a
	// value takes at least a byte or two; the budget only stops hand-made
	// schemas whose anyOf and $ref multiply the work.
	budget := 1<<14 + 32*len(doc)
	col := &collector{limit: maxProblems, budget: &budget}
	if err := validate(root, dv, path{}, col, 0); err != nil {
		return fmt.Errorf("jsonschema: %w: %v", ErrMalformedSchema, err)
	}
	if len(col.problems) > 0 {
		return &ValidationError{Problems: col.result(), Truncated: col.truncated}
	}
	return nil
}

// typeSet is a set of JSON Schema type names, as bits.
type typeSet uint8

const (
	tNull typeSet = 1 << iota
	tBoolean
	tObject
	tArray
	tNumber
	tInteger
	tString
)

var typeNames = []struct {
	bit  typeSet
	name string
}{
	{tString, "string"}, {tInteger, "integer"}, {tNumber, "number"},
	{tBoolean, "boolean"}, {tObject, "object"}, {tArray, "array"}, {tNull, "null"},
}

func (s typeSet) String() string {
	var names []string
	for _, tn := range typeNames {
		if s&tn.bit != 0 && !(tn.bit == tInteger && s&tNumber != 0) {
			names = append(names, tn.name)
		}
	}
	switch len(names) {
	case 0:
		return "nothing"
	case 1:
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// node is a compiled schema.
type node struct {
	never    bool // the false schema
	hasTypes bool
	types    typeSet

	properties    map[string]*node
	additional    *node // nil: anything
	propertyNames *node
	items         *node
	minItems      int // -1: none
	maxItems      int // -1: none
	minimum       *bound
	maximum       *bound
	dateTime      bool
	base64        bool
	contentSchema *node // non-nil: strings hold JSON matching it
	anyOf         []*node
	ref           *node
}

type bound struct {
	lit string
	dec decimal
}

type compiler struct {
	root *node
	defs map[string]*node
	// refs to resolve once every definition is compiled.
	pending []pendingRef
}

type pendingRef struct {
	n   *node
	ref string
}

var annotations = map[string]bool{
	"$schema": true, "$id": true, "$comment": true, "title": true, "description": true,
	"examples": true, "default": true, "deprecated": true, "readOnly": true, "writeOnly": true,
}

func (c *compiler) compileRoot(v any) (*node, error) {
	if m, ok := v.(map[string]any); ok {
		if defs, ok := m["$defs"]; ok {
			dm, ok := defs.(map[string]any)
			if !ok {
				return nil, errors.New("$defs is not an object")
			}
			for _, name := range sortedKeys(dm) {
				n, err := c.compile(dm[name], "#/$defs/"+name)
				if err != nil {
					return nil, err
				}
				c.defs[name] = n
			}
		}
	}
	root, err := c.compile(v, "#")
	if err != nil {
		return nil, err
	}
	c.root = root
	for _, p := range c.pending {
		target, err := c.resolve(p.ref)
		if err != nil {
			return nil, err
		}
		p.n.ref = target
	}
	return root, nil
}

func (c *compiler) resolve(ref string) (*node, error) {
	if ref == "#" {
		return c.root, nil
	}
	frag, ok := strings.CutPrefix(ref, "#/$defs/")
	if !ok {
		return nil, fmt.Errorf("$ref %q: only \"#\" and \"#/$defs/...\" are supported", ref)
	}
	name, err := url.PathUnescape(frag)
	if err != nil || strings.Contains(name, "/") {
		return nil, fmt.Errorf("$ref %q: not a definition name", ref)
	}
	name = strings.NewReplacer("~1", "/", "~0", "~").Replace(name)
	n, ok := c.defs[name]
	if !ok {
		return nil, fmt.Errorf("$ref %q: no such definition", ref)
	}
	return n, nil
}

func (c *compiler) compile(v any, at string) (*node, error) {
	switch v := v.(type) {
	case bool:
		if v {
			return &node{minItems: -1, maxItems: -1}, nil
		}
		return &node{never: true, minItems: -1, maxItems: -1}, nil
	case map[string]any:
		n := &node{minItems: -1, maxItems: -1}
		for _, k := range sortedKeys(v) {
			if err := c.keyword(n, k, v[k], at); err != nil {
				return nil, err
			}
		}
		return n, nil
	}
	return nil, fmt.Errorf("%s: a schema must be an object or a boolean", at)
}

func (c *compiler) keyword(n *node, k string, v any, at string) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%s: %s: %s", at, k, fmt.Sprintf(format, args...))
	}
	var err error
	switch k {
	case "$defs":
		if at != "#" {
			return bad("only supported at the root")
		}
	case "$ref":
		s, ok := v.(string)
		if !ok {
			return bad("not a string")
		}
		c.pending = append(c.pending, pendingRef{n, s})
	case "type":
		n.hasTypes = true
		switch v := v.(type) {
		case string:
			n.types, err = typeBit(v)
		case []any:
			for _, x := range v {
				s, _ := x.(string)
				var b typeSet
				if b, err = typeBit(s); err != nil {
					break
				}
				n.types |= b
			}
		default:
			err = errors.New("not a string or an array")
		}
		if err != nil {
			return bad("%v", err)
		}
	case "properties":
		m, ok := v.(map[string]any)
		if !ok {
			return bad("not an object")
		}
		n.properties = map[string]*node{}
		for _, name := range sortedKeys(m) {
			if n.properties[name], err = c.compile(m[name], at+"/properties/"+name); err != nil {
				return err
			}
		}
	case "additionalProperties":
		n.additional, err = c.compile(v, at+"/"+k)
	case "propertyNames":
		n.propertyNames, err = c.compile(v, at+"/"+k)
	case "items":
		n.items, err = c.compile(v, at+"/"+k)
	case "contentSchema":
		n.contentSchema, err = c.compile(v, at+"/"+k)
	case "anyOf":
		a, ok := v.([]any)
		if !ok || len(a) == 0 {
			return bad("not a non-empty array")
		}
		for i, x := range a {
			b, err := c.compile(x, at+"/anyOf/"+strconv.Itoa(i))
			if err != nil {
				return err
			}
			n.anyOf = append(n.anyOf, b)
		}
	case "minItems", "maxItems":
		num, _ := v.(json.Number)
		i, perr := strconv.Atoi(string(num))
		if perr != nil || i < 0 {
			return bad("not a non-negative integer")
		}
		if k == "minItems" {
			n.minItems = i
		} else {
			n.maxItems = i
		}
	case "minimum", "maximum":
		num, _ := v.(json.Number)
		d, ok := parseDecimal(string(num))
		if !ok {
			return bad("not a number")
		}
		b := &bound{lit: string(num), dec: d}
		if k == "minimum" {
			n.minimum = b
		} else {
			n.maximum = b
		}
	case "format":
		if v != "date-time" {
			return bad("only \"date-time\" is supported")
		}
		n.dateTime = true
	case "contentEncoding":
		if v != "base64" {
			return bad("only \"base64\" is supported")
		}
		n.base64 = true
	case "contentMediaType":
		if v != "application/json" {
			return bad("only \"application/json\" is supported")
		}
	default:
		if !annotations[k] {
			return fmt.Errorf("%s: unsupported keyword %q", at, k)
		}
	}
	return err
}

func typeBit(name string) (typeSet, error) {
	for _, tn := range typeNames {
		if tn.name == name {
			return tn.bit, nil
		}
	}
	return 0, fmt.Errorf("unknown type %q", name)
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// path is the location of a value in the document, built lazily.
type path struct {
	parent *path
	key    string
	index  int // -1 for an object member
}

func (p *path) member(key string) path { return path{parent: p, key: key, index: -1} }
func (p *path) item(i int) path        { return path{parent: p, index: i} }

func (p *path) String() string {
	var segs []*path
	for q := p; q.parent != nil; q = q.parent {
		segs = append(segs, q)
	}
	var b strings.Builder
	b.WriteString("$")
	for i := len(segs) - 1; i >= 0; i-- {
		q := segs[i]
		switch {
		case q.index >= 0:
			b.WriteString("[" + strconv.Itoa(q.index) + "]")
		case isIdentifier(q.key):
			b.WriteString("." + q.key)
		default:
			b.WriteString("[" + quote(q.key) + "]")
		}
	}
	return b.String()
}

func isIdentifier(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		if !(r == '_' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || i > 0 && '0' <= r && r <= '9') {
			return false
		}
	}
	return true
}

// quote writes s as a JSON string.
func quote(s string) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return strings.TrimSuffix(b.String(), "\n")
}

// collector gathers problems, up to a limit.
type collector struct {
	limit     int
	problems  []problem
	truncated bool
	budget    *int // steps left, shared by a collector and its subs
}

// problem is a Problem whose path is not formatted yet: most problems found
// while trying anyOf branches are thrown away.
type problem struct {
	path path
	msg  string
}

// sub returns a collector for a tentative or nested validation.
func (c *collector) sub(limit int) *collector {
	return &collector{limit: limit, budget: c.budget}
}

func (c *collector) full() bool { return c.truncated }

func (c *collector) add(p *path, format string, args ...any) {
	if len(c.problems) >= c.limit {
		c.truncated = true
		return
	}
	c.problems = append(c.problems, problem{path: *p, msg: fmt.Sprintf(format, args...)})
}

func (c *collector) result() []Problem {
	out := make([]Problem, len(c.problems))
	for i, p := range c.problems {
		out[i] = Problem{Path: p.path.String(), Message: p.msg}
	}
	return out
}

// maxHops bounds how many $ref and anyOf a value may go through before
// its contents are looked at; beyond it, the schema loops.
const maxHops = 64

// validate checks v against n, adding problems to col. It returns an
// error only when the schema turns out to be unusable.
func validate(n *node, v *value, p path, col *collector, hops int) error {
	if col.full() {
		return nil
	}
	if hops > maxHops {
		return errors.New("$ref or anyOf loops without reaching a value")
	}
	if *col.budget -= 1; *col.budget < 0 {
		return errors.New("too much work: anyOf and $ref multiply")
	}
	if n.never {
		col.add(&p, "not allowed")
		return nil
	}
	if n.ref != nil {
		if err := validate(n.ref, v, p, col, hops+1); err != nil {
			return err
		}
	}
	if len(n.anyOf) > 0 {
		if err := validateAnyOf(n, v, p, col, hops); err != nil {
			return err
		}
	}
	if n.hasTypes && !n.types.admits(v) {
		col.add(&p, "want %v, got %s", n.types, describe(v))
		return nil
	}
	switch v.kind {
	case kindNumber:
		validateNumber(n, v, p, col)
	case kindString:
		return validateString(n, v, p, col, hops)
	case kindArray:
		if n.minItems >= 0 && len(v.items) < n.minItems || n.maxItems >= 0 && len(v.items) > n.maxItems {
			col.add(&p, "want %s, got %d", countItems(n.minItems, n.maxItems), len(v.items))
		}
		if n.items != nil {
			for i, item := range v.items {
				if err := validate(n.items, item, p.item(i), col, 0); err != nil {
					return err
				}
			}
		}
	case kindObject:
		return validateObject(n, v, p, col)
	}
	return nil
}

func (s typeSet) admits(v *value) bool {
	switch v.kind {
	case kindNull:
		return s&tNull != 0
	case kindBoolean:
		return s&tBoolean != 0
	case kindNumber:
		return s&tNumber != 0 || s&tInteger != 0 && isIntegerLiteral(v.text)
	case kindString:
		return s&tString != 0
	case kindArray:
		return s&tArray != 0
	}
	return s&tObject != 0
}

// describe names what a value is, for "got ..." in messages.
func describe(v *value) string {
	if v.kind == kindNumber {
		return "number " + abbreviate(v.text)
	}
	return v.kind.String()
}

func abbreviate(s string) string {
	const max = 40
	if len(s) <= max {
		return s
	}
	i := max
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "…"
}

func countItems(min, max int) string {
	plural := func(n int) string {
		if n == 1 {
			return "1 item"
		}
		return strconv.Itoa(n) + " items"
	}
	switch {
	case min == max:
		return "exactly " + plural(min)
	case max < 0:
		return "at least " + plural(min)
	case min < 0:
		return "at most " + plural(max)
	}
	return "between " + strconv.Itoa(min) + " and " + plural(max)
}

func validateNumber(n *node, v *value, p path, col *collector) {
	if n.minimum == nil && n.maximum == nil {
		return
	}
	d, ok := parseDecimal(v.text)
	if !ok {
		col.add(&p, "invalid number %s", abbreviate(v.text))
		return
	}
	if n.minimum != nil && d.cmp(n.minimum.dec) < 0 {
		col.add(&p, "%s is less than the minimum %s", abbreviate(v.text), n.minimum.lit)
	} else if n.maximum != nil && d.cmp(n.maximum.dec) > 0 {
		col.add(&p, "%s is greater than the maximum %s", abbreviate(v.text), n.maximum.lit)
	}
}

func validateString(n *node, v *value, p path, col *collector, hops int) error {
	if n.dateTime {
		// Exactly what time.Time's UnmarshalJSON accepts: RFC 3339, in a
		// string written without escapes (it does not unescape).
		var t time.Time
		if err := t.UnmarshalJSON([]byte(v.raw)); err != nil {
			col.add(&p, "want an RFC 3339 date-time such as \"2006-01-02T15:04:05Z\", got %s", quote(abbreviate(v.text)))
		}
	}
	if n.base64 {
		// What encoding/json does with a string for a []byte.
		b := make([]byte, base64.StdEncoding.DecodedLen(len(v.text)))
		if _, err := base64.StdEncoding.Decode(b, []byte(v.text)); err != nil {
			col.add(&p, "want base64 (standard, padded): %v", err)
		}
	}
	if n.contentSchema != nil {
		return validateContent(n.contentSchema, v.text, p, col, hops, "string content")
	}
	return nil
}

// validateContent checks a string that must hold a JSON value matching
// cs. Problems are reported at p, prefixed by what, since the string is a
// single value of the document.
func validateContent(cs *node, text string, p path, col *collector, hops int, what string) error {
	if strings.TrimSpace(text) != text {
		col.add(&p, "%s: want JSON without surrounding spaces, got %s", what, quote(abbreviate(text)))
		return nil
	}
	inner, err := parseJSON([]byte(text))
	if err != nil {
		want := "JSON"
		if ts, ok := cs.typeConstraint(0); ok {
			want = ts.String() + " as JSON"
		}
		col.add(&p, "%s: want %s, got %s", what, want, quote(abbreviate(text)))
		return nil
	}
	sub := col.sub(1)
	if err := validate(cs, inner, path{}, sub, hops+1); err != nil {
		return err
	}
	for _, pb := range sub.problems {
		msg := pb.msg
		if pb.path.parent != nil {
			msg = pb.path.String() + ": " + msg
		}
		col.add(&p, "%s: %s", what, msg)
	}
	return nil
}

func validateObject(n *node, v *value, p path, col *collector) error {
	seen := make(map[string]bool, len(v.members))
	for _, m := range v.members {
		if col.full() {
			return nil
		}
		mp := p.member(m.key)
		if seen[m.key] {
			col.add(&mp, "duplicate member (encoding/json would keep only the last)")
			continue
		}
		seen[m.key] = true
		if n.propertyNames != nil {
			if n.propertyNames.contentSchema != nil && len(n.propertyNames.anyOf) == 0 && n.propertyNames.ref == nil && !n.propertyNames.hasTypes {
				// The shape For emits for integer keys.
				if err := validateContent(n.propertyNames.contentSchema, m.key, mp, col, 0, "invalid key"); err != nil {
					return err
				}
			} else {
				sub := col.sub(1)
				kv := &value{kind: kindString, text: m.key}
				if err := validate(n.propertyNames, kv, mp, sub, 0); err != nil {
					return err
				}
				for _, pb := range sub.problems {
					col.add(&mp, "invalid key: %s", pb.msg)
				}
			}
		}
		if ps, ok := n.properties[m.key]; ok {
			if err := validate(ps, m.value, mp, col, 0); err != nil {
				return err
			}
			continue
		}
		if n.additional == nil {
			continue
		}
		if n.additional.never {
			col.add(&mp, "unknown field%s", hint(m.key, n.properties))
			continue
		}
		if err := validate(n.additional, m.value, mp, col, 0); err != nil {
			return err
		}
	}
	return nil
}

// hint suggests the known property a misspelt key probably meant.
func hint(key string, props map[string]*node) string {
	best, bestDist, ties := "", 3, 0
	for name := range props {
		d := 3
		if strings.EqualFold(name, key) {
			d = 0
		} else if dist := editDistance(strings.ToLower(name), strings.ToLower(key), 2); dist <= 2 && len(key) > 2*dist {
			d = dist
		}
		switch {
		case d < bestDist:
			best, bestDist, ties = name, d, 1
		case d == bestDist && d < 3:
			ties++
		}
	}
	if best == "" || ties > 1 {
		return ""
	}
	return fmt.Sprintf(" (did you mean %s?)", quote(best))
}

// editDistance is the Levenshtein distance between a and b, in runes, or
// max+1 if it is larger than max.
func editDistance(a, b string, max int) int {
	ar, br := []rune(a), []rune(b)
	if d := len(ar) - len(br); d > max || -d > max {
		return max + 1
	}
	prev := make([]int, len(br)+1)
	cur := make([]int, len(br)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ar); i++ {
		cur[0] = i
		rowMin := cur[0]
		for j := 1; j <= len(br); j++ {
			cost := 1
			if ar[i-1] == br[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			rowMin = min(rowMin, cur[j])
		}
		if rowMin > max {
			return max + 1
		}
		prev, cur = cur, prev
	}
	return min(prev[len(br)], max+1)
}

// validateAnyOf passes if one branch accepts v. Otherwise it reports the
// problems of the branch meant for this kind of value (for the
// null-or-something unions For emits, the something), or a type mismatch
// if no branch takes values of this kind.
func validateAnyOf(n *node, v *value, p path, col *collector, hops int) error {
	var candidate []problem
	var candidateTruncated, haveCandidate bool
	var union typeSet
	for _, b := range n.anyOf {
		sub := col.sub(col.limit)
		if err := validate(b, v, p, sub, hops+1); err != nil {
			return err
		}
		if len(sub.problems) == 0 {
			return nil
		}
		ts, constrained := b.typeConstraint(0)
		if !constrained || ts.admits(v) {
			if !haveCandidate {
				candidate, candidateTruncated, haveCandidate = sub.problems, sub.truncated, true
			}
		}
		union |= ts
	}
	if !haveCandidate {
		col.add(&p, "want %v, got %s", union, describe(v))
		return nil
	}
	for _, pb := range candidate {
		if len(col.problems) >= col.limit {
			col.truncated = true
			return nil
		}
		col.problems = append(col.problems, pb)
	}
	if candidateTruncated {
		col.truncated = true
	}
	return nil
}

// typeConstraint returns the types a schema admits at most, following
// $ref, and whether it constrains them at all.
func (n *node) typeConstraint(hops int) (typeSet, bool) {
	if n.never {
		return 0, true
	}
	if n.hasTypes {
		return n.types, true
	}
	if n.ref != nil && hops < maxHops {
		return n.ref.typeConstraint(hops + 1)
	}
	return 0, false
}
