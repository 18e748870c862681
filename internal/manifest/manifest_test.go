package manifest_test

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/stemflow/stem/internal/manifest"
)

// TestParseErrors: a manifest of format 4 on records declared errors,
// which Encode writes sorted and Parse reads back; one of format 3 has
// none.
func TestParseErrors(t *testing.T) {
	m := &manifest.Manifest{
		Errors: []manifest.Error{
			{Key: "bank.limit", Shape: "{Limit:int64,Account:string}"},
			{Key: "bank.closed", Shape: manifest.ValueShape, Retired: true},
		},
	}
	b := m.Encode()
	if !strings.Contains(string(b), fmt.Sprintf(`"format": %d,`, manifest.Format)) {
		t.Fatalf("encoded without format %d:\n%s", manifest.Format, b)
	}
	got, err := manifest.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	want := []manifest.Error{
		{Key: "bank.closed", Shape: manifest.ValueShape, Retired: true},
		{Key: "bank.limit", Shape: "{Limit:int64,Account:string}"},
	}
	if !reflect.DeepEqual(got.Errors, want) {
		t.Errorf("errors read back: %+v, want %+v", got.Errors, want)
	}
	if !got.RecordsErrors() || !got.Errors[0].IsValue() || got.Errors[1].IsValue() {
		t.Errorf("RecordsErrors %v, IsValue %v %v", got.RecordsErrors(), got.Errors[0].IsValue(), got.Errors[1].IsValue())
	}

	old, err := manifest.Parse([]byte(`{"comment": "", "format": 3, "workflows": [], "steps": [], "events": [{"key": "p.ready@v1", "payload": "{ID:string}"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if old.RecordsErrors() || len(old.Errors) != 0 || len(old.Events) != 1 {
		t.Errorf("format 3: RecordsErrors %v, errors %v, events %v", old.RecordsErrors(), old.Errors, old.Events)
	}
	newer := fmt.Sprintf(`{"comment": "", "format": %d, "workflows": [], "steps": [], "events": [], "updates": [], "streams": [], "errors": []}`, manifest.Format+1)
	if _, err := manifest.Parse([]byte(newer)); !errors.Is(err, manifest.ErrNewerFormat) {
		t.Errorf("format %d: %v, want ErrNewerFormat", manifest.Format+1, err)
	}
	if _, err := manifest.Parse([]byte(`{"comment": "", "format": 4, "errors": [{"key": "a", "shape": "value", "kind": "x"}]}`)); err == nil {
		t.Error("an unknown field of an error parsed")
	}
}

// TestParseInteractions: a manifest of format 5 records updates and
// streams, which Encode writes sorted (an empty list as []) and Parse
// reads back, refusing unknown fields; one of format 4 has none.
func TestParseInteractions(t *testing.T) {
	m := &manifest.Manifest{
		Updates: []manifest.Update{
			{Key: "p.cancel@v2", Request: "{reason:string}", Reply: "{released:bool}"},
			{Key: "p.cancel@v1", Request: "{why:string}", Reply: "{}", Retired: true},
		},
		Streams: []manifest.Stream{
			{Key: "p.log@v1", Value: "{text:string}"},
			{Key: "p.audit@v1", Value: "string", Retired: true},
		},
	}
	b := m.Encode()
	got, err := manifest.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	wantUpdates := []manifest.Update{
		{Key: "p.cancel@v1", Request: "{why:string}", Reply: "{}", Retired: true},
		{Key: "p.cancel@v2", Request: "{reason:string}", Reply: "{released:bool}"},
	}
	wantStreams := []manifest.Stream{
		{Key: "p.audit@v1", Value: "string", Retired: true},
		{Key: "p.log@v1", Value: "{text:string}"},
	}
	if !reflect.DeepEqual(got.Updates, wantUpdates) || !reflect.DeepEqual(got.Streams, wantStreams) {
		t.Errorf("read back: updates %+v, streams %+v", got.Updates, got.Streams)
	}
	if !got.RecordsInteractions() {
		t.Error("format 5 does not record updates and streams")
	}
	empty := (&manifest.Manifest{}).Encode()
	if !strings.Contains(string(empty), `"updates": [],`) || !strings.Contains(string(empty), `"streams": [],`) {
		t.Errorf("an empty manifest does not list updates and streams as empty:\n%s", empty)
	}

	old, err := manifest.Parse([]byte(`{"comment": "", "format": 4, "workflows": [], "steps": [], "events": [], "errors": []}`))
	if err != nil {
		t.Fatal(err)
	}
	if old.RecordsInteractions() || len(old.Updates) != 0 || len(old.Streams) != 0 {
		t.Errorf("format 4: RecordsInteractions %v, updates %v, streams %v", old.RecordsInteractions(), old.Updates, old.Streams)
	}
	if _, err := manifest.Parse([]byte(`{"comment": "", "format": 5, "updates": [{"key": "a@v1", "request": "{}", "reply": "{}", "validator": true}]}`)); err == nil {
		t.Error("an unknown field of an update parsed")
	}
}

// TestParseAttributes: a manifest of format 6 records each workflow's
// search attributes, in the order written (retired ones after), which
// Parse reads back, refusing unknown fields; one of format 5 has none,
// and a workflow without attributes writes no field.
func TestParseAttributes(t *testing.T) {
	m := &manifest.Manifest{Workflows: []manifest.Workflow{
		{Key: "p.b@v1", Input: "{}", Output: "{}"},
		{Key: "p.a@v1", Input: "{customer:{id:string}}", Output: "{}", Attributes: []manifest.Attribute{
			{Name: "customer", Type: "string", From: "customer.id"},
			{Name: "total", Type: "number"},
			{Name: "stage", Type: "string", Retired: true},
		}},
	}}
	b := m.Encode()
	got, err := manifest.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	want := []manifest.Workflow{m.Workflows[1], m.Workflows[0]}
	if !reflect.DeepEqual(got.Workflows, want) {
		t.Errorf("read back: %+v, want %+v", got.Workflows, want)
	}
	if !got.RecordsAttributes() {
		t.Error("format 6 does not record attributes")
	}
	if n := strings.Count(string(b), `"attributes"`); n != 1 {
		t.Errorf("%d attributes fields, want 1 (none for a workflow without):\n%s", n, b)
	}
	old, err := manifest.Parse([]byte(`{"comment": "", "format": 5, "workflows": [{"key": "p.a@v1", "input": "{}", "output": "{}"}], "steps": [], "events": [], "updates": [], "streams": [], "errors": []}`))
	if err != nil {
		t.Fatal(err)
	}
	if old.RecordsAttributes() || old.Workflows[0].Attributes != nil {
		t.Errorf("format 5: RecordsAttributes %v, attributes %v", old.RecordsAttributes(), old.Workflows[0].Attributes)
	}
	if _, err := manifest.Parse([]byte(`{"comment": "", "format": 6, "workflows": [{"key": "p.a@v1", "input": "{}", "output": "{}", "attributes": [{"name": "a", "type": "string", "index": true}]}]}`)); err == nil {
		t.Error("an unknown field of an attribute parsed")
	}
}
