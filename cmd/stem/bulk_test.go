package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stemflow/stem/runtime"
)

// Every wrong bulk call is exit 2 with a line that says what is wrong,
// before the store is opened (it does not exist here).
func TestBulkUsageErrors(t *testing.T) {
	t.Setenv("STEM_STORE", "")
	t.Setenv("STEM_CODEC_KEY", "")
	missing := filepath.Join(t.TempDir(), "none.db")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"bulk", "restrat"}, `unknown subcommand "restrat"; did you mean "restart"?`},
		{[]string{"bulk", "restart-faild"}, `did you mean "restart-failed"?`},
		{[]string{"bulk"}, "want a subcommand: terminate, cancel, pause, resume, restart, restart-failed, status, list or continue"},
		{[]string{"bulk", "--yes", "restart"}, "give the subcommand before the flag --yes"},
		{[]string{"bulk", "restart", "--stauts", "errored", "--yes"}, "unknown flag --stauts; did you mean --status?"},
		{[]string{"bulk", "restart", "--status", "erored", "--yes"}, `unknown status "erored"; did you mean "errored"?`},
		{[]string{"bulk", "restart", "--where", "total", "--yes"}, `--where "total": want NAME OP VALUE`},
		{[]string{"bulk", "restart", "--where", "to tal=3", "--yes"}, `--where "to tal=3": `},
		{[]string{"bulk", "restart", "--where", "total!3", "--yes"}, `--where "total!3": want NAME OP VALUE`},
		{[]string{"bulk", "restart", "--where", "total^3", "--yes"}, `--where "total^3": unknown comparison at "^3"`},
		{[]string{"bulk", "restart", "--rate", "fast", "--yes"}, `--rate "fast": want a number of runs a second`},
		{[]string{"bulk", "restart", "--rate", "-3", "--yes"}, `--rate "-3": want a number of runs a second`},
		{[]string{"bulk", "restart", "--created-from", "yesterday", "--yes"}, `--created-from "yesterday": want a time`},
		{[]string{"bulk", "restart", "--created-from", "2026-11-28", "--created-to", "2026-11-01", "--yes"}, "--created-to 2026-11-01T00:00:00.000Z is not after --created-from"},
		{[]string{"bulk", "restart", "--workflow", "stem.bulk", "--yes"}, "bulk actions do not act on bulk actions"},
		{[]string{"bulk", "restart", "--workflow", "bad name", "--yes"}, "--workflow: "},
		{[]string{"bulk", "pause", "--reason", "why", "--yes"}, "unknown flag --reason"},
		{[]string{"bulk", "terminate", "--reason", "bad\x1b[2J", "--yes"}, "--reason: the reason has the control character"},
		{[]string{"bulk", "resume", "order-1", "--yes"}, `unexpected argument "order-1": stem bulk resume acts on the runs its filters match; stem resume RUN_ID acts on one run, and stem bulk continue ID goes on with a bulk action`},
		{[]string{"bulk", "terminate"}, "no terminal to confirm on: add --yes"},
		{[]string{"bulk", "status"}, "want ID"},
		{[]string{"bulk", "continue", "a", "b"}, `unexpected argument "b"`},
		{[]string{"bulk", "list", "--limit", "0"}, "--limit 0: want 1 or more"},
		{[]string{"runs", "--sort", "craeted"}, `--sort "craeted": want created (newest first) or id; did you mean "created"?`},
		{[]string{"runs", "--after", "r-1"}, `--after "r-1": not a cursor of a listing by creation time`},
		{[]string{"runs", "--where", "=3"}, `--where "=3": want NAME OP VALUE`},
		{[]string{"runs", "--top-levle"}, "unknown flag --top-levle; did you mean --top-level?"},
	} {
		_, errOut := cliAt(t, 2, append([]string{"--store", missing}, c.args...)...)
		if !strings.Contains(errOut, c.want) || !strings.HasPrefix(errOut, "stem ") {
			t.Errorf("stem %q:\n%s\nwant %q", c.args, errOut, c.want)
		}
	}
	if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused call touched the store: %v", err)
	}
}

// startApprovals starts runs of "approve" (they wait for an event) with
// the IDs given, and waits until they wait.
func (f *fixture) startApprovals(ids ...string) {
	f.t.Helper()
	for _, id := range ids {
		if _, err := runtime.Start[string, string](f.ctx, f.e, "approve", id, runtime.WithID(id)); err != nil {
			f.t.Fatal(err)
		}
	}
	for _, id := range ids {
		waitStatus(f.t, f.e, id, runtime.StatusWaiting)
	}
}

// bulkIDPattern finds the bulk action's ID in the command's first line.
var bulkIDPattern = regexp.MustCompile(`bulk action (\S+) started`)

// A dry run counts and names a few runs and changes nothing; without
// --dry-run the bulk action runs in the command, which prints its progress
// and the outcome, and bulk list and bulk status show it.
func TestBulkTerminate(t *testing.T) {
	f := newFixture(t, nil, true)
	f.startApprovals("req-1", "req-2", "req-3", "req-4", "req-5", "req-6", "req-7")
	if _, err := runtime.Start[greeting, string](f.ctx, f.e, "greet", greeting{Name: "x"}, runtime.WithID("g-1")); err != nil {
		t.Fatal(err)
	}

	out, _ := f.cli(0, "bulk", "terminate", "--workflow", "approve", "--dry-run")
	if out != "7 runs match: req-1, req-2, req-3, req-4, req-5, …\ndry run: nothing done\n" {
		t.Fatalf("dry run: %q", out)
	}
	out, _ = f.cli(0, "--json", "bulk", "terminate", "--id-prefix", "req-", "--status", "Waiting", "--dry-run")
	var count struct {
		Action  string
		Matched int
		Sample  []string
		DryRun  bool `json:"dry_run"`
	}
	if err := json.Unmarshal([]byte(out), &count); err != nil || count.Matched != 7 || len(count.Sample) != 5 || !count.DryRun || count.Action != "terminate" {
		t.Fatalf("dry run --json: %s (%v)", out, err)
	}
	if out, _ := f.cli(0, "bulk", "pause", "--workflow", "nothing", "--dry-run"); out != "no runs match the filter: nothing to do\n" {
		t.Fatalf("dry run matching nothing: %q", out)
	}
	if info, _ := f.e.Get(f.ctx, "req-1"); info.Status != runtime.StatusWaiting {
		t.Fatalf("a dry run changed req-1: %s", info.Status)
	}

	out, errOut := f.cli(0, "bulk", "terminate", "--workflow", "approve", "--reason", "duplicate orders", "--yes", "--rate", "0")
	m := bulkIDPattern.FindStringSubmatch(out)
	if m == nil || !strings.Contains(out, "7 runs match: req-1") || !strings.Contains(out, "started: terminate with no bound on its rate\n") ||
		!strings.HasSuffix(out, "  7 matched: 7 terminated, 0 skipped, 0 failed done\n") || errOut != "" {
		t.Fatalf("bulk terminate:\n%s\nstderr: %s", out, errOut)
	}
	id := m[1]
	for _, r := range []string{"req-1", "req-7"} {
		info, err := f.e.Get(f.ctx, r)
		if err != nil || info.Status != runtime.StatusTerminated || !strings.Contains(info.Err.Error(), "duplicate orders") {
			t.Fatalf("%s after the bulk action: %+v %v", r, info, err)
		}
	}
	if info, _ := f.e.Get(f.ctx, "g-1"); info.Status.Finished() && info.Status != runtime.StatusComplete {
		t.Fatalf("g-1 of another workflow: %s", info.Status)
	}

	out, _ = f.cli(0, "bulk", "list")
	if !strings.Contains(out, "ID") || !strings.Contains(out, id+"  terminate  complete  7") || !strings.Contains(out, "workflow=approve") {
		t.Fatalf("bulk list:\n%s", out)
	}
	out, _ = f.cli(0, "bulk", "status", id)
	for _, want := range []string{"bulk action  " + id + "\n", "action       terminate\n", "filter       workflow=approve\n", "reason       duplicate orders\n",
		"rate         no bound\n", "status       complete\n", "progress     7 matched: 7 terminated, 0 skipped, 0 failed done\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("bulk status lacks %q:\n%s", want, out)
		}
	}
	var j struct {
		ID, Action, Status      string
		Matched, Acted, Skipped int
		Done                    bool
	}
	out, _ = f.cli(0, "--json", "bulk", "status", id)
	if err := json.Unmarshal([]byte(out), &j); err != nil || j.ID != id || j.Acted != 7 || !j.Done || j.Status != "complete" {
		t.Fatalf("bulk status --json: %s (%v)", out, err)
	}
	checkSnakeCase(t, "bulk status", json.RawMessage(out))

	// Again: every run has ended, all skipped.
	out, _ = f.cli(0, "bulk", "terminate", "--workflow", "approve", "--yes")
	if !strings.HasSuffix(out, "  7 matched: 0 terminated, 7 skipped, 0 failed done\n") {
		t.Fatalf("second bulk terminate:\n%s", out)
	}
	// Errors on bulk status: a run that is no bulk action, and none.
	if _, errOut := f.cli(1, "bulk", "status", "req-1"); !strings.Contains(errOut, "run req-1 is a run of approve, not a bulk action") {
		t.Fatalf("bulk status of a run: %s", errOut)
	}
	if _, errOut := f.cli(1, "bulk", "status", "nope"); errOut != "stem bulk status nope: run not found in "+f.path+"\n" {
		t.Fatalf("bulk status of nothing: %q", errOut)
	}
}

// On a terminal the command asks first: no does nothing.
func TestBulkConfirm(t *testing.T) {
	f := newFixture(t, nil, true)
	f.startApprovals("req-1", "req-2")
	isTerminal = func(io.Reader) bool { return true }
	t.Cleanup(func() {
		isTerminal = func(io.Reader) bool { return false }
	})
	_, errOut := f.cliIn("n\n", 1, "bulk", "pause", "--workflow", "approve")
	if !strings.Contains(errOut, "pause 2 runs, at most 100 a second? [y/N] ") || !strings.Contains(errOut, "not confirmed: nothing done") {
		t.Fatalf("declined: %s", errOut)
	}
	if info, _ := f.e.Get(f.ctx, "req-1"); info.Status != runtime.StatusWaiting {
		t.Fatalf("declined, req-1 is %s", info.Status)
	}
	out, _ := f.cliIn("yes\n", 0, "bulk", "pause", "--workflow", "approve")
	if !strings.HasSuffix(out, "  2 matched: 2 paused, 0 skipped, 0 failed done\n") {
		t.Fatalf("confirmed:\n%s", out)
	}
	waitStatus(t, f.e, "req-2", runtime.StatusPaused)
	out, _ = f.cli(0, "bulk", "resume", "--id-prefix", "req-", "--yes")
	if !strings.HasSuffix(out, "  2 matched: 2 resumed, 0 skipped, 0 failed done\n") {
		t.Fatalf("resume:\n%s", out)
	}
	waitStatus(t, f.e, "req-2", runtime.StatusWaiting)
}

// restart-failed restarts each errored run from its failed step: the
// step before it keeps its result.
func TestBulkRestartFailed(t *testing.T) {
	f := newFixture(t, nil, true)
	for i := range 3 {
		if _, err := runtime.Start[int, string](f.ctx, f.e, "refuse", i, runtime.WithID(fmt.Sprintf("o-%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		waitStatus(t, f.e, fmt.Sprintf("o-%d", i), runtime.StatusErrored)
	}
	out, _ := f.cli(0, "bulk", "restart-failed", "--workflow", "refuse", "--status", "errored", "--yes")
	if !strings.Contains(out, "3 runs match: o-0, o-1, o-2\nrestart-failed acts on the errored ones among them\n") ||
		!strings.HasSuffix(out, "  3 matched: 3 restarted from their failed step, 0 skipped, 0 failed done\n") {
		t.Fatalf("bulk restart-failed:\n%s", out)
	}
	for i := range 3 {
		id := fmt.Sprintf("o-%d", i)
		f.eventually(func(out string) bool {
			return strings.Contains(out, "restart of 1 from stock@v1") && strings.Contains(out, "status     errored")
		}, "show", id)
		steps, err := f.e.ListSteps(f.ctx, id, 2)
		if err != nil || len(steps) < 1 || steps[0].Key != "count@v1" || steps[0].ForkedFrom != 1 {
			t.Fatalf("%s: steps of execution 2: %+v %v", id, steps, err)
		}
	}
}

// A bulk action started elsewhere waits for a worker; stem bulk continue
// carries it out.
func TestBulkContinue(t *testing.T) {
	f := newFixture(t, nil, true)
	f.startApprovals("req-1", "req-2", "req-3")
	id, err := f.e.StartBulk(f.ctx, runtime.BulkRequest{Action: runtime.BulkCancel, Filter: runtime.ListRunsQuery{Workflow: "approve"}, Reason: "closing"})
	if err != nil {
		t.Fatal(err)
	}
	out, _ := f.cli(0, "bulk", "status", id)
	if !strings.Contains(out, "status       queued\n") || !strings.Contains(out, "progress     0 matched: 0 asked to cancel, 0 skipped, 0 failed so far\n") ||
		!strings.Contains(out, "bulk continue "+id+" carries it on here") {
		t.Fatalf("bulk status of a waiting bulk action:\n%s", out)
	}
	out, _ = f.cli(0, "bulk", "continue", id)
	if !strings.HasPrefix(out, "bulk action "+id+" goes on: cancel\n") || !strings.HasSuffix(out, "  3 matched: 3 asked to cancel, 0 skipped, 0 failed done\n") {
		t.Fatalf("bulk continue:\n%s", out)
	}
	for _, r := range []string{"req-1", "req-2", "req-3"} {
		waitStatus(t, f.e, r, runtime.StatusErrored)
		if info, _ := f.e.Get(f.ctx, r); info.CancelReason != "closing" {
			t.Fatalf("%s: cancel reason %q", r, info.CancelReason)
		}
	}
	// Continuing a finished one prints it; a run that is none is refused.
	if out, _ := f.cli(0, "bulk", "continue", id); !strings.Contains(out, "3 matched: 3 asked to cancel, 0 skipped, 0 failed done") {
		t.Fatalf("bulk continue of a done one:\n%s", out)
	}
	if _, errOut := f.cli(1, "bulk", "continue", "req-1"); !strings.Contains(errOut, "not a bulk action") {
		t.Fatalf("bulk continue of a run: %s", errOut)
	}
}

// childProcess is the command run as a process of its own, to be
// interrupted as an operator does with Ctrl-C.
type childProcess struct {
	cmd  *exec.Cmd
	mu   sync.Mutex
	out  bytes.Buffer
	errw bytes.Buffer
	done chan error
}

func (p *childProcess) stdout() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

func startChild(t *testing.T, args ...string) *childProcess {
	t.Helper()
	p := &childProcess{done: make(chan error, 1)}
	p.cmd = exec.Command(os.Args[0], args...)
	p.cmd.Env = append(os.Environ(), "STEM_CLI_TEST_MAIN=1", "STEM_STORE=", "STEM_CODEC_KEY=")
	p.cmd.Stdout, p.cmd.Stderr = lockedWriter{&p.mu, &p.out}, lockedWriter{&p.mu, &p.errw}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// Ctrl-C stops a bulk action mid-way and says how to go on; stem bulk
// continue goes on with it, and every run ends restarted exactly once.
func TestBulkInterruptedAndContinued(t *testing.T) {
	f := newFixture(t, nil, true)
	const n = 12
	for i := range n {
		if _, err := runtime.Start[greeting, string](f.ctx, f.e, "greet", greeting{Name: "x"}, runtime.WithID(fmt.Sprintf("g-%02d", i))); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		waitStatus(t, f.e, fmt.Sprintf("g-%02d", i), runtime.StatusComplete)
	}
	p := startChild(t, "--store", f.path, "bulk", "restart", "--workflow", "greet", "--yes", "--rate", "4")
	progress := regexp.MustCompile(`  ([1-9]\d*) matched: \d+ restarted`)
	deadline := time.Now().Add(30 * time.Second)
	for !progress.MatchString(p.stdout()) {
		if time.Now().After(deadline) {
			t.Fatalf("no progress:\n%s", p.stdout())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := p.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	err := <-p.done
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("interrupted: %v\n%s", err, p.stdout())
	}
	m := bulkIDPattern.FindStringSubmatch(p.stdout())
	if m == nil {
		t.Fatalf("no bulk action ID:\n%s", p.stdout())
	}
	id := m[1]
	p.mu.Lock()
	errOut := p.errw.String()
	p.mu.Unlock()
	if !strings.Contains(errOut, "interrupted: bulk action "+id+" stopped after ") || !strings.Contains(errOut, "bulk continue "+id+" goes on with it") {
		t.Fatalf("interrupted: %s", errOut)
	}
	if b, err := f.e.GetBulk(f.ctx, id); err != nil || b.Status.Finished() {
		t.Fatalf("the bulk action after Ctrl-C: %+v %v", b, err)
	}

	out, _ := f.cli(0, "bulk", "continue", id)
	if !strings.HasSuffix(out, fmt.Sprintf(" done\n")) || !strings.Contains(out, fmt.Sprintf("  %d matched: ", n)) {
		t.Fatalf("bulk continue:\n%s", out)
	}
	for i := range n {
		id := fmt.Sprintf("g-%02d", i)
		waitStatus(t, f.e, id, runtime.StatusComplete)
		if info, _ := f.e.Get(f.ctx, id); info.Execution != 2 {
			t.Fatalf("%s is at execution %d, want 2: restarted once", id, info.Execution)
		}
	}
}

// With --json a bulk action prints a line of JSON for its count, then one
// per change of its progress, the last done; every name snake_case.
func TestBulkJSONLines(t *testing.T) {
	f := newFixture(t, nil, true)
	f.startApprovals("req-1", "req-2", "req-3")
	out, _ := f.cli(0, "--json", "bulk", "pause", "--workflow", "approve", "--yes")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) < 2 {
		t.Fatalf("bulk pause --json:\n%s", out)
	}
	var count struct {
		Action  string
		Matched int
		Sample  []string
		DryRun  bool `json:"dry_run"`
	}
	if err := json.Unmarshal([]byte(lines[0]), &count); err != nil || count.Matched != 3 || count.DryRun || len(count.Sample) != 3 {
		t.Fatalf("count line %s (%v)", lines[0], err)
	}
	var last struct {
		ID, Status, Filter string
		Matched, Acted     int
		Done               bool
		Errors             []string
	}
	for _, l := range lines[1:] {
		var v any
		if err := json.Unmarshal([]byte(l), &v); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		checkSnakeCase(t, "bulk pause --json", v)
		if err := json.Unmarshal([]byte(l), &last); err != nil {
			t.Fatal(err)
		}
	}
	if last.Status != "complete" || !last.Done || last.Matched != 3 || last.Acted != 3 || last.Filter != "workflow=approve" || last.Errors == nil {
		t.Fatalf("last line: %s", lines[len(lines)-1])
	}
	out, _ = f.cli(0, "--json", "bulk", "list")
	var list struct{ Bulks []struct{ ID string } }
	if err := json.Unmarshal([]byte(out), &list); err != nil || len(list.Bulks) != 1 || list.Bulks[0].ID != last.ID {
		t.Fatalf("bulk list --json: %s (%v)", out, err)
	}
}
