package main

import (
	"flag"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/stemflow/stem/runtime"
)

// command is one of stem's commands.
type command struct {
	name    string
	aliases []string
	// args is the synopsis of the positional arguments; min and max bound
	// their count.
	args     string
	min, max int
	summary  string
	detail   string
	// readOnly commands only read: they open the store read-only. The
	// others open it read-write, but never create or migrate it (see
	// call.open); init is the one that does.
	readOnly bool
	// timeout bounds the whole command when set; the default is the
	// package's timeout.
	timeout time.Duration
	// setup declares the command's flags and returns what runs it; it
	// checks its arguments before it opens the store.
	setup func(fs *flag.FlagSet) func(c *call, args []string) error
	// subs are the subcommands of a command that has them (stem schedule
	// create): the first argument names one, which is then run as a
	// command of its own, named "schedule create". Its setup is not run.
	subs []*command
}

// commands are stem's commands in the order usage lists them.
var commands []*command

func init() {
	commands = []*command{
		{name: "runs", max: 0, setup: listRuns, readOnly: true,
			args:    "[--workflow NAME] [--version N,...] [--status STATUS] [--queue NAME] [--where NAME OP VALUE]... [--id-prefix PREFIX] [--created-from TIME] [--created-to TIME] [--top-level] [--parent RUN_ID] [--held] [--sort created|id] [--limit N] [--after CURSOR]",
			summary: "list runs, a page at a time",
			detail: `Lists runs, newest first (--sort id lists them by ID), with their
workflow, the workflow version they started under ("-" for a run stored
before versions were kept), status, execution, when they were created and
last changed, and what they are doing. Filters combine. --version keeps
the runs of those versions (comma-separated, or repeat the flag; 0 is the
runs stored without one). --where keeps the runs whose search attribute
compares so (NAME OP VALUE: customer=C-7, total>=100, placed<2026-11-28,
order^=88; OP is =, <, <=, >, >= or ^= for a string's prefix), the value
read in the attribute's declared type (stem workflows lists them); repeat
it, each must hold. --top-level leaves children out. --created-from and
--created-to take a time (2026-11-28T10:00:00Z, 2026-11-28) or an age
(36h, 7d). Under a full page, a "more:" line gives the command for the
next one. The same filters select the runs of stem bulk.

A held run (its workflow's code no longer makes the calls it recorded;
see stem show) has "(held)" after its status and the reason as its detail.
--held lists only those: the store has no index of holds, so the command
reads the listing page after page until it has --limit held runs.`},
		{name: "show", min: 1, max: 1, setup: show, readOnly: true,
			args:    "RUN_ID [--execution N] [--follow]",
			summary: "a run: its executions, steps and attempts, updates and streams",
			detail: `Shows the run (its current execution, with start and end, and its search
attributes), the list of
its executions (each start or restart), and the steps of one execution in
the order they ran, numbered from 1 in each execution on every store, with
their status (running, retrying, waiting, complete, failed, interrupted,
or timed out: an event wait whose timeout passed, which the workflow sees
as an error it may handle), result, and each attempt with its error.
A multi-line error (a panic's stack) is shortened to its first line;
--json prints it whole. The run's queue, partition and priority are shown
when they are not the defaults (queue default, no partition, priority 0);
--json always has them.

A held run (a deploy changed its workflow's code so that it no longer
makes the calls the run recorded) shows "(held)" after its status and a
HELD block: since when, why, the call where the code parted from the
history (counted from 1; --json's "position" counts from 0), the key the
run recorded there and the key the code called, when an engine looks at it
again, and the commands that end it or run it again now.

Then the run's updates, when it has some (the latest 20: their sequence
number, ID, name, state and reply or error, shortened; --json has them
whole, with their requests), and its streams (name, length, and whether
it is closed). With --follow, stem show then prints the new values of the
run's streams as they are written, each as "STREAM  OFFSET  VALUE" (with
--json, a line of JSON each), until the run ends, and says how it ended.`},
		{name: "export", min: 1, max: 1, setup: export, readOnly: true,
			args:    "RUN_ID [--out FILE]",
			summary: "write a run's history to a file, to replay in tests",
			detail: `Writes the run's current execution as a history file: its input, each
call it recorded (checkpoint) in order, and its outcome, payloads as
stored (sealed ones as base64). Keep such files beside your tests and
replay them against every change with stemtest.ReplayHistories: a change
that would not continue the run fails the test, saying where.`},
		{name: "start", min: 2, max: 2, setup: start,
			args:    "WORKFLOW JSON|-|@FILE [--id RUN_ID] [--if-exists POLICY] [--if-ended POLICY] [--singleton KEY | --debounce KEY=DUR] [--queue NAME] [--partition KEY] [--priority N] [--delay DUR]",
			summary: "start a run of a workflow with a JSON input",
			detail: `Starts a run of WORKFLOW, which a worker sharing the store serves (it
records its workflows in the store when it runs; see 'stem workflows'). The
input is checked against the workflow's input type first: a mismatch is
refused and nothing is written. With --id, an existing run of the same
workflow with that ID is left as it is, unless --if-exists (return, fail,
replace) or --if-ended (return, reuse, reject, reuse-failed) says
otherwise: fail and reject refuse the start, replace and reuse delete the
old run with its history and children and start anew under the ID (see
the README's start policies). --singleton KEY starts the run only if no
unfinished run of the workflow holds KEY, and answers with that run
otherwise; --debounce KEY=DUR joins the run of KEY's open window (taking
its input), or opens a window of DUR with a new run that starts when it
closes.

The run goes on its workflow's queue, or the one --queue names (a queue a
worker registered; see 'stem queues'); --partition puts it in a partition
of a queue that has partitions, and --priority orders it within the queue
(higher first). --delay holds it queued for that long (a Go duration: 90s,
15m, 2h).

` + jsonFrom},
		{name: "send", min: 3, max: 3, setup: send,
			args:    "RUN_ID TOPIC JSON|-|@FILE",
			summary: "deliver an event to one run",
			detail: `Delivers an event to one run; it is kept if the run is not waiting for it
yet. The topic must be one a worker awaits and the payload must match its
type (see 'stem workflows'), else it is refused and nothing is written.

` + jsonFrom},
		{name: "emit", min: 2, max: 2, setup: emit,
			args:    "TOPIC JSON|-|@FILE",
			summary: "deliver an event to every run waiting on TOPIC",
			detail: `Delivers an event to every run waiting on TOPIC now. The topic and the payload are checked as by send.

` + jsonFrom},
		{name: "update", min: 3, max: 3, setup: update,
			args:    "RUN_ID UPDATE JSON|-|@FILE [--id UPDATE_ID] [--unvalidated] [--no-wait] [--timeout DUR]",
			summary: "send an update to a run and print the workflow's reply",
			detail: `Sends the update UPDATE to a run, which its workflow takes and replies to,
and prints the reply: its JSON, or, when the workflow replied with an
error, that error (exit 1). The request is checked against the schema the
workers recorded for the update (see 'stem workflows'): a mismatch is
refused and nothing is written. An update whose handler has a validator
is refused unless --unvalidated: only the application can run its
validator (the schema is still checked). An update no worker records is
refused too, unless --unvalidated.

The update is sent under a generated ID, or --id's: sending an ID again
(after a time out, or a crash) finds the first update and its reply, and
the run handles it once. --no-wait prints the update's ID without waiting;
the same command with --id UPDATE_ID waits for its reply. The wait lasts
at most --timeout, then says the update is pending and how to wait again.

With --json it prints the update: run_id, id, name, seq, state,
request, reply or error (and error_name for a declared error), and
created, false when the run had an update of the ID already.

` + jsonFrom},
		{name: "stream", min: 2, max: 2, setup: stream, readOnly: true,
			args:    "RUN_ID STREAM [--from N] [--follow]",
			summary: "print the values a run wrote to one of its streams",
			detail: `Prints the values of the run's stream STREAM, in order from offset --from
(the first value is 0), one a line as "OFFSET  VALUE", the value as JSON;
with --json, a line of JSON each: {"offset", "value", "written_at"}.
Without --follow it prints the values written now and exits. With
--follow it waits for new values and prints them as they come, until the
stream is closed or the run ends (or Ctrl-C). 'stem show RUN_ID' lists a
run's streams.`},
		{name: "pause", min: 1, max: 1, setup: control("paused", "paused (takes effect at the next step boundary if running)", (*runtime.Engine).Pause),
			args:    "RUN_ID",
			summary: "pause a run at its next step boundary",
			detail:  `Pauses a run: a running one at its next step boundary, a waiting or queued one at once.`},
		{name: "resume", min: 1, max: 1, setup: control("resumed", "resumed", (*runtime.Engine).Resume),
			args:    "RUN_ID",
			summary: "resume a paused run",
			detail:  `Resumes a paused run, or cancels a pause that has not taken effect yet.`},
		{name: "restart", min: 1, max: 1, setup: restart,
			args:    "RUN_ID [--from STEP_KEY]",
			summary: "run a run again in a new execution, from the top or a step",
			detail: `Begins a new execution of the run with the same ID and input. From the
top by default; with --from, the steps before STEP_KEY (a checkpoint key
of the current execution, as 'stem show' lists them) keep their results
and the run goes on from that step. The previous execution stays readable
with 'stem show RUN_ID --execution N'.`},
		{name: "cancel", min: 1, max: 2, setup: cancel,
			args:    "RUN_ID [REASON]",
			summary: "ask a run to stop: its workflow cleans up and ends itself",
			detail: `Requests the cancellation of an unfinished run, with REASON (plain text,
at most 1024 bytes). Unlike terminate, the workflow sees it: its running
step's context is cancelled, its next durable call fails with an error
matching runtime.ErrCanceled, and the cleanup it runs on its detached
context runs and is checkpointed. A sleeping or waiting run wakes for it
at once; a paused run sees it when resumed. The first request wins. Its
unfinished children meet their parent-close policy when it ends.`},
		{name: "terminate", min: 1, max: 2, setup: terminate,
			args:    "RUN_ID [REASON]",
			summary: "end a run and its unfinished children",
			detail: `Ends an unfinished run with REASON; its running step is cancelled, and
its unfinished children (and theirs) are terminated with it, except those
started to be abandoned, and those whose parent-close policy is cancel,
which are cancelled instead (see cancel).`},
		{name: "bulk", min: 0, max: 0, setup: noFlags, subs: bulkSubs(),
			args:    "ACTION [--workflow NAME] [--status STATUS] [--where NAME OP VALUE]... [filters] [--dry-run] [--yes] [--rate N] | status ID | list | continue ID",
			summary: "terminate, cancel, pause, resume or restart every run a filter matches",
			detail:  bulkDetail},
		{name: "schedule", min: 0, max: 0, setup: noFlags, subs: scheduleSubs(),
			args:    "SUBCOMMAND ARGS",
			summary: "create, list, show, pause, resume, trigger or delete cron schedules",
			detail:  scheduleDetail},
		{name: "schedules", max: 0, setup: listSchedules, readOnly: true,
			args:    scheduleListArgs,
			summary: "list the schedules (stem schedule list)",
			detail:  scheduleListDetail},
		{name: "purge", max: 0, setup: purge, timeout: 10 * time.Minute,
			args:    "--older-than DUR [--status STATUS,...] [--workflow NAME,...] [--dry-run]",
			summary: "delete finished runs older than a duration",
			detail: `Deletes the finished runs (complete, errored, terminated) that ended more
than --older-than ago, each with everything it owns (executions, steps,
attempts, buffered events), in batches short enough not to hold the
workers up, and says how many. Unfinished runs are never touched.
--status keeps only runs of those finished statuses (any case), --workflow
only runs of those workflows; each takes a comma-separated list.
--dry-run counts what would be deleted (up to 10000) and deletes nothing.

--older-than is a Go duration (90m, 36h) or days, alone or before one
(30d, 7d12h); it must be above zero.

Workers also delete their finished runs by themselves past a retention
(runtime.Config.Retention, or a workflow's retention=).`},
		{name: "queues", max: 0, setup: queues, readOnly: true,
			summary: "the queues, their limits and how many runs each holds",
			detail: `Lists the queues the workers sharing the store recorded (each with the
worker that recorded it last, and when), and the default queue, with
their limits: concurrency (runs of the queue executing at once, across
every worker), partition concurrency (of one partition key), and rate
(starts per period); unlimited when not set. Then their runs now: ready
(the backlog), how long the oldest of those has been ready, scheduled (a
delayed start not yet due), running, waiting (asleep or awaiting an event)
and paused.

--json gives each limit as a number, 0 for unlimited, as runtime.Queue
takes it (concurrency, partition_concurrency, rate; rate_period is a Go
duration, absent without a rate).`},
		{name: "workers", max: 0, setup: workers, readOnly: true,
			summary: "the workers at work on the store: host, process, heartbeat, runs in flight",
			detail:  workersDetail},
		{name: "ui", max: 0, setup: serveUI,
			args:    "[--addr HOST:PORT] [--allowed-host NAME] [--read-only] [--token-file FILE | --token TOKEN] [--basic-auth USER:PASSWORD] [--insecure-no-login]",
			summary: "serve the web dashboard: filter, inspect and operate the runs in a browser",
			detail:  uiDetail},
		{name: "workflows", aliases: []string{"catalog"}, max: 0, setup: catalog, readOnly: true,
			summary: "the workflows, event topics and updates the workers serve",
			detail: `Lists the workflows, event topics and updates that the workers sharing
the store recorded, with their versions and the shape of their JSON (in
brief), and which updates have a validator; --json prints their JSON
Schemas whole.`},
		{name: "check", max: 1 << 20, setup: checkCmd, readOnly: true, timeout: 10 * time.Minute,
			args:    "[--workflow NAME,...] [--manifest-only] [PATH...]",
			summary: "list the runs in flight that a build could not continue (for CI before a deploy)",
			detail:  checkDetail},
		{name: "bench", max: 0, setup: bench, timeout: time.Hour,
			args:    "[--workload ceiling|w1|w2|w3|all] [--runs N] [--concurrency C] [--processes P] [--probe D]",
			summary: "measure the store against its own ceiling: steps/s, latency, sleeps",
			detail: `Measures the store's ceiling, then runs the standard workloads on it,
checks every result, and prints what it measured, each figure next to the
ceiling measured in the same run, and the process's peak memory:

  ceiling  the store's cheapest durable commit, from one connection and
           from as many as there are workers (--concurrency × --processes),
           each for --probe: commits/s and one commit's latency. Postgres:
           autocommitted one-row INSERTs into a scratch table; SQLite:
           one-row commits in the store's synchronous mode, from one
           connection (SQLite has one writer); Redis: a trivial EVALSHA.
           Nothing of it is left in the store. mem: has no ceiling.
  w1  --runs runs of --steps steps, all in flight: steps/s, and their ratio
      to the ceiling from as many connections as there are workers; under
      it, what each server node did per step (Redis: each master's script
      calls, commands, CPU and shards; Postgres: the server's transactions
      and rows, read after their second of lag)
  w2  one run of --steps steps at a time (--samples, after 5 warm-ups): latency
  w3  --runs runs that each sleep --sleep, all in flight: wall time

all runs the ceiling first, then w1, w2 and w3. Runs start in both ways
programs start them (one batch; a goroutine per run that awaits its
result), or the one --start names.

The runs are worked by an engine of this process with --concurrency
workers or, with --processes P, by P worker processes of --concurrency
workers each (this program started again on the same store; they exit with
it); this process then only starts the runs and awaits their results. The
worker processes are started, and ready, before the timing begins: their
start-up is not in the figures.

The store must exist (stem init). Its runs, of the workflows stembench.steps
and stembench.sleep, stay in the store: point --store at a scratch one.`},
		{name: "init", max: 0, setup: initStore,
			summary: "create the store, or migrate it to this version's schema",
			detail: `Creates a Stem store where --store points (a SQLite file, or the tables
in a Postgres schema) or migrates the one there to the schema this version
of stem uses, and says which it did. It is the only command that creates
or changes a store's schema: the others refuse a store that is not there
or is at another schema version, and never change it. Another
application's database is refused and left as it was.`},
	}
}

// noFlags is the setup of a command that takes no flags of its own.
func noFlags(*flag.FlagSet) func(*call, []string) error { return nil }

// sub returns the subcommand called name, or nil.
func (c *command) sub(name string) *command {
	prefix := c.name + " "
	for _, s := range c.subs {
		if s.name == prefix+name {
			return s
		}
	}
	return nil
}

// subNames lists the subcommands, as "create, list, ... or delete".
func (c *command) subNames() string {
	names := make([]string, len(c.subs))
	for i, s := range c.subs {
		names[i] = strings.TrimPrefix(s.name, c.name+" ")
	}
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// unknownSub says that c has no subcommand name, suggesting the nearest.
func unknownSub(c *command, name string) string {
	names := make([]string, len(c.subs))
	for i, s := range c.subs {
		names[i] = strings.TrimPrefix(s.name, c.name+" ")
	}
	msg := fmt.Sprintf("stem %s: unknown subcommand %q", c.name, name)
	if best := nearest(name, names); best != "" {
		msg += fmt.Sprintf("; did you mean %q?", best)
	}
	return msg + fmt.Sprintf(" (the subcommands are %s; stem help %s)", c.subNames(), c.name)
}

// lookup returns the command called name or one of its aliases, or nil.
// It finds workerCommand too, which no list shows.
func lookup(name string) *command {
	if name == workerCommand.name {
		return workerCommand
	}
	for _, c := range commands {
		if c.name == name || slices.Contains(c.aliases, name) {
			return c
		}
	}
	return nil
}

// jsonFrom says where a JSON argument may come from (see call.jsonArg).
const jsonFrom = `The JSON is given on the command line, or read from standard input
("-") or a file ("@payload.json"), up to 2 MiB.`
