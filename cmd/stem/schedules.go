package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/schedule"
	"github.com/stemflow/stem/storage"
)

const scheduleDetail = `Manages the cron schedules kept in the store. Each tick of a schedule
starts one run of its workflow, with the input given at create.

subcommands:
  create ID WORKFLOW CRON JSON|-|@FILE [flags]
               store a new schedule (see stem help schedule create)
  list         the schedules and their next fire times (also: stem schedules)
  show ID      one schedule: its policies, next fire times and last run
  pause ID     stop its ticks until resumed
  resume ID    tick again from now on (the ticks missed while paused are
               not started)
  trigger ID   start a run now, outside the calendar, whatever the overlap
               policy, paused or not; prints the run's ID
  delete ID    delete the schedule; the runs it started stay

CRON is five fields, minute hour day-of-month month day-of-week
("30 2 * * 1-5"), or @yearly, @monthly, @weekly, @daily, @hourly or
@every DURATION, read in the time zone --tz names (an IANA name such as
Europe/Paris; default UTC).

Overlap policies (--overlap): what a tick does while the schedule's last
run has not finished.
  skip        start nothing for the tick (the default)
  buffer_one  hold the tick and start it when the run ends; later ticks
              meanwhile are skipped
  allow       start the tick's run anyway

Catch-up policies (--catch-up): what becomes of the ticks missed while no
worker served the schedule (a tick more than a minute late is missed).
  skip        start none of them (the default)
  latest      start the latest of them only
  all         start each of them within --catch-up-window of now, oldest
              first

A tick's run has the ID ID@TICK, its tick's time in RFC 3339, UTC
(nightly@2026-01-02T02:00:00Z), so each tick starts one run however many
workers serve the schedule; a run that trigger starts has the ID
ID@manual-TIME.

This command only records schedules: they fire while a worker sharing the
store runs the schedule package's Service (runtime.Config.Services:
schedule.Service{}). Nothing fires while none does.`

const (
	scheduleListArgs   = "[--limit N] [--after ID]"
	scheduleListDetail = `Lists the schedules by ID with their workflow, cron expression, time
zone, overlap and catch-up policies, whether they are paused, and their
next fire time in their zone (--json: the next three). Under a full page,
a "more:" line gives the command for the next one.`
)

// scheduleSubs are stem schedule's subcommands.
func scheduleSubs() []*command {
	return []*command{
		{name: "schedule create", min: 4, max: 4, setup: createSchedule,
			args:    "ID WORKFLOW CRON JSON|-|@FILE [--tz ZONE] [--overlap skip|buffer_one|allow] [--catch-up skip|latest|all] [--catch-up-window DUR] [--queue NAME] [--partition KEY] [--priority N] [--paused]",
			summary: "store a new schedule",
			detail: `Stores a schedule ID whose ticks, at the times CRON names in --tz, each
start a run of WORKFLOW with the input JSON, and prints it with its next
fire times. The workflow must be one a worker sharing the store serves
(see stem workflows) and the input must match its type; the expression,
zone and policies must be usable: else nothing is stored. An ID that
exists is refused: delete that schedule first, or pick another ID.

ID is 1 to 128 letters, digits, '.', '_' and '-'. CRON is five fields
(minute hour day-of-month month day-of-week: "30 2 * * 1-5") or @yearly,
@monthly, @weekly, @daily, @hourly, @every DURATION. The policies are
explained by stem help schedule.

` + jsonFrom},
		{name: "schedule list", max: 0, setup: listSchedules, readOnly: true,
			args:    scheduleListArgs,
			summary: "list the schedules",
			detail:  scheduleListDetail},
		{name: "schedule show", min: 1, max: 1, setup: showSchedule, readOnly: true,
			args:    "ID",
			summary: "show one schedule",
			detail: `Shows a schedule: its workflow, input, cron expression and zone, policies,
queue, whether it is paused, its next three fire times in its zone, the
tick held back by buffer_one if any, and the last run it started.`},
		{name: "schedule pause", min: 1, max: 1, setup: scheduleOp("pause"),
			args:    "ID",
			summary: "stop a schedule's ticks",
			detail:  `Pauses a schedule: its ticks start nothing until stem schedule resume. Runs it started go on.`},
		{name: "schedule resume", min: 1, max: 1, setup: scheduleOp("resume"),
			args:    "ID",
			summary: "let a paused schedule tick again",
			detail:  `Resumes a paused schedule from now on: the ticks it missed while paused are not started.`},
		{name: "schedule trigger", min: 1, max: 1, setup: scheduleOp("trigger"),
			args:    "ID",
			summary: "start a run of a schedule now",
			detail: `Starts a run of the schedule's workflow now, with its input, outside its
calendar: paused or not, whatever its overlap policy. Its next tick does
not move. Prints the run's ID (ID@manual-TIME).`},
		{name: "schedule delete", min: 1, max: 1, setup: scheduleOp("delete"),
			args:    "ID",
			summary: "delete a schedule",
			detail:  `Deletes a schedule. The runs it started stay, and keep their IDs.`},
	}
}

// cronParser reads expressions as package schedule does, so that create
// refuses a bad one before it opens the store (the schedule package checks
// again).
var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

var wantList = regexp.MustCompile(`\(want \[([^\]]*)\]\)`)

// nameReason is the reason a name check gives, without the sentinel.
func nameReason(err error) string {
	var ne *storage.NameError
	if errors.As(err, &ne) {
		return ne.Reason
	}
	return trimPrefixes(err.Error())
}

// policyName reads a policy name in any case, with '-' for '_'.
func policyName(s string) string {
	return strings.ReplaceAll(strings.ToLower(strings.TrimSpace(s)), "-", "_")
}

// invalidSchedule is schedule.ErrInvalidSchedule's text without the
// sentinel, for a usage error.
func invalidSchedule(flagName string, err error) error {
	msg := strings.TrimPrefix(err.Error(), schedule.ErrInvalidSchedule.Error()+": ")
	// The list of valid names, as the package prints it ([a b c]), in words.
	msg = wantList.ReplaceAllStringFunc(msg, func(m string) string {
		return "(want " + joinOr(strings.Fields(wantList.FindStringSubmatch(m)[1])) + ")"
	})
	if flagName != "" {
		msg = flagName + ": " + msg
	}
	return usageError{msg}
}

func createSchedule(fs *flag.FlagSet) func(*call, []string) error {
	zone := fs.String("tz", "", "read CRON in the IANA time zone `ZONE` (Europe/Paris; default UTC)")
	overlap := fs.String("overlap", "skip", "what a tick does while the last run is unfinished: skip, buffer_one or allow")
	catchUp := fs.String("catch-up", "skip", "what becomes of the ticks missed while no worker ran: skip, latest or all")
	window := fs.Duration("catch-up-window", 0, "with --catch-up all: start the missed ticks within `DUR` of now")
	queue := fs.String("queue", "", "start the runs on queue `NAME` (default: the workflow's)")
	partition := fs.String("partition", "", "start the runs in partition `KEY` of their queue")
	priority := fs.Int("priority", 0, "start the runs with priority `N` within their queue (higher first)")
	paused := fs.Bool("paused", false, "create the schedule paused")
	return func(c *call, args []string) error {
		id, workflow, expr := args[0], args[1], args[2]
		c.subject = id
		if err := storage.CheckScheduleID(id); err != nil {
			return usagef("%s", nameReason(err))
		}
		if err := storage.CheckWorkflowName(workflow); err != nil {
			return usagef("%s", nameReason(err))
		}
		loc := time.UTC
		if *zone != "" {
			l, err := time.LoadLocation(*zone)
			if err != nil || *zone == "Local" {
				return usagef("--tz %q: unknown time zone; give an IANA name such as Europe/Paris or America/New_York, or UTC", *zone)
			}
			loc = l
		}
		sched, err := cronParser.Parse(expr)
		if err != nil {
			return usagef("cron expression %q: %v; want five fields (minute hour day-of-month month day-of-week, such as \"30 2 * * 1-5\") or @hourly, @daily, @weekly, @monthly, @yearly, @every 15m", expr, err)
		}
		if sched.Next(time.Now().In(loc)).IsZero() {
			return usagef("cron expression %q never fires", expr)
		}
		ov, err := schedule.ParseOverlap(policyName(*overlap))
		if err != nil {
			return invalidSchedule("--overlap", err)
		}
		cu, err := schedule.ParseCatchUp(policyName(*catchUp))
		if err != nil {
			return invalidSchedule("--catch-up", err)
		}
		switch {
		case *window < 0:
			return usagef("--catch-up-window %v: want above zero", *window)
		case cu == schedule.All && *window == 0:
			return usagef("--catch-up all needs --catch-up-window DUR: how far back to start the missed ticks")
		case cu != schedule.All && *window != 0:
			return usagef("--catch-up-window applies only to --catch-up all (not %s)", schedule.PolicyName(cu))
		}
		if err := checkPlacement(*queue, *priority); err != nil {
			return err
		}
		input, err := c.jsonArg("input", args[3])
		if err != nil {
			return err
		}
		e, err := c.open()
		if err != nil {
			return err
		}
		if err := checkQueue(c, e, *queue); err != nil {
			return err
		}
		if err := c.checkSealKey(e); err != nil {
			return err
		}
		info, err := schedule.CreateJSON(c.ctx, e, schedule.Spec{
			ID: id, Workflow: workflow, Cron: expr, TimeZone: *zone,
			Queue: *queue, Partition: *partition, Priority: *priority,
			Overlap: ov, CatchUp: cu, CatchUpWindow: *window, Paused: *paused,
		}, input)
		if err != nil {
			return c.scheduleError(e, id, err)
		}
		c.openInput(&info)
		if c.out.json {
			return c.out.encode(jsonScheduleOf(info))
		}
		what := "created; it fires while a worker that shares the store runs schedule.Service"
		if info.Paused {
			what = "created, paused (stem schedule resume " + shellQuote(id) + " starts its ticks)"
		}
		fmt.Fprintf(c.out.w, "%s: %s\n\n", clean(id), what)
		return printSchedule(c.out.w, info)
	}
}

// openInput opens a schedule's input sealed by the workers' codec when
// this call has their key; else it stays as stored (and shows as sealed).
func (c *call) openInput(s *schedule.Info) {
	if c.codec == nil || len(s.Input) == 0 || json.Valid(s.Input) {
		return
	}
	if plain, err := c.codec.Decode(s.Input); err == nil && json.Valid(plain) {
		s.Input = plain
	}
}

// scheduleError words the store's answers about a schedule for an
// operator: which ID, and what to do.
func (c *call) scheduleError(e *runtime.Engine, id string, err error) error {
	switch {
	case errors.Is(err, storage.ErrScheduleNotFound):
		msg := fmt.Sprintf("no schedule %s in %s", id, c.g.storeName())
		if near := nearestSchedule(c, e, id); near != "" {
			msg += fmt.Sprintf("; did you mean %q?", near)
		}
		return errors.New(msg + " (stem schedule list lists them)")
	case errors.Is(err, storage.ErrConflict):
		return fmt.Errorf("schedule %s exists; delete it first or pick another ID", id)
	case errors.Is(err, schedule.ErrInvalidSchedule):
		return invalidSchedule("", err)
	}
	return err
}

// nearestSchedule is the stored schedule ID closest to id, or "", from the
// first few pages of IDs.
func nearestSchedule(c *call, e *runtime.Engine, id string) string {
	var ids []string
	after := ""
	for range 10 {
		page, next, err := schedule.List(c.ctx, e, after, 500)
		if err != nil {
			return ""
		}
		for _, s := range page {
			ids = append(ids, s.ID)
		}
		if next == "" {
			break
		}
		after = next
	}
	return nearest(id, ids)
}

func listSchedules(fs *flag.FlagSet) func(*call, []string) error {
	limit := fs.Int("limit", defaultLimit, "at most `N` schedules per page")
	after := fs.String("after", "", "the page after schedule `ID` (the \"more:\" line gives it)")
	return func(c *call, _ []string) error {
		if *limit < 1 {
			return usagef("--limit %d: want 1 or more", *limit)
		}
		e, err := c.open()
		if err != nil {
			return err
		}
		list, next, err := schedule.List(c.ctx, e, *after, *limit)
		if err != nil {
			return err
		}
		for i := range list {
			c.openInput(&list[i])
		}
		if c.out.json {
			out := jsonSchedulePage{Schedules: []jsonSchedule{}, Next: next}
			for _, s := range list {
				out.Schedules = append(out.Schedules, jsonScheduleOf(s))
			}
			return c.out.encode(out)
		}
		if len(list) == 0 {
			if *after != "" {
				_, err := fmt.Fprintln(c.out.w, "no schedules after "+clean(*after))
				return err
			}
			_, err := fmt.Fprintln(c.out.w, "no schedules (stem schedule create makes one)")
			return err
		}
		tw := tabwriter.NewWriter(c.out.w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tWORKFLOW\tCRON\tZONE\tOVERLAP\tCATCH-UP\tSTATE\tNEXT")
		for _, s := range list {
			state, nextAt := "active", "-"
			if s.Paused {
				state = "paused"
			}
			if len(s.Next) > 0 {
				nextAt = s.Next[0].Format(time.RFC3339)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", clean(s.ID), clean(s.Workflow), clean(s.Cron), clean(zoneName(s.TimeZone)),
				schedule.PolicyName(s.Overlap), catchUpText(s.Schedule), state, nextAt)
		}
		tw.Flush()
		if next != "" {
			more := []string{"schedule", "list"}
			if *limit != defaultLimit {
				more = append(more, "--limit", fmt.Sprint(*limit))
			}
			c.more(append(more, "--after", next)...)
		}
		return nil
	}
}

func zoneName(z string) string {
	if z == "" {
		return "UTC"
	}
	return z
}

func catchUpText(s storage.Schedule) string {
	if s.CatchUp == schedule.All {
		return fmt.Sprintf("all within %v", shortDuration(s.CatchUpWindow))
	}
	return schedule.PolicyName(s.CatchUp)
}

// shortDuration writes d without its trailing zero units: 720h, 1h30m.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

func showSchedule(*flag.FlagSet) func(*call, []string) error {
	return func(c *call, args []string) error {
		c.subject = args[0]
		e, err := c.open()
		if err != nil {
			return err
		}
		info, err := schedule.Get(c.ctx, e, args[0])
		if err != nil {
			return c.scheduleError(e, args[0], err)
		}
		c.openInput(&info)
		if c.out.json {
			return c.out.encode(jsonScheduleOf(info))
		}
		return printSchedule(c.out.w, info)
	}
}

func printSchedule(w io.Writer, s schedule.Info) error {
	fmt.Fprintf(w, "schedule   %s\nworkflow   %s\n", clean(s.ID), clean(s.Workflow))
	fmt.Fprintf(w, "cron       %s in %s\n", clean(s.Cron), clean(zoneName(s.TimeZone)))
	fmt.Fprintf(w, "input      %s\n", result(s.Input, 200))
	fmt.Fprintf(w, "overlap    %s\ncatch-up   %s\n", schedule.PolicyName(s.Overlap), catchUpText(s.Schedule))
	if q := placement(s.Queue, s.Partition, s.Priority); q != "" {
		fmt.Fprintf(w, "queue      %s\n", q)
	}
	if s.Paused {
		fmt.Fprintln(w, "state      paused: its ticks start nothing")
	} else {
		next := make([]string, len(s.Next))
		for i, t := range s.Next {
			next[i] = t.Format(time.RFC3339)
		}
		fmt.Fprintf(w, "state      active\nnext       %s\n", strings.Join(next, ", "))
	}
	if s.Held != nil {
		fmt.Fprintf(w, "held       the tick of %s, until the last run ends\n", s.Held.UTC().Format(time.RFC3339))
	}
	last := "none yet"
	if s.LastRunID != "" {
		last = clean(s.LastRunID)
		if s.LastFireAt != nil {
			last += ", at " + stamp(*s.LastFireAt)
		}
	}
	_, err := fmt.Fprintf(w, "last run   %s\ncreated    %s\nupdated    %s\n", last, stamp(s.CreatedAt), stamp(s.UpdatedAt))
	return err
}

// placement describes a queue, partition and priority other than the
// defaults, or is "" for the defaults.
func placement(queue, partition string, priority int) string {
	if (queue == "" || queue == runtime.DefaultQueue) && partition == "" && priority == 0 {
		return ""
	}
	s := clean(queue)
	if s == "" {
		s = runtime.DefaultQueue
	}
	if partition != "" {
		s += ", partition " + clean(partition)
	}
	if priority != 0 {
		s += fmt.Sprintf(", priority %d", priority)
	}
	return s
}

// scheduleOp is pause, resume, trigger or delete.
func scheduleOp(op string) func(*flag.FlagSet) func(*call, []string) error {
	return func(*flag.FlagSet) func(*call, []string) error {
		return func(c *call, args []string) error {
			id := args[0]
			c.subject = id
			e, err := c.open()
			if err != nil {
				return err
			}
			before, err := schedule.Get(c.ctx, e, id)
			if err != nil {
				return c.scheduleError(e, id, err)
			}
			var action, what, runID string
			switch op {
			case "pause":
				err = schedule.Pause(c.ctx, e, id)
				action, what = "paused", "paused; its ticks start nothing until stem schedule resume"
				if before.Paused {
					action, what = "already_paused", "was paused already"
				}
			case "resume":
				err = schedule.Resume(c.ctx, e, id)
				action, what = "not_paused", "was not paused"
				if before.Paused && err == nil {
					action, what = "resumed", "resumed"
					if after, gerr := schedule.Get(c.ctx, e, id); gerr == nil && len(after.Next) > 0 {
						what += "; next tick at " + after.Next[0].Format(time.RFC3339)
					}
				}
			case "trigger":
				if err := c.checkKeyHeld(e, runtime.SealedKeyID(before.Input), "the schedule's input is sealed with key ID"); err != nil {
					return err
				}
				runID, err = schedule.Trigger(c.ctx, e, id)
				action, what = "triggered", "started run "+runID
			case "delete":
				err = schedule.Delete(c.ctx, e, id)
				action, what = "deleted", "deleted; the runs it started stay"
			}
			if err != nil {
				return c.scheduleError(e, id, err)
			}
			if c.out.json {
				j := jsonScheduleDone{ScheduleID: id, Action: action, Message: what, RunID: runID}
				if op != "delete" {
					if after, gerr := schedule.Get(c.ctx, e, id); gerr == nil {
						c.openInput(&after)
						js := jsonScheduleOf(after)
						j.Schedule = &js
					}
				}
				return c.out.encode(j)
			}
			_, err = fmt.Fprintf(c.out.w, "%s: %s\n", clean(id), clean(what))
			return err
		}
	}
}

// jsonScheduleDone is what stem schedule pause, resume, trigger or delete
// did. Action says it in a word, for programs: paused, already_paused,
// resumed, not_paused, triggered or deleted. Message says it as the text
// output does. Schedule is the schedule as it stands after (absent once
// deleted, or if it could not be read).
type jsonScheduleDone struct {
	ScheduleID string `json:"schedule_id"`
	Action     string `json:"action"`
	Message    string `json:"message"`
	// RunID is the run trigger started.
	RunID    string        `json:"run_id,omitempty"`
	Schedule *jsonSchedule `json:"schedule,omitempty"`
}

type jsonSchedulePage struct {
	Schedules []jsonSchedule `json:"schedules"`
	// Next is the --after of the next page, "" at the end.
	Next string `json:"next"`
}

type jsonSchedule struct {
	ID          string          `json:"id"`
	Workflow    string          `json:"workflow"`
	Cron        string          `json:"cron"`
	TimeZone    string          `json:"time_zone"`
	Input       json.RawMessage `json:"input,omitempty"`
	InputSealed bool            `json:"input_sealed,omitempty"`
	Queue       string          `json:"queue"`
	Partition   string          `json:"partition"`
	Priority    int             `json:"priority"`
	Overlap     string          `json:"overlap"`
	CatchUp     string          `json:"catch_up"`
	// CatchUpWindow is a Go duration, "" unless CatchUp is all.
	CatchUpWindow string      `json:"catch_up_window,omitempty"`
	Paused        bool        `json:"paused"`
	Next          []time.Time `json:"next"`
	Held          *time.Time  `json:"held,omitempty"`
	LastFireAt    *time.Time  `json:"last_fire_at,omitempty"`
	LastRunID     string      `json:"last_run_id,omitempty"`
	Revision      int64       `json:"revision"`
	CreatedAt     time.Time   `json:"created_at"`
	UpdatedAt     time.Time   `json:"updated_at"`
}

func jsonScheduleOf(s schedule.Info) jsonSchedule {
	out := jsonSchedule{ID: s.ID, Workflow: s.Workflow, Cron: s.Cron, TimeZone: zoneName(s.TimeZone),
		Queue: s.Queue, Partition: s.Partition, Priority: s.Priority,
		Overlap: schedule.PolicyName(s.Overlap), CatchUp: schedule.PolicyName(s.CatchUp),
		Paused: s.Paused, Next: s.Next, Held: s.Held, LastFireAt: s.LastFireAt, LastRunID: s.LastRunID,
		Revision: s.Revision, CreatedAt: s.CreatedAt, UpdatedAt: s.UpdatedAt}
	if out.Queue == "" {
		out.Queue = runtime.DefaultQueue
	}
	if s.CatchUpWindow > 0 {
		out.CatchUpWindow = s.CatchUpWindow.String()
	}
	if out.Next == nil {
		out.Next = []time.Time{}
	}
	out.Input, out.InputSealed = jsonPayload(s.Input)
	return out
}
