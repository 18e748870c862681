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
