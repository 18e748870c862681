package jsonschema

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
)

// fuzzTypes are the types FuzzValidate checks documents against. They
// avoid interface{}, into which encoding/json refuses numbers beyond the
// float64 range, a limit the schema {} cannot express.
var fuzzTypes = []reflect.Type{
	reflect.TypeFor[shipment](),
	reflect.TypeFor[tagged](),
	reflect.TypeFor[recursive](),
	reflect.TypeFor[numbers](),
	reflect.TypeFor[map[int8][2]float32](),
	reflect.TypeFor[[]byte](),
	reflect.TypeFor[wrapsTime](),
	reflect.TypeFor[forest](),
}

// FuzzValidate checks that Validate never panics, and that what it
// accepts for a type, json.Unmarshal decodes into that type.
func FuzzValidate(f *testing.F) {
	seeds := []string{
		`{}`, `null`, `[]`, `{"items":[{"sku":"a","qty":2}],"Tracking":"x","weights":[1,2]}`,
		`{"items":[{"sku":7}]}`, `{"tracking":"x"}`, `{"level":128}`, `{"counts":{"255":1.5}}`,
		`{"name":"n","q":"12","qp":"true","ptr":null,"-":1,"Bad":2}`, `{"q":"1.0"}`, `{"q":" 1"}`,
		`{"Next":{"Next":null,"Items":[{}]},"Other":{"a":null}}`, `{"N":"1e5","NP":2}`, `{"N":"x"}`,
		`{"-1":[1.5,-3.4028235e+38]}`, `{"1":[1,2,3]}`, `"aGk="`, `[1,2,255]`, `"a\nGk="`,
		`{"T":"2024-01-01T00:00:00Z"}`, `{"T":"2024-01-01T00:00:00\u005a"}`, `[[],[[]],null]`,
		`{"a":1,"a":2}`, `{"level":-0}`, `{"level":1e400}`, `{"weights":[0,65535]}`, "\xff", `"\ud800"`,
	}
	for i, s := range seeds {
		f.Add(uint8(i), []byte(s))
	}
	schemas := make([][]byte, len(fuzzTypes))
	for i, typ := range fuzzTypes {
		schemas[i] = mustFor(f, typ)
	}
	f.Fuzz(func(t *testing.T, which uint8, doc []byte) {
		i := int(which) % len(fuzzTypes)
		verr := Validate(schemas[i], doc)
		if errors.Is(verr, ErrMalformedSchema) {
			t.Fatalf("schema of %v reported malformed: %v", fuzzTypes[i], verr)
		}
		if verr != nil {
			return
		}
		if err := json.Unmarshal(doc, reflect.New(fuzzTypes[i]).Interface()); err != nil {
			t.Fatalf("Validate accepts %q for %v, json.Unmarshal refuses it: %v", doc, fuzzTypes[i], err)
		}
	})
}

// FuzzValidateSchema checks that Validate never panics nor hangs on
// arbitrary schemas.
func FuzzValidateSchema(f *testing.F) {
	f.Add([]byte(`{"$defs":{"a":{"anyOf":[{"$ref":"#"},{"$ref":"#/$defs/a"}]}},"$ref":"#/$defs/a"}`), []byte(`[1]`))
	f.Add([]byte(`{"type":["integer","null"],"minimum":-1,"maximum":1e999999999999}`), []byte(`2`))
	f.Add([]byte(`{"propertyNames":{"contentMediaType":"application/json","contentSchema":{"type":"integer"}}}`), []byte(`{"1":1,"x":2}`))
	f.Add([]byte(`{"items":{"anyOf":[{"type":"null"},{"$ref":"#"}]},"minItems":1}`), []byte(`[[[]],null]`))
	f.Add(mustFor(f, reflect.TypeFor[order]()), []byte(`{"tree":{"kids":[null]}}`))
	f.Fuzz(func(t *testing.T, schema, doc []byte) {
		_ = Validate(schema, doc)
	})
}
