package storage

import (
	"context"
	"log/slog"
	"time"
)

// Clock tells the time. The engine and the stores that judge time
// themselves take one; tests substitute a manual one (storetest.Clock).
type Clock interface {
	Now() time.Time
}

// SystemClock is the Clock of the running system.
var SystemClock Clock = systemClock{}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// Timers is a Clock that also runs timers on its own time, as a virtual
// clock in a test does: it fires them as it advances, so a workflow that
// sleeps a month, or retries after an hour, runs in milliseconds. The
// runtime takes every timer that measures a run's time (sleeps, event
// timeouts, retry backoff, step timeouts, deadlines, heartbeats, its wait
// for the next wake time) from a Config.Clock that is a Timers, and from
// the system otherwise.
type Timers interface {
	Clock
	// AfterFunc calls f on its own goroutine once the clock reads d past
	// the time of the call (soon, when d <= 0), unless stop is called
	// first; stop reports whether it kept f from being called.
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

// AfterFunc is c.AfterFunc when c is a Timers, else time.AfterFunc.
func AfterFunc(c Clock, d time.Duration, f func()) (stop func() bool) {
	if t, ok := c.(Timers); ok {
		return t.AfterFunc(d, f)
	}
	return time.AfterFunc(d, f).Stop
}

// NewTimer returns a channel that receives the time once c reads d past
// now, and the timer's stop, on c's timers (AfterFunc).
func NewTimer(c Clock, d time.Duration) (<-chan time.Time, func() bool) {
	ch := make(chan time.Time, 1)
	stop := AfterFunc(c, d, func() {
		select {
		case ch <- c.Now():
		default:
		}
	})
	return ch, stop
}

// ClockOr returns c, or SystemClock when c is nil: the default every
// config's zero value uses.
func ClockOr(c Clock) Clock {
	if c == nil {
		return SystemClock
	}
	return c
}

// LoggerOr returns l, or the default every store config's zero value uses
// when l is nil: a logger that passes warnings and errors to slog.Default()'s
// handler (so to stderr, unless the program set another default) and drops
// info and debug records. A store that stops answering, or a Redis server
// that may evict runs, is then reported even by a program that configured
// no logger; a program that wants silence passes a discarding logger.
func LoggerOr(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(warnHandler{})
	}
	return l
}

// warnHandler passes records of level Warn and above to the handler of
// slog.Default() as it is when each record is logged, with the attributes
// and groups added through it.
type warnHandler struct {
	// with replays, in order, the WithAttrs and WithGroup calls made
	// through this handler onto the default's handler.
	with []func(slog.Handler) slog.Handler
}

func (h warnHandler) target() slog.Handler {
	t := slog.Default().Handler()
	for _, w := range h.with {
		t = w(t)
	}
	return t
}

func (h warnHandler) Enabled(ctx context.Context, level slog.Level) bool {
	return level >= slog.LevelWarn && slog.Default().Handler().Enabled(ctx, level)
}

func (h warnHandler) Handle(ctx context.Context, r slog.Record) error {
	return h.target().Handle(ctx, r)
}

func (h warnHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return h.and(func(t slog.Handler) slog.Handler { return t.WithAttrs(attrs) })
}

func (h warnHandler) WithGroup(name string) slog.Handler {
	return h.and(func(t slog.Handler) slog.Handler { return t.WithGroup(name) })
}

func (h warnHandler) and(w func(slog.Handler) slog.Handler) warnHandler {
	return warnHandler{with: append(h.with[:len(h.with):len(h.with)], w)}
}
