package runtime_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/storage"
	"github.com/stemflow/stem/stores/memstore"
)

// silentStore announces the runs' ends only through ends, which the test
// feeds: the store's own announcements never reach the engine, as when
// they were lost on the way.
type silentStore struct {
	storage.Store
	ends chan string
}

func (s *silentStore) Finished(ctx context.Context) <-chan string {
	out := make(chan string)
	go func() {
		defer close(out)
		for {
			select {
			case id := <-s.ends:
				select {
				case out <- id:
				case <-ctx.Done():
					return
				}
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}

func (s *silentStore) HearsEveryFinish() bool { return true }

// endElsewhere works run id to its end as another process would, with
// output 42; its end is announced to nobody.
func (s *silentStore) endElsewhere(t *testing.T, ctx context.Context, workflow string) {
	t.Helper()
	claimed, err := s.Claim(ctx, storage.ClaimRequest{Owner: "elsewhere", Workflows: []string{workflow}, Limit: 1, LeaseFor: time.Minute})
	if err != nil || len(claimed) != 1 {
		t.Fatalf("claim elsewhere: %v, %d runs", err, len(claimed))
	}
	must(t, s.Complete(ctx, storage.CompleteRequest{Lease: claimed[0].Lease, Status: storage.StatusComplete, Output: []byte("42")}))
}

// TestResultAfterMissedAnnouncements: a caller awaiting a run that another
// process ended, whose announcement this process never heard, gets the
// result when the store says announcements were missed (storage.Missed),
// not after its safety-net poll: the poll interval here is far longer
// than the test may take.
func TestResultAfterMissedAnnouncements(t *testing.T) {
	s := &silentStore{Store: memstore.New(memstore.Options{}), ends: make(chan string)}
	e, err := runtime.New(runtime.Config{Store: s, PollInterval: time.Hour})
	must(t, err)
	t.Cleanup(func() { e.Close() })
	const wf = "missed.answer"
	must(t, runtime.Register(e, wf, func(_ *runtime.WorkflowContext, n int) (int, error) { return n, nil }))
	ctx := waitCtx(t)

	// A first run, ended elsewhere before its Result: read, and the watch
	// of announcements has begun.
	first, err := runtime.Start[int, int](ctx, e, wf, 42)
	must(t, err)
	s.endElsewhere(t, ctx, wf)
	if out, err := first.Result(ctx); err != nil || out != 42 {
		t.Fatalf("first Result = %d, %v", out, err)
	}

	// The second is listened for since before it existed, so its Result
	// waits for an announcement and reads nothing first.
	run, err := runtime.Start[int, int](ctx, e, wf, 42)
	must(t, err)
	got := make(chan error, 1)
	go func() {
		out, err := run.Result(ctx)
		if err == nil && out != 42 {
			t.Errorf("Result = %d, want 42", out)
		}
		got <- err
	}()
	s.endElsewhere(t, ctx, wf)
	select {
	case err := <-got:
		t.Fatalf("Result returned (%v) before anything told this process the run ended", err)
	case <-time.After(50 * time.Millisecond):
	}
	s.ends <- storage.Missed
	must(t, <-got)
}

// TestCallersAwaitingRunsReadNone: 300 runs started each from a goroutine
// of its own on an engine of four workers, so most runs wait queued, then
// awaited each from a goroutine: not one caller reads its run, whether it
// executed eagerly or was claimed later, ended before its Result or after.
// The engine listens for ends from its first
// start, every end here hands its outcome to the caller, and the store
// announces every end. (The poll, a safety net, is an hour away.)
func TestCallersAwaitingRunsReadNone(t *testing.T) {
	s := &readCounter{Store: memstore.New(memstore.Options{})}
	e, err := runtime.New(runtime.Config{Store: s, Workers: 4, PollInterval: time.Hour})
	must(t, err)
	t.Cleanup(func() { e.Close() })
	const wf = "reads.step"
	gate := make(chan struct{}) // holds the steps until every caller awaits
	must(t, runtime.Register(e, wf, func(c *runtime.WorkflowContext, n int) (int, error) {
		return runtime.Step(c, "s@v1", runtime.StepOptions{}, func(runtime.StepContext) (int, error) {
			<-gate
			return n + 1, nil
		})
	}))
	stop := start(t, e)
	defer stop()
	ctx := waitCtx(t)
	// Once Run works runs (it has looked for some), the engine listens for
	// ends from its first start on.
	eventually(t, "the engine works runs", func() bool { return s.claimCalls.Load() > 0 })
	// Every run is started before any caller awaits one, so no Result
	// has begun the watch: the starts must have.
	runs := make([]*runtime.Run[int], 300)
	var wg sync.WaitGroup
	for i := range runs {
		wg.Go(func() {
			run, err := runtime.Start[int, int](ctx, e, wf, i)
			if err != nil {
				t.Error(err)
			}
			runs[i] = run
		})
	}
	wg.Wait()
	for i, run := range runs {
		if run == nil {
			t.FailNow()
		}
		wg.Go(func() {
			if out, err := run.Result(ctx); err != nil || out != i+1 {
				t.Errorf("run %d: Result = %d, %v", i, out, err)
			}
		})
	}
	time.Sleep(50 * time.Millisecond) // most callers are waiting by now; any order must read none
	close(gate)
	wg.Wait()
	if n := s.reads.Load(); n != 0 {
		t.Fatalf("callers read their runs %d times, want none", n)
	}
}
