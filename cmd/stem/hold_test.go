package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stemflow/stem/storage"
	"github.com/stemflow/stem/stores/sqlitestore"
)

// heldRun is a run as a worker left it in the store: parked after its
// checkpoints, on its wait or asleep, and held when hold is set; or, when
// queued, only created, after every other.
type heldRun struct {
	id     string
	steps  []storage.Checkpoint
	wait   *storage.Wait
	hold   *storage.Hold
	queued bool
}

// holdSince is when the test's holds were made.
var holdSince = time.Date(2026, 3, 14, 9, 26, 53, 0, time.UTC)

// auditHold is the hold of a run whose new build calls a step inserted
// before the event the run took, as an engine records it.
func auditHold() *storage.Hold {
	return &storage.Hold{
		Reason:   "the code calls audit@v1, which the run did not record, where the run recorded approval",
		Recorded: "approval", Called: "audit@v1", Position: 1, Execution: 1, Since: holdSince,
	}
}

// storeWithHeld makes a SQLite store holding runs of orders.fulfil, and
// returns its path, the store closed. A held run is held the way an engine
// holds one: claimed (again, for one parked on a wait: its timeout is
// due), then handed back with the hold.
func storeWithHeld(t *testing.T, runs ...heldRun) string {
	t.Helper()
	t.Setenv("STEM_STORE", "")
	t.Setenv("STEM_CODEC_KEY", "")
	path := filepath.Join(t.TempDir(), "stem.db")
	st, err := sqlitestore.Open(path, sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	claim := func(id string) storage.Lease {
		t.Helper()
		claimed, err := st.Claim(ctx, storage.ClaimRequest{Owner: "worker", Workflows: []string{"orders.fulfil"}, Limit: 1, LeaseFor: time.Hour})
		if err != nil || len(claimed) != 1 || claimed[0].Lease.RunID != id {
			t.Fatalf("claim %s: %+v %v", id, claimed, err)
		}
		return claimed[0].Lease
	}
	later := time.Now().Add(time.Hour)
	var queued []storage.NewRun
	for _, r := range runs {
		if r.queued {
			queued = append(queued, storage.NewRun{ID: r.id, Workflow: "orders.fulfil", Version: 1, Input: []byte(orderInput)})
			continue
		}
		if _, err := st.CreateRuns(ctx, []storage.NewRun{{ID: r.id, Workflow: "orders.fulfil", Version: 1, Input: []byte(orderInput)}}); err != nil {
			t.Fatal(err)
		}
		l := claim(r.id)
		for _, cp := range r.steps {
			if _, err := st.Checkpoint(ctx, storage.CheckpointRequest{Lease: l, LeaseFor: time.Hour, Checkpoint: cp}); err != nil {
				t.Fatal(err)
			}
		}
		if r.wait != nil {
			req := storage.SuspendRequest{Lease: l, LeaseFor: time.Hour, Wait: r.wait, ReadyAt: &later}
			if r.hold != nil {
				due := time.Now().Add(-time.Second)
				req.ReadyAt = &due
			}
			if _, err := st.Suspend(ctx, req); err != nil {
				t.Fatal(err)
			}
			if r.hold == nil {
				continue
			}
			l = claim(r.id)
		}
		if _, err := st.Suspend(ctx, storage.SuspendRequest{Lease: l, LeaseFor: time.Hour, ReadyAt: &later, Hold: r.hold}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.CreateRuns(ctx, queued); len(queued) > 0 && err != nil {
		t.Fatal(err)
	}
	return path
}

// stem show of a held run says so in a block of its own: since when, why,
// at which call, the two keys, and what to do, with the commands spelled
// for the same store; --json has the hold as the runtime records it.
func TestShowHeld(t *testing.T) {
	db := storeWithHeld(t,
		heldRun{id: "order-7", steps: []storage.Checkpoint{stepCP("ask@v1", `"asked"`), {Key: "approval", Kind: storage.KindEvent, Output: []byte(`true`)}}, hold: auditHold()},
		heldRun{id: "order-8", steps: []storage.Checkpoint{stepCP("ask@v1", `"asked"`)}, wait: &storage.Wait{Key: "approval", Topic: "approval", Kind: storage.KindEvent},
			hold: &storage.Hold{Reason: "the code calls \x1b[31maudit@v1</script>\nbad", Called: "audit@v1", Position: 1, Execution: 1, Since: holdSince}},
		heldRun{id: "order-9", steps: []storage.Checkpoint{stepCP("ask@v1", `"asked"`)}},
	)
	out, _ := cliAt(t, 0, "--store", db, "show", "order-7")
	for _, want := range []string{
		"status     waiting (held)\n",
		"\nHELD since 2026-03-14T09:26:53.000Z: the workflow's code no longer makes the calls this run recorded\n" +
			"  reason    the code calls audit@v1, which the run did not record, where the run recorded approval\n" +
			"  at        call 2 of execution 1\n" +
			"  recorded  approval\n" +
			"  called    audit@v1\n" +
			"  next try  ",
		"(every Config.HoldRetry, 30s by default)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("show of a held run lacks %q:\n%s", want, out)
		}
	}
	// The commands, aligned, then what each does.
	for _, act := range [][2]string{
		{"terminate order-7", "ends the run"},
		{"restart order-7", "runs it again from the top, on this build"},
		{"restart order-7 --from approval", "runs it again from call 2, the calls before it kept"},
	} {
		line := regexp.MustCompile(`\n {14}` + regexp.QuoteMeta("stem --store "+db+" "+act[0]) + ` {2,}` + regexp.QuoteMeta(act[1]) + `\n`)
		if !line.MatchString(out) {
			t.Errorf("show of a held run lacks the line of stem %s:\n%s", act[0], out)
		}
	}
	if strings.Contains(out, "detail") || strings.Index(out, "HELD") > strings.Index(out, "\nexecutions\n") {
		t.Errorf("show of a held run: the hold comes before the executions, in place of the detail:\n%s", out)
	}

	// A hold where the history ends, on a run that still waits: said in
	// words, the reason escaped and on one line, and no restart from a
	// call the run did not record.
	out, _ = cliAt(t, 0, "--store", db, "show", "order-8")
	for _, want := range []string{
		"  reason    the code calls \\x1b[31maudit@v1</script>\\nbad\n",
		"  recorded  nothing: the run's history ends there\n  called    audit@v1\n",
		"  waits for approval (an event sent to it is kept)\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("show of a held waiting run lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "--from") {
		t.Errorf("show suggests a restart from a call the run did not record:\n%s", out)
	}
	wantNoHidden(t, "show of a held run", out, true)

	// A run that is not held shows none of it.
	out, _ = cliAt(t, 0, "--store", db, "show", "order-9")
	if strings.Contains(out, "held") || strings.Contains(out, "HELD") || !strings.Contains(out, "status     waiting\n") {
		t.Errorf("show of a run not held:\n%s", out)
	}

	out, _ = cliAt(t, 0, "--store", db, "--json", "show", "order-7")
	var doc struct {
		Run struct {
			Status string
			Hold   map[string]any
		}
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"reason": auditHold().Reason, "recorded": "approval", "called": "audit@v1", "position": 1.0, "execution": 1.0, "since": "2026-03-14T09:26:53Z"}
	if doc.Run.Status != "waiting" || fmt.Sprint(doc.Run.Hold) != fmt.Sprint(want) {
		t.Errorf("show --json: status %q, hold %v; want waiting, %v\n%s", doc.Run.Status, doc.Run.Hold, want, out)
	}
	checkSnakeCase(t, "show --json of a held run", jsonOf(t, out))
	if out, _ := cliAt(t, 0, "--store", db, "--json", "show", "order-9"); strings.Contains(out, `"hold"`) {
		t.Errorf("show --json of a run not held has a hold:\n%s", out)
	}
}

func jsonOf(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// stem runs marks held runs and gives the reason as their detail; --held
// lists only them, reading past pages of runs that are not held, and its
// "more:" line keeps --held.
func TestRunsHeld(t *testing.T) {
	runs := []heldRun{
		{id: "run-003", steps: []storage.Checkpoint{stepCP("ask@v1", `"asked"`), {Key: "approval", Kind: storage.KindEvent, Output: []byte(`true`)}}, hold: auditHold()},
		{id: "run-207", hold: &storage.Hold{Reason: "the code returns without calling ask@v1, which the run recorded", Recorded: "ask@v1", Execution: 1, Since: holdSince},
			steps: []storage.Checkpoint{stepCP("ask@v1", `"asked"`)}},
		{id: "run-100", steps: []storage.Checkpoint{stepCP("ask@v1", `"asked"`)}},
	}
	// More runs not held than one page the command reads holds.
	for i := range 210 {
		if id := fmt.Sprintf("run-%03d", i); id != "run-003" && id != "run-207" && id != "run-100" {
			runs = append(runs, heldRun{id: id, queued: true})
		}
	}
	db := storeWithHeld(t, runs...)

	out, _ := cliAt(t, 0, "--store", db, "runs", "--sort", "id", "--limit", "210")
	for _, want := range []string{
		"ID       WORKFLOW       VERSION  STATUS          EXEC  CREATED                   UPDATED                   DETAIL\n",
		"run-003  orders.fulfil  1        waiting (held)  1     ",
		"held: the code calls audit@v1, which the run did not record, where the run recorded approval\n",
		"run-100  orders.fulfil  1        waiting         1     ",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("runs lacks %q:\n%s", want, out)
		}
	}

	ids := func(out string) string {
		var page struct {
			Runs []struct {
				ID   string
				Hold *struct{ Called string }
			}
			Next string
		}
		if err := json.Unmarshal([]byte(out), &page); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range page.Runs {
			if r.Hold == nil {
				t.Errorf("runs --held --json lists %s without its hold", r.ID)
			}
			got = append(got, r.ID)
		}
		return strings.Join(got, " ") + " next=" + page.Next
	}
	if got, _ := cliAt(t, 0, "--store", db, "--json", "runs", "--sort", "id", "--held"); ids(got) != "run-003 run-207 next=" {
		t.Errorf("runs --held --json: %s", got)
	}
	out, _ = cliAt(t, 0, "--store", db, "runs", "--sort", "id", "--held")
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 3 || !strings.HasPrefix(lines[1], "run-003 ") || !strings.HasPrefix(lines[2], "run-207 ") ||
		!strings.Contains(lines[2], "waiting (held)") || !strings.Contains(lines[2], "held: the code returns without calling ask@v1") {
		t.Errorf("runs --held:\n%s", out)
	}

	// A page at a time: the cursor is the last held run shown.
	out, _ = cliAt(t, 0, "--store", db, "runs", "--sort", "id", "--held", "--limit", "1")
	if !strings.HasPrefix(strings.Split(out, "\n")[1], "run-003 ") || !strings.HasSuffix(out, "\nmore: stem --store "+db+" runs --held --sort id --limit 1 --after run-003\n") {
		t.Errorf("runs --held --limit 1:\n%s", out)
	}
	out, _ = cliAt(t, 0, "--store", db, "runs", "--sort", "id", "--held", "--limit", "1", "--after", "run-003")
	if !strings.HasPrefix(strings.Split(out, "\n")[1], "run-207 ") || !strings.HasSuffix(out, "\nmore: stem --store "+db+" runs --held --sort id --limit 1 --after run-207\n") {
		t.Errorf("runs --held --sort id --limit 1 --after run-003:\n%s", out)
	}
	if out, _ := cliAt(t, 0, "--store", db, "runs", "--sort", "id", "--held", "--limit", "1", "--after", "run-207"); out != "no runs match\n" {
		t.Errorf("runs --held past the last: %q", out)
	}
	if got, _ := cliAt(t, 0, "--store", db, "--json", "runs", "--sort", "id", "--held", "--limit", "2"); ids(got) != "run-003 run-207 next=run-207" {
		t.Errorf("runs --held --limit 2 --json: %s", got)
	}

	// Filters combine with it.
	if out, _ := cliAt(t, 0, "--store", db, "runs", "--sort", "id", "--held", "--status", "queued"); out != "no runs match\n" {
		t.Errorf("runs --held --status queued: %q", out)
	}
	db = storeWithHeld(t, heldRun{id: "order-9", steps: []storage.Checkpoint{stepCP("ask@v1", `"asked"`)}})
	if out, _ := cliAt(t, 0, "--store", db, "runs", "--sort", "id", "--held"); out != "no runs are held\n" {
		t.Errorf("runs --held with none held: %q", out)
	}

	// A mistyped flag is refused before the store is opened, with the
	// flag meant.
	_, errOut := cliAt(t, 2, "--store", db, "runs", "--hled")
	if !strings.Contains(errOut, "stem runs: unknown flag --hled; did you mean --held?") {
		t.Errorf("runs --hled: %s", errOut)
	}
}
