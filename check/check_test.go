package check_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stemflow/stem/check"
	"github.com/stemflow/stem/internal/manifest"
	"github.com/stemflow/stem/storage"
	"github.com/stemflow/stem/stores/memstore"
	"github.com/stemflow/stem/stores/sqlitestore"
)

// ordersManifest is the build the tests check against: orders.fulfil has
// v2 (v1 retired); charge@v1 and the topic orders.cancel are retired;
// pack is autoversion.
func ordersManifest() *manifest.Manifest {
	in := "{id:string,items:[]{qty:int,sku:string}}"
	return &manifest.Manifest{
		Workflows: []manifest.Workflow{
			{Key: "orders.fulfil@v1", Input: in, Output: "{tracking:string}", Retired: true},
			{Key: "orders.fulfil@v2", Input: in, Output: "{tracking:string}", Progress: "{stage:string}"},
			{Key: "orders.invoice@v1", Input: "string", Output: "string"},
		},
		Steps: []manifest.Step{
			{Key: "reserve@v1", Input: "(" + in + ")", Output: "{hold:string}"},
			{Key: "pack@v1", Input: "({qty:int,sku:string})", Output: "{label:string}", Autoversion: true},
			{Key: "charge@v1", Input: "({hold:string})", Output: "{id:string}", Retired: true},
			{Key: "charge@v2", Input: "({hold:string}, int)", Output: "{id:string}"},
			{Key: "notify@v1", Input: "(string)", Output: "()"},
		},
		Events: []manifest.Event{
			{Key: "orders.shipment-ready@v1", Payload: "{tracking:string}"},
			{Key: "orders.cancel@v1", Payload: "{why:string}", Retired: true},
		},
		Updates: []manifest.Update{
			{Key: "orders.approve@v1", Request: "{by:string}", Reply: "{total:int}"},
			{Key: "orders.hold@v1", Request: "{why:string}", Reply: "()", Retired: true},
		},
	}
}

// writeBuild writes manifests into a module-like tree under a temp dir and
// returns its root: orders/ holds m; testdata/, vendor/ and .git/ hold
// manifests that do not parse, which Load must skip.
func writeBuild(t *testing.T, m *manifest.Manifest) string {
	t.Helper()
	root := t.TempDir()
	write := func(rel string, data []byte) {
		t.Helper()
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("orders/"+check.ManifestFile, m.Encode())
	for _, skipped := range []string{"testdata", "vendor", ".git", "_old"} {
		write(skipped+"/x/"+check.ManifestFile, []byte("{not a manifest"))
	}
	return root
}

// runs puts runs into a store in chosen states through the Store API, as
// workers would have left them.
type runs struct {
	t   *testing.T
	ctx context.Context
	st  storage.Store
}

// put is one run to store: its record, the checkpoints its current
// execution holds, and what it does last.
type put struct {
	id, workflow string
	version      int
	input        string
	steps        []storage.Checkpoint
	// end is "wait" (on wait), "sleep", "running", "paused", "complete"
	// or "delayed" (queued, not yet due; no steps).
	end  string
	wait *storage.Wait
	// progress, when set, is published as the run parks.
	progress string
}

func (r *runs) put(p put) {
	r.t.Helper()
	nr := storage.NewRun{ID: p.id, Workflow: p.workflow, Input: []byte(p.input), Version: p.version}
	if p.end == "delayed" {
		at := time.Now().Add(time.Hour)
		nr.StartAt = &at
	}
	if _, err := r.st.CreateRuns(r.ctx, []storage.NewRun{nr}); err != nil {
		r.t.Fatalf("create %s: %v", p.id, err)
	}
	if p.end == "delayed" {
		return
	}
	claimed, err := r.st.Claim(r.ctx, storage.ClaimRequest{Owner: "test-worker", Workflows: []string{p.workflow}, Limit: 10, LeaseFor: time.Hour})
	if err != nil || len(claimed) != 1 || claimed[0].Lease.RunID != p.id {
		r.t.Fatalf("claim %s: %+v %v", p.id, claimed, err)
	}
	l := claimed[0].Lease
	for _, cp := range p.steps {
		if cp.Kind == "" {
			cp.Kind = storage.KindStep
		}
		if _, err := r.st.Checkpoint(r.ctx, storage.CheckpointRequest{Lease: l, LeaseFor: time.Hour, Checkpoint: cp}); err != nil {
			r.t.Fatalf("checkpoint %s %s: %v", p.id, cp.Key, err)
		}
	}
	later := time.Now().Add(time.Hour)
	var progress []byte
	if p.progress != "" {
		progress = []byte(p.progress)
	}
	var err2 error
	switch p.end {
	case "wait":
		_, err2 = r.st.Suspend(r.ctx, storage.SuspendRequest{Lease: l, LeaseFor: time.Hour, Wait: p.wait, Progress: progress})
	case "sleep":
		_, err2 = r.st.Suspend(r.ctx, storage.SuspendRequest{Lease: l, LeaseFor: time.Hour, ReadyAt: &later, Progress: progress})
	case "paused":
		if _, err2 = r.st.Suspend(r.ctx, storage.SuspendRequest{Lease: l, LeaseFor: time.Hour, ReadyAt: &later}); err2 == nil {
			err2 = r.st.Pause(r.ctx, p.id)
		}
	case "complete":
		err2 = r.st.Complete(r.ctx, storage.CompleteRequest{Lease: l, Status: storage.StatusComplete, Output: []byte(`{"tracking":"t"}`)})
	case "running":
	default:
		r.t.Fatalf("unknown end %q", p.end)
	}
	if err2 != nil {
		r.t.Fatalf("%s %s: %v", p.end, p.id, err2)
	}
}

func step(key, output string) storage.Checkpoint {
	return storage.Checkpoint{Key: key, Kind: storage.KindStep, Output: []byte(output)}
}

// sealedPayload is a payload as a codec seals it: not JSON.
const sealedPayload = "\x00stmk\x01\x02\x03\x04\x05\x06\x07\x08sealed-bytes"

const goodInput = `{"id":"o-1","items":[{"sku":"a","qty":1}]}`

// stores are the stores the check is tested on.
var stores = []struct {
	name string
	open func(t *testing.T) storage.Store
}{
	{"memstore", func(t *testing.T) storage.Store { return memstore.New(memstore.Options{}) }},
	{"sqlitestore", func(t *testing.T) storage.Store {
		st, err := sqlitestore.Open(filepath.Join(t.TempDir(), "stem.db"), sqlitestore.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}},
}

// Every kind of problem a manifest can reveal, on each store: each run in
// flight the build could not continue is reported with what and where,
// the rest are not, and nothing is written.
func TestStore(t *testing.T) {
	for _, s := range stores {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			st := s.open(t)
			t.Cleanup(func() { st.Close() })
			ctx := context.Background()
			r := &runs{t: t, ctx: ctx, st: st}
			ship := &storage.Wait{Key: "ship", Topic: "orders.shipment-ready"}
			r.put(put{id: "ok-1", workflow: "orders.fulfil", version: 2, input: goodInput, end: "wait", wait: ship, progress: `{"stage":"packing","extra":1}`,
				steps: []storage.Checkpoint{step("reserve@v1", `{"hold":"h","extra":1}`), step("pack@v1#0", `{"label":"a"}`), step("pack@v1#1", `null`), step("notify@v1", ``),
					{Key: "cool-off", Kind: storage.KindSleep, Output: []byte(`"2024-01-01T00:00:00Z"`)},
					{Key: "charge@v2", Kind: storage.KindStep, Error: &storage.ErrorInfo{Message: "declined"}}}})
			r.put(put{id: "ok-2", workflow: "orders.invoice", version: 1, input: `"o-1"`, end: "delayed"})
			r.put(put{id: "old-1", workflow: "orders.fulfil", version: 1, input: goodInput, end: "sleep"})
			r.put(put{id: "old-2", workflow: "orders.fulfil", version: 1, input: goodInput, end: "paused"})
			r.put(put{id: "old-done", workflow: "orders.fulfil", version: 1, input: goodInput, end: "complete"})
			r.put(put{id: "gone-1", workflow: "orders.fulfil", version: 3, input: goodInput, end: "running"})
			r.put(put{id: "nowf-1", workflow: "billing.run", version: 1, input: `{}`, end: "sleep"})
			r.put(put{id: "unv-1", workflow: "orders.fulfil", version: 0, input: goodInput, end: "sleep",
				steps: []storage.Checkpoint{step("charge@v1", `{"id":"p"}`)}})
			r.put(put{id: "step-1", workflow: "orders.fulfil", version: 2, input: goodInput, end: "sleep",
				steps: []storage.Checkpoint{step("refund@v1", `{}`)}})
			r.put(put{id: "auto-1", workflow: "orders.fulfil", version: 2, input: goodInput, end: "sleep",
				steps: []storage.Checkpoint{step("reserve@v1#0", `{}`), step("pack@v1", `{}`)}})
			r.put(put{id: "wait-1", workflow: "orders.fulfil", version: 2, input: goodInput, end: "wait",
				wait: &storage.Wait{Key: "cancel", Topic: "orders.cancel", Also: []storage.WaitCase{
					{Key: "ship", Topic: "orders.shipment-ready"},
					{Key: "other", Topic: "orders.unknown"},
					{Key: "child", Topic: "stem.child/c-1", Kind: storage.KindChild},
					{Key: "approve#0", Topic: storage.UpdateTopic("orders.approve"), Kind: storage.KindUpdate},
					{Key: "hold#0", Topic: storage.UpdateTopic("orders.hold"), Kind: storage.KindUpdate},
					{Key: "gone#0", Topic: storage.UpdateTopic("orders.gone"), Kind: storage.KindUpdate},
				}}})
			r.put(put{id: "shape-1", workflow: "orders.fulfil", version: 2, input: `{"id":"o","items":[{"sku":"a","qty":1},{"qty":"two"}]}`, end: "sleep", progress: `{"stage":3}`,
				steps: []storage.Checkpoint{step("reserve@v1", `{"hold":5}`), step("notify@v1", `"sent"`)}})
			r.put(put{id: "sealed-1", workflow: "orders.fulfil", version: 2, input: sealedPayload, end: "sleep",
				steps: []storage.Checkpoint{step("reserve@v1", sealedPayload)}})

			build, err := check.Load(writeBuild(t, ordersManifest()))
			if err != nil {
				t.Fatal(err)
			}
			before := dump(t, ctx, st)
			rep, err := check.Store(ctx, st, build, check.Options{PageSize: 3})
			if err != nil {
				t.Fatal(err)
			}
			if after := dump(t, ctx, st); !reflect.DeepEqual(before, after) {
				t.Errorf("the check changed the store:\nbefore %v\nafter  %v", before, after)
			}

			type want struct {
				run  string
				kind check.Kind
				key  string
				path string
				has  string
			}
			wants := []want{
				{"auto-1", check.KindAutoversion, "reserve@v1#0", "", "holds iteration 0 of step reserve@v1, which the build's step is not autoversion"},
				{"auto-1", check.KindAutoversion, "pack@v1", "", "the build's step is autoversion"},
				{"gone-1", check.KindVersion, "orders.fulfil@v3", "", "the build does not have orders.fulfil@v3 (it has v2)"},
				{"nowf-1", check.KindWorkflow, "billing.run", "", "the build has no workflow billing.run"},
				{"old-1", check.KindVersion, "orders.fulfil@v1", "", "orders.fulfil@v1 is retired in the build"},
				{"old-2", check.KindVersion, "orders.fulfil@v1", "", "retired"},
				{"shape-1", check.KindShape, "orders.fulfil@v2", "items[1].qty", `the run's input does not decode into the build's input type: items[1].qty: want int, have string "two"`},
				{"shape-1", check.KindShape, "orders.fulfil@v2", "stage", "the progress the run published does not decode into the build's progress type: stage: want string, have number 3"},
				{"shape-1", check.KindShape, "reserve@v1", "hold", "hold: want string, have number 5"},
				{"shape-1", check.KindShape, "notify@v1", "", `want (), have string "sent"`},
				{"step-1", check.KindStep, "refund@v1", "", "holds a checkpoint of step refund@v1, which the build does not have (not in "},
				{"unv-1", check.KindStep, "charge@v1", "", "step charge@v1, which the build retired"},
				{"wait-1", check.KindEvent, "orders.cancel", "", "waits (as cancel) on event topic orders.cancel, which the build retired"},
				{"wait-1", check.KindEvent, "orders.unknown", "", "which no //stem:event type of the build declares"},
				{"wait-1", check.KindUpdate, "orders.hold", "", "waits (as hold#0) for update orders.hold, which the build retired"},
				{"wait-1", check.KindUpdate, "orders.gone", "", "waits (as gone#0) for update orders.gone, which no //stem:update type of the build declares"},
			}
			if len(rep.Problems) != len(wants) || len(wants) != 16 {
				t.Errorf("%d problems, want %d:\n%s", len(rep.Problems), len(wants), problems(rep))
			}
			for i, w := range wants {
				if i >= len(rep.Problems) {
					break
				}
				p := rep.Problems[i]
				if p.RunID != w.run || p.Kind != w.kind || p.Key != w.key || p.Path != w.path || !strings.Contains(p.Reason, w.has) || p.Fix == "" {
					t.Errorf("problem %d: %+v\nwant run %s kind %s key %s path %q with %q", i, p, w.run, w.kind, w.key, w.path, w.has)
				}
			}
			if rep.Checked != 12 || rep.Stranded != 9 || rep.OK() {
				t.Errorf("checked %d, stranded %d, want 12 and 9", rep.Checked, rep.Stranded)
			}
			if rep.Unversioned != 1 || rep.Sealed != 2 || rep.SealedRuns != 1 {
				t.Errorf("unversioned %d, sealed %d in %d runs; want 1, 2 in 1", rep.Unversioned, rep.Sealed, rep.SealedRuns)
			}
			for _, p := range rep.Problems {
				switch p.RunID {
				case "unv-1":
					if p.Version != 0 || p.CheckedAs != 2 || !strings.Contains(p.String(), "orders.fulfil@v? (checked as v2)") {
						t.Errorf("unversioned run's problem: %+v %s", p, p)
					}
				case "old-2":
					if p.Status != storage.StatusPaused || p.String() != "old-2 (orders.fulfil@v1, paused): "+p.Reason {
						t.Errorf("paused run's problem: %+v %s", p, p)
					}
				}
			}

			// The build registers v1 again: its runs can continue.
			m := ordersManifest()
			m.Workflows[0].Retired = false
			build, err = check.Load(writeBuild(t, m))
			if err != nil {
				t.Fatal(err)
			}
			rep, err = check.Store(ctx, st, build, check.Options{Workflows: []string{"orders.fulfil"}})
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range rep.Problems {
				if strings.HasPrefix(p.RunID, "old-") || p.Workflow != "orders.fulfil" {
					t.Errorf("with v1 registered: %s", p)
				}
			}
			if rep.Checked != 10 {
				t.Errorf("checked %d runs of orders.fulfil, want 10", rep.Checked)
			}
		})
	}
}

func problems(rep check.Report) string {
	var b strings.Builder
	for _, p := range rep.Problems {
		b.WriteString("  " + string(p.Kind) + " " + p.String() + "\n")
	}
	return b.String()
}

// dump is everything a check could change: each run with its checkpoints.
func dump(t *testing.T, ctx context.Context, st storage.Store) map[string]any {
	t.Helper()
	out := map[string]any{}
	page, err := st.ListRuns(ctx, storage.ListRunsQuery{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range page.Runs {
		rp, err := st.LoadReplay(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		out[r.ID] = []any{r, rp}
	}
	return out
}

// Load finds manifests in directories (skipping testdata, vendor and
// hidden ones) and files, once each, and says what and where for a
// missing path, a directory without one and a manifest that does not
// parse.
func TestLoad(t *testing.T) {
	root := writeBuild(t, ordersManifest())
	file := filepath.Join(root, "orders", check.ManifestFile)
	b, err := check.Load(root, file, filepath.Join(root, "orders"), root+"/...")
	if err != nil {
		t.Fatal(err)
	}
	if got := b.Manifests(); len(got) != 1 || got[0] != file {
		t.Errorf("manifests %v, want [%s]", got, file)
	}
	if got := b.Workflows(); !slices.Equal(got, []string{"orders.fulfil", "orders.invoice"}) {
		t.Errorf("workflows %v", got)
	}

	empty := t.TempDir()
	os.MkdirAll(filepath.Join(empty, "testdata"), 0o755)
	os.WriteFile(filepath.Join(empty, "testdata", check.ManifestFile), ordersManifest().Encode(), 0o644)
	if _, err := check.Load(empty); !errors.Is(err, check.ErrNoManifest) || !strings.Contains(err.Error(), empty) {
		t.Errorf("directory without a manifest: %v", err)
	}
	missing := filepath.Join(root, "nope")
	if _, err := check.Load(missing); !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), missing) {
		t.Errorf("missing path: %v", err)
	}
	if _, err := check.Load(); err == nil {
		t.Error("no path: no error")
	}

	bad := func(name, content, want string) {
		t.Helper()
		p := filepath.Join(t.TempDir(), name)
		os.WriteFile(p, []byte(content), 0o644)
		_, err := check.Load(p)
		if err == nil || !strings.Contains(err.Error(), p+": ") || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error naming the file and %q", content, err, want)
		}
	}
	bad("trunc.json", `{"workflows": [`, "not a manifest stemgen wrote")
	bad("newer.json", `{"workflows": [], "steps": [], "events": [], "owners": []}`, `unknown field "owners"`)
	bad("key.json", `{"workflows": [{"key": "orders.fulfil", "input": "int", "output": "int"}]}`, `workflow "orders.fulfil": key: not of the form name@vN`)
	bad("shape.json", `{"steps": [{"key": "a@v1", "input": "()", "output": "{a:int"}]}`, `step "a@v1": output: shape "{a:int"`)
	bad("event.json", `{"events": [{"key": "t@v1", "payload": "[x]int"}]}`, `event "t@v1": payload: shape "[x]int": at byte 1: want an array length`)
	bad("twice.json", `{"steps": [{"key": "a@v1", "input": "()", "output": "()"}, {"key": "a@v1", "input": "()", "output": "()"}]}`, `step "a@v1": key: listed twice`)
}

// A workflow whose versions live in two packages' manifests (a package
// kept for the old version) is one workflow with both versions.
func TestVersionsAcrossPackages(t *testing.T) {
	st := memstore.New(memstore.Options{})
	defer st.Close()
	ctx := context.Background()
	r := &runs{t: t, ctx: ctx, st: st}
	r.put(put{id: "a", workflow: "orders.fulfil", version: 1, input: goodInput, end: "sleep", steps: []storage.Checkpoint{step("charge@v1", `{"id":"x"}`)}})

	v2 := ordersManifest()
	old := &manifest.Manifest{
		Workflows: []manifest.Workflow{{Key: "orders.fulfil@v1", Input: "{id:string}", Output: "{tracking:string}"}},
		Steps:     []manifest.Step{{Key: "charge@v1", Input: "({hold:string})", Output: "{id:string}"}},
	}
	build := &check.Build{}
	if err := build.Add("orders/"+check.ManifestFile, v2.Encode()); err != nil {
		t.Fatal(err)
	}
	if err := build.Add("ordersv1/"+check.ManifestFile, old.Encode()); err != nil {
		t.Fatal(err)
	}
	rep, err := check.Store(ctx, st, build, check.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() || rep.Checked != 1 {
		t.Errorf("run of v1, kept in its own package: %+v", rep)
	}
}

// A check of an empty build is refused; one of an empty store finds
// nothing.
func TestEmpty(t *testing.T) {
	st := memstore.New(memstore.Options{})
	defer st.Close()
	if _, err := check.Store(context.Background(), st, &check.Build{}, check.Options{}); err == nil {
		t.Error("empty build: no error")
	}
	build, err := check.Load(writeBuild(t, ordersManifest()))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := check.Store(context.Background(), st, build, check.Options{})
	if err != nil || !rep.OK() || rep.Checked != 0 {
		t.Errorf("empty store: %+v %v", rep, err)
	}
}

// A manifest an older stemgen wrote (format 1) records no events and no
// autoversion: waits and autoversion are not checked against it, and the
// build says which manifests those are. Its keys and shapes still are.
func TestOldFormat(t *testing.T) {
	st := memstore.New(memstore.Options{})
	defer st.Close()
	ctx := context.Background()
	r := &runs{t: t, ctx: ctx, st: st}
	r.put(put{id: "a", workflow: "orders.fulfil", version: 1, input: goodInput, end: "wait",
		wait:  &storage.Wait{Key: "ship", Topic: "orders.shipment-ready"},
		steps: []storage.Checkpoint{step("pack@v1#0", `{"label":"x"}`), step("gone@v1", `{}`), step("reserve@v1", `{"hold":1}`)}})
	old := `{
  "comment": "an older stemgen's",
  "workflows": [{"key": "orders.fulfil@v1", "input": "{id:string}", "output": "string"}],
  "steps": [
    {"key": "pack@v1", "input": "(int)", "output": "{label:string}"},
    {"key": "reserve@v1", "input": "(int)", "output": "{hold:string}"}
  ]
}`
	build := &check.Build{}
	if err := build.Add("orders/"+check.ManifestFile, []byte(old)); err != nil {
		t.Fatal(err)
	}
	if got := build.OldManifests(); len(got) != 1 || got[0] != "orders/"+check.ManifestFile {
		t.Errorf("old manifests %v", got)
	}
	rep, err := check.Store(ctx, st, build, check.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Problems) != 2 || rep.Problems[0].Key != "gone@v1" || rep.Problems[1].Path != "hold" {
		t.Errorf("against a format 1 manifest:\n%s", problems(rep))
	}
	if err := build.Add("new/"+check.ManifestFile, []byte(fmt.Sprintf(`{"format": %d, "workflows": []}`, manifest.Format+1))); !errors.Is(err, manifest.ErrNewerFormat) || !strings.Contains(err.Error(), "new/"+check.ManifestFile) {
		t.Errorf("a manifest of a newer format: %v", err)
	}
}
