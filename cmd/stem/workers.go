package main

import (
	"flag"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"
)

const workersDetail = `Lists the workers (engines running runtime.Engine.Run) sharing the
store, by ID: the host and process each runs in, when it started, its
last heartbeat, how many runs it was executing then, and the queues and
workflows it serves, and the codec key IDs it holds (--json) and those of
runs it could not open, for its codec lacks the key: such a worker hands
those runs to the workers that hold it. Each running engine records itself every third of
its runtime.Config.WorkerTTL (30s by default) and removes its record when
it stops; the record of one that died drops out once its TTL has passed.`

func workers(*flag.FlagSet) func(*call, []string) error {
	return func(c *call, _ []string) error {
		e, err := c.open()
		if err != nil {
			return err
		}
		ws, err := e.Workers(c.ctx)
		if err != nil {
			return err
		}
		if c.out.json {
			out := jsonWorkers{Workers: make([]jsonWorker, len(ws))}
			for i, w := range ws {
				out.Workers[i] = jsonWorker{ID: w.ID, Host: w.Host, PID: w.PID, StartedAt: w.StartedAt, Heartbeat: w.Heartbeat,
					ExpiresAt: w.ExpiresAt, InFlight: w.InFlight, Queues: nonNil(w.Queues), Workflows: nonNil(w.Workflows),
					KeyIDs: nonNil(w.KeyIDs), MissingKeyIDs: nonNil(w.MissingKeyIDs)}
			}
			return c.out.encode(out)
		}
		if len(ws) == 0 {
			_, err := fmt.Fprintln(c.out.w, "no workers (an engine records itself while its Run runs)")
			return err
		}
		now := time.Now()
		tw := tabwriter.NewWriter(c.out.w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "WORKER\tHOST\tPID\tSTARTED\tHEARTBEAT\tIN FLIGHT\tQUEUES\tWORKFLOWS")
		for _, w := range ws {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s ago\t%d\t%s\t%s\n", clean(w.ID), clean(orDash(w.Host)), w.PID,
				w.StartedAt.UTC().Format(time.RFC3339), shortDuration(max(now.Sub(w.Heartbeat), 0).Round(time.Second)), w.InFlight,
				clean(orDash(strings.Join(w.Queues, ","))), clean(orDash(strings.Join(w.Workflows, ","))))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		for _, w := range ws {
			if len(w.MissingKeyIDs) == 0 {
				continue
			}
			holds := "no codec key"
			if len(w.KeyIDs) > 0 {
				holds = "key IDs " + strings.Join(w.KeyIDs, ", ")
			}
			if _, err := fmt.Fprintf(c.out.w, "warning: worker %s cannot open runs sealed with key ID %s (it holds %s): give it that key\n",
				clean(w.ID), strings.Join(w.MissingKeyIDs, ", "), holds); err != nil {
				return err
			}
		}
		return nil
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

type jsonWorkers struct {
	Workers []jsonWorker `json:"workers"`
}

// jsonWorker is a live worker as it recorded itself.
type jsonWorker struct {
	ID        string    `json:"id"`
	Host      string    `json:"host"`
	PID       int       `json:"pid"`
	StartedAt time.Time `json:"started_at"`
	Heartbeat time.Time `json:"heartbeat"`
	ExpiresAt time.Time `json:"expires_at"`
	InFlight  int       `json:"in_flight"`
	Queues    []string  `json:"queues"`
	Workflows []string  `json:"workflows"`
	// KeyIDs are the codec key IDs the worker holds, the one it seals
	// with first.
	KeyIDs []string `json:"key_ids"`
	// MissingKeyIDs are the key IDs of runs it could not open.
	MissingKeyIDs []string `json:"missing_key_ids"`
}
