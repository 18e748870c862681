package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/storage"
)

// orderCode is one build's code of workflow "order": reserve, a long
// cool-off, charge. The variations are what a developer changes between
// deploys.
type orderCode struct {
	reserveKey  string // the reserve step's key
	autoversion bool   // reserve marked autoversion
	extraStep   bool   // a step added after the charge
}

func registerOrder(t *testing.T, code orderCode, ran *atomic.Int64, opts ...runtime.RegisterOption) func(e *runtime.Engine) {
	return func(e *runtime.Engine) {
		step := func(c *runtime.WorkflowContext, key string, out string, auto bool) (string, error) {
			return runtime.Step(c, key, runtime.StepOptions{Autoversion: auto}, func(runtime.StepContext) (string, error) {
				ran.Add(1)
				return out, nil
			})
		}
		must(t, runtime.Register(e, "order", func(c *runtime.WorkflowContext, in string) (string, error) {
			res, err := step(c, code.reserveKey, "held-"+in, code.autoversion)
			if err != nil {
				return "", err
			}
			if err := c.Sleep("cool-off", time.Hour); err != nil {
				return "", err
			}
			paid, err := step(c, "charge@v1", "paid", false)
			if err != nil || !code.extraStep {
				return res + " " + paid, err
			}
			_, err = step(c, "notify@v1", "sent", false)
			return res + " " + paid, err
		}, opts...))
		must(t, runtime.Register(e, "quick", func(c *runtime.WorkflowContext, in string) (string, error) {
			a, err := step(c, "a@v1", "a", false)
			if err != nil {
				return "", err
			}
			b, err := step(c, "b@v1", "b", false)
			if code.reserveKey == "hold@v1" { // the divergent build also swaps these
				return b + a, err
			}
			return a + b, err
		}))
	}
}

// storedState is everything the store holds of the runs, to check that a
// replay writes nothing.
func storedState(t *testing.T, st storage.Store, ids ...string) string {
	t.Helper()
	var b strings.Builder
	for _, id := range ids {
		r, err := st.GetRun(context.Background(), id)
		must(t, err)
		rp, err := st.LoadReplay(context.Background(), id)
		must(t, err)
		h, err := st.ListSteps(context.Background(), storage.StepsQuery{RunID: id, Execution: r.Execution})
		must(t, err)
		fmt.Fprintf(&b, "%+v\n%+v\n%+v\n", r, rp, h)
	}
	return b.String()
}

func TestReplay(t *testing.T) {
	t.Parallel()
	f := setup(t)
	var ran atomic.Int64
	live, _ := f.engine(5*time.Second, registerOrder(t, orderCode{reserveKey: "reserve@v1"}, &ran))
	for _, id := range []string{"o1", "o2"} {
		_, err := runtime.Start[string, string](waitCtx(t), live, "order", id, runtime.WithID(id))
		must(t, err)
	}
	q, err := runtime.Start[string, string](waitCtx(t), live, "quick", "", runtime.WithID("q"))
	must(t, err)
	stop := start(t, live)
	if out, err := q.Result(waitCtx(t)); err != nil || out != "ab" {
		t.Fatalf("quick: %q, %v", out, err)
	}
	eventually(t, "the orders cool off", func() bool {
		return status(t, live, "o1") == runtime.StatusWaiting && status(t, live, "o2") == runtime.StatusWaiting
	})
	stop()
	before := storedState(t, f.store, "o1", "o2", "q")
	ran.Store(0)

	replay := func(code orderCode, opts runtime.ReplayOptions, reg ...runtime.RegisterOption) runtime.ReplayReport {
		t.Helper()
		e, _ := f.engine(5*time.Second, registerOrder(t, code, &ran, reg...))
		rep, err := e.Replay(waitCtx(t), opts)
		must(t, err)
		if n := ran.Load(); n != 0 {
			t.Fatalf("the replay ran %d steps", n)
		}
		if after := storedState(t, f.store, "o1", "o2", "q"); after != before {
			t.Fatalf("the replay changed the store:\nbefore %s\nafter %s", before, after)
		}
		return rep
	}

	// A compatible change: the same keys in the same order, a step added
	// past where the runs are.
	rep := replay(orderCode{reserveKey: "reserve@v1", extraStep: true}, runtime.ReplayOptions{})
	if rep.Replayed != 3 || len(rep.Divergences) != 0 {
		t.Fatalf("a compatible change: %+v, want 3 runs replayed and none diverging", rep)
	}

	// A renamed step: both orders part at the new key, naming the old one;
	// the finished run returns something else.
	rep = replay(orderCode{reserveKey: "hold@v1"}, runtime.ReplayOptions{})
	if rep.Replayed != 3 || len(rep.Divergences) != 3 {
		t.Fatalf("a renamed step: %+v, want the 3 runs diverging", rep)
	}
	for _, d := range rep.Divergences[:2] {
		if d.Workflow != "order" || d.Key != "hold@v1" || d.Version != 1 || d.Execution != 1 || !strings.Contains(d.Message, "reserve@v1") {
			t.Errorf("divergence %s: want it at hold@v1, naming reserve@v1", d)
		}
	}
	if d := rep.Divergences[2]; d.RunID != "q" || d.Key != "" || !strings.Contains(d.Message, `returns "ba" where the run returned "ab"`) {
		t.Errorf("divergence of the finished run: %s", d)
	}

	// Making a step autoversion changes its keys: the replay says where.
	rep = replay(orderCode{reserveKey: "reserve@v1", autoversion: true}, runtime.ReplayOptions{Workflows: []string{"order"}})
	if len(rep.Divergences) != 2 || rep.Divergences[0].Key != "reserve@v1#0" {
		t.Fatalf("reserve made autoversion: %+v, want both orders to diverge at reserve@v1#0", rep)
	}

	// A build that registers only version 2 cannot run them at all.
	rep = replay(orderCode{reserveKey: "reserve@v1"}, runtime.ReplayOptions{RunIDs: []string{"o1"}}, runtime.WorkflowVersion(2))
	if len(rep.Divergences) != 1 || !strings.Contains(rep.Divergences[0].Message, `"order" version 1 is not registered`) {
		t.Fatalf("only version 2 registered: %+v", rep)
	}

	// Filters.
	rep = replay(orderCode{reserveKey: "hold@v1"}, runtime.ReplayOptions{Statuses: []runtime.RunStatus{runtime.StatusComplete}})
	if rep.Replayed != 1 || len(rep.Divergences) != 1 || rep.Divergences[0].RunID != "q" {
		t.Fatalf("only complete runs: %+v", rep)
	}
	rep = replay(orderCode{reserveKey: "hold@v1"}, runtime.ReplayOptions{Limit: 1})
	if rep.Replayed != 1 {
		t.Fatalf("limit 1: %+v", rep)
	}
	e, _ := f.engine(5*time.Second, registerOrder(t, orderCode{reserveKey: "reserve@v1"}, &ran))
	if _, err := e.Replay(waitCtx(t), runtime.ReplayOptions{Workflows: []string{"ordr"}}); !errors.Is(err, runtime.ErrUnknownWorkflow) || !strings.Contains(err.Error(), `did you mean "order"`) {
		t.Errorf("a misspelled workflow: %v", err)
	}
	if _, err := e.Replay(waitCtx(t), runtime.ReplayOptions{RunIDs: []string{"o1", "nope"}}); !errors.Is(err, runtime.ErrRunNotFound) || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("an unknown run: %v", err)
	}
	if _, err := e.Replay(waitCtx(t), runtime.ReplayOptions{Statuses: []runtime.RunStatus{"done"}}); !errors.Is(err, runtime.ErrInvalidArgument) {
		t.Errorf("an unknown status: %v", err)
	}

	// A store that stops answering ends the replay with its error, naming
	// the run, and no report of divergence.
	dying, probe := f.engine(5*time.Second, registerOrder(t, orderCode{reserveKey: "hold@v1"}, &ran))
	probe.kill()
	rep, err = dying.Replay(waitCtx(t), runtime.ReplayOptions{Workflows: []string{"order"}})
	if !errors.Is(err, errKilled) || !strings.Contains(err.Error(), "replay of run o1") || len(rep.Divergences) != 0 {
		t.Errorf("a replay whose store stops answering: %+v, %v", rep, err)
	}
}

// Step futures finish in any order: a run handed over with its second
// future's checkpoint and not its first's is caught up, not divergent.
func TestReplayStepFuturesOutOfOrder(t *testing.T) {
	t.Parallel()
	f := setup(t)
	release := make(chan struct{})
	register := func(e *runtime.Engine) {
		must(t, runtime.Register(e, "pair", func(c *runtime.WorkflowContext, in string) ([]string, error) {
			slow := runtime.StepAsync(c, "slow@v1", runtime.StepOptions{}, func(sc runtime.StepContext) (string, error) {
				select {
				case <-release:
					return "slow", nil
				case <-sc.Done():
					return "", sc.Err()
				}
			})
			fast := runtime.StepAsync(c, "fast@v1", runtime.StepOptions{}, func(runtime.StepContext) (string, error) { return "fast", nil })
			if err := runtime.All(c, slow, fast); err != nil {
				return nil, err
			}
			a, _ := slow.Await()
			b, _ := fast.Await()
			return []string{a, b}, nil
		}))
	}
	live, _ := f.engine(5*time.Second, register)
	_, err := runtime.Start[string, []string](waitCtx(t), live, "pair", "", runtime.WithID("p"))
	must(t, err)
	stop := start(t, live)
	eventually(t, "the fast step's checkpoint", func() bool {
		rp, err := f.store.LoadReplay(context.Background(), "p")
		must(t, err)
		return len(rp.Checkpoints) == 1
	})
	stop()
	e, _ := f.engine(5*time.Second, register)
	rep, err := e.Replay(waitCtx(t), runtime.ReplayOptions{})
	must(t, err)
	if rep.Replayed != 1 || len(rep.Divergences) != 0 {
		t.Fatalf("replay of a run whose later future finished first: %+v", rep)
	}
	close(release)
	start(t, e)
	out, err := mustGet[[]string](t, e, "pair", "p").Result(waitCtx(t))
	if err != nil || !reflect.DeepEqual(out, []string{"slow", "fast"}) {
		t.Fatalf("the run goes on: %v, %v", out, err)
	}
	rep, err = e.Replay(waitCtx(t), runtime.ReplayOptions{})
	if err != nil || rep.Replayed != 1 || len(rep.Divergences) != 0 {
		t.Fatalf("replay of the completed run: %+v, %v", rep, err)
	}
}
