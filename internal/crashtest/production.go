package crashtest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/schedule"
	"github.com/stemflow/stem/storage"
)

// verifySpans reads the steps' begin and end lines of every worker and
// fails t if more than limit runs executed steps at one moment. A step a
// killed worker began and never ended ends at the kill. It returns the
// most seen at once.
func verifySpans(t *testing.T, dir string, killedAt map[int]time.Time, limit int) int {
	t.Helper()
	type edge struct {
		at  int64
		d   int
		run string
	}
	var edges []edge
	files, _ := filepath.Glob(filepath.Join(dir, "spans.*.log"))
	for _, f := range files {
		pid, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(filepath.Base(f), "spans."), ".log"))
		open := map[string]int{}
		forLines(t, f, func(line string) {
			var kind, run string
			var at int64
			if _, err := fmt.Sscanf(line, "%s %d %s", &kind, &at, &run); err != nil {
				t.Fatalf("%s: bad line %q", f, line)
			}
			d := 1
			if kind == "E" {
				d = -1
			}
			open[run] += d
			edges = append(edges, edge{at, d, run})
		})
		for run, n := range open {
			if n == 0 {
				continue
			}
			end, ok := killedAt[pid]
			if !ok {
				end = time.Now() // a worker stopped by the harness: still running then
			}
			for range n {
				edges = append(edges, edge{end.UnixNano(), -1, run})
			}
		}
	}
	// Ends before begins at one instant: a step that ended as another began
	// did not run beside it.
	slices.SortFunc(edges, func(a, b edge) int {
		if a.at != b.at {
			return int(min(max(a.at-b.at, -1), 1))
		}
		return a.d - b.d
	})
	running := map[string]int{}
	most := 0
	for _, e := range edges {
		running[e.run] += e.d
		if running[e.run] == 0 {
			delete(running, e.run)
		}
		if len(running) > most {
			most = len(running)
			if most > limit {
				ids := make([]string, 0, len(running))
				for id := range running {
					ids = append(ids, id)
				}
				slices.Sort(ids)
				t.Fatalf("at %s, %d runs of the queue executed steps at once (%v), over its concurrency limit of %d",
					time.Unix(0, e.at).Format(time.RFC3339Nano), most, ids, limit)
			}
		}
	}
	if most == 0 {
		t.Fatal("the steps logged no spans: nothing was measured")
	}
	return most
}

// TickWorkflow is the workflow the schedule crash test's ticks start.
const TickWorkflow = "crashtest.tick"

// registerTick registers TickWorkflow: one step that returns its input.
func registerTick(e *runtime.Engine) error {
	return runtime.Register(e, TickWorkflow, func(c *runtime.WorkflowContext, in string) (string, error) {
		return runtime.Step(c, "echo@v1", runtime.StepOptions{}, func(sc runtime.StepContext) (string, error) { return in, nil })
	})
}

// ScheduleConfig describes a crash test of schedules.
type ScheduleConfig struct {
	// Open and Env are as in Config.
	Open func(tb testing.TB) storage.Store
	Env  []string
	// Processes is how many worker processes serve the schedule at once.
	Processes int
	// Ticks is how many one-second ticks to let pass.
	Ticks int
	// KillEvery is the mean interval between SIGKILLs of a random worker,
	// each replaced at once.
	KillEvery time.Duration
}

// RunSchedule creates a schedule that ticks every second, lets Processes
// worker processes serve it (killing one every KillEvery and starting
// another) for Ticks ticks, and checks that every tick from the first to
// the last the schedule took started exactly one run, and that those runs
// complete.
func RunSchedule(t *testing.T, cfg ScheduleConfig) {
	t.Helper()
	dir := t.TempDir()
	store := cfg.Open(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(cfg.Ticks)*time.Second+2*time.Minute)
	defer cancel()
	client, err := runtime.New(runtime.Config{Store: store, PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := registerTick(client); err != nil {
		t.Fatal(err)
	}
	id := fmt.Sprintf("crash-ticks-%d", time.Now().UnixNano())
	info, err := schedule.Create(ctx, client, schedule.Spec{ID: id, Workflow: TickWorkflow, Cron: "@every 1s", Input: "tick", Overlap: schedule.Allow})
	if err != nil {
		t.Fatal(err)
	}
	procs := &processes{t: t, cfg: Config{Env: cfg.Env, Lease: 2 * time.Second, Concurrency: 4}, dir: dir, ticks: true}
	defer procs.stopAll()
	for range cfg.Processes {
		procs.start()
	}
	end := info.NextFireAt.Add(time.Duration(cfg.Ticks) * time.Second)
	kills := 0
	for time.Now().Before(end) {
		d := cfg.KillEvery/2 + time.Duration(rand.Int64N(int64(cfg.KillEvery)))
		time.Sleep(min(d, time.Until(end)))
		if time.Now().Before(end) {
			procs.kill(procs.random())
			kills++
			procs.start()
		}
	}
	// Stop taking ticks, then let an engine here finish the runs.
	procs.stopAll()
	s, got := scheduleAndTicks(ctx, t, store, id)
	if s.LastFireAt == nil || s.LastFireAt.Before(end.Add(-3*time.Second)) {
		t.Fatalf("the schedule last fired at %v, want near %v: ticks were lost", s.LastFireAt, end)
	}
	var want []string
	for tick := info.NextFireAt; !tick.After(*s.LastFireAt); tick = tick.Add(time.Second) {
		want = append(want, schedule.RunID(id, tick))
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = client.Run(runCtx) }()
	defer func() { stop(); <-done }()
	if !slices.Equal(got, want) {
		t.Fatalf("%d processes, %d kills: runs %v, want exactly one per tick: %v", cfg.Processes, kills, got, want)
	}
	for _, rid := range want {
		info, err := client.Wait(ctx, rid)
		if err != nil || info.Status != runtime.StatusComplete {
			t.Fatalf("run %s: %v, %v; want complete", rid, info.Status, err)
		}
	}
	t.Logf("schedule crash test: %d processes, %d kills, %d ticks, one run each", cfg.Processes, kills, len(want))
}

// scheduleAndTicks reads the schedule id and the runs its ticks started,
// as of one moment. A worker killed while its write was on its way may
// still have it committed after its death (a server finishes the
// statement of a client that is gone), and a tick's run is written with
// the schedule's update: so both are read again until the schedule's
// revision is the same before and after the runs are listed.
func scheduleAndTicks(ctx context.Context, t *testing.T, store storage.Store, id string) (storage.Schedule, []string) {
	t.Helper()
	for {
		before, err := store.GetSchedule(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		after := ""
		for {
			page, err := store.ListRuns(ctx, storage.ListRunsQuery{Workflow: TickWorkflow, After: after, Limit: 1000})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range page.Runs {
				if strings.HasPrefix(r.ID, id+"@") {
					got = append(got, r.ID)
				}
			}
			if after = page.Next; after == "" {
				break
			}
		}
		s, err := store.GetSchedule(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if s.Revision == before.Revision {
			return s, got
		}
		t.Logf("a killed worker's write landed while the runs were listed (revision %d, then %d); reading again", before.Revision, s.Revision)
	}
}

// RunQueueLimit is the queue-limit crash test every store runs, on the
// store cfg opens: four worker processes, killed at random and replaced,
// work 300 ten-step runs on a queue of concurrency 3: about two seconds of
// steps at the limit, so the five kills, 300ms apart, all land while runs
// are still going on the fastest store. From the steps' own
// begin and end lines (a killed worker's steps ending at its kill), no
// moment has more than 3 runs executing steps, and every run completes
// once with one checkpoint per step.
func RunQueueLimit(t *testing.T, cfg Config) Report {
	t.Helper()
	cfg.Processes = 4
	cfg.Runs = 300
	cfg.QueueLimit = 3
	cfg.Lease = 500 * time.Millisecond
	cfg.StepDuration = 4 * time.Millisecond
	cfg.KillEvery = 300 * time.Millisecond
	cfg.Kills = 5
	cfg.Timeout = 2 * time.Minute
	rep := Run(t, cfg)
	t.Logf("at most %d runs executed steps at once (limit 3)", rep.MaxExecuting)
	return rep
}

// RunFourScheduleWorkers is the schedule crash test every store runs:
// four worker processes serve a schedule that ticks every second for six
// seconds, one killed and replaced every 1.5s or so, and every tick starts
// exactly one run (see RunSchedule).
func RunFourScheduleWorkers(t *testing.T, cfg Config) {
	t.Helper()
	RunSchedule(t, ScheduleConfig{Open: cfg.Open, Env: cfg.Env, Processes: 4, Ticks: 6, KillEvery: 1500 * time.Millisecond})
}
