package manifest_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stemflow/stem/internal/manifest"
)

// Every construct stemgen writes parses, and prints back as written.
func TestParseShapeRoundTrip(t *testing.T) {
	for _, s := range []string{
		"bool", "string", "int", "uint", "float", "bytes", "any",
		"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float32", "float64",
		"map[int32]uint8", "[4]uint8", "{n:int64,x:float32}",
		// Names that only start like a number are named types.
		"int128", "float16", "uint7", "integer",
		"[]int", "[3]string", "[0]bool", "[][2]float",
		"map[string]int", "map[int][]string", "map[uint]map[string]any",
		"map[string]github.com/google/uuid.UUID",
		"{}", "{a:int}", "{cool_off:int,items:[]{price_cents:int,qty:int,sku:string},ship_within:int}",
		"{Items:[]github.com/jackc/pgx/v5/pgtype.Text,next:string}",
		"()", "(int)", "(string, []string)", "({N:int}, [2]bool)",
		"time.Time", "error", "encoding/json.RawMessage",
		"{Kids:[]@example.com/tree.Node,Val:int}",
		"map[string]@example.com/tree.Tree",
		// JSON names may hold what shapes use as punctuation, but ':'.
		"{a-b:int,odd name:string,x.y:bool,[]:int,{}:string}",
	} {
		sh, err := manifest.ParseShape(s)
		if err != nil {
			t.Errorf("ParseShape(%q): %v", s, err)
			continue
		}
		if got := sh.String(); got != s {
			t.Errorf("ParseShape(%q).String() = %q", s, got)
		}
	}
}

func TestParseShapeKinds(t *testing.T) {
	sh, err := manifest.ParseShape("{a:[]int,b:[2]map[int]bytes,c:(),d:@x.T,e:time.Time}")
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		name string
		kind manifest.ShapeKind
	}{{"a", manifest.ShapeSlice}, {"b", manifest.ShapeArray}, {"c", manifest.ShapeTuple}, {"d", manifest.ShapeRef}, {"e", manifest.ShapeNamed}}
	if sh.Kind != manifest.ShapeStruct || len(sh.Fields) != len(want) {
		t.Fatalf("parsed %+v", sh)
	}
	for i, w := range want {
		if f := sh.Fields[i]; f.Name != w.name || f.Shape.Kind != w.kind {
			t.Errorf("field %d: %s kind %d, want %s kind %d", i, f.Name, f.Shape.Kind, w.name, w.kind)
		}
	}
	b := sh.Fields[1].Shape
	if b.Len != 2 || b.Elem.Kind != manifest.ShapeMap || b.Elem.Key.Kind != manifest.ShapeInt || b.Elem.Elem.Kind != manifest.ShapeBytes {
		t.Errorf("b parsed as %s", b)
	}
	if d := sh.Fields[3].Shape; d.Name != "x.T" {
		t.Errorf("ref named %q", d.Name)
	}
}

// A malformed shape is refused with where it stops making sense.
func TestParseShapeErrors(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"", "want a shape, the string ends"},
		{"[]", "want a shape, the string ends"},
		{"[x]int", "want an array length"},
		{"[3int", `want "]"`},
		{"map[string", `want "]", the shape ends`},
		{"{a:int", "want ',' or '}' after field a"},
		{"{a}", "want a field's name and ':'"},
		{"{:int}", "want a field's name and ':'"},
		{"(int string)", "want ',' or ')' in a tuple"},
		{"int}", `unexpected "}" after the shape`},
		{"@", "want a type's name after @"},
		{"{a:}", "want a shape"},
	} {
		_, err := manifest.ParseShape(c.in)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "shape "+jsonQuote(c.in)) {
			t.Errorf("ParseShape(%q) = %v, want an error naming the shape and %q", c.in, err, c.want)
		}
	}
}

func jsonQuote(s string) string { b, _ := json.Marshal(s); return string(b) }

type item struct {
	Price int    `json:"price_cents"`
	Qty   int    `json:"qty"`
	SKU   string `json:"sku"`
}

type order struct {
	CoolOff int    `json:"cool_off"`
	Items   []item `json:"items"`
}

type node struct {
	Val  int    `json:"val"`
	Kids []node `json:"kids"`
}

type outerRec struct {
	B struct {
		As []outerRec `json:"as"`
		N  int        `json:"n"`
	} `json:"b"`
	S string `json:"s"`
}

type quoted struct {
	N int `json:"n,string"`
}

// Check agrees with encoding/json: each value is decoded into a Go type of
// the shape, and Check reports a mismatch exactly when that fails, at the
// path given.
func TestCheckAgreesWithEncodingJSON(t *testing.T) {
	type tc struct {
		shape string
		into  func() any
		value string
		path  string // "" with ok
		ok    bool
		have  string // part of Have, when not ok
	}
	cases := []tc{
		// Scalars.
		{shape: "bool", into: func() any { return new(bool) }, value: `true`, ok: true},
		{shape: "bool", into: func() any { return new(bool) }, value: `"true"`, have: `string "true"`},
		{shape: "string", into: func() any { return new(string) }, value: `"x"`, ok: true},
		{shape: "string", into: func() any { return new(string) }, value: `5`, have: "number 5"},
		{shape: "string", into: func() any { return new(string) }, value: `{}`, have: "an object"},
		{shape: "int", into: func() any { return new(int) }, value: `-42`, ok: true},
		{shape: "int", into: func() any { return new(int) }, value: `1.5`, have: "number 1.5"},
		{shape: "int", into: func() any { return new(int) }, value: `1e2`, have: "number 1e2"},
		{shape: "int", into: func() any { return new(int) }, value: `"1"`, have: `string "1"`},
		{shape: "int", into: func() any { return new(int) }, value: `99999999999999999999`, have: "number"},
		{shape: "uint", into: func() any { return new(uint) }, value: `7`, ok: true},
		{shape: "uint", into: func() any { return new(uint) }, value: `-1`, have: "number -1"},
		// Sized numbers are judged at their size.
		{shape: "int8", into: func() any { return new(int8) }, value: `-128`, ok: true},
		{shape: "int8", into: func() any { return new(int8) }, value: `128`, have: "number 128"},
		{shape: "int32", into: func() any { return new(int32) }, value: `2147483648`, have: "number 2147483648"},
		{shape: "int64", into: func() any { return new(int64) }, value: `2147483648`, ok: true},
		{shape: "uint8", into: func() any { return new(uint8) }, value: `255`, ok: true},
		{shape: "uint8", into: func() any { return new(uint8) }, value: `256`, have: "number 256"},
		{shape: "uint16", into: func() any { return new(uint16) }, value: `-1`, have: "number -1"},
		{shape: "float32", into: func() any { return new(float32) }, value: `3.5e38`, have: "number 3.5e38"},
		{shape: "float32", into: func() any { return new(float32) }, value: `3.4e38`, ok: true},
		{shape: "float64", into: func() any { return new(float64) }, value: `3.5e38`, ok: true},
		{shape: "map[int8]bool", into: func() any { return new(map[int8]bool) }, value: `{"127":true}`, ok: true},
		{shape: "map[int8]bool", into: func() any { return new(map[int8]bool) }, value: `{"300":true}`, path: "300", have: `string "300"`},
		{shape: "map[uint8]bool", into: func() any { return new(map[uint8]bool) }, value: `{"256":true}`, path: "256", have: `string "256"`},
		{shape: "float", into: func() any { return new(float64) }, value: `1.5e3`, ok: true},
		{shape: "float", into: func() any { return new(float64) }, value: `1e400`, have: "number 1e400"},
		{shape: "float", into: func() any { return new(float64) }, value: `false`, have: "bool false"},
		{shape: "bytes", into: func() any { return new([]byte) }, value: `"aGk="`, ok: true},
		{shape: "bytes", into: func() any { return new([]byte) }, value: `"!!"`, have: `string "!!"`},
		{shape: "bytes", into: func() any { return new([]byte) }, value: `[1,255]`, ok: true},
		{shape: "bytes", into: func() any { return new([]byte) }, value: `[1,300]`, path: "[1]", have: "number 300"},
		{shape: "bytes", into: func() any { return new([]byte) }, value: `{}`, have: "an object"},
		{shape: "any", into: func() any { return new(any) }, value: `[1,{"a":null}]`, ok: true},
		// null decodes into every shape, at the top and inside.
		{shape: "int", into: func() any { return new(int) }, value: `null`, ok: true},
		{shape: "{a:[]int}", into: func() any { return new(struct{ A []int }) }, value: `{"a":[null,1]}`, ok: true},
		// Slices and arrays.
		{shape: "[]int", into: func() any { return new([]int) }, value: `[1,2,3]`, ok: true},
		{shape: "[]int", into: func() any { return new([]int) }, value: `[1,"a",2]`, path: "[1]", have: `string "a"`},
		{shape: "[]int", into: func() any { return new([]int) }, value: `{"0":1}`, have: "an object"},
		{shape: "[2]int", into: func() any { return new([2]int) }, value: `[1,2,"ignored"]`, ok: true},
		{shape: "[2]int", into: func() any { return new([2]int) }, value: `[1]`, ok: true},
		{shape: "[2]int", into: func() any { return new([2]int) }, value: `[1,true]`, path: "[1]", have: "bool true"},
		{shape: "[][]string", into: func() any { return new([][]string) }, value: `[["a"],["b",3]]`, path: "[1][1]", have: "number 3"},
		// Maps.
		{shape: "map[string]int", into: func() any { return new(map[string]int) }, value: `{"a":1,"b c":2}`, ok: true},
		{shape: "map[string]int", into: func() any { return new(map[string]int) }, value: `{"a":1,"b c":"x"}`, path: `["b c"]`, have: `string "x"`},
		{shape: "map[int]bool", into: func() any { return new(map[int]bool) }, value: `{"12":true}`, ok: true},
		{shape: "map[int]bool", into: func() any { return new(map[int]bool) }, value: `{"x":true}`, path: "x", have: `string "x"`},
		{shape: "map[uint]bool", into: func() any { return new(map[uint]bool) }, value: `{"-3":true}`, path: "-3", have: `string "-3"`},
		{shape: "map[string]int", into: func() any { return new(map[string]int) }, value: `[]`, have: "an array"},
		// Structs: absent and extra fields decode; names match in any case.
		{shape: "{cool_off:int,items:[]{price_cents:int,qty:int,sku:string}}", into: func() any { return new(order) },
			value: `{"cool_off":5,"items":[{"sku":"a","qty":1},{"sku":"b","qty":2,"extra":{"x":[1]}}],"unknown":"x"}`, ok: true},
		{shape: "{cool_off:int,items:[]{price_cents:int,qty:int,sku:string}}", into: func() any { return new(order) },
			value: `{}`, ok: true},
		{shape: "{cool_off:int,items:[]{price_cents:int,qty:int,sku:string}}", into: func() any { return new(order) },
			value: `{"items":[{"qty":1},{"qty":2},{"qty":"three"}]}`, path: "items[2].qty", have: `string "three"`},
		{shape: "{cool_off:int,items:[]{price_cents:int,qty:int,sku:string}}", into: func() any { return new(order) },
			value: `{"items":{"qty":1}}`, path: "items", have: "an object"},
		{shape: "{cool_off:int,items:[]{price_cents:int,qty:int,sku:string}}", into: func() any { return new(order) },
			value: `{"COOL_OFF":"soon"}`, path: "COOL_OFF", have: `string "soon"`},
		{shape: "{cool_off:int,items:[]{price_cents:int,qty:int,sku:string}}", into: func() any { return new(order) },
			value: `[{"cool_off":1}]`, have: "an array"},
		{shape: "{n:string}", into: func() any { return new(quoted) }, value: `{"n":"12"}`, ok: true},
		{shape: "{n:string}", into: func() any { return new(quoted) }, value: `{"n":12}`, path: "n", have: "number 12"},
		// Named types that decode themselves.
		{shape: "time.Time", into: func() any { return new(time.Time) }, value: `"2024-05-01T10:00:00Z"`, ok: true},
		{shape: "time.Time", into: func() any { return new(time.Time) }, value: `"2024-05-01"`, have: `string "2024-05-01"`},
		{shape: "time.Time", into: func() any { return new(time.Time) }, value: `5`, have: "number 5"},
		{shape: "{at:time.Time}", into: func() any {
			return new(struct {
				At time.Time `json:"at"`
			})
		}, value: `{"at":null}`, ok: true},
		{shape: "encoding/json.RawMessage", into: func() any { return new(json.RawMessage) }, value: `{"any":[1]}`, ok: true},
		// Recursive references: the enclosing type's shape.
		{shape: "{kids:[]@x.node,val:int}", into: func() any { return new(node) }, value: `{"val":1,"kids":[{"val":2,"kids":[{"val":3}]}]}`, ok: true},
		{shape: "{kids:[]@x.node,val:int}", into: func() any { return new(node) }, value: `{"val":1,"kids":[{"val":2,"kids":[{"val":"three"}]}]}`, path: "kids[0].kids[0].val", have: `string "three"`},
		{shape: "{kids:[]@x.node,val:int}", into: func() any { return new(node) }, value: `{"kids":[7]}`, path: "kids[0]", have: "number 7"},
		{shape: "{b:{as:[]@x.outerRec,n:int},s:string}", into: func() any { return new(outerRec) }, value: `{"b":{"as":[{"s":"x","b":{"n":1}}]}}`, ok: true},
		{shape: "{b:{as:[]@x.outerRec,n:int},s:string}", into: func() any { return new(outerRec) }, value: `{"b":{"as":[{"s":5}]}}`, path: "b.as[0].s", have: "number 5"},
		// Tuples: "()" is a step without a result (struct{}).
		{shape: "()", into: func() any { return new(struct{}) }, value: `{}`, ok: true},
		{shape: "()", into: func() any { return new(struct{}) }, value: `5`, have: "number 5"},
		{shape: "(int)", into: func() any { return new(int) }, value: `5`, ok: true},
		{shape: "(int)", into: func() any { return new(int) }, value: `"5"`, have: `string "5"`},
	}
	for _, c := range cases {
		sh, err := manifest.ParseShape(c.shape)
		if err != nil {
			t.Fatalf("ParseShape(%q): %v", c.shape, err)
		}
		m := sh.Check([]byte(c.value))
		jerr := json.Unmarshal([]byte(c.value), c.into())
		if (m == nil) != (jerr == nil) {
			t.Errorf("%s against %s: Check %v, encoding/json %v", c.value, c.shape, m, jerr)
			continue
		}
		if c.ok {
			continue
		}
		if m == nil {
			t.Errorf("%s against %s: no mismatch, want one at %q", c.value, c.shape, c.path)
			continue
		}
		if m.Path != c.path || !strings.Contains(m.Have, c.have) {
			t.Errorf("%s against %s: mismatch %+v, want path %q having %q", c.value, c.shape, m, c.path, c.have)
		}
	}
}

// A tuple of several elements takes an array of them; its size is not
// the Go types'; Check's error names the place; text that is not JSON is
// a mismatch at the top.
func TestCheckMisc(t *testing.T) {
	sh, _ := manifest.ParseShape("(string, {n:int})")
	if m := sh.Check([]byte(`["a",{"n":1},"extra"]`)); m != nil {
		t.Errorf("tuple: %v", m)
	}
	if m := sh.Check([]byte(`["a",{"n":"x"}]`)); m == nil || m.Path != "[1].n" {
		t.Errorf("tuple mismatch: %+v", m)
	}
	sh, _ = manifest.ParseShape("{items:[]{qty:int}}")
	m := sh.Check([]byte(`{"items":[{"qty":1},{"qty":2.5}]}`))
	if m == nil || m.Error() != "items[1].qty: want int, have number 2.5 (not an integer)" {
		t.Errorf("error text: %v", m)
	}
	m = sh.Check([]byte("\x00stm-sealed"))
	if m == nil || m.Path != "" || m.Have != "text that is not JSON" {
		t.Errorf("not JSON: %+v", m)
	}
	if m := sh.Check(nil); m != nil {
		t.Errorf("empty payload: %v", m)
	}
	sh, _ = manifest.ParseShape("string")
	m = sh.Check([]byte(`123`))
	if m == nil || m.Error() != "the value: want string, have number 123" {
		t.Errorf("top-level error text: %v", m)
	}
}

// A value built to make a recursive reference try its enclosing shapes
// over and over is checked in bounded time.
func TestCheckRecursionBounded(t *testing.T) {
	sh, err := manifest.ParseShape("{a:{b:{c:[]@x.T,d:int},d:int},d:int}")
	if err != nil {
		t.Fatal(err)
	}
	v := `{"d":1}`
	for range 30 {
		v = `{"a":{"b":{"c":[` + v + `],"d":"no"}}}`
	}
	start := time.Now()
	sh.Check([]byte(v))
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("check took %v", d)
	}
}
