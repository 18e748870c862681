package main

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/schedule"
	"github.com/stemflow/stem/storage"
	"github.com/stemflow/stem/stores/storeurl"
)

// A JSON argument that does not parse, or a @FILE that cannot be read, is
// input the command cannot use, not a wrong call: exit 2 with the error
// and a one-line pointer to the command's help, not the whole usage,
// which would bury the error. Nothing is opened.
func TestArgErrorsPointToHelp(t *testing.T) {
	t.Setenv("STEM_STORE", "")
	t.Setenv("STEM_CODEC_KEY", "")
	dir := t.TempDir()
	missing := filepath.Join(dir, "none.db")
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte("{\"name\":\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	nope := filepath.Join(dir, "nope.json")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"start", "greet", "{"}, "stem start: the input is not valid JSON: {\n(see \"stem start -h\")\n"},
		{[]string{"start", "greet", "@" + nope}, "stem start: cannot read the input from " + nope + ": no such file or directory\n(see \"stem start -h\")\n"},
		{[]string{"send", "r", "t", "@" + bad}, "stem send: the payload read from " + bad + " is not valid JSON: {\"name\":\n(see \"stem send -h\")\n"},
		{[]string{"emit", "t", "nope"}, "stem emit: the payload is not valid JSON: nope\n(see \"stem emit -h\")\n"},
		{[]string{"schedule", "create", "d", "greet", "@daily", "{"}, "stem schedule create: the input is not valid JSON: {\n(see \"stem schedule create -h\")\n"},
	} {
		_, errOut := cliAt(t, 2, append([]string{"--store", missing}, c.args...)...)
		if errOut != c.want {
			t.Errorf("stem %v:\n%s\nwant\n%s", c.args, errOut, c.want)
		}
	}
	if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused call touched the store: %v", err)
	}
	// A wrong call still prints the usage.
	if _, errOut := cliAt(t, 2, "--store", missing, "start", "greet"); !strings.Contains(errOut, "usage: stem start ") {
		t.Fatalf("wrong argument count without the usage:\n%s", errOut)
	}
}

// A JSON argument read from a file or standard input is stored without
// the whitespace around it (an editor's trailing newline): the value is
// the same, and the input a schedule shows and stores is what was typed.
func TestJSONArgumentTrimmed(t *testing.T) {
	f := newOpsFixture(t)
	in := filepath.Join(t.TempDir(), "in.json")
	if err := os.WriteFile(in, []byte("{\"name\":\"ada\"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, _ := f.cli(0, "schedule", "create", "nightly", "greet", "0 2 * * *", "@"+in)
	if !strings.Contains(out, "input      {\"name\":\"ada\"}\n") {
		t.Fatalf("create shows the input with the file's newline:\n%s", out)
	}
	f.cliIn("  \"bob\"\r\n\n", 0, "schedule", "create", "other", "approve", "0 2 * * *", "-")
	for id, want := range map[string]string{"nightly": `{"name":"ada"}`, "other": `"bob"`} {
		got, err := schedule.Get(f.ctx, f.e, id)
		if err != nil || string(got.Input) != want {
			t.Fatalf("%s stored input %q, %v; want %q", id, got.Input, err, want)
		}
	}
}

// A store that is not there is refused with the command that creates it,
// stem init, naming the store as it was given; so is one at an older
// schema, which stem init migrates.
func TestMissingStorePointsToInit(t *testing.T) {
	quiet(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "stme.db")
	if _, errOut := cliAt(t, 1, "--store", path, "runs"); errOut != "stem: no Stem store at "+path+`: the file does not exist; run "stem init --store `+path+`" first to create one`+"\n" {
		t.Fatalf("runs on a missing file: %q", errOut)
	}
	empty := filepath.Join(dir, "empty db")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, errOut := cliAt(t, 1, "--store", empty, "pause", "x"); errOut != "stem: no Stem store at "+empty+`: the file is empty; run "stem init --store '`+empty+`'" first to create one`+"\n" {
		t.Fatalf("pause on an empty file: %q", errOut)
	}
	t.Chdir(dir)
	if _, errOut := cliAt(t, 1, "runs"); errOut != `stem: no Stem store at stem.db: the file does not exist; run "stem init" first to create one (name your workers' store with --store or $STEM_STORE)`+"\n" {
		t.Fatalf("runs on the default store: %q", errOut)
	}
	if got := files(t, dir); len(got) != 1 {
		t.Fatalf("refused commands created files: %v", got)
	}

	for env, param := range map[string]string{"STEM_TEST_POSTGRES_URL": "stem_schema", "STEM_TEST_REDIS_URL": "stem_prefix"} {
		base := os.Getenv(env)
		if base == "" {
			continue
		}
		sep := "?"
		if strings.Contains(base, "?") {
			sep = "&"
		}
		u := base + sep + param + "=stem_cli_nostore_" + strconv.FormatInt(time.Now().UnixNano(), 36)
		_, errOut := cliAt(t, 1, "--store", u, "runs")
		if !strings.Contains(errOut, `; run "stem init --store `) || !strings.HasSuffix(errOut, `" first to create one`+"\n") || strings.Contains(errOut, "worker's Open") {
			t.Errorf("runs on %s: %q, want it to point to stem init", u, errOut)
		}
	}
}

// With --json, an action prints a JSON object that says what it did in a
// word (action) and the run or schedule as it stands after, not only a
// sentence; without --json it prints the sentence.
func TestActionsJSON(t *testing.T) {
	f := newOpsFixture(t)
	type done struct {
		RunID   string `json:"run_id"`
		Action  string `json:"action"`
		Message string `json:"message"`
		Run     *struct {
			ID        string `json:"id"`
			Workflow  string `json:"workflow"`
			Status    string `json:"status"`
			Execution int    `json:"execution"`
		} `json:"run"`
		ScheduleID string `json:"schedule_id"`
		Schedule   *struct {
			ID     string `json:"id"`
			Paused bool   `json:"paused"`
		} `json:"schedule"`
	}
	act := func(action string, args ...string) done {
		t.Helper()
		out, _ := f.cli(0, append([]string{"--json"}, args...)...)
		var d done
		if err := json.Unmarshal([]byte(out), &d); err != nil || d.Action != action || d.Message == "" {
			t.Fatalf("stem --json %v: %s (%v), want action %q and a message", args, out, err, action)
		}
		return d
	}
	wantRun := func(d done, id, status string) {
		t.Helper()
		if d.RunID != id || d.Run == nil || d.Run.ID != id || d.Run.Workflow != "approve" || status != "" && d.Run.Status != status {
			t.Fatalf("%+v: want run %s (%s)", d, id, status)
		}
	}

	wantRun(act("started", "start", "approve", `"ada"`, "--id", "a-1"), "a-1", "")
	wantRun(act("exists", "start", "approve", `"ada"`, "--id", "a-1"), "a-1", "")
	waitStatus(t, f.e, "a-1", runtime.StatusWaiting)
	wantRun(act("paused", "pause", "a-1"), "a-1", "paused")
	wantRun(act("resumed", "resume", "a-1"), "a-1", "")
	wantRun(act("sent", "send", "a-1", "approval", "true"), "a-1", "")
	waitStatus(t, f.e, "a-1", runtime.StatusComplete)

	f.cli(0, "start", "approve", `"bob"`, "--id", "a-2")
	waitStatus(t, f.e, "a-2", runtime.StatusWaiting)
	wantRun(act("terminated", "terminate", "a-2"), "a-2", "terminated")
	if d := act("restarted", "restart", "a-2"); d.Run == nil || d.Run.Execution != 2 {
		t.Fatalf("restart: %+v, want execution 2", d)
	}
	waitStatus(t, f.e, "a-2", runtime.StatusWaiting)
	wantRun(act("cancel_requested", "cancel", "a-2"), "a-2", "")

	// Without --json, the sentence.
	f.cli(0, "start", "approve", `"cy"`, "--id", "a-3")
	waitStatus(t, f.e, "a-3", runtime.StatusWaiting)
	if out, _ := f.cli(0, "terminate", "a-3"); out != "a-3: terminated\n" {
		t.Fatalf("terminate: %q", out)
	}

	f.cli(0, "schedule", "create", "nightly", "greet", "0 2 * * *", `{"name":"ada"}`)
	if d := act("paused", "schedule", "pause", "nightly"); d.ScheduleID != "nightly" || d.Schedule == nil || !d.Schedule.Paused {
		t.Fatalf("schedule pause: %+v", d)
	}
	act("already_paused", "schedule", "pause", "nightly")
	if d := act("resumed", "schedule", "resume", "nightly"); d.Schedule == nil || d.Schedule.Paused {
		t.Fatalf("schedule resume: %+v", d)
	}
	act("not_paused", "schedule", "resume", "nightly")
	if d := act("triggered", "schedule", "trigger", "nightly"); !strings.HasPrefix(d.RunID, "nightly@manual-") {
		t.Fatalf("schedule trigger: %+v", d)
	}
	if d := act("deleted", "schedule", "delete", "nightly"); d.Schedule != nil {
		t.Fatalf("schedule delete: %+v", d)
	}
}

// stem show numbers a run's steps 1, 2, 3... in each execution, whatever
// the store's Seq (SQLite's runs share one sequence; Redis counts each
// run's from 1), in text and JSON.
func TestShowNumbersStepsPerRun(t *testing.T) {
	path := storeWith(t,
		storedRun{id: "r-1", workflow: "greet", input: `{}`, steps: []storage.Checkpoint{stepCP("a@v1", `1`), stepCP("b@v1", `2`)}},
		storedRun{id: "r-2", workflow: "greet", input: `{}`, steps: []storage.Checkpoint{stepCP("c@v1", `1`), stepCP("d@v1", `2`), stepCP("e@v1", `3`)}},
	)
	out, _ := cliAt(t, 0, "--store", path, "show", "r-2")
	for i, key := range []string{"c@v1", "d@v1", "e@v1"} {
		if !regexp.MustCompile(`\n  ` + strconv.Itoa(i+1) + ` +` + regexp.QuoteMeta(key) + ` `).MatchString(out) {
			t.Fatalf("show r-2: want %s numbered %d:\n%s", key, i+1, out)
		}
	}
	js, _ := cliAt(t, 0, "--store", path, "--json", "show", "r-2")
	var got struct {
		Steps []struct {
			Seq int    `json:"seq"`
			Key string `json:"key"`
		} `json:"steps"`
	}
	if err := json.Unmarshal([]byte(js), &got); err != nil || len(got.Steps) != 3 {
		t.Fatalf("show --json: %s (%v)", js, err)
	}
	for i, s := range got.Steps {
		if s.Seq != i+1 {
			t.Fatalf("show --json: step %s has seq %d, want %d", s.Key, s.Seq, i+1)
		}
	}
}

// An event wait that timed out is checkpointed with the timeout as its
// error, which the workflow may handle: stem show says it timed out, not
// that it failed.
func TestShowWaitTimedOut(t *testing.T) {
	timedOut := storage.Checkpoint{Key: "decision", Kind: storage.KindEvent, Error: &storage.ErrorInfo{
		Message: `event "decision" (topic "approval") did not arrive by 2026-01-02T03:04:05Z`, Code: storage.CodeEventTimeout}}
	failed := storage.Checkpoint{Key: "charge@v1", Kind: storage.KindStep, Error: &storage.ErrorInfo{Message: "card declined"}}
	path := storeWith(t, storedRun{id: "w-1", workflow: "approve", input: `"ada"`, steps: []storage.Checkpoint{stepCP("ask@v1", `"asked ada"`), timedOut, failed}})
	out, _ := cliAt(t, 0, "--store", path, "show", "w-1")
	if !regexp.MustCompile(`\n  2 +decision +event +timed out +event "decision" \(topic "approval"\) did not arrive by`).MatchString(out) {
		t.Fatalf("show: want the wait timed out:\n%s", out)
	}
	if !regexp.MustCompile(`\n  3 +charge@v1 +step +failed +error: card declined`).MatchString(out) {
		t.Fatalf("show: want the step failed:\n%s", out)
	}
	js, _ := cliAt(t, 0, "--store", path, "--json", "show", "w-1")
	var got struct {
		Steps []struct {
			Status string `json:"status"`
			Error  string `json:"error"`
		} `json:"steps"`
	}
	if err := json.Unmarshal([]byte(js), &got); err != nil || len(got.Steps) != 3 || got.Steps[1].Status != "timed_out" || got.Steps[1].Error == "" || got.Steps[2].Status != "failed" {
		t.Fatalf("show --json: %s (%v)", js, err)
	}
}

// A queue limit that is not set is "unlimited" in text; --json keeps the
// number, 0, which stem help queues documents as unlimited.
func TestQueueLimitsUnlimited(t *testing.T) {
	f := newOpsFixture(t)
	out, _ := f.cli(0, "queues")
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`\ndefault +unlimited +unlimited +unlimited +0 `),
		regexp.MustCompile(`\nbulk +2 +unlimited +100 per 1m +0 `),
		regexp.MustCompile(`\ntenants +unlimited +1 +unlimited +0 `),
	} {
		if !want.MatchString(out) {
			t.Fatalf("queues: want %s:\n%s", want, out)
		}
	}
	js, _ := f.cli(0, "--json", "queues")
	var got struct {
		Queues []map[string]any `json:"queues"`
	}
	if err := json.Unmarshal([]byte(js), &got); err != nil || len(got.Queues) != 3 {
		t.Fatalf("queues --json: %s (%v)", js, err)
	}
	if q := got.Queues[0]; q["name"] != "default" || q["concurrency"] != 0.0 || q["partition_concurrency"] != 0.0 || q["rate"] != 0.0 {
		t.Fatalf("queues --json: default is %v, want its limits 0", q)
	}
	if help, _ := cliAt(t, 0, "help", "queues"); !strings.Contains(help, "--json gives each limit as a number, 0 for unlimited") {
		t.Fatalf("help queues does not say what 0 means:\n%s", help)
	}
}

// fillStore writes runs into st as storeWith does: each claimed, its
// checkpoints written, and parked (asleep, or waiting on its wait).
func fillStore(t *testing.T, st storage.Store, runs ...storedRun) {
	t.Helper()
	ctx := t.Context()
	for _, r := range runs {
		if _, err := st.CreateRuns(ctx, []storage.NewRun{{ID: r.id, Workflow: r.workflow, Version: r.version, Input: []byte(r.input)}}); err != nil {
			t.Fatal(err)
		}
		claimed, err := st.Claim(ctx, storage.ClaimRequest{Owner: "old-worker", Workflows: []string{r.workflow}, Limit: 5, LeaseFor: time.Hour})
		if err != nil || len(claimed) != 1 {
			t.Fatalf("claim %s: %v %v", r.id, claimed, err)
		}
		l := claimed[0].Lease
		for _, cp := range r.steps {
			if _, err := st.Checkpoint(ctx, storage.CheckpointRequest{Lease: l, LeaseFor: time.Hour, Checkpoint: cp}); err != nil {
				t.Fatal(err)
			}
		}
		req := storage.SuspendRequest{Lease: l, LeaseFor: time.Hour, Wait: r.wait}
		if r.wait == nil {
			later := time.Now().Add(time.Hour)
			req.ReadyAt = &later
		}
		if _, err := st.Suspend(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
}

// The same history reads the same in stem show on every store: the steps
// of the second run are numbered from 1 on SQLite, Postgres and Redis
// alike, though their Seq differ (one sequence per store, or per run).
func TestShowStepsSameOnEveryStore(t *testing.T) {
	quiet(t)
	stores := map[string]string{"sqlite": filepath.Join(t.TempDir(), "stem.db")}
	suffix := strconv.FormatInt(time.Now().UnixNano(), 36)
	if base := os.Getenv("STEM_TEST_POSTGRES_URL"); base != "" {
		schema := "stem_cli_seq_" + suffix
		t.Cleanup(func() { dropPgSchema(t, base, schema) })
		stores["postgres"] = withParam(base, "stem_schema", schema)
	}
	if base := os.Getenv("STEM_TEST_REDIS_URL"); base != "" {
		prefix := "stem-cli-seq-" + suffix + ":"
		cleanRedisPrefix(t, prefix)
		stores["redis"] = withParam(base, "stem_prefix", prefix)
	}
	steps := func(out string) string {
		_, after, ok := strings.Cut(out, "\nsteps of execution 1\n")
		if !ok {
			t.Fatalf("show without steps:\n%s", out)
		}
		return after
	}
	var want string
	for _, name := range []string{"sqlite", "postgres", "redis"} {
		u, ok := stores[name]
		if !ok {
			continue
		}
		st, err := storeurl.Open(t.Context(), u)
		if err != nil {
			t.Fatal(err)
		}
		fillStore(t, st,
			storedRun{id: "r-1", workflow: "greet", input: `{}`, steps: []storage.Checkpoint{stepCP("a@v1", `1`), stepCP("b@v1", `2`)}},
			storedRun{id: "r-2", workflow: "greet", input: `{}`, steps: []storage.Checkpoint{stepCP("c@v1", `1`), stepCP("d@v1", `2`), stepCP("e@v1", `3`)}},
		)
		st.Close()
		out, _ := cliAt(t, 0, "--store", u, "show", "r-2")
		got := steps(out)
		if !strings.Contains(got, "\n  1  c@v1") || !strings.Contains(got, "\n  3  e@v1") {
			t.Fatalf("%s: steps not numbered from 1:\n%s", name, got)
		}
		if want == "" {
			want = got
		} else if got != want {
			t.Fatalf("%s shows the steps as\n%s\nSQLite as\n%s", name, got, want)
		}
	}
}
