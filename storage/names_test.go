package storage_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/stemflow/stem/storage"
)

// The names the example and the tests use stay valid.
func TestNamesInUseStayValid(t *testing.T) {
	t.Parallel()
	for _, n := range []string{"orders.fulfil", "orders.invoice", "wf", "fam.child", "bench.ten", "slowretry", "A-Z_0.9", strings.Repeat("x", storage.MaxNameLen)} {
		if err := storage.CheckWorkflowName(n); err != nil {
			t.Errorf("CheckWorkflowName(%q) = %v", n, err)
		}
		if err := storage.CheckStepName(n); err != nil {
			t.Errorf("CheckStepName(%q) = %v", n, err)
		}
	}
	for _, n := range []string{"orders.shipment-ready", "shipment.ready", "child:run-1", "a/b:c", "t", "stem", "stemx.y"} {
		if err := storage.CheckTopic(n); err != nil {
			t.Errorf("CheckTopic(%q) = %v", n, err)
		}
	}
	for _, n := range []string{"req-1", "0190d5e2-7b5c-7c3e-8f00-1a2b3c4d5e6f", "order 42", "ünïcode ✓", "a@b.c", "x:y#z", strings.Repeat("é", storage.MaxNameLen/2)} {
		if err := storage.CheckRunID(n); err != nil {
			t.Errorf("CheckRunID(%q) = %v", n, err)
		}
	}
	for _, n := range []string{"charge@v2", "pack@v1", "ask", "child/result", "send email", "ü@v1"} {
		if err := storage.CheckStepKey(n); err != nil {
			t.Errorf("CheckStepKey(%q) = %v", n, err)
		}
	}
}

// Every rule refuses NUL, invalid UTF-8, control characters, the empty
// name and one byte over the limit, as ErrInvalidArgument naming the field,
// quoting the value, and pointing at the character.
func TestNamesRefused(t *testing.T) {
	t.Parallel()
	checks := map[string]func(string) error{
		"workflow name": storage.CheckWorkflowName,
		"step name":     storage.CheckStepName,
		"event topic":   storage.CheckTopic,
		"run ID":        storage.CheckRunID,
		"step key":      storage.CheckStepKey,
	}
	cases := []struct {
		name, v string
		offset  int
		says    string
	}{
		{"empty", "", -1, "is empty"},
		{"NUL", "ab\x00", 2, `'\x00'`},
		{"invalid UTF-8", "ab\xffc", 2, `invalid UTF-8 at byte 2`},
		{"truncated UTF-8", "ab\xc3", 2, `invalid UTF-8 at byte 2`},
		{"escape", "a\x1b[31m", 1, `'\x1b'`},
		{"newline", "a\nb", 1, `'\n'`},
		{"DEL", "a\x7f", 1, `'\x7f'`},
		{"C1 control", "a\u009bb", 1, `'\u009b'`},
		{"over-long", strings.Repeat("y", storage.MaxNameLen+1), -1, "129 bytes long, at most 128"},
		{"over-long in bytes", strings.Repeat("é", storage.MaxNameLen/2) + "e", -1, "129 bytes long"},
	}
	for field, check := range checks {
		for _, c := range cases {
			err := check(c.v)
			var ne *storage.NameError
			if !errors.Is(err, storage.ErrInvalidArgument) || !errors.As(err, &ne) {
				t.Errorf("%s %s: %v, want a NameError matching ErrInvalidArgument", field, c.name, err)
				continue
			}
			if ne.Field != field || ne.Value != c.v || !strings.Contains(err.Error(), field) || !strings.Contains(err.Error(), c.says) {
				t.Errorf("%s %s: %q (field %q), want it to name the %s and say %s", field, c.name, err, ne.Field, field, c.says)
			}
			if c.offset >= 0 && ne.Offset != c.offset {
				t.Errorf("%s %s: offset %d, want %d", field, c.name, ne.Offset, c.offset)
			}
			if c.v != "" && len(c.v) < 40 && !strings.Contains(err.Error(), `"`) {
				t.Errorf("%s %s: %q does not quote the value", field, c.name, err)
			}
		}
	}
}

// The rules particular to each kind of name.
func TestNameRulesByKind(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		check func(string) error
		v     string
		says  string
	}{
		{storage.CheckWorkflowName, "orders/fulfil", `invalid character '/' in workflow name "orders/fulfil": use ASCII letters, digits, '.', '_' and '-'`},
		{storage.CheckWorkflowName, "a b", `invalid character ' '`},
		{storage.CheckWorkflowName, "ü", `invalid character 'ü'`},
		{storage.CheckStepName, "a@v2", `invalid character '@' in step name "a@v2"`},
		{storage.CheckTopic, "a@b", `invalid character '@' in event topic "a@b": use ASCII letters, digits, '.', '_', '-', '/' and ':'`},
		{storage.CheckTopic, "stem.child/p2/child", `event topic "stem.child/p2/child": topics starting with "stem." are reserved`},
		{storage.CheckTopic, "stem.", `are reserved`},
		{storage.CheckRunID, "p1/child", `run ID "p1/child": run IDs may not contain '/': it is reserved for child runs, <parent>/<call>`},
		{storage.CheckStepKey, "pack@v1#0", `invalid character '#' in step key "pack@v1#0"`},
	} {
		err := c.check(c.v)
		if !errors.Is(err, storage.ErrInvalidArgument) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("check(%q) = %v, want ErrInvalidArgument saying %s", c.v, err, c.says)
		}
	}
}

// A run ID with '/' is a child's: CreateRuns takes it only with the parent
// it derives from.
func TestNewRunChildIDs(t *testing.T) {
	t.Parallel()
	ok := [][]storage.NewRun{
		{{ID: "p1", Workflow: "wf"}},
		{{ID: "p1/child", Workflow: "wf", ParentID: "p1"}},
		{{ID: "p1/child/grand#0", Workflow: "wf", ParentID: "p1/child"}},
		{{ID: "p1/" + strings.Repeat("k", 200), Workflow: "wf", ParentID: "p1"}},
		{{ID: "kid", Workflow: "wf", ParentID: "p1"}},
	}
	for _, runs := range ok {
		if err := storage.ValidateNewRuns(runs); err != nil {
			t.Errorf("ValidateNewRuns(%+v) = %v", runs, err)
		}
	}
	bad := []struct {
		runs []storage.NewRun
		says string
	}{
		{[]storage.NewRun{{ID: "p1/child", Workflow: "wf"}}, "reserved for child runs"},
		{[]storage.NewRun{{ID: "p1/child", Workflow: "wf", ParentID: "p2"}}, `run "p1/child" has parent "p2"`},
		{[]storage.NewRun{{ID: "p1/", Workflow: "wf", ParentID: "p1"}}, `has parent "p1"`},
		{[]storage.NewRun{{ID: "p1/child", Workflow: "wf", ParentID: "p1/"}}, `has parent "p1/"`},
		{[]storage.NewRun{{ID: "p\x00/c", Workflow: "wf", ParentID: "p\x00"}}, `'\x00'`},
		{[]storage.NewRun{{ID: "p1/c\x1b", Workflow: "wf", ParentID: "p1"}}, `'\x1b'`},
		{[]storage.NewRun{{ID: "p1/" + strings.Repeat("k", storage.MaxDerivedLen), Workflow: "wf", ParentID: "p1"}}, "at most 1024"},
		{[]storage.NewRun{{ID: "ok", Workflow: "wf"}, {ID: "r", Workflow: "w\xff"}}, `run "r": invalid UTF-8`},
	}
	for _, c := range bad {
		err := storage.ValidateNewRuns(c.runs)
		if !errors.Is(err, storage.ErrInvalidArgument) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("ValidateNewRuns(%+v) = %v, want ErrInvalidArgument saying %s", c.runs, err, c.says)
		}
	}
}

// Callers may not emit, send or wait on a reserved topic; the runtime's own
// delivery of a child's outcome (a notify, a parent's child wait) may.
func TestReservedTopicsOnlyForTheRuntime(t *testing.T) {
	t.Parallel()
	lease := storage.Lease{RunID: "p2", Owner: "w", Token: 1}
	const topic = "stem.child/p2/child"
	refused := map[string]error{
		"emit":       storage.EmitRequest{Topic: topic}.Validate(),
		"send event": storage.Event{RunID: "p2", Topic: topic}.Validate(),
		"event wait": storage.SuspendRequest{Lease: lease, Wait: &storage.Wait{Key: "w", Topic: topic}}.Validate(),
	}
	for what, err := range refused {
		if !errors.Is(err, storage.ErrInvalidArgument) || !strings.Contains(err.Error(), "are reserved") {
			t.Errorf("%s on %s: %v, want ErrInvalidArgument saying it is reserved", what, topic, err)
		}
	}
	allowed := map[string]error{
		"child wait": storage.SuspendRequest{Lease: lease, Wait: &storage.Wait{Key: "child", Topic: topic, Kind: storage.KindChild}}.Validate(),
		"complete's notify": storage.CompleteRequest{Lease: storage.Lease{RunID: "p2/child"}, Status: storage.StatusComplete,
			Notify: &storage.Event{RunID: "p2", Topic: topic}}.Validate(),
		"terminate's notify": storage.TerminateRequest{RunID: "p2/child", Notify: &storage.Event{RunID: "p2", Topic: topic}}.Validate(),
	}
	for what, err := range allowed {
		if err != nil {
			t.Errorf("%s on %s: %v", what, topic, err)
		}
	}
}

// Invisible characters (format characters such as the bidirectional
// overrides and zero-width spaces, unusual spaces, variation selectors,
// fillers) are refused in every name, so one ID cannot pass for another:
// the message names the field, quotes the value escaped, names the
// character and its byte offset.
func TestInvisibleCharactersRefused(t *testing.T) {
	t.Parallel()
	checks := map[string]func(string) error{
		"workflow name": storage.CheckWorkflowName,
		"step name":     storage.CheckStepName,
		"event topic":   storage.CheckTopic,
		"run ID":        storage.CheckRunID,
		"step key":      storage.CheckStepKey,
		"queue name":    storage.CheckQueueName,
		"schedule ID":   storage.CheckScheduleID,
	}
	for _, r := range []rune{0x00a0, 0x00ad, 0x034f, 0x061c, 0x115f, 0x180e, 0x200b, 0x200c, 0x200d, 0x200e, 0x200f,
		0x2028, 0x2029, 0x202a, 0x202b, 0x202c, 0x202d, 0x202e, 0x2060, 0x2061, 0x2062, 0x2063, 0x2064, 0x2066,
		0x2067, 0x2068, 0x2069, 0x2003, 0x3000, 0x3164, 0xfe0f, 0xfeff, 0xffa0, 0xe0001, 0xe0041, 0xe0100} {
		if !storage.Invisible(r) {
			t.Errorf("Invisible(%U) = false", r)
		}
		v := "abc" + string(r) + "def"
		for field, check := range checks {
			err := check(v)
			var ne *storage.NameError
			if !errors.Is(err, storage.ErrInvalidArgument) || !errors.As(err, &ne) {
				t.Errorf("%s with %U: %v, want a NameError matching ErrInvalidArgument", field, r, err)
				continue
			}
			if ne.Offset != 3 || strings.ContainsRune(err.Error(), r) || !strings.Contains(err.Error(), field) {
				t.Errorf("%s with %U: %q (offset %d), want it to name the field, point at byte 3 and quote the value escaped", field, r, err, ne.Offset)
			}
		}
	}
	for _, r := range []rune{' ', 'a', 'é', 'ü', '✓', '中', 'ا', 0x1f600, 0x0301} {
		if storage.Invisible(r) {
			t.Errorf("Invisible(%U) = true", r)
		}
	}
	for _, c := range []struct {
		check func(string) error
		v     string
		says  string
	}{
		{storage.CheckRunID, "abc\u202edef", `run ID "abc\u202edef" holds U+202E RIGHT-TO-LEFT OVERRIDE at byte 3: invisible format characters are not allowed`},
		{storage.CheckStepKey, "a\u200bb@v1", `step key "a\u200bb@v1" holds U+200B ZERO WIDTH SPACE at byte 1: invisible format characters are not allowed`},
		{storage.CheckRunID, "order\u00a042", `run ID "order\u00a042" holds U+00A0 NO-BREAK SPACE at byte 5: spaces other than ' ' are not allowed`},
		{storage.CheckRunID, "x\u3164", `run ID "x\u3164" holds U+3164 HANGUL FILLER at byte 1: invisible characters are not allowed`},
		{storage.CheckRunID, "x\U000e0041", `run ID "x\U000e0041" holds U+E0041 at byte 1: invisible format characters are not allowed`},
		{storage.CheckTopic, "order\u202e.paid", `invalid character '\u202e' in event topic "order\u202e.paid"`},
	} {
		err := c.check(c.v)
		if !errors.Is(err, storage.ErrInvalidArgument) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("check(%q) = %v, want ErrInvalidArgument saying %s", c.v, err, c.says)
		}
	}
	// Header values are data, not names: they keep what they held.
	if err := storage.ValidateHeaders(map[string]string{"note": "line\u2028paragraph\u00a0\u200b"}); err != nil {
		t.Errorf("ValidateHeaders refuses a value with invisible characters: %v", err)
	}
	// A child's call key and a partition key are held to the same.
	for _, runs := range [][]storage.NewRun{
		{{ID: "p1/c\u202e", Workflow: "wf", ParentID: "p1"}},
		{{ID: "r1", Workflow: "wf", Partition: "tenant\u200b"}},
	} {
		if err := storage.ValidateNewRuns(runs); !errors.Is(err, storage.ErrInvalidArgument) || !strings.Contains(err.Error(), "invisible format characters are not allowed") {
			t.Errorf("ValidateNewRuns(%+v) = %v, want it refused as invisible", runs, err)
		}
	}
}
