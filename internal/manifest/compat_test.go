package manifest_test

import (
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/stemflow/stem/internal/manifest"
)

// compareCase is one change of shape: ok when it needs no bump, else the
// breaks Compare reports, each as "path: part of its message".
type compareCase struct {
	old, now string
	unsized  bool
	breaks   []string
}

func runCompare(t *testing.T, cases []compareCase) {
	t.Helper()
	for _, c := range cases {
		old, err := manifest.ParseShape(c.old)
		if err != nil {
			t.Fatalf("ParseShape(%q): %v", c.old, err)
		}
		now, err := manifest.ParseShape(c.now)
		if err != nil {
			t.Fatalf("ParseShape(%q): %v", c.now, err)
		}
		got := manifest.Compare(old, now, manifest.CompareOptions{OldUnsized: c.unsized})
		if len(got) != len(c.breaks) {
			t.Errorf("%s → %s: breaks %q, want %d: %q", c.old, c.now, got, len(c.breaks), c.breaks)
			continue
		}
		for i, want := range c.breaks {
			path, msg, _ := strings.Cut(want, ": ")
			if got[i].Path != path || !strings.Contains(got[i].String(), msg) {
				t.Errorf("%s → %s: break %d is %q at %q, want %q at %q", c.old, c.now, i, got[i].String(), got[i].Path, msg, path)
			}
		}
	}
}

// Struct fields: added or renamed in case only is compatible; removed,
// renamed, merged by case or beside a name differing in case is not.
func TestCompareFields(t *testing.T) {
	runCompare(t, []compareCase{
		{old: "{a:int64}", now: "{a:int64}"},
		{old: "{}", now: "{a:int64}"},
		{old: "{a:int64}", now: "{a:int64,b:string,c:[]{d:bool}}"},
		{old: "{qty:int64}", now: "{Qty:int64}"},
		{old: "{a:int64,b:string}", now: "{a:int64}", breaks: []string{"b: b: removed (or renamed)"}},
		{old: "{a:int64,qty:int64}", now: "{a:int64,quantity:int64}", breaks: []string{"qty: qty: removed (or renamed): values of the old shape hold it, and the new type drops it, so a renamed field reads zero for every run in flight"}},
		{old: "{A:int64,a:int64}", now: "{A:int64}", breaks: []string{"A: A: stored fields A, a all decode into it"}},
		{old: "{qty:int64}", now: "{QTY:int64,qty:int64}", breaks: []string{"QTY: QTY: added beside qty"}},
		// Two new fields differing in case, neither stored: no stored key
		// can reach either but by its own name.
		{old: "{a:int64}", now: "{Ab:int64,a:int64,aB:int64}"},
		// A field's own change, with where it is.
		{old: "{a:int64,b:string}", now: "{a:string,b:int64}", breaks: []string{
			"a: int64 became string: a stored number does not decode into string",
			"b: string became int64: a stored string does not decode into int64"}},
		// A pointer has its element's shape (null decodes into both), so
		// T ↔ *T is no change: stemgen writes both {a:int64}.
		{old: "{a:int64,p:{b:string}}", now: "{a:int64,p:{b:string}}"},
		// Nested: in a slice's elements, a map's values, a struct.
		{old: "{items:[]{qty:int32,sku:string}}", now: "{items:[]{note:string,qty:int64,sku:string}}"},
		{old: "{items:[]{qty:int32,sku:string}}", now: "{items:[]{qty:string,sku:string}}", breaks: []string{"items[].qty: int32 became string"}},
		{old: "{items:[]{qty:int32,sku:string}}", now: "{items:[]{qty:int32}}", breaks: []string{"items[].sku: items[].sku: removed"}},
		{old: "{m:map[string]{n:int16}}", now: "{m:map[string]{n:int8}}", breaks: []string{"m[key].n: int16 became int8: stored values beyond int8's range"}},
		{old: "{a:{b:{c:string}}}", now: "{a:{b:{c:bool}}}", breaks: []string{"a.b.c: string became bool"}},
		// Field names that are not plain words.
		{old: `{odd name:string}`, now: `{odd name:int64}`, breaks: []string{`["odd name"]: string became int64`}},
	})
}

// Numbers: widened compatible, narrowed, made unsigned, or rounded not.
func TestCompareNumbers(t *testing.T) {
	runCompare(t, []compareCase{
		{old: "int", now: "int"},
		{old: "uint", now: "uint"},
		{old: "{a:int,b:[]uint}", now: "{a:int,b:[]uint,c:bool}"},
		{old: "float64", now: "float64"},
		{old: "int8", now: "int16"},
		{old: "int16", now: "int32"},
		{old: "int32", now: "int64"},
		{old: "int32", now: "int"},
		{old: "int", now: "int64"},
		{old: "uint8", now: "uint16"},
		{old: "uint32", now: "uint64"},
		{old: "uint32", now: "uint"},
		{old: "uint", now: "uint64"},
		{old: "uint8", now: "int16"},
		{old: "uint32", now: "int64"},
		{old: "float32", now: "float64"},
		{old: "int32", now: "float64"},
		{old: "uint32", now: "float64"},
		{old: "int16", now: "float32"},
		{old: "uint16", now: "float32"},
		{old: "int64", now: "int32", breaks: []string{": int64 became int32: stored values beyond int32's range would fail to decode"}},
		{old: "int64", now: "int", breaks: []string{": stored values beyond int's range"}},
		{old: "int", now: "int32", breaks: []string{": stored values beyond int32's range"}},
		{old: "uint16", now: "uint8", breaks: []string{": stored values beyond uint8's range"}},
		{old: "uint64", now: "uint", breaks: []string{": stored values beyond uint's range"}},
		{old: "uint8", now: "int8", breaks: []string{": stored values beyond int8's range"}},
		{old: "uint32", now: "int", breaks: []string{": stored values beyond int's range"}},
		{old: "uint", now: "int64", breaks: []string{": stored values beyond int64's range"}},
		{old: "int8", now: "uint64", breaks: []string{": a stored negative value would fail to decode"}},
		{old: "int64", now: "float64", breaks: []string{": float64 holds integers exactly only up to 2^53, so larger stored values would decode rounded"}},
		{old: "int", now: "float64", breaks: []string{": float64 holds integers exactly only up to 2^53"}},
		{old: "uint64", now: "float64", breaks: []string{": float64 holds integers exactly only up to 2^53"}},
		{old: "int32", now: "float32", breaks: []string{": float32 holds integers exactly only up to 2^24"}},
		{old: "float64", now: "float32", breaks: []string{": a stored value would lose precision"}},
		{old: "float32", now: "int64", breaks: []string{": a stored fraction would fail to decode"}},
		{old: "float64", now: "uint64", breaks: []string{": a stored fraction or negative value would fail to decode"}},
		// Before format 3 a manifest did not record sizes: within its
		// kind a number is taken as it was then, across kinds not.
		{old: "int", now: "int8", unsized: true},
		{old: "int", now: "int64", unsized: true},
		{old: "uint", now: "uint16", unsized: true},
		{old: "float", now: "float32", unsized: true},
		{old: "float", now: "float64", unsized: true},
		{old: "int", now: "float64", unsized: true, breaks: []string{": the manifest recorded int without its size (before format 3)"}},
		{old: "uint", now: "int64", unsized: true, breaks: []string{": the manifest recorded uint without its size"}},
		{old: "{n:int}", now: "{n:int16}", unsized: true},
		// A sized number in an old manifest is judged by its size.
		{old: "int64", now: "int8", unsized: true, breaks: []string{": stored values beyond int8's range"}},
	})
}

// Kinds: a value of one JSON kind does not decode into another.
func TestCompareKinds(t *testing.T) {
	runCompare(t, []compareCase{
		{old: "string", now: "int64", breaks: []string{": string became int64: a stored string does not decode into int64"}},
		{old: "int64", now: "string", breaks: []string{": a stored number does not decode into string"}},
		{old: "bool", now: "string", breaks: []string{": a stored bool does not decode into string"}},
		{old: "[]string", now: "string", breaks: []string{": a stored array does not decode into string"}},
		{old: "string", now: "[]string", breaks: []string{": a stored string does not decode into []string"}},
		{old: "{a:string}", now: "[]string", breaks: []string{": a stored object does not decode"}},
		{old: "[]{a:string}", now: "{a:string}", breaks: []string{": a stored array does not decode"}},
		{old: "bytes", now: "string", breaks: []string{": a stored value, a base64 string, would decode as its base64 text"}},
		{old: "string", now: "bytes", breaks: []string{": a stored string does not decode into bytes"}},
		{old: "bytes", now: "[]uint8", breaks: []string{": a stored base64 string does not decode"}},
		// Slices and arrays.
		{old: "[]int32", now: "[]int64"},
		{old: "[3]int32", now: "[]int32"},
		{old: "[3]int32", now: "[5]int64"},
		{old: "[]int32", now: "[3]int32", breaks: []string{": a stored slice longer than 3 would lose its other elements"}},
		{old: "[3]int32", now: "[2]int32", breaks: []string{": a stored array would lose its elements after the first 2"}},
		{old: "[]int64", now: "[]int8", breaks: []string{"[]: int64 became int8"}},
		// Maps: keys keep their text into string keys, widen, or break.
		{old: "map[int64]string", now: "map[string]string"},
		{old: "map[uint8]string", now: "map[string]string"},
		{old: "map[int32]string", now: "map[int64]string"},
		{old: "map[string]string", now: "map[int64]string", breaks: []string{": map[string]string became map[int64]string: its keys are int64 now: a stored string does not decode into int64"}},
		{old: "map[int64]string", now: "map[int32]string", breaks: []string{": its keys are int32 now: stored values beyond int32's range"}},
		{old: "map[string]int64", now: "{a:int64}", breaks: []string{": a stored map's keys that name no field would be dropped"}},
		{old: "{a:int32,b:int32}", now: "map[string]int64"},
		{old: "{a:int32,b:string}", now: "map[string]int64", breaks: []string{"b: string became int64"}},
		{old: "{a:int32}", now: "map[int64]int32", breaks: []string{": a stored object's keys are field names, which int64 keys do not take"}},
		// Interfaces take anything; nothing concrete takes an interface.
		{old: "{a:int64,b:[]string}", now: "any"},
		{old: "{a:int64}", now: "{a:any}"},
		{old: "any", now: "string", breaks: []string{": a stored value may be of any JSON kind, which string does not take"}},
		// Types that encode themselves, and recursive references.
		{old: "time.Time", now: "time.Time"},
		{old: "time.Time", now: "any"},
		{old: "time.Time", now: "string", breaks: []string{": time.Time became string: a type that encodes itself"}},
		{old: "string", now: "time.Time", breaks: []string{": string became time.Time"}},
		{old: "example.com/a.ID", now: "example.com/b.ID", breaks: []string{": example.com/a.ID became example.com/b.ID"}},
		{old: "{kids:[]@x.Node,n:int32}", now: "{kids:[]@x.Node,n:int64,tag:string}"},
		{old: "{kids:[]@x.Node,n:int32}", now: "{kids:[]@x.Tree,n:int32}", breaks: []string{"kids[]: @x.Node became @x.Tree: a recursive reference is judged by the type it names"}},
		{old: "{kids:[]@x.Node}", now: "{kids:[]{n:int32}}", breaks: []string{"kids[]: @x.Node became {n:int32}"}},
		// Tuples: a step's parameters and results.
		{old: "()", now: "()"},
		{old: "(int32)", now: "(int64)"},
		{old: "({a:string})", now: "({a:string,b:bool})"},
		{old: "({a:string})", now: "({b:string})", breaks: []string{"a: a: removed"}},
		{old: "(string, {a:int32})", now: "(string, {a:int64})"},
		{old: "(string, {a:int32})", now: "(string, {a:string})", breaks: []string{"#2.a: int32 became string"}},
		{old: "(string)", now: "(string, string)", breaks: []string{": the number of values changed from 1 to 2"}},
		{old: "()", now: "{a:string}", breaks: []string{": a stored tuple does not decode"}},
	})
}

// Compare agrees with encoding/json on numbers: every change it accepts
// decodes the extreme values of the old type into the new one, and they
// encode again as they were stored (nothing rounded); every change it
// refuses fails for one of them, on this platform, unless only Go's int or
// uint (32 bits on some platforms) makes it fail.
func TestCompareNumbersAgreeWithEncodingJSON(t *testing.T) {
	numbers := []struct {
		shape string
		typ   reflect.Type
	}{
		{"int8", reflect.TypeFor[int8]()}, {"int16", reflect.TypeFor[int16]()}, {"int32", reflect.TypeFor[int32]()},
		{"int64", reflect.TypeFor[int64]()}, {"int", reflect.TypeFor[int]()},
		{"uint8", reflect.TypeFor[uint8]()}, {"uint16", reflect.TypeFor[uint16]()}, {"uint32", reflect.TypeFor[uint32]()},
		{"uint64", reflect.TypeFor[uint64]()}, {"uint", reflect.TypeFor[uint]()},
		{"float32", reflect.TypeFor[float32]()}, {"float64", reflect.TypeFor[float64]()},
	}
	samples := func(typ reflect.Type) []string {
		v := reflect.New(typ).Elem()
		var out []string
		add := func(set func()) {
			set()
			b, err := json.Marshal(v.Interface())
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, string(b))
		}
		switch typ.Kind() {
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			bits := typ.Bits()
			add(func() { v.SetInt(-1 << (bits - 1)) })
			add(func() { v.SetInt(1<<(bits-1) - 1) })
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			add(func() { v.SetUint(math.MaxUint64 >> (64 - typ.Bits())) })
		default:
			add(func() { v.SetFloat(0.5) })
			add(func() { v.SetFloat(-1) })
			add(func() { v.SetFloat(0.1) })
			if typ.Bits() == 32 {
				add(func() { v.SetFloat(math.MaxFloat32) })
			} else {
				add(func() { v.SetFloat(math.MaxFloat64) })
			}
		}
		return out
	}
	for _, from := range numbers {
		for _, to := range numbers {
			old, _ := manifest.ParseShape(from.shape)
			now, _ := manifest.ParseShape(to.shape)
			compatible := len(manifest.Compare(old, now, manifest.CompareOptions{})) == 0
			failed := ""
			for _, s := range samples(from.typ) {
				into := reflect.New(to.typ)
				if err := json.Unmarshal([]byte(s), into.Interface()); err != nil {
					failed = s + ": " + err.Error()
					break
				}
				again, _ := json.Marshal(into.Elem().Interface())
				if string(again) != s {
					failed = s + " decodes as " + string(again)
					break
				}
			}
			platform := from.shape == "int" || from.shape == "uint" || to.shape == "int" || to.shape == "uint"
			switch {
			case compatible && failed != "":
				t.Errorf("%s → %s is judged compatible, but %s", from.shape, to.shape, failed)
			case !compatible && failed == "" && !platform:
				t.Errorf("%s → %s is judged breaking, but every sample decodes exactly", from.shape, to.shape)
			}
		}
	}
}

// A break reads as where, what it was and is, and what a stored value
// would do.
func TestBreakString(t *testing.T) {
	for _, c := range []struct {
		b    manifest.Break
		want string
	}{
		{manifest.Break{Path: "items[].qty", Was: "int64", Now: "int32", Why: "why"}, "items[].qty: int64 became int32: why"},
		{manifest.Break{Was: "int64", Now: "int32", Why: "why"}, "int64 became int32: why"},
		{manifest.Break{Path: "sku", Was: "string", Why: "removed"}, "sku: removed"},
	} {
		if got := c.b.String(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.b, got, c.want)
		}
	}
}
