package runtime

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stemflow/stem/storage"
	"github.com/stemflow/stem/stores/memstore"
)

// stepClock is a virtual clock whose timers fire at once, moving the
// clock to their time, and which records each timer's duration.
type stepClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []time.Duration
}

func (c *stepClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *stepClock) AfterFunc(d time.Duration, f func()) func() bool {
	c.mu.Lock()
	c.timers = append(c.timers, d)
	c.now = c.now.Add(d)
	c.mu.Unlock()
	go f()
	return func() bool { return false }
}

// The pacer spaces the runs a page acts on by the request's rate: the
// first at once, each next one a period after the one before, not after
// whatever time acting on it took; and with no bound it never waits.
func TestBulkPacer(t *testing.T) {
	clock := &stepClock{now: time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)}
	p := pacer{clock: clock, every: BulkRequest{Rate: 4}.every()}
	for i := range 4 {
		if err := p.wait(context.Background()); err != nil {
			t.Fatal(err)
		}
		if i == 1 {
			clock.mu.Lock()
			clock.now = clock.now.Add(100 * time.Millisecond) // acting on it took a while
			clock.mu.Unlock()
		}
	}
	if want := []time.Duration{250 * time.Millisecond, 150 * time.Millisecond, 250 * time.Millisecond}; !slices.Equal(clock.timers, want) {
		t.Fatalf("waits %v, want %v", clock.timers, want)
	}
	free := pacer{clock: clock, every: BulkRequest{Rate: BulkRateUnlimited}.every()}
	clock.timers = nil
	for range 3 {
		if err := free.wait(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if len(clock.timers) != 0 {
		t.Fatalf("an unbounded rate waited %v", clock.timers)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := free.wait(ctx); err == nil {
		t.Fatal("a cancelled page goes on")
	}
}

// A page lists about a second's worth of runs at the rate, 1 to 100.
func TestBulkPageSize(t *testing.T) {
	for _, c := range []struct {
		rate float64
		page int
		d    time.Duration
	}{
		{0, 100, 10 * time.Millisecond},
		{BulkRateUnlimited, 100, 0},
		{0.5, 1, 2 * time.Second},
		{20, 20, 50 * time.Millisecond},
		{1000, 100, time.Millisecond},
	} {
		r := BulkRequest{Rate: c.rate}
		if r.pageSize() != c.page || r.every() != c.d {
			t.Errorf("rate %v: page %d every %v, want %d and %v", c.rate, r.pageSize(), r.every(), c.page, c.d)
		}
	}
}

// A bulk action over more pages than an execution holds continues as
// new, carrying the next page's listing and its progress, and acts on
// every run once.
func TestBulkContinuesAsNew(t *testing.T) {
	defer func(page, pages int) { bulkMaxPage, bulkPagesPerExecution = page, pages }(bulkMaxPage, bulkPagesPerExecution)
	bulkMaxPage, bulkPagesPerExecution = 2, 2
	st := memstore.New(memstore.Options{})
	defer st.Close()
	e, err := New(Config{Store: st, PollInterval: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if err := RegisterBulk(e); err != nil {
		t.Fatal(err)
	}
	if err := Register(e, "idle", func(c *WorkflowContext, _ int) (int, error) {
		return WaitForEvent[int](c, "never", "never", 0)
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i := range 7 {
		if _, err := Start[int, int](ctx, e, "idle", i, WithID(fmt.Sprintf("i-%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	id, err := e.StartBulk(ctx, BulkRequest{Action: BulkTerminate, Filter: ListRunsQuery{Workflow: "idle"}, Rate: BulkRateUnlimited})
	if err != nil {
		t.Fatal(err)
	}
	go e.Run(ctx)
	var b BulkInfo
	for !b.Status.Finished() {
		if b, err = e.GetBulk(ctx, id); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	info, err := e.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if b.Status != StatusComplete || b.Progress.Matched != 7 || b.Progress.Acted != 7 || info.Execution != 2 || b.Request.Action != BulkTerminate {
		t.Fatalf("bulk action %+v in execution %d, want 7 terminated in execution 2", b, info.Execution)
	}
	for i := range 7 {
		if r, err := e.Get(ctx, fmt.Sprintf("i-%d", i)); err != nil || r.Status != StatusTerminated {
			t.Fatalf("i-%d: %v %v", i, r.Status, err)
		}
	}
}

// failListing fails the listing after the cursor given once, as a store
// that did not answer.
type failListing struct {
	storage.Store
	after  string
	failed atomic.Bool
}

func (f *failListing) ListRuns(ctx context.Context, q storage.ListRunsQuery) (storage.RunPage, error) {
	if q.After == f.after && q.Workflow == "idle" && !f.failed.Swap(true) {
		return storage.RunPage{}, errors.New("the store did not answer")
	}
	return f.Store.ListRuns(ctx, q)
}

// A bulk action whose page failed for good errors; ContinueBulk restarts
// it from that page, which acts again on its listing: the runs it acted
// on are skipped, and every run is acted on once.
func TestContinueBulkFromFailedPage(t *testing.T) {
	defer func(page int, opts StepOptions) { bulkMaxPage, bulkStepOptions = page, opts }(bulkMaxPage, bulkStepOptions)
	bulkMaxPage, bulkStepOptions = 2, StepOptions{}
	mem := memstore.New(memstore.Options{})
	defer mem.Close()
	st := &failListing{Store: mem, after: "i-1"}
	e, err := New(Config{Store: st, PollInterval: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if err := RegisterBulk(e); err != nil {
		t.Fatal(err)
	}
	if err := Register(e, "idle", func(c *WorkflowContext, _ int) (int, error) {
		return WaitForEvent[int](c, "never", "never", 0)
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i := range 5 {
		if _, err := Start[int, int](ctx, e, "idle", i, WithID(fmt.Sprintf("i-%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	id, err := e.StartBulk(ctx, BulkRequest{Action: BulkTerminate, Filter: ListRunsQuery{Workflow: "idle"}, Rate: BulkRateUnlimited})
	if err != nil {
		t.Fatal(err)
	}
	go e.Run(ctx)
	await := func() BulkInfo {
		for {
			b, err := e.GetBulk(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if b.Status.Finished() {
				return b
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	if b := await(); b.Status != StatusErrored || !strings.Contains(b.Err.Error(), "the store did not answer") {
		t.Fatalf("bulk action with a failed page: %+v", b)
	}
	if err := e.ContinueBulk(ctx, id); err != nil {
		t.Fatal(err)
	}
	b := await()
	if b.Status != StatusComplete || b.Progress.Matched != 5 || b.Progress.Acted != 3 || b.Progress.Skipped != 2 {
		t.Fatalf("continued: %+v", b)
	}
	if err := e.ContinueBulk(ctx, id); err != nil {
		t.Fatalf("ContinueBulk of a complete bulk action: %v", err)
	}
	if err := e.Terminate(ctx, "i-0", ""); !errors.Is(err, ErrInvalidState) {
		t.Fatalf("i-0 was not terminated once: %v", err)
	}
}
