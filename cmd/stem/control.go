package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/storage"
)

func start(fs *flag.FlagSet) func(*call, []string) error {
	id := fs.String("id", "", "`RUN_ID` for the new run (default: a generated one)")
	queue := fs.String("queue", "", "start the run on queue `NAME` (default: its workflow's)")
	partition := fs.String("partition", "", "start the run in partition `KEY` of its queue")
	priority := fs.Int("priority", 0, "the run's priority `N` within its queue (higher first)")
	delay := fs.Duration("delay", 0, "keep the run queued for `DUR` before a worker takes it")
	ifExists := fs.String("if-exists", "", "when the --id run exists and has not ended: `POLICY` return, fail or replace")
	ifEnded := fs.String("if-ended", "", "when the --id run has ended: `POLICY` return, reuse, reject or reuse-failed")
	singleton := fs.String("singleton", "", "start only if no unfinished run of the workflow holds `KEY`; else answer with that run")
	debounce := fs.String("debounce", "", "join the run of KEY's open window, or open one of DUR (`KEY=DUR`)")
	return func(c *call, args []string) error {
		c.subject = args[0]
		if err := checkPlacement(*queue, *priority); err != nil {
			return err
		}
		opts, err := startPolicyFlags(*id, *ifExists, *ifEnded, *singleton, *debounce)
		if err != nil {
			return err
		}
		if *queue != "" {
			opts = append(opts, runtime.OnQueue(*queue))
		}
		if *partition != "" {
			opts = append(opts, runtime.WithPartition(*partition))
		}
		if *priority != 0 {
			opts = append(opts, runtime.WithPriority(*priority))
		}
		if *delay < 0 {
			return usagef("--delay %v: want 0 or more", *delay)
		}
		if *delay > 0 {
			opts = append(opts, runtime.WithDelay(*delay))
		}
		input, err := c.jsonArg("input", args[1])
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
		if *id != "" && *ifExists == "" && *ifEnded == "" {
			r, err := e.Get(c.ctx, *id)
			switch {
			case err == nil && r.Workflow == args[0]:
				return c.done(r.ID, "exists", fmt.Sprintf("exists already (%s), left as it is", r.Status))
			case err == nil:
				return fmt.Errorf("run ID %s is taken by a run of workflow %s", *id, r.Workflow)
			case !errors.Is(err, runtime.ErrRunNotFound):
				return err
			}
		}
		r, err := e.StartJSON(c.ctx, args[0], *id, input, opts...)
		if err != nil {
			return err
		}
		if (*singleton != "" || *debounce != "") && *id != "" && r.ID != *id {
			return c.done(r.ID, "joined", "joined the run that holds the key, left as it is ("+string(r.Status)+")")
		}
		what := "started"
		if q := placement(r.Queue, r.Partition, r.Priority); q != "" {
			what += " on queue " + q
		}
		what += "; a worker that serves " + args[0] + " runs it"
		if r.ReadyAt != nil && r.ReadyAt.After(time.Now()) {
			what += " from " + stamp(*r.ReadyAt)
		}
		return c.done(r.ID, "started", what)
	}
}

// startPolicyFlags turns stem start's policy and key flags into start
// options, refusing a misspelled policy (naming the nearest) or a
// malformed key.
func startPolicyFlags(id, ifExists, ifEnded, singleton, debounce string) ([]runtime.StartOption, error) {
	var opts []runtime.StartOption
	if (ifExists != "" || ifEnded != "") && id == "" {
		return nil, usagef("--if-exists and --if-ended judge the run of --id; give --id")
	}
	if ifExists != "" {
		p, err := policyFlag("--if-exists", ifExists, map[string]string{"return": string(runtime.ExistingReturn), "fail": string(runtime.ExistingFail), "replace": string(runtime.ExistingReplace)})
		if err != nil {
			return nil, err
		}
		opts = append(opts, runtime.IfExists(runtime.ExistingPolicy(p)))
	}
	if ifEnded != "" {
		p, err := policyFlag("--if-ended", ifEnded, map[string]string{"return": string(runtime.EndedReturn), "reuse": string(runtime.EndedReuse), "reject": string(runtime.EndedReject), "reuse-failed": string(runtime.EndedReuseFailed)})
		if err != nil {
			return nil, err
		}
		opts = append(opts, runtime.IfEnded(runtime.EndedPolicy(p)))
	}
	switch {
	case singleton != "" && debounce != "":
		return nil, usagef("--singleton and --debounce: give one key, not both")
	case singleton != "":
		opts = append(opts, runtime.WithSingleton(singleton))
	case debounce != "":
		key, dur, ok := strings.Cut(debounce, "=")
		if !ok || key == "" {
			return nil, usagef("--debounce %q: want KEY=DUR, as in --debounce nightly=30s", debounce)
		}
		d, err := time.ParseDuration(dur)
		if err != nil || d <= 0 {
			return nil, usagef("--debounce %q: the window %q is not a positive Go duration (30s, 5m, 1h)", debounce, dur)
		}
		opts = append(opts, runtime.WithDebounce(key, d))
	}
	return opts, nil
}

// policyFlag is the policy a flag names, or a usage error naming the
// choices and the nearest.
func policyFlag(flagName, v string, choices map[string]string) (string, error) {
	if p, ok := choices[v]; ok {
		return p, nil
	}
	names := slices.Sorted(maps.Keys(choices))
	msg := fmt.Sprintf("%s %q: want %s", flagName, v, strings.Join(names, ", "))
	if best := nearest(v, names); best != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", best)
	}
	return "", usagef("%s", msg)
}

func restart(fs *flag.FlagSet) func(*call, []string) error {
	from := fs.String("from", "", "keep the steps before `STEP_KEY` and run again from it")
	return func(c *call, args []string) error {
		c.subject = args[0]
		e, err := c.open()
		if err != nil {
			return err
		}
		var opts []runtime.RestartOption
		if *from != "" {
			opts = append(opts, runtime.FromStep(*from))
		}
		if err := e.Restart(c.ctx, args[0], opts...); err != nil {
			if *from != "" && errors.Is(err, runtime.ErrInvalidArgument) {
				if steps, lerr := e.ListSteps(c.ctx, args[0], 0); lerr == nil {
					keys, pending := []string{}, false
					for _, s := range steps {
						if s.Seq > 0 {
							keys = append(keys, s.Key)
						} else if s.Key == *from {
							pending = true
						}
					}
					with := "none; restart from the top"
					if len(keys) > 0 {
						with = strings.Join(keys, ", ")
					}
					if pending {
						return fmt.Errorf("step %q has no result in the run's current execution yet: restart from a step with one (%s), or from the top", *from, with)
					}
					return fmt.Errorf("no step %q with a result in the run's current execution (those with one: %s)", *from, with)
				}
			}
			return err
		}
		what := "restarted from the top"
		if *from != "" {
			what = "restarted from " + *from
		}
		if r, err := e.Get(c.ctx, args[0]); err == nil {
			what += fmt.Sprintf(" as execution %d", r.Execution)
		}
		return c.done(args[0], "restarted", what)
	}
}

func control(action, done string, op func(*runtime.Engine, context.Context, string) error) func(*flag.FlagSet) func(*call, []string) error {
	return func(*flag.FlagSet) func(*call, []string) error {
		return func(c *call, args []string) error {
			c.subject = args[0]
			e, err := c.open()
			if err != nil {
				return err
			}
			if err := op(e, c.ctx, args[0]); err != nil {
				return err
			}
			return c.done(args[0], action, done)
		}
	}
}

// cancel requests a run's cancellation, which its workflow handles.
func cancel(*flag.FlagSet) func(*call, []string) error {
	return func(c *call, args []string) error {
		c.subject = args[0]
		reason := "cancelled by an operator"
		if len(args) == 2 {
			reason = args[1]
		}
		if err := (storage.CancelRequest{RunID: args[0], Reason: reason}).Validate(); err != nil {
			msg := strings.TrimPrefix(err.Error(), "cancel: ")
			return usagef("%s", strings.TrimPrefix(msg, storage.ErrInvalidArgument.Error()+": "))
		}
		e, err := c.open()
		if err != nil {
			return err
		}
		if err := e.Cancel(c.ctx, args[0], reason); err != nil {
			return err
		}
		action, what := "cancel_requested", "cancellation requested (the workflow sees it at its next durable call and ends itself)"
		if r, err := e.Get(c.ctx, args[0]); err == nil && r.CancelReason != reason {
			action, what = "cancel_already_requested", fmt.Sprintf("cancellation already requested (%q); this request changes nothing", r.CancelReason)
		}
		return c.done(args[0], action, what)
	}
}

func terminate(*flag.FlagSet) func(*call, []string) error {
	return func(c *call, args []string) error {
		c.subject = args[0]
		reason := "terminated by an operator"
		if len(args) == 2 {
			reason = args[1]
		}
		e, err := c.open()
		if err != nil {
			return err
		}
		if err := c.checkSealKey(e); err != nil {
			return err
		}
		if err := e.Terminate(c.ctx, args[0], reason); err != nil {
			return err
		}
		return c.done(args[0], "terminated", "terminated")
	}
}

// jsonArg reads and checks a JSON argument before anything is opened: the
// document itself, "-" for standard input, or "@PATH" for a file (no JSON
// document begins with '@'). What is read is bounded by the payload limit,
// so a huge input is refused without being held in memory. The whitespace
// around the document (a file's trailing newline) is dropped: it is no
// part of any JSON value, a string's included, so the value is the same,
// and the payload stored and shown (a schedule's input) is as typed.
func (c *call) jsonArg(what, s string) (json.RawMessage, error) {
	var (
		b    []byte
		from string
		err  error
	)
	switch {
	case s == "-":
		from = "standard input"
		b, err = readBounded(c.in)
	case strings.HasPrefix(s, "@"):
		from = s[1:]
		var f *os.File
		if f, err = os.Open(from); err == nil {
			b, err = readBounded(f)
			f.Close()
		}
	default:
		b = []byte(s)
	}
	if pe := (*fs.PathError)(nil); errors.As(err, &pe) {
		err = pe.Err // the path is said once, below
	}
	if err != nil {
		return nil, argError{fmt.Sprintf("cannot read the %s from %s: %s", what, from, err)}
	}
	if len(b) > runtime.DefaultMaxPayloadBytes {
		if from == "" {
			from = "the command line"
		}
		return nil, fmt.Errorf("%w: the %s from %s is more than %d bytes", runtime.ErrPayloadTooLarge, what, from, runtime.DefaultMaxPayloadBytes)
	}
	b = bytes.Trim(b, " \t\r\n") // JSON's whitespace
	if !json.Valid(b) {
		if from != "" {
			return nil, argError{fmt.Sprintf("the %s read from %s is not valid JSON: %s", what, from, truncate(strings.TrimSpace(string(b)), 40))}
		}
		return nil, argError{fmt.Sprintf("the %s is not valid JSON: %s", what, truncate(s, 40))}
	}
	return json.RawMessage(b), nil
}

// readBounded reads r to its end, or to one byte past the payload limit.
func readBounded(r io.Reader) ([]byte, error) {
	return io.ReadAll(io.LimitReader(r, runtime.DefaultMaxPayloadBytes+1))
}

func send(*flag.FlagSet) func(*call, []string) error {
	return func(c *call, args []string) error {
		c.subject = args[0]
		p, err := c.jsonArg("payload", args[2])
		if err != nil {
			return err
		}
		e, err := c.open()
		if err != nil {
			return err
		}
		if err := c.checkSealKey(e); err != nil {
			return err
		}
		if err := e.SendEventJSON(c.ctx, args[0], args[1], p); err != nil {
			return err
		}
		return c.done(args[0], "sent", "event "+args[1]+" sent")
	}
}

func emit(*flag.FlagSet) func(*call, []string) error {
	return func(c *call, args []string) error {
		c.subject = args[0]
		p, err := c.jsonArg("payload", args[1])
		if err != nil {
			return err
		}
		e, err := c.open()
		if err != nil {
			return err
		}
		if err := c.checkSealKey(e); err != nil {
			return err
		}
		n, err := e.EmitJSON(c.ctx, args[0], p)
		if err != nil {
			return err
		}
		if c.out.json {
			return c.out.encode(jsonEmit{Topic: args[0], Delivered: n})
		}
		_, err = fmt.Fprintf(c.out.w, "event %s delivered to %d waiting run(s)\n", args[0], n)
		return err
	}
}
