package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"strings"

	"github.com/stemflow/stem/runtime"
)

func start(fs *flag.FlagSet) func(*call, []string) error {
	id := fs.String("id", "", "`RUN_ID` for the new run (default: a generated one)")
	return func(c *call, args []string) error {
		c.subject = args[0]
		input, err := jsonArg("input", args[1])
		if err != nil {
			return err
		}
		e, err := c.open()
		if err != nil {
			return err
		}
		if *id != "" {
			r, err := e.Get(c.ctx, *id)
			switch {
			case err == nil && r.Workflow == args[0]:
				return c.out.done(r.ID, fmt.Sprintf("exists already (%s), left as it is", r.Status))
			case err == nil:
				return fmt.Errorf("run ID %s is taken by a run of workflow %s", *id, r.Workflow)
			case !errors.Is(err, runtime.ErrRunNotFound):
				return err
			}
		}
		r, err := e.StartJSON(c.ctx, args[0], *id, input)
		if err != nil {
			return err
		}
		return c.out.done(r.ID, "started; a worker that serves "+args[0]+" runs it")
	}
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
		return c.out.done(args[0], what)
	}
}

func control(done string, op func(*runtime.Engine, context.Context, string) error) func(*flag.FlagSet) func(*call, []string) error {
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
			return c.out.done(args[0], done)
		}
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
		if err := e.Terminate(c.ctx, args[0], reason); err != nil {
			return err
		}
		return c.out.done(args[0], "terminated")
	}
}

// jsonArg checks a JSON argument before anything is opened.
func jsonArg(what, s string) (json.RawMessage, error) {
	if !json.Valid([]byte(s)) {
		return nil, usagef("the %s is not valid JSON: %s", what, truncate(s, 40))
	}
	return json.RawMessage(s), nil
}

func send(*flag.FlagSet) func(*call, []string) error {
	return func(c *call, args []string) error {
		c.subject = args[0]
		p, err := jsonArg("payload", args[2])
		if err != nil {
			return err
		}
		e, err := c.open()
		if err != nil {
			return err
		}
		if err := e.SendEventJSON(c.ctx, args[0], args[1], p); err != nil {
			return err
		}
		return c.out.done(args[0], "event "+args[1]+" sent")
	}
}

func emit(*flag.FlagSet) func(*call, []string) error {
	return func(c *call, args []string) error {
		c.subject = args[0]
		p, err := jsonArg("payload", args[1])
		if err != nil {
			return err
		}
		e, err := c.open()
		if err != nil {
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
