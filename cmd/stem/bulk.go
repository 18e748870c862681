package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/storage"
)

const (
	// bulkTimeout bounds a bulk command that acts and follows: a bulk
	// action over a million runs at the default rate takes hours.
	bulkTimeout = 7 * 24 * time.Hour
	// bulkCountCap is how many runs the count before a bulk action reads
	// at most; past it, it says "at least".
	bulkCountCap = 100_000
	// bulkSample is how many of the matching runs' IDs the count shows.
	bulkSample = 5
	// bulkPoll is how often a followed bulk action's progress is read.
	bulkPoll = 250 * time.Millisecond
)

// isTerminal reports whether r is a terminal an operator answers a
// question on. Tests replace it.
var isTerminal = func(r io.Reader) bool {
	f, ok := r.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

const bulkDetail = `Acts on every run a filter matches, paced so that live work is not
starved, with the progress shown as it goes:

  terminate       end each unfinished run (and its children, as terminate does)
  cancel          ask each unfinished run to cancel itself (see stem help cancel)
  pause           pause each unfinished run that is not paused
  resume          resume each paused run
  restart         run each run again from the top, in a new execution
  restart-failed  run each errored run again from the step that failed it,
                  the steps before it kept (see stem help bulk restart-failed)

  status ID       a bulk action: its request, status and progress
  list            the latest bulk actions, newest first
  continue ID     go on with an interrupted bulk action

A bulk action first counts the runs its filter matches and prints the
count with a few of their IDs; --dry-run stops there. Otherwise it asks
for a yes on the terminal (--yes skips the question; without a terminal
--yes is required), then records the bulk action in the store as a run of
the workflow stem.bulk, and carries it out in this process until it is
done, printing its progress. It acts on no run twice, also when it is
interrupted and continued: Ctrl-C stops it, and stem bulk continue ID (or
any worker that registers runtime.RegisterBulk) goes on from where it
stopped. stem terminate ID abandons it.

The filters combine (AND): --workflow, --status, --queue, --where
(repeat it), --id-prefix, --created-from, --created-to and --top-level.
A bulk action never acts on bulk actions.`

// bulkSubs are stem bulk's subcommands: one per action, then status, list
// and continue.
func bulkSubs() []*command {
	summaries := map[runtime.BulkAction]string{
		runtime.BulkTerminate:     "terminate every unfinished run a filter matches",
		runtime.BulkCancel:        "ask every unfinished run a filter matches to cancel itself",
		runtime.BulkPause:         "pause every unfinished run a filter matches",
		runtime.BulkResume:        "resume every paused run a filter matches",
		runtime.BulkRestart:       "restart every run a filter matches, from the top",
		runtime.BulkRestartFailed: "restart every errored run a filter matches from the step that failed it",
	}
	details := map[runtime.BulkAction]string{
		runtime.BulkTerminate: `Terminates every unfinished run the filter matches, with --reason (plain
text, at most 1024 bytes; default "bulk action ID"), as stem terminate
does: its running step is cancelled and its unfinished children end with
it. Finished runs are skipped.`,
		runtime.BulkCancel: `Requests the cancellation of every unfinished run the filter matches, with
--reason, as stem cancel does: each workflow sees it and ends itself.
Finished runs, and runs whose cancellation was requested already, are
skipped.`,
		runtime.BulkPause:  `Pauses every unfinished run the filter matches, as stem pause does. Runs paused already, and finished runs, are skipped.`,
		runtime.BulkResume: `Resumes every paused run the filter matches (or one whose pause has not taken effect yet), as stem resume does. Other runs are skipped.`,
		runtime.BulkRestart: `Restarts every run the filter matches from the top, in a new execution,
as stem restart does. A run restarted by anyone after the bulk action
listed it is skipped: each restart holds only while the run is at the
execution the listing saw, so no run is restarted twice, also when the
bulk action is interrupted and continued.`,
		runtime.BulkRestartFailed: `Restarts every errored run the filter matches from the step that failed it
(the last step of its current execution that failed), as stem restart
--from does: the steps before it keep their results and are not run
again. An errored run without a failed step (its workflow returned an
error of its own, a child or its deadline failed it) is skipped and named
in the progress, with why. Runs that are not errored are skipped. No run
is restarted twice, as for restart.`,
	}
	var subs []*command
	for _, a := range runtime.BulkActions {
		subs = append(subs, &command{name: "bulk " + string(a), max: 1, setup: bulkAction(a), timeout: bulkTimeout,
			args:    bulkActionArgs(a),
			summary: summaries[a],
			detail:  details[a] + "\n\n" + bulkActionDetail})
	}
	return append(subs,
		&command{name: "bulk status", min: 1, max: 1, setup: bulkStatus, readOnly: true,
			args:    "ID",
			summary: "a bulk action: its request, status and progress",
			detail: `Shows a bulk action: what it does to which runs, at what rate, its status
(queued or running while it goes on; complete, errored or terminated), how
many runs it matched, acted on, skipped and failed so far, and the last
refusals.`},
		&command{name: "bulk list", max: 0, setup: bulkList, readOnly: true,
			args:    "[--limit N]",
			summary: "the latest bulk actions, newest first",
			detail:  `Lists the latest bulk actions, newest first, with their action, status, counts and filter.`},
		&command{name: "bulk continue", min: 1, max: 1, setup: bulkContinue, timeout: bulkTimeout,
			args:    "ID",
			summary: "go on with an interrupted bulk action",
			detail: `Goes on with bulk action ID from where it stopped, in this process, and
prints its progress until it is done (as the command that started it
did). An errored one (a page kept failing) is restarted from that page; a
paused one is resumed. If another worker carries it (stem ui, or an
application's worker that registers runtime.RegisterBulk), this follows
its progress. It acts on no run the bulk action acted on before.`},
	)
}

// bulkActionArgs is the synopsis of a bulk action's arguments.
func bulkActionArgs(a runtime.BulkAction) string {
	s := "[--workflow NAME] [--status STATUS] [--queue NAME] [--where NAME OP VALUE]... [--id-prefix PREFIX] [--created-from TIME] [--created-to TIME] [--top-level] [--dry-run] [--yes] [--rate N]"
	if bulkReasons(a) {
		s += " [--reason TEXT]"
	}
	return s
}

// bulkReasons reports whether action a records a reason.
func bulkReasons(a runtime.BulkAction) bool {
	return a == runtime.BulkTerminate || a == runtime.BulkCancel
}

const bulkActionDetail = `The filters combine (AND); without one, every run is matched:
  --where NAME OP VALUE  a search attribute compared to VALUE, read in the
                         attribute's declared type (stem workflows lists
                         them): OP is = (any type), <, <=, >, >= (numbers
                         and times) or ^= (prefix of a string), as in
                         customer=C-7, total>=100, placed<2026-11-28 or
                         order^=88; repeat it (up to 8), each must hold
  --created-from/--created-to  a time (2026-11-28T10:00:00Z, 2026-11-28) or
                         an age (36h, 7d: that long ago); from is included,
                         to is not

The count comes first, with a few of the runs' IDs (up to 100000 counted);
--dry-run stops there and changes nothing. Then a yes is asked on the
terminal, unless --yes. The bulk action is carried out by this process
at --rate runs a second at most (0: as fast as the store takes it), and
its progress printed until it is done; with --json, a line of JSON each.
Ctrl-C stops it: stem bulk continue ID goes on with it, acting on no run
twice. Exit status 1 when some runs were refused (the progress names the
last of them) or the bulk action failed.`

// filterFlags are the flags of a bulk action's filter (and of stem runs').
type filterFlags struct {
	workflow, status, queue, idPrefix, createdFrom, createdTo string
	where                                                     []string
	topLevel                                                  bool
}

func (f *filterFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.workflow, "workflow", "", "only runs of workflow `NAME`")
	fs.StringVar(&f.status, "status", "", "only runs in `STATUS`: queued, running, paused, waiting, complete, errored or terminated (any case)")
	fs.StringVar(&f.queue, "queue", "", "only runs on queue `NAME`")
	fs.Func("where", "only runs whose search attribute compares so: `NAME OP VALUE` (customer=C-7, total>=100, order^=88); repeat it, each must hold", func(s string) error {
		f.where = append(f.where, s)
		return nil
	})
	fs.StringVar(&f.idPrefix, "id-prefix", "", "only runs whose ID begins with `PREFIX`")
	fs.StringVar(&f.createdFrom, "created-from", "", "only runs created at or after `TIME` (2026-11-28T10:00:00Z, 2026-11-28, or an age: 36h, 7d)")
	fs.StringVar(&f.createdTo, "created-to", "", "only runs created before `TIME` (as --created-from)")
	fs.BoolVar(&f.topLevel, "top-level", false, "only runs that no other run started (no children)")
}

// query checks the filter flags that need no store and returns the query
// they make, without its attribute filters (see where).
func (f *filterFlags) query(now time.Time) (runtime.ListRunsQuery, error) {
	var q runtime.ListRunsQuery
	if f.workflow != "" {
		if err := storage.CheckWorkflowName(f.workflow); err != nil {
			return q, usagef("--workflow: %s", nameReason(err))
		}
	}
	st, err := parseStatus(f.status)
	if err != nil {
		return q, err
	}
	if f.queue != "" {
		if err := storage.CheckQueueName(f.queue); err != nil {
			return q, usagef("--queue: %s", nameReason(err))
		}
	}
	for _, w := range f.where {
		if err := whereShape(w); err != nil {
			return q, err
		}
	}
	if len(f.where) > storage.MaxAttrFilters {
		return q, usagef("--where given %d times: at most %d filters combine", len(f.where), storage.MaxAttrFilters)
	}
	q = runtime.ListRunsQuery{Workflow: f.workflow, Status: st, Queue: f.queue, IDPrefix: f.idPrefix, TopLevel: f.topLevel}
	if q.CreatedFrom, err = parseWhen("--created-from", f.createdFrom, now); err != nil {
		return q, err
	}
	if q.CreatedTo, err = parseWhen("--created-to", f.createdTo, now); err != nil {
		return q, err
	}
	if !q.CreatedFrom.IsZero() && !q.CreatedTo.IsZero() && !q.CreatedTo.After(q.CreatedFrom) {
		return q, usagef("--created-to %s is not after --created-from %s", stamp(q.CreatedTo), stamp(q.CreatedFrom))
	}
	return q, nil
}

// any reports whether a filter flag was given.
func (f *filterFlags) any() bool {
	return f.workflow != "" || f.status != "" || f.queue != "" || len(f.where) > 0 || f.idPrefix != "" || f.createdFrom != "" || f.createdTo != "" || f.topLevel
}

// args spells the filter flags again, for a suggested command.
func (f *filterFlags) args() []string {
	var out []string
	for _, kv := range [][2]string{{"--workflow", f.workflow}, {"--status", strings.ToLower(f.status)}, {"--queue", f.queue}, {"--id-prefix", f.idPrefix}, {"--created-from", f.createdFrom}, {"--created-to", f.createdTo}} {
		if kv[1] != "" {
			out = append(out, kv[0], kv[1])
		}
	}
	for _, w := range f.where {
		out = append(out, "--where", w)
	}
	if f.topLevel {
		out = append(out, "--top-level")
	}
	return out
}

// whereFilters reads the --where filters in the types the catalog
// declares (runtime.Engine.ParseWhere): a name no workflow declares (with
// the nearest one), or a value or comparison its type does not take, is
// an argError.
func (f *filterFlags) whereFilters(c *call, e *runtime.Engine) ([]runtime.AttrFilter, error) {
	if len(f.where) == 0 {
		return nil, nil
	}
	filters, err := e.ParseWhere(c.ctx, f.where)
	if errors.Is(err, runtime.ErrInvalidArgument) {
		return nil, argError{"--where: " + c.describe(err)}
	}
	return filters, err
}

// whereOps are the comparisons of a --where filter, the two-character
// ones first.
var whereOps = []string{"<=", ">=", "^=", "=", "<", ">"}

// whereShape checks a --where filter's shape before the store is opened:
// NAME OP VALUE with a well-formed name and a known comparison. Its value
// is read later, in the attribute's type.
func whereShape(text string) error {
	i := strings.IndexAny(text, "=<>^")
	if i <= 0 {
		return usagef("--where %q: want NAME OP VALUE, such as customer=C-7, total>=100 or order^=88 (OP is =, <, <=, >, >= or ^=)", text)
	}
	rest := text[i:]
	if !slices.ContainsFunc(whereOps, func(op string) bool { return strings.HasPrefix(rest, op) }) {
		return usagef("--where %q: unknown comparison at %q (want =, <, <=, >, >= or ^=)", text, rest)
	}
	if err := storage.CheckAttrName(strings.TrimSpace(text[:i])); err != nil {
		return usagef("--where %q: %s", text, nameReason(err))
	}
	return nil
}

// parseWhen reads a time flag: RFC 3339, a date-time or a date (UTC), or
// an age (36h, 7d) counted back from now. "" is the zero time.
func parseWhen(flagName, s string, now time.Time) (time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}, nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), nil
		}
	}
	if d, err := parseAge(s); err == nil && d > 0 {
		return now.Add(-d).UTC(), nil
	}
	return time.Time{}, usagef("%s %q: want a time (2026-11-28T10:00:00Z, 2026-11-28) or an age (90m, 36h, 7d)", flagName, s)
}

// rateFlag is --rate: runs a second, 0 for no bound.
type rateFlag struct{ v float64 }

func (r *rateFlag) String() string { return strconv.FormatFloat(r.v, 'g', -1, 64) }

// wants says what the flag takes (see flagWants).
func (r *rateFlag) wants() string { return "want a number of runs a second, 0 or more (0: no bound)" }

func (r *rateFlag) Set(s string) error {
	v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
		return errors.New(r.wants())
	}
	r.v = v
	return nil
}

// rate is the request's Rate for the flag's value.
func (r *rateFlag) rate() float64 {
	if r.v == 0 {
		return runtime.BulkRateUnlimited
	}
	return r.v
}

// bulkAction is stem bulk ACTION.
func bulkAction(a runtime.BulkAction) func(fs *flag.FlagSet) func(*call, []string) error {
	return func(fs *flag.FlagSet) func(*call, []string) error {
		var f filterFlags
		f.register(fs)
		dry := fs.Bool("dry-run", false, "count the runs and show a few, and change nothing")
		yes := fs.Bool("yes", false, "act without asking (required without a terminal)")
		rate := &rateFlag{v: runtime.DefaultBulkRate}
		fs.Var(rate, "rate", "act on at most `N` runs a second, so that live work goes on; 0 for no bound")
		reason := new(string)
		if bulkReasons(a) {
			fs.StringVar(reason, "reason", "", "the reason `TEXT` each run records (default \"bulk action ID\")")
		}
		return func(c *call, args []string) error {
			if len(args) > 0 {
				// max is 1 so that this says more than "unexpected argument".
				return usagef("unexpected argument %q: stem bulk %s acts on the runs its filters match; stem %s RUN_ID acts on one run, and stem bulk continue ID goes on with a bulk action", args[0], a, bulkOne(a))
			}
			q, err := f.query(time.Now())
			if err != nil {
				return err
			}
			if q.Workflow == runtime.BulkWorkflow {
				return usagef("--workflow %s: bulk actions do not act on bulk actions; stem terminate ID ends one", runtime.BulkWorkflow)
			}
			if *reason != "" {
				if err := (storage.CancelRequest{RunID: "-", Reason: *reason}).Validate(); err != nil {
					msg := strings.TrimPrefix(err.Error(), "cancel: ")
					return usagef("--reason: %s", strings.TrimPrefix(msg, storage.ErrInvalidArgument.Error()+": "))
				}
			}
			if !*dry && !*yes && !isTerminal(c.in) {
				return usagef("no terminal to confirm on: add --yes to act on the runs the filter matches without a question (--dry-run counts them first)")
			}
			e, err := c.open()
			if err != nil {
				return err
			}
			if q.Where, err = f.whereFilters(c, e); err != nil {
				return err
			}
			req := runtime.BulkRequest{Action: a, Filter: q, Reason: *reason, Rate: rate.rate()}
			if err := req.Validate(); err != nil {
				return argError{c.describe(err)}
			}
			n, more, err := e.CountMatching(c.ctx, q, bulkCountCap)
			if err != nil {
				return err
			}
			sample, err := bulkSampleIDs(c.ctx, e, q)
			if err != nil {
				return err
			}
			if err := c.printCount(a, f.any(), n, more, sample, *dry); err != nil || *dry || n == 0 {
				return err
			}
			if !*yes {
				ok, err := c.confirm(a, n, more, rate.v)
				if err != nil || !ok {
					return err
				}
			}
			if err := c.checkSealKey(e); err != nil {
				return err
			}
			if err := runtime.RegisterBulk(e); err != nil {
				return err
			}
			id, err := e.StartBulk(c.ctx, req)
			if err != nil {
				return err
			}
			c.subject = id
			if !c.out.json {
				pace := fmt.Sprintf("at most %s runs a second", rate)
				if rate.v == 0 {
					pace = "with no bound on its rate"
				}
				fmt.Fprintf(c.out.w, "bulk action %s started: %s %s\n", clean(id), a, pace)
			}
			return c.carryBulk(e, id)
		}
	}
}

// bulkOne is the command that does a bulk action's action to one run.
func bulkOne(a runtime.BulkAction) string {
	if a == runtime.BulkRestartFailed {
		return "restart --from STEP_KEY"
	}
	return string(a)
}

// bulkSampleIDs returns the IDs of the first few runs q matches, bulk
// actions left out.
func bulkSampleIDs(ctx context.Context, e *runtime.Engine, q runtime.ListRunsQuery) ([]string, error) {
	q.Limit = bulkSample + 1
	runs, _, err := e.ListRuns(ctx, q)
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, r := range runs {
		if r.Workflow != runtime.BulkWorkflow && len(ids) < bulkSample {
			ids = append(ids, r.ID)
		}
	}
	return ids, nil
}

// printCount prints what the filter matches: the count and a few IDs.
func (c *call) printCount(a runtime.BulkAction, filtered bool, n int, more bool, sample []string, dry bool) error {
	if c.out.json {
		return c.out.line(jsonBulkCount{Action: string(a), Matched: n, AtLeast: more, Sample: orEmpty(sample), DryRun: dry})
	}
	count := fmt.Sprintf("%d runs match", n)
	switch {
	case more:
		count = fmt.Sprintf("at least %d runs match", n)
	case n == 1:
		count = "1 run matches"
	case n == 0 && filtered:
		_, err := fmt.Fprintln(c.out.w, "no runs match the filter: nothing to do")
		return err
	case n == 0:
		_, err := fmt.Fprintln(c.out.w, "no runs: nothing to do")
		return err
	}
	if !filtered {
		count += " (no filter: every run in the store)"
	}
	ids := make([]string, len(sample))
	for i, id := range sample {
		ids[i] = clean(id)
	}
	list := strings.Join(ids, ", ")
	if rest := n - len(sample); rest > 0 || more {
		list += ", …"
	}
	fmt.Fprintf(c.out.w, "%s: %s\n", count, list)
	if a == runtime.BulkRestartFailed {
		fmt.Fprintln(c.out.w, "restart-failed acts on the errored ones among them")
	}
	if dry {
		_, err := fmt.Fprintf(c.out.w, "dry run: nothing done\n")
		return err
	}
	return nil
}

// confirm asks on the terminal whether to go on; no is a refusal that
// says nothing was done.
func (c *call) confirm(a runtime.BulkAction, n int, more bool, rate float64) (bool, error) {
	count := strconv.Itoa(n)
	if more {
		count = "at least " + count
	}
	pace := fmt.Sprintf(", at most %s a second", strconv.FormatFloat(rate, 'g', -1, 64))
	if rate == 0 {
		pace = ", with no bound on the rate"
	}
	fmt.Fprintf(c.errw, "%s %s runs%s? [y/N] ", a, count, pace)
	line, err := bufio.NewReader(c.in).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return false, err
	}
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return true, nil
	}
	return false, errors.New("not confirmed: nothing done")
}

// carryBulk carries out bulk action id in this process (a worker engine
// that serves only bulk actions) and prints its progress until it ends,
// or until Ctrl-C, which leaves it to be continued.
func (c *call) carryBulk(e *runtime.Engine, id string) error {
	sig, stopSig := signal.NotifyContext(context.WithoutCancel(c.ctx), os.Interrupt, syscall.SIGTERM)
	defer stopSig()
	work, stopWork := context.WithCancel(sig)
	ran := make(chan error, 1)
	go func() { ran <- e.Run(work) }()
	working := true
	stop := func() error {
		if !working {
			return nil
		}
		working = false
		stopWork()
		return <-ran
	}
	defer stop()
	// A line is printed when the progress changes, once there is some,
	// and when the bulk action ends.
	var last *runtime.BulkInfo
	tick := time.NewTicker(bulkPoll)
	defer tick.Stop()
	for {
		b, err := e.GetBulk(c.ctx, id)
		if err != nil {
			return err
		}
		changed := last == nil && (b.Progress.Matched > 0 || b.Progress.Done) ||
			last != nil && !progressEqual(last.Progress, b.Progress)
		// Text says "done" once; JSON gives the final status too.
		ended := b.Status.Finished() && (last == nil || last.Status != b.Status && (c.out.json || !last.Progress.Done))
		if changed || ended {
			if err := c.printProgress(b); err != nil {
				return err
			}
			last = &b
		}
		if b.Status.Finished() {
			return c.bulkEnded(b)
		}
		select {
		case <-sig.Done():
			stop() // hands the bulk action back at once
			return fmt.Errorf("interrupted: bulk action %s stopped after %d runs; %s goes on with it, acting on none of them again (so does any worker that registers runtime.RegisterBulk); %s abandons it",
				id, b.Progress.Matched, c.command("bulk", "continue", id), c.command("terminate", id))
		case err := <-ran:
			working = false
			if err == nil {
				err = errors.New("it stopped")
			}
			return fmt.Errorf("the worker carrying bulk action %s failed: %w; %s goes on with it", id, err, c.command("bulk", "continue", id))
		case <-tick.C:
		}
	}
}

func progressEqual(a, b runtime.BulkProgress) bool {
	return a.Matched == b.Matched && a.Acted == b.Acted && a.Skipped == b.Skipped && a.Failed == b.Failed && a.Done == b.Done && slices.Equal(a.Errors, b.Errors)
}

// bulkVerbs say what each action did to a run, for the counts.
var bulkVerbs = map[runtime.BulkAction]string{
	runtime.BulkTerminate:     "terminated",
	runtime.BulkCancel:        "asked to cancel",
	runtime.BulkPause:         "paused",
	runtime.BulkResume:        "resumed",
	runtime.BulkRestart:       "restarted",
	runtime.BulkRestartFailed: "restarted from their failed step",
}

// counts says a bulk action's progress in words.
func counts(a runtime.BulkAction, p runtime.BulkProgress) string {
	return fmt.Sprintf("%d matched: %d %s, %d skipped, %d failed", p.Matched, p.Acted, bulkVerbs[a], p.Skipped, p.Failed)
}

// printProgress prints a line of a followed bulk action's progress.
func (c *call) printProgress(b runtime.BulkInfo) error {
	if c.out.json {
		return c.out.line(jsonBulkOf(b))
	}
	state := "so far"
	if b.Progress.Done {
		state = "done"
	}
	_, err := fmt.Fprintf(c.out.w, "  %s %s\n", counts(b.Request.Action, b.Progress), state)
	return err
}

// bulkEnded reports how a followed bulk action ended: exit 0 when done
// with no run refused.
func (c *call) bulkEnded(b runtime.BulkInfo) error {
	switch b.Status {
	case runtime.StatusComplete:
		if !c.out.json {
			for _, e := range b.Progress.Errors {
				fmt.Fprintf(c.out.w, "  %s\n", clean(e))
			}
		}
		if b.Progress.Failed > 0 {
			if c.out.json {
				return exitCode(1)
			}
			return fmt.Errorf("bulk action %s is done, and %d runs were refused (the last are listed above)", b.ID, b.Progress.Failed)
		}
		return nil
	case runtime.StatusErrored:
		return fmt.Errorf("bulk action %s failed: %s; %s goes on from the page that failed", b.ID, errNote(b.Err, false), c.command("bulk", "continue", b.ID))
	}
	return fmt.Errorf("bulk action %s was %s: %s", b.ID, b.Status, errNote(b.Err, false))
}

// bulkContinue is stem bulk continue ID.
func bulkContinue(*flag.FlagSet) func(*call, []string) error {
	return func(c *call, args []string) error {
		id := args[0]
		c.subject = id
		e, err := c.open()
		if err != nil {
			return err
		}
		b, err := e.GetBulk(c.ctx, id)
		if err != nil {
			return err
		}
		if b.Status == runtime.StatusComplete {
			if err := c.printProgress(b); err != nil {
				return err
			}
			return c.bulkEnded(b)
		}
		if err := e.ContinueBulk(c.ctx, id); err != nil {
			if errors.Is(err, runtime.ErrInvalidState) {
				return errors.New(strings.TrimPrefix(err.Error(), runtime.ErrInvalidState.Error()+": "))
			}
			return err
		}
		if err := runtime.RegisterBulk(e); err != nil {
			return err
		}
		if !c.out.json {
			fmt.Fprintf(c.out.w, "bulk action %s goes on: %s\n", clean(id), b.Request.Action)
		}
		return c.carryBulk(e, id)
	}
}

// bulkStatus is stem bulk status ID.
func bulkStatus(*flag.FlagSet) func(*call, []string) error {
	return func(c *call, args []string) error {
		c.subject = args[0]
		e, err := c.open()
		if err != nil {
			return err
		}
		b, err := e.GetBulk(c.ctx, args[0])
		if err != nil {
			return err
		}
		if c.out.json {
			return c.out.encode(jsonBulkOf(b))
		}
		w := c.out.w
		fmt.Fprintf(w, "bulk action  %s\naction       %s\n", clean(b.ID), b.Request.Action)
		fmt.Fprintf(w, "filter       %s\n", clean(filterText(b.Request.Filter)))
		if b.Request.Reason != "" {
			fmt.Fprintf(w, "reason       %s\n", clean(b.Request.Reason))
		}
		fmt.Fprintf(w, "rate         %s\n", rateText(b.Request.Rate))
		fmt.Fprintf(w, "status       %s\n", b.Status)
		state := "so far"
		if b.Progress.Done {
			state = "done"
		}
		fmt.Fprintf(w, "progress     %s %s\n", counts(b.Request.Action, b.Progress), state)
		if b.Err != nil {
			fmt.Fprintf(w, "error        %s\n", errNote(b.Err, false))
		}
		fmt.Fprintf(w, "created      %s\nupdated      %s\n", stamp(b.CreatedAt), stamp(b.UpdatedAt))
		if b.EndedAt != nil {
			fmt.Fprintf(w, "ended        %s\n", stamp(*b.EndedAt))
		}
		if len(b.Progress.Errors) > 0 {
			fmt.Fprintf(w, "\nlast refusals and skips\n")
			for _, e := range b.Progress.Errors {
				fmt.Fprintf(w, "  %s\n", clean(e))
			}
		}
		if !b.Status.Finished() {
			fmt.Fprintf(w, "\n%s carries it on here\n", c.command("bulk", "continue", b.ID))
		}
		return nil
	}
}

// bulkList is stem bulk list.
func bulkList(fs *flag.FlagSet) func(*call, []string) error {
	limit := fs.Int("limit", 20, "at most `N` bulk actions")
	return func(c *call, _ []string) error {
		if *limit < 1 {
			return usagef("--limit %d: want 1 or more", *limit)
		}
		e, err := c.open()
		if err != nil {
			return err
		}
		bs, err := e.ListBulks(c.ctx, *limit)
		if err != nil {
			return err
		}
		if c.out.json {
			out := make([]jsonBulk, len(bs))
			for i, b := range bs {
				out[i] = jsonBulkOf(b)
			}
			return c.out.encode(struct {
				Bulks []jsonBulk `json:"bulks"`
			}{out})
		}
		if len(bs) == 0 {
			_, err := fmt.Fprintln(c.out.w, "no bulk actions")
			return err
		}
		tw := tabwriter.NewWriter(c.out.w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tACTION\tSTATUS\tMATCHED\tACTED\tSKIPPED\tFAILED\tCREATED\tFILTER")
		for _, b := range bs {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%d\t%s\t%s\n", clean(b.ID), b.Request.Action, b.Status, b.Progress.Matched, b.Progress.Acted,
				b.Progress.Skipped, b.Progress.Failed, stamp(b.CreatedAt), clean(truncate(filterText(b.Request.Filter), 80)))
		}
		return tw.Flush()
	}
}

// filterText says a filter as its flags would: "workflow=orders.fulfil
// status=errored where=total>=100".
func filterText(q runtime.ListRunsQuery) string {
	var parts []string
	add := func(name, v string) {
		if v != "" {
			parts = append(parts, name+"="+v)
		}
	}
	add("workflow", q.Workflow)
	add("status", string(q.Status))
	add("queue", q.Queue)
	for _, f := range q.Where {
		add("where", f.String())
	}
	add("id-prefix", q.IDPrefix)
	if !q.CreatedFrom.IsZero() {
		add("created-from", stamp(q.CreatedFrom))
	}
	if !q.CreatedTo.IsZero() {
		add("created-to", stamp(q.CreatedTo))
	}
	if q.TopLevel {
		parts = append(parts, "top-level")
	}
	if len(parts) == 0 {
		return "none: every run"
	}
	return strings.Join(parts, " ")
}

// rateText says a request's rate.
func rateText(r float64) string {
	switch {
	case r < 0:
		return "no bound"
	case r == 0:
		r = runtime.DefaultBulkRate
	}
	return strconv.FormatFloat(r, 'g', -1, 64) + " runs a second at most"
}

// jsonBulkCount is what a bulk action's filter matches, before it starts
// (--dry-run, or when nothing matches).
type jsonBulkCount struct {
	Action  string `json:"action"`
	Matched int    `json:"matched"`
	// AtLeast says the count stopped at its cap.
	AtLeast bool     `json:"at_least,omitempty"`
	Sample  []string `json:"sample"`
	DryRun  bool     `json:"dry_run"`
}

// jsonBulk is a bulk action: its request, status and progress.
type jsonBulk struct {
	ID        string     `json:"id"`
	Action    string     `json:"action"`
	Filter    string     `json:"filter"`
	Reason    string     `json:"reason,omitempty"`
	Rate      float64    `json:"rate"`
	Status    string     `json:"status"`
	Matched   int        `json:"matched"`
	Acted     int        `json:"acted"`
	Skipped   int        `json:"skipped"`
	Failed    int        `json:"failed"`
	Done      bool       `json:"done"`
	Errors    []string   `json:"errors"`
	Error     string     `json:"error,omitempty"`
	CreatedAt time.Time  `json:"created_at"`
	UpdatedAt time.Time  `json:"updated_at"`
	EndedAt   *time.Time `json:"ended_at,omitempty"`
}

func jsonBulkOf(b runtime.BulkInfo) jsonBulk {
	j := jsonBulk{ID: b.ID, Action: string(b.Request.Action), Filter: filterText(b.Request.Filter), Reason: b.Request.Reason,
		Rate: b.Request.Rate, Status: string(b.Status), Matched: b.Progress.Matched, Acted: b.Progress.Acted,
		Skipped: b.Progress.Skipped, Failed: b.Progress.Failed, Done: b.Progress.Done, Errors: orEmpty(b.Progress.Errors),
		CreatedAt: b.CreatedAt.UTC(), UpdatedAt: b.UpdatedAt.UTC(), EndedAt: b.EndedAt}
	if j.Rate == 0 {
		j.Rate = runtime.DefaultBulkRate
	} else if j.Rate < 0 {
		j.Rate = 0
	}
	if b.Err != nil {
		j.Error = errNote(b.Err, true)
	}
	return j
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
