package runtime_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stemflow/stem/runtime"
)

// TestSelectEventWinsWhileStepRuns: an event case wins a Select while a
// step case still runs — the step ends only once the workflow, after the
// select, lets it — and the step's result is kept for its Await. Events
// sent by this engine and by another (seen at the next poll) both win.
func TestSelectEventWinsWhileStepRuns(t *testing.T) {
	t.Parallel()
	for _, sender := range []string{"worker", "other engine"} {
		t.Run(sender, func(t *testing.T) {
			t.Parallel()
			f := setup(t)
			started := make(chan struct{}, 1)
			e, _ := f.engine(time.Second, func(e *runtime.Engine) {
				must(t, runtime.Register(e, "race", func(c *runtime.WorkflowContext, _ int) (string, error) {
					release := make(chan struct{})
					ev := runtime.OnEvent[string](c, "stop", "race.stop")
					long := runtime.StepAsync(c, "long@v1", runtime.StepOptions{}, func(sc runtime.StepContext) (string, error) {
						select {
						case started <- struct{}{}:
						default:
						}
						select {
						case <-release:
						case <-sc.Done(): // the engine stops: the test failed
							return "", sc.Err()
						}
						return "step done", nil
					})
					i, err := runtime.Select(c, "pick", long, ev)
					if err != nil {
						return "", err
					}
					close(release) // the step still ran: only now may it end
					v, err := ev.Await()
					if err != nil {
						return "", err
					}
					s, err := long.Await()
					return fmt.Sprintf("case %d: %s; %s", i, v, s), err
				}))
			})
			start(t, e)
			run, err := runtime.Start[int, string](waitCtx(t), e, "race", 0)
			must(t, err)
			select {
			case <-started:
			case <-waitCtx(t).Done():
				t.Fatal("the step never started")
			}
			send := e
			if sender != "worker" {
				send, _ = f.engine(time.Second, func(*runtime.Engine) {})
			}
			must(t, send.SendEvent(waitCtx(t), run.ID(), "race.stop", "stop"))
			got, err := run.Result(waitCtx(t))
			must(t, err)
			if want := "case 1: stop; step done"; got != want {
				t.Fatalf("result %q, want %q", got, want)
			}
		})
	}
}
