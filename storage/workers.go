package storage

import (
	"fmt"
	"sort"
	"time"
)

// Worker is an engine at work, as it records itself in the store (see
// Store.PutWorker): operators list the live ones (stem workers, the
// dashboard) to see who serves what and how busy each is.
type Worker struct {
	// ID is the engine's worker ID, the Owner of its leases.
	ID string
	// Host and PID say where it runs.
	Host string
	PID  int
	// StartedAt is when the engine began to work.
	StartedAt time.Time
	// Queues and Workflows are what it claims runs of.
	Queues    []string
	Workflows []string
	// InFlight is how many runs it was executing when it last recorded
	// itself.
	InFlight int
	// KeyIDs are the IDs of the codec keys the worker opens payloads with
	// (see runtime.AESGCMKeyID), the one it seals with first; nil when it
	// has no codec or its codec names no keys. An operator's command
	// refuses to seal with a key no live worker lists here.
	KeyIDs []string
	// MissingKeyIDs are the key IDs of payloads the worker claimed and
	// could not open, for its codec does not hold them: it is
	// misconfigured, and hands such runs back to workers that hold the
	// key. Nil when it has met none.
	MissingKeyIDs []string
	// Heartbeat is when it last recorded itself, and ExpiresAt when the
	// record lapses unless recorded again: set by the store, on its clock.
	Heartbeat time.Time
	ExpiresAt time.Time
}

// PutWorkerRequest records a worker for TTL (see Store.PutWorker).
type PutWorkerRequest struct {
	Worker Worker
	// TTL is how long the record stays live without another PutWorker,
	// from MinWorkerTTL to MaxWorkerTTL.
	TTL time.Duration
}

// The bounds of a worker record.
const (
	MinWorkerTTL = time.Second
	MaxWorkerTTL = 24 * time.Hour
	// MaxWorkerNames caps the queues and the workflows a worker record
	// lists, each.
	MaxWorkerNames = 1000
	// MaxHostLen caps Worker.Host, in bytes.
	MaxHostLen = 255
	// MaxWorkerKeyIDs caps Worker.KeyIDs and Worker.MissingKeyIDs, each.
	MaxWorkerKeyIDs = 64
	// MaxKeyIDLen caps each codec key ID a worker record lists, in bytes.
	MaxKeyIDLen = 64
)

// Validate checks the request: a worker ID as a store can hold it (text of
// 1 to MaxDerivedLen bytes), a host of at most MaxHostLen, no negative PID
// or InFlight, a start time, at most MaxWorkerNames valid queue and
// workflow names each, at most MaxWorkerKeyIDs codec key IDs and missing
// key IDs each (see CheckKeyID), and a TTL within MinWorkerTTL and
// MaxWorkerTTL.
// Heartbeat and ExpiresAt are the store's to set and are ignored.
func (r PutWorkerRequest) Validate() error {
	w := r.Worker
	if err := CheckWorkerID(w.ID); err != nil {
		return invalid("put worker", "%s", reason(err))
	}
	if w.Host != "" {
		if err := checkText("host", w.Host, MaxHostLen); err != nil {
			return invalid("put worker", "worker %q: %s", w.ID, reason(err))
		}
	}
	if w.PID < 0 || w.InFlight < 0 {
		return invalid("put worker", "worker %q has PID %d and %d runs in flight; neither may be negative", w.ID, w.PID, w.InFlight)
	}
	if w.StartedAt.IsZero() {
		return invalid("put worker", "worker %q has no start time", w.ID)
	}
	if len(w.Queues) > MaxWorkerNames || len(w.Workflows) > MaxWorkerNames {
		return invalid("put worker", "worker %q lists %d queues and %d workflows, at most %d each", w.ID, len(w.Queues), len(w.Workflows), MaxWorkerNames)
	}
	for _, q := range w.Queues {
		if err := CheckQueueName(q); err != nil {
			return invalid("put worker", "worker %q: %s", w.ID, reason(err))
		}
	}
	for _, name := range w.Workflows {
		if err := CheckWorkflowName(name); err != nil {
			return invalid("put worker", "worker %q: %s", w.ID, reason(err))
		}
	}
	if len(w.KeyIDs) > MaxWorkerKeyIDs || len(w.MissingKeyIDs) > MaxWorkerKeyIDs {
		return invalid("put worker", "worker %q lists %d key IDs and %d missing key IDs, at most %d each", w.ID, len(w.KeyIDs), len(w.MissingKeyIDs), MaxWorkerKeyIDs)
	}
	for _, ids := range [][]string{w.KeyIDs, w.MissingKeyIDs} {
		for _, id := range ids {
			if err := CheckKeyID(id); err != nil {
				return invalid("put worker", "worker %q: %s", w.ID, reason(err))
			}
		}
	}
	if r.TTL < MinWorkerTTL || r.TTL > MaxWorkerTTL {
		return invalid("put worker", "worker %q has TTL %v, want %v to %v", w.ID, r.TTL, MinWorkerTTL, MaxWorkerTTL)
	}
	return nil
}

// CheckWorkerID checks a worker ID as a store holds it: text of 1 to
// MaxDerivedLen bytes, valid UTF-8 without control characters.
func CheckWorkerID(id string) error {
	return checkText("worker ID", id, MaxDerivedLen)
}

// CheckKeyID checks a codec key ID as a worker record lists it: 1 to
// MaxKeyIDLen ASCII letters, digits, '.', '_', '-', '/' and ':' (the
// AES-GCM codec's are 16 hex digits).
func CheckKeyID(id string) error {
	return checkASCIIUpTo("codec key ID", id, MaxKeyIDLen, topicChars, topicHint)
}

// The bounds of NewRun.Headers.
const (
	// MaxHeaders caps how many headers a run carries.
	MaxHeaders = 16
	// MaxHeaderNameLen caps a header's name, in bytes.
	MaxHeaderNameLen = 64
	// MaxHeadersBytes caps the names and values of a run's headers
	// together, in bytes.
	MaxHeadersBytes = 8 << 10
)

// ValidateHeaders checks a run's headers: at most MaxHeaders of them, of
// at most MaxHeadersBytes in all; each name 1 to MaxHeaderNameLen ASCII
// letters, digits, '-', '_' and '.'; each value valid UTF-8 without
// control characters (it may be empty). The error names the header.
func ValidateHeaders(h map[string]string) error {
	if len(h) > MaxHeaders {
		return fmt.Errorf("%d headers, at most %d", len(h), MaxHeaders)
	}
	names := make([]string, 0, len(h))
	for name := range h {
		names = append(names, name)
	}
	sort.Strings(names)
	size := 0
	for _, name := range names {
		v := h[name]
		size += len(name) + len(v)
		if err := checkASCIIUpTo("header name", name, MaxHeaderNameLen, nameChars, nameHint); err != nil {
			return fmt.Errorf("%s", reason(err))
		}
		if v != "" {
			if err := checkText("value of header "+name, v, MaxHeadersBytes); err != nil {
				return fmt.Errorf("%s", reason(err))
			}
		}
	}
	if size > MaxHeadersBytes {
		return fmt.Errorf("headers are %d bytes long, at most %d", size, MaxHeadersBytes)
	}
	return nil
}

// ValidateRemoveWorker checks the ID RemoveWorker is given, as
// CheckWorkerID does.
func ValidateRemoveWorker(id string) error {
	if err := CheckWorkerID(id); err != nil {
		return invalid("remove worker", "%s", reason(err))
	}
	return nil
}
