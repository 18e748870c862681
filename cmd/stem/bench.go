package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/stemflow/stem/internal/loadgen"
	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/storage"
)

// jsonBench is what stem bench measured.
type jsonBench struct {
	Store string `json:"store"`
	// Concurrency is the workers of each engine that works the runs, and
	// Processes how many processes run one such engine (1: this one).
	Concurrency  int           `json:"concurrency"`
	Processes    int           `json:"processes"`
	Results      []benchResult `json:"results"`
	PeakRSSBytes int64         `json:"peak_rss_bytes"`
}

// benchResult is one workload in one start style, or one probe of the
// store's ceiling.
type benchResult struct {
	Workload       string  `json:"workload"`
	Start          string  `json:"start,omitempty"`
	Runs           int     `json:"runs,omitempty"`
	Steps          int     `json:"steps,omitempty"`
	Seconds        float64 `json:"seconds"`
	StepsPerSecond float64 `json:"steps_per_second,omitempty"`
	// CeilingRatio is a w1 result's steps per second over the ceiling's
	// commits per second at as many connections as there are workers.
	CeilingRatio float64 `json:"ceiling_ratio,omitempty"`
	// At one worker, ReleaseCeilingRatio is a w1 result's CeilingRatio in
	// the last release; CommitLatencies is w2's p50 over the p50 of one
	// commit of the store, and ReleaseCommitLatencies the same in the
	// last release (see lastRelease).
	ReleaseCeilingRatio    float64 `json:"release_ceiling_ratio,omitempty"`
	CommitLatencies        float64 `json:"commit_latencies,omitempty"`
	ReleaseCommitLatencies float64 `json:"release_commit_latencies,omitempty"`
	// A ceiling probe: what one commit is, from how many connections
	// (asked for, and used), how many a second.
	Commit           string  `json:"commit,omitempty"`
	ConnectionsAsked int     `json:"connections_asked,omitempty"`
	Connections      int     `json:"connections,omitempty"`
	Commits          int64   `json:"commits,omitempty"`
	CommitsPerSecond float64 `json:"commits_per_second,omitempty"`
	P50Ms            float64 `json:"p50_ms,omitempty"`
	P90Ms            float64 `json:"p90_ms,omitempty"`
	P99Ms            float64 `json:"p99_ms,omitempty"`
	// Note says why a workload measured nothing.
	Note string `json:"note,omitempty"`
	// Nodes are what each server node did for a w1 result, per step,
	// when the store reports its nodes (storage.NodeReporter).
	Nodes []benchNode `json:"nodes,omitempty"`
}

// benchNode is one server node's share of a workload.
type benchNode struct {
	Node string `json:"node"`
	// CallsAre and OperationsAre name what the node counts (Redis: script
	// calls and commands; Postgres: transactions and rows).
	CallsAre      string `json:"calls_are"`
	OperationsAre string `json:"operations_are"`
	// Parts is how many of the store's parts (a Redis Cluster store's
	// shards) the node serves.
	Parts int `json:"parts,omitempty"`
	// CallsPerStep are the requests clients sent the node (scripts, for
	// Redis) per step of the workload, OperationsPerStep what it executed
	// per step (commands inside scripts too), CPUMicrosPerStep its
	// processor time per step.
	CallsPerStep      float64 `json:"calls_per_step"`
	OperationsPerStep float64 `json:"operations_per_step"`
	CPUMicrosPerStep  float64 `json:"cpu_us_per_step,omitempty"`
	// Share is the node's part of all the nodes' calls.
	Share float64 `json:"share"`
}

// nodeFigures is what each node did between two readings, per step.
func nodeFigures(before, after []storage.NodeStat, steps int) []benchNode {
	var total int64
	var out []benchNode
	for _, a := range after {
		i := slices.IndexFunc(before, func(b storage.NodeStat) bool { return b.Node == a.Node })
		if i < 0 {
			continue
		}
		d := a.Sub(before[i])
		total += d.Calls
		out = append(out, benchNode{Node: a.Node, Parts: a.Parts, CallsAre: a.CallsAre, OperationsAre: a.OperationsAre,
			CallsPerStep:      float64(d.Calls) / float64(steps),
			OperationsPerStep: float64(d.Operations) / float64(steps),
			CPUMicrosPerStep:  float64(d.CPU.Microseconds()) / float64(steps),
		})
	}
	for i := range out {
		if total > 0 {
			out[i].Share = out[i].CallsPerStep * float64(steps) / float64(total)
		}
	}
	return out
}

// benchWorkloads are the workloads --workload names, in the order all
// runs them: the ceiling first, so the store is idle while it is probed.
var benchWorkloads = []string{"ceiling", "w1", "w2", "w3"}

// benchWhich is the workloads a --workload value names, in the order all
// runs them: all, or a comma-separated list such as ceiling,w1.
func benchWhich(arg string) ([]string, error) {
	if strings.EqualFold(strings.TrimSpace(arg), "all") {
		return benchWorkloads, nil
	}
	named := map[string]bool{}
	for _, w := range strings.Split(arg, ",") {
		w = strings.ToLower(strings.TrimSpace(w))
		if !slices.Contains(benchWorkloads, w) {
			return nil, usagef("--workload %q: %q is not a workload; want ceiling, w1, w2, w3, a list of them such as ceiling,w1, or all", arg, w)
		}
		named[w] = true
	}
	var which []string
	for _, w := range benchWorkloads {
		if named[w] {
			which = append(which, w)
		}
	}
	return which, nil
}

// noCeiling is the note of a store that is not a CommitProber.
const noCeiling = "the store has no ceiling to measure: no server or file under it takes commits"

func bench(fs *flag.FlagSet) func(*call, []string) error {
	workload := fs.String("workload", "all", "`W` to run: ceiling, w1, w2, w3, a list such as ceiling,w1, or all")
	runs := fs.Int("runs", 1000, "`N` runs for w1 and w3")
	steps := fs.Int("steps", 10, "`N` steps per run for w1 and w2")
	conc := fs.Int("concurrency", 32, "`C` workers of each engine that works the runs")
	procs := fs.Int("processes", 1, "`P` processes of --concurrency workers each to work the runs (1: this one)")
	start := fs.String("start", "both", "how runs start: batch, goroutines or both (`STYLE`)")
	samples := fs.Int("samples", 50, "`N` runs one at a time for w2")
	sleep := fs.Duration("sleep", time.Second, "how long each w3 run sleeps (`D`)")
	probe := fs.Duration("probe", 2*time.Second, "how long each probe of the ceiling commits (`D`)")
	poll := fs.Duration("poll", time.Second, "the workers' poll interval (`D`), only a safety net: engines wake on the runs' own times")
	return func(c *call, _ []string) error {
		which, err := benchWhich(*workload)
		if err != nil {
			return err
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
		}{{"--runs", *runs}, {"--steps", *steps}, {"--concurrency", *conc}, {"--processes", *procs}, {"--samples", *samples}} {
			if f.v < 1 {
				return usagef("%s %d: want 1 or more", f.name, f.v)
			}
		}
		for _, f := range []struct {
			name string
			v    time.Duration
		}{{"--sleep", *sleep}, {"--probe", *probe}, {"--poll", *poll}} {
			if f.v < time.Millisecond {
				return usagef("%s %v: want 1ms or more", f.name, f.v)
			}
		}
		if s := c.g.storeURL(); *procs > 1 && (s == "mem:" || s == "memory:") {
			return usagef("--processes %d: %s is a store of this process's own memory; worker processes need one they share (a SQLite file, postgres://, redis:// or redis+cluster://)", *procs, s)
		}
		if _, err := c.open(); err != nil {
			return err
		}

		workers := *conc * *procs
		report := jsonBench{Store: c.g.storeName(), Concurrency: *conc, Processes: *procs}
		var ceiling map[int]storage.CommitProbe
		if slices.Contains(which, "ceiling") {
			results, probes, err := benchCeiling(c.ctx, c.store, workers, *probe)
			if err != nil {
				return err
			}
			report.Results, ceiling = results, probes
			which = which[1:]
		}
		if len(which) > 0 {
			ws, err := startBenchWorkers(c, *procs, *conc, *poll)
			if err != nil {
				return err
			}
			results, err := runWorkloads(ws.ctx, ws.client, c.store, which, styles, *runs, *steps, *samples, *sleep)
			if err != nil {
				ws.kill()
				return ws.why(err)
			}
			if err := ws.stop(); err != nil {
				return err
			}
			for i, r := range results {
				if p, ok := ceiling[workers]; ok && r.Workload == "w1" && p.PerSecond() > 0 {
					results[i].CeilingRatio = r.StepsPerSecond / p.PerSecond()
				}
			}
			if one, ok := ceiling[1]; ok && workers == 1 {
				compareRelease(results, one)
			}
			report.Results = append(report.Results, results...)
		}
		report.PeakRSSBytes = peakRSS()
		if c.out.json {
			return c.out.encode(report)
		}
		return printBench(c, report, *sleep)
	}
}

// benchCeiling probes the store's ceiling from as many connections as
// there are workers and from one: w1 with many workers is read against
// the first, with one worker against the second. A store that commits
// from one connection however many are asked for (SQLite) is probed once.
// The probes are returned by the connections asked for.
func benchCeiling(ctx context.Context, st storage.Store, workers int, d time.Duration) ([]benchResult, map[int]storage.CommitProbe, error) {
	prober, ok := st.(storage.CommitProber)
	if !ok {
		return []benchResult{{Workload: "ceiling", Note: noCeiling}}, nil, nil
	}
	probes := make(map[int]storage.CommitProbe)
	var results []benchResult
	for _, n := range []int{workers, 1} {
		if _, done := probes[n]; done {
			continue
		}
		if p, ok := probes[workers]; ok && p.Conns == 1 {
			probes[n] = p // what one connection commits, measured already
			continue
		}
		p, err := prober.ProbeCommits(ctx, n, d)
		if err != nil {
			return nil, nil, fmt.Errorf("ceiling (%d connections): %w", n, err)
		}
		probes[n] = p
		results = append(results, benchResult{
			Workload: "ceiling", Seconds: p.Elapsed.Seconds(),
			Commit: p.Commit, ConnectionsAsked: n, Connections: p.Conns, Commits: p.Commits,
			CommitsPerSecond: p.PerSecond(), P50Ms: msOf(p.P50), P99Ms: msOf(p.P99),
		})
	}
	slices.Reverse(results) // one connection first
	return results, probes, nil
}

// runWorkloads runs the workloads (w1, w2, w3) in each style, starting runs
// and awaiting their results on client.
func runWorkloads(ctx context.Context, client *runtime.Engine, st storage.Store, which []string, styles []loadgen.Style, runs, steps, samples int, sleep time.Duration) ([]benchResult, error) {
	nodes, _ := st.(storage.NodeReporter)
	var results []benchResult
	for _, wl := range which {
		for _, style := range styles {
			r := benchResult{Workload: wl, Start: string(style), Runs: runs}
			switch wl {
			case "w1":
				var before []storage.NodeStat
				if nodes != nil {
					var err error
					if before, err = nodes.NodeStats(ctx); err != nil {
						return nil, fmt.Errorf("w1 (%s): reading the nodes' figures: %w", style, err)
					}
				}
				d, err := loadgen.Steps(ctx, client, style, runs, steps)
				if err != nil {
					return nil, fmt.Errorf("w1 (%s): %w", style, err)
				}
				r.Steps, r.Seconds = steps, d.Seconds()
				r.StepsPerSecond = float64(runs*steps) / d.Seconds()
				if nodes != nil {
					// A node whose counts lag is read once they hold the
					// workload.
					var lag time.Duration
					for _, n := range before {
						lag = max(lag, n.Lag)
					}
					select {
					case <-ctx.Done():
						return nil, ctx.Err()
					case <-time.After(lag):
					}
					after, err := nodes.NodeStats(ctx)
					if err != nil {
						return nil, fmt.Errorf("w1 (%s): reading the nodes' figures: %w", style, err)
					}
					r.Nodes = nodeFigures(before, after, runs*steps)
				}
			case "w2":
				if style != styles[0] {
					continue // one run at a time: the style makes no difference
				}
				lat, err := loadgen.Latency(ctx, client, 5, samples, steps)
				if err != nil {
					return nil, fmt.Errorf("w2: %w", err)
				}
				r.Start, r.Runs, r.Steps = "", samples, steps
				for _, d := range lat {
					r.Seconds += d.Seconds()
				}
				r.P50Ms, r.P90Ms, r.P99Ms = msOf(loadgen.Percentile(lat, 0.5)), msOf(loadgen.Percentile(lat, 0.9)), msOf(loadgen.Percentile(lat, 0.99))
			case "w3":
				d, err := loadgen.Sleepers(ctx, client, style, runs, sleep)
				if err != nil {
					return nil, fmt.Errorf("w3 (%s): %w", style, err)
				}
				r.Seconds = d.Seconds()
			}
			results = append(results, r)
		}
	}
	return results, nil
}

// benchWorkers is what works stem bench's runs: an engine of this process,
// or worker processes (see workerProcs).
type benchWorkers struct {
	// client starts the runs and awaits their results; with worker
	// processes it works none of them itself.
	client *runtime.Engine
	// ctx is what the workloads run under; it ends when a worker process
	// exits before it was stopped.
	ctx context.Context
	// stop ends the workers once every run is done, and kill on an error
	// path.
	stop func() error
	kill func()
}

// startBenchWorkers starts an engine of conc workers in this process, or
// procs worker processes of conc workers each, and returns once they are
// ready to work.
func startBenchWorkers(c *call, procs, conc int, poll time.Duration) (*benchWorkers, error) {
	if procs > 1 {
		if err := loadgen.Register(c.engine); err != nil {
			return nil, err
		}
		return startWorkerProcs(c, procs, conc, poll)
	}
	w, err := runtime.New(runtime.Config{Store: c.store, Workers: conc, PollInterval: poll, Codec: c.codec, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return nil, err
	}
	if err := loadgen.Register(w); err != nil {
		w.Close()
		return nil, err
	}
	ctx, cancel := context.WithCancel(c.ctx)
	done := make(chan struct{})
	go func() { defer close(done); w.Run(ctx) }()
	stop := func() error { cancel(); <-done; return w.Close() }
	return &benchWorkers{client: w, ctx: ctx, stop: stop, kill: func() { stop() }}, nil
}

// why returns what ended a workload: a worker process's exit, when that is
// what cut the workload short, else err.
func (ws *benchWorkers) why(err error) error {
	var exit *workerExit
	if errors.As(context.Cause(ws.ctx), &exit) {
		return exit
	}
	return err
}

// msOf is d in milliseconds.
func msOf(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// printBench prints the report as a table.
func printBench(c *call, r jsonBench, sleep time.Duration) error {
	out := c.out.w
	workers := plural(r.Concurrency, "worker")
	if r.Processes > 1 {
		workers = fmt.Sprintf("%d processes × %s", r.Processes, plural(r.Concurrency, "worker"))
	}
	fmt.Fprintf(out, "stem bench on %s, %s\n", clean(r.Store), workers)
	// The ceiling's lines are aligned on their figures.
	probes := make(map[int]string)
	width, ran := 0, false
	for i, x := range r.Results {
		if x.Workload != "ceiling" {
			ran = true
			continue
		}
		if x.Note != "" {
			continue
		}
		what := fmt.Sprintf("%s, %d connection", clean(x.Commit), x.Connections)
		if x.Connections != 1 {
			what += "s"
		}
		if x.Connections < x.ConnectionsAsked {
			what += fmt.Sprintf(" (of %d asked: the store's most)", x.ConnectionsAsked)
		}
		probes[i] = what
		width = max(width, len(what))
	}
	for i, x := range r.Results {
		switch x.Workload {
		case "ceiling":
			if x.Note != "" {
				fmt.Fprintf(out, "ceiling  %s\n", x.Note)
				continue
			}
			fmt.Fprintf(out, "ceiling  %-*s  %8.0f commits/s  (p50 %.3g ms, p99 %.3g ms)\n", width, probes[i], x.CommitsPerSecond, x.P50Ms, x.P99Ms)
		case "w1":
			how := x.Start
			if r.Processes > 1 {
				how = workers + ", " + x.Start
			}
			fmt.Fprintf(out, "w1  %d runs × %d steps, %-10s  %8.0f steps/s  (%.2fs)", x.Runs, x.Steps, how, x.StepsPerSecond, x.Seconds)
			if x.CeilingRatio > 0 {
				fmt.Fprintf(out, "  %.2f× ceiling", x.CeilingRatio)
			}
			if x.ReleaseCeilingRatio > 0 {
				fmt.Fprintf(out, "  (last release, %s: %.2f×)", lastRelease.Build, x.ReleaseCeilingRatio)
			}
			fmt.Fprintln(out)
			for _, n := range x.Nodes {
				fmt.Fprintf(out, "    node %s", n.Node)
				if n.Parts > 0 {
					fmt.Fprintf(out, " (%s)", plural(n.Parts, "shard"))
				}
				fmt.Fprintf(out, "  %.2f %s/step  %.1f %s/step", n.CallsPerStep, n.CallsAre, n.OperationsPerStep, n.OperationsAre)
				if n.CPUMicrosPerStep > 0 {
					fmt.Fprintf(out, "  %.1f µs CPU/step", n.CPUMicrosPerStep)
				}
				if len(x.Nodes) > 1 {
					fmt.Fprintf(out, "  %.0f%% of %s", 100*n.Share, n.CallsAre)
				}
				fmt.Fprintln(out)
			}
		case "w2":
			fmt.Fprintf(out, "w2  %d runs of %d steps one at a time  p50 %.2f ms  p90 %.2f ms  p99 %.2f ms", x.Runs, x.Steps, x.P50Ms, x.P90Ms, x.P99Ms)
			if x.CommitLatencies > 0 {
				fmt.Fprintf(out, "  p50 = %.1f commits", x.CommitLatencies)
			}
			if x.ReleaseCommitLatencies > 0 {
				fmt.Fprintf(out, "  (last release, %s: %.1f)", lastRelease.Build, x.ReleaseCommitLatencies)
			}
			fmt.Fprintln(out)
		case "w3":
			fmt.Fprintf(out, "w3  %d runs sleeping %v, %-10s  wall %.2fs\n", x.Runs, sleep, x.Start, x.Seconds)
		}
	}
	if r.PeakRSSBytes > 0 {
		fmt.Fprintf(out, "peak RSS %.1f MB", float64(r.PeakRSSBytes)/(1<<20))
		if r.Processes > 1 {
			fmt.Fprint(out, " (this process, which starts the runs and awaits their results)")
		}
		fmt.Fprintln(out)
	}
	if !ran {
		return nil
	}
	if r.Processes > 1 {
		fmt.Fprintf(out, "the %d worker processes were started, and ready, before the timing began: their start-up is not in the figures\n", r.Processes)
	}
	_, err := fmt.Fprintln(out, "every result checked; the runs stay in the store (workflows stembench.steps, stembench.sleep)")
	return err
}

// plural is n and noun, in the plural unless n is 1.
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
