package runtime_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stemflow/stem/runtime"
)

// TestLocalRestartMidStep: a restart on the engine that runs the step
// cancels it with ErrRestarted, and the new execution starts as soon as the
// old step has returned, not when its lease expires.
func TestLocalRestartMidStep(t *testing.T) {
	f := setup(t)
	const lease = 30 * time.Second
	var calls atomic.Int32
	causes := make(chan error, 1)
	e, _ := f.engine(lease, func(e *runtime.Engine) {
		must(t, runtime.Register(e, "blocker", func(c *runtime.WorkflowContext, _ int) (int, error) {
			return runtime.Step(c, "work@v1", runtime.StepOptions{}, func(sc runtime.StepContext) (int, error) {
				if calls.Add(1) > 1 {
					return 2, nil
				}
				<-sc.Done()
				causes <- context.Cause(sc)
				return 0, sc.Err()
			})
		}))
	})
	start(t, e)
	ctx := waitCtx(t)
	run, err := runtime.Start[int, int](ctx, e, "blocker", 0)
	must(t, err)
	eventually(t, "the step started", func() bool { return calls.Load() == 1 })
	began := time.Now()
	must(t, run.Restart(ctx))
	if cause := <-causes; !errors.Is(cause, runtime.ErrRestarted) {
		t.Fatalf("the step's context was cancelled with %v, want ErrRestarted", cause)
	}
	out, err := run.Result(ctx)
	must(t, err)
	if out != 2 {
		t.Fatalf("result %d, want 2 from the new execution", out)
	}
	if d := time.Since(began); d >= lease {
		t.Fatalf("the new execution ended %v after the restart: it waited for the old lease", d)
	}
}

// logRecorder collects the messages of the records logged through it.
type logRecorder struct {
	mu   sync.Mutex
	msgs []string
}

func (r *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *logRecorder) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *logRecorder) WithGroup(string) slog.Handler            { return r }
func (r *logRecorder) Handle(_ context.Context, rec slog.Record) error {
	msg := rec.Message
	rec.Attrs(func(a slog.Attr) bool {
		msg += " " + a.String()
		return true
	})
	r.mu.Lock()
	r.msgs = append(r.msgs, msg)
	r.mu.Unlock()
	return nil
}

func (r *logRecorder) count(sub string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, m := range r.msgs {
		if strings.Contains(m, sub) {
			n++
		}
	}
	return n
}

// TestWarnsOnceOfAnUnheldStep: with heartbeats off, a step without a
// timeout may outlive its lease; the engine says so once per workflow and
// step, however often the step runs, and not for a step with a timeout.
func TestWarnsOnceOfAnUnheldStep(t *testing.T) {
	f := setup(t)
	logs := &logRecorder{}
	e, err := runtime.New(runtime.Config{
		Store: f.store, LeaseDuration: time.Minute, HeartbeatInterval: -1,
		PollInterval: 5 * time.Millisecond, Logger: slog.New(logs),
	})
	must(t, err)
	must(t, runtime.Register(e, "steps", func(c *runtime.WorkflowContext, _ int) (int, error) {
		for range 3 {
			if _, err := runtime.Step(c, "bare@v1", runtime.StepOptions{Autoversion: true}, func(runtime.StepContext) (int, error) { return 1, nil }); err != nil {
				return 0, err
			}
		}
		return runtime.Step(c, "timed@v1", runtime.StepOptions{Timeout: time.Second}, func(runtime.StepContext) (int, error) { return 1, nil })
	}))
	start(t, e)
	ctx := waitCtx(t)
	for range 2 {
		run, err := runtime.Start[int, int](ctx, e, "steps", 0)
		must(t, err)
		_, err = run.Result(ctx)
		must(t, err)
	}
	if n := logs.count("heartbeats do not keep this step's lease"); n != 1 {
		t.Fatalf("warned %d times, want once:\n%s", n, strings.Join(logs.msgs, "\n"))
	}
	if logs.count("step=bare@v1") != 1 || logs.count("step=timed@v1") != 0 {
		t.Fatalf("warned of the wrong step:\n%s", strings.Join(logs.msgs, "\n"))
	}
}
