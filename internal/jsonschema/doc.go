// Package jsonschema derives JSON Schemas from Go types and validates JSON
// documents against them.
//
// Engines record, for every workflow's input and output and every event's
// payload, the schema For derives from the Go type. Tools that do not have
// the Go types (stem start, stem send) call Validate to refuse, with an
// error that names the offending path, a payload that would not decode
// into the worker's type, before writing it.
//
// # What a schema accepts
//
// For(t) describes the documents encoding/json decodes into a fresh value
// of type t without error, and without silently dropping data that a
// schema can detect:
//
//   - bool: boolean. string: string.
//   - Integer types: an integer literal (no fraction, no exponent) within
//     the type's range, given as minimum and maximum.
//   - float32, float64: a number within the type's finite range.
//   - []byte (any slice of a uint8 kind): a base64 string (contentEncoding),
//     or an array of byte values, or null.
//   - Other slices: an array of the element schema, or null. Arrays: an
//     array of exactly the array's length (encoding/json would zero the
//     missing elements and drop the extra ones).
//   - Maps with string, integer or encoding.TextUnmarshaler keys: an object
//     whose members match the element schema (additionalProperties), or
//     null. Integer keys must be JSON integers in range (propertyNames).
//   - Pointers: the element's schema, or null.
//   - Structs: an object with the fields encoding/json knows (json tag
//     names, "-" skipped, fields of embedded structs promoted, unexported
//     fields ignored, `json:",string"` fields as strings holding JSON via
//     contentMediaType and contentSchema; omitempty and omitzero change
//     nothing when decoding). No field is required: encoding/json leaves
//     missing fields at their zero value.
//   - time.Time: a string with format date-time (RFC 3339, checked with
//     time.Time's own parser).
//   - json.Number: a number, or a string holding one.
//   - Other types implementing json.Unmarshaler: {}, anything; they decide
//     for themselves. Types implementing encoding.TextUnmarshaler: a
//     string, which is all encoding/json hands them.
//   - interface{}: {}. Interfaces with methods: only null, since
//     encoding/json cannot pick a concrete type for anything else.
//   - Recursive types are described once under $defs and referred to with
//     $ref.
//
// For refuses channels, funcs, complex numbers, unsafe pointers and maps
// with other key types, which encoding/json cannot decode into.
//
// # Stricter than the decoder, on purpose
//
// The schemas refuse some documents that encoding/json would decode: it is
// better for an operator's tool to refuse a payload than for a worker to
// decode something other than what was meant. Workers still decode with
// encoding/json and are not affected.
//
//   - Struct objects have "additionalProperties": false. encoding/json
//     ignores unknown members, so a misspelt field would silently be lost;
//     here it is an error ("unknown field"), with a hint when a field's name
//     is close. encoding/json also matches member names case-insensitively;
//     the schema wants the exact name.
//   - null is accepted only where json.Marshal can write it (pointers,
//     slices, maps, interfaces), although encoding/json ignores null
//     everywhere.
//   - Duplicate members in an object, of which encoding/json keeps the last,
//     are reported by Validate.
//   - Values for `json:",string"` fields and integer map keys must hold
//     canonical JSON: " 12", "+12" and "012" are refused.
//
// # What a schema cannot see
//
// Validate cannot run the worker's code, so what UnmarshalJSON and
// UnmarshalText methods would refuse is not caught (time.Time aside), nor
// are keys a TextUnmarshaler map key type would refuse, nor numbers too
// large for a float64 inside an interface{}.
//
// # The schema subset
//
// Schemas are draft 2020-12 and use only the keywords listed at Validate.
// Validate is not a general JSON Schema validator: it supports what For
// emits (and "type" arrays), and reports other keywords as a malformed
// schema instead of ignoring them.
package jsonschema
