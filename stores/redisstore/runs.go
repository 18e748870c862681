package redisstore

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/stemflow/stem/storage"
)

// createLeasedScript creates a batch with runs to create leased; a
// batch without one runs createScript, which carries none of that code.
var createLeasedScript = newScript("createleased")

// createPolicyScript creates a batch with a run that has a start policy,
// an event or a start key (see hasPolicy); a batch without one runs
// createScript or createLeasedScript, which carry none of that code.
var createPolicyScript = newScript("createpolicy")

// findScript lists runs in creation order, top-level runs, or runs
// filtered by attributes (see find); listScript the others.
var findScript = newScript("find")

func init() { allScripts = append(allScripts, createLeasedScript, createPolicyScript, findScript) }

// createBatch caps the runs one create script handles, so a huge batch
// does not hold the server for long.
const createBatch = 128

// CreateRuns implements storage.Store. A batch with a run to create
// leased (NewRun.Lease, an eager start) runs createleased.lua, which
// leases it as a claim would (see create_leased in scripts/lib/runs.lua),
// so that an eager start costs that one call and no claim; a batch
// without one runs create.lua, which carries none of that code. A batch
// with a run that has a start policy, an event or a start key runs
// createpolicy.lua instead (see createPolicies).
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
		for i, r := range chunk {
			keys[i] = s.keys.run(r.ID)
		}
		if slices.ContainsFunc(chunk, hasPolicy) {
			var err error
			if out, err = s.createPolicies(ctx, keys, chunk, out); err != nil {
				return nil, err
			}
			continue
		}
		sc := createScript
		if slices.ContainsFunc(chunk, func(r storage.NewRun) bool { return r.Lease != nil }) {
			sc = createLeasedScript
		}
		args := appendNewRuns(make([]any, 0, newRunFields*len(chunk)), chunk)
		v, err := s.run(ctx, sc, keys, args...)
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
// new_run in scripts/lib/runs.lua.
const newRunFields = 13

// appendNewRun appends the script arguments of a new run: ID, workflow,
// parent, parent policy, marked input, start time and deadline (µs, ""
// for none), queue, partition, priority and workflow version ("" for the
// defaults), headers (encodeHeaders, "" for none) and search attributes
// (encodeAttrs, "" for none).
func appendNewRun(args []any, r storage.NewRun) []any {
	return append(args, r.ID, r.Workflow, r.ParentID, string(r.ParentPolicy), mark(r.Input),
		microsPtr(r.StartAt), microsPtr(r.Deadline), r.Queue, r.Partition, nonZero(r.Priority), nonZero(r.Version),
		encodeHeaders(r.Headers), encodeAttrs(r.Attributes))
}

// appendNewRuns appends the script arguments of runs as create_runs (in
// scripts/lib/runs.lua) reads them: each run's (appendNewRun), then for
// each run to create leased its place among them (1 for the first), its
// owner and its lease length (µs). Without such a run they are what
// create.lua reads.
func appendNewRuns(args []any, runs []storage.NewRun) []any {
	for _, r := range runs {
		args = appendNewRun(args, r)
	}
	for i, r := range runs {
		if l := r.Lease; l != nil {
			args = append(args, i+1, l.Owner, durMicros(l.For))
		}
	}
	return args
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
// matches the filter, ascending (ZRANGEBYLEX) or descending
// (ZREVRANGEBYLEX), between the bounds the cursor and the ID prefix set
// (see listBounds), so a page costs its size, never a scan: an ID prefix
// is a range of every index. With a parent filter it reads the parent's
// children index, which the script filters by workflow, status and queue
// (a scan of that parent's children only). A queue's own indexes serve a
// queue filter, with the workflow filter applied by the script; the
// default queue has none, so a filter on it is applied to the index of
// the others (see keyspace.listing). No index serves a Versions filter
// or a creation range: the script applies them to what it reads, reading
// on in batches until the page is full, so a page costs the runs they
// pass over. A listing in creation order, of top-level runs or filtered
// by search attributes runs find.lua instead (see find and doc.go).
func (s *Store) ListRuns(ctx context.Context, q storage.ListRunsQuery) (storage.RunPage, error) {
	if err := q.Validate(); err != nil {
		return storage.RunPage{}, fmt.Errorf("redisstore: %w", err)
	}
	if err := s.checkOpen(); err != nil {
		return storage.RunPage{}, err
	}
	limit := q.PageSize()
	lo, hi := listBounds(q)
	desc := ""
	if q.Descending {
		desc = "1"
	}
	index, wf, st, queue := s.keys.listing(q)
	versions := listVersions(q.Versions)
	from, to := createdRange(q)
	var v any
	var err error
	if len(q.Where) > 0 || q.TopLevel || q.Order == storage.OrderCreated {
		drivers, ok := attrDrivers(q.Where)
		if !ok {
			return storage.RunPage{}, nil
		}
		v, err = s.find(ctx, q, index, drivers, lo, hi, desc, limit+1, versions, from, to)
	} else {
		v, err = s.run(ctx, listScript, []string{index}, lo, hi, desc, limit+1, wf, st, queue, versions, from, to)
	}
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
		page.Next = q.NextCursor(&page.Runs[limit-1])
	}
	return page, nil
}

// listVersions is a Versions filter as the list scripts read it: each
// version between commas (",0,3,"), "" for any.
func listVersions(versions []int) string {
	if len(versions) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteByte(',')
	for _, v := range versions {
		b.WriteString(strconv.Itoa(v))
		b.WriteByte(',')
	}
	return b.String()
}

// createdRange is a query's creation range as the list scripts read it:
// created at or after from and before to (µs, "" for no bound).
func createdRange(q storage.ListRunsQuery) (from, to string) {
	if !q.CreatedFrom.IsZero() {
		from = strconv.FormatInt(storage.CeilMicro(q.CreatedFrom).UnixMicro(), 10)
	}
	if !q.CreatedTo.IsZero() {
		to = strconv.FormatInt(storage.CeilMicro(q.CreatedTo).UnixMicro(), 10)
	}
	return from, to
}

// find reads a page with find.lua: a listing in creation order, of
// top-level runs or filtered by attributes (see the script for how it
// chooses what to read). In ID order it walks the query's listing index
// (index); in creation order the index by creation (all runs', or the
// workflow's), and the listing index is a driver when it is neither all
// runs' nor the workflow's. drivers are the attribute filters' (see
// attrDrivers).
func (s *Store) find(ctx context.Context, q storage.ListRunsQuery, index string, drivers []any,
	lo, hi, desc string, n int, versions, from, to string) (any, error) {
	order, walk, cursorAt, cursorID := "", index, "", ""
	keys := []string{index}
	if q.Order == storage.OrderCreated {
		order = "c"
		walk = s.keys.indexCreated()
		if q.Workflow != "" {
			walk = s.keys.indexWorkflowCreated(q.Workflow)
		}
		if index != s.keys.indexAll() && index != s.keys.indexWorkflow(q.Workflow) {
			drivers = append(drivers, "x", "", lo, hi)
		}
		keys = []string{walk, index}
		if created, id, ok := q.CreatedAfter(); ok {
			cursorAt, cursorID = strconv.FormatInt(created.UnixMicro(), 10), id
		}
	}
	top := ""
	if q.TopLevel {
		top = "1"
	}
	args := make([]any, 0, 17+len(drivers)+4*len(q.Where))
	args = append(args, order, desc, n, lo, hi, cursorAt, cursorID, q.Workflow, string(q.Status), q.Queue,
		versions, from, to, top, q.ParentID, len(drivers)/4)
	args = append(args, drivers...)
	args = append(args, len(q.Where))
	for _, f := range q.Where {
		name, code, op, text, _ := attrFilter(f)
		args = append(args, name, code, op, text)
	}
	args = append(args, s.findPlan, s.findBytes)
	return s.run(ctx, findScript, keys, args...)
}

// listBounds returns the lexicographic range of IDs a listing reads
// (ListRunsQuery.IDRange), as ZRANGEBYLEX bounds. Redis compares the
// bytes, as storage.PrefixEnd does.
func listBounds(q storage.ListRunsQuery) (lo, hi string) {
	lo, hi = "-", "+"
	r := q.IDRange()
	switch {
	case r.FromIncluded:
		lo = "[" + r.From
	case r.From != "":
		lo = "(" + r.From
	}
	if r.HasTo {
		hi = "(" + r.To
	}
	return lo, hi
}

// CountRuns implements storage.Store. It reads the size of each status's
// listing index, all runs' (is:<status>) or the workflow's
// (iws:<status>:<wf>), in one script: one round trip, and O(1) per status
// whatever the number of runs.
func (s *Store) CountRuns(ctx context.Context, q storage.CountRunsQuery) (storage.RunCounts, error) {
	if err := q.Validate(); err != nil {
		return nil, fmt.Errorf("redisstore: %w", err)
	}
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	keys := make([]string, len(storage.Statuses))
	for i, st := range storage.Statuses {
		if q.Workflow != "" {
			keys[i] = s.keys.indexWorkflowStatus(st, q.Workflow)
		} else {
			keys[i] = s.keys.indexStatus(st)
		}
	}
	v, err := s.run(ctx, countScript, keys)
	if err != nil {
		return nil, fmt.Errorf("redisstore: count runs: %w", err)
	}
	list, ok := v.([]any)
	if !ok || len(list) != len(keys) {
		return nil, fmt.Errorf("redisstore: count runs: unexpected reply %v", v)
	}
	counts := storage.RunCounts{}
	for i, item := range list {
		n, ok := item.(int64)
		if !ok {
			return nil, fmt.Errorf("redisstore: count runs: unexpected reply %v", v)
		}
		if n > 0 {
			counts[storage.Statuses[i]] = n
		}
	}
	return counts, nil
}
