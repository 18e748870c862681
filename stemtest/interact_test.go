package stemtest_test

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/stemtest"
)

type approval struct{ By string }

// receipt is the approval's reply.
type receipt struct {
	By string
	At time.Time
}

var errNoApprover = errors.New("no approver named")

// registerApproval registers "approval": a document cools off for two
// hours, is filed, and then waits for an "approve" update (whose validator
// wants an approver), to which it replies with a receipt of when it took
// it.
func registerApproval(e *runtime.Engine) error {
	err := runtime.RegisterUpdate[approval, receipt](e, "approve", func(a approval) error {
		if a.By == "" {
			return errNoApprover
		}
		return nil
	})
	if err != nil {
		return err
	}
	return runtime.Register(e, "approval", func(c *runtime.WorkflowContext, doc string) (string, error) {
		if err := c.Sleep("cool-off", 2*time.Hour); err != nil {
			return "", err
		}
		if err := runtime.Do(c, "file@v1", runtime.StepOptions{}, func(runtime.StepContext) error { return nil }); err != nil {
			return "", err
		}
		u, err := runtime.AwaitUpdate[approval, receipt](c, "approval", "approve")
		if err != nil {
			return "", err
		}
		r := receipt{By: u.Request.By, At: c.Now()}
		if err := u.Reply(c, r); err != nil {
			return "", err
		}
		return doc + " approved by " + r.By, nil
	})
}

// An update sent an hour in waits, buffered, until the workflow takes it
// after its two-hour sleep; the reply comes back decoded into its type.
func TestUpdateAt(t *testing.T) {
	t.Parallel()
	env := stemtest.New(t, registerApproval)
	run, err := runtime.Start[string, string](env.Context(), env.Engine, "approval", "doc-1")
	if err != nil {
		t.Fatal(err)
	}
	reply := stemtest.UpdateAt[receipt](env, time.Hour, run.ID(), "approve", approval{By: "ann"})
	got, err := reply.Wait()
	if err != nil {
		t.Fatalf("reply: %v", err)
	}
	twoHours := stemtest.Epoch.Add(2 * time.Hour)
	if got.By != "ann" || got.At.Before(twoHours) || got.At.After(twoHours.Add(time.Minute)) {
		t.Errorf("reply %+v, want ann's, taken two hours in (%s)", got, twoHours)
	}
	if at := reply.SentAt(); !at.Equal(stemtest.Epoch.Add(time.Hour)) {
		t.Errorf("sent at %s, want an hour in", at)
	}
	if at := reply.RepliedAt(); at.Before(twoHours) || at.After(twoHours.Add(time.Minute)) {
		t.Errorf("replied at %s, want two hours in, after the sleep", at)
	}
	if h := reply.Handle(); h.RunID != run.ID() || h.ID != "stemtest-approve-1" || !h.Created {
		t.Errorf("handle %+v", h)
	}
	if out, err := run.Result(env.Context()); err != nil || out != "doc-1 approved by ann" {
		t.Errorf("result %q, %v", out, err)
	}
}

// An update the validator refuses is refused when it is sent, at its
// virtual time, and writes nothing; the run takes the next one.
func TestUpdateAtRefused(t *testing.T) {
	t.Parallel()
	env := stemtest.New(t, registerApproval)
	run, err := runtime.Start[string, string](env.Context(), env.Engine, "approval", "doc-2")
	if err != nil {
		t.Fatal(err)
	}
	refused := stemtest.UpdateAt[receipt](env, 30*time.Minute, run.ID(), "approve", approval{})
	later := stemtest.UpdateAt[receipt](env, 3*time.Hour, run.ID(), "approve", approval{By: "bo"}, runtime.WithUpdateID("bo"))
	if _, err := refused.Wait(); !errors.Is(err, runtime.ErrUpdateRefused) || !errors.Is(err, errNoApprover) {
		t.Fatalf("refused update: %v; want ErrUpdateRefused and the validator's error", err)
	}
	if h := refused.Handle(); h.ID != "" || !refused.RepliedAt().IsZero() {
		t.Errorf("a refused update has handle %+v, replied at %s", h, refused.RepliedAt())
	}
	got, err := later.Wait()
	if err != nil || got.By != "bo" || later.Handle().ID != "bo" {
		t.Fatalf("the update after the refusal: %+v (%+v), %v", got, later.Handle(), err)
	}
	if at := later.RepliedAt(); !at.Equal(stemtest.Epoch.Add(3 * time.Hour)) {
		t.Errorf("replied at %s, want three hours in, when it was sent to the waiting run", at)
	}
	us, err := env.Engine.Updates(env.Context(), run.ID(), 0, 0)
	if err != nil || len(us) != 1 || us[0].ID != "bo" {
		t.Errorf("updates %+v, %v; want bo's only", us, err)
	}
}

// registerProgress registers "progress": it appends n values to its
// stream "progress", an hour apart, and ends an hour after the last.
func registerProgress(e *runtime.Engine) error {
	return runtime.Register(e, "progress", func(c *runtime.WorkflowContext, n int) (int, error) {
		for i := 1; i <= n; i++ {
			if err := runtime.Append(c, "progress", i*10); err != nil {
				return 0, err
			}
			if err := c.Sleep(fmt.Sprintf("tick-%d", i), time.Hour); err != nil {
				return 0, err
			}
		}
		return n, nil
	})
}

// A test reads a stream as it was at a virtual time, and follows it to the
// run's end; each value carries the virtual time it was written at.
func TestStream(t *testing.T) {
	t.Parallel()
	env := stemtest.New(t, registerProgress)
	run, err := runtime.Start[int, int](env.Context(), env.Engine, "progress", 3)
	if err != nil {
		t.Fatal(err)
	}
	type read struct {
		got []runtime.Streamed[int]
		err error
	}
	soFar := make(chan read, 1)
	env.At(90*time.Minute, func() {
		got, err := stemtest.StreamSoFar[int](env, run.ID(), "progress")
		soFar <- read{got, err}
	})
	all, err := stemtest.FollowStream[int](env, run.ID(), "progress")
	if err != nil {
		t.Fatalf("following the stream: %v", err)
	}
	if got := stemtest.Values(all); !slices.Equal(got, []int{10, 20, 30}) {
		t.Errorf("followed %v, want [10 20 30]", got)
	}
	for i, v := range all {
		if want := stemtest.Epoch.Add(time.Duration(i) * time.Hour); v.Offset != int64(i) || !v.WrittenAt.Equal(want) {
			t.Errorf("value %d: offset %d, written at %s; want %d, %s", i, v.Offset, v.WrittenAt, i, want)
		}
	}
	if got := ended(t, env, run.ID()); got != 3*time.Hour {
		t.Errorf("the run ended %s in, want 3h: the reader returned before it ended", got)
	}
	r := <-soFar
	if r.err != nil || !slices.Equal(stemtest.Values(r.got), []int{10, 20}) {
		t.Errorf("the stream at 1h30: %v, %v; want [10 20]", stemtest.Values(r.got), r.err)
	}
	if got, err := stemtest.StreamSoFar[int](env, run.ID(), "none"); err != nil || len(got) != 0 {
		t.Errorf("a stream never written: %v, %v", got, err)
	}
	if _, err := stemtest.StreamSoFar[int](env, "no-such-run", "progress"); !errors.Is(err, runtime.ErrRunNotFound) {
		t.Errorf("the stream of an unknown run: %v; want ErrRunNotFound", err)
	}
}

// A mocked step's function is the step's body: what it appends to a stream
// is written with the step's checkpoint, as the real function's would be.
func TestMockStepAppends(t *testing.T) {
	t.Parallel()
	env := stemtest.New(t, func(e *runtime.Engine) error {
		return runtime.Register(e, "tally", func(c *runtime.WorkflowContext, words []string) (int, error) {
			// As generated step calls do: ask for a mock first.
			return runtime.Step(c, "count@v1", runtime.StepOptions{}, func(sc runtime.StepContext) (int, error) {
				if fn, ok := runtime.StepOverride[func(runtime.StepContext, []string) (int, error)](c, "count@v1"); ok {
					return fn(sc, words)
				}
				return len(words), nil
			})
		})
	})
	stemtest.MockStep(env, "count@v1", func(sc runtime.StepContext, words []string) (int, error) {
		for _, w := range words {
			if err := runtime.AppendInStep(sc, "words", w); err != nil {
				return 0, err
			}
		}
		return 99, nil
	})
	run, err := runtime.Start[[]string, int](env.Context(), env.Engine, "tally", []string{"tea", "cup"})
	if err != nil {
		t.Fatal(err)
	}
	words, err := stemtest.FollowStream[string](env, run.ID(), "words")
	if err != nil || !slices.Equal(stemtest.Values(words), []string{"tea", "cup"}) {
		t.Errorf("stream %v, %v; want the mock's appends", stemtest.Values(words), err)
	}
	if out, err := run.Result(env.Context()); err != nil || out != 99 {
		t.Errorf("result %d, %v; want the mock's", out, err)
	}
}

// An update sent at a virtual time goes on across the crash test's
// replacement of its worker: the reply awaited on the killed worker's
// engine comes from the fresh one's, in every case, with the update's
// default ID the same in each.
func TestUpdateAtUnderCrashes(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	cases := 0
	stemtest.CrashEveryStep(t, registerApproval, "approval", "doc-3", stemtest.AfterStart(func(env *stemtest.Env, runID string) {
		mu.Lock()
		cases++
		mu.Unlock()
		reply := stemtest.UpdateAt[receipt](env, time.Hour, runID, "approve", approval{By: "cy"})
		// Cleanups run last first: this one before the env stops.
		env.T().Cleanup(func() {
			if got, err := reply.Wait(); err != nil || got.By != "cy" {
				env.T().Errorf("reply %+v, %v; want cy's", got, err)
			}
		})
	}))
	if cases != 5 {
		t.Errorf("%d cases, want the first run and four crashes", cases)
	}
}
