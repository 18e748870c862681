package main

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stemflow/stem/runtime"
)

// note is the request of the "note" update.
type note struct {
	Text string `json:"text"`
}

// errNegative is a declared error the tally workflow replies with.
var errNegative = errors.New("negative amount")

func init() { runtime.DeclareError("cli.negative", errNegative) }

// registerInteract registers the workflows that take updates and write
// streams:
//
//   - tally: takes "add" updates (an int each, no validator); adds a
//     positive one with a step, appends the total to its stream
//     "totals" and replies it; replies errNegative to a negative one;
//     replies the total to 0 and ends. It never takes "never".
//   - notes: takes "note" updates, whose validator refuses an empty
//     text; appends each text to its stream "notes" and replies "noted
//     TEXT"; the text "done" closes the stream and ends it.
func registerInteract(t *testing.T, e *runtime.Engine) {
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(runtime.RegisterUpdate[int, int](e, "add", nil))
	must(runtime.RegisterUpdate[int, int](e, "never", nil))
	must(runtime.RegisterUpdate[note, string](e, "note", func(n note) error {
		if n.Text == "" {
			return errors.New("a note needs a text")
		}
		return nil
	}))
	must(runtime.Register(e, "tally", func(c *runtime.WorkflowContext, total int) (int, error) {
		for {
			u, err := runtime.AwaitUpdate[int, int](c, "add", "add")
			if err != nil {
				return 0, err
			}
			switch {
			case u.Request < 0:
				if err := u.Fail(c, fmt.Errorf("add %d: %w", u.Request, errNegative)); err != nil {
					return 0, err
				}
				continue
			case u.Request == 0:
				return total, u.Reply(c, total)
			}
			total, err = runtime.Step(c, "apply", runtime.StepOptions{Autoversion: true}, func(runtime.StepContext) (int, error) {
				return total + u.Request, nil
			})
			if err != nil {
				return 0, err
			}
			if err := runtime.Append(c, "totals", total); err != nil {
				return 0, err
			}
			if err := u.Reply(c, total); err != nil {
				return 0, err
			}
		}
	}))
	must(runtime.Register(e, "notes", func(c *runtime.WorkflowContext, _ int) (int, error) {
		for n := 0; ; n++ {
			u, err := runtime.AwaitUpdate[note, string](c, "note", "note")
			if err != nil {
				return 0, err
			}
			if err := runtime.Append(c, "notes", u.Request.Text); err != nil {
				return 0, err
			}
			if u.Request.Text == "done" {
				if err := runtime.CloseStream(c, "notes"); err != nil {
					return 0, err
				}
				return n, u.Reply(c, "noted done")
			}
			if err := u.Reply(c, "noted "+u.Request.Text); err != nil {
				return 0, err
			}
		}
	}))
}

// newInteractFixture is a working fixture with the workflows that take
// updates, once its catalog records them.
func newInteractFixture(t *testing.T) *fixture {
	t.Helper()
	f := newFixtureWith(t, fixtureConfig{run: true, register: registerInteract})
	f.eventually(func(out string) bool { return strings.Contains(out, "updates (stem update)") }, "workflows")
	return f
}

// startRun starts a run of workflow with input and waits until it waits.
func (f *fixture) startRun(workflow, id string, in int) {
	f.t.Helper()
	if _, err := runtime.Start[int, int](f.ctx, f.e, workflow, in, runtime.WithID(id)); err != nil {
		f.t.Fatal(err)
	}
	waitStatus(f.t, f.e, id, runtime.StatusWaiting)
}

// stem update sends an update and prints the reply, or the error the
// workflow replied with (exit 1); --json prints the update.
func TestUpdate(t *testing.T) {
	f := newInteractFixture(t)
	f.startRun("tally", "t-1", 100)

	if out, errOut := f.cli(0, "update", "t-1", "add", "5"); out != "105\n" || errOut != "" {
		t.Fatalf("update: %q %q", out, errOut)
	}
	f.cliIn("7\n", 0, "update", "t-1", "add", "-")
	out, _ := f.cli(0, "--json", "update", "t-1", "add", "8")
	var sent struct {
		RunID   string          `json:"run_id"`
		ID      string          `json:"id"`
		Name    string          `json:"name"`
		Seq     int64           `json:"seq"`
		State   string          `json:"state"`
		Request json.RawMessage `json:"request"`
		Reply   json.RawMessage `json:"reply"`
		Error   string          `json:"error"`
		Created bool            `json:"created"`
	}
	if err := json.Unmarshal([]byte(out), &sent); err != nil {
		t.Fatalf("update --json: %v\n%s", err, out)
	}
	if sent.RunID != "t-1" || !strings.HasPrefix(sent.ID, "u-") || sent.Name != "add" || sent.Seq != 3 || sent.State != "replied" ||
		string(sent.Request) != "8" || string(sent.Reply) != "120" || sent.Error != "" || !sent.Created {
		t.Fatalf("update --json: %+v", sent)
	}
	var v any
	_ = json.Unmarshal([]byte(out), &v)
	checkSnakeCase(t, "update", v)

	// The workflow's error reply: exit 1, the error (its declared name
	// too) on stderr; with --json, the update with its error on stdout.
	out, errOut := f.cli(1, "update", "t-1", "add", "-3")
	if out != "" || !regexp.MustCompile(`^stem update t-1: update u-[0-9a-f]+ \(add\) replied with an error: \[cli\.negative\] add -3: negative amount\n$`).MatchString(errOut) {
		t.Fatalf("an error reply: %q %q", out, errOut)
	}
	out, _ = f.cli(1, "--json", "update", "t-1", "add", "-4")
	if !strings.Contains(out, `"error": "[cli.negative] add -4: negative amount"`) || !strings.Contains(out, `"error_name": "cli.negative"`) || strings.Contains(out, `"reply"`) {
		t.Fatalf("an error reply, --json:\n%s", out)
	}

	// --no-wait prints the ID; the same update with --id waits for the
	// reply, which is the first's: the run handles it once.
	if out, _ := f.cli(0, "update", "t-1", "add", "10", "--id", "ten", "--no-wait"); out != "ten\n" {
		t.Fatalf("update --no-wait: %q", out)
	}
	for range 2 {
		if out, _ := f.cli(0, "update", "t-1", "add", "10", "--id", "ten"); out != "130\n" {
			t.Fatalf("update --id after --no-wait: %q", out)
		}
	}
	out, _ = f.cli(0, "--json", "update", "t-1", "add", "10", "--id", "ten", "--no-wait")
	if !strings.Contains(out, `"id": "ten"`) || !strings.Contains(out, `"state": "replied"`) || !strings.Contains(out, `"created": false`) {
		t.Fatalf("update --no-wait --json of a replied update:\n%s", out)
	}

	// A reply that does not come in --timeout: the update is pending, and
	// the message says how to wait for it again.
	_, errOut = f.cli(1, "update", "t-1", "never", "1", "--id", "n-1", "--timeout", "300ms")
	if want := "stem update t-1: no reply within 300ms: update n-1 is pending; stem --store " + f.path + " update t-1 never 1 --id n-1 waits for its reply again\n"; errOut != want {
		t.Fatalf("update --timeout:\n%q\nwant\n%q", errOut, want)
	}

	// The run ends with the reply to 0; an update after is refused, but
	// the one of an ID sent before still finds its reply.
	if out, _ := f.cli(0, "update", "t-1", "add", "0"); out != "130\n" {
		t.Fatalf("the last update: %q", out)
	}
	waitStatus(t, f.e, "t-1", runtime.StatusComplete)
	if _, errOut := f.cli(1, "update", "t-1", "add", "1"); errOut != "stem update t-1: the run has ended (complete): it takes no update\n" {
		t.Fatalf("update of an ended run: %q", errOut)
	}
	if out, _ := f.cli(0, "update", "t-1", "add", "10", "--id", "ten"); out != "130\n" {
		t.Fatalf("update --id of an ended run: %q", out)
	}
	if _, errOut := f.cli(1, "update", "t-1", "never", "1", "--id", "n-1"); !strings.Contains(errOut, "the run ended without replying to the update") {
		t.Fatalf("update --id of an update the run never took: %q", errOut)
	}

	// stem show lists the updates, latest last, with their states.
	out, _ = f.cli(0, "show", "t-1")
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^updates\n  #  ID +UPDATE  STATE +REPLY\n`),
		regexp.MustCompile(`(?m)^  1  u-[0-9a-f]+ +add +replied +105$`),
		regexp.MustCompile(`(?m)^  4  u-[0-9a-f]+ +add +failed +error: \[cli\.negative\] add -3: negative amount$`),
		regexp.MustCompile(`(?m)^  6  ten +add +replied +130$`),
		regexp.MustCompile(`(?m)^  7  n-1 +never +unhandled +never: the run ended without replying$`),
		regexp.MustCompile(`(?m)^streams\n  STREAM  LENGTH  STATE  UPDATED\n  totals  4       open   \d{4}-`),
	} {
		if !want.MatchString(out) {
			t.Errorf("show lacks %s:\n%s", want, out)
		}
	}
}

// stem update refuses, naming what and where, with nothing written: an
// unknown run or update, JSON that does not parse or match the recorded
// schema, an update with a validator without --unvalidated, and
// mistyped flags.
func TestUpdateRefused(t *testing.T) {
	f := newInteractFixture(t)
	f.startRun("tally", "t-1", 0)
	f.startRun("notes", "n-1", 0)

	for _, c := range []struct {
		code int
		args []string
		want string
	}{
		{1, []string{"update", "t-2", "add", "1"}, "stem update t-2: run not found in " + f.path + "\n"},
		{1, []string{"update", "n-2", "note", `{"text":"hi"}`}, "stem update n-2: run not found in " + f.path + "\n"},
		{1, []string{"update", "t-1", "ad", "1"}, `stem update t-1: unknown update "ad": no worker that shares ` + f.path + ` records it; did you mean "add"? (known: add, never, note; --unvalidated sends it all the same)` + "\n"},
		{2, []string{"update", "t-1", "add", "{"}, "stem update: the request is not valid JSON: {\n(see \"stem update -h\")\n"},
		{2, []string{"update", "t-1", "a d", "1"}, `stem update: update name "a d": `},
		{1, []string{"update", "t-1", "add", `"five"`}, "stem update t-1: payload does not decode: request of update add: document does not match schema: $: want integer, got string\n"},
		{1, []string{"update", "n-1", "note", `{"text":"hi"}`}, `stem update n-1: update "note" has a validator, which only the application that handles it can run: send it from the application, or give --unvalidated to send it without`},
		{1, []string{"update", "n-1", "note", `{"text":7}`, "--unvalidated"}, "stem update n-1: payload does not decode: request of update note: document does not match schema: $.text: want string, got number 7\n"},
		{2, []string{"update", "t-1", "add", "1", "--no-wiat"}, "stem update: unknown flag --no-wiat; did you mean --no-wait?\n\nusage: stem update RUN_ID UPDATE JSON"},
		{2, []string{"update", "t-1", "add", "1", "--unvalidatd"}, "unknown flag --unvalidatd; did you mean --unvalidated?"},
		{2, []string{"update", "t-1", "add", "1", "--timeout", "soon"}, `--timeout "soon": want a duration such as 500ms, 5s or 1m`},
		{2, []string{"update", "t-1", "add", "1", "--timeout", "0s"}, `--timeout 0s: want more than 0`},
		{2, []string{"update", "t-1", "add", "1", "--id", "a\tb"}, `stem update: --id: `},
		{2, []string{"update", "t-1", "add"}, "stem update: want RUN_ID UPDATE JSON"},
	} {
		_, errOut := f.cli(c.code, c.args...)
		if !strings.HasPrefix(errOut, c.want) && !strings.Contains(errOut, c.want) {
			t.Errorf("stem %q:\n%s\nwant %q", c.args, errOut, c.want)
		}
		if c.code == 1 && strings.Count(errOut, "\n") != 1 {
			t.Errorf("stem %q: not one line:\n%s", c.args, errOut)
		}
	}
	for _, id := range []string{"t-1", "n-1"} {
		if us, err := f.e.Updates(f.ctx, id, 0, 0); err != nil || len(us) != 0 {
			t.Fatalf("refused updates wrote %v (%v)", us, err)
		}
	}
	// With --unvalidated, the update with a validator goes.
	if out, _ := f.cli(0, "update", "n-1", "note", `{"text":"hi"}`, "--unvalidated"); out != "\"noted hi\"\n" {
		t.Fatalf("update --unvalidated: %q", out)
	}
}

// syncBuffer is a buffer a command writes to while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// background runs the command on the fixture's store while the test goes
// on; wait returns its exit code and output.
func (f *fixture) background(args ...string) (out *syncBuffer, wait func() (int, string, string)) {
	out, errOut := &syncBuffer{}, &syncBuffer{}
	done := make(chan int, 1)
	go func() { done <- run(append([]string{"--store", f.path}, args...), strings.NewReader(""), out, errOut) }()
	return out, func() (int, string, string) {
		select {
		case code := <-done:
			return code, out.String(), errOut.String()
		case <-time.After(20 * time.Second):
			f.t.Fatalf("stem %q did not end; it printed:\n%s\n%s", args, out.String(), errOut.String())
			return 0, "", ""
		}
	}
}

// waitOutput waits until the command running in the background has
// printed want.
func (f *fixture) waitOutput(out *syncBuffer, want string) {
	f.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(out.String(), want) {
		if time.Now().After(deadline) {
			f.t.Fatalf("never printed %q; printed:\n%s", want, out.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// stem stream prints a stream's values from an offset and exits; with
// --follow it prints them as they come, until the stream is closed or the
// run ends.
func TestStream(t *testing.T) {
	f := newInteractFixture(t)
	f.startRun("tally", "t-1", 100)
	for _, n := range []string{"1", "2", "3"} {
		f.cli(0, "update", "t-1", "add", n)
	}
	if out, _ := f.cli(0, "stream", "t-1", "totals"); out != "0  101\n1  103\n2  106\n" {
		t.Fatalf("stream: %q", out)
	}
	if out, _ := f.cli(0, "stream", "t-1", "totals", "--from", "2"); out != "2  106\n" {
		t.Fatalf("stream --from 2: %q", out)
	}
	if out, errOut := f.cli(0, "stream", "t-1", "totals", "--from", "3"); out != "" || errOut != "stem stream t-1: stream totals holds 3 value(s), none from offset 3 (open)\n" {
		t.Fatalf("stream --from 3: %q %q", out, errOut)
	}
	out, _ := f.cli(0, "--json", "stream", "t-1", "totals", "--from", "1")
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("stream --json: %q", out)
	}
	for i, l := range lines {
		var v struct {
			Offset    int64           `json:"offset"`
			Value     json.RawMessage `json:"value"`
			WrittenAt time.Time       `json:"written_at"`
		}
		if err := json.Unmarshal([]byte(l), &v); err != nil || v.Offset != int64(i+1) || v.WrittenAt.IsZero() || string(v.Value) != []string{"103", "106"}[i] {
			t.Fatalf("stream --json line %d: %q %+v %v", i, l, v, err)
		}
	}
	for _, c := range []struct {
		code int
		args []string
		want string
	}{
		{1, []string{"stream", "t-1", "total"}, `stem stream t-1: the run has no stream "total"; did you mean "totals"? (its streams: totals); --follow waits for it` + "\n"},
		{1, []string{"stream", "t-9", "totals"}, "stem stream t-9: run not found in " + f.path + "\n"},
		{2, []string{"stream", "t-1", "totals", "--from", "-1"}, "stem stream: --from -1: want 0 or more"},
		{2, []string{"stream", "t-1", "totals", "--form", "1"}, "stem stream: unknown flag --form; did you mean --from?"},
		{2, []string{"stream", "t-1", "totals", "--folow"}, "unknown flag --folow; did you mean --follow?"},
		{2, []string{"stream", "t-1", "tot als"}, `stem stream: stream name "tot als": `},
		{2, []string{"stream", "t-1"}, "stem stream: want RUN_ID STREAM"},
	} {
		if _, errOut := f.cli(c.code, c.args...); !strings.Contains(errOut, c.want) {
			t.Errorf("stem %q:\n%s\nwant %q", c.args, errOut, c.want)
		}
	}

	// --follow prints what is there and what comes, until the run ends.
	out2, wait := f.background("stream", "t-1", "totals", "--from", "1", "--follow")
	f.waitOutput(out2, "2  106\n")
	f.cli(0, "update", "t-1", "add", "4")
	f.waitOutput(out2, "3  110\n")
	f.cli(0, "update", "t-1", "add", "0")
	if code, out, errOut := wait(); code != 0 || out != "1  103\n2  106\n3  110\n" || errOut != "" {
		t.Fatalf("stream --follow: exit %d\n%s\n%s", code, out, errOut)
	}

	// A stream not written yet is waited for; a closed one ends it.
	f.startRun("notes", "n-1", 0)
	out3, wait := f.background("stream", "n-1", "notes", "--follow")
	f.waitOutput(out3, "") // started
	f.cli(0, "update", "n-1", "note", `{"text":"a"}`, "--unvalidated")
	f.waitOutput(out3, `0  "a"`)
	f.cli(0, "update", "n-1", "note", `{"text":"done"}`, "--unvalidated")
	if code, out, _ := wait(); code != 0 || out != "0  \"a\"\n1  \"done\"\n" {
		t.Fatalf("stream --follow of a stream not begun: exit %d\n%s", code, out)
	}
	if out, _ := f.cli(0, "show", "n-1"); !regexp.MustCompile(`(?m)^  notes   2       closed `).MatchString(out) {
		t.Fatalf("show lacks the closed stream:\n%s", out)
	}
}

// stem show --follow prints the new values of the run's streams, those
// it begins too, until the run ends; --json shows updates and streams.
func TestShowFollow(t *testing.T) {
	f := newInteractFixture(t)
	f.startRun("tally", "t-1", 100)
	out, wait := f.background("show", "t-1", "--follow")
	f.waitOutput(out, "following the run's streams until it ends")
	if strings.Contains(out.String(), "\nupdates\n") || strings.Contains(out.String(), "\nstreams\n") {
		t.Fatalf("show of a run without updates or streams lists them:\n%s", out.String())
	}
	f.cli(0, "update", "t-1", "add", "1")
	f.waitOutput(out, "totals  0  101\n")
	f.cli(0, "update", "t-1", "add", "2")
	f.cli(0, "update", "t-1", "add", "0")
	code, text, errOut := wait()
	if code != 0 || !strings.HasSuffix(text, "(Ctrl-C stops)\ntotals  0  101\ntotals  1  103\nrun t-1 ended: complete\n") || errOut != "" {
		t.Fatalf("show --follow: exit %d\n%s\n%s", code, text, errOut)
	}

	doc, _ := f.cli(0, "--json", "show", "t-1")
	var shown struct {
		Updates []struct {
			ID      string          `json:"id"`
			Seq     int64           `json:"seq"`
			State   string          `json:"state"`
			Request json.RawMessage `json:"request"`
			Reply   json.RawMessage `json:"reply"`
		} `json:"updates"`
		UpdatesTotal int `json:"updates_total"`
		Streams      []struct {
			Name   string `json:"name"`
			Length int64  `json:"length"`
			Closed bool   `json:"closed"`
		} `json:"streams"`
	}
	if err := json.Unmarshal([]byte(doc), &shown); err != nil {
		t.Fatal(err)
	}
	if len(shown.Updates) != 3 || shown.UpdatesTotal != 3 || shown.Updates[1].Seq != 2 || string(shown.Updates[1].Request) != "2" || string(shown.Updates[1].Reply) != "103" ||
		len(shown.Streams) != 1 || shown.Streams[0].Name != "totals" || shown.Streams[0].Length != 2 || shown.Streams[0].Closed {
		t.Fatalf("show --json: %+v", shown)
	}
	var v any
	_ = json.Unmarshal([]byte(doc), &v)
	checkSnakeCase(t, "show", v)

	// On an ended run, --follow says how it ended at once.
	if out, _ := f.cli(0, "show", "t-1", "--follow"); !strings.HasSuffix(out, "run t-1 ended: complete\n") {
		t.Fatalf("show --follow of an ended run:\n%s", out)
	}
}

// stem workflows lists the updates apart from the event topics, with
// their schemas and whether they have a validator.
func TestWorkflowsListsUpdates(t *testing.T) {
	f := newInteractFixture(t)
	out, _ := f.cli(0, "workflows")
	for _, want := range []string{"\nupdates (stem update)\n", "  add  (worker test-worker", "    request  integer\n    reply    integer\n",
		"  note  (worker test-worker", "has a validator: stem update sends it only with --unvalidated", "    request  {text string}\n    reply    string\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("workflows lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "stem.update/") {
		t.Errorf("workflows lists update topics as event topics:\n%s", out)
	}
	out, _ = f.cli(0, "--json", "workflows")
	var cat struct {
		Events  []struct{ Topic string }
		Updates []struct {
			Name      string `json:"name"`
			Validator bool   `json:"validator"`
		}
	}
	if err := json.Unmarshal([]byte(out), &cat); err != nil {
		t.Fatal(err)
	}
	if len(cat.Updates) != 3 || cat.Updates[2].Name != "note" || !cat.Updates[2].Validator || cat.Updates[0].Validator {
		t.Fatalf("workflows --json updates: %+v", cat.Updates)
	}
	for _, ev := range cat.Events {
		if strings.HasPrefix(ev.Topic, "stem.") {
			t.Fatalf("workflows --json lists %s as an event topic", ev.Topic)
		}
	}
}

// Sealed by the workers' codec, an update's reply and a stream's values
// are read with their key; without it, the command says which key opens
// them.
func TestUpdateAndStreamSealed(t *testing.T) {
	codec, err := runtime.NewAESGCMCodec(oldKey)
	if err != nil {
		t.Fatal(err)
	}
	f := newFixtureWith(t, fixtureConfig{codec: codec, run: true, register: registerInteract})
	key := "--codec-key=" + hex.EncodeToString(oldKey)
	f.eventually(func(out string) bool { return strings.Contains(out, "updates (stem update)") }, "workflows")
	f.startRun("tally", "t-1", 100)
	if out, _ := f.cli(0, key, "update", "t-1", "add", "5"); out != "105\n" {
		t.Fatalf("update with the key: %q", out)
	}
	if _, errOut := f.cli(1, "update", "t-1", "add", "6"); !strings.Contains(errOut, "replied, but its reply is sealed: pass the workers' --codec-key to read it") {
		t.Fatalf("update without the key: %q", errOut)
	}
	if out, _ := f.cli(0, key, "stream", "t-1", "totals"); out != "0  105\n1  111\n" {
		t.Fatalf("stream with the key: %q", out)
	}
	if _, errOut := f.cli(1, "stream", "t-1", "totals"); !strings.HasPrefix(errOut, "stem stream t-1: value 0 of stream totals of run t-1 is sealed: pass the workers' --codec-key to read it") {
		t.Fatalf("stream without the key: %q", errOut)
	}
	if out, _ := f.cli(0, key, "show", "t-1"); !regexp.MustCompile(`(?m)^  2  u-[0-9a-f]+ +add +replied +111$`).MatchString(out) {
		t.Fatalf("show with the key:\n%s", out)
	}
	if out, _ := f.cli(0, "show", "t-1"); !regexp.MustCompile(`(?m)^  2  u-[0-9a-f]+ +add +replied +\(sealed: pass the workers' --codec-key to read it\) key ID`).MatchString(out) {
		t.Fatalf("show without the key:\n%s", out)
	}
}
