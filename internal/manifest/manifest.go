// Package manifest is the format of stem.manifest.json, the file stemgen
// keeps beside each package's generated code: every durable shape the
// package's workflows, steps, events, updates and streams have had, by
// key, every error name the package has declared, and the type of every
// search attribute its workflows have declared. stemgen reads it
// to refuse a changed shape without a version bump; `stem check` reads it
// to find the runs in a store that a build could not continue.
package manifest

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
)

// FileName is the manifest's name in its package's directory.
const FileName = "stem.manifest.json"

// Comment is the comment every manifest carries.
const Comment = "Maintained by stemgen: the shape of each workflow's, step's, event's, update's and stream's payloads, and of each declared error, by key, the type of each workflow's search attributes, and which keys the package's code has now. " +
	"A change of shape that stored payloads would not survive needs a new version. Commit this file; do not edit it."

// Format is the format of the manifests Encode writes, in their "format"
// field. A manifest without the field is format 1, written before events,
// Retired and Autoversion were recorded: its Events are missing, none of
// its entries is Retired, and its steps' Autoversion is unknown (false).
// Format 2 recorded those, but not the sizes of numbers: its shapes say
// int, uint and float for a number of any size. Format 3 says int32,
// uint8, float64, ..., and int and uint for Go's own (see ParseShape).
// stemgen rewrites an older manifest's current entries with sizes; its
// retired entries keep their shapes, whose int and uint then read as
// Go's. Format 4 adds Errors, the package's declared errors (//stem:error)
// by durable name; a manifest of an older format has none, and stemgen
// records them as they are at its next generation. Format 5 adds Updates
// and Streams (//stem:update, //stem:stream), which an older format has
// none of, recorded likewise at the next generation. Format 6 adds each
// workflow's Attributes (//stem:attr), which an older format has none of:
// stemgen records them at its next generation, and judges a type change
// only against what a manifest recorded.
const Format = 6

// Manifest is one package's manifest. Entries whose key the code no longer
// has are kept, marked Retired: stored runs may still hold them, so reusing
// such a key with another shape is refused too.
type Manifest struct {
	Comment string `json:"comment"`
	// Format is the manifest's format: Format when Encode wrote it, 0 for
	// format 1 (see Format).
	Format    int        `json:"format,omitempty"`
	Workflows []Workflow `json:"workflows"`
	Steps     []Step     `json:"steps"`
	Events    []Event    `json:"events"`
	// Updates and Streams are the package's updates and streams; none
	// before format 5 (see RecordsInteractions).
	Updates []Update `json:"updates"`
	Streams []Stream `json:"streams"`
	// Errors are the errors the package declares (//stem:error), by
	// durable name; none before format 4 (see RecordsErrors).
	Errors []Error `json:"errors"`
}

// Workflow is the shape of one version of a workflow.
type Workflow struct {
	// Key is the workflow's name and version, "orders.fulfil@v2".
	Key string `json:"key"`
	// Input, Output and Progress are the shapes of its input, output and
	// progress= type (Progress "" when it has none).
	Input    string `json:"input"`
	Output   string `json:"output"`
	Progress string `json:"progress,omitempty"`
	// Attributes are the search attributes the workflow declares
	// (//stem:attr), in the order declared, then those it declared once
	// and no longer does, marked Retired; none before format 6 (see
	// RecordsAttributes).
	Attributes []Attribute `json:"attributes,omitempty"`
	// Retired is true when no function of the package is annotated with
	// this name and version any more: a build of the package cannot run
	// runs of it.
	Retired bool `json:"retired,omitempty"`
}

// Attribute is one search attribute of a workflow: runs store its values
// in its type, so a name keeps its type for as long as runs may hold it.
type Attribute struct {
	// Name is the attribute's durable name, "customer".
	Name string `json:"name"`
	// Type is its type: string, number, time or bool.
	Type string `json:"type"`
	// From is the JSON path of the input's field a run's start takes it
	// from, "customer.id"; "" for one the workflow sets as it goes.
	From string `json:"from,omitempty"`
	// Retired is true when the workflow no longer declares it: runs kept
	// may still hold it.
	Retired bool `json:"retired,omitempty"`
}

// Step is the shape of one step's checkpoint key.
type Step struct {
	// Key is the step's checkpoint key, "charge@v2".
	Key string `json:"key"`
	// Input is the shape of its parameters, as a tuple "(…)"; Output of
	// its result, "()" for a step that returns only an error.
	Input  string `json:"input"`
	Output string `json:"output"`
	// Autoversion is true for an autoversion step: its checkpoints are
	// Key#0, Key#1, ..., never Key itself.
	Autoversion bool `json:"autoversion,omitempty"`
	// Retired is true when the package's code no longer has the key.
	Retired bool `json:"retired,omitempty"`
}

// Event is the payload shape of one version of an event.
type Event struct {
	// Key is the event's topic and version, "orders.shipment-ready@v1".
	Key string `json:"key"`
	// Payload is the shape of its payload type.
	Payload string `json:"payload"`
	// Retired is true when the package's code no longer declares the
	// topic at this version.
	Retired bool `json:"retired,omitempty"`
}

// Update is the shapes of one version of an update: its request and its
// reply.
type Update struct {
	// Key is the update's name and version, "orders.cancel@v1".
	Key string `json:"key"`
	// Request and Reply are the shapes of its request type and of its
	// reply= type.
	Request string `json:"request"`
	Reply   string `json:"reply"`
	// Retired is true when the package's code no longer declares the
	// update at this version.
	Retired bool `json:"retired,omitempty"`
}

// Stream is the value shape of one version of a stream.
type Stream struct {
	// Key is the stream's name and version, "orders.log@v1".
	Key string `json:"key"`
	// Value is the shape of its value type.
	Value string `json:"value"`
	// Retired is true when the package's code no longer declares the
	// stream at this version.
	Retired bool `json:"retired,omitempty"`
}

// ValueShape is the Shape of an Error that is a value, matched with
// errors.Is: a failure records only its name. A type's Shape is never
// this: shapes of types are JSON shapes (see ParseShape).
const ValueShape = "value"

// Error is one error name the package declares with //stem:error.
// Failures are stored with the names of the declared errors in their
// chain, and an error type's exported fields as JSON, so a build decodes
// those fields again into the type the name declares now.
type Error struct {
	// Key is the error's durable name, "bank.insufficient_funds".
	Key string `json:"key"`
	// Shape is ValueShape for an error value; for an error type, the
	// shape of the JSON its fields are recorded as (see ParseShape).
	Shape string `json:"shape"`
	// Retired is true when the package's code no longer declares the
	// name: a failure recorded with it still reads back, as text, but
	// errors.Is and errors.As no longer match it.
	Retired bool `json:"retired,omitempty"`
}

// IsValue reports whether the error is a value (matched with errors.Is),
// not a type.
func (e Error) IsValue() bool { return e.Shape == ValueShape }

// RecordsAutoversion reports whether the manifest's format records
// whether each step is autoversion (Step.Autoversion): format 1 did not.
func (m *Manifest) RecordsAutoversion() bool { return m.Format >= 2 }

// RecordsSizes reports whether the manifest's shapes record the sizes of
// numbers: before format 3, int, uint and float are numbers of a size the
// manifest does not say.
func (m *Manifest) RecordsSizes() bool { return m.Format >= 3 }

// RecordsErrors reports whether the manifest's format records the
// package's declared errors (Errors): formats before 4 did not.
func (m *Manifest) RecordsErrors() bool { return m.Format >= 4 }

// RecordsInteractions reports whether the manifest's format records the
// package's updates and streams (Updates, Streams): formats before 5 did
// not.
func (m *Manifest) RecordsInteractions() bool { return m.Format >= 5 }

// RecordsAttributes reports whether the manifest's format records the
// workflows' search attributes (Workflow.Attributes): formats before 6
// did not.
func (m *Manifest) RecordsAttributes() bool { return m.Format >= 6 }

// ErrNewerFormat is the error of Parse for a manifest of a format after
// Format.
var ErrNewerFormat = errors.New("manifest written by a newer stemgen")

// Parse decodes a manifest of any format up to Format, refusing unknown
// fields and newer formats: a manifest written by a newer stemgen says so
// instead of losing what it records.
func Parse(b []byte) (*Manifest, error) {
	var m Manifest
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return nil, err
	}
	switch {
	case m.Format > Format:
		return nil, fmt.Errorf("%w: format %d; this one reads formats 1 to %d", ErrNewerFormat, m.Format, Format)
	case m.Format < 0:
		return nil, fmt.Errorf("manifest format %d: want 1 to %d", m.Format, Format)
	}
	return &m, nil
}

// Read reads and decodes the manifest at path; the error names the path.
func Read(path string) (*Manifest, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	m, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

// Encode returns the manifest as stemgen writes it: in format Format,
// entries sorted by key, indented, with the standard comment and a final
// newline.
func (m *Manifest) Encode() []byte {
	c := *m
	c.Comment = Comment
	c.Format = Format
	c.Workflows = sorted(c.Workflows, func(w Workflow) string { return w.Key })
	c.Steps = sorted(c.Steps, func(s Step) string { return s.Key })
	c.Events = sorted(c.Events, func(e Event) string { return e.Key })
	c.Updates = sorted(c.Updates, func(u Update) string { return u.Key })
	c.Streams = sorted(c.Streams, func(s Stream) string { return s.Key })
	c.Errors = sorted(c.Errors, func(e Error) string { return e.Key })
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(c); err != nil {
		panic(err) // plain strings and bools always encode
	}
	return buf.Bytes()
}

// sorted returns a sorted copy of entries, never nil (so it encodes as []).
func sorted[E any](entries []E, key func(E) string) []E {
	out := append(make([]E, 0, len(entries)), entries...)
	slices.SortFunc(out, func(a, b E) int { return cmp.Compare(key(a), key(b)) })
	return out
}

// SplitKey splits "name@vN" into its name and version; ok is false when
// key is not of that form.
func SplitKey(key string) (name string, version int, ok bool) {
	i := strings.LastIndex(key, "@v")
	if i <= 0 {
		return "", 0, false
	}
	n, err := strconv.Atoi(key[i+2:])
	if err != nil || n < 1 || strconv.Itoa(n) != key[i+2:] {
		return "", 0, false
	}
	return key[:i], n, true
}

// Key joins a name and a version as "name@vN".
func Key(name string, version int) string { return fmt.Sprintf("%s@v%d", name, version) }
