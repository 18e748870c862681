package jsonschema

import (
	"bytes"
	"cmp"
	"encoding"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// Dialect is the value of the "$schema" keyword at the root of every schema
// For returns.
const Dialect = "https://json-schema.org/draft/2020-12/schema"

var (
	timeType            = reflect.TypeFor[time.Time]()
	numberType          = reflect.TypeFor[json.Number]()
	jsonUnmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// For returns the JSON Schema (a subset of draft 2020-12, see the package
// documentation) of the JSON documents that encoding/json decodes into a
// value of type t without error and without silently dropping data.
//
// The schema is stricter than encoding/json in a few ways, on purpose (see
// the package documentation): in particular struct objects have
// "additionalProperties": false, so that a misspelt field name is refused,
// where encoding/json would silently ignore the member. Workers still
// decode with encoding/json; the schema is for tools that check payloads
// without the Go types.
//
// The output is deterministic: the same type always yields the same bytes,
// with object keys sorted. For fails for types encoding/json cannot decode
// into at all (channels, funcs, complex numbers, unsafe pointers, maps whose
// key type is not a string, an integer or an encoding.TextUnmarshaler),
// unless they are unreachable (behind a `json:"-"` tag or unexported).
func For(t reflect.Type) (json.RawMessage, error) {
	if t == nil {
		return nil, fmt.Errorf("jsonschema: For(nil): no type")
	}
	g := &generator{
		onStack:   map[reflect.Type]bool{},
		recursive: map[reflect.Type]bool{},
		done:      map[reflect.Type]schema{},
		defNames:  map[reflect.Type]string{},
		usedNames: map[string]bool{},
		defs:      map[string]any{},
	}
	root, err := g.schemaOf(t, t.String())
	if err != nil {
		return nil, err
	}
	out := schema{}
	for k, v := range root {
		out[k] = v
	}
	out["$schema"] = Dialect
	if len(g.defs) > 0 {
		out["$defs"] = g.defs
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(out); err != nil {
		return nil, fmt.Errorf("jsonschema: encoding schema for %v: %w", t, err)
	}
	return json.RawMessage(bytes.TrimSuffix(buf.Bytes(), []byte("\n"))), nil
}

// schema is one schema object under construction. encoding/json writes map
// keys sorted, which makes For's output deterministic.
type schema = map[string]any

type generator struct {
	// onStack holds the named types being generated, to detect recursion.
	onStack map[reflect.Type]bool
	// recursive holds the named types that refer back to themselves; they
	// live in $defs and are referred to with $ref.
	recursive map[reflect.Type]bool
	// done memoizes finished non-recursive schemas.
	done      map[reflect.Type]schema
	defNames  map[reflect.Type]string
	usedNames map[string]bool
	defs      map[string]any
}

// schemaOf returns the schema of t; where names the Go location being
// described, for error messages.
func (g *generator) schemaOf(t reflect.Type, where string) (schema, error) {
	if s, ok := g.done[t]; ok {
		return s, nil
	}
	if t.Name() == "" {
		// Unnamed types cannot recur on their own: a cycle always passes
		// through a named type, which is where it is cut.
		return g.build(t, where)
	}
	if g.onStack[t] {
		g.recursive[t] = true
		return g.ref(t), nil
	}
	g.onStack[t] = true
	s, err := g.build(t, where)
	delete(g.onStack, t)
	if err != nil {
		return nil, err
	}
	if g.recursive[t] {
		g.defs[g.defName(t)] = s
		s = g.ref(t)
	}
	g.done[t] = s
	return s, nil
}

func (g *generator) ref(t reflect.Type) schema {
	return schema{"$ref": "#/$defs/" + g.defName(t)}
}

// defName returns the $defs key of a recursive named type: its name,
// qualified by its package or numbered if that is not enough to be unique.
// Only characters that need no escaping in a JSON pointer or URI fragment
// are kept.
func (g *generator) defName(t reflect.Type) string {
	if n, ok := g.defNames[t]; ok {
		return n
	}
	n := sanitizeName(t.Name())
	if g.usedNames[n] {
		n = sanitizeName(t.String())
	}
	for i := 2; g.usedNames[n]; i++ {
		n = sanitizeName(t.String()) + "_" + strconv.Itoa(i)
	}
	g.usedNames[n] = true
	g.defNames[t] = n
	return n
}

func sanitizeName(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z', '0' <= r && r <= '9', r == '_', r == '.', r == '-':
			return r
		}
		return '_'
	}, s)
}

// implements reports whether t, or a pointer to it (encoding/json decodes
// into addressable values, so pointer methods count), implements iface.
func implements(t, iface reflect.Type) bool {
	return t.Implements(iface) || (t.Kind() != reflect.Pointer && reflect.PointerTo(t).Implements(iface))
}

// build generates the schema of t, following the order in which
// encoding/json's decoder looks at a value.
func (g *generator) build(t reflect.Type, where string) (schema, error) {
	switch {
	case t == timeType:
		// time.Time implements json.Unmarshaler, but what it accepts is
		// well known: an RFC 3339 string. (null is accepted, and ignored,
		// by the decoder; like everywhere else, only pointers say null.)
		return schema{"type": "string", "format": "date-time"}, nil
	case t.Kind() == reflect.Interface:
		if t.NumMethod() == 0 {
			return schema{}, nil
		}
		// encoding/json cannot decode anything but null into a nil
		// interface with methods: it would not know the concrete type.
		return schema{"type": "null"}, nil
	case t.Kind() == reflect.Pointer:
		elem, err := g.schemaOf(t.Elem(), where)
		if err != nil {
			return nil, err
		}
		return nullable(elem), nil
	case implements(t, jsonUnmarshalerType):
		// The type decides for itself what it accepts.
		return schema{}, nil
	case implements(t, textUnmarshalerType):
		// encoding/json hands it the contents of a JSON string, and
		// refuses anything else (null aside).
		return schema{"type": "string"}, nil
	case t == numberType:
		// A json.Number takes a number, or a string holding one.
		return schema{
			"type":             []string{"number", "string"},
			"contentMediaType": "application/json",
			"contentSchema":    schema{"type": "number"},
		}, nil
	}

	switch t.Kind() {
	case reflect.Bool:
		return schema{"type": "boolean"}, nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return intSchema(t), nil
	case reflect.Float32, reflect.Float64:
		// The bound is the largest finite value, written the way
		// json.Marshal writes it: strconv.ParseFloat accepts every number
		// up to it (and a hair beyond), and fails with a range error on
		// larger ones, which encoding/json reports.
		max := strconv.FormatFloat(math.MaxFloat64, 'g', -1, 64)
		if t.Kind() == reflect.Float32 {
			max = strconv.FormatFloat(math.MaxFloat32, 'g', -1, 32)
		}
		return schema{
			"type":    "number",
			"minimum": json.Number("-" + max),
			"maximum": json.Number(max),
		}, nil
	case reflect.String:
		return schema{"type": "string"}, nil
	case reflect.Slice:
		items, err := g.schemaOf(t.Elem(), where+"[]")
		if err != nil {
			return nil, err
		}
		if t.Elem().Kind() == reflect.Uint8 {
			// encoding/json decodes a base64 string into a byte slice
			// (json.Marshal writes one), and also an array of numbers.
			return schema{
				"type":            []string{"string", "array", "null"},
				"contentEncoding": "base64",
				"items":           items,
			}, nil
		}
		return schema{"type": []string{"array", "null"}, "items": items}, nil
	case reflect.Array:
		items, err := g.schemaOf(t.Elem(), where+"[]")
		if err != nil {
			return nil, err
		}
		// The decoder zeroes missing elements and drops extra ones; both
		// are refused so that the length is exactly right.
		n := json.Number(strconv.Itoa(t.Len()))
		return schema{"type": "array", "items": items, "minItems": n, "maxItems": n}, nil
	case reflect.Map:
		return g.mapSchema(t, where)
	case reflect.Struct:
		return g.structSchema(t, where)
	}
	return nil, fmt.Errorf("jsonschema: %s: type %v cannot be decoded from JSON (%v kind)", where, t, t.Kind())
}

// intSchema is the schema of an integer kind: an integer literal within
// the range of the type (strconv.ParseInt/ParseUint with bit size 64, then
// an overflow check, is what encoding/json does).
func intSchema(t reflect.Type) schema {
	bits := t.Bits()
	if t.Kind() >= reflect.Uint && t.Kind() <= reflect.Uintptr {
		return schema{
			"type":    "integer",
			"minimum": json.Number("0"),
			"maximum": json.Number(strconv.FormatUint(math.MaxUint64>>(64-bits), 10)),
		}
	}
	return schema{
		"type":    "integer",
		"minimum": json.Number(strconv.FormatInt(-1<<(bits-1), 10)),
		"maximum": json.Number(strconv.FormatInt(1<<(bits-1)-1, 10)),
	}
}

// nullable returns s widened to also accept null, without modifying s
// (which may be shared).
func nullable(s schema) schema {
	if len(s) == 0 {
		return s // {} already accepts null.
	}
	switch ty := s["type"].(type) {
	case string:
		if ty == "null" {
			return s
		}
		return with(s, "type", []string{ty, "null"})
	case []string:
		for _, x := range ty {
			if x == "null" {
				return s
			}
		}
		return with(s, "type", append(append([]string(nil), ty...), "null"))
	}
	if branches, ok := s["anyOf"].([]any); ok && len(s) == 1 {
		for _, b := range branches {
			if bs, ok := b.(schema); ok && len(bs) == 1 && bs["type"] == "null" {
				return s
			}
		}
	}
	// A $ref: the referred schema is shared with non-pointer uses.
	return schema{"anyOf": []any{schema{"type": "null"}, s}}
}

func with(s schema, key string, value any) schema {
	c := make(schema, len(s))
	for k, v := range s {
		c[k] = v
	}
	c[key] = value
	return c
}

func (g *generator) mapSchema(t reflect.Type, where string) (schema, error) {
	kt := t.Key()
	s := schema{"type": []string{"object", "null"}}
	switch {
	case reflect.PointerTo(kt).Implements(textUnmarshalerType):
		// UnmarshalText decides; nothing to say about the keys.
	case kt.Kind() == reflect.String:
	case isIntKind(kt.Kind()):
		// encoding/json parses the key with strconv.ParseInt/ParseUint.
		// Describing it as a string that holds a JSON integer is slightly
		// stricter ("+1" and "01" are refused) and is exactly what
		// json.Marshal writes.
		// (A json.Unmarshaler key type is still parsed this way.)
		s["propertyNames"] = schema{"contentMediaType": "application/json", "contentSchema": intSchema(kt)}
	default:
		return nil, fmt.Errorf("jsonschema: %s: map key type %v cannot be decoded from JSON (keys must be strings, integers or implement encoding.TextUnmarshaler)", where, kt)
	}
	values, err := g.schemaOf(t.Elem(), where+"[key]")
	if err != nil {
		return nil, err
	}
	s["additionalProperties"] = values
	return s, nil
}

func isIntKind(k reflect.Kind) bool {
	switch k {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return true
	}
	return false
}

func (g *generator) structSchema(t reflect.Type, where string) (schema, error) {
	props := schema{}
	for _, f := range structFields(t) {
		if f.unsettable {
			// encoding/json fails on these when the embedded pointer is
			// nil, which it always is in a fresh value: leave the name
			// out so that it is refused.
			continue
		}
		fwhere := where + "." + f.goName
		var fs schema
		var err error
		if f.quoted {
			// `json:",string"`: the value is JSON inside a JSON string.
			// null is accepted by the decoder; json.Marshal writes it
			// for nil pointers only.
			inner, err := g.schemaOf(f.elemType, fwhere)
			if err != nil {
				return nil, err
			}
			fs = schema{"type": "string", "contentMediaType": "application/json", "contentSchema": inner}
			if f.typ.Kind() == reflect.Pointer {
				fs = nullable(fs)
			}
		} else if fs, err = g.schemaOf(f.typ, fwhere); err != nil {
			return nil, err
		}
		props[f.name] = fs
	}
	s := schema{"type": "object", "additionalProperties": false}
	if len(props) > 0 {
		s["properties"] = props
	}
	return s, nil
}

// field is a struct field as encoding/json sees it.
type field struct {
	name     string       // JSON name
	goName   string       // Go selector, for error messages
	tagged   bool         // name came from the tag
	index    []int        // index path from the outer struct
	typ      reflect.Type // the field's type
	elemType reflect.Type // typ with one unnamed pointer removed
	quoted   bool         // `json:",string"` applies
	// unsettable: the path goes through an embedded pointer to an
	// unexported struct type, which the decoder cannot allocate.
	unsettable bool
}

// structFields lists the JSON fields of struct type t with the rules of
// encoding/json (typeFields in encode.go): exported fields, and the fields
// of embedded structs promoted unless a json tag names the embedded field,
// with Go's shadowing rules modified so that tagged fields win ties at the
// same depth, and untagged or doubly tagged ties at the same depth hiding
// each other.
func structFields(t reflect.Type) []field {
	type queued struct {
		typ        reflect.Type
		index      []int
		goName     string
		unsettable bool
	}
	var current []queued
	next := []queued{{typ: t}}
	var count, nextCount map[reflect.Type]int
	visited := map[reflect.Type]bool{}
	var fields []field

	for len(next) > 0 {
		current, next = next, nil
		count, nextCount = nextCount, map[reflect.Type]int{}
		for _, q := range current {
			if visited[q.typ] {
				continue
			}
			visited[q.typ] = true
			for i := 0; i < q.typ.NumField(); i++ {
				sf := q.typ.Field(i)
				if sf.Anonymous {
					et := sf.Type
					if et.Kind() == reflect.Pointer {
						et = et.Elem()
					}
					if !sf.IsExported() && et.Kind() != reflect.Struct {
						continue
					}
				} else if !sf.IsExported() {
					continue
				}
				tag := sf.Tag.Get("json")
				if tag == "-" {
					continue
				}
				name, opts, _ := strings.Cut(tag, ",")
				if !isValidTag(name) {
					name = ""
				}
				index := append(append([]int(nil), q.index...), i)
				goName := sf.Name
				if q.goName != "" {
					goName = q.goName + "." + sf.Name
				}
				ft := sf.Type
				if ft.Name() == "" && ft.Kind() == reflect.Pointer {
					ft = ft.Elem()
				}
				quoted := false
				if hasOption(opts, "string") {
					switch ft.Kind() {
					case reflect.Bool, reflect.Float32, reflect.Float64, reflect.String:
						quoted = true
					default:
						quoted = isIntKind(ft.Kind())
					}
				}
				if name != "" || !sf.Anonymous || ft.Kind() != reflect.Struct {
					tagged := name != ""
					if name == "" {
						name = sf.Name
					}
					f := field{
						name: name, goName: goName, tagged: tagged, index: index,
						typ: sf.Type, elemType: ft, quoted: quoted,
						unsettable: q.unsettable,
					}
					fields = append(fields, f)
					if count[q.typ] > 1 {
						// Several embedded structs of this type at this
						// depth: make the tie visible to the dominance pass.
						fields = append(fields, f)
					}
					continue
				}
				nextCount[ft]++
				if nextCount[ft] == 1 {
					next = append(next, queued{
						typ: ft, index: index, goName: goName,
						unsettable: q.unsettable || (sf.Type.Kind() == reflect.Pointer && !sf.IsExported()),
					})
				}
			}
		}
	}

	slices.SortFunc(fields, func(a, b field) int {
		// By name, then depth, then tagged first, then index path.
		if c := strings.Compare(a.name, b.name); c != 0 {
			return c
		}
		if c := cmp.Compare(len(a.index), len(b.index)); c != 0 {
			return c
		}
		if a.tagged != b.tagged {
			if a.tagged {
				return -1
			}
			return 1
		}
		return slices.Compare(a.index, b.index)
	})
	var out []field
	for i := 0; i < len(fields); {
		j := i + 1
		for j < len(fields) && fields[j].name == fields[i].name {
			j++
		}
		group := fields[i:j]
		if len(group) == 1 || len(group[0].index) != len(group[1].index) || group[0].tagged != group[1].tagged {
			out = append(out, group[0])
		}
		i = j
	}
	return out
}

func hasOption(opts, want string) bool {
	for opts != "" {
		var o string
		o, opts, _ = strings.Cut(opts, ",")
		if o == want {
			return true
		}
	}
	return false
}

// isValidTag is encoding/json's rule for names in json tags.
func isValidTag(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		switch {
		case strings.ContainsRune("!#$%&()*+-./:;<=>?@[]^_{|}~ ", c):
		case !unicode.IsLetter(c) && !unicode.IsDigit(c):
			return false
		}
	}
	return true
}
