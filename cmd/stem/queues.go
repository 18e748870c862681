package main

import (
	"flag"
	"fmt"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/storage"
)

func queues(*flag.FlagSet) func(*call, []string) error {
	return func(c *call, _ []string) error {
		e, err := c.open()
		if err != nil {
			return err
		}
		cat, err := e.Catalog(c.ctx)
		if err != nil {
			return err
		}
		qs := slices.Clone(cat.Queues)
		if !slices.ContainsFunc(qs, func(q storage.QueueType) bool { return q.Name == runtime.DefaultQueue }) {
			qs = append(qs, storage.QueueType{Queue: storage.Queue{Name: runtime.DefaultQueue}})
		}
		slices.SortFunc(qs, func(a, b storage.QueueType) int {
			// The default queue first, then by name.
			switch {
			case a.Name == b.Name:
				return 0
			case a.Name == runtime.DefaultQueue:
				return -1
			case b.Name == runtime.DefaultQueue:
				return 1
			case a.Name < b.Name:
				return -1
			}
			return 1
		})
		names := make([]string, len(qs))
		for i, q := range qs {
			names[i] = q.Name
		}
		stats, err := e.QueueStats(c.ctx, names...)
		if err != nil {
			return err
		}
		byName := make(map[string]storage.QueueStats, len(stats))
		for _, s := range stats {
			byName[s.Queue] = s
		}
		if c.out.json {
			out := jsonQueues{Queues: make([]jsonQueue, len(qs))}
			for i, q := range qs {
				s := byName[q.Name]
				j := jsonQueue{Name: q.Name, Concurrency: q.Concurrency, PartitionConcurrency: q.PartitionConcurrency, Rate: q.Rate,
					Worker: q.Worker, Ready: s.Ready, OldestReadySeconds: s.OldestReady.Seconds(), Scheduled: s.Scheduled, Running: s.Running, Waiting: s.Waiting, Paused: s.Paused}
				if q.RatePeriod > 0 {
					j.RatePeriod = q.RatePeriod.String()
				}
				if !q.UpdatedAt.IsZero() {
					t := q.UpdatedAt
					j.RecordedAt = &t
				}
				out.Queues[i] = j
			}
			return c.out.encode(out)
		}
		tw := tabwriter.NewWriter(c.out.w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "QUEUE\tCONCURRENCY\tPER PARTITION\tRATE\tREADY\tOLDEST READY\tSCHEDULED\tRUNNING\tWAITING\tPAUSED\tRECORDED BY")
		for _, q := range qs {
			s := byName[q.Name]
			rate := "unlimited"
			if q.Rate > 0 {
				rate = fmt.Sprintf("%d per %s", q.Rate, shortDuration(q.RatePeriod))
			}
			recorded := "-"
			if q.Worker != "" {
				recorded = clean(q.Worker) + " at " + q.UpdatedAt.UTC().Format(time.RFC3339)
			}
			oldest := "-"
			if s.Ready > 0 {
				oldest = shortDuration(s.OldestReady.Round(time.Second))
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%d\t%d\t%d\t%d\t%s\n", clean(q.Name), limit(q.Concurrency), limit(q.PartitionConcurrency), rate,
				s.Ready, oldest, s.Scheduled, s.Running, s.Waiting, s.Paused, recorded)
		}
		return tw.Flush()
	}
}

// limit is a queue's limit as text: "unlimited" for 0, which is how the
// runtime and the stores write no limit.
func limit(n int) string {
	if n == 0 {
		return "unlimited"
	}
	return fmt.Sprint(n)
}

type jsonQueues struct {
	Queues []jsonQueue `json:"queues"`
}

// jsonQueue is a queue's limits, who recorded them, and its runs by state.
// A limit is a number, 0 for unlimited, as runtime.Queue takes it (not
// null: a script can hand the numbers back to a Queue as they are); the
// text output writes "unlimited", and stem help queues says so.
type jsonQueue struct {
	Name                 string `json:"name"`
	Concurrency          int    `json:"concurrency"`
	PartitionConcurrency int    `json:"partition_concurrency"`
	Rate                 int    `json:"rate"`
	// RatePeriod is a Go duration, "" without a rate.
	RatePeriod string     `json:"rate_period,omitempty"`
	Worker     string     `json:"worker,omitempty"`
	RecordedAt *time.Time `json:"recorded_at,omitempty"`
	Ready      int        `json:"ready"`
	// OldestReadySeconds is how long the oldest ready run has been
	// ready, 0 when none is.
	OldestReadySeconds float64 `json:"oldest_ready_seconds"`
	Scheduled          int     `json:"scheduled"`
	Running            int     `json:"running"`
	Waiting            int     `json:"waiting"`
	Paused             int     `json:"paused"`
}

// checkQueue refuses a queue that no worker sharing the store recorded,
// suggesting the nearest one: the runtime refuses it too, but only this
// command knows the queues to suggest from (its engine registers none).
// checkPlacement checks --queue and --priority as given, before the store
// is opened: a malformed queue name or a priority out of range is a usage
// error.
func checkPlacement(queue string, priority int) error {
	if queue != "" {
		if err := storage.CheckQueueName(queue); err != nil {
			return usagef("--queue: %s", nameReason(err))
		}
	}
	if priority < storage.MinPriority || priority > storage.MaxPriority {
		return usagef("--priority %d: want %d to %d", priority, storage.MinPriority, storage.MaxPriority)
	}
	return nil
}

func checkQueue(c *call, e *runtime.Engine, name string) error {
	if name == "" || name == runtime.DefaultQueue {
		return nil
	}
	cat, err := e.Catalog(c.ctx)
	if err != nil {
		return err
	}
	known := []string{runtime.DefaultQueue}
	for _, q := range cat.Queues {
		if q.Name == name {
			return nil
		}
		known = append(known, q.Name)
	}
	msg := fmt.Sprintf("--queue %s: no worker sharing the store registered that queue", name)
	if best := nearest(name, known); best != "" {
		msg += fmt.Sprintf("; did you mean %q?", best)
	}
	return fmt.Errorf("%s (stem queues lists them)", msg)
}
