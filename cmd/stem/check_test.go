package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stemflow/stem/internal/manifest"
	"github.com/stemflow/stem/storage"
	"github.com/stemflow/stem/stores/sqlitestore"
)

// storedRun is a run as a worker of an older build left it in the store.
type storedRun struct {
	id, workflow string
	version      int
	input        string
	steps        []storage.Checkpoint
	wait         *storage.Wait // nil: asleep
}

// storeWith makes a SQLite store holding runs, each parked (asleep, or
// waiting on its wait) after its checkpoints, and returns its path, the
// store closed.
func storeWith(t *testing.T, runs ...storedRun) string {
	t.Helper()
	t.Setenv("STEM_STORE", "")
	t.Setenv("STEM_CODEC_KEY", "")
	path := filepath.Join(t.TempDir(), "stem.db")
	st, err := sqlitestore.Open(path, sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	fillStore(t, st, runs...)
	return path
}

func stepCP(key, output string) storage.Checkpoint {
	return storage.Checkpoint{Key: key, Kind: storage.KindStep, Output: []byte(output)}
}

const orderInput = `{"id":"o-1","items":[{"sku":"a","qty":1}]}`

// fulfilManifest is the orders package's manifest in a build whose
// orders.fulfil is at v2; v1 is absent, retired or current as asked.
func fulfilManifest(v1 string) *manifest.Manifest {
	in := "{id:string,items:[]{qty:int,sku:string}}"
	m := &manifest.Manifest{
		Workflows: []manifest.Workflow{{Key: "orders.fulfil@v2", Input: in, Output: "{tracking:string}"}},
		Steps: []manifest.Step{
			{Key: "reserve@v1", Input: "(" + in + ")", Output: "{hold:string}"},
			{Key: "pack@v1", Input: "({qty:int,sku:string})", Output: "{label:string}", Autoversion: true},
			{Key: "charge@v1", Input: "({hold:string})", Output: "{id:string}", Retired: true},
			{Key: "charge@v2", Input: "({hold:string})", Output: "{id:string}"},
		},
		Events: []manifest.Event{{Key: "orders.shipment-ready@v1", Payload: "{tracking:string}"}},
	}
	switch v1 {
	case "retired":
		m.Workflows = append(m.Workflows, manifest.Workflow{Key: "orders.fulfil@v1", Input: in, Output: "{tracking:string}", Retired: true})
	case "current":
		m.Workflows = append(m.Workflows, manifest.Workflow{Key: "orders.fulfil@v1", Input: in, Output: "{tracking:string}"})
	}
	return m
}

// writeManifest writes m as the orders package's manifest under a new
// module root, and returns the root.
func writeManifest(t *testing.T, m *manifest.Manifest) string {
	t.Helper()
	root := t.TempDir()
	dir := filepath.Join(root, "orders")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, manifest.FileName), m.Encode(), 0o644); err != nil {
		t.Fatal(err)
	}
	return root
}

// manifestOnlyLine is what stem check --manifest-only says of how it judged.
const manifestOnlyLine = "judged from the manifests alone (--manifest-only): neither checked that they are what the code generates, nor replayed the runs through the code\n"

var shipWait = &storage.Wait{Key: "ship", Topic: "orders.shipment-ready"}

// Runs of orders.fulfil@v1 in flight while the build has only v2, or v1
// retired: stem check lists them and exits 3; once the build registers v1
// again it exits 0. The store is only read.
func TestCheckOldVersion(t *testing.T) {
	db := storeWith(t,
		storedRun{id: "order-1", workflow: "orders.fulfil", version: 1, input: orderInput, wait: shipWait, steps: []storage.Checkpoint{stepCP("reserve@v1", `{"hold":"h"}`)}},
		storedRun{id: "order-2", workflow: "orders.fulfil", version: 1, input: orderInput},
		storedRun{id: "order-3", workflow: "orders.fulfil", version: 2, input: orderInput, wait: shipWait},
	)
	before := fileSum(t, db)

	onlyV2 := writeManifest(t, fulfilManifest(""))
	out, errOut := cliAt(t, 3, "--store", db, "check", "--manifest-only", onlyV2)
	for _, want := range []string{
		"order-1 (orders.fulfil@v1, waiting): the build does not have orders.fulfil@v1 (it has v2)\n",
		"order-2 (orders.fulfil@v1, waiting): the build does not have orders.fulfil@v1 (it has v2)\n",
		"2 of 3 in-flight runs could not continue (checked against 1 manifest)\n",
		"what to do:\n  orders.fulfil@v1 (2 runs): keep the workflow function annotated name=orders.fulfil version=1 in the build until these runs finish, or terminate them\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("check, v1 absent: lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "order-3") || errOut != "" {
		t.Errorf("check, v1 absent:\n%s\nstderr: %s", out, errOut)
	}

	retired := writeManifest(t, fulfilManifest("retired"))
	out, _ = cliAt(t, 3, "--store", db, "check", "--manifest-only", filepath.Join(retired, "orders", manifest.FileName))
	if !strings.Contains(out, "order-1 (orders.fulfil@v1, waiting): orders.fulfil@v1 is retired in the build: no function is annotated with it (it has v2)\n") {
		t.Errorf("check, v1 retired:\n%s", out)
	}

	// --json, for machines.
	out, _ = cliAt(t, 3, "--store", db, "check", "--manifest-only", "--json", onlyV2)
	var rep struct {
		Manifests         []string
		Checked, Stranded int
		Problems          []struct {
			RunID   string `json:"run_id"`
			Version int
			Kind    string
			Key     string
			Reason  string
			Fix     string
		}
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("check --json: %v\n%s", err, out)
	}
	if rep.Checked != 3 || rep.Stranded != 2 || len(rep.Problems) != 2 || rep.Problems[0].RunID != "order-1" || rep.Problems[0].Kind != "version" ||
		rep.Problems[0].Key != "orders.fulfil@v1" || rep.Problems[0].Version != 1 || rep.Problems[0].Fix == "" || len(rep.Manifests) != 1 {
		t.Errorf("check --json: %+v", rep)
	}
	checkSnakeCase(t, "check --json", json.RawMessage(out))

	// The build registers v1 again: every run can continue. The current
	// directory is the default PATH.
	t.Chdir(writeManifest(t, fulfilManifest("current")))
	out, errOut = cliAt(t, 0, "--store", db, "check", "--manifest-only")
	if out != "0 of 3 in-flight runs could not continue (checked against 1 manifest)\n"+manifestOnlyLine || errOut != "" {
		t.Errorf("check, v1 registered: %q %q", out, errOut)
	}
	if fileSum(t, db) != before {
		t.Error("stem check changed the store")
	}
}

// The other kinds of problem, each on its line with its key and reason: a
// retired step key, an autoversion mismatch, a wait on a topic the build
// does not declare, a shape mismatch with its path; a sealed payload is
// counted, not checked.
func TestCheckProblems(t *testing.T) {
	sealed := "\x00stmk\x01\x02\x03\x04\x05\x06\x07\x08ciphertext"
	db := storeWith(t,
		storedRun{id: "a-retired", workflow: "orders.fulfil", version: 2, input: orderInput, steps: []storage.Checkpoint{stepCP("charge@v1", `{"id":"p"}`)}},
		storedRun{id: "b-auto", workflow: "orders.fulfil", version: 2, input: orderInput, steps: []storage.Checkpoint{stepCP("reserve@v1#0", `{"hold":"h"}`)}},
		storedRun{id: "c-topic", workflow: "orders.fulfil", version: 2, input: orderInput, wait: &storage.Wait{Key: "cancel", Topic: "orders.cancelled"}},
		storedRun{id: "d-shape", workflow: "orders.fulfil", version: 2, input: `{"id":"o","items":[{"qty":1},{"qty":1},{"qty":"2"}]}`},
		storedRun{id: "e-sealed", workflow: "orders.fulfil", version: 2, input: sealed, steps: []storage.Checkpoint{stepCP("reserve@v1", sealed)}},
		storedRun{id: "f-unversioned", workflow: "orders.fulfil", version: 0, input: orderInput, steps: []storage.Checkpoint{stepCP("pack@v1#0", `{"label":7}`)}},
	)
	build := writeManifest(t, fulfilManifest(""))
	out, _ := cliAt(t, 3, "--store", db, "check", "--manifest-only", build)
	for _, want := range []string{
		"a-retired (orders.fulfil@v2, waiting): charge@v1: holds a checkpoint of step charge@v1, which the build retired: no step of the package has that key now\n",
		"b-auto (orders.fulfil@v2, waiting): reserve@v1#0: holds iteration 0 of step reserve@v1, which the build's step is not autoversion\n",
		"c-topic (orders.fulfil@v2, waiting): orders.cancelled: waits (as cancel) on event topic orders.cancelled, which no //stem:event type of the build declares\n",
		`d-shape (orders.fulfil@v2, waiting): orders.fulfil@v2: the run's input does not decode into the build's input type: items[2].qty: want int, have string "2"` + "\n",
		"f-unversioned (orders.fulfil@v? (checked as v2), waiting): pack@v1#0: the step's stored result does not decode into the build's result type: label: want string, have number 7\n",
		"5 of 6 in-flight runs could not continue (checked against 1 manifest)\n",
		"note: 1 run records no version (stored before versions were kept): checked as the newest version of its workflow the build has\n",
		"note: 2 payloads (in 1 run) are sealed by a codec: their shape was not checked\n",
		"  reserve@v1 (1 run): keep the step's autoversion as it was until these runs finish",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("check lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "e-sealed (") {
		t.Errorf("a sealed run reported as a problem:\n%s", out)
	}
	out, _ = cliAt(t, 3, "--store", db, "--json", "check", "--manifest-only", build)
	if !strings.Contains(out, `"path": "items[2].qty"`) || !strings.Contains(out, `"sealed": 2`) || !strings.Contains(out, `"unversioned": 1`) {
		t.Errorf("check --json:\n%s", out)
	}

	// --workflow keeps the runs of those workflows.
	if out, _ := cliAt(t, 0, "--store", db, "check", "--manifest-only", "--workflow", "billing.run,orders.invoice", "--workflow", "x.y", build); !strings.HasPrefix(out, "0 of 0 in-flight runs") {
		t.Errorf("check --workflow of others: %s", out)
	}
}

// Bad input: a missing path, a directory without a manifest, a malformed
// manifest, a mistyped flag, a store that is not there. Each says what and
// where, exits 2 (1 for the store), and leaves the store as it was.
func TestCheckBadInput(t *testing.T) {
	db := storeWith(t, storedRun{id: "order-1", workflow: "orders.fulfil", version: 1, input: orderInput})
	before := fileSum(t, db)
	good := writeManifest(t, fulfilManifest(""))
	missing := filepath.Join(t.TempDir(), "nope")
	empty := t.TempDir()
	os.MkdirAll(filepath.Join(empty, "testdata", "old"), 0o755)
	os.WriteFile(filepath.Join(empty, "testdata", "old", manifest.FileName), fulfilManifest("").Encode(), 0o644)
	malformed := filepath.Join(t.TempDir(), "orders", manifest.FileName)
	os.MkdirAll(filepath.Dir(malformed), 0o755)
	os.WriteFile(malformed, []byte(`{"workflows": [{"key": "orders.fulfil@v1", "input": "{id:string", "output": "string"}]}`), 0o644)
	nowhere := filepath.Join(t.TempDir(), "typo", "stme.db")

	for _, c := range []struct {
		code int
		args []string
		want string
	}{
		{2, []string{"--store", db, "check", good, missing}, "stem check: " + missing + ": no such file or directory\n"},
		{2, []string{"--store", db, "check", empty}, "stem check: " + empty + ": no stem.manifest.json found (is it the root of the module, or a package that runs go generate with stemgen?)\n"},
		{2, []string{"--store", db, "check", filepath.Dir(filepath.Dir(malformed))}, "stem check: " + malformed + `: workflow "orders.fulfil@v1": input: shape "{id:string": at byte 10: want ',' or '}' after field id` + "\n"},
		{2, []string{"--store", db, "check", "--workflwo", "orders.fulfil", good}, "stem check: unknown flag --workflwo; did you mean --workflow?"},
		{2, []string{"--store", db, "check", "--workflow", "orders.fulfil,,x", good}, `stem check: --workflow "orders.fulfil,,x": an empty item`},
		{2, []string{"--store", db, "runs", "--verison", "1"}, "stem runs: unknown flag --verison; did you mean --version?"},
		{2, []string{"--store", db, "runs", "--version", "-1"}, `stem runs: --version "-1": want a whole number from 0 to 999999999`},
		{2, []string{"--store", db, "runs", "--version", "1,two"}, `stem runs: --version "two": want a whole number`},
		{1, []string{"--store", nowhere, "check", good}, "stem: no Stem store at " + nowhere},
	} {
		_, errOut := cliAt(t, c.code, c.args...)
		if !strings.HasPrefix(errOut, c.want) {
			t.Errorf("stem %v:\n%s\nwant it to begin %q", c.args, errOut, c.want)
		}
	}
	if _, err := os.Stat(filepath.Dir(nowhere)); !os.IsNotExist(err) {
		t.Errorf("a check with --store pointing nowhere made %s: %v", filepath.Dir(nowhere), err)
	}
	if fileSum(t, db) != before {
		t.Error("the rejected calls changed the store")
	}
}

// stem runs --version keeps the runs of those versions, shows each run's
// version, and its "more:" line keeps the filter; stem show shows it.
func TestRunsVersion(t *testing.T) {
	db := storeWith(t,
		storedRun{id: "r-0", workflow: "orders.fulfil", version: 0, input: orderInput},
		storedRun{id: "r-1a", workflow: "orders.fulfil", version: 1, input: orderInput},
		storedRun{id: "r-1b", workflow: "orders.fulfil", version: 1, input: orderInput},
		storedRun{id: "r-2", workflow: "orders.fulfil", version: 2, input: orderInput},
	)
	ids := func(out string) []string {
		var page struct{ Runs []struct{ ID string } }
		if err := json.Unmarshal([]byte(out), &page); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range page.Runs {
			got = append(got, r.ID)
		}
		return got
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--version", "1"}, "r-1a r-1b"},
		{[]string{"--version", "1,2"}, "r-1a r-1b r-2"},
		{[]string{"--version", "2", "--version", "0"}, "r-0 r-2"},
		{[]string{"--version", "v2"}, "r-2"},
		{[]string{"--version", "7"}, ""},
		{nil, "r-0 r-1a r-1b r-2"},
	} {
		out, _ := cliAt(t, 0, append([]string{"--store", db, "--json", "runs", "--sort", "id"}, c.args...)...)
		if got := strings.Join(ids(out), " "); got != c.want {
			t.Errorf("runs %v: %s, want %s", c.args, got, c.want)
		}
	}
	out, _ := cliAt(t, 0, "--store", db, "runs")
	for _, want := range []string{"ID    WORKFLOW       VERSION  STATUS", "r-0   orders.fulfil  -        waiting", "r-2   orders.fulfil  2        waiting"} {
		if !strings.Contains(out, want) {
			t.Errorf("runs lacks %q:\n%s", want, out)
		}
	}
	out, _ = cliAt(t, 0, "--store", db, "runs", "--version", "1", "--sort", "id", "--limit", "1")
	if !strings.Contains(out, "more: stem --store "+db+" runs --version 1 --sort id --limit 1 --after r-1a\n") {
		t.Errorf("runs --version page:\n%s", out)
	}
	if out, _ := cliAt(t, 0, "--store", db, "runs", "--version", "7"); out != "no runs match\n" {
		t.Errorf("runs of a version none has: %q", out)
	}
	if out, _ := cliAt(t, 0, "--store", db, "show", "r-2"); !strings.Contains(out, "workflow   orders.fulfil\nversion    2\nstatus     waiting\n") {
		t.Errorf("show:\n%s", out)
	}
	if out, _ := cliAt(t, 0, "--store", db, "show", "r-0"); !strings.Contains(out, "version    unknown (stored before versions were kept)\n") {
		t.Errorf("show of a run of unknown version:\n%s", out)
	}
	if out, _ := cliAt(t, 0, "--store", db, "--json", "show", "r-1a"); !strings.Contains(out, `"version": 1,`) {
		t.Errorf("show --json:\n%s", out)
	}
}

// fileSum is what a SQLite store's files hold, to tell whether a command
// changed it.
func fileSum(t *testing.T, db string) string {
	t.Helper()
	var b strings.Builder
	for _, suffix := range []string{"", "-wal"} {
		data, err := os.ReadFile(db + suffix)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		b.Write(data)
	}
	return b.String()
}

// A manifest an older stemgen wrote is read, and the output says what it
// could not check against it.
func TestCheckOldManifest(t *testing.T) {
	db := storeWith(t, storedRun{id: "order-1", workflow: "orders.fulfil", version: 1, input: orderInput, wait: &storage.Wait{Key: "x", Topic: "anything"}})
	root := t.TempDir()
	path := filepath.Join(root, manifest.FileName)
	os.WriteFile(path, []byte(`{"comment": "", "workflows": [{"key": "orders.fulfil@v1", "input": "{id:string}", "output": "string"}], "steps": []}`), 0o644)
	out, _ := cliAt(t, 0, "--store", db, "check", "--manifest-only", root)
	if want := "note: " + path + " was written by an older stemgen, before manifests recorded events and autoversion: waits on event topics and autoversion steps were not checked (go generate rewrites it)\n"; !strings.Contains(out, want) {
		t.Errorf("check with an old manifest:\n%s", out)
	}
}
