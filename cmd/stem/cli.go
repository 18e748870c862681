package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/stores/storeurl"
)

const usage = `usage: stem [--store URL] [--json] COMMAND [ARGS]

commands:
  runs [--workflow NAME] [--status STATUS] [--limit N] [--after ID]   list runs
  show RUN_ID                       a run with its steps and attempts
  pause RUN_ID                      pause at the next step boundary
  resume RUN_ID                     resume a paused run
  terminate RUN_ID [REASON]         end a run; its running step is cancelled
  restart RUN_ID                    drop checkpoints, run again from the top
  send RUN_ID TOPIC JSON            deliver an event to one run (kept if it is not waiting yet)
  emit TOPIC JSON                   deliver an event to every run waiting on TOPIC

The store is a SQLite path (default stem.db, or $STEM_STORE), a postgres://
or redis:// URL.
`

// run is the whole command; main only exits with its code.
func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("stem", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage) }
	def := os.Getenv("STEM_STORE")
	if def == "" {
		def = "stem.db"
	}
	storeURL := fs.String("store", def, "the store: SQLite path, postgres:// or redis:// URL")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd, rest := fs.Arg(0), fs.Args()[1:]
	if _, ok := commands[cmd]; !ok {
		fmt.Fprintf(stderr, "stem: unknown command %q\n\n%s", cmd, usage)
		return 2
	}
	store, err := storeurl.Open(ctx, *storeURL)
	if err != nil {
		fmt.Fprintln(stderr, "stem:", err)
		return 1
	}
	defer store.Close()
	e, err := runtime.New(runtime.Config{Store: store})
	if err != nil {
		fmt.Fprintln(stderr, "stem:", err)
		return 1
	}
	defer e.Close()
	out := &printer{w: stdout, json: *asJSON}
	if err := commands[cmd](ctx, e, out, rest); err != nil {
		var u usageError
		if errors.As(err, &u) {
			fmt.Fprintf(stderr, "stem %s: %s\n\n%s", cmd, u.msg, usage)
			return 2
		}
		fmt.Fprintf(stderr, "stem %s: %v\n", cmd, err)
		return 1
	}
	return 0
}

type usageError struct{ msg string }

func (u usageError) Error() string { return u.msg }

func nargs(args []string, min, max int, names string) error {
	if len(args) < min || len(args) > max {
		return usageError{"want " + names}
	}
	return nil
}

var commands = map[string]func(ctx context.Context, e *runtime.Engine, out *printer, args []string) error{
	"runs":      listRuns,
	"show":      show,
	"pause":     control("paused (takes effect at the next step boundary if running)", (*runtime.Engine).Pause),
	"resume":    control("resumed", (*runtime.Engine).Resume),
	"restart":   control("restarted", (*runtime.Engine).Restart),
	"terminate": terminate,
	"send":      send,
	"emit":      emit,
}

func listRuns(ctx context.Context, e *runtime.Engine, out *printer, args []string) error {
	fs := flag.NewFlagSet("runs", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	q := runtime.ListRunsQuery{}
	fs.StringVar(&q.Workflow, "workflow", "", "")
	status := fs.String("status", "", "")
	fs.IntVar(&q.Limit, "limit", 50, "")
	fs.StringVar(&q.After, "after", "", "")
	if err := fs.Parse(args); err != nil {
		return usageError{err.Error()}
	}
	q.Status = runtime.RunStatus(*status)
	runs, next, err := e.ListRuns(ctx, q)
	if err != nil {
		return err
	}
	if out.json {
		return out.encode(map[string]any{"runs": jsonRuns(runs), "next": next})
	}
	tw := tabwriter.NewWriter(out.w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tWORKFLOW\tSTATUS\tUPDATED\tDETAIL")
	for _, r := range runs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.ID, r.Workflow, r.Status, r.UpdatedAt.Format(time.RFC3339), detail(r))
	}
	tw.Flush()
	if next != "" {
		fmt.Fprintf(out.w, "more: stem runs --after %s\n", next)
	}
	return nil
}

func detail(r runtime.RunInfo) string {
	switch {
	case r.Err != nil:
		return firstLine(r.Err.Error())
	case r.Status == runtime.StatusComplete:
		return truncate(string(r.Output), 60)
	case r.WaitingFor != "":
		s := "waiting for " + r.WaitingFor
		if r.ReadyAt != nil {
			s += " until " + r.ReadyAt.Format(time.RFC3339)
		}
		return s
	case r.Status == runtime.StatusWaiting && r.ReadyAt != nil:
		return "sleeping until " + r.ReadyAt.Format(time.RFC3339)
	case r.PauseRequested:
		return "pause requested"
	}
	return ""
}

func show(ctx context.Context, e *runtime.Engine, out *printer, args []string) error {
	if err := nargs(args, 1, 1, "RUN_ID"); err != nil {
		return err
	}
	r, err := e.Get(ctx, args[0])
	if err != nil {
		return err
	}
	steps, err := e.ListSteps(ctx, args[0])
	if err != nil {
		return err
	}
	if out.json {
		return out.encode(map[string]any{"run": jsonRuns([]runtime.RunInfo{r})[0], "steps": jsonSteps(steps)})
	}
	fmt.Fprintf(out.w, "run       %s\nworkflow  %s\nstatus    %s\n", r.ID, r.Workflow, r.Status)
	if r.ParentID != "" {
		fmt.Fprintf(out.w, "parent    %s\n", r.ParentID)
	}
	if d := detail(r); d != "" {
		fmt.Fprintf(out.w, "detail    %s\n", d)
	}
	fmt.Fprintf(out.w, "created   %s\nupdated   %s\n\n", r.CreatedAt.Format(time.RFC3339Nano), r.UpdatedAt.Format(time.RFC3339Nano))
	tw := tabwriter.NewWriter(out.w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "#\tSTEP\tKIND\tRESULT\tATTEMPTS")
	for _, s := range steps {
		res := truncate(string(s.Output), 50)
		if s.Err != nil {
			res = "error: " + truncate(firstLine(s.Err.Error()), 50)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d\n", s.Seq, s.Key, s.Kind, res, len(s.Attempts))
		for _, a := range s.Attempts {
			line := fmt.Sprintf("\t  attempt %d\t\t%s\t%s", a.Number, a.Ended.Sub(a.Started).Round(time.Microsecond), a.Started.Format(time.RFC3339Nano))
			if a.Error != "" {
				line += "\terror: " + truncate(firstLine(a.Error), 60)
			}
			fmt.Fprintln(tw, line)
		}
	}
	return tw.Flush()
}

func control(done string, op func(*runtime.Engine, context.Context, string) error) func(context.Context, *runtime.Engine, *printer, []string) error {
	return func(ctx context.Context, e *runtime.Engine, out *printer, args []string) error {
		if err := nargs(args, 1, 1, "RUN_ID"); err != nil {
			return err
		}
		if err := op(e, ctx, args[0]); err != nil {
			return err
		}
		return out.done(args[0], done)
	}
}

func terminate(ctx context.Context, e *runtime.Engine, out *printer, args []string) error {
	if err := nargs(args, 1, 2, "RUN_ID [REASON]"); err != nil {
		return err
	}
	reason := "terminated by an operator"
	if len(args) == 2 {
		reason = args[1]
	}
	if err := e.Terminate(ctx, args[0], reason); err != nil {
		return err
	}
	return out.done(args[0], "terminated")
}

func payload(s string) (json.RawMessage, error) {
	if !json.Valid([]byte(s)) {
		return nil, usageError{fmt.Sprintf("payload is not valid JSON: %s", truncate(s, 40))}
	}
	return json.RawMessage(s), nil
}

func send(ctx context.Context, e *runtime.Engine, out *printer, args []string) error {
	if err := nargs(args, 3, 3, "RUN_ID TOPIC JSON"); err != nil {
		return err
	}
	p, err := payload(args[2])
	if err != nil {
		return err
	}
	if err := e.SendEvent(ctx, args[0], args[1], p); err != nil {
		return err
	}
	return out.done(args[0], "event "+args[1]+" sent")
}

func emit(ctx context.Context, e *runtime.Engine, out *printer, args []string) error {
	if err := nargs(args, 2, 2, "TOPIC JSON"); err != nil {
		return err
	}
	p, err := payload(args[1])
	if err != nil {
		return err
	}
	n, err := e.Emit(ctx, args[0], p)
	if err != nil {
		return err
	}
	if out.json {
		return out.encode(map[string]any{"topic": args[0], "delivered": n})
	}
	_, err = fmt.Fprintf(out.w, "event %s delivered to %d waiting run(s)\n", args[0], n)
	return err
}

type printer struct {
	w    io.Writer
	json bool
}

func (p *printer) encode(v any) error {
	enc := json.NewEncoder(p.w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func (p *printer) done(id, what string) error {
	if p.json {
		return p.encode(map[string]string{"run": id, "result": what})
	}
	_, err := fmt.Fprintf(p.w, "%s: %s\n", id, what)
	return err
}

type jsonRun struct {
	ID         string          `json:"id"`
	Workflow   string          `json:"workflow"`
	ParentID   string          `json:"parent_id,omitempty"`
	Status     string          `json:"status"`
	Output     json.RawMessage `json:"output,omitempty"`
	Error      string          `json:"error,omitempty"`
	WaitingFor string          `json:"waiting_for,omitempty"`
	ReadyAt    *time.Time      `json:"ready_at,omitempty"`
	Created    time.Time       `json:"created_at"`
	Updated    time.Time       `json:"updated_at"`
}

func jsonRuns(runs []runtime.RunInfo) []jsonRun {
	out := make([]jsonRun, len(runs))
	for i, r := range runs {
		out[i] = jsonRun{ID: r.ID, Workflow: r.Workflow, ParentID: r.ParentID, Status: string(r.Status),
			Output: r.Output, WaitingFor: r.WaitingFor, ReadyAt: r.ReadyAt, Created: r.CreatedAt, Updated: r.UpdatedAt}
		if r.Err != nil {
			out[i].Error = r.Err.Error()
		}
	}
	return out
}

type jsonStep struct {
	Seq      int64             `json:"seq"`
	Key      string            `json:"key"`
	Kind     string            `json:"kind"`
	Output   json.RawMessage   `json:"output,omitempty"`
	Error    string            `json:"error,omitempty"`
	Attempts []runtime.Attempt `json:"attempts,omitempty"`
}

func jsonSteps(steps []runtime.StepInfo) []jsonStep {
	out := make([]jsonStep, len(steps))
	for i, s := range steps {
		out[i] = jsonStep{Seq: s.Seq, Key: s.Key, Kind: string(s.Kind), Attempts: s.Attempts}
		if json.Valid(s.Output) {
			out[i].Output = s.Output
		}
		if s.Err != nil {
			out[i].Error = s.Err.Error()
		}
	}
	return out
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
