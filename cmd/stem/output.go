package main

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/storage"
)

// printer writes a command's result as text or, with --json, as JSON. Every
// JSON document is one of the types below, all with snake_case names.
//
// Nothing the store holds reaches a terminal raw (a run ID, workflow name,
// topic, step key, error text or result could hold an escape sequence that
// rewrites the screen): text goes through a terminal writer that escapes
// control characters, and each value shown in a line or a table cell is
// passed through clean, which escapes tabs and newlines too. Text output
// is one line per value: an error shows its first line (--json has it
// whole). JSON escapes them as JSON does.
type printer struct {
	w    io.Writer
	json bool
}

// newPrinter returns the printer of a command's output to w: with asJSON,
// JSON documents; otherwise text, escaped for a terminal.
func newPrinter(w io.Writer, asJSON bool) *printer {
	if asJSON {
		return &printer{w: w, json: true}
	}
	return &printer{w: terminal(w)}
}

func (p *printer) encode(v any) error {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return err
	}
	_, err := io.WriteString(p.w, jsonEscape(b.String()))
	return err
}

// done reports a change to one run: what it did in a line of text or,
// with --json, as a jsonDone with the run as it stands after.
func (c *call) done(id, action, what string) error {
	if !c.out.json {
		_, err := fmt.Fprintf(c.out.w, "%s: %s\n", clean(id), clean(what))
		return err
	}
	j := jsonDone{RunID: id, Action: action, Message: what}
	if c.engine != nil {
		if r, err := c.engine.Get(c.ctx, id); err == nil {
			j.Run = &jsonRuns([]runtime.RunInfo{r})[0]
		}
	}
	return c.out.encode(j)
}

// hidden reports whether r must not reach a terminal as it is: a control
// character (C0, DEL, C1), or any other character the rules on names
// refuse for not showing as itself (storage.Invisible: line and paragraph
// separators, formatting characters that reorder or hide text such as
// bidirectional overrides and isolates and zero-width marks, spaces other
// than ASCII's, variation selectors, fillers).
func hidden(r rune) bool { return storage.Invisible(r) }

// clean escapes a value for one line of text: every hidden character
// (tabs and newlines too) and every byte that is not UTF-8, as Go writes
// them in a string literal (\t, \n, \x1b, \u202e, \xff). A backslash is
// left as it is, so IDs that hold one stay as typed.
func clean(s string) string { return escapeText(s, false) }

func escapeText(s string, keepLines bool) string {
	i := 0
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n <= 1 || hidden(r) && !(keepLines && (r == '\n' || r == '\t')) {
			break
		}
		i += n
	}
	if i == len(s) {
		return s
	}
	var b strings.Builder
	b.WriteString(s[:i])
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case keepLines && (r == '\n' || r == '\t'):
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x80 && hidden(r):
			fmt.Fprintf(&b, `\x%02x`, r)
		case hidden(r) && r > 0xffff:
			fmt.Fprintf(&b, `\U%08x`, r)
		case hidden(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// terminal wraps w so that what is written to it keeps its tabs and
// newlines (the layout of the text) and has every other hidden character
// escaped: what a value passed through clean already is, and a catch-all
// for the rest. Each Write is escaped by itself, so a value must be written
// whole (fmt and tabwriter do).
func terminal(w io.Writer) io.Writer { return termWriter{w} }

type termWriter struct{ w io.Writer }

func (t termWriter) Write(p []byte) (int, error) {
	s := string(p)
	if e := escapeText(s, true); e != s {
		if _, err := io.WriteString(t.w, e); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	return t.w.Write(p)
}

// jsonEscape escapes in encoded JSON the hidden characters encoding/json
// leaves raw (DEL, C1 controls, formatting characters) as \u escapes: they
// only occur inside strings, so the document means the same.
func jsonEscape(s string) string {
	if !strings.ContainsFunc(s, hidden) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if hidden(r) && r >= 0x20 {
			// JSON writes a character beyond the basic plane as its
			// UTF-16 surrogates.
			for _, u := range utf16.AppendRune(nil, r) {
				fmt.Fprintf(&b, `\u%04x`, u)
			}
		} else {
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// jsonDone is what an action on one run did. Action says it in a word,
// for programs: started, exists (start --id of a run there already),
// restarted, paused, resumed, cancel_requested, cancel_already_requested,
// terminated or sent. Message says it as the text output does. Run is
// the run as it stands after the action, absent if it could not be read.
type jsonDone struct {
	RunID   string   `json:"run_id"`
	Action  string   `json:"action"`
	Message string   `json:"message"`
	Run     *jsonRun `json:"run,omitempty"`
}

type jsonEmit struct {
	Topic     string `json:"topic"`
	Delivered int    `json:"delivered"`
}

type jsonRunPage struct {
	Runs []jsonRun `json:"runs"`
	// Next is the --after of the next page, "" at the end.
	Next string `json:"next"`
}

type jsonRun struct {
	ID             string          `json:"id"`
	Workflow       string          `json:"workflow"`
	Version        int             `json:"version"`
	ParentID       string          `json:"parent_id,omitempty"`
	Status         string          `json:"status"`
	Output         json.RawMessage `json:"output,omitempty"`
	OutputSealed   bool            `json:"output_sealed,omitempty"`
	Sealed         string          `json:"sealed,omitempty"`
	Error          string          `json:"error,omitempty"`
	WaitingFor     string          `json:"waiting_for,omitempty"`
	WaitTopics     []string        `json:"wait_topics,omitempty"`
	Progress       json.RawMessage `json:"progress,omitempty"`
	Deadline       *time.Time      `json:"deadline,omitempty"`
	ReadyAt        *time.Time      `json:"ready_at,omitempty"`
	PauseRequested bool            `json:"pause_requested,omitempty"`
	Recoveries     int             `json:"recoveries,omitempty"`
	Queue          string          `json:"queue"`
	Partition      string          `json:"partition"`
	Priority       int             `json:"priority"`
	Execution      int             `json:"execution"`
	StartedAt      time.Time       `json:"started_at"`
	EndedAt        *time.Time      `json:"ended_at,omitempty"`
	Hold           *jsonHold       `json:"hold,omitempty"`
	// Attributes are the run's search attributes by name: a string, a
	// number, a time (RFC 3339) or a bool each.
	Attributes map[string]any `json:"attributes,omitempty"`
	CreatedAt  time.Time      `json:"created_at"`
	UpdatedAt  time.Time      `json:"updated_at"`
}

// jsonHold is why an engine held a run (runtime.Hold); absent when the run
// is not held. Position counts the execution's calls from 0, as the
// runtime records it; the text output counts them from 1. Recorded and
// Called are "" where the history ends and where the code returned.
type jsonHold struct {
	Reason    string    `json:"reason"`
	Recorded  string    `json:"recorded"`
	Called    string    `json:"called"`
	Position  int       `json:"position"`
	Execution int       `json:"execution"`
	Since     time.Time `json:"since"`
}

func jsonRuns(runs []runtime.RunInfo) []jsonRun {
	out := make([]jsonRun, len(runs))
	for i, r := range runs {
		out[i] = jsonRun{ID: r.ID, Workflow: r.Workflow, Version: r.Version, ParentID: r.ParentID, Status: string(r.Status),
			WaitingFor: r.WaitingFor, WaitTopics: r.WaitTopics, Progress: r.Progress, Deadline: r.Deadline, ReadyAt: r.ReadyAt, PauseRequested: r.PauseRequested, Recoveries: r.Recoveries,
			Queue: r.Queue, Partition: r.Partition, Priority: r.Priority,
			Execution: r.Execution, StartedAt: r.StartedAt, EndedAt: r.EndedAt, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt}
		if out[i].Queue == "" {
			out[i].Queue = runtime.DefaultQueue
		}
		out[i].Attributes = jsonAttrs(r.Attributes)
		if h := r.Hold; h != nil {
			out[i].Hold = &jsonHold{Reason: h.Reason, Recorded: h.Recorded, Called: h.Called, Position: h.Position, Execution: h.Execution, Since: h.Since.UTC()}
		}
		out[i].Output, out[i].OutputSealed = jsonPayload(r.Output)
		if note, ok := sealedNote(r.OpenErr, ""); ok {
			out[i].OutputSealed = r.Output == nil && r.Err == nil
			out[i].Sealed = note
		}
		if r.Err != nil {
			out[i].Error = errNote(r.Err, true)
		}
	}
	return out
}

// jsonAttrs are search attributes as JSON values by name; nil for none.
func jsonAttrs(attrs []runtime.Attr) map[string]any {
	if len(attrs) == 0 {
		return nil
	}
	out := make(map[string]any, len(attrs))
	for _, a := range attrs {
		switch a.Type {
		case runtime.AttrString:
			out[a.Name] = a.Str
		case runtime.AttrNumber:
			out[a.Name] = a.Num
		case runtime.AttrTime:
			out[a.Name] = a.Time.UTC()
		case runtime.AttrBool:
			out[a.Name] = a.Bool
		default:
			out[a.Name] = a.Value()
		}
	}
	return out
}

// jsonPayload passes JSON through; anything else is a payload sealed by a
// codec this command lacks.
func jsonPayload(raw json.RawMessage) (json.RawMessage, bool) {
	if len(raw) == 0 {
		return nil, false
	}
	if !json.Valid(raw) {
		return nil, true
	}
	return raw, false
}

type jsonShow struct {
	Run        jsonRun         `json:"run"`
	Executions []jsonExecution `json:"executions"`
	// Execution is the execution whose steps follow.
	Execution int        `json:"execution"`
	Steps     []jsonStep `json:"steps"`
	// Updates are the run's latest updates (at most 20), in the order the
	// store accepted them, of UpdatesTotal; Streams its streams, by name.
	Updates      []jsonUpdate `json:"updates"`
	UpdatesTotal int          `json:"updates_total"`
	Streams      []jsonStream `json:"streams"`
}

type jsonExecution struct {
	Number     int        `json:"number"`
	StartedAt  time.Time  `json:"started_at"`
	EndedAt    *time.Time `json:"ended_at,omitempty"`
	Status     string     `json:"status"`
	Error      string     `json:"error,omitempty"`
	ForkedFrom int        `json:"forked_from,omitempty"`
	FromStep   string     `json:"from_step,omitempty"`
}

func jsonExecutions(xs []runtime.ExecutionInfo) []jsonExecution {
	out := make([]jsonExecution, len(xs))
	for i, x := range xs {
		out[i] = jsonExecution{Number: x.Number, StartedAt: x.StartedAt, EndedAt: x.EndedAt, Status: string(x.Status),
			ForkedFrom: x.ForkedFrom, FromStep: x.FromStep}
		if x.Err != nil {
			out[i].Error = errNote(x.Err, true)
		}
	}
	return out
}

// jsonStep is a step of one execution. Seq numbers the steps with a
// result 1, 2, 3... in the order they were recorded, on every store
// (stepNumbers); it is absent for a step without one yet. Status is a
// runtime.StepStatus, or "timed_out" for an event wait that timed out.
type jsonStep struct {
	Seq           int             `json:"seq,omitempty"`
	Key           string          `json:"key"`
	Kind          string          `json:"kind"`
	Status        string          `json:"status"`
	Execution     int             `json:"execution"`
	ForkedFrom    int             `json:"forked_from,omitempty"`
	Output        json.RawMessage `json:"output,omitempty"`
	OutputSealed  bool            `json:"output_sealed,omitempty"`
	Sealed        string          `json:"sealed,omitempty"`
	Error         string          `json:"error,omitempty"`
	CreatedAt     *time.Time      `json:"created_at,omitempty"`
	Attempt       int             `json:"attempt,omitempty"`
	StartedAt     *time.Time      `json:"started_at,omitempty"`
	NextAttemptAt *time.Time      `json:"next_attempt_at,omitempty"`
	Attempts      []jsonAttempt   `json:"attempts"`
}

type jsonAttempt struct {
	Number    int        `json:"number"`
	StartedAt time.Time  `json:"started_at"`
	EndedAt   time.Time  `json:"ended_at"`
	Error     string     `json:"error,omitempty"`
	RetryAt   *time.Time `json:"retry_at,omitempty"`
	Execution int        `json:"execution,omitempty"`
}

func jsonSteps(steps []runtime.StepInfo) []jsonStep {
	out := make([]jsonStep, len(steps))
	nums := stepNumbers(steps)
	for i, s := range steps {
		j := jsonStep{Seq: nums[i], Key: s.Key, Kind: string(s.Kind), Status: stepStatus(s), Execution: s.Execution,
			ForkedFrom: s.ForkedFrom, Attempt: s.Attempt, NextAttemptAt: s.NextAttemptAt, Attempts: []jsonAttempt{}}
		j.Output, j.OutputSealed = jsonPayload(s.Output)
		if note, ok := sealedNote(s.OpenErr, ""); ok {
			j.OutputSealed = s.Output == nil && s.Err == nil
			j.Sealed = note
		}
		if s.Err != nil {
			j.Error = errNote(s.Err, true)
		}
		if !s.CreatedAt.IsZero() {
			j.CreatedAt = &s.CreatedAt
		}
		if !s.Started.IsZero() {
			j.StartedAt = &s.Started
		}
		for _, a := range s.Attempts {
			j.Attempts = append(j.Attempts, jsonAttempt{Number: a.Number, StartedAt: a.Started, EndedAt: a.Ended,
				Error: errText(a.Error, true), RetryAt: a.RetryAt, Execution: a.Execution})
		}
		out[i] = j
	}
	return out
}

type jsonCatalog struct {
	Workflows []jsonWorkflow `json:"workflows"`
	Events    []jsonEvent    `json:"events"`
	// Updates are the updates the workers handle (stem update), apart
	// from the event topics they travel on.
	Updates []jsonUpdateType `json:"updates"`
}

// jsonUpdateType is an update the catalog records: the JSON Schemas of
// its request and reply, and whether its handler has a validator (which
// stem update runs only with --unvalidated).
type jsonUpdateType struct {
	Name          string          `json:"name"`
	RequestSchema json.RawMessage `json:"request_schema,omitempty"`
	ReplySchema   json.RawMessage `json:"reply_schema,omitempty"`
	Validator     bool            `json:"validator"`
	Worker        string          `json:"worker"`
	UpdatedAt     time.Time       `json:"updated_at"`
}

type jsonWorkflow struct {
	Name         string          `json:"name"`
	Version      int             `json:"version"`
	InputSchema  json.RawMessage `json:"input_schema,omitempty"`
	OutputSchema json.RawMessage `json:"output_schema,omitempty"`
	Worker       string          `json:"worker"`
	UpdatedAt    time.Time       `json:"updated_at"`
}

type jsonEvent struct {
	Topic         string          `json:"topic"`
	PayloadSchema json.RawMessage `json:"payload_schema,omitempty"`
	Worker        string          `json:"worker"`
	UpdatedAt     time.Time       `json:"updated_at"`
}

func jsonCatalogOf(c storage.Catalog) jsonCatalog {
	out := jsonCatalog{Workflows: []jsonWorkflow{}, Events: []jsonEvent{}, Updates: []jsonUpdateType{}}
	for _, w := range c.Workflows {
		out.Workflows = append(out.Workflows, jsonWorkflow{Name: w.Name, Version: w.Version, InputSchema: w.InputSchema,
			OutputSchema: w.OutputSchema, Worker: w.Worker, UpdatedAt: w.UpdatedAt})
	}
	ups, events := c.Updates()
	for _, u := range ups {
		out.Updates = append(out.Updates, jsonUpdateType{Name: u.Name, RequestSchema: u.Schema.Request, ReplySchema: u.Schema.Reply,
			Validator: u.Schema.Validator, Worker: u.Worker, UpdatedAt: u.UpdatedAt})
	}
	for _, e := range events {
		out.Events = append(out.Events, jsonEvent{Topic: e.Topic, PayloadSchema: e.PayloadSchema, Worker: e.Worker, UpdatedAt: e.UpdatedAt})
	}
	return out
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02T15:04:05.000Z")
}

func duration(d time.Duration) string {
	if d < time.Millisecond {
		return d.Round(time.Microsecond).String()
	}
	return d.Round(time.Millisecond).String()
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return strings.TrimRight(s[:i], "\r :") + " …"
	}
	return s
}

// oneLine joins the lines of a driver's error (pgx lists one per address
// tried), dropping repeats.
func oneLine(s string) string {
	var parts []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" && !slices.Contains(parts, l) {
			parts = append(parts, l)
		}
	}
	return strings.Join(parts, " ")
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && n < len(s) && s[n]&0xC0 == 0x80 {
		n-- // not inside a UTF-8 sequence
	}
	return s[:n] + "…"
}
