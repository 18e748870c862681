package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stemflow/stem/internal/manifest"
)

// A declared error name the build's manifest keeps as retired is noted:
// runs that recorded it still finish, but errors.Is against it is false.
// A name retired in one manifest and declared in another is not.
func TestCheckRetiredErrors(t *testing.T) {
	db := storeWith(t,
		storedRun{id: "order-1", workflow: "orders.fulfil", version: 2, input: orderInput, wait: shipWait},
	)
	m := fulfilManifest("")
	m.Errors = []manifest.Error{
		{Key: "orders.declined", Shape: manifest.ValueShape, Retired: true},
		{Key: "orders.limit", Shape: "{limit:int64}", Retired: true},
		{Key: "orders.gone", Shape: manifest.ValueShape},
	}
	root := writeManifest(t, m)
	out, errOut := cliAt(t, 0, "--store", db, "check", "--manifest-only", root)
	want := "note: the build no longer declares the errors orders.declined, orders.limit (retired in its manifests): " +
		"a run whose failure recorded one still finishes, but errors.Is and errors.As against them are false in this build\n"
	if !strings.Contains(out, want) || errOut != "" {
		t.Errorf("check:\n%s\nstderr: %s", out, errOut)
	}

	out, _ = cliAt(t, 0, "--store", db, "check", "--manifest-only", "--json", root)
	var rep struct {
		RetiredErrors []string `json:"retired_errors"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("check --json: %v\n%s", err, out)
	}
	if strings.Join(rep.RetiredErrors, " ") != "orders.declined orders.limit" {
		t.Errorf("check --json: retired_errors %v", rep.RetiredErrors)
	}

	m.Errors = []manifest.Error{{Key: "orders.declined", Shape: manifest.ValueShape}}
	out, _ = cliAt(t, 0, "--store", db, "check", "--manifest-only", root, writeManifest(t, m))
	if !strings.Contains(out, "no longer declares the error orders.limit (") {
		t.Errorf("check, name declared in another manifest:\n%s", out)
	}
}
