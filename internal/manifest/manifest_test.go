package manifest_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/stemflow/stem/internal/manifest"
)

// TestParseErrors: a manifest of format 4 records declared errors, which
// Encode writes sorted and Parse reads back; one of format 3 has none.
func TestParseErrors(t *testing.T) {
	m := &manifest.Manifest{
		Errors: []manifest.Error{
			{Key: "bank.limit", Shape: "{Limit:int64,Account:string}"},
			{Key: "bank.closed", Shape: manifest.ValueShape, Retired: true},
		},
	}
	b := m.Encode()
	if !strings.Contains(string(b), `"format": 4,`) {
		t.Fatalf("encoded without format 4:\n%s", b)
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
	if _, err := manifest.Parse([]byte(`{"comment": "", "format": 5, "workflows": [], "steps": [], "events": [], "errors": []}`)); !errors.Is(err, manifest.ErrNewerFormat) {
		t.Errorf("format 5: %v, want ErrNewerFormat", err)
	}
	if _, err := manifest.Parse([]byte(`{"comment": "", "format": 4, "errors": [{"key": "a", "shape": "value", "kind": "x"}]}`)); err == nil {
		t.Error("an unknown field of an error parsed")
	}
}
