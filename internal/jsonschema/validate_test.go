package jsonschema

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

type shipment struct {
	Items    []item `json:"items"`
	Tracking string
	Weights  [2]uint16         `json:"weights"`
	Level    int8              `json:"level"`
	Counts   map[uint8]float32 `json:"counts"`
	When     *string           `json:"when"`
}

func mustFor(t testing.TB, typ reflect.Type) []byte {
	t.Helper()
	s, err := For(typ)
	if err != nil {
		t.Fatalf("For(%v): %v", typ, err)
	}
	return s
}

func TestValidateMessages(t *testing.T) {
	tests := []struct {
		typ  reflect.Type
		doc  string
		want string // "" for valid; else the whole problem list
	}{
		{reflect.TypeFor[shipment](), `{"items":[{"sku":"a","qty":1},{"sku":"b"}],"Tracking":"x","weights":[1,2],"level":-3,"counts":{"1":1.5},"when":null}`, ""},
		{reflect.TypeFor[shipment](), `{}`, ""},
		{reflect.TypeFor[shipment](), `{"items":[{"sku":"a"},{"sku":"b"},{"sku":7}]}`, `$.items[2].sku: want string, got number 7`},
		{reflect.TypeFor[shipment](), `{"tracking":"1Z"}`, `$.tracking: unknown field (did you mean "Tracking"?)`},
		{reflect.TypeFor[shipment](), `{"Trackng":"1Z"}`, `$.Trackng: unknown field (did you mean "Tracking"?)`},
		{reflect.TypeFor[shipment](), `{"zzz":1}`, `$.zzz: unknown field`},
		{reflect.TypeFor[shipment](), `{"weights":[1,2,3]}`, `$.weights: want exactly 2 items, got 3`},
		{reflect.TypeFor[shipment](), `{"weights":[1]}`, `$.weights: want exactly 2 items, got 1`},
		{reflect.TypeFor[shipment](), `{"weights":[-1,70000]}`, `$.weights[0]: -1 is less than the minimum 0; $.weights[1]: 70000 is greater than the maximum 65535`},
		{reflect.TypeFor[shipment](), `{"level":128}`, `$.level: 128 is greater than the maximum 127`},
		{reflect.TypeFor[shipment](), `{"level":1.5}`, `$.level: want integer, got number 1.5`},
		{reflect.TypeFor[shipment](), `{"level":1e1}`, `$.level: want integer, got number 1e1`},
		{reflect.TypeFor[shipment](), `{"level":"1"}`, `$.level: want integer, got string`},
		{reflect.TypeFor[shipment](), `{"level":null}`, `$.level: want integer, got null`},
		{reflect.TypeFor[shipment](), `{"items":{}}`, `$.items: want array or null, got object`},
		{reflect.TypeFor[shipment](), `{"counts":{"256":1,"x":2,"1":1e39}}`, `$.counts["256"]: invalid key: 256 is greater than the maximum 255; $.counts.x: invalid key: want integer as JSON, got "x"; $.counts["1"]: 1e39 is greater than the maximum 3.4028235e+38`},
		{reflect.TypeFor[shipment](), `{"level":1,"level":2}`, `$.level: duplicate member (encoding/json would keep only the last)`},
		{reflect.TypeFor[shipment](), `[]`, `$: want object, got array`},
		{reflect.TypeFor[shipment](), `{"a b":1,"when":false}`, `$["a b"]: unknown field; $.when: want string or null, got boolean`},
		{reflect.TypeFor[shipment](), `{"items":[1,2,3,4,5,6,7]}`, `$.items[0]: want object, got number 1; $.items[1]: want object, got number 2; $.items[2]: want object, got number 3; $.items[3]: want object, got number 4; $.items[4]: want object, got number 5; and more`},
		{reflect.TypeFor[order](), `{"quoted":"12","qp":null,"qs":"\"x\"","QuotedBool":"true"}`, ""},
		{reflect.TypeFor[order](), `{"quoted":12}`, `$.quoted: want string, got number 12`},
		{reflect.TypeFor[order](), `{"quoted":"x"}`, `$.quoted: string content: want integer as JSON, got "x"`},
		{reflect.TypeFor[order](), `{"quoted":" 12"}`, `$.quoted: string content: want JSON without surrounding spaces, got " 12"`},
		{reflect.TypeFor[order](), `{"quoted":"1.5"}`, `$.quoted: string content: want integer, got number 1.5`},
		{reflect.TypeFor[order](), `{"qs":"x"}`, `$.qs: string content: want string as JSON, got "x"`},
		{reflect.TypeFor[order](), `{"created":"2024-02-30T00:00:00Z"}`, `$.created: want an RFC 3339 date-time such as "2006-01-02T15:04:05Z", got "2024-02-30T00:00:00Z"`},
		{reflect.TypeFor[order](), `{"created":"2024-02-03T04:05:06.789+01:00","when":null}`, ""},
		{reflect.TypeFor[order](), `{"created":"2024-02-03T04:05:06\u005a"}`, `$.created: want an RFC 3339 date-time such as "2006-01-02T15:04:05Z", got "2024-02-03T04:05:06Z"`},
		{reflect.TypeFor[order](), `{"blob":"aGk=","pair":[0,255]}`, ""},
		{reflect.TypeFor[order](), `{"blob":[104,105]}`, ""},
		{reflect.TypeFor[order](), `{"blob":"aGk"}`, `$.blob: want base64 (standard, padded): illegal base64 data at input byte 0`},
		{reflect.TypeFor[order](), `{"pair":"aGk="}`, `$.pair: want array, got string`},
		{reflect.TypeFor[order](), `{"num":"1e3","tree":{"val":1,"kids":[null,{"kids":[]}]}}`, ""},
		{reflect.TypeFor[order](), `{"num":"one"}`, `$.num: string content: want number as JSON, got "one"`},
		{reflect.TypeFor[order](), `{"num":true}`, `$.num: want string or number, got boolean`},
		{reflect.TypeFor[order](), `{"tree":{"kids":[{"val":"x"}]}}`, `$.tree.kids[0].val: want integer, got string`},
		{reflect.TypeFor[order](), `{"tree":7}`, `$.tree: want object or null, got number 7`},
		{reflect.TypeFor[order](), `{"stringer":{}}`, `$.stringer: want null, got object`},
		{reflect.TypeFor[order](), `{"any":{"x":[1e999]},"raw":[1],"opaque":"anything","level":"high"}`, ""},
		{reflect.TypeFor[order](), `{"level":3}`, `$.level: want string, got number 3`},
		{reflect.TypeFor[order](), `{"u":-0}`, `$.u: want integer, got number -0`},
		{reflect.TypeFor[order](), `{"f32":-0,"dur":-9223372036854775808}`, ""},
		{reflect.TypeFor[order](), `{"dur":9223372036854775808}`, `$.dur: 9223372036854775808 is greater than the maximum 9223372036854775807`},
		{reflect.TypeFor[order](), `{"Tracking":"x","carrier":"y","id":1,"Note":"n"}`, ""},
		{reflect.TypeFor[forest](), `[[],[[null]],null]`, ""},
		{reflect.TypeFor[forest](), `[[],[[1]]]`, `$[1][0][0]: want array or null, got number 1`},
		{reflect.TypeFor[*tree](), `null`, ""},
		{reflect.TypeFor[*tree](), `[]`, `$: want object or null, got array`},
	}
	for _, tt := range tests {
		err := Validate(mustFor(t, tt.typ), []byte(tt.doc))
		if tt.want == "" {
			if err != nil {
				t.Errorf("%v %s: %v", tt.typ, tt.doc, err)
			}
			continue
		}
		var ve *ValidationError
		if !errors.As(err, &ve) {
			t.Errorf("%v %s: got %v, want a *ValidationError", tt.typ, tt.doc, err)
			continue
		}
		var got []string
		for _, p := range ve.Problems {
			got = append(got, p.String())
		}
		if ve.Truncated {
			got = append(got, "and more")
		}
		if g := strings.Join(got, "; "); g != tt.want {
			t.Errorf("%v %s:\n got %s\nwant %s", tt.typ, tt.doc, g, tt.want)
		}
		if !strings.HasPrefix(err.Error(), "document does not match schema: ") {
			t.Errorf("error text: %v", err)
		}
	}
}

func TestValidateMalformed(t *testing.T) {
	good := mustFor(t, reflect.TypeFor[shipment]())
	docs := []string{``, ` `, `{`, `{"a":}`, `[1,]`, `{"a":1}{}`, `1 2`, `nul`, `"\x"`, "\"\x01\"", `{1:2}`, strings.Repeat("[", 10001) + strings.Repeat("]", 10001)}
	for _, doc := range docs {
		err := Validate(good, []byte(doc))
		if !errors.Is(err, ErrMalformedDocument) {
			t.Errorf("document %.20q: got %v, want ErrMalformedDocument", doc, err)
		}
	}
	schemas := []string{
		``, `[]`, `1`, `{"type":"text"}`, `{"type":["string",1]}`, `{"pattern":"^a"}`,
		`{"$ref":"#/definitions/x"}`, `{"$ref":"#/$defs/missing"}`, `{"$ref":"http://example.com/s"}`,
		`{"minItems":-1}`, `{"maxItems":1.5}`, `{"minimum":"1"}`, `{"format":"email"}`,
		`{"contentEncoding":"base32"}`, `{"contentMediaType":"text/plain"}`, `{"anyOf":[]}`,
		`{"properties":{"a":1}}`, `{"items":{"$defs":{}}}`, `{"$defs":[]}`,
	}
	for _, s := range schemas {
		err := Validate([]byte(s), []byte(`{}`))
		if !errors.Is(err, ErrMalformedSchema) {
			t.Errorf("schema %s: got %v, want ErrMalformedSchema", s, err)
		}
	}
	// A $ref loop that never reaches a value is found when validating.
	loop := `{"$defs":{"a":{"$ref":"#/$defs/b"},"b":{"anyOf":[{"$ref":"#/$defs/a"}]}},"$ref":"#/$defs/a"}`
	if err := Validate([]byte(loop), []byte(`1`)); !errors.Is(err, ErrMalformedSchema) {
		t.Errorf("looping schema: got %v, want ErrMalformedSchema", err)
	}
	// Annotations are fine, and so are boolean schemas and "#" refs.
	ok := `{"title":"t","description":"d","$comment":"c","type":"object","properties":{"self":{"$ref":"#"},"no":false,"yes":true}}`
	if err := Validate([]byte(ok), []byte(`{"self":{"yes":[1],"self":{}}}`)); err != nil {
		t.Error(err)
	}
	if err := Validate([]byte(ok), []byte(`{"no":1}`)); err == nil || !strings.Contains(err.Error(), "$.no: not allowed") {
		t.Errorf("false schema: %v", err)
	}
}

func TestDecimal(t *testing.T) {
	ordered := []string{
		"-1e400", "-1.7976931348623157e+308", "-100", "-99.5", "-1", "-1e-400", "0",
		"1e-400", "0.001", "1E-2", "0.5", "1", "1.0000000000000000001", "2", "10", "99", "100.25",
		"18446744073709551615", "18446744073709551616", "3.4028235e+38", "1e39", "1e1000000000000",
	}
	for i, a := range ordered {
		da, ok := parseDecimal(a)
		if !ok {
			t.Fatalf("parseDecimal(%q) failed", a)
		}
		for j, b := range ordered {
			db, _ := parseDecimal(b)
			want := 0
			if i < j {
				want = -1
			} else if i > j {
				want = 1
			}
			if got := da.cmp(db); got != want {
				t.Errorf("cmp(%s, %s) = %d, want %d", a, b, got, want)
			}
		}
	}
	for _, eq := range [][2]string{{"0", "-0"}, {"0", "0.000e5"}, {"1", "1.000"}, {"100", "1e2"}, {"100", "0.001E5"}, {"-2.50", "-25e-1"}} {
		a, _ := parseDecimal(eq[0])
		b, _ := parseDecimal(eq[1])
		if a.cmp(b) != 0 {
			t.Errorf("%s != %s", eq[0], eq[1])
		}
	}
	for _, bad := range []string{"", "-", "01", "1.", ".5", "1e", "1e+", "+1", "1x", "0x10", "Inf"} {
		if _, ok := parseDecimal(bad); ok {
			t.Errorf("parseDecimal(%q) succeeded", bad)
		}
	}
}

func TestHint(t *testing.T) {
	props := map[string]*node{"Tracking": {}, "carrier": {}, "id": {}, "ids": {}}
	for key, want := range map[string]string{
		"tracking": `"Tracking"`, "TRACKING": `"Tracking"`, "trakcing": `"Tracking"`, "Carier": `"carrier"`,
		"xyz": "", "ID": `"id"`, "i": "", "idx": "", // idx is one edit from both id and ids
	} {
		got := hint(key, props)
		if want == "" && got != "" || want != "" && !strings.Contains(got, want) {
			t.Errorf("hint(%q) = %q, want %s", key, got, want)
		}
	}
}

// Deep documents are validated in linear time, and paths stay right.
func TestDeepDocument(t *testing.T) {
	const depth = 5000
	doc := strings.Repeat(`{"Next":`, depth) + `{"Items":7}` + strings.Repeat("}", depth)
	err := Validate(mustFor(t, reflect.TypeFor[recursive]()), []byte(doc))
	var ve *ValidationError
	if !errors.As(err, &ve) || len(ve.Problems) != 1 {
		t.Fatalf("got %v", err)
	}
	wantPath := "$" + strings.Repeat(".Next", depth) + ".Items"
	if p := ve.Problems[0]; p.Path != wantPath || p.Message != "want array or null, got number 7" {
		t.Errorf("got %.60s…: %s", p.Path, p.Message)
	}
	if err := Validate(mustFor(t, reflect.TypeFor[forest]()), []byte(strings.Repeat("[", maxDepth)+strings.Repeat("]", maxDepth))); err != nil {
		t.Error(err)
	}
}
