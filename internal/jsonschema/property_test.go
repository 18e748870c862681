package jsonschema

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

// propertyTypes are the types the property tests run over.
var propertyTypes = []reflect.Type{
	reflect.TypeFor[order](),
	reflect.TypeFor[shipment](),
	reflect.TypeFor[tagged](),
	reflect.TypeFor[promoted](),
	reflect.TypeFor[conflict](),
	reflect.TypeFor[recursive](),
	reflect.TypeFor[*recursive](),
	reflect.TypeFor[forest](),
	reflect.TypeFor[ping](),
	reflect.TypeFor[numbers](),
	reflect.TypeFor[wrapsTime](),
	reflect.TypeFor[int8](),
	reflect.TypeFor[uint](),
	reflect.TypeFor[float32](),
	reflect.TypeFor[string](),
	reflect.TypeFor[[]byte](),
	reflect.TypeFor[[3][]*uint16](),
	reflect.TypeFor[map[int8]string](),
	reflect.TypeFor[map[uint64]bool](),
	reflect.TypeFor[map[level]*tree](),
	reflect.TypeFor[[]any](),
	reflect.TypeFor[*[2]float32](),
	reflect.TypeFor[map[string][]time.Time](),
}

// gen makes random values of a type, all of which json.Marshal can encode
// and json.Unmarshal can decode back.
type gen struct{ r *rand.Rand }

func (g gen) value(t reflect.Type, depth int) reflect.Value {
	v := reflect.New(t).Elem()
	g.fill(v, depth)
	return v
}

func (g gen) chance(n int) bool { return g.r.IntN(n) == 0 }

func (g gen) fill(v reflect.Value, depth int) {
	t := v.Type()
	switch t {
	case timeType:
		const lo, hi = -62104060800, 253370764800 // years 1 to 9998
		tm := time.Unix(lo+g.r.Int64N(hi-lo), g.r.Int64N(1e9))
		if !g.chance(3) {
			tm = tm.Truncate(time.Second)
		}
		offset := (g.r.IntN(2*1439+1) - 1439) * 60 // within ±23:59
		v.Set(reflect.ValueOf(tm.In(time.FixedZone("", offset))))
		return
	case numberType:
		v.SetString(g.numberLiteral())
		return
	case reflect.TypeFor[json.RawMessage]():
		if !g.chance(4) {
			b, _ := json.Marshal(g.anyValue(depth))
			v.SetBytes(b)
		}
		return
	case reflect.TypeFor[opaque]():
		if !g.chance(4) {
			b, _ := json.Marshal(g.anyValue(depth))
			v.Set(reflect.ValueOf(opaque{raw: b}))
		}
		return
	case reflect.TypeFor[level]():
		v.Set(reflect.ValueOf(level{name: g.str()}))
		return
	}
	deep := depth > 4
	switch t.Kind() {
	case reflect.Bool:
		v.SetBool(g.chance(2))
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n := int64(g.r.Uint64()) >> (64 - t.Bits())
		switch g.r.IntN(5) {
		case 0:
			n = -1 << (t.Bits() - 1)
		case 1:
			n = 1<<(t.Bits()-1) - 1
		case 2:
			n = int64(g.r.IntN(21) - 10)
		}
		v.SetInt(n)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		n := g.r.Uint64() >> (64 - t.Bits())
		switch g.r.IntN(5) {
		case 0:
			n = 0
		case 1:
			n = math.MaxUint64 >> (64 - t.Bits())
		}
		v.SetUint(n)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(g.float(t.Bits()))
	case reflect.String:
		v.SetString(g.str())
	case reflect.Slice:
		if g.chance(5) {
			return // nil
		}
		n := g.r.IntN(4)
		if deep {
			n = 0
		}
		s := reflect.MakeSlice(t, n, n)
		for i := range n {
			g.fill(s.Index(i), depth+1)
		}
		v.Set(s)
	case reflect.Array:
		for i := range v.Len() {
			g.fill(v.Index(i), depth+1)
		}
	case reflect.Map:
		if g.chance(5) {
			return
		}
		m := reflect.MakeMap(t)
		n := g.r.IntN(4)
		if deep {
			n = 0
		}
		for range n {
			m.SetMapIndex(g.value(t.Key(), depth+1), g.value(t.Elem(), depth+1))
		}
		v.Set(m)
	case reflect.Pointer:
		if deep || g.chance(3) {
			return
		}
		p := reflect.New(t.Elem())
		g.fill(p.Elem(), depth+1)
		v.Set(p)
	case reflect.Interface:
		if t.NumMethod() == 0 {
			if a := g.anyValue(depth); a != nil {
				v.Set(reflect.ValueOf(a))
			}
		}
	case reflect.Struct:
		for i := range t.NumField() {
			sf, fv := t.Field(i), v.Field(i)
			switch {
			case sf.Type.Kind() == reflect.Func || sf.Type.Kind() == reflect.Chan:
			case fv.CanSet():
				g.fill(fv, depth+1)
			case sf.Anonymous && sf.Type.Kind() == reflect.Struct:
				// Unexported embedded struct: its exported fields
				// are settable.
				g.fill(fv, depth+1)
			}
		}
	}
}

func (g gen) float(bits int) float64 {
	max := math.MaxFloat64
	if bits == 32 {
		max = math.MaxFloat32
	}
	var f float64
	switch g.r.IntN(8) {
	case 0:
		f = max
	case 1:
		f = -max
	case 2:
		f = math.Copysign(0, -1)
	case 3:
		f = math.SmallestNonzeroFloat64
		if bits == 32 {
			f = math.SmallestNonzeroFloat32
		}
	case 4:
		f = float64(g.r.IntN(2001) - 1000)
	default:
		f = g.r.NormFloat64() * math.Pow(10, float64(g.r.IntN(60)-30))
	}
	if bits == 32 {
		f = float64(float32(f))
	}
	return f
}

func (g gen) str() string {
	pieces := []string{"", "a", "Z", "sku-1", " ", "\"", "\\", "/", "\n", "\x00", "<&>", "é", "日本", "🙂", "\u2028", "\xff", "12", "null", "true"}
	var b strings.Builder
	for range g.r.IntN(4) {
		b.WriteString(pieces[g.r.IntN(len(pieces))])
	}
	return b.String()
}

func (g gen) numberLiteral() string {
	lits := []string{"0", "-0", "1", "-12", "3.25", "1e10", "-2.5E-3", "18446744073709551616", "1e400", "123456789012345678901234567890"}
	return lits[g.r.IntN(len(lits))]
}

// anyValue is a random value of the kind json.Unmarshal makes for any.
func (g gen) anyValue(depth int) any {
	n := 6
	if depth > 4 {
		n = 4
	}
	switch g.r.IntN(n) {
	case 0:
		return nil
	case 1:
		return g.chance(2)
	case 2:
		return g.float(64)
	case 3:
		return g.str()
	case 4:
		a := make([]any, g.r.IntN(3))
		for i := range a {
			a[i] = g.anyValue(depth + 1)
		}
		return a
	default:
		m := map[string]any{}
		for range g.r.IntN(3) {
			m[g.str()] = g.anyValue(depth + 1)
		}
		return m
	}
}

// TestMarshalledValuesValidate checks that whatever json.Marshal writes for
// a value of type T validates against For(T).
func TestMarshalledValuesValidate(t *testing.T) {
	g := gen{rand.New(rand.NewPCG(1, 2))}
	for _, typ := range propertyTypes {
		schema := mustFor(t, typ)
		for i := range 300 {
			v := g.value(typ, 0)
			doc, err := json.Marshal(v.Interface())
			if err != nil {
				t.Fatalf("%v: generated a value json.Marshal refuses: %v", typ, err)
			}
			if err := json.Unmarshal(doc, reflect.New(typ).Interface()); err != nil {
				t.Fatalf("%v: generated a value that does not round-trip: %v\n%s", typ, err, doc)
			}
			if err := Validate(schema, doc); err != nil {
				t.Fatalf("%v #%d: json.Marshal output does not validate: %v\n%s", typ, i, err, doc)
			}
		}
	}
}

// TestRejectsWhatDecoderRejects mutates marshalled values at random and
// checks that every mutant json.Unmarshal refuses is refused by Validate.
// (The converse does not hold on purpose: Validate is stricter.)
func TestRejectsWhatDecoderRejects(t *testing.T) {
	g := gen{rand.New(rand.NewPCG(3, 4))}
	var both, strictOnly, neither int
	rounds := 400
	if testing.Short() {
		rounds = 100
	}
	for _, typ := range propertyTypes {
		schema := mustFor(t, typ)
		for range rounds {
			doc, err := json.Marshal(g.value(typ, 0).Interface())
			if err != nil {
				t.Fatal(err)
			}
			tree := decodeTree(t, doc)
			for range 3 {
				mutant, err := json.Marshal(g.mutate(tree))
				if err != nil {
					t.Fatal(err)
				}
				uerr := json.Unmarshal(mutant, reflect.New(typ).Interface())
				verr := Validate(schema, mutant)
				switch {
				case uerr != nil && verr == nil:
					t.Fatalf("%v: json.Unmarshal fails (%v) but Validate accepts\n%s", typ, uerr, mutant)
				case uerr != nil:
					both++
				case verr != nil:
					strictOnly++
				default:
					neither++
				}
			}
		}
	}
	t.Logf("mutants refused by both: %d, by Validate only: %d, accepted by both: %d", both, strictOnly, neither)
	if both < 5*rounds {
		t.Errorf("only %d mutants were refused by the decoder: the mutations are too weak", both)
	}
}

func decodeTree(t *testing.T, doc []byte) any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(doc))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// mutate returns a copy of a decoded document with one random change.
func (g gen) mutate(doc any) any {
	n := countNodes(doc)
	target := g.r.IntN(n)
	out, _ := g.mutateAt(doc, target)
	return out
}

func countNodes(v any) int {
	n := 1
	switch v := v.(type) {
	case []any:
		for _, x := range v {
			n += countNodes(x)
		}
	case map[string]any:
		for _, x := range v {
			n += countNodes(x)
		}
	}
	return n
}

// mutateAt replaces the target-th node (pre-order) and returns the new
// tree and how many nodes it skipped.
func (g gen) mutateAt(v any, target int) (any, int) {
	if target == 0 {
		return g.replacement(v), -1
	}
	seen := 1
	switch v := v.(type) {
	case []any:
		c := append([]any(nil), v...)
		for i, x := range c {
			nx, k := g.mutateAt(x, target-seen)
			if k < 0 {
				c[i] = nx
				return c, -1
			}
			seen += k
		}
	case map[string]any:
		keys := sortedKeys(v)
		c := make(map[string]any, len(v))
		for k, x := range v {
			c[k] = x
		}
		for _, k := range keys {
			nx, skipped := g.mutateAt(v[k], target-seen)
			if skipped < 0 {
				c[k] = nx
				return c, -1
			}
			seen += skipped
		}
	}
	return v, seen
}

var replacements = []string{
	`"x"`, `"12"`, `"-1"`, `""`, `"aGk"`, `"aGk="`, `"2024-01-01"`, `"2024-01-01T00:00:00Z"`, `"1e3"`, `"true"`,
	`-1`, `0`, `1`, `1.5`, `-0`, `1e2`, `128`, `-129`, `256`, `65536`, `-32769`, `4294967296`,
	`9223372036854775808`, `-9223372036854775809`, `18446744073709551616`, `1e40`, `-1e40`, `1e300`,
	`true`, `false`, `null`, `[]`, `{}`, `[1]`, `[null]`, `["x"]`, `{"k":1}`, `{"val":"x"}`, `[[]]`,
}

func (g gen) replacement(v any) any {
	switch v := v.(type) {
	case []any:
		switch g.r.IntN(4) {
		case 0:
			if len(v) > 0 {
				return append(append([]any(nil), v...), v[len(v)-1])
			}
			return []any{json.Number("1")}
		case 1:
			if len(v) > 0 {
				return v[:len(v)-1]
			}
		}
	case map[string]any:
		c := make(map[string]any, len(v)+1)
		for k, x := range v {
			c[k] = x
		}
		keys := sortedKeys(v)
		switch g.r.IntN(4) {
		case 0:
			c["zz"] = json.Number("1")
			return c
		case 1:
			if len(keys) > 0 {
				k := keys[g.r.IntN(len(keys))]
				c[swapCase(k)] = c[k]
				delete(c, k)
				return c
			}
		case 2:
			if len(keys) > 0 {
				delete(c, keys[g.r.IntN(len(keys))])
				return c
			}
		}
	case string:
		if g.chance(3) {
			// A string field's value that is itself JSON (`,string`):
			// change what is inside.
			lits := []string{`"12"`, `"1.5"`, `"x"`, `"\"x\""`, `"300"`, `"-1"`, `"null"`, `" 1"`, `"true"`, `"1e40"`}
			return mustDecode(lits[g.r.IntN(len(lits))])
		}
	}
	return mustDecode(replacements[g.r.IntN(len(replacements))])
}

func swapCase(s string) string {
	r := []rune(s)
	for i, c := range r {
		if c >= 'a' && c <= 'z' {
			r[i] = c - 'a' + 'A'
			return string(r)
		}
		if c >= 'A' && c <= 'Z' {
			r[i] = c - 'A' + 'a'
			return string(r)
		}
	}
	return s + "_"
}

func mustDecode(s string) any {
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		panic(err)
	}
	return v
}

// TestRejectedDocuments lists documents json.Unmarshal refuses, by kind of
// mistake, and checks that Validate refuses each.
func TestRejectedDocuments(t *testing.T) {
	tests := []struct {
		typ  reflect.Type
		docs []string
	}{
		{reflect.TypeFor[int](), []string{`"1"`, `1.5`, `1e2`, `true`, `[]`, `{}`, `9223372036854775808`, `-9223372036854775809`}},
		{reflect.TypeFor[int8](), []string{`128`, `-129`, `1000`, `"1"`}},
		{reflect.TypeFor[uint](), []string{`-1`, `-0`, `18446744073709551616`, `0.5`}},
		{reflect.TypeFor[uint16](), []string{`65536`, `-1`}},
		{reflect.TypeFor[float32](), []string{`1e39`, `-3.5e38`, `"1.5"`, `true`}},
		{reflect.TypeFor[float64](), []string{`1e309`, `-1e400`, `"0"`}},
		{reflect.TypeFor[bool](), []string{`1`, `"true"`, `[]`}},
		{reflect.TypeFor[string](), []string{`1`, `true`, `[]`, `{}`}},
		{reflect.TypeFor[[]byte](), []string{`"!!"`, `"aGk"`, `[256]`, `[-1]`, `["a"]`, `{}`, `1`}},
		{reflect.TypeFor[[2]int](), []string{`"ab"`, `[1,"2"]`, `{}`, `1`}},
		{reflect.TypeFor[[]uint8](), []string{`[1,2,300]`}},
		{reflect.TypeFor[map[int8]bool](), []string{`{"x":true}`, `{"128":true}`, `{"1":1}`, `[]`}},
		{reflect.TypeFor[map[uint]int](), []string{`{"-1":1}`, `{"1.5":1}`}},
		{reflect.TypeFor[time.Time](), []string{`"2024-01-01"`, `"yesterday"`, `1`, `"2024-13-01T00:00:00Z"`}},
		{reflect.TypeFor[level](), []string{`1`, `[]`, `{}`, `true`}},
		{reflect.TypeFor[json.Number](), []string{`"x"`, `true`, `"1 "`, `[]`}},
		{reflect.TypeFor[fmt.Stringer](), []string{`"x"`, `{}`, `1`}},
		{reflect.TypeFor[shipment](), []string{
			`{"items":[{"sku":1}]}`, `{"items":{}}`, `{"Tracking":5}`, `{"weights":[1,-2]}`,
			`{"level":"3"}`, `{"level":200}`, `{"counts":{"1":"x"}}`, `{"counts":{"300":1}}`, `{"when":5}`,
		}},
		{reflect.TypeFor[order](), []string{
			`{"quoted":1}`, `{"quoted":"x"}`, `{"quoted":"1.5"}`, `{"quoted":[]}`, `{"qp":"1e39"}`, `{"qs":"x"}`,
			`{"QuotedBool":"yes"}`, `{"QuotedBool":true}`, `{"quoted":" 1"}`, `{"quoted":"1 "}`, `{"created":"2024"}`, `{"tree":{"kids":[{"val":1.5}]}}`,
			`{"stringer":"x"}`, `{"matrix":[[1,"2"]]}`, `{"pair":"aGk="}`, `{"num":"1x"}`, `{"Note":1}`, `{"carrier":1}`,
		}},
		{reflect.TypeFor[promoted](), []string{`{"H":1}`}},
	}
	for _, tt := range tests {
		schema := mustFor(t, tt.typ)
		for _, doc := range tt.docs {
			if err := json.Unmarshal([]byte(doc), reflect.New(tt.typ).Interface()); err == nil {
				t.Errorf("%v: test is wrong, json.Unmarshal accepts %s", tt.typ, doc)
			}
			if err := Validate(schema, []byte(doc)); err == nil {
				t.Errorf("%v: Validate accepts %s, which json.Unmarshal refuses", tt.typ, doc)
			}
		}
	}
}

// TestStricterThanDecoder lists documents json.Unmarshal accepts while
// losing or inventing data, or only by being lenient, which Validate
// refuses on purpose.
func TestStricterThanDecoder(t *testing.T) {
	tests := []struct {
		typ  reflect.Type
		docs []string
	}{
		{reflect.TypeFor[[2]int](), []string{`[1,2,3]`, `[1]`, `[]`, `null`}},
		{reflect.TypeFor[shipment](), []string{
			`{"weights":[1,2,3]}`, `{"tracking":"x"}`, `{"unknown":1}`, `{"level":null}`, `{"level":1,"level":2}`,
		}},
		{reflect.TypeFor[order](), []string{`{"matrix":[[1,2,3]]}`, `{"quoted":"01"}`, `{"quoted":"null"}`, `{"Note":null}`}},
		{reflect.TypeFor[map[int]bool](), []string{`{"+1":true}`, `{"01":true}`}},
		{reflect.TypeFor[int](), []string{`null`}},
		{reflect.TypeFor[time.Time](), []string{`null`}},
	}
	for _, tt := range tests {
		schema := mustFor(t, tt.typ)
		for _, doc := range tt.docs {
			if err := json.Unmarshal([]byte(doc), reflect.New(tt.typ).Interface()); err != nil {
				t.Errorf("%v: test is wrong, json.Unmarshal refuses %s: %v", tt.typ, doc, err)
			}
			if err := Validate(schema, []byte(doc)); err == nil {
				t.Errorf("%v: Validate accepts %s", tt.typ, doc)
			}
		}
	}
}

func TestGeneratorCoversExtremes(t *testing.T) {
	// The generator is only useful if it reaches the bounds.
	g := gen{rand.New(rand.NewPCG(5, 6))}
	seen := map[string]bool{}
	for range 200 {
		seen[strconv.FormatInt(g.value(reflect.TypeFor[int8](), 0).Int(), 10)] = true
		seen[strconv.FormatFloat(g.value(reflect.TypeFor[float32](), 0).Float(), 'g', -1, 32)] = true
	}
	for _, want := range []string{"-128", "127", "3.4028235e+38", "-3.4028235e+38"} {
		if !seen[want] {
			t.Errorf("generator never produced %s", want)
		}
	}
}
