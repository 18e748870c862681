package runtime

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"
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
