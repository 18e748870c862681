package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/schedule"
	"github.com/stemflow/stem/storage"
)

// testQueues are the queues the operator tests' worker registers: bulk
// with limits, tenants with partitions.
var testQueues = []runtime.Queue{
	{Name: "bulk", Concurrency: 2, Rate: 100, RatePeriod: time.Minute},
	{Name: "tenants", PartitionConcurrency: 1},
}

// newOpsFixture is a running worker with testQueues, its catalog recorded.
func newOpsFixture(t *testing.T, services ...runtime.Service) *fixture {
	t.Helper()
	f := newFixtureWith(t, fixtureConfig{run: true, queues: testQueues, services: services})
	f.eventually(func(out string) bool { return strings.Contains(out, "greet") }, "workflows")
	return f
}

// state is what the store holds that the operator commands change: every
// schedule and every run, as --json lists them.
func (f *fixture) state() string {
	f.t.Helper()
	s, _ := f.cli(0, "--json", "schedule", "list", "--limit", "1000")
	r, _ := f.cli(0, "--json", "runs", "--limit", "1000")
	return s + r
}

var manualRun = regexp.MustCompile(`^nightly: started run (nightly@manual-\d{8}T\d{6}\.\d{9}Z)\n$`)

// stem schedule create, list, show, pause, resume, trigger and delete, each
// checked against the store and the runs.
func TestScheduleLifecycle(t *testing.T) {
	f := newOpsFixture(t)
	if out, _ := f.cli(0, "schedule", "list"); out != "no schedules (stem schedule create makes one)\n" {
		t.Fatalf("list of none: %q", out)
	}

	out, _ := f.cli(0, "schedule", "create", "nightly", "greet", "0 2 * * *", `{"name":"ada"}`, "--tz", "Europe/Paris", "--overlap", "buffer_one")
	for _, want := range []string{
		"nightly: created; it fires while a worker that shares the store runs schedule.Service\n\n",
		"schedule   nightly\n", "workflow   greet\n", "cron       0 2 * * * in Europe/Paris\n", `input      {"name":"ada"}`,
		"overlap    buffer_one\n", "catch-up   skip\n", "state      active\n", "last run   none yet\n",
	} {
		if !strings.Contains(out, want) {
			t.Fatalf("create lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "queue ") {
		t.Fatalf("create shows the default queue:\n%s", out)
	}
	if next := regexp.MustCompile(`next       (\S+T02:00:00\+0[12]:00), (\S+T02:00:00\+0[12]:00), (\S+T02:00:00\+0[12]:00)\n`); !next.MatchString(out) {
		t.Fatalf("create: want three next fire times at 02:00 Paris time:\n%s", out)
	}
	got, err := schedule.Get(f.ctx, f.e, "nightly")
	if err != nil || got.Workflow != "greet" || got.Cron != "0 2 * * *" || got.TimeZone != "Europe/Paris" || got.Overlap != schedule.BufferOne ||
		got.CatchUp != schedule.SkipMissed || got.Paused || string(got.Input) != `{"name":"ada"}` || len(got.Next) != 3 {
		t.Fatalf("stored: %+v, %v", got, err)
	}

	// A second, from standard input, paused, catching up, on a queue.
	out, _ = f.cliIn(`{"name":"bob"}`, 0, "schedule", "create", "weekly", "greet", "@weekly", "-", "--paused",
		"--catch-up", "ALL", "--catch-up-window", "2h", "--queue", "tenants", "--partition", "t1", "--priority", "5")
	for _, want := range []string{"weekly: created, paused (stem schedule resume weekly starts its ticks)", "catch-up   all within 2h\n",
		"queue      tenants, partition t1, priority 5\n", "state      paused: its ticks start nothing\n"} {
		if !strings.Contains(out, want) {
			t.Fatalf("create weekly lacks %q:\n%s", want, out)
		}
	}
	if got, err := schedule.Get(f.ctx, f.e, "weekly"); err != nil || !got.Paused || got.CatchUp != schedule.All || got.CatchUpWindow != 2*time.Hour ||
		got.Queue != "tenants" || got.Partition != "t1" || got.Priority != 5 || string(got.Input) != `{"name":"bob"}` {
		t.Fatalf("stored weekly: %+v, %v", got, err)
	}

	list, _ := f.cli(0, "schedule", "list")
	for _, want := range []string{"ID WORKFLOW CRON ZONE OVERLAP CATCH-UP STATE NEXT", "nightly greet 0 2 * * * Europe/Paris buffer_one skip active 20",
		"weekly greet @weekly UTC skip all within 2h paused -"} {
		if !has(list, want) {
			t.Fatalf("list lacks %q:\n%s", want, list)
		}
	}
	if alias, _ := f.cli(0, "schedules"); alias != list {
		t.Fatalf("stem schedules differs from stem schedule list:\n%s", alias)
	}
	page, _ := f.cli(0, "schedule", "list", "--limit", "1")
	if m := moreLine.FindStringSubmatch(page); m == nil || m[1] != "stem --store "+shellQuote(f.path)+" schedule list --limit 1 --after nightly" || strings.Contains(page, "weekly") {
		t.Fatalf("list --limit 1:\n%s", page)
	}
	if out, _ := f.cli(0, "schedule", "list", "--after", "nightly"); !strings.Contains(out, "weekly") || strings.Contains(out, "nightly") || moreLine.MatchString(out) {
		t.Fatalf("list --after nightly:\n%s", out)
	}

	js, _ := f.cli(0, "--json", "schedule", "show", "nightly")
	var doc struct {
		ID, Workflow, Cron, Overlap, Queue string
		TimeZone                           string `json:"time_zone"`
		CatchUp                            string `json:"catch_up"`
		Next                               []time.Time
		Input                              struct{ Name string }
		Paused                             bool
	}
	if err := json.Unmarshal([]byte(js), &doc); err != nil || doc.ID != "nightly" || doc.TimeZone != "Europe/Paris" || doc.CatchUp != "skip" ||
		doc.Overlap != "buffer_one" || doc.Queue != "default" || len(doc.Next) != 3 || doc.Input.Name != "ada" {
		t.Fatalf("show --json (%v):\n%s", err, js)
	}

	// pause, pause again, resume, resume again.
	if out, _ := f.cli(0, "schedule", "pause", "nightly"); out != "nightly: paused; its ticks start nothing until stem schedule resume\n" {
		t.Fatalf("pause: %q", out)
	}
	if got, _ := schedule.Get(f.ctx, f.e, "nightly"); !got.Paused || len(got.Next) != 0 {
		t.Fatalf("after pause: %+v", got)
	}
	if out, _ := f.cli(0, "schedule", "pause", "nightly"); out != "nightly: was paused already\n" {
		t.Fatalf("pause again: %q", out)
	}
	if out, _ := f.cli(0, "schedule", "show", "nightly"); !strings.Contains(out, "state      paused") || strings.Contains(out, "next ") {
		t.Fatalf("show paused:\n%s", out)
	}
	if out, _ := f.cli(0, "schedule", "resume", "nightly"); !regexp.MustCompile(`^nightly: resumed; next tick at \S+T02:00:00\+0[12]:00\n$`).MatchString(out) {
		t.Fatalf("resume: %q", out)
	}
	if got, _ := schedule.Get(f.ctx, f.e, "nightly"); got.Paused || len(got.Next) != 3 {
		t.Fatalf("after resume: %+v", got)
	}
	if out, _ := f.cli(0, "schedule", "resume", "nightly"); out != "nightly: was not paused\n" {
		t.Fatalf("resume again: %q", out)
	}

	// trigger starts a run whose ID it prints; a worker runs it.
	before, _ := schedule.Get(f.ctx, f.e, "nightly")
	out, _ = f.cli(0, "schedule", "trigger", "nightly")
	m := manualRun.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("trigger: %q", out)
	}
	runID := m[1]
	waitStatus(t, f.e, runID, runtime.StatusComplete)
	if out, _ := f.cli(0, "show", runID); !strings.Contains(out, "workflow   greet") || !strings.Contains(out, `"hello ada"`) {
		t.Fatalf("show the triggered run:\n%s", out)
	}
	after, _ := schedule.Get(f.ctx, f.e, "nightly")
	if after.LastRunID != runID || !after.NextFireAt.Equal(before.NextFireAt) {
		t.Fatalf("after trigger: last run %q, next %v (was %v)", after.LastRunID, after.NextFireAt, before.NextFireAt)
	}
	if out, _ := f.cli(0, "schedule", "show", "nightly"); !strings.Contains(out, "last run   "+runID+", at ") {
		t.Fatalf("show after trigger:\n%s", out)
	}
	// A paused schedule triggers too, and its run is placed as it says.
	js, _ = f.cli(0, "--json", "schedule", "trigger", "weekly")
	var done struct {
		ScheduleID string `json:"schedule_id"`
		RunID      string `json:"run_id"`
	}
	if err := json.Unmarshal([]byte(js), &done); err != nil || done.ScheduleID != "weekly" || !strings.HasPrefix(done.RunID, "weekly@manual-") {
		t.Fatalf("trigger --json (%v): %s", err, js)
	}
	waitStatus(t, f.e, done.RunID, runtime.StatusComplete)
	if out, _ := f.cli(0, "show", done.RunID); !strings.Contains(out, "queue      tenants, partition t1, priority 5\n") {
		t.Fatalf("show the weekly run:\n%s", out)
	}

	// delete keeps the runs.
	if out, _ := f.cli(0, "schedule", "delete", "nightly"); out != "nightly: deleted; the runs it started stay\n" {
		t.Fatalf("delete: %q", out)
	}
	if _, err := schedule.Get(f.ctx, f.e, "nightly"); !errors.Is(err, storage.ErrScheduleNotFound) {
		t.Fatalf("after delete: %v", err)
	}
	if r, err := f.e.Get(f.ctx, runID); err != nil || r.Status != runtime.StatusComplete {
		t.Fatalf("the triggered run after delete: %+v %v", r, err)
	}
	if out, _ := f.cli(0, "schedule", "list"); strings.Contains(out, "nightly") || !strings.Contains(out, "weekly") {
		t.Fatalf("list after delete:\n%s", out)
	}

	for name, args := range map[string][]string{
		"schedule list":   {"schedule", "list"},
		"schedule show":   {"schedule", "show", "weekly"},
		"schedule pause":  {"schedule", "pause", "weekly"},
		"schedule create": {"schedule", "create", "daily", "greet", "@daily", `{"name":"cy"}`},
		"queues":          {"queues"},
		"purge":           {"purge", "--older-than", "1h", "--dry-run"},
		"runs":            {"runs"},
	} {
		out, _ := f.cli(0, append([]string{"--json"}, args...)...)
		var v any
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			t.Fatalf("%s --json: %v\n%s", name, err, out)
		}
		checkSnakeCase(t, name, v)
	}
}

// A worker that runs schedule.Service fires the ticks, each run with the
// ID the help promises: ID@TICK in RFC 3339, UTC.
func TestScheduleFires(t *testing.T) {
	f := newOpsFixture(t, schedule.Service{Poll: 20 * time.Millisecond})
	f.cli(0, "schedule", "create", "tick", "greet", "@every 1s", `{"name":"tick"}`)
	tickRun := regexp.MustCompile(`(?m)^tick@\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ `)
	f.eventually(func(out string) bool { return tickRun.MatchString(out) }, "runs", "--workflow", "greet", "--status", "complete")
	f.cli(0, "schedule", "delete", "tick")
}

// A typo in any argument of the new commands is refused with what and
// where, the exit code documented, and nothing stored changed.
func TestOperatorCommandErrors(t *testing.T) {
	f := newOpsFixture(t)
	f.cli(0, "schedule", "create", "nightly", "greet", "0 2 * * *", `{"name":"ada"}`)
	f.cli(0, "start", "greet", `{"name":"ada"}`, "--id", "g-1")
	waitStatus(t, f.e, "g-1", runtime.StatusComplete)
	state := f.state()
	notFound := `no schedule nightyl in ` + f.path + `; did you mean "nightly"? (stem schedule list lists them)`
	create := []string{"schedule", "create", "daily", "greet", "@daily", `{"name":"ada"}`}
	with := func(extra ...string) []string { return append(append([]string{}, create...), extra...) }
	for _, c := range []struct {
		code int
		args []string
		want string
	}{
		// the subcommand
		{2, []string{"schedule", "craete", "daily"}, `stem schedule: unknown subcommand "craete"; did you mean "create"? (the subcommands are create, list, show, pause, resume, trigger or delete; stem help schedule)`},
		{2, []string{"schedule"}, "stem schedule: want a subcommand: create, list, show, pause, resume, trigger or delete"},
		{2, []string{"schedule", "--tz", "UTC", "create"}, "stem schedule: give the subcommand before the flag --tz"},
		{2, []string{"schedul", "list"}, `stem: unknown command "schedul"; did you mean "schedule"?`},
		// create's arguments and flags
		{2, []string{"schedule", "create", "daily", "greet", "@daily"}, "stem schedule create: want ID WORKFLOW CRON JSON|-|@FILE"},
		{2, []string{"schedule", "create", "dai/ly", "greet", "@daily", "{}"}, `stem schedule create: invalid character '/' in schedule ID "dai/ly"`},
		{2, with("--overlpa", "skip"), "stem schedule create: unknown flag --overlpa; did you mean --overlap?"},
		{2, with("--overlap", "bufer_one"), `stem schedule create: --overlap: unknown overlap policy "bufer_one"; did you mean "buffer_one"? (want skip, buffer_one or allow)`},
		{2, with("--catch-up", "lates"), `stem schedule create: --catch-up: unknown catch-up policy "lates"; did you mean "latest"? (want skip, latest or all)`},
		{2, with("--catch-up", "all"), "stem schedule create: --catch-up all needs --catch-up-window DUR"},
		{2, with("--catch-up-window", "1h"), "stem schedule create: --catch-up-window applies only to --catch-up all (not skip)"},
		{2, with("--catch-up-window", "1x"), `stem schedule create: --catch-up-window "1x": want a duration such as 500ms, 5s or 1m`},
		{2, with("--tz", "Europe/Pari"), `stem schedule create: --tz "Europe/Pari": unknown time zone; give an IANA name such as Europe/Paris`},
		{2, with("--priority", "2000000"), "stem schedule create: --priority 2000000: want -1000000 to 1000000"},
		{2, with("--queue", "bu lk"), `stem schedule create: --queue: invalid character ' ' in queue name "bu lk"`},
		{2, []string{"schedule", "create", "daily", "greet", "0 25 * * *", "{}"}, `stem schedule create: cron expression "0 25 * * *": `},
		{2, []string{"schedule", "create", "daily", "greet", "@dayly", "{}"}, `stem schedule create: cron expression "@dayly": `},
		{2, []string{"schedule", "create", "daily", "greet", "0 0 30 2 *", "{}"}, `stem schedule create: cron expression "0 0 30 2 *" never fires`},
		{2, []string{"schedule", "create", "daily", "greet", "@daily", "{"}, "stem schedule create: the input is not valid JSON"},
		{1, []string{"schedule", "create", "daily", "gret", "@daily", "{}"}, `stem schedule create daily: unknown workflow: "gret": no engine that shares this store serves it (known: `},
		{1, []string{"schedule", "create", "daily", "greet", "@daily", `{"name":5}`}, "stem schedule create daily: payload does not decode: input of greet"},
		{1, with("--queue", "bulkk"), `stem schedule create daily: --queue bulkk: no worker sharing the store registered that queue; did you mean "bulk"? (stem queues lists them)`},
		{1, with("--partition", "p1"), `stem schedule create daily: `},
		{1, []string{"schedule", "create", "nightly", "greet", "@daily", "{}"}, "stem schedule create nightly: schedule nightly exists; delete it first or pick another ID"},
		// the other subcommands
		{1, []string{"schedule", "show", "nightyl"}, "stem schedule show nightyl: " + notFound},
		{1, []string{"schedule", "pause", "nightyl"}, "stem schedule pause nightyl: " + notFound},
		{1, []string{"schedule", "resume", "nightyl"}, "stem schedule resume nightyl: " + notFound},
		{1, []string{"schedule", "trigger", "nightyl"}, "stem schedule trigger nightyl: " + notFound},
		{1, []string{"schedule", "delete", "nightyl"}, "stem schedule delete nightyl: " + notFound},
		{1, []string{"schedule", "delete", "zzz"}, "stem schedule delete zzz: no schedule zzz in " + f.path + " (stem schedule list lists them)"},
		{2, []string{"schedule", "pause", "nightly", "--tz", "UTC"}, "stem schedule pause: unknown flag --tz"},
		{2, []string{"schedule", "trigger"}, "stem schedule trigger: want ID"},
		{2, []string{"schedule", "delete", "nightly", "now"}, `stem schedule delete: unexpected argument "now"`},
		{2, []string{"schedule", "list", "--limit", "0"}, "stem schedule list: --limit 0: want 1 or more"},
		// purge
		{2, []string{"purge"}, "stem purge: --older-than DUR is required"},
		{2, []string{"purge", "--olderthan", "1h"}, "stem purge: unknown flag --olderthan; did you mean --older-than?"},
		{2, []string{"purge", "--older-than", "3x"}, `stem purge: --older-than "3x": unknown unit`},
		{2, []string{"purge", "--older-than", "0s"}, "stem purge: --older-than 0s: want above zero"},
		{2, []string{"purge", "--older-than", "-1h"}, "stem purge: --older-than -1h: want above zero"},
		{2, []string{"purge", "--older-than", "1ms", "--status", "complet"}, `stem purge: --status: unknown status "complet"; did you mean "complete"? (want complete, errored or terminated)`},
		{2, []string{"purge", "--older-than", "1ms", "--status", "complete,running"}, "stem purge: --status running: purge deletes only finished runs: complete, errored or terminated"},
		{2, []string{"purge", "--older-than", "1ms", "--status", "complete,"}, `stem purge: --status "complete,": an empty item`},
		{1, []string{"purge", "--older-than", "1ms", "--workflow", "gret"}, `stem purge: --workflow gret: no worker serves that workflow and the store has no runs of it; did you mean "greet"? (stem workflows lists them)`},
		// queues, runs, start
		{2, []string{"queues", "bulk"}, `stem queues: unexpected argument "bulk"`},
		{2, []string{"workers", "test-worker"}, `stem workers: unexpected argument "test-worker"`},
		{2, []string{"workers", "--queue", "bulk"}, "stem workers: unknown flag --queue"},
		{2, []string{"runs", "--queue", "a/b"}, `stem runs: --queue: invalid character '/' in queue name "a/b"`},
		{2, []string{"runs", "--queeu", "bulk"}, "stem runs: unknown flag --queeu; did you mean --queue?"},
		{2, []string{"start", "greet", "{}", "--prority", "1"}, "stem start: unknown flag --prority; did you mean --priority?"},
		{2, []string{"start", "greet", "{}", "--delay", "-1s"}, "stem start: --delay -1s: want 0 or more"},
		{1, []string{"start", "greet", `{"name":"x"}`, "--queue", "bulkk"}, `stem start greet: --queue bulkk: no worker sharing the store registered that queue; did you mean "bulk"? (stem queues lists them)`},
		{1, []string{"start", "greet", `{"name":"x"}`, "--queue", "zzz"}, "stem start greet: --queue zzz: no worker sharing the store registered that queue (stem queues lists them)"},
		{1, []string{"start", "greet", `{"name":"x"}`, "--queue", "bulk", "--partition", "p1"}, `stem start greet: `},
	} {
		_, errOut := f.cli(c.code, c.args...)
		if !strings.HasPrefix(errOut, c.want) {
			t.Errorf("stem %q: exit %d\n%s\nwant it to begin %q", c.args, c.code, errOut, c.want)
		}
		if c.code == 1 && strings.Count(errOut, "\n") != 1 {
			t.Errorf("stem %q: a failure in more than one line:\n%s", c.args, errOut)
		}
		if c.code == 2 && strings.HasPrefix(c.args[0], "schedule") && len(c.args) > 1 && c.args[1] != "craete" && c.args[1] != "--tz" && c.args[1] != "list" && !strings.Contains(c.want, "not valid JSON") && !strings.Contains(errOut, "usage: stem schedule") {
			t.Errorf("stem %q: a usage error without the usage:\n%s", c.args, errOut)
		}
		if now := f.state(); now != state {
			t.Fatalf("stem %q changed the store:\nbefore %s\nafter %s", c.args, state, now)
		}
	}
	// A partition on a queue without partitions is named as such.
	if _, errOut := f.cli(1, with("--partition", "p1")...); !strings.Contains(errOut, `partition key "p1" given, but queue "default" has no partitions`) {
		t.Fatalf("partition without partitions: %s", errOut)
	}
}

// purge --dry-run counts and deletes nothing; purge deletes the old
// finished runs that match, with their buffered events, and never an
// unfinished run.
func TestPurge(t *testing.T) {
	f := newOpsFixture(t)
	for _, id := range []string{"g-1", "g-2", "g-3"} {
		f.cli(0, "start", "greet", `{"name":"x"}`, "--id", id)
	}
	f.cli(0, "start", "refuse", "1", "--id", "r-1")
	f.cli(0, "start", "approve", `"ada"`, "--id", "a-1")
	f.cli(0, "start", "approve", `"bob"`, "--id", "a-2")
	for _, id := range []string{"g-1", "g-2", "g-3"} {
		waitStatus(t, f.e, id, runtime.StatusComplete)
	}
	waitStatus(t, f.e, "r-1", runtime.StatusErrored)
	waitStatus(t, f.e, "a-1", runtime.StatusWaiting)
	waitStatus(t, f.e, "a-2", runtime.StatusWaiting)
	// a-1 gets an event it never reads (kept for it), then finishes.
	f.cli(0, "send", "a-1", "shipment", `{"tracking":"T"}`)
	f.cli(0, "send", "a-1", "approval", "true")
	waitStatus(t, f.e, "a-1", runtime.StatusComplete)
	time.Sleep(20 * time.Millisecond)
	count := func() int {
		out, _ := f.cli(0, "--json", "runs", "--limit", "100")
		var page jsonRunPage
		if err := json.Unmarshal([]byte(out), &page); err != nil {
			t.Fatal(err)
		}
		return len(page.Runs)
	}

	if out, _ := f.cli(0, "purge", "--older-than", "1ms", "--dry-run"); out != "would delete 5 runs (and 1 buffered event(s)) that finished more than 1ms ago\n" {
		t.Fatalf("dry run: %q", out)
	}
	if out, _ := f.cli(0, "purge", "--older-than", "1ms", "--status", "Errored,TERMINATED", "--dry-run"); out != "would delete 1 errored or terminated runs that finished more than 1ms ago\n" {
		t.Fatalf("dry run by status: %q", out)
	}
	if n := count(); n != 6 {
		t.Fatalf("after the dry runs %d runs, want 6", n)
	}
	if out, _ := f.cli(0, "purge", "--older-than", "30d"); out != "deleted 0 runs that finished more than 30d ago\n" {
		t.Fatalf("purge 30d: %q", out)
	}
	if out, _ := f.cli(0, "purge", "--older-than", "1ms", "--workflow", "greet"); out != "deleted 3 runs of greet that finished more than 1ms ago\n" {
		t.Fatalf("purge greet: %q", out)
	}
	if _, err := f.e.Get(f.ctx, "g-1"); !errors.Is(err, runtime.ErrRunNotFound) {
		t.Fatalf("g-1 after purge: %v", err)
	}
	js, _ := f.cli(0, "--json", "purge", "--older-than", "1ms")
	var res jsonPurge
	if err := json.Unmarshal([]byte(js), &res); err != nil || res.Runs != 2 || res.Events != 1 || res.DryRun || res.OlderThan != "1ms" {
		t.Fatalf("purge --json (%v): %s", err, js)
	}
	// Only the unfinished run is left.
	if out, _ := f.cli(0, "runs"); !strings.Contains(out, "a-2") || count() != 1 {
		t.Fatalf("after purge:\n%s", out)
	}
	// A workflow with runs but no worker any more is not refused: here one
	// the catalog lacks would be; one that has runs is accepted.
	if out, _ := f.cli(0, "purge", "--older-than", "1ms", "--workflow", "approve"); out != "deleted 0 runs of approve that finished more than 1ms ago\n" {
		t.Fatalf("purge approve: %q", out)
	}
}

// stem queues shows each queue's limits and depth; runs --queue filters;
// start places runs, and show names a placement other than the default.
func TestQueuesAndPlacement(t *testing.T) {
	f := newOpsFixture(t)
	t.Cleanup(func() {
		select {
		case <-f.release:
		default:
			close(f.release)
		}
	})
	for _, id := range []string{"b-1", "b-2", "b-3", "b-4"} {
		f.cli(0, "start", "slow", "1", "--queue", "bulk", "--id", id)
	}
	if out, _ := f.cli(0, "start", "slow", "1", "--queue", "bulk", "--id", "b-5", "--delay", "1h"); !strings.HasPrefix(out, "b-5: started on queue bulk; a worker that serves slow runs it from ") {
		t.Fatalf("start --delay: %q", out)
	}
	if out, _ := f.cli(0, "start", "greet", `{"name":"t"}`, "--queue", "tenants", "--partition", "t1", "--priority", "3", "--id", "t-1"); out != "t-1: started on queue tenants, partition t1, priority 3; a worker that serves greet runs it\n" {
		t.Fatalf("start on tenants: %q", out)
	}
	f.cli(0, "start", "greet", `{"name":"d"}`, "--id", "d-1")
	waitStatus(t, f.e, "t-1", runtime.StatusComplete)
	waitStatus(t, f.e, "d-1", runtime.StatusComplete)

	// Two of bulk's four due runs hold its two places; two wait; one is
	// delayed.
	type q struct {
		Name                 string
		Concurrency          int
		PartitionConcurrency int    `json:"partition_concurrency"`
		Rate                 int    `json:"rate"`
		RatePeriod           string `json:"rate_period"`
		Worker               string
		Ready, Scheduled     int
		Running              int
	}
	var doc struct{ Queues []q }
	deadline := time.Now().Add(20 * time.Second)
	for {
		js, _ := f.cli(0, "--json", "queues")
		if err := json.Unmarshal([]byte(js), &doc); err != nil {
			t.Fatal(err)
		}
		if len(doc.Queues) == 3 && doc.Queues[1].Running == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("queues never showed bulk's two running runs:\n%s", js)
		}
		time.Sleep(20 * time.Millisecond)
	}
	want := []q{
		{Name: "default"},
		{Name: "bulk", Concurrency: 2, Rate: 100, RatePeriod: "1m0s", Worker: "test-worker", Ready: 2, Scheduled: 1, Running: 2},
		{Name: "tenants", PartitionConcurrency: 1, Worker: "test-worker"},
	}
	for i := range want {
		if doc.Queues[i] != want[i] {
			t.Fatalf("queue %d: %+v, want %+v", i, doc.Queues[i], want[i])
		}
	}
	out, _ := f.cli(0, "queues")
	for _, w := range []string{
		"QUEUE CONCURRENCY PER PARTITION RATE READY OLDEST READY SCHEDULED RUNNING WAITING PAUSED RECORDED BY",
		"default unlimited unlimited unlimited 0 - 0 0 0 0 -\n",
		"tenants unlimited 1 unlimited 0 - 0 0 0 0 test-worker at ",
	} {
		if !has(out, w) {
			t.Fatalf("queues lacks %q:\n%s", w, out)
		}
	}

	// bulk's two ready runs have waited since they started.
	if !regexp.MustCompile(`bulk +2 +unlimited +100 per 1m +2 +\d+s +1 +2 +0 +0 +test-worker at `).MatchString(out) {
		t.Fatalf("queues lacks bulk's line, with how long its oldest ready run waited:\n%s", out)
	}

	out, _ = f.cli(0, "runs", "--queue", "bulk")
	for _, id := range []string{"b-1", "b-2", "b-3", "b-4", "b-5"} {
		if !strings.Contains(out, id) {
			t.Fatalf("runs --queue bulk lacks %s:\n%s", id, out)
		}
	}
	if strings.Contains(out, "t-1") || strings.Contains(out, "d-1") {
		t.Fatalf("runs --queue bulk lists others:\n%s", out)
	}
	if out, _ := f.cli(0, "runs", "--queue", "default"); !strings.Contains(out, "d-1") || strings.Contains(out, "b-1") || strings.Contains(out, "t-1") {
		t.Fatalf("runs --queue default:\n%s", out)
	}
	if out, _ := f.cli(0, "runs", "--queue", "nothing"); out != "no runs match\n" {
		t.Fatalf("runs --queue nothing: %q", out)
	}
	page, _ := f.cli(0, "runs", "--queue", "bulk", "--sort", "id", "--limit", "2")
	if m := moreLine.FindStringSubmatch(page); m == nil || !strings.HasSuffix(m[1], " runs --queue bulk --sort id --limit 2 --after b-2") {
		t.Fatalf("runs --queue bulk --limit 2:\n%s", page)
	}

	js, _ := f.cli(0, "--json", "runs", "--limit", "100")
	var runs struct {
		Runs []struct {
			ID, Queue, Partition string
			Priority             int
		}
	}
	if err := json.Unmarshal([]byte(js), &runs); err != nil {
		t.Fatal(err)
	}
	for _, r := range runs.Runs {
		wantQ, wantP, wantPri := "bulk", "", 0
		switch r.ID {
		case "t-1":
			wantQ, wantP, wantPri = "tenants", "t1", 3
		case "d-1":
			wantQ = "default"
		}
		if r.Queue != wantQ || r.Partition != wantP || r.Priority != wantPri {
			t.Fatalf("runs --json: %+v, want queue %s partition %q priority %d", r, wantQ, wantP, wantPri)
		}
	}
	for _, key := range []string{`"queue": "default"`, `"partition": ""`, `"priority": 0`} {
		if js, _ := f.cli(0, "--json", "show", "d-1"); !strings.Contains(js, key) {
			t.Fatalf("show --json of a default run lacks %s:\n%s", key, js)
		}
	}
	if out, _ := f.cli(0, "show", "t-1"); !strings.Contains(out, "queue      tenants, partition t1, priority 3\n") {
		t.Fatalf("show t-1:\n%s", out)
	}
	if out, _ := f.cli(0, "show", "b-1"); !strings.Contains(out, "queue      bulk\n") {
		t.Fatalf("show b-1:\n%s", out)
	}
	if out, _ := f.cli(0, "show", "d-1"); strings.Contains(out, "queue") {
		t.Fatalf("show of a run on the default queue names it:\n%s", out)
	}
	close(f.release)
	for _, id := range []string{"b-1", "b-2", "b-3", "b-4"} {
		waitStatus(t, f.e, id, runtime.StatusComplete)
	}
}

// Help on the new commands: the overview of schedule names its
// subcommands, the policies and the run IDs; each subcommand has its own.
func TestOperatorHelp(t *testing.T) {
	out, _ := cliAt(t, 0, "help", "schedule")
	for _, want := range []string{"usage: stem schedule SUBCOMMAND ARGS", "create ID WORKFLOW CRON JSON|-|@FILE", "buffer_one  hold the tick",
		"latest      start the latest", "ID@TICK", "nightly@2026-01-02T02:00:00Z", "schedule.Service"} {
		if !strings.Contains(out, want) {
			t.Fatalf("help schedule lacks %q:\n%s", want, out)
		}
	}
	if alt, _ := cliAt(t, 0, "schedule", "--help"); alt != out {
		t.Fatalf("schedule --help differs from help schedule:\n%s", alt)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"help", "schedule", "create"}, "usage: stem schedule create ID WORKFLOW CRON JSON|-|@FILE [--tz ZONE] [--overlap skip|buffer_one|allow] [--catch-up skip|latest|all] [--catch-up-window DUR] [--queue NAME] [--partition KEY] [--priority N] [--paused]\n"},
		{[]string{"schedule", "create", "--help"}, "  --catch-up-window DUR"},
		{[]string{"schedule", "trigger", "-h"}, "usage: stem schedule trigger ID\n"},
		{[]string{"help", "schedules"}, "usage: stem schedules [--limit N] [--after ID]\n"},
		{[]string{"help", "purge"}, "usage: stem purge --older-than DUR [--status STATUS,...] [--workflow NAME,...] [--dry-run]\n"},
		{[]string{"help", "purge"}, "(30d, 7d12h)"},
		{[]string{"help", "queues"}, "usage: stem queues \n"},
		{[]string{"help", "runs"}, "[--queue NAME]"},
		{[]string{"help", "start"}, "[--queue NAME] [--partition KEY] [--priority N] [--delay DUR]"},
	} {
		if out, _ := cliAt(t, 0, c.args...); !strings.Contains(out, c.want) {
			t.Fatalf("stem %v lacks %q:\n%s", c.args, c.want, out)
		}
	}
	if _, errOut := cliAt(t, 2, "help", "schedule", "craete"); !strings.Contains(errOut, `unknown subcommand "craete"; did you mean "create"?`) {
		t.Fatalf("help schedule craete: %s", errOut)
	}
	if _, errOut := cliAt(t, 2, "help", "schedule", "list", "x"); !strings.Contains(errOut, `stem help: unexpected argument "x"`) {
		t.Fatalf("help schedule list x: %s", errOut)
	}
	if _, errOut := cliAt(t, 2, "help", "runs", "x"); !strings.Contains(errOut, `stem help: unexpected argument "x"`) {
		t.Fatalf("help runs x: %s", errOut)
	}
	for _, d := range []struct {
		in   string
		want time.Duration
	}{{"30d", 720 * time.Hour}, {"7d12h", 180 * time.Hour}, {"90m", 90 * time.Minute}, {"1ms", time.Millisecond}} {
		if got, err := parseAge(d.in); err != nil || got != d.want {
			t.Fatalf("parseAge(%q) = %v, %v; want %v", d.in, got, err, d.want)
		}
	}
}

// A schedule created with the workers' codec key stores its input sealed;
// show opens it with the key and says it is sealed without.
func TestScheduleInputSealed(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	codec, err := runtime.NewAESGCMCodec(key)
	if err != nil {
		t.Fatal(err)
	}
	f := newFixtureWith(t, fixtureConfig{codec: codec, run: true})
	f.eventually(func(out string) bool { return strings.Contains(out, "greet") }, "workflows")
	hexKey := "3031323334353637383961626364656630313233343536373839616263646566"
	f.cli(0, "--codec-key", hexKey, "schedule", "create", "s", "greet", "@daily", `{"name":"ada"}`)
	if got, err := schedule.Get(f.ctx, f.e, "s"); err != nil || json.Valid(got.Input) {
		t.Fatalf("the input was stored in the clear: %q %v", got.Input, err)
	}
	if out, _ := f.cli(0, "schedule", "show", "s", "--codec-key", hexKey); !strings.Contains(out, `input      {"name":"ada"}`) {
		t.Fatalf("show with the key:\n%s", out)
	}
	if out, _ := f.cli(0, "schedule", "show", "s"); !strings.Contains(out, "input      (sealed: pass the workers' --codec-key to read it)") {
		t.Fatalf("show without the key:\n%s", out)
	}
	out, _ := f.cli(0, "schedule", "trigger", "s") // "s: started run ID"
	id := strings.Fields(out)[3]
	waitStatus(t, f.e, id, runtime.StatusComplete)
	if out, _ = f.cli(0, "show", id, "--codec-key", hexKey); !strings.Contains(out, `"hello ada"`) {
		t.Fatalf("the triggered run:\n%s", out)
	}
}

// stem workers lists the engines at work on the store, as they recorded
// themselves, in text and JSON.
func TestWorkers(t *testing.T) {
	f := newOpsFixture(t)
	host, _ := os.Hostname()
	out, _ := f.cli(0, "workers")
	for _, w := range []string{
		"WORKER HOST PID STARTED HEARTBEAT IN FLIGHT QUEUES WORKFLOWS",
		fmt.Sprintf("test-worker %s %d ", host, os.Getpid()),
		" bulk,default,tenants ",
	} {
		if !has(out, w) {
			t.Fatalf("workers lacks %q:\n%s", w, out)
		}
	}
	js, _ := f.cli(0, "--json", "workers")
	var doc struct {
		Workers []struct {
			ID, Host          string
			PID               int
			InFlight          int `json:"in_flight"`
			Queues, Workflows []string
			Heartbeat         time.Time
			ExpiresAt         time.Time `json:"expires_at"`
		}
	}
	if err := json.Unmarshal([]byte(js), &doc); err != nil {
		t.Fatalf("%v:\n%s", err, js)
	}
	if len(doc.Workers) != 1 {
		t.Fatalf("workers --json: %s", js)
	}
	w := doc.Workers[0]
	if w.ID != "test-worker" || w.Host != host || w.PID != os.Getpid() || !slices.Contains(w.Workflows, "greet") || !slices.Equal(w.Queues, []string{"bulk", "default", "tenants"}) || !w.ExpiresAt.After(time.Now()) {
		t.Fatalf("workers --json: %+v", w)
	}

	// Once the engine stops, it is gone.
	f.stop()
	if out, _ := f.cli(0, "workers"); out != "no workers (an engine records itself while its Run runs)\n" {
		t.Fatalf("workers after the engine stopped: %q", out)
	}
}
