package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/storage"
)

// parseStatus reads a status in any case; an unknown one lists the valid.
func parseStatus(s string) (runtime.RunStatus, error) {
	if s == "" {
		return "", nil
	}
	st := runtime.RunStatus(strings.ToLower(s))
	if !st.Valid() {
		names := make([]string, len(storage.Statuses))
		for i, v := range storage.Statuses {
			names[i] = string(v)
		}
		msg := fmt.Sprintf("unknown status %q", s)
		if best := nearest(string(st), names); best != "" {
			msg += fmt.Sprintf("; did you mean %q?", best)
		}
		return "", usagef("%s; want one of %s", msg, strings.Join(names, ", "))
	}
	return st, nil
}

// runSorts are stem runs' orders: by creation time, newest first (the
// default), or by ID, ascending.
var runSorts = []string{"created", "id"}

func listRuns(fs *flag.FlagSet) func(*call, []string) error {
	var f filterFlags
	f.register(fs)
	parent := fs.String("parent", "", "only the children of run `RUN_ID`")
	limit := fs.Int("limit", defaultLimit, "at most `N` runs per page")
	after := fs.String("after", "", "the page after `CURSOR` (the \"more:\" line gives it)")
	sortBy := fs.String("sort", "created", "the order: `ORDER` created (newest first) or id (ascending)")
	held := fs.Bool("held", false, "only held runs, whose code no longer matches their history (the store cannot filter on it: this pages through the listing until it has --limit of them)")
	var versionArgs []string
	fs.Func("version", "only runs of workflow version `N` (comma-separated, or repeat the flag; 0: stored without one)", func(s string) error {
		versionArgs = append(versionArgs, s)
		return nil
	})
	return func(c *call, _ []string) error {
		if *limit < 1 {
			return usagef("--limit %d: want 1 or more", *limit)
		}
		versions, err := parseVersions(versionArgs)
		if err != nil {
			return err
		}
		q, err := f.query(time.Now())
		if err != nil {
			return err
		}
		switch *sortBy {
		case "created":
			q.Order, q.Descending = storage.OrderCreated, true
		case "id":
		default:
			msg := fmt.Sprintf("--sort %q: want created (newest first) or id", *sortBy)
			if best := nearest(strings.ToLower(*sortBy), runSorts); best != "" {
				msg += fmt.Sprintf("; did you mean %q?", best)
			}
			return usagef("%s", msg)
		}
		if *after != "" && q.Order == storage.OrderCreated {
			if _, _, err := storage.ParseCreatedCursor(*after); err != nil {
				return usagef("--after %q: not a cursor of a listing by creation time (copy it from the \"more:\" line, or list by ID with --sort id)", *after)
			}
		}
		e, err := c.open()
		if err != nil {
			return err
		}
		if q.Where, err = f.whereFilters(c, e); err != nil {
			return err
		}
		q.ParentID, q.Versions, q.Limit, q.After = *parent, versions, *limit, *after
		var runs []runtime.RunInfo
		var next string
		if *held {
			runs, next, err = heldRuns(c.ctx, e, q)
		} else {
			runs, next, err = e.ListRuns(c.ctx, q)
		}
		if err != nil {
			return err
		}
		if c.out.json {
			return c.out.encode(jsonRunPage{Runs: jsonRuns(runs), Next: next})
		}
		filtered := f.any() || *parent != "" || len(versions) > 0 || *after != ""
		if len(runs) == 0 {
			if *held && !filtered {
				_, err := fmt.Fprintln(c.out.w, "no runs are held")
				return err
			}
			if *held || filtered {
				_, err := fmt.Fprintln(c.out.w, "no runs match")
				return err
			}
			_, err := fmt.Fprintln(c.out.w, "no runs")
			return err
		}
		tw := tabwriter.NewWriter(c.out.w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tWORKFLOW\tVERSION\tSTATUS\tEXEC\tCREATED\tUPDATED\tDETAIL")
		for _, r := range runs {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", clean(r.ID), clean(r.Workflow), versionCell(r.Version), clean(statusCell(r)), r.Execution, stamp(r.CreatedAt), stamp(r.UpdatedAt), clean(detail(r)))
		}
		tw.Flush()
		if next != "" {
			more := append([]string{"runs"}, f.args()...)
			if len(versions) > 0 {
				vs := make([]string, len(versions))
				for i, v := range versions {
					vs[i] = strconv.Itoa(v)
				}
				more = append(more, "--version", strings.Join(vs, ","))
			}
			if *parent != "" {
				more = append(more, "--parent", *parent)
			}
			if *held {
				more = append(more, "--held")
			}
			if *sortBy != "created" {
				more = append(more, "--sort", *sortBy)
			}
			if *limit != defaultLimit {
				more = append(more, "--limit", fmt.Sprint(*limit))
			}
			c.more(append(more, "--after", next)...)
		}
		return nil
	}
}

// cursorAfter is the cursor of the listing q that follows run r.
func cursorAfter(q runtime.ListRunsQuery, r runtime.RunInfo) string {
	if q.Order == storage.OrderCreated {
		return storage.CreatedCursor(r.CreatedAt.Truncate(time.Microsecond), r.ID)
	}
	return r.ID
}

// heldScanPage is the least page heldRuns reads at once.
const heldScanPage = 200

// heldRuns is stem runs --held: the held runs among those q lists, up to
// q.Limit of them, and the cursor of the next page ("" when the listing
// has no more). The store does not filter on holds, so it reads the
// listing page by page (at least heldScanPage runs each) until it has
// q.Limit held runs or the listing ends; the cursor is then the last run
// it returns, or where the listing ends.
func heldRuns(ctx context.Context, e *runtime.Engine, q runtime.ListRunsQuery) ([]runtime.RunInfo, string, error) {
	want := q.Limit
	q.Limit = max(want, heldScanPage)
	var out []runtime.RunInfo
	for {
		runs, next, err := e.ListRuns(ctx, q)
		if err != nil {
			return nil, "", err
		}
		for i, r := range runs {
			if r.Hold == nil {
				continue
			}
			out = append(out, r)
			if len(out) == want {
				if i == len(runs)-1 && next == "" {
					return out, "", nil
				}
				return out, cursorAfter(q, r), nil
			}
		}
		if next == "" {
			return out, "", nil
		}
		q.After = next
	}
}

// more prints the "more:" line under a page: the command that gives the
// next one, with this call's store and key file (a key given on the
// command line is not repeated).
func (c *call) more(args ...string) {
	fmt.Fprintf(c.out.w, "more: %s\n", c.command(args...))
}

// command spells a stem command to suggest, with this call's store and key
// file (a key given on the command line is not repeated), each word shell
// quoted. Quoted, the line holds no hidden character: clean changes
// nothing, and the terminal writer has nothing to escape.
func (c *call) command(args ...string) string {
	words := []string{"stem"}
	if c.g.storeSet {
		words = append(words, "--store", c.g.store)
	}
	if c.g.codecKeyFile != "" {
		words = append(words, "--codec-key-file", c.g.codecKeyFile)
	}
	words = append(words, args...)
	for i, a := range words {
		words[i] = shellQuote(a)
	}
	return clean(strings.Join(words, " "))
}

// shellQuote quotes s as one word for a POSIX shell (sh, bash, zsh), so a
// suggested command can be pasted whatever the argument holds: as it is
// when every character is plain (letters, digits and -_./:@=+,%, but '='
// not first, which zsh expands); in single quotes otherwise; and in $'...'
// (POSIX.1-2024, bash, zsh, ksh), with \xHH escapes, when it holds a
// character a terminal would not show as it is (see hidden) or bytes that
// are not UTF-8, so the line printed holds none of them raw.
func shellQuote(s string) string {
	plain := s != "" && s[0] != '=' && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:@=+,%", r))
	}) < 0
	switch {
	case plain:
		return s
	case utf8.ValidString(s) && !strings.ContainsFunc(s, hidden):
		return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
	}
	var b strings.Builder
	b.WriteString("$'")
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n <= 1, hidden(r):
			for _, c := range []byte(s[i : i+n]) {
				fmt.Fprintf(&b, `\x%02x`, c)
			}
		case r == '\\' || r == '\'':
			b.WriteByte('\\')
			b.WriteRune(r)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	b.WriteByte('\'')
	return b.String()
}

// parseVersions reads --version values: workflow versions, each a whole
// number from 0 (the runs stored without one) to storage.MaxVersion,
// comma-separated or given again.
func parseVersions(args []string) ([]int, error) {
	var out []int
	for _, a := range args {
		items, err := splitList("--version", a)
		if err != nil {
			return nil, err
		}
		for _, item := range items {
			v, err := strconv.Atoi(strings.TrimPrefix(strings.TrimPrefix(item, "v"), "V"))
			if err != nil || v < 0 || v > storage.MaxVersion {
				return nil, usagef("--version %q: want a whole number from 0 to %d (a workflow's version=; 0 for runs stored without one)", item, storage.MaxVersion)
			}
			if !slices.Contains(out, v) {
				out = append(out, v)
			}
		}
	}
	return out, nil
}

// versionCell is a run's workflow version in a table: "-" when unknown.
func versionCell(v int) string {
	if v == 0 {
		return "-"
	}
	return strconv.Itoa(v)
}

func detail(r runtime.RunInfo) string {
	switch {
	case r.Hold != nil && r.Err == nil:
		return "held: " + truncate(r.Hold.Reason, 120)
	case r.Err != nil:
		return errNote(r.Err, false)
	case r.OpenErr != nil:
		note, _ := sealedNote(r.OpenErr, "")
		return note
	case r.Status == runtime.StatusComplete:
		return result(r.Output, 60)
	case r.WaitingFor != "":
		s := "waiting for " + clean(strings.Join(waitNames(r.WaitTopics), " or "))
		if r.ReadyAt != nil {
			s += " until " + stamp(*r.ReadyAt)
		}
		return s
	case r.Status == runtime.StatusWaiting && r.ReadyAt != nil:
		return "sleeping until " + stamp(*r.ReadyAt)
	case r.Status == runtime.StatusQueued && r.ReadyAt != nil && r.ReadyAt.After(time.Now()):
		return "delayed until " + stamp(*r.ReadyAt)
	case r.PauseRequested:
		return "pause requested"
	case r.CancelRequested:
		return "cancellation requested"
	}
	return ""
}

// showDetail is detail for stem show, which has the run's steps: a run
// parked until a step's next attempt is retrying it, not sleeping.
func showDetail(r runtime.RunInfo, steps []runtime.StepInfo) string {
	if r.Status == runtime.StatusWaiting && r.ReadyAt != nil && r.WaitingFor == "" {
		for _, s := range steps {
			if s.Status == runtime.StepRetrying && s.NextAttemptAt != nil && s.NextAttemptAt.Equal(*r.ReadyAt) {
				return fmt.Sprintf("retrying step %s at %s (the run is parked until then)", s.Key, stamp(*r.ReadyAt))
			}
		}
	}
	return detail(r)
}

// result shows a JSON payload in at most n bytes; a payload that is not
// JSON was sealed by a codec this command lacks.
func result(raw json.RawMessage, n int) string {
	if len(raw) == 0 {
		return ""
	}
	if !json.Valid(raw) {
		return "(sealed: pass the workers' --codec-key to read it)"
	}
	return clean(truncate(string(raw), n))
}

// errText is an error text for a terminal: its first line (escaped by
// clean), unless whole (for JSON, which escapes it itself), and a note
// instead of a sealed text.
func errText(s string, whole bool) string {
	if strings.HasPrefix(s, sealedPrefix) {
		return "(sealed error: pass the workers' --codec-key to read it)"
	}
	if whole {
		return s
	}
	return clean(firstLine(s))
}

func show(fs *flag.FlagSet) func(*call, []string) error {
	execution := fs.Int("execution", 0, "the steps of execution `N` (default: the current one)")
	follow := fs.Bool("follow", false, "then print the new values of the run's streams as they come, until the run ends (or Ctrl-C)")
	return func(c *call, args []string) error {
		c.subject = args[0]
		asked := false
		fs.Visit(func(f *flag.Flag) { asked = asked || f.Name == "execution" })
		if asked && *execution < 1 {
			return usagef("--execution %d: want 1 or more", *execution)
		}
		e, err := c.open()
		if err != nil {
			return err
		}
		r, err := e.Get(c.ctx, args[0])
		if err != nil {
			return err
		}
		xs, err := e.ListExecutions(c.ctx, args[0])
		if err != nil {
			return err
		}
		n := *execution
		if n == 0 || n == r.Execution {
			// 0 asks for the current execution with its running step.
			n = 0
		} else if !slices.ContainsFunc(xs, func(x runtime.ExecutionInfo) bool { return x.Number == n }) {
			return fmt.Errorf("the run has no execution %d (it has 1 to %d)", n, r.Execution)
		}
		steps, err := e.ListSteps(c.ctx, args[0], n)
		if err != nil {
			return err
		}
		if n == 0 {
			n = r.Execution
		}
		in, err := readInteractions(c.ctx, e, args[0])
		if err != nil {
			return err
		}
		if c.out.json {
			j := jsonShow{Run: jsonRuns([]runtime.RunInfo{r})[0], Executions: jsonExecutions(xs), Execution: n, Steps: jsonSteps(steps),
				Updates: []jsonUpdate{}, UpdatesTotal: in.total, Streams: jsonStreams(in.streams)}
			for _, u := range in.updates {
				j.Updates = append(j.Updates, jsonUpdateOf(e, u, r.Status))
			}
			err = c.out.encode(j)
		} else if err = printShow(c.out.w, r, xs, n, steps, c.command); err == nil {
			err = printInteractions(c.out.w, e, in, r.Status)
		}
		if err != nil || !*follow {
			return err
		}
		if !c.out.json {
			fmt.Fprintf(c.out.w, "\nfollowing the run's streams until it ends (Ctrl-C stops)\n")
		}
		return c.followRun(e, args[0], in.streams)
	}
}

// attrsText is a run's search attributes on one line, name=value each,
// in name order; a value that is empty or holds a space, a quote or a
// hidden character is quoted as Go quotes it.
func attrsText(attrs []runtime.Attr) string {
	parts := make([]string, len(attrs))
	for i, a := range attrs {
		v := a.Value()
		if v == "" || strings.ContainsAny(v, " \"'") || strings.ContainsFunc(v, hidden) || !utf8.ValidString(v) {
			v = strconv.Quote(v)
		}
		parts[i] = clean(a.Name) + "=" + v
	}
	return strings.Join(parts, "  ")
}

// statusCell is a run's status as the text output shows it: with
// "(held)" after it while an engine holds the run.
func statusCell(r runtime.RunInfo) string {
	if r.Hold != nil {
		return string(r.Status) + " (held)"
	}
	return string(r.Status)
}

// printShow writes stem show's text; command spells the commands it
// suggests (see call.command).
func printShow(w io.Writer, r runtime.RunInfo, xs []runtime.ExecutionInfo, n int, steps []runtime.StepInfo, command func(args ...string) string) error {
	if command == nil {
		command = (&call{g: &globals{}}).command
	}
	fmt.Fprintf(w, "run        %s\nworkflow   %s\n", clean(r.ID), clean(r.Workflow))
	if r.Version > 0 {
		fmt.Fprintf(w, "version    %d\n", r.Version)
	} else {
		fmt.Fprintf(w, "version    unknown (stored before versions were kept)\n")
	}
	fmt.Fprintf(w, "status     %s\n", clean(statusCell(r)))
	if r.ParentID != "" {
		close := "terminate" // the default: ended with its parent
		if r.ParentClose != runtime.ParentCloseTerminate {
			close = string(r.ParentClose)
		}
		fmt.Fprintf(w, "parent     %s (parent-close: %s)\n", clean(r.ParentID), close)
	}
	if r.CancelRequested {
		reason := r.CancelReason
		if reason == "" {
			reason = "no reason given"
		}
		fmt.Fprintf(w, "cancel     requested: %s\n", clean(truncate(reason, 200)))
	}
	if q := placement(r.Queue, r.Partition, r.Priority); q != "" {
		fmt.Fprintf(w, "queue      %s\n", q)
	}
	if len(r.Attributes) > 0 {
		fmt.Fprintf(w, "attributes %s\n", attrsText(r.Attributes))
	}
	if d := showDetail(r, steps); d != "" && r.Hold == nil {
		fmt.Fprintf(w, "detail     %s\n", clean(d))
	}
	if r.Progress != nil {
		fmt.Fprintf(w, "progress   %s\n", clean(result(r.Progress, 200)))
	}
	if r.Deadline != nil {
		fmt.Fprintf(w, "deadline   %s\n", stamp(*r.Deadline))
	}
	ex := fmt.Sprintf("%d, started %s", r.Execution, stamp(r.StartedAt))
	if r.EndedAt != nil {
		ex += ", ended " + stamp(*r.EndedAt)
	}
	fmt.Fprintf(w, "execution  %s\ncreated    %s\nupdated    %s\n", ex, stamp(r.CreatedAt), stamp(r.UpdatedAt))
	if r.Hold != nil {
		printHold(w, r, command)
	}

	fmt.Fprintf(w, "\nexecutions\n")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  #\tSTARTED\tENDED\tSTATUS\tNOTE")
	for _, x := range xs {
		ended := "-"
		if x.EndedAt != nil {
			ended = stamp(*x.EndedAt)
		}
		var note []string
		switch {
		case x.FromStep != "":
			note = append(note, fmt.Sprintf("restart of %d from %s", x.ForkedFrom, clean(x.FromStep)))
		case x.Number > 1 && xs[x.Number-2].Status == runtime.StatusContinued:
			note = append(note, "continued as new")
		case x.Number > 1:
			note = append(note, "restart from the top")
		}
		if x.Err != nil {
			note = append(note, errNote(x.Err, false))
		}
		fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\n", x.Number, stamp(x.StartedAt), ended, clean(string(x.Status)), clean(strings.Join(note, "; ")))
	}
	tw.Flush()

	fmt.Fprintf(w, "\nsteps of execution %d\n", n)
	if len(steps) == 0 {
		_, err := fmt.Fprintln(w, "  no steps yet")
		return err
	}
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  #\tSTEP\tKIND\tSTATUS\tRESULT")
	nums := stepNumbers(steps)
	for i, s := range steps {
		seq := "-"
		if nums[i] > 0 {
			seq = fmt.Sprint(nums[i])
		}
		status := stepStatus(s)
		if status == stepTimedOut {
			status = "timed out"
		}
		if s.ForkedFrom != 0 {
			status += fmt.Sprintf(" (kept from %d)", s.ForkedFrom)
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", seq, clean(s.Key), clean(string(s.Kind)), clean(status), clean(stepResult(r, s)))
		for _, a := range s.Attempts {
			line := fmt.Sprintf("  \t  attempt %d\t\t%s\tstarted %s", a.Number, duration(a.Ended.Sub(a.Started)), stamp(a.Started))
			if a.Error != "" {
				line += "  error: " + truncate(errText(a.Error, false), 100)
			}
			fmt.Fprintln(tw, line)
		}
	}
	return tw.Flush()
}

// printHold writes the block of stem show that says the run is held: since
// when, why, at which call, the keys the history and the code have there,
// when an engine looks at it again, and what an operator can do. Calls
// are counted from 1 here (Hold.Position counts from 0).
func printHold(w io.Writer, r runtime.RunInfo, command func(args ...string) string) {
	h := r.Hold
	fmt.Fprintf(w, "\nHELD since %s: the workflow's code no longer makes the calls this run recorded\n", stamp(h.Since))
	fmt.Fprintf(w, "  reason    %s\n", clean(h.Reason))
	fmt.Fprintf(w, "  at        call %d of execution %d\n", h.Position+1, h.Execution)
	recorded, called := clean(h.Recorded), clean(h.Called)
	if h.Recorded == "" {
		recorded = "nothing: the run's history ends there"
	}
	if h.Called == "" {
		called = "nothing: the code returns there"
	}
	fmt.Fprintf(w, "  recorded  %s\n  called    %s\n", recorded, called)
	if len(r.WaitTopics) > 0 {
		names, kept := waitNames(r.WaitTopics), "an event"
		if slices.ContainsFunc(r.WaitTopics, func(t string) bool { return strings.HasPrefix(t, storage.UpdateTopicPrefix) }) {
			kept = "an event or update"
		}
		fmt.Fprintf(w, "  waits for %s (%s sent to it is kept)\n", clean(strings.Join(names, " or ")), kept)
	}
	if r.ReadyAt != nil {
		fmt.Fprintf(w, "  next try  %s\n", stamp(*r.ReadyAt))
	}
	fmt.Fprintf(w, "  to do     a worker of a build that makes the calls the run recorded takes it up at the\n")
	fmt.Fprintf(w, "            next try (every Config.HoldRetry, 30s by default), with no one's help. Or now:\n")
	acts := [][2]string{
		{command("terminate", r.ID), "ends the run"},
		{command("restart", r.ID), "runs it again from the top, on this build"},
	}
	if h.Recorded != "" && h.Execution == r.Execution {
		acts = append(acts, [2]string{command("restart", r.ID, "--from", h.Recorded), fmt.Sprintf("runs it again from call %d, the calls before it kept", h.Position+1)})
	}
	width := 0
	for _, a := range acts {
		width = max(width, utf8.RuneCountInString(a[0]))
	}
	for _, a := range acts {
		fmt.Fprintf(w, "              %s%s  %s\n", a[0], strings.Repeat(" ", width-utf8.RuneCountInString(a[0])), a[1])
	}
}

// stepNumbers numbers the steps of one execution that have a result
// (a checkpoint) 1, 2, 3... in the order they were recorded, which is
// the order ListSteps lists them in; a step without one yet gets 0. The
// stores' Seq only orders a run's checkpoints: SQLite and Postgres draw
// it from one sequence for the whole store, Redis counts each run's from
// 1, so shown as it is the same history would read differently on each.
func stepNumbers(steps []runtime.StepInfo) []int {
	nums := make([]int, len(steps))
	n := 0
	for i, s := range steps {
		if s.Seq > 0 {
			n++
			nums[i] = n
		}
	}
	return nums
}

// stepTimedOut is the status of an event wait that timed out: the runtime
// checkpoints the timeout as the wait's error (one matching
// runtime.ErrEventTimeout), which the workflow sees and may well handle,
// so it is not shown as a failure. Text output writes it "timed out".
const stepTimedOut = "timed_out"

// stepStatus is a step's status as shown: its StepStatus, or stepTimedOut.
func stepStatus(s runtime.StepInfo) string {
	if s.Status == runtime.StepFailed && s.Kind == runtime.KindEvent && errors.Is(s.Err, runtime.ErrEventTimeout) {
		return stepTimedOut
	}
	return string(s.Status)
}

// stepResult is a step's RESULT cell: its output or error, or what it is
// doing.
func stepResult(r runtime.RunInfo, s runtime.StepInfo) string {
	switch s.Status {
	case runtime.StepRunning:
		return fmt.Sprintf("attempt %d running since %s", s.Attempt, stamp(s.Started))
	case runtime.StepRetrying:
		if s.NextAttemptAt != nil {
			return "next attempt at " + stamp(*s.NextAttemptAt)
		}
		return "to be retried"
	case runtime.StepWaiting:
		if s.Kind == runtime.KindChild {
			return "waiting for the child run"
		}
		if r.WaitingFor != "" {
			return "waiting for " + clean(r.WaitingFor)
		}
		return "waiting for its event"
	case runtime.StepInterrupted:
		return "no result: its execution ended"
	}
	if note, ok := sealedNote(s.Err, " error"); ok {
		return "error: " + note
	}
	if stepStatus(s) == stepTimedOut {
		return truncate(errText(s.Err.Error(), false), 80)
	}
	if s.Err != nil {
		return "error: " + declaredTag(s.Err) + truncate(errText(s.Err.Error(), false), 80)
	}
	if note, ok := sealedNote(s.OpenErr, ""); ok && s.Output == nil {
		return note
	}
	return result(s.Output, 60)
}
