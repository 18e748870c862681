package manifest

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// A shape string, as stemgen writes it in the manifest, is the JSON form
// of a Go type without its Go names:
//
//	bool string                  booleans, strings
//	int8 int16 int32 int64       signed integers of a size; int is Go's
//	                             int (32 or 64 bits, by platform)
//	uint8 … uint64 uint          unsigned integers likewise (uintptr is
//	                             uint)
//	float32 float64              floats
//	bytes                        []byte: a base64 string (or an array of
//	                             bytes, which encoding/json also takes)
//	any                          an interface: any JSON value
//	[]S                          a slice of S
//	[N]S                         an array of N S
//	map[K]V                      a map: a JSON object whose keys are K
//	{a:S,b:T}                    a struct: its JSON field names, sorted,
//	                             embedded structs' fields promoted
//	(S, T)                       a tuple: a step's parameters; "()" is a
//	                             step that returns only an error
//	path.Name                    a named type that encodes itself
//	                             (json.Marshaler or encoding.TextMarshaler),
//	                             by import path: time.Time; a predeclared
//	                             one by its name: error
//	@path.Name                   a recursive reference to the named type
//	                             being described, which encloses it
//
// Pointers have their element's shape (null decodes into every shape), a
// struct field tagged ",string" is string, and a field's name runs to the
// first ':' after it (a JSON name holding ':' is not told apart).
//
// Manifests before format 3 did not record sizes: their numbers are int,
// uint and float, an integer or float of a size they do not say. ParseShape
// reads those too ("float" only in them), and Compare is told which
// meaning int and uint have (see CompareOptions).

// ShapeKind says what a Shape is.
type ShapeKind int

// The kinds of Shape.
const (
	ShapeBool   ShapeKind = iota + 1 // bool
	ShapeString                      // string
	ShapeInt                         // int, int8 … int64
	ShapeUint                        // uint, uint8 … uint64
	ShapeFloat                       // float32, float64 (float)
	ShapeBytes                       // bytes
	ShapeAny                         // any
	ShapeSlice                       // []Elem
	ShapeArray                       // [Len]Elem
	ShapeMap                         // map[Key]Elem
	ShapeStruct                      // {Fields}
	ShapeTuple                       // (Elems)
	ShapeNamed                       // Name: a type that decodes itself
	ShapeRef                         // @Name: a recursive reference

	// shapeByte is an element of a bytes value given as an array.
	shapeByte ShapeKind = -1
)

// Shape is a parsed shape string.
type Shape struct {
	Kind ShapeKind
	// Name is a ShapeNamed's or ShapeRef's type, by import path.
	Name string
	// Bits is the size of a ShapeInt, ShapeUint or ShapeFloat: 8, 16, 32
	// or 64, or 0 for Go's int and uint (32 or 64 bits, by platform) and,
	// in a manifest before format 3, for a number of a size it did not
	// record.
	Bits int
	// Len is a ShapeArray's length.
	Len int64
	// Key and Elem are a map's key and element shapes; Elem is a slice's
	// or array's element shape.
	Key, Elem *Shape
	// Fields are a struct's fields in the order written.
	Fields []ShapeField
	// Elems are a tuple's elements.
	Elems []*Shape
}

// ShapeField is one field of a struct shape.
type ShapeField struct {
	Name  string
	Shape *Shape
}

// ParseShape parses a shape string as stemgen writes it. The error says
// where in the string it stops making sense.
func ParseShape(s string) (*Shape, error) {
	p := &shapeParser{s: s}
	sh, err := p.shape()
	if err == nil && p.i < len(s) {
		err = p.fail("unexpected %q after the shape", s[p.i:])
	}
	if err != nil {
		return nil, err
	}
	return sh, nil
}

// String returns the shape as stemgen writes it.
func (s *Shape) String() string {
	var b strings.Builder
	s.write(&b)
	return b.String()
}

func (s *Shape) write(b *strings.Builder) {
	switch s.Kind {
	case ShapeBool:
		b.WriteString("bool")
	case ShapeString:
		b.WriteString("string")
	case ShapeInt, ShapeUint, ShapeFloat:
		b.WriteString(numberName(s.Kind, s.Bits))
	case ShapeBytes:
		b.WriteString("bytes")
	case ShapeAny:
		b.WriteString("any")
	case ShapeSlice:
		b.WriteString("[]")
		s.Elem.write(b)
	case ShapeArray:
		fmt.Fprintf(b, "[%d]", s.Len)
		s.Elem.write(b)
	case ShapeMap:
		b.WriteString("map[")
		s.Key.write(b)
		b.WriteString("]")
		s.Elem.write(b)
	case ShapeStruct:
		b.WriteString("{")
		for i, f := range s.Fields {
			if i > 0 {
				b.WriteString(",")
			}
			b.WriteString(f.Name)
			b.WriteString(":")
			f.Shape.write(b)
		}
		b.WriteString("}")
	case ShapeTuple:
		b.WriteString("(")
		for i, e := range s.Elems {
			if i > 0 {
				b.WriteString(", ")
			}
			e.write(b)
		}
		b.WriteString(")")
	case ShapeNamed:
		b.WriteString(s.Name)
	case ShapeRef:
		b.WriteString("@" + s.Name)
	case shapeByte:
		b.WriteString("a byte (0 to 255)")
	}
}

type shapeParser struct {
	s string
	i int
}

func (p *shapeParser) fail(format string, args ...any) error {
	return fmt.Errorf("shape %q: at byte %d: %s", p.s, p.i, fmt.Sprintf(format, args...))
}

func (p *shapeParser) peek(prefix string) bool { return strings.HasPrefix(p.s[p.i:], prefix) }

func (p *shapeParser) expect(tok string) error {
	if !p.peek(tok) {
		if p.i == len(p.s) {
			return p.fail("want %q, the shape ends", tok)
		}
		return p.fail("want %q, have %q", tok, p.s[p.i:])
	}
	p.i += len(tok)
	return nil
}

// delims end a name: what follows a shape in a larger one.
const delims = "{}[](),:@ "

func (p *shapeParser) shape() (*Shape, error) {
	switch {
	case p.i == len(p.s):
		return nil, p.fail("want a shape, the string ends")
	case p.peek("[]"):
		p.i += 2
		elem, err := p.shape()
		if err != nil {
			return nil, err
		}
		return &Shape{Kind: ShapeSlice, Elem: elem}, nil
	case p.peek("["):
		p.i++
		start := p.i
		for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
			p.i++
		}
		n, err := strconv.ParseInt(p.s[start:p.i], 10, 64)
		if err != nil {
			p.i = start
			return nil, p.fail("want an array length")
		}
		if err := p.expect("]"); err != nil {
			return nil, err
		}
		elem, err := p.shape()
		if err != nil {
			return nil, err
		}
		return &Shape{Kind: ShapeArray, Len: n, Elem: elem}, nil
	case p.peek("map["):
		p.i += len("map[")
		key, err := p.shape()
		if err != nil {
			return nil, err
		}
		if err := p.expect("]"); err != nil {
			return nil, err
		}
		elem, err := p.shape()
		if err != nil {
			return nil, err
		}
		return &Shape{Kind: ShapeMap, Key: key, Elem: elem}, nil
	case p.peek("{"):
		return p.structShape()
	case p.peek("("):
		return p.tuple()
	case p.peek("@"):
		p.i++
		name := p.name()
		if name == "" {
			return nil, p.fail("want a type's name after @")
		}
		return &Shape{Kind: ShapeRef, Name: name}, nil
	}
	name := p.name()
	switch name {
	case "":
		return nil, p.fail("want a shape, have %q", p.s[p.i:])
	case "bool":
		return &Shape{Kind: ShapeBool}, nil
	case "string":
		return &Shape{Kind: ShapeString}, nil
	case "bytes":
		return &Shape{Kind: ShapeBytes}, nil
	case "any":
		return &Shape{Kind: ShapeAny}, nil
	}
	if kind, bits, ok := parseNumber(name); ok {
		return &Shape{Kind: kind, Bits: bits}, nil
	}
	return &Shape{Kind: ShapeNamed, Name: name}, nil
}

// numberName writes a number's shape: its kind's name and its size.
func numberName(kind ShapeKind, bits int) string {
	name := map[ShapeKind]string{ShapeInt: "int", ShapeUint: "uint", ShapeFloat: "float"}[kind]
	if bits == 0 {
		return name
	}
	return name + strconv.Itoa(bits)
}

// parseNumber reads a number's shape: int, int8 … int64, uint, uint8 …
// uint64, float (before format 3), float32 or float64.
func parseNumber(name string) (ShapeKind, int, bool) {
	for _, k := range []struct {
		prefix string
		kind   ShapeKind
		sizes  []int
	}{{"uint", ShapeUint, []int{8, 16, 32, 64}}, {"int", ShapeInt, []int{8, 16, 32, 64}}, {"float", ShapeFloat, []int{32, 64}}} {
		rest, ok := strings.CutPrefix(name, k.prefix)
		if !ok {
			continue
		}
		if rest == "" {
			return k.kind, 0, true
		}
		for _, n := range k.sizes {
			if rest == strconv.Itoa(n) {
				return k.kind, n, true
			}
		}
		return 0, 0, false
	}
	return 0, 0, false
}

// name reads a name up to the next delimiter.
func (p *shapeParser) name() string {
	start := p.i
	for p.i < len(p.s) && !strings.ContainsRune(delims, rune(p.s[p.i])) {
		p.i++
	}
	return p.s[start:p.i]
}

func (p *shapeParser) structShape() (*Shape, error) {
	p.i++ // {
	st := &Shape{Kind: ShapeStruct}
	if p.peek("}") {
		p.i++
		return st, nil
	}
	for {
		colon := strings.IndexByte(p.s[p.i:], ':')
		if colon <= 0 {
			return nil, p.fail("want a field's name and ':'")
		}
		name := p.s[p.i : p.i+colon]
		p.i += colon + 1
		fs, err := p.shape()
		if err != nil {
			return nil, err
		}
		st.Fields = append(st.Fields, ShapeField{Name: name, Shape: fs})
		switch {
		case p.peek(","):
			p.i++
		case p.peek("}"):
			p.i++
			return st, nil
		default:
			return nil, p.fail("want ',' or '}' after field %s", name)
		}
	}
}

func (p *shapeParser) tuple() (*Shape, error) {
	p.i++ // (
	t := &Shape{Kind: ShapeTuple}
	if p.peek(")") {
		p.i++
		return t, nil
	}
	for {
		e, err := p.shape()
		if err != nil {
			return nil, err
		}
		t.Elems = append(t.Elems, e)
		switch {
		case p.peek(","):
			p.i++
			for p.peek(" ") {
				p.i++
			}
		case p.peek(")"):
			p.i++
			return t, nil
		default:
			return nil, p.fail("want ',' or ')' in a tuple")
		}
	}
}

// Mismatch is the first place in a JSON value that encoding/json could not
// decode into a type of a shape.
type Mismatch struct {
	// Path is where: "items[2].qty"; "" for the value itself. Object keys
	// are written .key, or ["key"] when they are not plain words.
	Path string
	// Want is the shape wanted there, Have what the value holds there
	// (`string "x"`, "number 1.5", "object", ...).
	Want, Have string
	// Detail says more when the kinds agree but the value does not fit
	// ("not an integer", "not base64"), or is "".
	Detail string
}

// Error says where the value does not fit and why.
func (m *Mismatch) Error() string {
	where := "the value"
	if m.Path != "" {
		where = m.Path
	}
	s := fmt.Sprintf("%s: want %s, have %s", where, m.Want, m.Have)
	if m.Detail != "" {
		s += " (" + m.Detail + ")"
	}
	return s
}

// checkBudget bounds the work of one Check: following a recursive
// reference may try each enclosing shape, and a value made to defeat that
// is passed instead of checked for ever.
const checkBudget = 1 << 20

// Check reports the first place where value, a JSON document, could not
// be decoded by encoding/json into a type of the shape, or nil when it
// decodes. Absent and extra object fields decode (encoding/json leaves and
// ignores them), and null decodes into every shape. A value that is not
// JSON is a Mismatch at the top. A named type that decodes itself is
// checked only for time.Time (an RFC 3339 string); others take any value.
// A tuple takes a JSON array of its elements, but "()" (a step with no
// result) an object or nothing, as struct{} does, and a one-element tuple
// its element.
func (s *Shape) Check(value []byte) *Mismatch {
	if len(bytes.TrimSpace(value)) == 0 {
		return nil // what the runtime decodes as the zero value
	}
	if !json.Valid(value) {
		return &Mismatch{Want: s.String(), Have: "text that is not JSON"}
	}
	c := &checker{budget: checkBudget}
	dec := newDecoder(value)
	return c.check(dec, s, nil, "")
}

func newDecoder(b []byte) *json.Decoder {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	return dec
}

type checker struct {
	budget int
}

// check reads one value from dec and checks it against s. outer are the
// shapes enclosing s, outermost first: what a recursive reference may
// name.
func (c *checker) check(dec *json.Decoder, s *Shape, outer []*Shape, path string) *Mismatch {
	c.budget--
	if c.budget < 0 {
		skip(dec)
		return nil
	}
	switch s.Kind {
	case ShapeAny:
		skip(dec)
		return nil
	case ShapeNamed:
		if s.Name == "time.Time" {
			return c.checkTime(dec, s, path)
		}
		skip(dec)
		return nil
	case ShapeRef:
		return c.checkRef(dec, s, outer, path)
	case ShapeTuple:
		switch len(s.Elems) {
		case 0:
			return c.checkStruct(dec, &Shape{Kind: ShapeStruct}, s, outer, path)
		case 1:
			return c.check(dec, s.Elems[0], append(outer, s), path)
		}
	}
	tok, err := dec.Token()
	if err != nil {
		return &Mismatch{Path: path, Want: s.String(), Have: "text that is not JSON"}
	}
	if tok == nil {
		return nil // null decodes into anything
	}
	// A mismatch ends the whole check: nothing reads on after one.
	mismatch := func(detail string) *Mismatch {
		return &Mismatch{Path: path, Want: s.String(), Have: describe(tok), Detail: detail}
	}
	switch s.Kind {
	case ShapeBool:
		if _, ok := tok.(bool); !ok {
			return mismatch("")
		}
	case ShapeString:
		if _, ok := tok.(string); !ok {
			return mismatch("")
		}
	case ShapeInt, ShapeUint, ShapeFloat, shapeByte:
		n, ok := tok.(json.Number)
		if !ok {
			return mismatch("")
		}
		if d := numberProblem(string(n), s.Kind, s.Bits); d != "" {
			return mismatch(d)
		}
	case ShapeBytes:
		switch t := tok.(type) {
		case string:
			if _, err := base64.StdEncoding.DecodeString(t); err != nil {
				return mismatch("not base64")
			}
		case json.Delim:
			if t != '[' {
				return mismatch("")
			}
			return c.elems(dec, &Shape{Kind: shapeByte}, -1, append(outer, s), path)
		default:
			return mismatch("")
		}
	case ShapeSlice, ShapeArray:
		if tok != json.Delim('[') {
			return mismatch("")
		}
		n := int64(-1)
		if s.Kind == ShapeArray {
			n = s.Len
		}
		return c.elems(dec, s.Elem, n, append(outer, s), path)
	case ShapeTuple:
		if tok != json.Delim('[') {
			return mismatch("")
		}
		inner := append(outer, s)
		for i := 0; dec.More(); i++ {
			if i >= len(s.Elems) {
				skip(dec)
				continue
			}
			if m := c.check(dec, s.Elems[i], inner, index(path, i)); m != nil {
				return m
			}
		}
		dec.Token() // ]
	case ShapeMap:
		if tok != json.Delim('{') {
			return mismatch("")
		}
		inner := append(outer, s)
		for dec.More() {
			kt, _ := dec.Token()
			key, _ := kt.(string)
			at := member(path, key)
			if d := keyProblem(key, s.Key); d != "" {
				return &Mismatch{Path: at, Want: "a key of " + s.Key.String(), Have: describe(key), Detail: d}
			}
			if m := c.check(dec, s.Elem, inner, at); m != nil {
				return m
			}
		}
		dec.Token() // }
	case ShapeStruct:
		if tok != json.Delim('{') {
			return mismatch("")
		}
		return c.fields(dec, s, append(outer, s), path)
	}
	return nil
}

// checkStruct checks an object against st (a struct shape), reporting a
// mismatch against as.
func (c *checker) checkStruct(dec *json.Decoder, st, as *Shape, outer []*Shape, path string) *Mismatch {
	tok, err := dec.Token()
	if err != nil {
		return &Mismatch{Path: path, Want: as.String(), Have: "text that is not JSON"}
	}
	if tok == nil {
		return nil
	}
	if tok != json.Delim('{') {
		return &Mismatch{Path: path, Want: as.String(), Have: describe(tok)}
	}
	return c.fields(dec, st, append(outer, as), path)
}

// fields checks the members of an object whose '{' was read against a
// struct shape: each key names the field of that name (or, failing that,
// of that name in another case), and keys naming none are skipped.
func (c *checker) fields(dec *json.Decoder, st *Shape, outer []*Shape, path string) *Mismatch {
	for dec.More() {
		kt, _ := dec.Token()
		key, _ := kt.(string)
		f := field(st, key)
		if f == nil {
			skip(dec)
			continue
		}
		if m := c.check(dec, f.Shape, outer, member(path, key)); m != nil {
			return m
		}
	}
	dec.Token() // }
	return nil
}

// field finds the field a JSON key decodes into, as encoding/json does:
// the exact name first, then one equal under case folding.
func field(st *Shape, key string) *ShapeField {
	for i := range st.Fields {
		if st.Fields[i].Name == key {
			return &st.Fields[i]
		}
	}
	for i := range st.Fields {
		if strings.EqualFold(st.Fields[i].Name, key) {
			return &st.Fields[i]
		}
	}
	return nil
}

// elems checks the elements of an array whose '[' was read: the first n
// (all when n < 0) against elem.
func (c *checker) elems(dec *json.Decoder, elem *Shape, n int64, outer []*Shape, path string) *Mismatch {
	for i := 0; dec.More(); i++ {
		if n >= 0 && int64(i) >= n {
			skip(dec) // encoding/json discards what does not fit
			continue
		}
		if m := c.check(dec, elem, outer, index(path, i)); m != nil {
			return m
		}
	}
	dec.Token() // ]
	return nil
}

// checkTime checks a time.Time: null, or a string in RFC 3339.
func (c *checker) checkTime(dec *json.Decoder, s *Shape, path string) *Mismatch {
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return &Mismatch{Path: path, Want: s.String(), Have: "text that is not JSON"}
	}
	var t time.Time
	if err := t.UnmarshalJSON(raw); err != nil {
		tok, _ := newDecoder(raw).Token()
		detail := "not an RFC 3339 time"
		if _, ok := tok.(string); !ok {
			detail = "a time is an RFC 3339 string"
		}
		return &Mismatch{Path: path, Want: s.String(), Have: describe(tok), Detail: detail}
	}
	return nil
}

// checkRef checks a value against a recursive reference. The shape of the
// named type it refers to is one of the enclosing shapes, but the shape
// string does not say which, so the value is tried against the candidates:
// the enclosing shapes that take its JSON kind (for an object whose keys
// some enclosing struct knows, only those structs), nearest first. It
// passes when it fits one; otherwise the deepest mismatch is reported. So
// a value may pass where it fits another enclosing shape than its own,
// never fail where encoding/json decodes it.
func (c *checker) checkRef(dec *json.Decoder, s *Shape, outer []*Shape, path string) *Mismatch {
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return &Mismatch{Path: path, Want: s.String(), Have: "text that is not JSON"}
	}
	tok, _ := newDecoder(raw).Token()
	if tok == nil {
		return nil
	}
	var keys []string
	if tok == json.Delim('{') {
		keys = objectKeys(raw)
	}
	var candidates, knowing []int
	for i := len(outer) - 1; i >= 0; i-- {
		if !takes(outer[i], tok) {
			continue
		}
		candidates = append(candidates, i)
		if outer[i].Kind == ShapeStruct && slices.ContainsFunc(keys, func(k string) bool { return field(outer[i], k) != nil }) {
			knowing = append(knowing, i)
		}
	}
	if len(knowing) > 0 {
		candidates = knowing
	}
	if len(candidates) == 0 {
		return &Mismatch{Path: path, Want: outer[len(outer)-1].String(), Have: describe(tok)}
	}
	var deepest *Mismatch
	for _, i := range candidates {
		// outer[:i:i]: the candidate's own appends must not overwrite
		// what the callers' outer still holds.
		m := c.check(newDecoder(raw), outer[i], outer[:i:i], path)
		if m == nil || c.budget < 0 {
			return nil
		}
		if deepest == nil || len(m.Path) > len(deepest.Path) {
			deepest = m
		}
	}
	return deepest
}

// takes reports whether a value whose first token is tok may decode into
// shape s as far as its JSON kind goes.
func takes(s *Shape, tok any) bool {
	switch s.Kind {
	case ShapeStruct, ShapeMap:
		return tok == json.Delim('{')
	case ShapeSlice, ShapeArray:
		return tok == json.Delim('[')
	case ShapeTuple:
		if len(s.Elems) == 0 {
			return tok == json.Delim('{')
		}
		return len(s.Elems) == 1 || tok == json.Delim('[')
	}
	return false
}

// objectKeys returns the keys of a JSON object.
func objectKeys(raw []byte) []string {
	dec := newDecoder(raw)
	dec.Token() // {
	var keys []string
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return keys
		}
		k, _ := kt.(string)
		keys = append(keys, k)
		skip(dec)
	}
	return keys
}

// numberProblem says why a JSON number does not decode into a number of
// kind and size, or "". A size of 0 is judged at 64 bits: Go's int on the
// platforms servers run, or a size the manifest did not record.
func numberProblem(n string, kind ShapeKind, bits int) string {
	if bits == 0 {
		bits = 64
	}
	switch kind {
	case ShapeInt:
		if _, err := strconv.ParseInt(n, 10, bits); err != nil {
			if _, ferr := strconv.ParseFloat(n, 64); ferr == nil && !strings.ContainsAny(n, ".eE") {
				return "out of range"
			}
			return "not an integer"
		}
	case ShapeUint:
		if _, err := strconv.ParseUint(n, 10, bits); err != nil {
			if strings.HasPrefix(n, "-") {
				return "negative"
			}
			if !strings.ContainsAny(n, ".eE") {
				return "out of range"
			}
			return "not an integer"
		}
	case ShapeFloat:
		if _, err := strconv.ParseFloat(n, bits); err != nil {
			return "out of range"
		}
	case shapeByte:
		if _, err := strconv.ParseUint(n, 10, 8); err != nil {
			return "not a byte"
		}
	}
	return ""
}

// keyProblem says why an object key does not decode into a map key of
// shape key, or "".
func keyProblem(k string, key *Shape) string {
	bits := key.Bits
	if bits == 0 {
		bits = 64
	}
	switch key.Kind {
	case ShapeInt:
		if _, err := strconv.ParseInt(k, 10, bits); err != nil {
			if _, err := strconv.ParseInt(k, 10, 64); err == nil {
				return "out of range"
			}
			return "not an integer"
		}
	case ShapeUint:
		if _, err := strconv.ParseUint(k, 10, bits); err != nil {
			if _, err := strconv.ParseUint(k, 10, 64); err == nil {
				return "out of range"
			}
			return "not an unsigned integer"
		}
	}
	return ""
}

// describe says what a JSON token is, with its value when short.
func describe(tok any) string {
	switch t := tok.(type) {
	case json.Delim:
		if t == '{' {
			return "an object"
		}
		return "an array"
	case string:
		return "string " + strconv.Quote(shorten(t))
	case json.Number:
		return "number " + shorten(string(t))
	case bool:
		return "bool " + strconv.FormatBool(t)
	case nil:
		return "null"
	}
	return fmt.Sprint(tok)
}

func shorten(s string) string {
	const n = 40
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "…"
}

// member appends an object key to a path: .key, or ["key"] when the key
// is not a plain word.
func member(path, key string) string {
	plain := key != "" && strings.IndexFunc(key, func(r rune) bool {
		return !(r == '_' || r == '-' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9')
	}) < 0
	if !plain {
		return path + "[" + strconv.Quote(key) + "]"
	}
	if path == "" {
		return key
	}
	return path + "." + key
}

func index(path string, i int) string { return fmt.Sprintf("%s[%d]", path, i) }

// skip reads and discards one value.
func skip(dec *json.Decoder) {
	tok, err := dec.Token()
	if err != nil {
		return
	}
	if d, ok := tok.(json.Delim); ok {
		skipRest(dec, d)
	}
}

// skipRest discards the rest of an array or object whose opening open was
// read.
func skipRest(dec *json.Decoder, open json.Delim) {
	if open != '[' && open != '{' {
		return
	}
	for depth := 1; depth > 0; {
		tok, err := dec.Token()
		if err != nil {
			return
		}
		switch tok {
		case json.Delim('['), json.Delim('{'):
			depth++
		case json.Delim(']'), json.Delim('}'):
			depth--
		}
	}
}
