package main

import (
	"flag"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/storage"
)

// finishedStatuses are the statuses purge deletes.
var finishedStatuses = []string{string(runtime.StatusComplete), string(runtime.StatusErrored), string(runtime.StatusTerminated)}

// days matches a duration that begins with whole days: "30d", "7d12h".
var days = regexp.MustCompile(`^(\d+)d(.*)$`)

// parseAge reads a Go duration, or one that begins with whole days (30d,
// 7d12h), which Go's durations lack.
func parseAge(s string) (time.Duration, error) {
	m := days.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return time.ParseDuration(s)
	}
	n, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil || n > int64(time.Duration(1<<63-1)/(24*time.Hour)) {
		return 0, fmt.Errorf("%s days is too long", m[1])
	}
	d := time.Duration(n) * 24 * time.Hour
	if m[2] != "" {
		rest, err := time.ParseDuration(m[2])
		if err != nil || rest < 0 {
			return 0, fmt.Errorf("%q after the days is not a Go duration", m[2])
		}
		if d+rest < d {
			return 0, fmt.Errorf("too long")
		}
		d += rest
	}
	return d, nil
}

// splitList splits a comma-separated flag value; an empty item is an
// error.
func splitList(flagName, s string) ([]string, error) {
	if s == "" {
		return nil, nil
	}
	var out []string
	for _, v := range strings.Split(s, ",") {
		v = strings.TrimSpace(v)
		if v == "" {
			return nil, usagef("%s %q: an empty item; separate the items with single commas", flagName, s)
		}
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out, nil
}

func purge(fs *flag.FlagSet) func(*call, []string) error {
	var olderThan string
	fs.StringVar(&olderThan, "older-than", "", "delete runs that finished more than `DUR` ago (required; 36h, 30d)")
	status := fs.String("status", "", "only runs in these finished `STATUS`es, comma-separated: complete, errored, terminated (any case)")
	wf := fs.String("workflow", "", "only runs of these workflows, comma-separated `NAME`s")
	dry := fs.Bool("dry-run", false, "count what would be deleted, and delete nothing")
	return func(c *call, _ []string) error {
		if olderThan == "" {
			return usagef("--older-than DUR is required: how long ago the runs to delete finished (36h, 30d)")
		}
		age, err := parseAge(olderThan)
		if err != nil {
			return usagef("--older-than %q: %v; want a Go duration (90m, 36h) or days (30d, 7d12h)", olderThan, trimDurationErr(err))
		}
		if age <= 0 {
			return usagef("--older-than %s: want above zero", olderThan)
		}
		names, err := splitList("--status", *status)
		if err != nil {
			return err
		}
		var statuses []runtime.RunStatus
		for _, n := range names {
			st := runtime.RunStatus(strings.ToLower(n))
			switch {
			case st.Finished():
				statuses = append(statuses, st)
			case st.Valid():
				return usagef("--status %s: purge deletes only finished runs: complete, errored or terminated", n)
			default:
				msg := fmt.Sprintf("--status: unknown status %q", n)
				if best := nearest(strings.ToLower(n), finishedStatuses); best != "" {
					msg += fmt.Sprintf("; did you mean %q?", best)
				}
				return usagef("%s (want complete, errored or terminated)", msg)
			}
		}
		workflows, err := splitList("--workflow", *wf)
		if err != nil {
			return err
		}
		for _, w := range workflows {
			if err := storage.CheckWorkflowName(w); err != nil {
				return usagef("--workflow: %s", nameReason(err))
			}
		}
		e, err := c.open()
		if err != nil {
			return err
		}
		if err := checkPurgeWorkflows(c, e, workflows); err != nil {
			return err
		}
		res, err := e.Purge(c.ctx, runtime.PurgeOptions{OlderThan: age, Statuses: statuses, Workflows: workflows, DryRun: *dry})
		if err != nil {
			return err
		}
		if c.out.json {
			return c.out.encode(jsonPurge{Runs: res.Runs, Events: res.Events, DryRun: *dry, OlderThan: age.String(), AtLeast: *dry && res.Runs >= storage.MaxPurgeBatch})
		}
		what := "runs"
		if len(statuses) > 0 {
			what = joinOr(statusNames(statuses)) + " runs"
		}
		if len(workflows) > 0 {
			what += " of " + clean(joinOr(workflows))
		}
		n := fmt.Sprint(res.Runs)
		if *dry && res.Runs >= storage.MaxPurgeBatch {
			n = "at least " + n
		}
		events := ""
		if res.Events > 0 {
			events = fmt.Sprintf(" (and %d buffered event(s))", res.Events)
		}
		verb := "deleted"
		if *dry {
			verb = "would delete"
		}
		_, err = fmt.Fprintf(c.out.w, "%s %s %s%s that finished more than %s ago\n", verb, n, what, events, clean(olderThan))
		return err
	}
}

// checkPurgeWorkflows refuses a workflow that is neither in the catalog
// nor the workflow of any run: a typo, which would delete nothing.
// Workflows no worker serves any longer may still have runs to purge.
func checkPurgeWorkflows(c *call, e *runtime.Engine, workflows []string) error {
	if len(workflows) == 0 {
		return nil
	}
	cat, err := e.Catalog(c.ctx)
	if err != nil {
		return err
	}
	known := make([]string, len(cat.Workflows))
	for i, w := range cat.Workflows {
		known[i] = w.Name
	}
	for _, w := range workflows {
		if slices.Contains(known, w) {
			continue
		}
		runs, _, err := e.ListRuns(c.ctx, runtime.ListRunsQuery{Workflow: w, Limit: 1})
		if err != nil {
			return err
		}
		if len(runs) > 0 {
			continue
		}
		msg := fmt.Sprintf("--workflow %s: no worker serves that workflow and the store has no runs of it", w)
		if best := nearest(w, known); best != "" {
			msg += fmt.Sprintf("; did you mean %q?", best)
		}
		return fmt.Errorf("%s (stem workflows lists them)", msg)
	}
	return nil
}

func statusNames(sts []runtime.RunStatus) []string {
	out := make([]string, len(sts))
	for i, s := range sts {
		out[i] = string(s)
	}
	return out
}

// joinOr joins "a", "a or b", "a, b or c".
func joinOr(items []string) string {
	if len(items) < 2 {
		return strings.Join(items, "")
	}
	return strings.Join(items[:len(items)-1], ", ") + " or " + items[len(items)-1]
}

// trimDurationErr drops the quoted input time.ParseDuration repeats.
func trimDurationErr(err error) string {
	msg := err.Error()
	if i := strings.Index(msg, ` "`); i >= 0 && strings.HasPrefix(msg, "time: ") {
		return strings.TrimPrefix(msg[:i], "time: ")
	}
	return msg
}

type jsonPurge struct {
	// Runs deleted, or on a dry run that would be (AtLeast: the count
	// stopped at its cap).
	Runs      int    `json:"runs"`
	Events    int    `json:"events"`
	DryRun    bool   `json:"dry_run"`
	AtLeast   bool   `json:"at_least,omitempty"`
	OlderThan string `json:"older_than"`
}
