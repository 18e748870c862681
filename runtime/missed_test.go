package runtime_test

import (
	"context"
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
