package storage

import (
	"io"
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

// ClockOr returns c, or SystemClock when c is nil: the default every
// config's zero value uses.
func ClockOr(c Clock) Clock {
	if c == nil {
		return SystemClock
	}
	return c
}

// LoggerOr returns l, or a logger that discards everything when l is nil:
// the default every config's zero value uses.
func LoggerOr(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return l
}
