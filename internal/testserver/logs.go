package testserver

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// Logs is the text output of a logger a store under test writes to, safe
// for concurrent use, so a test can count what the store reported about a
// server that stopped answering.
type Logs struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// CaptureLogs returns a Logs and a logger writing text records of level
// and above to it.
func CaptureLogs(level slog.Level) (*Logs, *slog.Logger) {
	l := &Logs{}
	return l, slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: level}))
}

// Write appends p.
func (l *Logs) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// String returns everything written so far.
func (l *Logs) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// Reset forgets everything written so far.
func (l *Logs) Reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.Reset()
}

// Count returns how many lines contain s.
func (l *Logs) Count(s string) int {
	n := 0
	for line := range strings.Lines(l.String()) {
		if strings.Contains(line, s) {
			n++
		}
	}
	return n
}

// AnswersAgain calls call, each time bounded by Within, until it succeeds:
// after a thaw or a restart the first calls may still meet the server
// catching up. It fails the test with the last error after 20 tries 100 ms
// apart.
func AnswersAgain(t testing.TB, what string, call func() error) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		err := Within(t, what, call)
		if err == nil {
			return
		}
		if attempt == 20 {
			t.Fatalf("%s after the server came back: %v", what, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
