package check_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stemflow/stem/check"
	"github.com/stemflow/stem/internal/manifest"
	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/storage"
	"github.com/stemflow/stem/stores/memstore"
)

// greetV1 takes its steps in the order the running build does: hello,
// then a long sleep, then bye.
func greetV1(c *runtime.WorkflowContext, name string) (string, error) {
	a, err := runtime.Step(c, "hello@v1", runtime.StepOptions{}, func(runtime.StepContext) (string, error) { return "hi " + name, nil })
	if err != nil {
		return "", err
	}
	if err := c.Sleep("nap", time.Hour); err != nil {
		return "", err
	}
	b, err := runtime.Step(c, "bye@v1", runtime.StepOptions{}, func(runtime.StepContext) (string, error) { return "bye", nil })
	return a + b, err
}

// greetReordered is the next build's code: same keys and shapes (its
// manifest has nothing new to say), but bye comes first.
func greetReordered(c *runtime.WorkflowContext, name string) (string, error) {
	b, err := runtime.Step(c, "bye@v1", runtime.StepOptions{}, func(runtime.StepContext) (string, error) { return "bye", nil })
	if err != nil {
		return "", err
	}
	a, err := runtime.Step(c, "hello@v1", runtime.StepOptions{}, func(runtime.StepContext) (string, error) { return "hi " + name, nil })
	if err != nil {
		return "", err
	}
	if err := c.Sleep("nap", time.Hour); err != nil {
		return "", err
	}
	return a + b, err
}

func greetBuild(t *testing.T) *check.Build {
	t.Helper()
	m := &manifest.Manifest{
		Workflows: []manifest.Workflow{{Key: "greet@v1", Input: "string", Output: "string"}},
		Steps: []manifest.Step{
			{Key: "hello@v1", Input: "()", Output: "string"},
			{Key: "bye@v1", Input: "()", Output: "string"},
		},
	}
	b := &check.Build{}
	if err := b.Add("greet/"+check.ManifestFile, m.Encode()); err != nil {
		t.Fatal(err)
	}
	return b
}

// With an engine of the next build, a check also replays the runs: code
// that takes the same steps in another order passes the manifest check
// and is caught by the replay, at the key where it parts from the run.
func TestReplayWithEngine(t *testing.T) {
	ctx := context.Background()
	st := memstore.New(memstore.Options{})
	defer st.Close()

	running, err := runtime.New(runtime.Config{Store: st, PollInterval: 10 * time.Millisecond, ShutdownGrace: -1})
	if err != nil {
		t.Fatal(err)
	}
	if err := runtime.Register(running, "greet", greetV1); err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); running.Run(runCtx) }()
	if _, err := runtime.Start[string, string](ctx, running, "greet", "ada", runtime.WithID("greet-1")); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		info, err := running.Get(ctx, "greet-1")
		if err == nil && info.Status == runtime.StatusWaiting {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the run never slept: %+v %v", info, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	stop()
	<-done
	running.Close()

	// The manifests alone find nothing.
	build := greetBuild(t)
	rep, err := check.Store(ctx, st, build, check.Options{})
	if err != nil || !rep.OK() || rep.Checked != 1 || rep.Replayed != 0 {
		t.Fatalf("manifest check: %+v %v", rep, err)
	}

	// The same build's code replays the run as it ran.
	same, err := runtime.New(runtime.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	defer same.Close()
	if err := runtime.Register(same, "greet", greetV1); err != nil {
		t.Fatal(err)
	}
	rep, err = check.Store(ctx, st, build, check.Options{Engine: same})
	if err != nil || !rep.OK() || rep.Replayed != 1 {
		t.Fatalf("replay on the same code: %+v %v", rep, err)
	}

	// The next build's code does not.
	next, err := runtime.New(runtime.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	defer next.Close()
	if err := runtime.Register(next, "greet", greetReordered); err != nil {
		t.Fatal(err)
	}
	rep, err = check.Store(ctx, st, build, check.Options{Engine: next})
	if err != nil {
		t.Fatal(err)
	}
	if rep.OK() || rep.Replayed != 1 || len(rep.Problems) != 1 {
		t.Fatalf("replay on reordered code: %+v", rep)
	}
	p := rep.Problems[0]
	if p.RunID != "greet-1" || p.Kind != check.KindReplay || p.Status != storage.StatusWaiting || p.Key == "" ||
		!strings.HasPrefix(p.Reason, "replay diverges: ") || p.Fix == "" || p.Version != 1 {
		t.Errorf("replay problem: %+v", p)
	}
	t.Logf("%s", p)
}

// replayedElsewhere is a Replayer whose report was made elsewhere (in
// another process): it answers each batch with what it holds of those runs.
type replayedElsewhere struct {
	report runtime.ReplayReport
	asked  [][]string
}

func (r *replayedElsewhere) Replay(_ context.Context, opts runtime.ReplayOptions) (runtime.ReplayReport, error) {
	r.asked = append(r.asked, opts.RunIDs)
	var out runtime.ReplayReport
	for _, id := range opts.RunIDs {
		for _, d := range r.report.Divergences {
			if d.RunID == id {
				out.Divergences = append(out.Divergences, d)
			}
		}
		for _, s := range r.report.Skipped {
			if s.RunID == id {
				out.Skipped = append(out.Skipped, s)
			}
		}
	}
	out.Replayed = len(opts.RunIDs) - len(out.Skipped)
	return out, nil
}

// A Replayer stands in for an engine: its divergences become KindReplay
// problems of the runs the check read, and the runs it could not open are
// listed as not replayed; a divergence of a run the check did not read (it
// started since) is not reported.
func TestReplayer(t *testing.T) {
	ctx := context.Background()
	st := memstore.New(memstore.Options{})
	defer st.Close()
	for _, id := range []string{"g-1", "g-2", "g-3"} {
		if _, err := st.CreateRuns(ctx, []storage.NewRun{{ID: id, Workflow: "greet", Version: 1, Input: []byte(`"ada"`)}}); err != nil {
			t.Fatal(err)
		}
	}
	r := &replayedElsewhere{report: runtime.ReplayReport{
		Divergences: []runtime.Divergence{
			{RunID: "g-1", Workflow: "greet", Version: 1, Execution: 1, Key: "audit@v1", Message: "the code calls audit@v1, which the run did not record, where the run recorded nap"},
			{RunID: "g-9", Workflow: "greet", Version: 1, Execution: 1, Key: "audit@v1", Message: "started since the check read the store"},
		},
		Skipped: []runtime.SkippedRun{{RunID: "g-3", Workflow: "greet", Reason: "sealed"}},
	}}
	rep, err := check.Store(ctx, st, greetBuild(t), check.Options{Replayer: r})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.asked) != 1 || strings.Join(r.asked[0], " ") != "g-1 g-2 g-3" {
		t.Errorf("asked for %v", r.asked)
	}
	if rep.Checked != 3 || rep.Stranded != 1 || rep.Replayed != 2 || len(rep.NotReplayed) != 1 || rep.NotReplayed[0].RunID != "g-3" || len(rep.Problems) != 1 {
		t.Fatalf("report: %+v", rep)
	}
	if p := rep.Problems[0]; p.RunID != "g-1" || p.Kind != check.KindReplay || p.Key != "audit@v1" || p.Status != storage.StatusQueued ||
		p.String() != "g-1 (greet@v1, queued): audit@v1: replay diverges: the code calls audit@v1, which the run did not record, where the run recorded nap" {
		t.Errorf("problem: %+v\n%s", p, p)
	}
}
