package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/stores/sqlitestore"
)

// TestMain lets a test run the command as a child process (to see what it
// prints on the process's own stderr, as a user would).
func TestMain(m *testing.M) {
	if os.Getenv("STEM_CLI_TEST_MAIN") == "1" {
		os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// fixture is a worker engine on a SQLite file, the store the command is
// pointed at.
type fixture struct {
	t    *testing.T
	path string
	e    *runtime.Engine
	ctx  context.Context
	stop func()
	// release unblocks the "slow" workflow's step.
	release chan struct{}
}

// newFixture opens a store and an engine on it with the test workflows
// registered; run starts it working (which also records its catalog).
func newFixture(t *testing.T, codec runtime.Codec, run bool) *fixture {
	t.Helper()
	return newFixtureWith(t, fixtureConfig{codec: codec, run: run})
}

// fixtureConfig is what a fixture's engine has beyond the test workflows.
type fixtureConfig struct {
	codec    runtime.Codec
	run      bool
	queues   []runtime.Queue
	services []runtime.Service
	// register registers more, after the test workflows.
	register func(t *testing.T, e *runtime.Engine)
}

func newFixtureWith(t *testing.T, fc fixtureConfig) *fixture {
	t.Helper()
	codec, run := fc.codec, fc.run
	t.Setenv("STEM_STORE", "")
	t.Setenv("STEM_CODEC_KEY", "")
	path := filepath.Join(t.TempDir(), "stem.db")
	store, err := sqlitestore.Open(path, sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e, err := runtime.New(runtime.Config{Store: store, PollInterval: 10 * time.Millisecond, ShutdownGrace: -1, Codec: codec, WorkerID: "test-worker", Services: fc.services})
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range fc.queues {
		if err := e.RegisterQueue(q); err != nil {
			t.Fatal(err)
		}
	}
	release := make(chan struct{})
	registerAll(t, e, release)
	if fc.register != nil {
		fc.register(t, e)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	if run {
		go func() { defer close(done); e.Run(ctx) }()
	} else {
		close(done)
	}
	f := &fixture{t: t, path: path, e: e, ctx: ctx, release: release}
	f.stop = func() { cancel(); <-done }
	t.Cleanup(func() {
		f.stop()
		e.Close()
		store.Close()
	})
	return f
}

type greeting struct {
	Name string `json:"name"`
}

type shipment struct {
	Tracking string `json:"tracking"`
}

// registerAll registers the test workflows; closing release unblocks the
// "slow" workflow's step.
func registerAll(t *testing.T, e *runtime.Engine, release <-chan struct{}) {
	t.Helper()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(runtime.Register(e, "approve", func(c *runtime.WorkflowContext, who string) (string, error) {
		if _, err := runtime.Step(c, "ask@v1", runtime.StepOptions{}, func(runtime.StepContext) (string, error) { return "asked " + who, nil }); err != nil {
			return "", err
		}
		ok, err := runtime.WaitForEvent[bool](c, "decision", "approval", 0)
		if err != nil || !ok {
			return "rejected", err
		}
		return "approved", nil
	}))
	must(runtime.RegisterEvent[bool](e, "approval"))
	must(runtime.Register(e, "greet", func(c *runtime.WorkflowContext, in greeting) (string, error) {
		return runtime.Step(c, "say@v1", runtime.StepOptions{}, func(runtime.StepContext) (string, error) { return "hello " + in.Name, nil })
	}))
	must(runtime.Register(e, "ship", func(c *runtime.WorkflowContext, order string) (string, error) {
		s, err := runtime.WaitForEvent[shipment](c, "shipped", "shipment", 0)
		return order + " " + s.Tracking, err
	}))
	must(runtime.RegisterEvent[shipment](e, "shipment"))
	// charge reserves, then panics on every attempt of its charge step,
	// which waits an hour between attempts: it is observed mid-retry.
	must(runtime.Register(e, "charge", func(c *runtime.WorkflowContext, amount int) (string, error) {
		if _, err := runtime.Step(c, "reserve@v1", runtime.StepOptions{}, func(runtime.StepContext) (int, error) { return amount, nil }); err != nil {
			return "", err
		}
		return runtime.Step(c, "charge@v1", runtime.StepOptions{Retries: 3, Backoff: time.Hour, MaxBackoff: time.Hour}, func(runtime.StepContext) (string, error) {
			panic("card declined")
		})
	}))
	must(runtime.Register(e, "refuse", func(c *runtime.WorkflowContext, n int) (string, error) {
		if _, err := runtime.Step(c, "count@v1", runtime.StepOptions{}, func(runtime.StepContext) (int, error) { return n, nil }); err != nil {
			return "", err
		}
		return runtime.Step(c, "stock@v1", runtime.StepOptions{}, func(runtime.StepContext) (string, error) {
			return "", runtime.Permanent(fmt.Errorf("out of stock\nwarehouse said: %w", errNoneLeft))
		})
	}))
	// family starts two children that wait for an event: one ended with
	// it, one abandoned.
	must(runtime.Register(e, "family", func(c *runtime.WorkflowContext, n int) (string, error) {
		if _, err := runtime.StartChild[string](c, "kid", "ship", "k"); err != nil {
			return "", err
		}
		if _, err := runtime.StartChild[string](c, "stays", "ship", "s", runtime.ParentClose(runtime.ParentCloseAbandon)); err != nil {
			return "", err
		}
		return runtime.WaitForEvent[string](c, "go", "approval", 0)
	}))
	must(runtime.Register(e, "slow", func(c *runtime.WorkflowContext, _ int) (string, error) {
		return runtime.Step(c, "wait@v1", runtime.StepOptions{}, func(sc runtime.StepContext) (string, error) {
			select {
			case <-release:
				return "released", nil
			case <-sc.Done():
				return "", sc.Err()
			}
		})
	}))
}

// errNoneLeft is a declared error: show names it beside the text.
var errNoneLeft = errors.New("none left")

func init() { runtime.DeclareError("cli.none_left", errNoneLeft) }

// cli runs the command on the fixture's store and checks its exit code.
func (f *fixture) cli(want int, args ...string) (stdout, stderr string) {
	f.t.Helper()
	return cliAt(f.t, want, append([]string{"--store", f.path}, args...)...)
}

// cliIn is cli with stdin as the command's standard input.
func (f *fixture) cliIn(stdin string, want int, args ...string) (stdout, stderr string) {
	f.t.Helper()
	return cliWith(f.t, stdin, want, append([]string{"--store", f.path}, args...)...)
}

func cliAt(t *testing.T, want int, args ...string) (stdout, stderr string) {
	t.Helper()
	return cliWith(t, "", want, args...)
}

func cliWith(t *testing.T, stdin string, want int, args ...string) (stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	if code := run(args, strings.NewReader(stdin), &out, &errOut); code != want {
		t.Fatalf("stem %v: exit %d, want %d\nstdout: %s\nstderr: %s", args, code, want, out.String(), errOut.String())
	}
	return out.String(), errOut.String()
}

// eventually polls the command until its output satisfies ok.
func (f *fixture) eventually(ok func(out string) bool, args ...string) string {
	f.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		out, _ := f.cli(0, args...)
		if ok(out) {
			return out
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("stem %v never gave the output wanted; last:\n%s", args, out)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func waitStatus(t *testing.T, e *runtime.Engine, id string, want runtime.RunStatus) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		info, err := e.Get(context.Background(), id)
		if err == nil && info.Status == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s never became %s (now %s, %v)", id, want, info.Status, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// The operator command against a SQLite file that a worker is using: list,
// show, send an event, pause, resume, terminate, and clear errors for bad
// input.
func TestOperatorCommands(t *testing.T) {
	f := newFixture(t, nil, true)
	ctx := f.ctx
	a, err := runtime.Start[string, string](ctx, f.e, "approve", "ada", runtime.WithID("req-1"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := runtime.Start[string, string](ctx, f.e, "approve", "bob", runtime.WithID("req-2"))
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{a.ID(), b.ID()} {
		waitStatus(t, f.e, id, runtime.StatusWaiting)
	}

	if out, _ := f.cli(0, "runs"); !strings.Contains(out, "req-1") || !strings.Contains(out, "waiting for approval") {
		t.Fatalf("runs:\n%s", out)
	}
	var listed struct {
		Runs []struct{ ID, Status string }
	}
	out, _ := f.cli(0, "--json", "runs", "--status", "waiting", "--sort", "id", "--limit", "1")
	if err := json.Unmarshal([]byte(out), &listed); err != nil || len(listed.Runs) != 1 || listed.Runs[0].ID != "req-1" {
		t.Fatalf("runs --json: %+v %v", listed, err)
	}
	if out, _ := f.cli(0, "show", "req-1"); !strings.Contains(out, "ask@v1") || !strings.Contains(out, `"asked ada"`) || !strings.Contains(out, "attempt 1") {
		t.Fatalf("show:\n%s", out)
	}
	f.cli(0, "send", "req-1", "approval", "true")
	if got, err := a.Result(ctx); err != nil || got != "approved" {
		t.Fatalf("after send: %q %v", got, err)
	}
	f.cli(0, "pause", "req-2")
	waitStatus(t, f.e, "req-2", runtime.StatusPaused)
	f.cli(0, "resume", "req-2")
	if out, _ := f.cli(0, "emit", "approval", "false"); !strings.Contains(out, "delivered to 1") {
		t.Fatalf("emit: %s", out)
	}
	if got, err := b.Result(ctx); err != nil || got != "rejected" {
		t.Fatalf("after emit: %q %v", got, err)
	}
	c, err := runtime.Start[string, string](ctx, f.e, "approve", "cy", runtime.WithID("req-3"))
	if err != nil {
		t.Fatal(err)
	}
	waitStatus(t, f.e, c.ID(), runtime.StatusWaiting)
	f.cli(0, "terminate", "req-3", "duplicate request")
	if _, err := c.Result(ctx); err == nil || !strings.Contains(err.Error(), "duplicate request") {
		t.Fatalf("terminated run's result: %v", err)
	}

	// Cancel: the workflow sees it; a second request changes nothing;
	// hostile input is refused with nothing changed.
	d, err := runtime.Start[string, string](ctx, f.e, "approve", "di", runtime.WithID("req-4"))
	if err != nil {
		t.Fatal(err)
	}
	waitStatus(t, f.e, d.ID(), runtime.StatusWaiting)
	if _, errOut := f.cli(2, "cancel", "req-4", "bad\x1b[2Jreason"); !strings.Contains(errOut, "control character") {
		t.Fatalf("cancel with a control character: %s", errOut)
	}
	if _, errOut := f.cli(2, "cancel", "req-4", strings.Repeat("x", 2000)); !strings.Contains(errOut, "over the limit of 1024") {
		t.Fatalf("cancel with a long reason: %s", errOut)
	}
	if _, errOut := f.cli(1, "cancel", "req-44"); !strings.Contains(errOut, "req-44") {
		t.Fatalf("cancel of an unknown run: %s", errOut)
	}
	if info, _ := f.e.Get(ctx, "req-4"); info.CancelRequested || info.Status != runtime.StatusWaiting {
		t.Fatalf("refused cancels changed the run: %+v", info)
	}
	if out, _ := f.cli(0, "cancel", "req-4", "changed my mind"); !strings.Contains(out, "cancellation requested") {
		t.Fatalf("cancel: %s", out)
	}
	if _, err := d.Result(ctx); !errors.Is(err, runtime.ErrCanceled) || !strings.Contains(err.Error(), "changed my mind") {
		t.Fatalf("cancelled run's result: %v", err)
	}
	if _, errOut := f.cli(1, "cancel", "req-4", "again"); !strings.Contains(errOut, "not allowed: the run is errored") {
		t.Fatalf("cancel of an ended run: %s", errOut)
	}
	if out, _ := f.cli(0, "show", "req-4"); !strings.Contains(out, "cancel     requested: changed my mind") {
		t.Fatalf("show of a cancelled run:\n%s", out)
	}

	// Bad input: clear errors, non-zero exits, nothing changed.
	if _, errOut := f.cli(2, "send", "req-1", "approval", "{not json"); !strings.Contains(errOut, "not valid JSON") {
		t.Fatalf("send bad json: %s", errOut)
	}
	if _, errOut := f.cli(1, "resume", "req-1"); errOut != "stem resume req-1: not allowed: the run is complete\n" {
		t.Fatalf("resume finished: %q", errOut)
	}
	if _, errOut := f.cli(2, "pause"); !strings.Contains(errOut, "want RUN_ID") {
		t.Fatalf("missing arg: %s", errOut)
	}
	if _, errOut := f.cli(1, "--store", "ftp://x", "runs"); !strings.Contains(errOut, "unknown store scheme") {
		t.Fatalf("bad store: %s", errOut)
	}
}

// No call creates a store: not the default ./stem.db, not a mistyped
// --store path, not a rejected call. A missing SQLite file is refused with
// "no Stem store at PATH".
func TestNoCallCreatesAStore(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	t.Setenv("STEM_STORE", "")
	t.Setenv("STEM_CODEC_KEY", "")
	missing := filepath.Join(dir, "typo", "stme.db")
	calls := []struct {
		want int
		args []string
	}{
		{1, []string{"runs"}},
		{1, []string{"show", "order-1"}},
		{1, []string{"start", "greet", `{"name":"ada"}`}},
		{1, []string{"send", "order-1", "approval", "true"}},
		{1, []string{"workflows"}},
		{2, []string{"runs", "--limit", "0"}},
		{2, []string{"show"}},
		{2, []string{"frobnicate"}},
		{0, []string{"help"}},
		{0, []string{"show", "--help"}},
		{1, []string{"--store", missing, "runs"}},
		{1, []string{"--store", "sqlite:" + missing, "terminate", "order-1"}},
		{2, []string{"--store", missing, "send", "order-1", "approval", "{"}},
	}
	for _, c := range calls {
		_, errOut := cliAt(t, c.want, c.args...)
		if c.want != 1 {
			continue
		}
		path := "stem.db"
		if strings.HasPrefix(c.args[0], "--store") {
			path = missing
		}
		if !strings.HasPrefix(errOut, "stem: no Stem store at "+path) || strings.Count(errOut, "\n") != 1 {
			t.Fatalf("stem %v: %q, want one line: stem: no Stem store at %s", c.args, errOut, path)
		}
	}
	if entries, err := os.ReadDir(dir); err != nil || len(entries) != 0 {
		t.Fatalf("the calls created %v (%v)", entries, err)
	}
	// $STEM_STORE is honoured the same way.
	t.Setenv("STEM_STORE", filepath.Join(dir, "env.db"))
	if _, errOut := cliAt(t, 1, "runs"); !strings.Contains(errOut, "no Stem store at "+filepath.Join(dir, "env.db")) {
		t.Fatalf("$STEM_STORE: %q", errOut)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("the calls created %v", entries)
	}
}

// An error names the command, the run and the store, behind one prefix.
func TestErrorsNameRunAndStore(t *testing.T) {
	f := newFixture(t, nil, true)
	for _, c := range [][]string{{"show", "order-1"}, {"pause", "order-1"}, {"restart", "order-1"}, {"terminate", "order-1"}, {"send", "order-1", "approval", "true"}} {
		_, errOut := f.cli(1, c...)
		if want := "stem " + c[0] + " order-1: run not found in " + f.path + "\n"; errOut != want {
			t.Fatalf("stem %v: %q, want %q", c, errOut, want)
		}
	}
	if _, errOut := f.cli(1, "start", "nope", "{}"); !strings.HasPrefix(errOut, `stem start nope: unknown workflow: "nope"`) || strings.Count(errOut, "stem:") != 0 {
		t.Fatalf("start unknown: %q", errOut)
	}
}

// Wrong calls exit 2 with the command's usage, before anything is opened
// (the store here does not exist, which would be exit 1).
func TestUsageErrors(t *testing.T) {
	t.Setenv("STEM_STORE", "")
	t.Setenv("STEM_CODEC_KEY", "")
	missing := filepath.Join(t.TempDir(), "none.db")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"runs", "--limit", "0"}, "--limit 0: want 1 or more"},
		{[]string{"runs", "--limit", "-1"}, "--limit -1: want 1 or more"},
		{[]string{"runs", "extra"}, `unexpected argument "extra"`},
		{[]string{"show", "a", "b"}, `unexpected argument "b"`},
		{[]string{"terminate", "a", "why", "more"}, `unexpected argument "more"`},
		{[]string{"cancel", "a", "why", "more"}, `unexpected argument "more"`},
		{[]string{"cancel"}, "want RUN_ID"},
		{[]string{"runs", "--bogus"}, "unknown flag --bogus"},
		{[]string{"runs", "--stauts", "waiting"}, "unknown flag --stauts; did you mean --status?"},
		{[]string{"show", "a", "--execution", "0"}, "--execution 0: want 1 or more"},
		{[]string{"show", "a", "--execution", "x"}, `--execution "x": want a whole number`},
		{[]string{"bench", "--poll", "5"}, `--poll "5": want a duration such as 500ms, 5s or 1m`},
		{[]string{"runs", "--json=maybe"}, `--json "maybe": want true or false`},
		{[]string{"restart", "a", "--form", "x"}, "unknown flag --form; did you mean --from?"},
		{[]string{"emit", "t"}, "want TOPIC JSON"},
	} {
		_, errOut := cliAt(t, 2, append([]string{"--store", missing}, c.args...)...)
		if !strings.HasPrefix(errOut, "stem "+c.args[0]+": ") || !strings.Contains(errOut, c.want) || !strings.Contains(errOut, "usage: stem "+c.args[0]+" ") {
			t.Fatalf("stem %v:\n%s\nwant %q and the command's usage", c.args, errOut, c.want)
		}
	}
	if _, errOut := cliAt(t, 2, "--stor", "x.db", "runs"); !strings.Contains(errOut, "unknown flag --stor; did you mean --store?") || !strings.Contains(errOut, "usage: stem ") {
		t.Fatalf("unknown global flag: %s", errOut)
	}
	if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused call touched the store: %v", err)
	}
}

// Statuses are read in any case; an unknown one lists the valid ones.
func TestStatusCaseInsensitive(t *testing.T) {
	f := newFixture(t, nil, true)
	a, err := runtime.Start[string, string](f.ctx, f.e, "approve", "ada", runtime.WithID("req-1"))
	if err != nil {
		t.Fatal(err)
	}
	waitStatus(t, f.e, a.ID(), runtime.StatusWaiting)
	for _, s := range []string{"WAITING", "Waiting", "waiting"} {
		if out, _ := f.cli(0, "runs", "--status", s); !strings.Contains(out, "req-1") {
			t.Fatalf("--status %s:\n%s", s, out)
		}
	}
	if out, _ := f.cli(0, "runs", "--status", "ERRORED"); out != "no runs match\n" {
		t.Fatalf("--status ERRORED: %q", out)
	}
	_, errOut := f.cli(2, "runs", "--status", "done")
	if !strings.Contains(errOut, `unknown status "done"; want one of queued, running, paused, waiting, complete, errored, terminated`) {
		t.Fatalf("unknown status: %s", errOut)
	}
}

// Help is asked for in three ways and exits 0 on stdout; an unknown command
// suggests the nearest.
func TestHelp(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"help"}, "usage: stem [--store URL]"},
		{[]string{"--help"}, "usage: stem [--store URL]"},
		{[]string{"-h"}, "usage: stem [--store URL]"},
		{[]string{"help", "show"}, "usage: stem show RUN_ID [--execution N]"},
		{[]string{"help", "catalog"}, "usage: stem workflows"},
		{[]string{"show", "--help"}, "usage: stem show RUN_ID [--execution N]"},
		{[]string{"restart", "-h"}, "--from STEP_KEY"},
		{[]string{"runs", "--help"}, "--limit N"},
	} {
		out, errOut := cliAt(t, 0, c.args...)
		if !strings.Contains(out, c.want) || errOut != "" {
			t.Fatalf("stem %v: stdout:\n%s\nstderr: %s\nwant %q", c.args, out, errOut, c.want)
		}
	}
	// Every command's help names its flags and is true to the usage.
	out, _ := cliAt(t, 0, "help")
	for _, c := range commands {
		if !strings.Contains(out, "  "+c.name) {
			t.Fatalf("stem help does not list %s:\n%s", c.name, out)
		}
		// A switch's help has no default: it is off unless given.
		if h, _ := cliAt(t, 0, "help", c.name); strings.Contains(h, "(default false)") {
			t.Errorf("stem help %s shows a switch's default:\n%s", c.name, h)
		}
	}
	for _, c := range []struct{ typo, want string }{{"shwo", "show"}, {"run", "runs"}, {"restrat", "restart"}, {"catalgo", "catalog"}, {"termnate", "terminate"}, {"hlep", "help"}, {"wrokers", "workers"}} {
		_, errOut := cliAt(t, 2, c.typo)
		if !strings.Contains(errOut, `unknown command "`+c.typo+`"; did you mean "`+c.want+`"?`) {
			t.Fatalf("stem %s: %s", c.typo, errOut)
		}
	}
	if _, errOut := cliAt(t, 2, "frobnicate"); !strings.Contains(errOut, `unknown command "frobnicate"; the commands are runs, show`) {
		t.Fatalf("stem frobnicate: %s", errOut)
	}
	if _, errOut := cliAt(t, 2, "help", "shwo"); !strings.Contains(errOut, `did you mean "show"?`) {
		t.Fatalf("stem help shwo: %s", errOut)
	}
}

var moreLine = regexp.MustCompile(`(?m)^more: (.*)$`)

// The "more:" line under a page repeats the store and the filters, so
// running it gives the next page of the same list.
func TestMoreHintKeepsFilters(t *testing.T) {
	f := newFixture(t, nil, false)
	for _, id := range []string{"g-1", "g-2", "g-3"} {
		if _, err := runtime.Start[greeting, string](f.ctx, f.e, "greet", greeting{Name: id}, runtime.WithID(id)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := runtime.Start[string, string](f.ctx, f.e, "approve", "x", runtime.WithID("a-1")); err != nil {
		t.Fatal(err)
	}
	out, _ := f.cli(0, "runs", "--workflow", "greet", "--status", "QUEUED", "--sort", "id", "--limit", "2")
	m := moreLine.FindStringSubmatch(out)
	want := "stem --store " + shellQuote(f.path) + " runs --workflow greet --status queued --sort id --limit 2 --after g-2"
	if m == nil || m[1] != want {
		t.Fatalf("page 1:\n%s\nwant more: %s", out, want)
	}
	if strings.ContainsAny(f.path, " '\"") {
		t.Skip("the temp path needs quoting; not splitting it here")
	}
	next := strings.Fields(m[1])[1:]
	out, _ = cliAt(t, 0, next...)
	if !strings.Contains(out, "g-3") || strings.Contains(out, "g-1") || strings.Contains(out, "a-1") || moreLine.MatchString(out) {
		t.Fatalf("page 2 (stem %v):\n%s", next, out)
	}
	// With the store from $STEM_STORE, the line relies on it too.
	t.Setenv("STEM_STORE", f.path)
	out, _ = cliAt(t, 0, "runs", "--sort", "id", "--limit", "1")
	if m := moreLine.FindStringSubmatch(out); m == nil || m[1] != "stem runs --sort id --limit 1 --after a-1" {
		t.Fatalf("page with $STEM_STORE:\n%s", out)
	}
}

var snakeCase = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)

// Every --json document uses snake_case names (users' payloads and schemas
// excepted, which are theirs).
func TestJSONNamingStyle(t *testing.T) {
	f := newFixture(t, nil, true)
	ch, err := runtime.Start[int, string](f.ctx, f.e, "charge", 5, runtime.WithID("c-1"))
	if err != nil {
		t.Fatal(err)
	}
	f.eventually(func(out string) bool { return strings.Contains(out, "retrying") }, "show", ch.ID())
	f.cli(0, "restart", "c-1")
	if _, err := runtime.Start[string, string](f.ctx, f.e, "approve", "ada", runtime.WithID("req-1")); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, f.e, "req-1", runtime.StatusWaiting)
	docs := map[string][]string{
		"runs":      {"runs"},
		"show":      {"show", "c-1"},
		"show old":  {"show", "c-1", "--execution", "1"},
		"workflows": {"workflows"},
		"start":     {"start", "greet", `{"name":"ada"}`, "--id", "g-1"},
		"pause":     {"pause", "req-1"},
		"emit":      {"emit", "shipment", `{"tracking":"T"}`},
	}
	for name, args := range docs {
		out, _ := f.cli(0, append([]string{"--json"}, args...)...)
		var v any
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			t.Fatalf("%s: not JSON: %v\n%s", name, err, out)
		}
		checkSnakeCase(t, name, v)
	}
}

// checkSnakeCase checks that every name in a decoded JSON document is
// snake_case, users' payloads and schemas excepted.
func checkSnakeCase(t *testing.T, name string, v any) {
	t.Helper()
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if !snakeCase.MatchString(k) {
					t.Errorf("%s: name %s.%s is not snake_case", name, path, k)
				}
				switch k {
				case "output", "input", "input_schema", "output_schema", "payload_schema", "request", "reply", "value", "request_schema", "reply_schema":
					continue
				}
				walk(path+"."+k, x)
			}
		case []any:
			for _, x := range v {
				walk(path+"[]", x)
			}
		}
	}
	walk("", v)
}

// An empty result says so.
func TestEmptyResults(t *testing.T) {
	f := newFixture(t, nil, false)
	if out, _ := f.cli(0, "runs"); out != "no runs\n" {
		t.Fatalf("runs: %q", out)
	}
	if out, _ := f.cli(0, "runs", "--workflow", "greet"); out != "no runs match\n" {
		t.Fatalf("runs --workflow: %q", out)
	}
	if out, _ := f.cli(0, "workflows"); !strings.HasPrefix(out, "no workflows or event topics recorded") {
		t.Fatalf("workflows: %q", out)
	}
	if out, _ := f.cli(0, "--json", "runs"); !strings.Contains(out, `"runs": []`) {
		t.Fatalf("runs --json: %q", out)
	}
	if _, err := runtime.Start[greeting, string](f.ctx, f.e, "greet", greeting{Name: "ada"}, runtime.WithID("g-1")); err != nil {
		t.Fatal(err)
	}
	if out, _ := f.cli(0, "show", "g-1"); !strings.Contains(out, "steps of execution 1\n  no steps yet\n") {
		t.Fatalf("show:\n%s", out)
	}
	if out, _ := f.cli(0, "--json", "show", "g-1"); !strings.Contains(out, `"steps": []`) {
		t.Fatalf("show --json:\n%s", out)
	}
}

// runChild runs the command as a child process, to see everything it
// prints, the Redis client's own logs included.
func runChild(t *testing.T, args ...string) (code int, stdout, stderr string, took time.Duration) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "STEM_CLI_TEST_MAIN=1", "STEM_STORE=", "STEM_CODEC_KEY=")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	start := time.Now()
	err := cmd.Run()
	took = time.Since(start)
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), out.String(), errOut.String(), took
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0, out.String(), errOut.String(), took
}

// A store that does not answer is one line on stderr, exit 1, soon.
func TestConnectionFailureIsOneLine(t *testing.T) {
	for _, url := range []string{"redis://127.0.0.1:1/0", "postgres://postgres@127.0.0.1:1/stem?sslmode=disable"} {
		code, out, errOut, took := runChild(t, "--store", url, "runs")
		if code != 1 || out != "" || strings.Count(errOut, "\n") != 1 || !strings.HasPrefix(errOut, "stem: cannot open the store "+url+": ") || !strings.Contains(errOut, "refused") {
			t.Fatalf("%s: exit %d\nstdout: %q\nstderr: %q", url, code, out, errOut)
		}
		if took > 20*time.Second {
			t.Fatalf("%s: took %v", url, took)
		}
	}
	code, _, errOut, _ := runChild(t, "--store", "redis://:secret@127.0.0.1:1/0", "runs")
	if code != 1 || strings.Contains(errOut, "secret") {
		t.Fatalf("the password leaked or exit %d: %q", code, errOut)
	}
}

// On Redis the command prints its result and nothing else: no warning
// about the server's persistence settings (that is the worker's to log).
func TestRedisPrintsNoWarnings(t *testing.T) {
	u := os.Getenv("STEM_TEST_REDIS_URL")
	if u == "" {
		t.Skip("STEM_TEST_REDIS_URL not set")
	}
	sep := "?"
	if strings.Contains(u, "?") {
		sep = "&"
	}
	prefix := "stem-cli-test-" + strings.ReplaceAll(time.Now().Format("150405.000000000"), ".", "") + ":"
	u += sep + "stem_prefix=" + prefix
	cleanRedisPrefix(t, prefix)
	// The prefix holds no store until stem init makes it one.
	if code, out, errOut, _ := runChild(t, "--store", u, "init"); code != 0 || !strings.HasPrefix(out, "created a Stem store at ") || errOut != "" {
		t.Fatalf("init: exit %d\nstdout: %q\nstderr: %q", code, out, errOut)
	}
	code, out, errOut, _ := runChild(t, "--store", u, "runs")
	if code != 0 || out != "no runs\n" || errOut != "" {
		t.Fatalf("exit %d\nstdout: %q\nstderr: %q", code, out, errOut)
	}
}

// start, send and emit go through the catalog the worker recorded: a
// payload that does not match the worker's type, an unknown topic or a
// reserved one is refused and nothing is written.
func TestStartSendEmitChecked(t *testing.T) {
	f := newFixture(t, nil, true)
	f.eventually(func(out string) bool { return strings.Contains(out, "greet") }, "workflows")
	out, _ := f.cli(0, "workflows")
	for _, want := range []string{"greet  version 1  (worker test-worker", "input   {name string}", "event topics", "shipment", "payload  {tracking string}"} {
		if !strings.Contains(out, want) {
			t.Fatalf("workflows lacks %q:\n%s", want, out)
		}
	}
	// The engine records its catalog again at its first sweep, some random
	// moment within a minute of its start, with a new time: the alias must
	// print the same, but for when each entry was recorded.
	recorded := regexp.MustCompile(`, \d{4}-\d\d-\d\dT[0-9:.]+Z\)`)
	if alias, _ := f.cli(0, "catalog"); recorded.ReplaceAllString(alias, ", T)") != recorded.ReplaceAllString(out, ", T)") {
		t.Fatalf("catalog differs from workflows:\n%s\nworkflows printed:\n%s", alias, out)
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"start", "greet", `{"name":5}`}, "stem start greet: payload does not decode: input of greet"},
		{[]string{"start", "greet", `[1,2]`}, "stem start greet: payload does not decode"},
		{[]string{"start", "gret", `{}`}, `stem start gret: unknown workflow: "gret": no engine that shares this store serves it (known: `},
	} {
		if _, errOut := f.cli(1, c.args...); !strings.HasPrefix(errOut, c.want) || strings.Count(errOut, "\n") != 1 {
			t.Fatalf("stem %v: %q, want %q", c.args, errOut, c.want)
		}
	}
	if out, _ := f.cli(0, "runs"); out != "no runs\n" {
		t.Fatalf("a refused start wrote a run:\n%s", out)
	}
	out, _ = f.cli(0, "start", "greet", `{"name":"ada"}`, "--id", "g-1")
	if !strings.HasPrefix(out, "g-1: started") {
		t.Fatalf("start: %q", out)
	}
	waitStatus(t, f.e, "g-1", runtime.StatusComplete)
	if out, _ := f.cli(0, "show", "g-1"); !strings.Contains(out, `"hello ada"`) {
		t.Fatalf("show started run:\n%s", out)
	}
	if out, _ := f.cli(0, "start", "greet", `{"name":"bob"}`, "--id", "g-1"); !strings.Contains(out, "g-1: exists already (complete)") {
		t.Fatalf("start existing: %q", out)
	}
	if _, errOut := f.cli(1, "start", "approve", `"x"`, "--id", "g-1"); !strings.Contains(errOut, "run ID g-1 is taken by a run of workflow greet") {
		t.Fatalf("start taken: %q", errOut)
	}
	// The start policies and keys: the store judges them.
	if _, errOut := f.cli(1, "start", "greet", `{"name":"bob"}`, "--id", "g-1", "--if-ended", "reject"); !strings.Contains(errOut, `run "g-1" has ended (complete)`) {
		t.Fatalf("start --if-ended reject: %q", errOut)
	}
	if _, errOut := f.cli(2, "start", "greet", `{"name":"bob"}`, "--id", "g-1", "--if-ended", "resue"); !strings.Contains(errOut, `--if-ended "resue": want reject, return, reuse, reuse-failed (did you mean "reuse"?)`) {
		t.Fatalf("start --if-ended resue: %q", errOut)
	}
	if _, errOut := f.cli(2, "start", "greet", `{"name":"bob"}`, "--if-exists", "fail"); !strings.Contains(errOut, "give --id") {
		t.Fatalf("start --if-exists without --id: %q", errOut)
	}
	if out, _ := f.cli(0, "start", "greet", `{"name":"bob"}`, "--id", "g-1", "--if-ended", "reuse"); !strings.HasPrefix(out, "g-1: started") {
		t.Fatalf("start --if-ended reuse: %q", out)
	}
	waitStatus(t, f.e, "g-1", runtime.StatusComplete)
	if out, _ := f.cli(0, "show", "g-1"); !strings.Contains(out, `"hello bob"`) {
		t.Fatalf("show the run that reused g-1:\n%s", out)
	}
	out, _ = f.cli(0, "start", "ship", `"order-7"`, "--id", "s-1", "--singleton", "one-ship")
	if !strings.HasPrefix(out, "s-1: started") {
		t.Fatalf("start --singleton: %q", out)
	}
	if out, _ := f.cli(0, "start", "ship", `"order-8"`, "--id", "s-2", "--singleton", "one-ship"); !strings.HasPrefix(out, "s-1: joined") {
		t.Fatalf("start --singleton while s-1 waits: %q", out)
	}
	if _, errOut := f.cli(2, "start", "ship", `"order-8"`, "--debounce", "k"); !strings.Contains(errOut, "want KEY=DUR") {
		t.Fatalf("start --debounce k: %q", errOut)
	}
	f.cli(0, "terminate", "s-1")
	out, _ = f.cli(0, "start", "ship", `"order-9"`)
	id := strings.TrimSuffix(strings.Fields(out)[0], ":")
	waitStatus(t, f.e, id, runtime.StatusWaiting)

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"send", id, "shipment", `{"tracking":123}`}, "payload does not decode: payload of event shipment"},
		{[]string{"send", id, "shipment", `[1,2,3]`}, "payload does not decode"},
		{[]string{"send", id, "shipments", `{}`}, `event topic "shipments": no engine that shares this store awaits it (known: approval, shipment)`},
		{[]string{"send", id, "stem.child/x/y", `{}`}, `event topic "stem.child/x/y": topics starting with "stem." are reserved`},
		{[]string{"emit", "shipment", `{"tracking":true}`}, "payload does not decode"},
		{[]string{"emit", "stem.x", `{}`}, "are reserved"},
	} {
		_, errOut := f.cli(1, c.args...)
		if !strings.HasPrefix(errOut, "stem "+c.args[0]+" "+c.args[1]+": ") || !strings.Contains(errOut, c.want) {
			t.Fatalf("stem %v: %q, want %q", c.args, errOut, c.want)
		}
	}
	if out, _ := f.cli(0, "show", id); !strings.Contains(out, "waiting for shipment") || strings.Contains(out, "attempt 1") {
		t.Fatalf("a refused event reached the run:\n%s", out)
	}
	f.cli(0, "send", id, "shipment", `{"tracking":"T-1"}`)
	waitStatus(t, f.e, id, runtime.StatusComplete)
	if out, _ := f.cli(0, "show", id); !strings.Contains(out, `"order-9 T-1"`) {
		t.Fatalf("after send:\n%s", out)
	}
}

// stem show on a run observed mid-retry prints its executions, its steps in
// execution order with their status, and each attempt with its error (a
// panic's stack shortened to its first line, whole with --json); restart
// --from keeps the steps before and starts a new execution, the old one
// still readable.
func TestShowMidRetryAndRestartFrom(t *testing.T) {
	f := newFixture(t, nil, true)
	if _, err := runtime.Start[int, string](f.ctx, f.e, "charge", 5, runtime.WithID("c-1")); err != nil {
		t.Fatal(err)
	}
	// The failed attempt is recorded before the run parks for its backoff:
	// wait for both.
	out := f.eventually(func(out string) bool { return has(out, "retrying") && has(out, "status     waiting") }, "show", "c-1")
	for _, want := range []string{
		"status     waiting", // parked for the hour's backoff (Config.ParkRetriesAfter)
		"detail     retrying step charge@v1 at ",
		"execution  1, started ",
		"executions\n  #  STARTED",
		"steps of execution 1",
		"reserve@v1  step  complete",
		"charge@v1   step  retrying  next attempt at ",
		`error: step "charge@v1" panicked: card declined …`,
	} {
		if !has(out, want) {
			t.Fatalf("show lacks %q:\n%s", want, out)
		}
	}
	listed := out[strings.Index(out, "steps of execution 1"):]
	if strings.Index(listed, "reserve@v1") > strings.Index(listed, "charge@v1") || has(out, "goroutine") {
		t.Fatalf("show: steps out of order, or the stack printed:\n%s", out)
	}
	js, _ := f.cli(0, "--json", "show", "c-1")
	var doc struct {
		Steps []struct {
			Key, Status   string
			NextAttemptAt *time.Time `json:"next_attempt_at"`
			Attempts      []struct {
				Number int
				Error  string
			}
		}
	}
	if err := json.Unmarshal([]byte(js), &doc); err != nil || len(doc.Steps) != 2 || doc.Steps[1].Status != "retrying" || doc.Steps[1].NextAttemptAt == nil ||
		len(doc.Steps[1].Attempts) != 1 || !strings.Contains(doc.Steps[1].Attempts[0].Error, "goroutine") {
		t.Fatalf("show --json (%v):\n%s", err, js)
	}

	// A step mid-retry has no result to restart from; an unknown one is
	// named with those that have one.
	if _, errOut := f.cli(1, "restart", "c-1", "--from", "charge@v1"); errOut != "stem restart c-1: step \"charge@v1\" has no result in the run's current execution yet: restart from a step with one (reserve@v1), or from the top\n" {
		t.Fatalf("restart from a retrying step: %q", errOut)
	}
	if _, errOut := f.cli(1, "restart", "c-1", "--from", "charge@v2"); errOut != "stem restart c-1: no step \"charge@v2\" with a result in the run's current execution (those with one: reserve@v1)\n" {
		t.Fatalf("restart from an unknown step: %q", errOut)
	}
	if out, _ := f.cli(0, "restart", "c-1"); out != "c-1: restarted from the top as execution 2\n" {
		t.Fatalf("restart: %q", out)
	}
	out = f.eventually(func(out string) bool { return has(out, "retrying") }, "show", "c-1")
	for _, want := range []string{"execution  2, started ", "restart from the top", "steps of execution 2"} {
		if !has(out, want) {
			t.Fatalf("show after restart lacks %q:\n%s", want, out)
		}
	}
	old, _ := f.cli(0, "show", "c-1", "--execution", "1")
	if !has(old, "steps of execution 1") || !has(old, "charge@v1   step  interrupted") || !has(old, "card declined") {
		t.Fatalf("show --execution 1:\n%s", old)
	}
	if _, errOut := f.cli(1, "show", "c-1", "--execution", "3"); errOut != "stem show c-1: the run has no execution 3 (it has 1 to 2)\n" {
		t.Fatalf("show --execution 3: %q", errOut)
	}
	f.cli(0, "terminate", "c-1")

	// A failed step, restarted from: the step before it is kept.
	if _, err := runtime.Start[int, string](f.ctx, f.e, "refuse", 1, runtime.WithID("r-1")); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, f.e, "r-1", runtime.StatusErrored)
	out, _ = f.cli(0, "show", "r-1")
	if !has(out, "stock@v1   step  failed    error: [cli.none_left] out of stock …") || has(out, "warehouse said") || !has(out, "errored   [cli.none_left] out of stock …") {
		t.Fatalf("show failed step:\n%s", out)
	}
	if out, _ := f.cli(0, "restart", "r-1", "--from", "stock@v1"); out != "r-1: restarted from stock@v1 as execution 2\n" {
		t.Fatalf("restart --from: %q", out)
	}
	out = f.eventually(func(out string) bool { return has(out, "status     errored") }, "show", "r-1")
	for _, want := range []string{"restart of 1 from stock@v1", "steps of execution 2", "count@v1   step  complete (kept from 1)", "stock@v1   step  failed"} {
		if !has(out, want) {
			t.Fatalf("show after restart --from lacks %q:\n%s", want, out)
		}
	}

	// A step running now.
	if _, err := runtime.Start[int, string](f.ctx, f.e, "slow", 1, runtime.WithID("s-1")); err != nil {
		t.Fatal(err)
	}
	f.eventually(func(out string) bool {
		return has(out, "wait@v1  step  running  attempt 1 running since ")
	}, "show", "s-1")
	close(f.release)
	waitStatus(t, f.e, "s-1", runtime.StatusComplete)
}

// With the workers' codec key (flag, file or $STEM_CODEC_KEY) the command
// writes payloads sealed and shows them opened; without it, it says they
// are sealed.
func TestCodecKey(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	codec, err := runtime.NewAESGCMCodec(key)
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, codec, true)
	f.eventually(func(out string) bool { return strings.Contains(out, "greet") }, "workflows")
	hexKey := hex.EncodeToString(key)
	f.cli(0, "--codec-key", hexKey, "start", "greet", `{"name":"ada"}`, "--id", "g-1")
	waitStatus(t, f.e, "g-1", runtime.StatusComplete)
	if got, err := runtime.Get[string](f.ctx, f.e, "greet", "g-1"); err != nil {
		t.Fatal(err)
	} else if res, err := got.Result(f.ctx); err != nil || res != "hello ada" {
		t.Fatalf("the worker read %q, %v", res, err)
	}
	store, err := sqlitestore.Open(f.path, sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := store.GetRun(f.ctx, "g-1")
	store.Close()
	if err != nil || json.Valid(rec.Input) || bytes.Contains(rec.Input, []byte("ada")) {
		t.Fatalf("the input was written in the clear: %q %v", rec.Input, err)
	}

	keyFile := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(keyFile, []byte(base64.StdEncoding.EncodeToString(key)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"--codec-key", hexKey, "show", "g-1"},
		{"show", "g-1", "--codec-key", base64.RawURLEncoding.EncodeToString(key)},
		{"--codec-key-file", keyFile, "show", "g-1"},
	} {
		if out, _ := f.cli(0, args...); !strings.Contains(out, `"hello ada"`) {
			t.Fatalf("stem %v:\n%s", args, out)
		}
	}
	t.Setenv("STEM_CODEC_KEY", hexKey)
	if out, _ := f.cli(0, "show", "g-1"); !strings.Contains(out, `"hello ada"`) {
		t.Fatalf("with $STEM_CODEC_KEY:\n%s", out)
	}
	t.Setenv("STEM_CODEC_KEY", "")
	if out, _ := f.cli(0, "show", "g-1"); !strings.Contains(out, "(sealed: pass the workers' --codec-key to read it)") || strings.Contains(out, "hello") {
		t.Fatalf("without the key:\n%s", out)
	}
	// Error texts are sealed too.
	f.cli(0, "--codec-key", hexKey, "start", "refuse", "1", "--id", "r-1")
	waitStatus(t, f.e, "r-1", runtime.StatusErrored)
	if out, _ := f.cli(0, "show", "r-1"); !strings.Contains(out, "error: (sealed error: pass the workers' --codec-key to read it)") || strings.Contains(out, "out of stock") {
		t.Fatalf("a sealed error without the key:\n%s", out)
	}
	if out, _ := f.cli(0, "show", "r-1", "--codec-key", hexKey); !strings.Contains(out, "error: out of stock") || strings.Contains(out, "sealed") {
		t.Fatalf("a sealed error with the key:\n%s", out)
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--codec-key", "abcd", "show", "g-1"}, "is 3 bytes; want 16, 24 or 32"},
		{[]string{"--codec-key", "not a key!", "show", "g-1"}, "neither hex nor base64"},
		{[]string{"--codec-key", hexKey, "--codec-key-file", keyFile, "show", "g-1"}, "not both"},
		{[]string{"--codec-key-file", keyFile + ".missing", "show", "g-1"}, "--codec-key-file"},
	} {
		if _, errOut := f.cli(2, c.args...); !strings.Contains(errOut, c.want) || strings.Contains(errOut, hexKey) {
			t.Fatalf("stem %v: %q, want %q", c.args, errOut, c.want)
		}
	}
}

var spaces = regexp.MustCompile(` +`)

// has reports whether a table contains want, however its columns align.
func has(out, want string) bool {
	return strings.Contains(spaces.ReplaceAllString(out, " "), spaces.ReplaceAllString(want, " "))
}

// TestJSONFromStdinAndFile: a payload too long for a command line is read
// from standard input ("-") or a file ("@PATH"); one over the payload limit,
// a missing file or invalid JSON is refused before anything is written.
func TestJSONFromStdinAndFile(t *testing.T) {
	f := newFixture(t, nil, true)
	f.eventually(func(out string) bool { return strings.Contains(out, "shipment") }, "workflows")

	out, _ := f.cliIn(`"order-1"`, 0, "start", "ship", "-", "--id", "s-1")
	if !strings.HasPrefix(out, "s-1: started") {
		t.Fatalf("start from stdin: %q", out)
	}
	waitStatus(t, f.e, "s-1", runtime.StatusWaiting)

	dir := t.TempDir()
	big := filepath.Join(dir, "big.json")
	if err := os.WriteFile(big, []byte(`{"tracking":"`+strings.Repeat("x", runtime.DefaultMaxPayloadBytes)+`"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		stdin string
		code  int
		args  []string
		want  string
	}{
		{"", 1, []string{"send", "s-1", "shipment", "@" + big}, "stem send s-1: payload too large: the payload from " + big + " is more than 2097152 bytes"},
		{`{"tracking":"` + strings.Repeat("x", runtime.DefaultMaxPayloadBytes) + `"}`, 1, []string{"emit", "shipment", "-"}, "stem emit shipment: payload too large: the payload from standard input is more than"},
		{"", 2, []string{"send", "s-1", "shipment", "@" + filepath.Join(dir, "nope.json")}, "stem send: cannot read the payload from " + filepath.Join(dir, "nope.json") + ": no such file or directory"},
		{"{\"tracking\":\n", 2, []string{"send", "s-1", "shipment", "-"}, `stem send: the payload read from standard input is not valid JSON: {"tracking":`},
	} {
		if _, errOut := f.cliIn(c.stdin, c.code, c.args...); !strings.HasPrefix(errOut, c.want) {
			t.Fatalf("stem %v: %q, want %q", c.args, errOut, c.want)
		}
	}
	if st, _ := f.e.Get(f.ctx, "s-1"); st.Status != runtime.StatusWaiting {
		t.Fatalf("after refused payloads the run is %s, want waiting", st.Status)
	}

	ok := filepath.Join(dir, "ok.json")
	if err := os.WriteFile(ok, []byte(`{"tracking":"T-7"}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f.cli(0, "send", "s-1", "shipment", "@"+ok)
	waitStatus(t, f.e, "s-1", runtime.StatusComplete)
	if out, _ := f.cli(0, "show", "s-1"); !strings.Contains(out, `"order-1 T-7"`) {
		t.Fatalf("the run did not see the file's payload:\n%s", out)
	}
}

// TestBench: stem bench runs every workload in both start styles on the
// store, checks every result, and reports each; its runs stay in the store,
// complete; a bad flag is refused before anything is opened.
func TestBench(t *testing.T) {
	f := newFixture(t, nil, false)
	out, _ := f.cli(0, "bench", "--runs", "20", "--steps", "3", "--sleep", "50ms", "--samples", "3", "--probe", "50ms")
	for _, want := range []string{
		"stem bench on " + f.path + ", 32 workers\nceiling  one-row commits, synchronous=NORMAL, 1 connection (of 32 asked: the store's most)  ",
		"w1  20 runs × 3 steps, batch", "w1  20 runs × 3 steps, goroutines", "× ceiling\n",
		"w2  3 runs of 3 steps one at a time  p50 ",
		"w3  20 runs sleeping 50ms, batch", "w3  20 runs sleeping 50ms, goroutines",
		"every result checked",
	} {
		if !strings.Contains(out, want) {
			t.Fatalf("bench output lacks %q:\n%s", want, out)
		}
	}
	type jsonResult struct {
		Workload         string  `json:"workload"`
		Start            string  `json:"start"`
		Runs             int     `json:"runs"`
		StepsPerSecond   float64 `json:"steps_per_second"`
		CeilingRatio     float64 `json:"ceiling_ratio"`
		Commit           string  `json:"commit"`
		Connections      int     `json:"connections"`
		CommitsPerSecond float64 `json:"commits_per_second"`
		P50Ms            float64 `json:"p50_ms"`
		Note             string  `json:"note"`
	}
	var rep struct {
		Processes    int          `json:"processes"`
		Results      []jsonResult `json:"results"`
		PeakRSSBytes int64        `json:"peak_rss_bytes"`
	}
	decode := func(js string) {
		t.Helper()
		rep.Results = nil
		if err := json.Unmarshal([]byte(js), &rep); err != nil {
			t.Fatalf("bench --json: %v\n%s", err, js)
		}
	}
	js, _ := f.cli(0, "--json", "bench", "--workload", "W1", "--start", "goroutines", "--runs", "10", "--steps", "2")
	decode(js)
	if len(rep.Results) != 1 || rep.Results[0].Workload != "w1" || rep.Results[0].Start != "goroutines" || rep.Results[0].Runs != 10 || rep.Results[0].StepsPerSecond <= 0 || rep.Processes != 1 {
		t.Fatalf("bench --json results %+v, want one w1 goroutines result of 10 runs", rep.Results)
	}
	js, _ = f.cli(0, "--json", "bench", "--workload", "w1, Ceiling", "--start", "batch", "--probe", "50ms", "--runs", "10", "--steps", "2")
	decode(js)
	if len(rep.Results) != 2 || rep.Results[0].Workload != "ceiling" || rep.Results[1].Workload != "w1" || rep.Results[1].CeilingRatio <= 0 {
		t.Fatalf("bench --json --workload 'w1, Ceiling': %+v, want the ceiling, then w1 with its ratio to it", rep.Results)
	}
	js, _ = f.cli(0, "--json", "bench", "--workload", "ceiling", "--probe", "50ms", "--concurrency", "1")
	decode(js)
	if len(rep.Results) != 1 || rep.Results[0].Commit != "one-row commits, synchronous=NORMAL" || rep.Results[0].Connections != 1 || rep.Results[0].CommitsPerSecond <= 0 || rep.Results[0].P50Ms <= 0 {
		t.Fatalf("bench --json --workload ceiling: %+v, want the one probe of the file", rep.Results)
	}
	// At one worker, with the ceiling measured, each figure comes with the
	// last release's beside it, and W2's median in commits of the store.
	out, _ = f.cli(0, "bench", "--workload", "ceiling,w1,w2", "--start", "batch", "--probe", "50ms", "--concurrency", "1", "--runs", "5", "--steps", "2", "--samples", "3")
	for _, want := range []string{"(last release, " + lastRelease.Build + ": 0.23×)", "commits  (last release, " + lastRelease.Build + ": 75.0)"} {
		if !strings.Contains(out, want) {
			t.Fatalf("bench at one worker lacks %q:\n%s", want, out)
		}
	}
	out, _ = cliAt(t, 0, "--store", "mem:", "bench", "--workload", "ceiling")
	if want := "ceiling  the store has no ceiling to measure"; !strings.Contains(out, want) || strings.Contains(out, "every result checked") {
		t.Fatalf("bench on mem: lacks %q (and reports runs):\n%s", want, out)
	}
	// 20 + 20 (w1) + 8 (w2, with its warm-ups) + 10 + 10 (the --json w1s)
	// + 5 + 8 (one worker).
	list, _ := f.cli(0, "runs", "--workflow", "stembench.steps", "--status", "complete", "--limit", "100")
	if n := strings.Count(list, "stembench.steps"); n != 81 {
		t.Fatalf("%d complete stembench.steps runs listed, want 68:\n%s", n, list)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"bench", "--workload", "w4"}, `stem bench: --workload "w4": "w4" is not a workload; want ceiling, w1, w2, w3, a list of them such as ceiling,w1, or all`},
		{[]string{"bench", "--workload", "cieling"}, `stem bench: --workload "cieling": "cieling" is not a workload`},
		{[]string{"bench", "--workload", "w1,,w2"}, `stem bench: --workload "w1,,w2": "" is not a workload`},
		{[]string{"bench", "--processes", "0"}, "stem bench: --processes 0: want 1 or more"},
		{[]string{"bench", "--probe", "-1s"}, "stem bench: --probe -1s: want 1ms or more"},
		{[]string{"bench", "--probe", "0s"}, "stem bench: --probe 0s: want 1ms or more"},
		{[]string{"--store", "mem:", "bench", "--processes", "2"}, "stem bench: --processes 2: mem: is a store of this process's own memory"},
		{[]string{"bench-worker", "--concurrency", "0"}, "stem bench-worker: --concurrency 0: want 1 or more"},
		{[]string{"bench", "--start", "sideways"}, `stem bench: --start "sideways": want batch, goroutines or both`},
		{[]string{"bench", "--runs", "0"}, "stem bench: --runs 0: want 1 or more"},
		{[]string{"bench", "--sleep", "0s"}, "stem bench: --sleep 0s: want 1ms or more"},
		{[]string{"bench", "extra"}, `stem bench: unexpected argument "extra"`},
	} {
		if _, errOut := f.cli(2, c.args...); !strings.HasPrefix(errOut, c.want) {
			t.Fatalf("stem %v: %q, want %q", c.args, errOut, c.want)
		}
	}
}

// TestBenchProcesses: with --processes, worker processes (this test binary
// again, running the command) work the runs, and the bench says that their
// start-up is not in the figures; they are gone when it returns. A worker
// process prints that it is ready and works until its input closes.
func TestBenchProcesses(t *testing.T) {
	f := newFixture(t, nil, false)
	t.Setenv("STEM_CLI_TEST_MAIN", "1") // the worker processes run the command (TestMain)
	out, _ := f.cli(0, "bench", "--workload", "w1", "--processes", "2", "--concurrency", "2", "--runs", "10", "--steps", "2")
	for _, want := range []string{
		"stem bench on " + f.path + ", 2 processes × 2 workers\n",
		"w1  10 runs × 2 steps, 2 processes × 2 workers, batch  ", "w1  10 runs × 2 steps, 2 processes × 2 workers, goroutines  ",
		"the 2 worker processes were started, and ready, before the timing began: their start-up is not in the figures",
		"every result checked",
	} {
		if !strings.Contains(out, want) {
			t.Fatalf("bench --processes output lacks %q:\n%s", want, out)
		}
	}
	js, _ := f.cli(0, "--json", "bench", "--workload", "w1", "--start", "batch", "--processes", "2", "--concurrency", "2", "--runs", "10", "--steps", "2")
	var rep struct {
		Concurrency int `json:"concurrency"`
		Processes   int `json:"processes"`
		Results     []struct {
			Workload       string  `json:"workload"`
			StepsPerSecond float64 `json:"steps_per_second"`
		} `json:"results"`
	}
	if err := json.Unmarshal([]byte(js), &rep); err != nil || rep.Processes != 2 || rep.Concurrency != 2 || len(rep.Results) != 1 || rep.Results[0].StepsPerSecond <= 0 {
		t.Fatalf("bench --json --processes 2: %v\n%s", err, js)
	}
	// Every run was worked, by the processes: this one's engine works none.
	list, _ := f.cli(0, "runs", "--workflow", "stembench.steps", "--status", "complete", "--limit", "100")
	if n := strings.Count(list, "stembench.steps"); n != 30 {
		t.Fatalf("%d complete stembench.steps runs listed, want 30:\n%s", n, list)
	}
	out, _ = f.cli(0, "bench-worker", "--concurrency", "2")
	if out != "ready\n" {
		t.Fatalf("a worker whose input is closed printed %q, want ready and to exit", out)
	}
	if help, _ := cliAt(t, 0, "help"); strings.Contains(help, "bench-worker") {
		t.Fatalf("stem help lists the worker process's command:\n%s", help)
	}
}

// TestDetailDelayed: a run whose start is delayed says until when, in
// the listing and in stem show; one whose start time has come says
// nothing more than queued.
func TestDetailDelayed(t *testing.T) {
	at := time.Now().Add(time.Hour).UTC()
	if got, want := detail(runtime.RunInfo{Status: runtime.StatusQueued, ReadyAt: &at}), "delayed until "+stamp(at); got != want {
		t.Fatalf("detail of a delayed run = %q, want %q", got, want)
	}
	past := time.Now().Add(-time.Second)
	if got := detail(runtime.RunInfo{Status: runtime.StatusQueued, ReadyAt: &past}); got != "" {
		t.Fatalf("detail of a queued run due now = %q, want nothing", got)
	}
}

// A run parked until a step's next attempt is shown retrying that step,
// not sleeping; a run parked on a sleep is still sleeping.
func TestShowParkedRetry(t *testing.T) {
	now := time.Now().UTC()
	next := now.Add(time.Hour)
	r := runtime.RunInfo{ID: "r1", Workflow: "wf", Status: runtime.StatusWaiting, ReadyAt: &next, Execution: 1, StartedAt: now, CreatedAt: now, UpdatedAt: now}
	xs := []runtime.ExecutionInfo{{Number: 1, StartedAt: now, Status: runtime.StatusWaiting}}
	steps := []runtime.StepInfo{{Key: "charge@v1", Kind: runtime.KindStep, Status: runtime.StepRetrying, NextAttemptAt: &next,
		Attempts: []runtime.Attempt{{Key: "charge@v1", Number: 1, Started: now, Ended: now, Error: "down", RetryAt: &next}}}}
	var b strings.Builder
	if err := printShow(&b, r, xs, 1, steps, nil); err != nil {
		t.Fatal(err)
	}
	if want := "retrying step charge@v1 at " + stamp(next); !strings.Contains(b.String(), want) || strings.Contains(b.String(), "sleeping") {
		t.Fatalf("stem show printed\n%s\nwithout %q", b.String(), want)
	}
	b.Reset()
	if err := printShow(&b, r, xs, 1, nil, nil); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "sleeping until "+stamp(next)) {
		t.Fatalf("stem show of a sleeping run printed\n%s", b.String())
	}
}

func TestShowProgressDeadlineContinued(t *testing.T) {
	now := time.Now().UTC()
	deadline := now.Add(time.Hour)
	r := runtime.RunInfo{ID: "r1", Workflow: "wf", Status: runtime.StatusWaiting, WaitingFor: "a", WaitTopics: []string{"a", "b"},
		Progress: json.RawMessage(`{"done":3}`), Deadline: &deadline, Execution: 2, StartedAt: now, CreatedAt: now, UpdatedAt: now}
	xs := []runtime.ExecutionInfo{
		{Number: 1, StartedAt: now, EndedAt: &now, Status: runtime.StatusContinued},
		{Number: 2, StartedAt: now, Status: runtime.StatusWaiting},
	}
	var b strings.Builder
	if err := printShow(&b, r, xs, 2, nil, nil); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"waiting for a or b", `progress   {"done":3}`, "deadline   " + stamp(deadline), "continued as new"} {
		if !strings.Contains(b.String(), want) {
			t.Fatalf("stem show printed\n%s\nwithout %q", b.String(), want)
		}
	}
}

// stem show says what becomes of a child when its parent ends.
func TestShowParentClosePolicy(t *testing.T) {
	f := newFixture(t, nil, true)
	if _, err := runtime.Start[int, string](f.ctx, f.e, "family", 1, runtime.WithID("fam")); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"fam/kid", "fam/stays"} {
		waitStatus(t, f.e, id, runtime.StatusWaiting)
	}
	for id, want := range map[string]string{
		"fam/kid":   "parent     fam (parent-close: terminate)",
		"fam/stays": "parent     fam (parent-close: abandon)",
	} {
		out := f.eventually(func(out string) bool { return has(out, "status     waiting") }, "show", id)
		if !has(out, want) {
			t.Errorf("show %s lacks %q:\n%s", id, want, out)
		}
	}
}
