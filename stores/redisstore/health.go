package redisstore

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// health tracks whether the server answers, so that a server that stops
// answering is logged once per episode, not once per failing call: the
// first failure logs "not answering since", the first answer after it
// "answering again after", both at warn level so that the default logger
// shows the pair.
type health struct {
	log  *slog.Logger
	what string // the server, as the log lines name it: "redisstore: server at 127.0.0.1:6379"

	down     atomic.Bool
	mu       sync.Mutex
	since    time.Time // guarded by mu, as is failures
	failures int
}

// fail records that a call (op) got no answer.
func (h *health) fail(op string, err error) {
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

// ok records that the server answered a call started at start. An answer
// to a call that started before the episode began does not end it.
func (h *health) ok(start time.Time) {
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
