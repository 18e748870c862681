package storage

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// Health tracks whether a store's server answers, so that a server that
// stops answering is logged once per episode, not once per failing call:
// the first failure logs "not answering since", the first answer after it
// "answering again after", both at warn level so that the default logger
// (LoggerOr) shows the pair. Stores backed by a server (Postgres, Redis)
// report every call to it. The zero value is not usable; use NewHealth.
type Health struct {
	log  *slog.Logger
	what string // the server, as the log lines name it: "pgstore: database at 127.0.0.1:5432"

	down     atomic.Bool
	mu       sync.Mutex
	since    time.Time // guarded by mu, as is failures
	failures int
}

// NewHealth returns a Health that logs to log, naming the server as what
// ("redisstore: server at 127.0.0.1:6379").
func NewHealth(log *slog.Logger, what string) *Health {
	return &Health{log: LoggerOr(log), what: what}
}

// Fail records that a call (op) got no answer.
func (h *Health) Fail(op string, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.down.Load() {
		h.failures++
		return
	}
	h.since, h.failures = time.Now(), 1
	h.down.Store(true)
	h.log.Warn(h.what+" not answering since "+h.since.Format(time.RFC3339)+"; calls fail until it answers",
		"op", op, "err", err)
}

// OK records that the server answered a call started at start. An answer
// to a call that started before the episode began does not end it.
func (h *Health) OK(start time.Time) {
	if !h.down.Load() {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.down.Load() || start.Before(h.since) {
		return
	}
	h.down.Store(false)
	h.log.Warn(h.what+" answering again after "+time.Since(h.since).Round(time.Millisecond).String(),
		"failed_calls", h.failures)
}
