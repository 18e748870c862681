package enginetest

import (
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/stemflow/stem/runtime"
)

var backoffScenarios = []scenario{
	{"backoff/a long backoff parks the run and frees the one worker", testBackoffParks},
	{"backoff/a run parked for its backoff continues its budget on the next engine", testBackoffParkedHandOver},
}

// parkBackoff is the backoff of the scenarios' failing step: far longer
// than their ParkRetriesAfter, short enough to wait out.
const parkBackoff = 2 * time.Second

// backoffWorkflows registers "retrying", whose step fails its first
// attempt and succeeds its second after parkBackoff (recording the attempt
// numbers it saw), and "quick", which completes at once (recording in
// during the attempts "retrying" had made when its step ran).
func backoffWorkflows(f *fixture, seen, during *[]int, mu *sync.Mutex) func(e *runtime.Engine) {
	return func(e *runtime.Engine) {
		f.must(runtime.Register(e, "retrying", func(c *runtime.WorkflowContext, _ int) (int, error) {
			return runtime.Step(c, "charge@v1", runtime.StepOptions{Retries: runtime.RetryForever, Backoff: parkBackoff, MaxBackoff: parkBackoff, Jitter: runtime.NoJitter},
				func(sc runtime.StepContext) (int, error) {
					mu.Lock()
					*seen = append(*seen, sc.Attempt())
					mu.Unlock()
					if sc.Attempt() == 1 {
						return 0, errors.New("card declined")
					}
					return sc.Attempt(), nil
				})
		}))
		f.must(runtime.Register(e, "quick", func(c *runtime.WorkflowContext, n int) (int, error) {
			return runtime.Step(c, "double@v1", runtime.StepOptions{}, func(runtime.StepContext) (int, error) {
				mu.Lock()
				*during = slices.Clone(*seen)
				mu.Unlock()
				return 2 * n, nil
			})
		}))
	}
}

// wantParked waits until run r1 is parked waiting for its retry, its
// first attempt recorded with the retry's due time.
func wantParked(f *fixture, e *runtime.Engine) {
	f.t.Helper()
	f.waitStatus(e, "r1", runtime.StatusWaiting)
	s := findStep(f.steps(e, "r1", 0), "charge@v1")
	if s == nil || len(s.Attempts) != 1 || s.Attempts[0].Number != 1 || s.Attempts[0].RetryAt == nil {
		f.t.Fatalf("parked step %+v, want its first attempt recorded with a RetryAt", s)
	}
}

// wantRetried waits until r1 completes with its second attempt, numbered
// 2, and checks that no engine held it.
func wantRetried(f *fixture, e *runtime.Engine, seen *[]int, mu *sync.Mutex) {
	f.t.Helper()
	info := f.waitStatus(e, "r1", runtime.StatusComplete)
	if info.Hold != nil {
		f.t.Fatalf("the resumed run was held: %+v", info.Hold)
	}
	run, err := runtime.Get[int](f.ctx, e, "retrying", "r1")
	f.must(err)
	out, err := run.Result(f.ctx)
	f.must(err)
	if out != 2 {
		f.t.Fatalf("r1 returned %d, want 2 (the second attempt's)", out)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(*seen, []int{1, 2}) {
		f.t.Fatalf("attempts seen %v, want 1 2", *seen)
	}
}

// testBackoffParks: with one worker, a step retrying after a backoff
// longer than ParkRetriesAfter parks its run rather than hold the worker,
// so another run completes meanwhile; the retry runs when due.
func testBackoffParks(f *fixture) {
	var mu sync.Mutex
	var seen, during []int
	e := f.engine(config{workers: 1, parkAfter: 100 * time.Millisecond}, backoffWorkflows(f, &seen, &during, &mu))
	f.start(e)
	_, err := runtime.Start[int, int](f.ctx, e, "retrying", 0, runtime.WithID("r1"))
	f.must(err)
	wantParked(f, e)
	r2, err := runtime.Start[int, int](f.ctx, e, "quick", 21, runtime.WithID("r2"))
	f.must(err)
	f.waitStatus(e, "r2", runtime.StatusComplete)
	// Had r1 kept the one worker through its backoff, r2's step would
	// have run only after r1's second attempt.
	mu.Lock()
	if !slices.Equal(during, []int{1}) {
		f.t.Errorf("r2's step ran when r1 had made attempts %v, want 1 only: r1 held the worker through its backoff", during)
	}
	mu.Unlock()
	out, err := r2.Result(f.ctx)
	f.must(err)
	if out != 42 {
		f.t.Fatalf("r2 returned %d, want 42", out)
	}
	wantRetried(f, e, &seen, &mu)
}

// testBackoffParkedHandOver: a run parked for its backoff by an engine
// that then dies is continued by the next engine, which makes the second
// attempt (not the first again) when it is due.
func testBackoffParkedHandOver(f *fixture) {
	var mu sync.Mutex
	var seen, during []int
	a := f.engine(config{workers: 1, parkAfter: 100 * time.Millisecond}, backoffWorkflows(f, &seen, &during, &mu))
	stopA := f.start(a)
	_, err := runtime.Start[int, int](f.ctx, a, "retrying", 0, runtime.WithID("r1"))
	f.must(err)
	wantParked(f, a)
	stopA()
	b := f.engine(config{workers: 1, parkAfter: 100 * time.Millisecond}, backoffWorkflows(f, &seen, &during, &mu))
	f.start(b)
	wantRetried(f, b, &seen, &mu)
}
