package redisstore

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/stemflow/stem/storage"
)

// createBatch caps the runs one create script handles, so a huge batch
// does not hold the server for long.
const createBatch = 128

// CreateRuns implements storage.Store.
func (s *Store) CreateRuns(ctx context.Context, runs []storage.NewRun) ([]storage.CreateResult, error) {
	if err := storage.ValidateNewRuns(runs); err != nil {
		return nil, fmt.Errorf("redisstore: %w", err)
	}
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	out := make([]storage.CreateResult, 0, len(runs))
	for chunk := range slices.Chunk(runs, createBatch) {
		keys := make([]string, len(chunk))
		args := make([]any, 0, newRunFields*len(chunk))
		for i, r := range chunk {
			keys[i] = s.keys.run(r.ID)
			args = appendNewRun(args, r)
		}
		v, err := s.run(ctx, createScript, keys, args...)
		if err != nil {
			return nil, fmt.Errorf("redisstore: create: %w", err)
		}
		list, ok := v.([]any)
		if !ok || len(list) != len(chunk) {
			return nil, fmt.Errorf("redisstore: create: unexpected reply")
		}
		if out, err = appendCreated(out, list); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// newRunFields is how many script arguments describe a new run; see
// create_run in scripts/lib/runs.lua.
const newRunFields = 12

// appendNewRun appends the script arguments of a new run: ID, workflow,
// parent, parent policy, marked input, start time and deadline (µs, ""
// for none), queue, partition, priority and workflow version ("" for the
// defaults), and headers (encodeHeaders, "" for none).
func appendNewRun(args []any, r storage.NewRun) []any {
	return append(args, r.ID, r.Workflow, r.ParentID, string(r.ParentPolicy), mark(r.Input),
		microsPtr(r.StartAt), microsPtr(r.Deadline), r.Queue, r.Partition, nonZero(r.Priority), nonZero(r.Version),
		encodeHeaders(r.Headers))
}

// nonZero formats n for a script argument whose default is 0: "" for 0.
func nonZero(n int) string {
	if n == 0 {
		return ""
	}
	return strconv.Itoa(n)
}

// appendCreated appends the results create_run replied, {created,
// HGETALL of the run hash} each.
func appendCreated(out []storage.CreateResult, list []any) ([]storage.CreateResult, error) {
	for _, item := range list {
		pair, ok := item.([]any)
		if !ok || len(pair) != 2 {
			return nil, fmt.Errorf("redisstore: create: unexpected reply")
		}
		m, err := pairsToMap(pair[1])
		if err != nil {
			return nil, err
		}
		rec, err := decodeRun(m)
		if err != nil {
			return nil, err
		}
		created, _ := pair[0].(int64)
		out = append(out, storage.CreateResult{Created: created == 1, Run: rec})
	}
	return out, nil
}

// GetRun implements storage.Store.
func (s *Store) GetRun(ctx context.Context, id string) (storage.RunRecord, error) {
	if err := s.checkOpen(); err != nil {
		return storage.RunRecord{}, err
	}
	m, err := s.client.HGetAll(ctx, s.keys.run(id)).Result()
	if err != nil {
		return storage.RunRecord{}, fmt.Errorf("redisstore: get %q: %w", id, s.wrapErr(err))
	}
	if len(m) == 0 {
		return storage.RunRecord{}, fmt.Errorf("redisstore: get %q: %w", id, storage.ErrRunNotFound)
	}
	return decodeRun(m)
}

// ListRuns implements storage.Store. It reads the lexicographic index that
// matches the filter, so a page costs its size, never a scan; with a
// parent filter, the parent's children index, which the script filters by
// workflow, status and queue (a scan of that parent's children only). A
// queue's own indexes serve a queue filter, with the workflow filter
// applied by the script; the default queue has none, so a filter on it is
// applied to the index of the others (see keyspace.listing). No index
// serves a Versions filter: the script applies it to what it reads.
func (s *Store) ListRuns(ctx context.Context, q storage.ListRunsQuery) (storage.RunPage, error) {
	if err := q.Validate(); err != nil {
		return storage.RunPage{}, fmt.Errorf("redisstore: %w", err)
	}
	if err := s.checkOpen(); err != nil {
		return storage.RunPage{}, err
	}
	limit := q.PageSize()
	start := "-"
	if q.After != "" {
		start = "(" + q.After
	}
	index, wf, st, queue := s.keys.listing(q)
	versions := ""
	if len(q.Versions) > 0 {
		var b strings.Builder
		b.WriteByte(',')
		for _, v := range q.Versions {
			b.WriteString(strconv.Itoa(v))
			b.WriteByte(',')
		}
		versions = b.String()
	}
	v, err := s.run(ctx, listScript, []string{index}, start, limit+1, wf, st, queue, versions)
	if err != nil {
		return storage.RunPage{}, fmt.Errorf("redisstore: list: %w", err)
	}
	list, ok := v.([]any)
	if !ok {
		return storage.RunPage{}, fmt.Errorf("redisstore: list: unexpected reply")
	}
	var page storage.RunPage
	for _, item := range list {
		m, err := pairsToMap(item)
		if err != nil {
			return storage.RunPage{}, err
		}
		rec, err := decodeRun(m)
		if err != nil {
			return storage.RunPage{}, err
		}
		page.Runs = append(page.Runs, rec)
	}
	if len(page.Runs) > limit {
		page.Runs = page.Runs[:limit]
		page.Next = page.Runs[limit-1].ID
	}
	return page, nil
}
