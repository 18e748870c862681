package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/stemflow/stem/internal/loadgen"
	"github.com/stemflow/stem/runtime"
)

// jsonBench is what stem bench measured.
type jsonBench struct {
	Store        string        `json:"store"`
	Concurrency  int           `json:"concurrency"`
	Results      []benchResult `json:"results"`
	PeakRSSBytes int64         `json:"peak_rss_bytes"`
}

// benchResult is one workload in one start style.
type benchResult struct {
	Workload       string  `json:"workload"`
	Start          string  `json:"start,omitempty"`
	Runs           int     `json:"runs"`
	Steps          int     `json:"steps,omitempty"`
	Seconds        float64 `json:"seconds"`
	StepsPerSecond float64 `json:"steps_per_second,omitempty"`
	P50Ms          float64 `json:"p50_ms,omitempty"`
	P90Ms          float64 `json:"p90_ms,omitempty"`
	P99Ms          float64 `json:"p99_ms,omitempty"`
}

// benchWorkloads are the workloads --workload names.
var benchWorkloads = []string{"w1", "w2", "w3"}

func bench(fs *flag.FlagSet) func(*call, []string) error {
	workload := fs.String("workload", "all", "`W` to run: w1, w2, w3, or all")
	runs := fs.Int("runs", 1000, "`N` runs for w1 and w3")
	steps := fs.Int("steps", 10, "`N` steps per run for w1 and w2")
	conc := fs.Int("concurrency", 32, "`C` workers of the engine that works the runs")
	start := fs.String("start", "both", "how runs start: batch, goroutines or both (`STYLE`)")
	samples := fs.Int("samples", 50, "`N` runs one at a time for w2")
	sleep := fs.Duration("sleep", time.Second, "how long each w3 run sleeps (`D`)")
	return func(c *call, _ []string) error {
		var which []string
		switch w := strings.ToLower(*workload); {
		case w == "all":
			which = benchWorkloads
		case slices.Contains(benchWorkloads, w):
			which = []string{w}
		default:
			return usagef("--workload %q: want w1, w2, w3 or all", *workload)
		}
		var styles []loadgen.Style
		switch s := strings.ToLower(*start); s {
		case "both":
			styles = loadgen.Styles
		case string(loadgen.Batch), string(loadgen.Goroutines):
			styles = []loadgen.Style{loadgen.Style(s)}
		default:
			return usagef("--start %q: want batch, goroutines or both", *start)
		}
		for _, f := range []struct {
			name string
			v    int
		}{{"--runs", *runs}, {"--steps", *steps}, {"--concurrency", *conc}, {"--samples", *samples}} {
			if f.v < 1 {
				return usagef("%s %d: want 1 or more", f.name, f.v)
			}
		}
		if *sleep < time.Millisecond {
			return usagef("--sleep %v: want 1ms or more", *sleep)
		}
		if _, err := c.open(); err != nil {
			return err
		}
		w, err := runtime.New(runtime.Config{Store: c.store, Workers: *conc, Codec: c.codec, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			return err
		}
		if err := loadgen.Register(w); err != nil {
			return err
		}
		ctx, stop := context.WithCancel(c.ctx)
		done := make(chan struct{})
		go func() { defer close(done); w.Run(ctx) }()
		defer func() { stop(); <-done; w.Close() }()

		report := jsonBench{Store: c.g.storeName(), Concurrency: *conc}
		for _, wl := range which {
			for _, st := range styles {
				r := benchResult{Workload: wl, Start: string(st), Runs: *runs}
				switch wl {
				case "w1":
					d, err := loadgen.Steps(ctx, w, st, *runs, *steps)
					if err != nil {
						return fmt.Errorf("w1 (%s): %w", st, err)
					}
					r.Steps, r.Seconds = *steps, d.Seconds()
					r.StepsPerSecond = float64(*runs**steps) / d.Seconds()
				case "w2":
					if st != styles[0] {
						continue // one run at a time: the style makes no difference
					}
					lat, err := loadgen.Latency(ctx, w, 5, *samples, *steps)
					if err != nil {
						return fmt.Errorf("w2: %w", err)
					}
					r.Start, r.Runs, r.Steps = "", *samples, *steps
					for _, d := range lat {
						r.Seconds += d.Seconds()
					}
					r.P50Ms, r.P90Ms, r.P99Ms = msOf(loadgen.Percentile(lat, 0.5)), msOf(loadgen.Percentile(lat, 0.9)), msOf(loadgen.Percentile(lat, 0.99))
				case "w3":
					d, err := loadgen.Sleepers(ctx, w, st, *runs, *sleep)
					if err != nil {
						return fmt.Errorf("w3 (%s): %w", st, err)
					}
					r.Seconds = d.Seconds()
				}
				report.Results = append(report.Results, r)
			}
		}
		report.PeakRSSBytes = peakRSS()
		if c.out.json {
			return c.out.encode(report)
		}
		return printBench(c, report, *sleep)
	}
}

// msOf is d in milliseconds.
func msOf(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// printBench prints the report as a table.
func printBench(c *call, r jsonBench, sleep time.Duration) error {
	out := c.out.w
	fmt.Fprintf(out, "stem bench on %s, %d workers\n", clean(r.Store), r.Concurrency)
	for _, x := range r.Results {
		switch x.Workload {
		case "w1":
			fmt.Fprintf(out, "w1  %d runs × %d steps, %-10s  %8.0f steps/s  (%.2fs)\n", x.Runs, x.Steps, x.Start, x.StepsPerSecond, x.Seconds)
		case "w2":
			fmt.Fprintf(out, "w2  %d runs of %d steps one at a time  p50 %.2f ms  p90 %.2f ms  p99 %.2f ms\n", x.Runs, x.Steps, x.P50Ms, x.P90Ms, x.P99Ms)
		case "w3":
			fmt.Fprintf(out, "w3  %d runs sleeping %v, %-10s  wall %.2fs\n", x.Runs, sleep, x.Start, x.Seconds)
		}
	}
	if r.PeakRSSBytes > 0 {
		fmt.Fprintf(out, "peak RSS %.1f MB\n", float64(r.PeakRSSBytes)/(1<<20))
	}
	_, err := fmt.Fprintln(out, "every result checked; the runs stay in the store (workflows stembench.steps, stembench.sleep)")
	return err
}
