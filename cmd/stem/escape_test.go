package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stemflow/stem/runtime"
)

// rawHidden returns the first character in out that a terminal would not
// show as it is (an escape, a bell, a C1 control, a bidirectional
// override, a byte that is not UTF-8), keeping newlines and, where the
// text is not a table, tabs.
func rawHidden(out string, tabs bool) (string, bool) {
	for i, r := range out {
		switch {
		case r == utf8.RuneError:
			if _, n := utf8.DecodeRuneInString(out[i:]); n <= 1 {
				return out[i : i+1], true
			}
		case r == '\n', r == '\t' && tabs:
		case hidden(r):
			return string(r), true
		}
	}
	return "", false
}

func wantNoHidden(t *testing.T, what, out string, tabs bool) {
	t.Helper()
	if c, ok := rawHidden(out, tabs); ok {
		t.Fatalf("%s prints %q raw:\n%s", what, c, out)
	}
}

// The strings the store holds reach the terminal escaped: an error text
// with escape sequences, a result with C1 controls and a bidirectional
// override, a step key and run ID with one, and the ID and workflow of a
// run stored before the rules on names (which may hold anything).
func TestTextOutputEscapesStoreStrings(t *testing.T) {
	f := newFixture(t, nil, false)
	const (
		failID  = "id\u202e1"
		evilErr = "boom\x1b[2J\x1b]0;owned\x07 tab\there\nsecond line"
		evilOut = "x\u009b31my\u202e"
	)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(runtime.Register(f.e, "evil.fail", func(c *runtime.WorkflowContext, _ int) (string, error) {
		return runtime.Step(c, "key@v1", runtime.StepOptions{}, func(runtime.StepContext) (string, error) {
			return "", runtime.Permanent(errors.New(evilErr))
		})
	}))
	must(runtime.Register(f.e, "evil.out", func(c *runtime.WorkflowContext, _ int) (string, error) { return evilOut, nil }))
	ctx, cancel := context.WithCancel(f.ctx)
	done := make(chan struct{})
	go func() { defer close(done); f.e.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	_, err := runtime.Start[int, string](f.ctx, f.e, "evil.fail", 1, runtime.WithID("fail-1"))
	must(err)
	_, err = runtime.Start[int, string](f.ctx, f.e, "evil.out", 1, runtime.WithID("out-1"))
	must(err)
	waitStatus(t, f.e, "fail-1", runtime.StatusErrored)
	waitStatus(t, f.e, "out-1", runtime.StatusComplete)
	cancel()
	<-done
	db, err := sql.Open("sqlite", f.path+"?_pragma=busy_timeout(10000)")
	must(err)
	defer db.Close()
	// The rules on names now refuse a bidirectional override in a run ID
	// or step key; a store may hold them from before, as written here.
	for _, q := range []string{`UPDATE runs SET id = ? WHERE id = 'fail-1'`, `UPDATE checkpoints SET key = ? WHERE key = 'key@v1'`, `UPDATE attempts SET key = ? WHERE key = 'key@v1'`} {
		v := failID
		if !strings.HasPrefix(q, "UPDATE runs") {
			v = "k\u202eey@v1"
		}
		_, err = db.Exec(q, v)
		must(err)
	}

	// A run stored before the rules: its ID and workflow hold an escape, a
	// tab and a newline that would fake a row.
	const legacyID, legacyWF = "legacy\x1b[31m\tX\nfake-row queued", "old\x1bwf"
	_, err = runtime.Start[greeting, string](f.ctx, f.e, "greet", greeting{Name: "x"}, runtime.WithID("legacy-1"))
	must(err)
	_, err = db.Exec(`UPDATE runs SET id = ?, workflow = ? WHERE id = 'legacy-1'`, legacyID, legacyWF)
	must(err)

	out, _ := f.cli(0, "runs")
	wantNoHidden(t, "stem runs", out, false)
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 4 {
		t.Fatalf("stem runs printed %d lines, want a header and 3 rows:\n%s", len(lines), out)
	}
	for _, want := range []string{`legacy\x1b[31m\tX\nfake-row queued`, `old\x1bwf`, `id\u202e1`, `boom\x1b[2J\x1b]0;owned\x07 tab\there …`, `"x\u009b31my\u202e"`} {
		if !strings.Contains(out, want) {
			t.Errorf("stem runs does not show %s:\n%s", want, out)
		}
	}

	out, _ = f.cli(0, "show", failID)
	wantNoHidden(t, "stem show", out, false)
	for _, want := range []string{`run        id\u202e1`, `k\u202eey@v1`, `boom\x1b[2J`} {
		if !strings.Contains(out, want) {
			t.Errorf("stem show does not show %s:\n%s", want, out)
		}
	}
	out, _ = f.cli(0, "show", legacyID)
	wantNoHidden(t, "stem show of the legacy run", out, false)
	if !strings.Contains(out, `run        legacy\x1b[31m\tX\nfake-row queued`) {
		t.Errorf("stem show of the legacy run:\n%s", out)
	}
	out, _ = f.cli(0, "pause", legacyID)
	wantNoHidden(t, "stem pause", out, false)

	// Errors on stderr are escaped too, with the subject they name.
	_, errOut := f.cli(1, "show", "nope\x1b[2J")
	wantNoHidden(t, "stem show's error", errOut, false)
	if !strings.Contains(errOut, `nope\x1b[2J`) {
		t.Errorf("the error does not name the run: %s", errOut)
	}

	// JSON keeps every string exactly, escaped as JSON.
	out, _ = f.cli(0, "runs", "--json")
	wantNoHidden(t, "stem runs --json", out, false)
	var page jsonRunPage
	if err := json.Unmarshal([]byte(out), &page); err != nil {
		t.Fatalf("stem runs --json: %v\n%s", err, out)
	}
	got := map[string]jsonRun{}
	for _, r := range page.Runs {
		got[r.ID] = r
	}
	var output string
	if err := json.Unmarshal(got["out-1"].Output, &output); err != nil || output != evilOut {
		t.Fatalf("stem runs --json shows output %s (%v), want %q", got["out-1"].Output, err, evilOut)
	}
	if got[legacyID].Workflow != legacyWF || !strings.Contains(got[failID].Error, evilErr) {
		t.Fatalf("stem runs --json changed the strings: %+v", page.Runs)
	}
}

// clean escapes every hidden character and stray byte, and leaves the rest
// as it is.
func TestClean(t *testing.T) {
	for in, want := range map[string]string{
		"plain order-1 ünï ✓ \\x":  "plain order-1 ünï ✓ \\x",
		"a\x1b[2Jb\x07":            `a\x1b[2Jb\x07`,
		"tab\tnl\ncr\r":            `tab\tnl\ncr\r`,
		"del\x7f c1\u0085\u009b":   `del\x7f c1\u0085\u009b`,
		"bidi\u202e\u2066\u200b":   `bidi\u202e\u2066\u200b`,
		"sep\u2028\u2029":          `sep\u2028\u2029`,
		"joiner\u2060\u2064\u00ad": `joiner\u2060\u2064\u00ad`,
		"space\u00a0\u3000\u3164":  `space\u00a0\u3000\u3164`,
		"tag\U000e0041\ufe0f":      `tag\U000e0041\ufe0f`,
		"bad\xff\xc3":              `bad\xff\xc3`,
	} {
		if got := clean(in); got != want {
			t.Errorf("clean(%q) = %q, want %q", in, got, want)
		}
		if got := clean(clean(in)); got != want {
			t.Errorf("clean is not idempotent on %q: %q", in, got)
		}
	}
	var b bytes.Buffer
	if _, err := terminal(&b).Write([]byte("a\tb\nc\x1bd\u202e")); err != nil || b.String() != "a\tb\nc\\x1bd\\u202e" {
		t.Fatalf("terminal writer wrote %q, %v", b.String(), err)
	}
}

// shellQuote gives one shell word that the shell reads back as the string,
// whatever it holds, and never prints a hidden character raw.
func TestShellQuoteRoundTrips(t *testing.T) {
	inputs := []string{
		"", "plain", "a-b_c./d:e@f=g+h,i%j", "with space", "it's", `a'b"c`, "$HOME", "`ls`", "$(id)",
		"a\x1b[2Jb", "tab\tnl\n", "\xff\xfe", "\u202ertl", "=ls", "-x", `back\slash`, `\'`, "ünï ✓",
		"\x7f\u0085", "#hash", "~tilde", "*glob?[a]", "!bang", "x\x01y", "semi;colon|pipe&amp>gt<lt",
		"\x1bf", "'", "''", "\\",
	}
	for _, s := range inputs {
		q := shellQuote(s)
		if c, ok := rawHidden(q, false); ok || strings.ContainsAny(q, "\t") {
			t.Errorf("shellQuote(%q) = %q holds %q raw", s, q, c)
		}
		if strings.ContainsAny(s, " '\"$`\\;|&<>*?[]#~!\t\n") && !strings.HasPrefix(q, "'") && !strings.HasPrefix(q, "$'") {
			t.Errorf("shellQuote(%q) = %q, want it quoted", s, q)
		}
	}
	for _, shell := range []string{"bash", "zsh"} {
		path, err := exec.LookPath(shell)
		if err != nil {
			t.Logf("no %s: %v", shell, err)
			continue
		}
		var script strings.Builder
		script.WriteString("printf '%s\\0'")
		for _, s := range inputs {
			script.WriteString(" " + shellQuote(s))
		}
		out, err := exec.Command(path, "-c", script.String()).Output()
		if err != nil {
			t.Fatalf("%s -c %q: %v", shell, script.String(), err)
		}
		got := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
		if len(got) != len(inputs) {
			t.Fatalf("%s read %d words, want %d: %q", shell, len(got), len(inputs), got)
		}
		for i := range inputs {
			if got[i] != inputs[i] {
				t.Errorf("%s reads shellQuote(%q) = %s as %q", shell, inputs[i], shellQuote(inputs[i]), got[i])
			}
		}
	}
}

// The "more:" line quotes every argument, so pasted into a shell it lists
// the next page, whatever the cursor and filters hold.
func TestMoreHintIsShellQuoted(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash to read the line:", err)
	}
	f := newFixture(t, nil, false)
	ids := []string{"g 'one'", "g$(three)", "g-two"}
	for _, id := range ids {
		if _, err := runtime.Start[greeting, string](f.ctx, f.e, "greet", greeting{Name: "x"}, runtime.WithID(id)); err != nil {
			t.Fatal(err)
		}
	}
	// The rules on names now refuse the override; a store may hold it
	// from before, as written here.
	db, err := sql.Open("sqlite", f.path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`UPDATE runs SET id = ? WHERE id = 'g-two'`, "g\u202etwo"); err != nil {
		t.Fatal(err)
	}
	ids[2] = "g\u202etwo"
	// IDs sort by byte: the space, then '$', then the override.
	var pages []string
	args := []string{"--store", f.path, "runs", "--workflow", "greet", "--sort", "id", "--limit", "1"}
	for {
		if len(pages) > len(ids) {
			t.Fatalf("more than %d pages:\n%s", len(ids), strings.Join(pages, "\n"))
		}
		out, _ := cliAt(t, 0, args...)
		wantNoHidden(t, "stem runs", out, false)
		pages = append(pages, out)
		m := moreLine.FindStringSubmatch(out)
		if m == nil {
			break
		}
		line, ok := strings.CutPrefix(m[1], "stem ")
		if !ok {
			t.Fatalf("more line %q does not start with stem", m[1])
		}
		words, err := exec.Command(bash, "-c", "printf '%s\\0' "+line).Output()
		if err != nil {
			t.Fatalf("bash reading %q: %v", line, err)
		}
		args = strings.Split(strings.TrimSuffix(string(words), "\x00"), "\x00")
	}
	if len(pages) != len(ids) {
		t.Fatalf("%d pages, want %d:\n%s", len(pages), len(ids), strings.Join(pages, "\n"))
	}
	for i, id := range ids {
		if !strings.Contains(pages[i], "\n"+clean(id)+" ") {
			t.Errorf("page %d does not list %s:\n%s", i+1, clean(id), pages[i])
		}
	}
}

// The command refuses what the runtime refuses, in the same words: an event
// on a reserved topic (which could forge a child's outcome) and a run ID
// reserved for a child.
func TestCLIRefusesReservedNames(t *testing.T) {
	f := newFixture(t, nil, false)
	for _, c := range []struct {
		args []string
		says string
	}{
		{[]string{"emit", "stem.child/p2/child", `{"output":1}`}, `event topic "stem.child/p2/child": topics starting with "stem." are reserved`},
		{[]string{"send", "p2", "stem.child/p2/child", `{"output":1}`}, `are reserved`},
		{[]string{"start", "greet", `{"name":"x"}`, "--id", "p1/child"}, `run IDs may not contain '/': it is reserved for child runs, <parent>/<call>`},
		{[]string{"start", "greet", `{"name":"x"}`, "--id", "a\x1bb"}, `invalid character '\x1b' in run ID`},
	} {
		_, errOut := f.cli(1, c.args...)
		wantNoHidden(t, "stem "+c.args[0], errOut, false)
		if !strings.Contains(errOut, c.says) {
			t.Errorf("stem %q: %s, want it to say %s", c.args, errOut, c.says)
		}
	}
	if runs, _, err := f.e.ListRuns(f.ctx, runtime.ListRunsQuery{}); err != nil || len(runs) != 0 {
		t.Fatalf("refused commands stored %d runs (%v)", len(runs), err)
	}
}

// jsonEscape writes a hidden character beyond the basic plane as its
// UTF-16 surrogates, as JSON must, so the document reads back the same.
func TestJSONEscapeBeyondTheBasicPlane(t *testing.T) {
	const in = "tag\U000e0041\u2060x"
	doc, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	esc := jsonEscape(string(doc))
	if want := `"tag\udb40\udc41\u2060x"`; esc != want {
		t.Fatalf("jsonEscape(%s) = %s, want %s", doc, esc, want)
	}
	var back string
	if err := json.Unmarshal([]byte(esc), &back); err != nil || back != in {
		t.Fatalf("%s reads back as %q (%v), want %q", esc, back, err, in)
	}
}
