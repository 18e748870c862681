package sqlitestore

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/stemflow/stem/storage"
)

// CreateRuns creates runs, keeping the start rules of storage.NewRun (its
// start key, its policies for an ID whose run exists, its event; see
// createRun). A run with a Lease is inserted running under it, as a claim
// would leave it, so that its engine needs no claim (see insertLeasedRun).
// All requests are one atomic change.
func (s *Store) CreateRuns(ctx context.Context, runs []storage.NewRun) ([]storage.CreateResult, error) {
	if err := storage.ValidateNewRuns(runs); err != nil {
		return nil, fmt.Errorf("sqlitestore: %w", err)
	}
	var out []storage.CreateResult
	err := s.write(ctx, "create runs", func(w *wtx) (err error) {
		out, err = w.createRuns(runs, s.now())
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// createRuns is CreateRuns inside the writing transaction, at now; a
// schedule's write creates its runs with it too, and CreateRunsTx in the
// application's transaction.
func (w *wtx) createRuns(runs []storage.NewRun, now time.Time) ([]storage.CreateResult, error) {
	out := make([]storage.CreateResult, 0, len(runs))
	for _, r := range runs {
		res, err := w.createRun(r, now)
		if err != nil {
			return nil, err
		}
		out = append(out, res)
	}
	return out, nil
}

// insertRun inserts a queued run, ready at ?6, unless its ID (?1) exists,
// and returns its ref and token. insertLeasedRun inserts a run leased at
// creation (NewRun.Lease) instead: running, held by ?11 until ?12, its
// token taken once and started at ?5, as claimUpdate leaves a run it
// starts, so that a claim recovers it once the lease expires and counts
// it as holding its queue's place meanwhile. A run's token starts at 0,
// or where a deleted run of its ID left it (run_tokens, see replace).
const (
	insertRun = `INSERT INTO runs (id, workflow, parent_id, parent_policy, status, ready_at, created_at, updated_at, deadline,
			queue, partition_key, priority, version, token)
		VALUES (?1, ?2, ?3, ?4, 'queued', ?6, ?5, ?5, ?7, ?8, ?9, ?10, ?11, ` + retiredToken + `)
		ON CONFLICT (id) DO NOTHING RETURNING ref, token`
	insertLeasedRun = `INSERT INTO runs (id, workflow, parent_id, parent_policy, status, created_at, updated_at, deadline,
			queue, partition_key, priority, version, owner, lease_until, token, first_claimed_at)
		VALUES (?1, ?2, ?3, ?4, 'running', ?5, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ` + retiredToken + ` + 1, ?5)
		ON CONFLICT (id) DO NOTHING RETURNING ref, token - 1`
	// retiredToken is the token a deleted run of the ID ?1 left: 0 for
	// none, the common case, read by a seek in a table that is empty but
	// for the IDs of replaced runs not yet taken again.
	retiredToken = `coalesce((SELECT token FROM run_tokens WHERE id = ?1), 0)`
)

// GetRun returns a run's record, or storage.ErrRunNotFound.
func (s *Store) GetRun(ctx context.Context, id string) (storage.RunRecord, error) {
	var rec storage.RunRecord
	err := s.read(ctx, "get run", false, func(c *conn) error {
		var found bool
		var err error
		rec, found, err = getRun(c, id)
		if err == nil && !found {
			err = storage.ErrRunNotFound
		}
		return err
	})
	return rec, err
}

// ListRuns returns runs ordered by ID, or by creation time then ID
// (q.Order), ascending or (q.Descending) descending, filtered by the
// query, at most q.PageSize() of them, past the cursor q.After. A page in
// ID order without attribute filters is read by listRunsQuery's
// statements, any other by listQuery's.
func (s *Store) ListRuns(ctx context.Context, q storage.ListRunsQuery) (storage.RunPage, error) {
	if err := q.Validate(); err != nil {
		return storage.RunPage{}, fmt.Errorf("sqlitestore: %w", err)
	}
	if slices.ContainsFunc(q.Where, matchesNone) {
		return storage.RunPage{}, nil
	}
	limit := q.PageSize()
	// A statement is kept prepared on each read connection, but those of
	// several attribute filters, whose shapes multiply.
	run := (*conn).query
	if len(q.Where) > 1 {
		run = (*conn).queryOnce
	}
	var page storage.RunPage
	err := s.read(ctx, "list runs", false, func(c *conn) error {
		page = storage.RunPage{}
		var query string
		var args []any
		switch {
		case q.Order == storage.OrderID && len(q.Where) == 0:
			var lo, hi any
			query, lo, hi = listRunsQuery(q)
			args = []any{lo, limit + 1, q.Workflow, string(q.Status), q.ParentID, q.Queue, versionList(q.Versions),
				hi, nanos(q.CreatedFrom), nanos(q.CreatedTo)}
		case len(q.Where) == 0 && q.ParentID == "" && q.Status != "":
			few, err := fewOfStatus(c, q, limit)
			if err != nil {
				return err
			}
			query, args = listQuery(q, limit+1, few)
		default:
			query, args = listQuery(q, limit+1, false)
		}
		return run(c, query, func(r row) error {
			rec, err := scanRun(r)
			page.Runs = append(page.Runs, rec)
			return err
		}, args...)
	})
	if err != nil {
		return storage.RunPage{}, err
	}
	if len(page.Runs) > limit {
		page.Runs = page.Runs[:limit]
		page.Next = q.NextCursor(&page.Runs[limit-1])
	}
	return page, nil
}

// listRunsQuery returns the statement that lists q's page, one per
// combination of filters, so that each reads through its index, and the
// bounds of the range of IDs it reads: lo (?1) and hi (?8), the cursor and
// the ID prefix folded into one bound on each side, so that the index's
// range starts at the nearer one (SQLite seeks by one bound of a side and
// would only check the other, passing over the runs between them).
// Ascending, lo is the cursor (r.id > ?1, "" when none) or, when the
// prefix starts past it, the prefix itself (r.id >= ?1); descending, hi is
// the cursor or the end of the prefix's range, the lesser (r.id < ?8),
// and lo the prefix (r.id >= ?1). A bound the query lacks is left out.
func listRunsQuery(q storage.ListRunsQuery) (query string, lo, hi any) {
	var where []string
	b := q.IDRange()
	switch {
	case b.FromIncluded:
		where, lo = append(where, `r.id >= ?1`), b.From
	case !q.Descending:
		where, lo = append(where, `r.id > ?1`), b.From
	}
	if b.HasTo {
		where, hi = append(where, `r.id < ?8`), b.To
	}
	if q.Workflow != "" {
		where = append(where, `r.workflow = ?3`)
	}
	if q.Status != "" {
		where = append(where, `r.status = ?4`)
	}
	if q.ParentID != "" {
		where = append(where, `r.parent_id = ?5`)
	}
	if q.TopLevel {
		// runs_parent holds the runs of no parent in ID order too.
		where = append(where, `r.parent_id = ''`)
	}
	if len(q.Versions) > 0 {
		where = append(where, `r.version IN (SELECT value FROM json_each(?7))`)
	}
	switch q.Queue {
	case "":
	case storage.DefaultQueue:
		where = append(where, `r.queue = ?6`)
	default:
		// Stated so that the plan may use runs_queue, which holds the
		// runs of every queue but the default.
		where = append(where, `r.queue = ?6 AND r.queue <> 'default'`)
	}
	// The creation range filters the runs the ID order reaches: no index
	// keeps runs by creation time.
	if !q.CreatedFrom.IsZero() {
		where = append(where, `r.created_at >= ?9`)
	}
	if !q.CreatedTo.IsZero() {
		where = append(where, `r.created_at < ?10`)
	}
	order := `r.id`
	if q.Descending {
		order = `r.id DESC`
	}
	query = `SELECT ` + runCols + ` FROM ` + runFrom
	if len(where) > 0 {
		query += ` WHERE ` + strings.Join(where, ` AND `)
	}
	return query + ` ORDER BY ` + order + ` LIMIT ?2`, lo, hi
}

// listQuery returns the statement that lists q's page of limit runs, and
// its arguments, for a query in creation order or with attribute filters
// (listRunsQuery's serve the others). An inner query picks the page's
// runs, in its order, where an index has it:
//
//   - With attribute filters, from the first filter's index of run_attrs
//     (by name, value, creation time and ID): an equality is one range of
//     it in creation order, read up to the page's end, no sort; a range
//     or a prefix reads the range of its values, whose runs are sorted,
//     and so are the filter's runs in ID order. A further filter of the
//     same name and type bounds the range read (total>=100 total<200 is
//     one range); each other is a seek of run_attrs by run and name.
//   - Of one parent in creation order, from runs_parent: the parent's
//     children, sorted.
//   - Of a status few runs have (fewStatus, see fewOfStatus), from
//     runs_status: its runs, sorted.
//   - Otherwise in creation order, from runs_workflow_created for one
//     workflow, runs_created for all, newest or oldest first up to the
//     page's end, the cursor and the creation range bounding the range
//     read.
//
// Every other filter is judged on the runs read, whose rows the inner
// query reads only when one needs them. The outer query reads the page's
// columns (their data, execution and attributes) for the page alone, in
// the inner query's order, which SQLite keeps without sorting again: a
// sort, when there is one, holds a ref, a time and an ID per run.
func listQuery(q storage.ListRunsQuery, limit int, fewStatus bool) (string, []any) {
	var p params
	var where []string
	// The inner query's tables, and its columns: the run's ref and the
	// order's creation time and ID.
	var from, ref, created, id string
	byAttr := len(q.Where) > 0
	switch {
	case byAttr:
		f := q.Where[0]
		from = `run_attrs a INDEXED BY ` + attrIndex(f.Value.Type)
		where = append(where, `a.name = `+p.add(f.Value.Name)+` AND `+attrCond("a", f, &p))
		ref, created, id = `a.run_ref`, `a.created_us`, `a.run_id`
	default:
		ref, created, id = `r.ref`, `r.created_us`, `r.id`
		switch {
		case q.ParentID != "":
			from = `runs r INDEXED BY runs_parent`
		case q.Status != "" && fewStatus:
			from = `runs r INDEXED BY runs_status`
		case q.Workflow != "":
			from = `runs r INDEXED BY runs_workflow_created`
		default:
			from = `runs r INDEXED BY runs_created`
		}
	}
	after := ` > ` // past the cursor
	if q.Descending {
		after = ` < `
	}
	if q.Order == storage.OrderCreated {
		if at, atID, ok := q.CreatedAfter(); ok {
			where = append(where, `(`+created+`, `+id+`)`+after+`(`+
				p.add(at.Truncate(time.Microsecond).UnixMicro())+`, `+p.add(atID)+`)`)
		}
		// The creation range bounds the microseconds read too, so that
		// an index in creation order is read over that range alone.
		if !q.CreatedFrom.IsZero() {
			where = append(where, created+` >= `+p.add(q.CreatedFrom.Truncate(time.Microsecond).UnixMicro()))
		}
		if !q.CreatedTo.IsZero() {
			// Before CreatedTo: up to its microsecond, or before it when
			// it is a whole one.
			to := q.CreatedTo.Truncate(time.Microsecond)
			op := ` <= `
			if to.Equal(q.CreatedTo) {
				op = ` < `
			}
			where = append(where, created+op+p.add(to.UnixMicro()))
		}
	}
	if b := q.IDRange(); b.From != "" || b.HasTo {
		if b.From != "" {
			op := ` > `
			if b.FromIncluded {
				op = ` >= `
			}
			where = append(where, id+op+p.add(b.From))
		}
		if b.HasTo {
			where = append(where, id+` < `+p.add(b.To))
		}
	}
	for _, f := range q.Where[min(1, len(q.Where)):] {
		if f.Value.Name == q.Where[0].Value.Name && f.Value.Type == q.Where[0].Value.Type {
			// The same row as the first filter's, a run having one
			// value of a name: a bound of the range read.
			where = append(where, attrCond("a", f, &p))
			continue
		}
		// A scalar subquery, a seek of run_attrs by run and name, which
		// SQLite does not turn into a join reading the filter's index
		// (as it may an EXISTS); NULL, so false, when the run does not
		// have the attribute.
		where = append(where, `(SELECT `+attrCond("x", f, &p)+` FROM run_attrs x WHERE x.run_ref = `+ref+
			` AND x.name = `+p.add(f.Value.Name)+`)`)
	}
	// The filters on the run's row.
	var onRun []string
	if q.Workflow != "" {
		onRun = append(onRun, `r.workflow = `+p.add(q.Workflow))
	}
	if q.Status != "" {
		onRun = append(onRun, `r.status = `+p.add(string(q.Status)))
	}
	if q.ParentID != "" {
		onRun = append(onRun, `r.parent_id = `+p.add(q.ParentID))
	}
	if q.TopLevel {
		onRun = append(onRun, `r.parent_id = ''`)
	}
	if q.Queue != "" {
		onRun = append(onRun, `r.queue = `+p.add(q.Queue))
	}
	if len(q.Versions) > 0 {
		onRun = append(onRun, `r.version IN (SELECT value FROM json_each(`+p.add(versionList(q.Versions))+`))`)
	}
	if !q.CreatedFrom.IsZero() {
		onRun = append(onRun, `r.created_at >= `+p.add(q.CreatedFrom.UnixNano()))
	}
	if !q.CreatedTo.IsZero() {
		onRun = append(onRun, `r.created_at < `+p.add(q.CreatedTo.UnixNano()))
	}
	if byAttr && len(onRun) > 0 {
		// CROSS JOIN keeps run_attrs the outer loop: the plan does not
		// rest on statistics SQLite does not have.
		from += ` CROSS JOIN runs r ON r.ref = a.run_ref`
	}
	where = append(where, onRun...)
	dir := ``
	if q.Descending {
		dir = ` DESC`
	}
	inner := `SELECT ` + ref + ` AS ref, ` + created + ` AS created, ` + id + ` AS id FROM ` + from
	if len(where) > 0 {
		inner += ` WHERE ` + strings.Join(where, ` AND `)
	}
	order := `id` + dir
	if q.Order == storage.OrderCreated {
		order = `created` + dir + `, id` + dir
	}
	inner += ` ORDER BY ` + order + ` LIMIT ` + p.add(limit)
	return `SELECT ` + runCols + ` FROM (` + inner + `) p CROSS JOIN runs r ON r.ref = p.ref ` + runJoins +
		` ORDER BY p.` + strings.ReplaceAll(order, `, id`, `, p.id`), p.args
}

// fewOfStatus judges, from run_counts, whether the runs of q's status (of
// its workflow, if any) are few enough that a page in creation order is
// cheaper read from runs_status and sorted than found by walking the
// runs in creation order (runs_created, or runs_workflow_created) and
// passing over the others: the walk reads about limit*N/m entries for m
// runs of the status among N, if they are spread evenly, and all N when
// they are not, the sort m. It is few below the square root of limit*N,
// and always up to fewStatusRuns.
func fewOfStatus(c *conn, q storage.ListRunsQuery, limit int) (bool, error) {
	var m, n float64
	_, err := c.queryRow(statusCountQuery, func(r row) { m, n = float64(r.int64(0)), float64(r.int64(1)) }, string(q.Status), q.Workflow)
	return m <= fewStatusRuns || m*m <= float64(limit)*n, err
}

// fewStatusRuns is how many runs of a status a listing in creation order
// always sorts rather than walks the runs for: sorted, a few milliseconds.
const fewStatusRuns = 10_000

// statusCountQuery counts the runs of status ?1 and all the runs, of
// workflow ?2 (empty: of every one).
const statusCountQuery = `SELECT coalesce(sum(n) FILTER (WHERE status = ?1), 0), coalesce(sum(n), 0)
	FROM run_counts WHERE ?2 = '' OR workflow = ?2`

// CountRuns counts the runs in each status, of every workflow or of
// q.Workflow, from run_counts (migration 007): a row per workflow and
// status, whatever the number of runs.
func (s *Store) CountRuns(ctx context.Context, q storage.CountRunsQuery) (storage.RunCounts, error) {
	if err := q.Validate(); err != nil {
		return nil, fmt.Errorf("sqlitestore: %w", err)
	}
	query, args := countAllQuery, []any(nil)
	if q.Workflow != "" {
		query, args = countWorkflowQuery, []any{q.Workflow}
	}
	var counts storage.RunCounts
	err := s.read(ctx, "count runs", false, func(c *conn) error {
		counts = storage.RunCounts{}
		return c.query(query, func(r row) error {
			counts[storage.RunStatus(r.str(0))] += r.int64(1)
			return nil
		}, args...)
	})
	if err != nil {
		return nil, err
	}
	return counts, nil
}

// countAllQuery reads the counts of every workflow, which CountRuns adds
// up by status; countWorkflowQuery those of workflow ?1, by its primary
// key. A count that has fallen to 0 is left out.
const (
	countAllQuery      = `SELECT status, n FROM run_counts WHERE n > 0`
	countWorkflowQuery = `SELECT status, n FROM run_counts WHERE workflow = ?1 AND n > 0`
)

// versionList is a Versions filter of ListRuns as a JSON list, nil for
// none.
func versionList(versions []int) any {
	if len(versions) == 0 {
		return nil
	}
	b, _ := json.Marshal(versions) // ints only: cannot fail
	return string(b)
}

// runCols are the columns scanRun reads, from runFrom.
const runCols = `r.id, r.workflow, r.parent_id, r.status, d.input, d.output, d.error_message, d.error_code,
	r.pause_requested, r.ready_at, r.wait_key, r.wait_topic, r.wait_kind, r.wait_deadline, r.wait_also,
	r.owner, r.lease_until, r.token, r.recoveries, r.created_at, r.updated_at,
	r.parent_policy, r.execution, e.started_at, e.ended_at, r.active_key, r.active_attempt, r.active_started,
	r.deadline, d.progress, r.queue, r.partition_key, r.priority, r.version, d.headers, r.hold, r.cancel_reason,
	` + attrsCol

// runFrom joins a run's state, its data and its current execution;
// runJoins joins the last two to runs r.
const (
	runFrom  = `runs r ` + runJoins
	runJoins = `JOIN run_data d ON d.ref = r.ref JOIN executions e ON e.run_ref = r.ref AND e.number = r.execution`
)

func scanRun(r row) (storage.RunRecord, error) {
	wait, err := scanWait(r, 10)
	rec := storage.RunRecord{
		ID:             r.str(0),
		Workflow:       r.str(1),
		ParentID:       r.str(2),
		Status:         storage.RunStatus(r.str(3)),
		Input:          r.bytes(4),
		Output:         r.bytes(5),
		Error:          r.errorInfo(6),
		PauseRequested: r.int64(8) != 0,
		ReadyAt:        r.timePtr(9),
		Wait:           wait,
		Owner:          r.str(15),
		LeaseUntil:     r.time(16),
		Token:          r.int64(17),
		Recoveries:     int(r.int64(18)),
		CreatedAt:      r.time(19),
		UpdatedAt:      r.time(20),
		ParentPolicy:   storage.ParentPolicy(r.str(21)),
		Execution:      int(r.int64(22)),
		StartedAt:      r.time(23),
		EndedAt:        r.timePtr(24),
		Deadline:       r.timePtr(28),
		Progress:       r.bytes(29),
		Queue:          r.str(30),
		Partition:      r.str(31),
		Priority:       int(r.int64(32)),
		Version:        int(r.int64(33)),
	}
	if !r.isNull(25) {
		rec.Active = &storage.ActiveStep{Key: r.str(25), Attempt: int(r.int64(26)), Started: r.time(27)}
	}
	if err == nil {
		rec.Headers, err = decodeHeaders(r, 34)
	}
	if err == nil {
		rec.Hold, err = decodeHold(r, 35)
	}
	rec.CancelRequested, rec.CancelReason = scanCancel(r, 36)
	if err == nil {
		rec.Attributes, err = decodeAttrs(r, 37)
	}
	if err != nil {
		err = fmt.Errorf("run %q: %w", rec.ID, err)
	}
	return rec, err
}

// encodeHeaders returns the headers column for a run's headers: a JSON
// object, NULL for none (nil and empty are the same). Names and values are
// valid UTF-8 (storage.ValidateHeaders), which JSON keeps byte for byte.
func encodeHeaders(h map[string]string) any {
	if len(h) == 0 {
		return nil
	}
	b, _ := json.Marshal(h) // strings only: cannot fail
	return string(b)
}

// decodeHeaders reads the headers column at i: nil when NULL.
func decodeHeaders(r row, i int) (map[string]string, error) {
	if r.isNull(i) {
		return nil, nil
	}
	var h map[string]string
	if err := json.Unmarshal(r.bytes(i), &h); err != nil {
		return nil, fmt.Errorf("stored headers: %w", err)
	}
	if len(h) == 0 {
		return nil, nil
	}
	return h, nil
}

// scanCancel reads the cancel_reason column at i: whether a cancellation
// was requested (the column is not NULL), and its reason.
func scanCancel(r row, i int) (requested bool, reason string) {
	if r.isNull(i) {
		return false, ""
	}
	return true, r.str(i)
}

// encodeHold returns the hold column for a run's hold: a JSON object,
// NULL for none. A hold JSON cannot encode (its Since outside the years
// 0 to 9999) is ErrInvalidArgument.
func encodeHold(h *storage.Hold) (any, error) {
	if h == nil {
		return nil, nil
	}
	b, err := json.Marshal(h)
	if err != nil {
		return nil, fmt.Errorf("hold: %w: %v", storage.ErrInvalidArgument, err)
	}
	return string(b), nil
}

// decodeHold reads the hold column at i: nil when NULL.
func decodeHold(r row, i int) (*storage.Hold, error) {
	if r.isNull(i) {
		return nil, nil
	}
	var h storage.Hold
	if err := json.Unmarshal(r.bytes(i), &h); err != nil {
		return nil, fmt.Errorf("stored hold: %w", err)
	}
	return &h, nil
}

// waitCols are the columns scanWait reads, from runs.
const waitCols = `wait_key, wait_topic, wait_kind, wait_deadline, wait_also`

// scanWait reads waitCols from i on: nil when the run has no wait.
func scanWait(r row, i int) (*storage.Wait, error) {
	if r.isNull(i) {
		return nil, nil
	}
	also, err := decodeCases(r, i+4)
	return &storage.Wait{
		Key:      r.str(i),
		Topic:    r.str(i + 1),
		Kind:     storage.CheckpointKind(r.str(i + 2)),
		Deadline: r.timePtr(i + 3),
		Also:     also,
	}, err
}

// storedCase is a case of Wait.Also as wait_also holds it; the trigger
// runs_wait_also (migration 003) reads its topic.
type storedCase struct {
	Key   string `json:"key"`
	Topic string `json:"topic"`
	Kind  string `json:"kind,omitempty"`
}

// encodeCases returns wait_also for a wait's further cases: NULL for none.
func encodeCases(also []storage.WaitCase) any {
	if len(also) == 0 {
		return nil
	}
	cs := make([]storedCase, len(also))
	for i, c := range also {
		cs[i] = storedCase{Key: c.Key, Topic: c.Topic, Kind: string(c.Kind)}
	}
	b, _ := json.Marshal(cs) // strings only: cannot fail
	return string(b)
}

// decodeCases reads the wait_also column at i: nil when NULL.
func decodeCases(r row, i int) ([]storage.WaitCase, error) {
	if r.isNull(i) {
		return nil, nil
	}
	var cs []storedCase
	if err := json.Unmarshal(r.bytes(i), &cs); err != nil {
		return nil, fmt.Errorf("stored wait cases: %w", err)
	}
	also := make([]storage.WaitCase, len(cs))
	for i, c := range cs {
		also[i] = storage.WaitCase{Key: c.Key, Topic: c.Topic, Kind: storage.CheckpointKind(c.Kind)}
	}
	return also, nil
}

// waitArgs returns the values of wait_key, wait_topic, wait_kind,
// wait_deadline and wait_also that register wt (nil: none).
func waitArgs(wt *storage.Wait) (key, topic, kind, deadline, also any) {
	if wt == nil {
		return nil, nil, nil, nil, nil
	}
	return wt.Key, wt.Topic, string(wt.Kind), nanosPtr(wt.Deadline), encodeCases(wt.Also)
}

// clearWait is the SQL assignment that removes a run's wait, every case of
// it: assigning wait_also keeps wait_topics in step (the trigger
// runs_wait_also).
const clearWait = `wait_key = NULL, wait_topic = NULL, wait_kind = NULL, wait_deadline = NULL, wait_also = NULL`

func getRun(c *conn, id string) (storage.RunRecord, bool, error) {
	var rec storage.RunRecord
	var scanErr error
	found, err := c.queryRow(`SELECT `+runCols+` FROM `+runFrom+` WHERE r.id = ?1`, func(r row) { rec, scanErr = scanRun(r) }, id)
	if err == nil {
		err = scanErr
	}
	return rec, found, err
}
