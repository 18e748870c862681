package stemtest

import (
	"container/heap"
	"sync"
	"sync/atomic"
	"time"
)

// Epoch is the virtual time a test's clock starts at, unless the test
// chooses another (StartAt).
var Epoch = time.Date(2030, time.January, 1, 0, 0, 0, 0, time.UTC)

// Clock is a virtual clock: it reads a time that moves only when told to
// (Advance) or, under an Env, when every run is blocked on time. It runs
// the timers of the engine and store that use it (storage.Timers): a
// timer fires when the clock passes its time, in time order.
type Clock struct {
	mu     sync.Mutex
	now    time.Time
	timers timerHeap
	seq    uint64
	// activity counts the clock's uses: an Env moves the clock only once
	// it has stood still for a while (see Env).
	activity atomic.Uint64
}

// NewClock returns a virtual clock reading t.
func NewClock(t time.Time) *Clock { return &Clock{now: t} }

// Now returns the virtual time.
func (c *Clock) Now() time.Time {
	c.activity.Add(1)
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// AfterFunc calls f on its own goroutine once the clock reads d past now
// (at once when d <= 0), unless stop is called first; stop reports whether
// it kept f from being called. It makes Clock a storage.Timers.
func (c *Clock) AfterFunc(d time.Duration, f func()) (stop func() bool) {
	c.activity.Add(1)
	if d <= 0 {
		go f()
		return func() bool { return false }
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	t := &timer{at: c.now.Add(d), seq: c.seq, f: f}
	heap.Push(&c.timers, t)
	return func() bool {
		c.activity.Add(1)
		c.mu.Lock()
		defer c.mu.Unlock()
		if t.index < 0 {
			return false
		}
		heap.Remove(&c.timers, t.index)
		return true
	}
}

// Advance moves the clock d forward, firing the timers it passes, each at
// its own time, in time order. Under an Env, Env.Advance also lets what
// each timer starts settle before the next.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	target := c.now.Add(d)
	c.mu.Unlock()
	for c.fireNext(target) {
	}
	c.set(target)
}

// next returns the time of the earliest pending timer.
func (c *Clock) next() (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.timers) == 0 {
		return time.Time{}, false
	}
	return c.timers[0].at, true
}

// fireNext moves the clock to the earliest pending timer's time, when it
// is not after limit, and fires every timer due then. It reports whether
// it fired any.
func (c *Clock) fireNext(limit time.Time) bool {
	c.mu.Lock()
	if len(c.timers) == 0 || c.timers[0].at.After(limit) {
		c.mu.Unlock()
		return false
	}
	at := c.timers[0].at
	if at.After(c.now) {
		c.now = at
	}
	var due []func()
	for len(c.timers) > 0 && !c.timers[0].at.After(at) {
		due = append(due, heap.Pop(&c.timers).(*timer).f)
	}
	c.mu.Unlock()
	c.activity.Add(1)
	for _, f := range due {
		go f()
	}
	return true
}

// set moves the clock to t, never back.
func (c *Clock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.After(c.now) {
		c.now = t
	}
}

type timer struct {
	at    time.Time
	seq   uint64
	f     func()
	index int
}

// timerHeap orders timers by time, then by creation.
type timerHeap []*timer

func (h timerHeap) Len() int { return len(h) }
func (h timerHeap) Less(i, j int) bool {
	if !h[i].at.Equal(h[j].at) {
		return h[i].at.Before(h[j].at)
	}
	return h[i].seq < h[j].seq
}
func (h timerHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *timerHeap) Push(x any) {
	t := x.(*timer)
	t.index = len(*h)
	*h = append(*h, t)
}
func (h *timerHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	old[len(old)-1] = nil
	t.index = -1
	*h = old[:len(old)-1]
	return t
}
