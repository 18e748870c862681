package redisstore

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/stemflow/stem/storage"
)

// The scripts of worker records: a put that drops the expired records
// first, a removal, and a listing that drops the expired records as it
// goes.
var (
	putWorkerScript    = newScript("putworker")
	removeWorkerScript = newScript("removeworker")
	listWorkersScript  = newScript("listworkers")
)

func init() {
	allScripts = append(allScripts, putWorkerScript, removeWorkerScript, listWorkersScript)
}

// workers is the hash of worker ID → record (wr): heartbeat \n expiry \n
// the rest as JSON (workerEntry), the times in µs, set by putworker.lua.
func (k keyspace) workers() string { return k.prefix + "wr" }

// workerExpiry is the sorted set of worker IDs by the expiry of their
// records in µs (wx), by which the scripts find the expired ones.
func (k keyspace) workerExpiry() string { return k.prefix + "wx" }

// workerEntry is how a worker record is stored, as JSON after the
// heartbeat and expiry the script stamps (see keyspace.workers); the
// start time is in µs since the epoch, as every stored time.
type workerEntry struct {
	Host      string   `json:"h,omitempty"`
	PID       int      `json:"p,omitempty"`
	StartedAt int64    `json:"s"`
	Queues    []string `json:"q,omitempty"`
	Workflows []string `json:"w,omitempty"`
	InFlight  int      `json:"n,omitempty"`
	KeyIDs    []string `json:"k,omitempty"`
	Missing   []string `json:"m,omitempty"`
}

// PutWorker implements storage.Store: one script drops the expired
// records and writes the worker's, stamped with the store's clock.
func (s *Store) PutWorker(ctx context.Context, req storage.PutWorkerRequest) error {
	if err := req.Validate(); err != nil {
		return fmt.Errorf("redisstore: %w", err)
	}
	w := req.Worker
	b, err := json.Marshal(workerEntry{
		Host: w.Host, PID: w.PID, StartedAt: w.StartedAt.UnixMicro(),
		Queues: w.Queues, Workflows: w.Workflows, InFlight: w.InFlight,
		KeyIDs: w.KeyIDs, Missing: w.MissingKeyIDs,
	})
	if err != nil {
		return fmt.Errorf("redisstore: encoding worker %q: %w", w.ID, err)
	}
	keys := []string{s.keys.workers(), s.keys.workerExpiry()}
	if _, err := s.run(ctx, putWorkerScript, keys, w.ID, durMicros(req.TTL), string(b)); err != nil {
		return fmt.Errorf("redisstore: put worker %q: %w", w.ID, err)
	}
	return nil
}

// RemoveWorker implements storage.Store.
func (s *Store) RemoveWorker(ctx context.Context, id string) error {
	if err := storage.ValidateRemoveWorker(id); err != nil {
		return fmt.Errorf("redisstore: %w", err)
	}
	keys := []string{s.keys.workers(), s.keys.workerExpiry()}
	if _, err := s.run(ctx, removeWorkerScript, keys, id); err != nil {
		return fmt.Errorf("redisstore: remove worker %q: %w", id, err)
	}
	return nil
}

// ListWorkers implements storage.Store: one script drops the expired
// records and returns the others, which are sorted here by ID.
func (s *Store) ListWorkers(ctx context.Context) ([]storage.Worker, error) {
	v, err := s.run(ctx, listWorkersScript, []string{s.keys.workers(), s.keys.workerExpiry()})
	if err != nil {
		return nil, fmt.Errorf("redisstore: list workers: %w", err)
	}
	m, err := pairsToMap(v)
	if err != nil {
		return nil, fmt.Errorf("redisstore: list workers: %w", err)
	}
	out := make([]storage.Worker, 0, len(m))
	for id, rec := range m {
		w, err := decodeWorker(id, rec)
		if err != nil {
			return nil, err
		}
		out = append(out, w)
	}
	slices.SortFunc(out, func(a, b storage.Worker) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// decodeWorker reads a worker record as putworker.lua stores it.
func decodeWorker(id, rec string) (storage.Worker, error) {
	w := storage.Worker{ID: id}
	bad := func(err error) (storage.Worker, error) {
		return w, fmt.Errorf("redisstore: bad stored worker %q: %w", id, err)
	}
	parts := strings.SplitN(rec, "\n", 3)
	if len(parts) != 3 {
		return bad(fmt.Errorf("%d fields", len(parts)))
	}
	var err error
	if w.Heartbeat, err = fromMicros(parts[0]); err != nil {
		return bad(err)
	}
	if w.ExpiresAt, err = fromMicros(parts[1]); err != nil {
		return bad(err)
	}
	var e workerEntry
	if err := json.Unmarshal([]byte(parts[2]), &e); err != nil {
		return bad(err)
	}
	w.Host, w.PID, w.InFlight = e.Host, e.PID, e.InFlight
	w.StartedAt = time.UnixMicro(e.StartedAt).UTC()
	w.Queues, w.Workflows = e.Queues, e.Workflows
	w.KeyIDs, w.MissingKeyIDs = e.KeyIDs, e.Missing
	return w, nil
}
