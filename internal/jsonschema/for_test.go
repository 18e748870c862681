package jsonschema

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"
)

// Shapes for the struct-field rules.
type (
	tagged struct {
		Name     string  `json:"name"`
		Omit     int     `json:"omit,omitempty"`
		Zero     int     `json:",omitzero"`
		Skipped  int     `json:"-"`
		Dash     int     `json:"-,"`
		Bad      int     `json:"a\"b"` // invalid tag name: the Go name is used
		Quoted   int8    `json:"q,string"`
		QuotedP  *bool   `json:"qp,string"`
		NotQuote []int   `json:"nq,string"` // ,string applies to scalars only
		Ptr      *string `json:"ptr"`
		private  int
	}
	inner struct {
		A int
		B string `json:"b"`
	}
	Exported struct{ E bool }
	promoted struct {
		inner           // untagged: fields promoted
		*Exported       // exported pointer: promoted, allocated on decode
		Named     inner `json:"named"` // tagged: a plain field
		*hidden         // unexported pointer: cannot be allocated, left out
		C         float64
	}
	hidden   struct{ H int }
	conflict struct {
		left
		right
		Top int `json:"x"` // shallower: wins over both
	}
	left  struct{ Y, Z int }
	right struct {
		Y int
		W int `json:"Z"` // tagged at the same depth: beats left.Z
	}
	recursive struct {
		Next  *recursive
		Items []recursive
		Other map[string]*recursive
	}
	withChan  struct{ C chan int }
	skipsChan struct {
		C chan int `json:"-"`
		c chan int
	}
	numbers struct {
		N  json.Number
		NP *json.Number
	}
	bytesNamed []byte
	myByte     uint8
	wrapsTime  struct{ T *time.Time }
)

func schemaOf(t *testing.T, typ reflect.Type) string {
	t.Helper()
	s, err := For(typ)
	if err != nil {
		t.Fatalf("For(%v): %v", typ, err)
	}
	var m map[string]any
	d := json.NewDecoder(bytes.NewReader(s))
	d.UseNumber()
	if err := d.Decode(&m); err != nil {
		t.Fatalf("For(%v) is not JSON: %v\n%s", typ, err, s)
	}
	if m["$schema"] != Dialect {
		t.Errorf("For(%v): $schema = %v", typ, m["$schema"])
	}
	delete(m, "$schema")
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

func TestForKinds(t *testing.T) {
	const (
		i64 = `"maximum":9223372036854775807,"minimum":-9223372036854775808,"type":"integer"`
		u8  = `"maximum":255,"minimum":0,"type":"integer"`
	)
	tests := []struct {
		typ  reflect.Type
		want string
	}{
		{reflect.TypeFor[bool](), `{"type":"boolean"}`},
		{reflect.TypeFor[string](), `{"type":"string"}`},
		{reflect.TypeFor[int](), `{` + i64 + `}`},
		{reflect.TypeFor[int8](), `{"maximum":127,"minimum":-128,"type":"integer"}`},
		{reflect.TypeFor[int16](), `{"maximum":32767,"minimum":-32768,"type":"integer"}`},
		{reflect.TypeFor[int32](), `{"maximum":2147483647,"minimum":-2147483648,"type":"integer"}`},
		{reflect.TypeFor[int64](), `{` + i64 + `}`},
		{reflect.TypeFor[time.Duration](), `{` + i64 + `}`},
		{reflect.TypeFor[uint](), `{"maximum":18446744073709551615,"minimum":0,"type":"integer"}`},
		{reflect.TypeFor[uint8](), `{` + u8 + `}`},
		{reflect.TypeFor[uint16](), `{"maximum":65535,"minimum":0,"type":"integer"}`},
		{reflect.TypeFor[uint32](), `{"maximum":4294967295,"minimum":0,"type":"integer"}`},
		{reflect.TypeFor[uint64](), `{"maximum":18446744073709551615,"minimum":0,"type":"integer"}`},
		{reflect.TypeFor[uintptr](), `{"maximum":18446744073709551615,"minimum":0,"type":"integer"}`},
		{reflect.TypeFor[float32](), `{"maximum":3.4028235e+38,"minimum":-3.4028235e+38,"type":"number"}`},
		{reflect.TypeFor[float64](), `{"maximum":1.7976931348623157e+308,"minimum":-1.7976931348623157e+308,"type":"number"}`},
		{reflect.TypeFor[[]byte](), `{"contentEncoding":"base64","items":{` + u8 + `},"type":["string","array","null"]}`},
		{reflect.TypeFor[bytesNamed](), `{"contentEncoding":"base64","items":{` + u8 + `},"type":["string","array","null"]}`},
		{reflect.TypeFor[[]myByte](), `{"contentEncoding":"base64","items":{` + u8 + `},"type":["string","array","null"]}`},
		{reflect.TypeFor[[2]byte](), `{"items":{` + u8 + `},"maxItems":2,"minItems":2,"type":"array"}`},
		{reflect.TypeFor[time.Time](), `{"format":"date-time","type":"string"}`},
		{reflect.TypeFor[*time.Time](), `{"format":"date-time","type":["string","null"]}`},
		{reflect.TypeFor[[]string](), `{"items":{"type":"string"},"type":["array","null"]}`},
		{reflect.TypeFor[[3]bool](), `{"items":{"type":"boolean"},"maxItems":3,"minItems":3,"type":"array"}`},
		{reflect.TypeFor[[0]int](), `{"items":{` + i64 + `},"maxItems":0,"minItems":0,"type":"array"}`},
		{reflect.TypeFor[map[string]bool](), `{"additionalProperties":{"type":"boolean"},"type":["object","null"]}`},
		{reflect.TypeFor[map[int8]string](), `{"additionalProperties":{"type":"string"},"propertyNames":{"contentMediaType":"application/json","contentSchema":{"maximum":127,"minimum":-128,"type":"integer"}},"type":["object","null"]}`},
		{reflect.TypeFor[map[level]string](), `{"additionalProperties":{"type":"string"},"type":["object","null"]}`},
		{reflect.TypeFor[map[string]any](), `{"additionalProperties":{},"type":["object","null"]}`},
		{reflect.TypeFor[*int8](), `{"maximum":127,"minimum":-128,"type":["integer","null"]}`},
		{reflect.TypeFor[**bool](), `{"type":["boolean","null"]}`},
		{reflect.TypeFor[*[]int8](), `{"items":{"maximum":127,"minimum":-128,"type":"integer"},"type":["array","null"]}`},
		{reflect.TypeFor[any](), `{}`},
		{reflect.TypeFor[*any](), `{}`},
		{reflect.TypeFor[fmt.Stringer](), `{"type":"null"}`},
		{reflect.TypeFor[json.RawMessage](), `{}`},
		{reflect.TypeFor[opaque](), `{}`},
		{reflect.TypeFor[*opaque](), `{}`},
		{reflect.TypeFor[level](), `{"type":"string"}`},
		{reflect.TypeFor[*level](), `{"type":["string","null"]}`},
		{reflect.TypeFor[struct{}](), `{"additionalProperties":false,"type":"object"}`},
		{reflect.TypeFor[numbers](), `{"additionalProperties":false,"properties":{` +
			`"N":{"contentMediaType":"application/json","contentSchema":{"type":"number"},"type":["number","string"]},` +
			`"NP":{"contentMediaType":"application/json","contentSchema":{"type":"number"},"type":["number","string","null"]}},"type":"object"}`},
		{reflect.TypeFor[wrapsTime](), `{"additionalProperties":false,"properties":{"T":{"format":"date-time","type":["string","null"]}},"type":"object"}`},
		{reflect.TypeFor[tagged](), `{"additionalProperties":false,"properties":{` +
			`"-":{` + i64 + `},` +
			`"Bad":{` + i64 + `},` +
			`"Zero":{` + i64 + `},` +
			`"name":{"type":"string"},` +
			`"nq":{"items":{` + i64 + `},"type":["array","null"]},` +
			`"omit":{` + i64 + `},` +
			`"ptr":{"type":["string","null"]},` +
			`"q":{"contentMediaType":"application/json","contentSchema":{"maximum":127,"minimum":-128,"type":"integer"},"type":"string"},` +
			`"qp":{"contentMediaType":"application/json","contentSchema":{"type":"boolean"},"type":["string","null"]}` +
			`},"type":"object"}`},
		{reflect.TypeFor[promoted](), `{"additionalProperties":false,"properties":{` +
			`"A":{` + i64 + `},` +
			`"C":{"maximum":1.7976931348623157e+308,"minimum":-1.7976931348623157e+308,"type":"number"},` +
			`"E":{"type":"boolean"},` +
			`"b":{"type":"string"},` +
			`"named":{"additionalProperties":false,"properties":{"A":{` + i64 + `},"b":{"type":"string"}},"type":"object"}` +
			`},"type":"object"}`},
		// Y is ambiguous (both untagged at depth 1) and disappears; Z is
		// right.W's (tagged); x is Top's.
		{reflect.TypeFor[conflict](), `{"additionalProperties":false,"properties":{` +
			`"Z":{` + i64 + `},"x":{` + i64 + `}},"type":"object"}`},
		{reflect.TypeFor[skipsChan](), `{"additionalProperties":false,"type":"object"}`},
		{reflect.TypeFor[recursive](), `{"$defs":{"recursive":{"additionalProperties":false,"properties":{` +
			`"Items":{"items":{"$ref":"#/$defs/recursive"},"type":["array","null"]},` +
			`"Next":{"anyOf":[{"type":"null"},{"$ref":"#/$defs/recursive"}]},` +
			`"Other":{"additionalProperties":{"anyOf":[{"type":"null"},{"$ref":"#/$defs/recursive"}]},"type":["object","null"]}` +
			`},"type":"object"}},"$ref":"#/$defs/recursive"}`},
		{reflect.TypeFor[*recursive](), `{"$defs":{"recursive":{"additionalProperties":false,"properties":{` +
			`"Items":{"items":{"$ref":"#/$defs/recursive"},"type":["array","null"]},` +
			`"Next":{"anyOf":[{"type":"null"},{"$ref":"#/$defs/recursive"}]},` +
			`"Other":{"additionalProperties":{"anyOf":[{"type":"null"},{"$ref":"#/$defs/recursive"}]},"type":["object","null"]}` +
			`},"type":"object"}},"anyOf":[{"type":"null"},{"$ref":"#/$defs/recursive"}]}`},
		{reflect.TypeFor[forest](), `{"$defs":{"forest":{"items":{"$ref":"#/$defs/forest"},"type":["array","null"]}},"$ref":"#/$defs/forest"}`},
		{reflect.TypeFor[ping](), `{"$defs":{"ping":{"additionalProperties":false,"properties":{"Pong":{"additionalProperties":false,"properties":{` +
			`"Ping":{"items":{"$ref":"#/$defs/ping"},"type":["array","null"]}},"type":["object","null"]}},"type":"object"}},"$ref":"#/$defs/ping"}`},
	}
	for _, tt := range tests {
		t.Run(tt.typ.String(), func(t *testing.T) {
			if got := schemaOf(t, tt.typ); got != tt.want {
				t.Errorf("For(%v)\n got %s\nwant %s", tt.typ, got, tt.want)
			}
		})
	}
}

func TestForErrors(t *testing.T) {
	tests := []struct {
		typ  reflect.Type
		want string
	}{
		{reflect.TypeFor[chan int](), "chan int cannot be decoded from JSON"},
		{reflect.TypeFor[func()](), "func() cannot be decoded from JSON"},
		{reflect.TypeFor[complex128](), "complex128 cannot be decoded from JSON"},
		{reflect.TypeFor[unsafe.Pointer](), "unsafe.Pointer cannot be decoded from JSON"},
		{reflect.TypeFor[map[float64]int](), "map key type float64"},
		{reflect.TypeFor[map[[2]int]int](), "map key type [2]int"},
		{reflect.TypeFor[withChan](), "jsonschema.withChan.C: type chan int"},
		{reflect.TypeFor[[]map[bool]int](), "[]map[bool]int[]: map key type bool"},
	}
	for _, tt := range tests {
		_, err := For(tt.typ)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("For(%v) = %v, want an error containing %q", tt.typ, err, tt.want)
		}
	}
	if _, err := For(nil); err == nil {
		t.Error("For(nil) succeeded")
	}
}

func TestForDeterministic(t *testing.T) {
	typ := reflect.TypeFor[order]()
	first, err := For(typ)
	if err != nil {
		t.Fatal(err)
	}
	for range 20 {
		again, err := For(typ)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(first, again) {
			t.Fatalf("For is not deterministic:\n%s\n%s", first, again)
		}
	}
	// Keys are sorted at every level: re-encoding a decoded copy (which
	// sorts map keys) gives the same bytes.
	var v any
	d := json.NewDecoder(bytes.NewReader(first))
	d.UseNumber()
	if err := d.Decode(&v); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	if got := bytes.TrimSpace(buf.Bytes()); !bytes.Equal(got, first) {
		t.Errorf("keys not sorted:\n%s\n%s", first, got)
	}
}

// Two recursive types with the same name get distinct definitions.
func TestForDefNameCollision(t *testing.T) {
	type node struct{ Next *node }
	outer := func() reflect.Type {
		type node struct {
			Kids []node
			Val  int
		}
		return reflect.TypeFor[node]()
	}()
	both := reflect.StructOf([]reflect.StructField{
		{Name: "A", Type: reflect.TypeFor[node]()},
		{Name: "B", Type: outer},
	})
	s, err := For(both)
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Defs map[string]json.RawMessage `json:"$defs"`
	}
	if err := json.Unmarshal(s, &m); err != nil {
		t.Fatal(err)
	}
	if len(m.Defs) != 2 {
		t.Fatalf("want 2 definitions, got %d: %s", len(m.Defs), s)
	}
	if err := Validate(s, []byte(`{"A":{"Next":{"Next":null}},"B":{"Kids":[{"Kids":[],"Val":1}],"Val":2}}`)); err != nil {
		t.Error(err)
	}
	if err := Validate(s, []byte(`{"A":{"Next":{"Kids":[]}}}`)); err == nil {
		t.Error("definitions mixed up")
	}
}

type (
	diamondLeaf  struct{ X, Y int }
	diamondLeft  struct{ diamondLeaf }
	diamondRight struct{ diamondLeaf }
	// X and Y reach diamond twice at the same depth: encoding/json drops
	// both; V is unambiguous.
	diamond struct {
		diamondLeft
		diamondRight
		V int
	}
	glist[T any] struct {
		V    T
		Next *glist[T]
	}
)

// The property names For lists for structs are the member names
// json.Marshal writes (for types without omitempty and nil pointers).
func TestForPropertiesMatchMarshal(t *testing.T) {
	values := []any{
		conflict{}, diamond{}, promoted{Exported: &Exported{}}, inner{}, left{}, right{},
		glist[string]{Next: &glist[string]{}},
	}
	for _, v := range values {
		s := mustFor(t, reflect.TypeOf(v))
		var sch struct {
			Properties map[string]json.RawMessage
			Ref        string                                                     `json:"$ref"`
			Defs       map[string]struct{ Properties map[string]json.RawMessage } `json:"$defs"`
		}
		if err := json.Unmarshal(s, &sch); err != nil {
			t.Fatal(err)
		}
		props := sch.Properties
		if sch.Ref != "" {
			props = sch.Defs[strings.TrimPrefix(sch.Ref, "#/$defs/")].Properties
		}
		doc, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(doc, &m); err != nil {
			t.Fatal(err)
		}
		var got, want []string
		for k := range props {
			got = append(got, k)
		}
		for k := range m {
			want = append(want, k)
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("%T: schema properties %v, json.Marshal writes %v", v, got, want)
		}
	}
	// Generic type names are made safe for $ref.
	s := string(mustFor(t, reflect.TypeFor[glist[int]]()))
	if !strings.Contains(s, `"$ref":"#/$defs/glist_int_"`) {
		t.Errorf("generic definition name: %s", s)
	}
	if err := Validate([]byte(s), []byte(`{"V":1,"Next":{"V":2,"Next":null}}`)); err != nil {
		t.Error(err)
	}
}
