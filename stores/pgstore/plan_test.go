package pgstore

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stemflow/stem/storage"
)

// explain returns the plan of sql with args, in text form, read in a
// transaction that applies settings first.
func explain(t *testing.T, s *Store, settings []string, sql string, args ...any) string {
	t.Helper()
	ctx := context.Background()
	var plan []string
	err := pgx.BeginFunc(ctx, s.pool.Pool, func(tx pgx.Tx) error {
		for _, set := range settings {
			if _, err := tx.Exec(ctx, set); err != nil {
				return err
			}
		}
		rows, err := tx.Query(ctx, "EXPLAIN "+sql, args...)
		if err != nil {
			return err
		}
		plan, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	if err != nil {
		t.Fatalf("explain: %v", err)
	}
	return strings.Join(plan, "\n")
}

// TestEmitFindsCasesByIndex: among many runs, Emit finds the runs waiting
// on its topic in a further case of their wait through runs_wait_also_idx,
// and those waiting on it in the first case through runs_wait_topic_idx:
// its cost does not grow with the runs that do not wait on the topic.
func TestEmitFindsCasesByIndex(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newTestStore(t, Options{})
	runs := make([]storage.NewRun, 5000)
	for i := range runs {
		runs[i] = storage.NewRun{ID: fmt.Sprintf("r%05d", i), Workflow: "wf"}
	}
	if _, err := s.CreateRuns(ctx, runs); err != nil {
		t.Fatal(err)
	}
	claimed, err := s.Claim(ctx, storage.ClaimRequest{Owner: "w", Workflows: []string{"wf"}, Limit: 40, LeaseFor: time.Minute})
	if err != nil || len(claimed) != 40 {
		t.Fatalf("claim: %d runs, %v", len(claimed), err)
	}
	for i, c := range claimed {
		w := &storage.Wait{Key: "a@v1", Topic: fmt.Sprintf("first-%d", i), Also: []storage.WaitCase{
			{Key: "b@v1", Topic: fmt.Sprintf("second-%d", i)},
			{Key: "c@v1", Topic: fmt.Sprintf("third-%d", i%4)},
		}}
		if _, err := s.Suspend(ctx, storage.SuspendRequest{Lease: c.Lease, LeaseFor: time.Minute, Wait: w}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.pool.Exec(ctx, "ANALYZE "+s.schema+".runs"); err != nil {
		t.Fatal(err)
	}
	args := []any{nil, "third-1", []byte("x")}
	if s.notify {
		args = append(args, s.channel)
	}
	plan := explain(t, s, nil, s.q.emit, args...)
	for _, want := range []string{"runs_wait_also_idx", "runs_wait_topic_idx"} {
		if !strings.Contains(plan, want) {
			t.Errorf("emit's plan does not use %s:\n%s", want, plan)
		}
	}
	if strings.Contains(plan, "Seq Scan on runs") {
		t.Errorf("emit scans the runs:\n%s", plan)
	}
	ids, err := s.Emit(ctx, storage.EmitRequest{Topic: "third-1", Payload: []byte(`"x"`)})
	if err != nil || len(ids) != 10 {
		t.Fatalf("Emit(third-1) = %v, %v; want the 10 runs waiting on it in their third case", ids, err)
	}
}

// TestReplayReadsOneExecution: the replay's reads of checkpoints and
// attempts are bounded by the current execution in their index condition,
// not filtered out of every execution's rows, so a run continued as new
// many times replays as fast as a new one.
func TestReplayReadsOneExecution(t *testing.T) {
	t.Parallel()
	s := newTestStore(t, Options{})
	// Index scans are forced: the question is which rows they read.
	plan := explain(t, s, []string{"SET LOCAL enable_seqscan = off", "SET LOCAL enable_bitmapscan = off"}, s.q.loadReplay, "run")
	lines := strings.Split(plan, "\n")
	for _, table := range []string{"checkpoints", "attempts"} {
		found := false
		for i, line := range lines {
			if !strings.Contains(line, " on "+table+" ") {
				continue
			}
			found = true
			var cond string
			for _, next := range lines[i+1:] {
				next = strings.TrimSpace(next)
				if !strings.HasPrefix(next, "Index Cond:") && !strings.HasPrefix(next, "Filter:") {
					break
				}
				if strings.HasPrefix(next, "Index Cond:") {
					cond = next
				}
			}
			if !strings.Contains(cond, "execution") {
				t.Errorf("replay reads %s without the execution in its index condition:\n%s", table, plan)
			}
		}
		if !found {
			t.Errorf("replay's plan reads no %s:\n%s", table, plan)
		}
	}
}

// analyze runs sql with args under EXPLAIN (ANALYZE, FORMAT JSON) in a
// transaction it rolls back, so a claim analyzed claims nothing, and
// returns every node of the plan.
func analyze(t *testing.T, s *Store, sql string, args ...any) []map[string]any {
	t.Helper()
	ctx := context.Background()
	tx, err := s.pool.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	var doc []map[string]any
	if err := tx.QueryRow(ctx, "EXPLAIN (ANALYZE, FORMAT JSON) "+sql, args...).Scan(&doc); err != nil {
		t.Fatalf("explain analyze: %v", err)
	}
	var nodes []map[string]any
	var walk func(n map[string]any)
	walk = func(n map[string]any) {
		nodes = append(nodes, n)
		kids, _ := n["Plans"].([]any)
		for _, k := range kids {
			walk(k.(map[string]any))
		}
	}
	walk(doc[0]["Plan"].(map[string]any))
	return nodes
}

// rowsRead sums the rows index and sequential scans of relation returned
// and removed by their filters, over all their loops: what the plan read.
func rowsRead(nodes []map[string]any, relation string) (read float64, indexes map[string]bool) {
	indexes = make(map[string]bool)
	for _, n := range nodes {
		if n["Relation Name"] != relation || n["Node Type"] == "ModifyTable" {
			continue
		}
		if name, ok := n["Index Name"].(string); ok {
			indexes[name] = true
		} else {
			indexes[n["Node Type"].(string)] = true
		}
		loops, _ := n["Actual Loops"].(float64)
		rows, _ := n["Actual Rows"].(float64)
		removed, _ := n["Rows Removed by Filter"].(float64)
		read += (rows + removed) * loops
	}
	return read, indexes
}

// TestClaimReadsWhatItTakes: with a backlog of thousands of ready runs,
// thousands sleeping into the future at a higher priority and runs of
// other workflows and queues, the claim of the default queue walks
// runs_queue_ready_idx and runs_queue_priority_idx and reads about as
// many runs as its limit: a probe per priority level other than 0, the
// due runs it takes, never the backlog behind them or the sleepers.
// NextWake likewise reads a few entries. Both hold on a new store whose
// runs were never analyzed (no statistics, as with autovacuum off) and
// once analyzed, for the statements of one queue and of several, with
// and without a versions filter. Higher priorities come first.
func TestClaimReadsWhatItTakes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newTestStore(t, Options{})
	future := time.Now().Add(time.Hour)
	var runs []storage.NewRun
	for i := range 3000 {
		runs = append(runs,
			storage.NewRun{ID: fmt.Sprintf("ready-%05d", i), Workflow: "wf"},
			storage.NewRun{ID: fmt.Sprintf("sleeper-%05d", i), Workflow: "wf", Priority: 5, StartAt: &future},
			storage.NewRun{ID: fmt.Sprintf("other-%05d", i), Workflow: "other"},
			storage.NewRun{ID: fmt.Sprintf("elsewhere-%05d", i), Workflow: "wf", Queue: "elsewhere"})
	}
	for i := range 5 {
		runs = append(runs, storage.NewRun{ID: fmt.Sprintf("urgent-%d", i), Workflow: "wf", Priority: 2})
	}
	for i := 0; i < len(runs); i += 2000 {
		if _, err := s.CreateRuns(ctx, runs[i:min(i+2000, len(runs))]); err != nil {
			t.Fatal(err)
		}
	}
	const limit = 10
	check := func(stats string) {
		for _, c := range []struct {
			name            string
			claim, nextWake string
			queues          any
			versions        map[string][]int
		}{
			{"one queue", s.q.claimOne, s.q.nextWakeOne, storage.DefaultQueue, nil},
			{"queues", s.q.claim, s.q.nextWake, []string{storage.DefaultQueue}, nil},
			// As the runtime claims: every workflow with an entry.
			{"one queue, versions", s.q.claimOne, s.q.nextWakeOne, storage.DefaultQueue, map[string][]int{"wf": {0, 3}, "other": {0}}},
			{"queues, versions", s.q.claim, s.q.nextWake, []string{storage.DefaultQueue}, map[string][]int{"wf": {0, 3}, "other": {0}}},
		} {
			names, versions := versionArrays(c.versions)
			args := []any{nil, []string{"wf"}, limit, "w", micros(time.Minute), c.queues, names, versions}
			nodes := analyze(t, s, c.claim, args...)
			read, indexes := rowsRead(nodes, "runs")
			for _, want := range []string{"runs_queue_ready_idx", "runs_queue_priority_idx"} {
				if !indexes[want] {
					t.Errorf("%s, %s: the claim does not use %s: %v", c.name, stats, want, indexes)
				}
			}
			if indexes["Seq Scan"] {
				t.Errorf("%s, %s: the claim scans the runs: %v", c.name, stats, indexes)
			}
			// The levels' probes (priorities 2 and 5, and one finding
			// no higher level); the due runs taken at level 2 and at
			// priority 0 (at most limit each); none of the sleepers;
			// the expired leases (none); the update's lookups by ID.
			if max := float64(3 + 2*limit + limit); read > max {
				t.Errorf("%s, %s: the claim read %v rows of runs, want at most %v, whatever the backlog", c.name, stats, read, max)
				for _, n := range nodes {
					if n["Relation Name"] == "runs" {
						t.Logf("%v %v rows %v loops %v removed %v", n["Node Type"], n["Index Name"], n["Actual Rows"], n["Actual Loops"], n["Rows Removed by Filter"])
					}
				}
			}
			t.Logf("%s, %s: the claim read %v rows through %v", c.name, stats, read, indexes)

			nodes = analyze(t, s, c.nextWake, nil, []string{"wf"}, c.queues, names, versions)
			read, indexes = rowsRead(nodes, "runs")
			if !indexes["runs_queue_ready_idx"] || !indexes["runs_queue_priority_idx"] || indexes["Seq Scan"] {
				t.Errorf("%s, %s: NextWake's scans: %v", c.name, stats, indexes)
			}
			// Priority 0's first entry; the levels' probes (three) and
			// their first entries (two).
			if read > 6 {
				t.Errorf("%s, %s: NextWake read %v rows of runs, want six at most", c.name, stats, read)
			}
		}
	}
	check("no statistics")
	if _, err := s.pool.Exec(ctx, "ANALYZE "+s.schema+".runs"); err != nil {
		t.Fatal(err)
	}
	check("analyzed")

	got, err := s.Claim(ctx, storage.ClaimRequest{Owner: "w", Workflows: []string{"wf"}, Limit: limit, LeaseFor: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, c := range got {
		ids = append(ids, c.Lease.RunID)
	}
	want := []string{"urgent-0", "urgent-1", "urgent-2", "urgent-3", "urgent-4", "ready-00000", "ready-00001", "ready-00002", "ready-00003", "ready-00004"}
	if strings.Join(ids, " ") != strings.Join(want, " ") {
		t.Errorf("claimed %v, want %v", ids, want)
	}
}

// TestClaimPlannedOnce: the claim and NextWake of one queue get a
// generic plan, which the connection keeps, instead of being planned
// again on every call: planning them costs about as much as running them.
// Whatever versions filter they pass, the plan is the same one.
func TestClaimPlannedOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newTestStore(t, Options{})
	runs := make([]storage.NewRun, 500)
	for i := range runs {
		runs[i] = storage.NewRun{ID: fmt.Sprintf("r%05d", i), Workflow: "wf"}
	}
	if _, err := s.CreateRuns(ctx, runs); err != nil {
		t.Fatal(err)
	}
	conn, err := s.pool.Pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	workflows := []string{"wf", "other"}
	// Versions filters of every shape: none, a workflow's, both
	// workflows'.
	filters := []map[string][]int{nil, {"wf": {0}}, {"wf": {0, 1, 2}, "other": {}}}
	for i := range 10 {
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		names, versions := versionArrays(filters[i%len(filters)])
		if _, err := tx.Exec(ctx, s.q.claimOne, nil, workflows, 4, "w", micros(time.Minute), storage.DefaultQueue, names, versions); err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, s.q.nextWakeOne, nil, workflows, storage.DefaultQueue, names, versions); err != nil {
			t.Fatal(err)
		}
		if err := tx.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for name, sql := range map[string]string{"claim": s.q.claimOne, "NextWake": s.q.nextWakeOne} {
		var generic, custom int64
		err := conn.QueryRow(ctx, `SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE statement = $1`, sql).Scan(&generic, &custom)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if generic == 0 || custom > 5 {
			t.Errorf("%s: %d generic plans, %d custom plans; want the generic plan kept after the first five", name, generic, custom)
		}
	}
}

// TestQueueReadsByIndex: the statements of limits, QueueStats, Purge and
// the due schedules can use their indexes (scans forced to indexes: the
// question is which).
func TestQueueReadsByIndex(t *testing.T) {
	t.Parallel()
	s := newTestStore(t, Options{})
	off := []string{"SET LOCAL enable_seqscan = off"}
	for _, c := range []struct {
		name, sql, index string
		args             []any
	}{
		{"places", s.q.queuePlaces, "runs_queue_running_idx", []any{[]string{"q"}}},
		{"claimed replays", s.q.loadClaimed, "runs_queue_running_idx", []any{[]string{"q"}}},
		{"queue stats", s.q.queueStats, "runs_queue_idx", []any{nil, []string{"q"}}},
		{"purge", s.q.purge, "runs_ended_idx", []any{[]string{"complete"}, time.Now(), []string{}, []string{}, 10}},
		{"due schedules", s.q.dueSchedules, "schedules_due_idx", []any{time.Now(), 10}},
		{"starts", s.q.queueStarts, "queue_starts_idx", []any{nil, []string{"q"}, []int64{1000}}},
	} {
		if plan := explain(t, s, off, c.sql, c.args...); !strings.Contains(plan, c.index) {
			t.Errorf("%s does not use %s:\n%s", c.name, c.index, plan)
		}
	}
}

// TestQueueStatsReadsUnfinished: among thousands of finished runs of a
// queue and thousands of runs of another, QueueStats reads the queue's
// unfinished runs through runs_queue_idx and nothing else, and finds how
// long the oldest ready one has waited in the same pass, on a store whose
// runs were never analyzed and once analyzed.
func TestQueueStatsReadsUnfinished(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newTestStore(t, Options{})
	var runs []storage.NewRun
	for i := range 3000 {
		runs = append(runs,
			storage.NewRun{ID: fmt.Sprintf("done-%05d", i), Workflow: "wf", Queue: "q"},
			storage.NewRun{ID: fmt.Sprintf("elsewhere-%05d", i), Workflow: "wf", Queue: "other"})
	}
	future := time.Now().Add(time.Hour)
	const unfinished = 60
	for i := range unfinished / 2 {
		runs = append(runs,
			storage.NewRun{ID: fmt.Sprintf("ready-%05d", i), Workflow: "wf", Queue: "q", Priority: i % 3},
			storage.NewRun{ID: fmt.Sprintf("delayed-%05d", i), Workflow: "wf", Queue: "q", StartAt: &future})
	}
	for i := 0; i < len(runs); i += 2000 {
		if _, err := s.CreateRuns(ctx, runs[i:min(i+2000, len(runs))]); err != nil {
			t.Fatal(err)
		}
	}
	// The finished runs, finished as a completion leaves them; and the
	// oldest ready run, ready since a minute ago.
	if _, err := s.pool.Exec(ctx, `UPDATE `+s.schema+`.runs SET status = 'complete', ready_at = NULL, ended_at = now()
		WHERE id LIKE 'done-%'`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, `UPDATE `+s.schema+`.runs SET ready_at = now() - interval '1 minute' WHERE id = 'ready-00007'`); err != nil {
		t.Fatal(err)
	}
	check := func(stats string) {
		nodes := analyze(t, s, s.q.queueStats, nil, []string{"q"})
		read, scans := rowsRead(nodes, "runs")
		// A bitmap scan's index is named by its child node, which names
		// no relation.
		indexes := map[string]bool{}
		for _, n := range nodes {
			if name, ok := n["Index Name"].(string); ok {
				indexes[name] = true
			}
		}
		if len(indexes) != 1 || !indexes["runs_queue_idx"] || scans["Seq Scan"] {
			t.Errorf("%s: QueueStats reads the runs through %v (%v), want runs_queue_idx alone", stats, indexes, scans)
		}
		if read > unfinished {
			t.Errorf("%s: QueueStats read %v rows of runs, want the queue's %d unfinished runs at most", stats, read, unfinished)
		}
		st, err := s.QueueStats(ctx, []string{"q"})
		if err != nil {
			t.Fatal(err)
		}
		if got := st[0]; got.Ready != unfinished/2 || got.Scheduled != unfinished/2 || got.OldestReady < time.Minute || got.OldestReady > time.Minute+10*time.Second {
			t.Errorf("%s: QueueStats = %+v, want %d ready, the oldest for a minute, and %d scheduled", stats, got, unfinished/2, unfinished/2)
		}
	}
	check("no statistics")
	if _, err := s.pool.Exec(ctx, "ANALYZE "+s.schema+".runs"); err != nil {
		t.Fatal(err)
	}
	check("analyzed")
}

// TestListRunsWalksIndexes: a dashboard's listings, newest first or not,
// by workflow, status, parent, ID prefix, creation range and cursor, on a
// store with statistics, walk the ID order of an index (the one of a
// filter, or the primary key) and stop at the page's end: no sort, no
// bitmap or sequential scan of the table, the prefix's range and the
// cursor in the index condition, and no more rows read than the page
// holds, divided by the share of runs the filters left out of the index
// condition pass.
func TestListRunsWalksIndexes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newTestStore(t, Options{})
	seedListing(t, s, 5000)
	if _, err := s.pool.Exec(ctx, "ANALYZE "+s.schema+".runs"); err != nil {
		t.Fatal(err)
	}
	recent := time.Now().Add(-time.Hour)
	const (
		pkey     = "runs_pkey"
		workflow = "runs_workflow_id_idx"
		status   = "runs_status_id_idx"
		parent   = "runs_parent_idx"
	)
	for _, c := range []struct {
		name    string
		q       storage.ListRunsQuery
		indexes []string // any of these
		// read is the most rows the page may read: 51 when every
		// filter is in the index condition; of a filter that passes
		// one run in n, n times as many.
		read float64
	}{
		{"newest", storage.ListRunsQuery{Descending: true}, []string{pkey}, 51},
		{"newest past a cursor", storage.ListRunsQuery{Descending: true, After: "r-002345"}, []string{pkey}, 51},
		{"oldest past a cursor", storage.ListRunsQuery{After: "r-002345"}, []string{pkey}, 51},
		// One run in four.
		{"newest of a workflow", storage.ListRunsQuery{Descending: true, Workflow: "wf-1"}, []string{workflow, pkey}, 4 * 51},
		{"newest errored", storage.ListRunsQuery{Descending: true, Status: storage.StatusErrored, After: "r-004000"}, []string{status}, 51},
		{"newest complete", storage.ListRunsQuery{Descending: true, Status: storage.StatusComplete}, []string{status, pkey}, 2 * 51},
		// About one run in six (children included) is of wf-1 and
		// complete.
		{"newest complete of a workflow", storage.ListRunsQuery{Descending: true, Status: storage.StatusComplete, Workflow: "wf-1"}, []string{status, workflow, pkey}, 6 * 51},
		{"newest children", storage.ListRunsQuery{Descending: true, ParentID: "r-000003"}, []string{parent}, 51},
		{"a prefix", storage.ListRunsQuery{IDPrefix: "r-002"}, []string{pkey}, 51},
		{"newest of a prefix", storage.ListRunsQuery{Descending: true, IDPrefix: "r-002"}, []string{pkey}, 51},
		{"newest of a prefix past a cursor", storage.ListRunsQuery{Descending: true, IDPrefix: "r-003", After: "r-003500"}, []string{pkey}, 51},
		{"newest errored of a prefix", storage.ListRunsQuery{Descending: true, Status: storage.StatusErrored, IDPrefix: "r-00"}, []string{status}, 51},
		{"newest of a workflow and a prefix", storage.ListRunsQuery{Descending: true, Workflow: "wf-2", IDPrefix: "r-003"}, []string{workflow, pkey}, 4 * 51},
		// Every run was created in the last hour.
		{"newest created lately", storage.ListRunsQuery{Descending: true, CreatedFrom: recent}, []string{pkey}, 51},
		{"newest errored created lately", storage.ListRunsQuery{Descending: true, Status: storage.StatusErrored, CreatedFrom: recent, CreatedTo: recent.Add(2 * time.Hour)}, []string{status}, 51},
	} {
		c.q.Limit = cmp.Or(c.q.Limit, 50)
		sql, args := s.listRunsSQL(c.q)
		plan := explain(t, s, nil, sql, args...)
		walk := "Index Scan using "
		if c.q.Descending {
			walk = "Index Scan Backward using "
		}
		if !slices.ContainsFunc(c.indexes, func(index string) bool { return strings.Contains(plan, walk+index+" ") }) {
			t.Errorf("%s: the listing walks none of %v (%s):\n%s", c.name, c.indexes, strings.TrimSpace(walk), plan)
		}
		if strings.Contains(plan, "Sort") || strings.Contains(plan, "Seq Scan") || strings.Contains(plan, "Bitmap") {
			t.Errorf("%s: the listing sorts or scans the table:\n%s", c.name, plan)
		}
		var cond string
		for line := range strings.Lines(plan) {
			if strings.Contains(line, "Index Cond:") {
				cond = line
			}
		}
		if c.q.IDPrefix != "" && (!strings.Contains(cond, "id >= ") || !strings.Contains(cond, "id < ")) {
			t.Errorf("%s: the prefix's range is not in the index condition:\n%s", c.name, plan)
		}
		cursor := "id > "
		if c.q.Descending {
			cursor = "id < "
		}
		if c.q.After != "" && !strings.Contains(cond, cursor) {
			t.Errorf("%s: the cursor is not in the index condition:\n%s", c.name, plan)
		}
		if read, _ := rowsRead(analyze(t, s, sql, args...), "runs"); read > c.read {
			t.Errorf("%s: the listing read %v rows, want %v at most:\n%s", c.name, read, c.read, plan)
		}
	}
}

// TestCountRunsReadsIndexes: CountRuns of one workflow can be an
// index-only scan of runs_workflow_id_idx, which carries the status, and
// of every run one of runs_status_id_idx or of runs_workflow_id_idx
// (scans forced to indexes: the question is which, and whether they read
// the table; on pages vacuum marked all-visible an index-only scan reads
// no row, and the planner prefers it then, as BenchmarkListRuns's counts
// do, but vacuum marks none while a transaction of a test running beside
// this one may still see their old versions). Both count right.
func TestCountRunsReadsIndexes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newTestStore(t, Options{})
	seedListing(t, s, 5000)
	if _, err := s.pool.Exec(ctx, "VACUUM ANALYZE "+s.schema+".runs"); err != nil {
		t.Fatal(err)
	}
	off := []string{"SET LOCAL enable_seqscan = off", "SET LOCAL enable_bitmapscan = off"}
	if plan := explain(t, s, off, s.q.countRunsOf, "wf-1"); !strings.Contains(plan, "Index Only Scan using runs_workflow_id_idx") {
		t.Errorf("the count of a workflow's runs is not an index-only scan of runs_workflow_id_idx:\n%s", plan)
	}
	plan := explain(t, s, off, s.q.countRuns)
	if !strings.Contains(plan, "Index Only Scan using runs_status_id_idx") && !strings.Contains(plan, "Index Only Scan using runs_workflow_id_idx") {
		t.Errorf("the count of every run is not an index-only scan:\n%s", plan)
	}
	for _, c := range []struct {
		workflow string
		want     storage.RunCounts
	}{
		// The 500 children are queued, of workflow child.
		{"", storage.RunCounts{storage.StatusComplete: 4000, storage.StatusErrored: 250, storage.StatusRunning: 150,
			storage.StatusPaused: 50, storage.StatusWaiting: 50, storage.StatusQueued: 1000}},
		{"wf-1", storage.RunCounts{storage.StatusComplete: 1000, storage.StatusErrored: 50, storage.StatusRunning: 50,
			storage.StatusWaiting: 50, storage.StatusQueued: 100}},
		{"nope", storage.RunCounts{}},
	} {
		got, err := s.CountRuns(ctx, storage.CountRunsQuery{Workflow: c.workflow})
		if err != nil || !maps.Equal(got, c.want) {
			t.Errorf("CountRuns(%q) = %v, %v; want %v", c.workflow, got, err, c.want)
		}
	}
}

// TestCreateProbesRunTokens: the creation statement looks up the IDs it
// creates in run_tokens through run_tokens_pkey, reading only their
// entries, and deletes the entries it took by the same index: with tens
// of thousands of tokens kept for IDs no run has taken again, creates of
// one run and of batches, plain and leased, read a few entries whatever
// the table holds. That holds before the table is analyzed for batches of
// dozens; a batch of hundreds may then scan it, the planner pricing as
// many index probes above one scan, until statistics (autovacuum analyzes
// a table long before it grows so) tell it how many entries match. The
// creates take the tokens of the IDs they find there.
func TestCreateProbesRunTokens(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newTestStore(t, Options{})
	if _, err := s.pool.Exec(ctx, `INSERT INTO `+s.schema+`.run_tokens (id, token)
		SELECT 'gone-' || lpad(g::text, 5, '0'), 4 FROM generate_series(1, 50000) g`); err != nil {
		t.Fatal(err)
	}
	check := func(stats string, sizes []int) {
		for _, n := range sizes {
			for _, leased := range []bool{false, true} {
				runs := make([]storage.NewRun, n)
				for i := range runs {
					runs[i] = storage.NewRun{ID: fmt.Sprintf("new-%05d", i), Workflow: "wf"}
					if leased {
						runs[i].Lease = &storage.EagerLease{Owner: "w", For: time.Minute}
					}
				}
				inherited := 0
				if n > 1 {
					runs[0].ID, runs[1].ID, inherited = "gone-00001", "gone-25000", 2
				}
				sql, args := s.createArgs([]*ckptCall{{create: &createCall{runs: runs}}})
				nodes := analyze(t, s, sql, args...)
				read, indexes := rowsRead(nodes, "run_tokens")
				if indexes["Seq Scan"] {
					t.Errorf("%s, %d runs, leased %v: the creation scans run_tokens: %v", stats, n, leased, indexes)
				}
				// The entries found, and their deletion.
				if read > float64(2*inherited) {
					t.Errorf("%s, %d runs, leased %v: the creation read %v rows of run_tokens, want at most %d", stats, n, leased, read, 2*inherited)
				}
			}
		}
	}
	check("no statistics", []int{1, 50})
	if _, err := s.pool.Exec(ctx, "ANALYZE "+s.schema+".run_tokens"); err != nil {
		t.Fatal(err)
	}
	check("analyzed", []int{1, 50, 500})

	runs := []storage.NewRun{{ID: "gone-00001", Workflow: "wf"}, {ID: "fresh", Workflow: "wf"},
		{ID: "gone-25000", Workflow: "wf", Lease: &storage.EagerLease{Owner: "w", For: time.Minute}}}
	res, err := s.CreateRuns(ctx, runs)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []int64{4, 0, 5} {
		if !res[i].Created || res[i].Run.Token != want {
			t.Errorf("create of %s = %+v, want created with token %d", runs[i].ID, res[i], want)
		}
	}
	var left int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM `+s.schema+`.run_tokens`).Scan(&left); err != nil || left != 49998 {
		t.Errorf("entries left: %d, %v; want 49998, the two taken deleted", left, err)
	}
}

// TestCreatePlannedOnce: the creation statements of one run, plain and
// leased, get a generic plan, which the connection keeps, on a store whose
// run_tokens is empty and was never analyzed, as on most stores: a plan
// whose estimate grew with the runs it creates (a probe of run_tokens
// per run) would be planned again on every call, costing a single create
// more than its lookups do.
func TestCreatePlannedOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newTestStore(t, Options{})
	conn, err := s.pool.Pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	for _, leased := range []bool{false, true} {
		r := storage.NewRun{ID: "one", Workflow: "wf"}
		if leased {
			r.Lease = &storage.EagerLease{Owner: "w", For: time.Minute}
		}
		sql, args := s.createArgs([]*ckptCall{{create: &createCall{runs: []storage.NewRun{r}}}})
		for range 10 {
			tx, err := conn.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tx.Exec(ctx, sql, args...); err != nil {
				t.Fatal(err)
			}
			if err := tx.Rollback(ctx); err != nil {
				t.Fatal(err)
			}
		}
		var generic, custom int64
		if err := conn.QueryRow(ctx, `SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE statement = $1`, sql).Scan(&generic, &custom); err != nil {
			t.Fatalf("leased %v: %v", leased, err)
		}
		if generic == 0 || custom > 5 {
			t.Errorf("leased %v: %d generic plans, %d custom plans; want the generic plan kept after the first five", leased, generic, custom)
		}
	}
}

// TestReadStreamReadsRange: among the values of a run's other streams
// and of other runs' streams, ReadStream's statement reads its page as a
// range of stream_values_pkey, the run, stream and start offset in the
// index condition, no more rows than the page holds, and nothing sorted,
// before the tables are analyzed and after. ListUpdates walks
// updates_seq_idx likewise from its cursor once the table is analyzed
// (before, the planner guesses that a run has a few updates, and reads
// them all by a bitmap scan, then sorts them).
func TestReadStreamReadsRange(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newTestStore(t, Options{})
	if _, err := s.CreateRuns(ctx, []storage.NewRun{{ID: "run", Workflow: "wf"}, {ID: "other", Workflow: "wf"}}); err != nil {
		t.Fatal(err)
	}
	for _, sql := range []string{
		`INSERT INTO ` + s.schema + `.stream_values (run_id, stream, "offset", value, written_at)
			SELECT r, st, g, int8send(g), now() FROM unnest(ARRAY['run', 'other']) r, unnest(ARRAY['a', 'b', 'c']) st, generate_series(0, 4999) g`,
		`INSERT INTO ` + s.schema + `.streams (run_id, stream, length, closed, updated_at)
			SELECT r, st, 5000, false, now() FROM unnest(ARRAY['run', 'other']) r, unnest(ARRAY['a', 'b', 'c']) st`,
		// The streams of many more runs, whose values are gone (a table
		// of six rows is read whole).
		`INSERT INTO ` + s.schema + `.streams (run_id, stream, length, closed, updated_at)
			SELECT 'gone-' || g, 'a', 0, false, now() FROM generate_series(1, 3000) g`,
		`INSERT INTO ` + s.schema + `.updates (run_id, id, seq, name, state, created_at)
			SELECT r, 'u' || g, g, 'ask', 'pending', now() FROM unnest(ARRAY['run', 'other']) r, generate_series(1, 5000) g`,
	} {
		if _, err := s.pool.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	check := func(stats string, analyzed bool) {
		t.Helper()
		for _, c := range []struct {
			name, sql, table, index, cond string
			args                          []any
		}{
			{"ReadStream", s.q.readStream, "stream_values", "stream_values_pkey", `"offset" >=`, []any{"run", "b", int64(2500), 50}},
			{"ListUpdates", s.q.listUpdates, "updates", "updates_seq_idx", "seq >", []any{"run", int64(2500), 50}},
		} {
			if c.name == "ListUpdates" && !analyzed {
				continue
			}
			plan := explain(t, s, nil, c.sql, c.args...)
			if !strings.Contains(plan, "Index Scan using "+c.index+" ") {
				t.Errorf("%s, %s: the read walks no %s:\n%s", stats, c.name, c.index, plan)
			}
			if strings.Contains(plan, "Sort") || strings.Contains(plan, "Seq Scan") || strings.Contains(plan, "Bitmap") {
				t.Errorf("%s, %s: the read sorts or scans a table:\n%s", stats, c.name, plan)
			}
			found := false
			for line := range strings.Lines(plan) {
				found = found || strings.Contains(line, "Index Cond:") && strings.Contains(line, c.cond)
			}
			if !found {
				t.Errorf("%s, %s: the start is not in an index condition:\n%s", stats, c.name, plan)
			}
			if read, _ := rowsRead(analyze(t, s, c.sql, c.args...), c.table); read > 50 {
				t.Errorf("%s, %s: the read took %v rows of %s, want 50 at most:\n%s", stats, c.name, read, c.table, plan)
			}
		}
		page, err := s.ReadStream(ctx, storage.StreamQuery{RunID: "run", Stream: "b", From: 2500, Limit: 50})
		if err != nil || len(page.Values) != 50 || page.Values[0].Offset != 2500 || page.Next != 2550 || page.Length != 5000 {
			t.Fatalf("%s: ReadStream = %d values from %v, next %d, length %d, %v", stats, len(page.Values), page.Values[0].Offset, page.Next, page.Length, err)
		}
		ups, err := s.ListUpdates(ctx, storage.UpdatesQuery{RunID: "run", After: 2500, Limit: 50})
		if err != nil || len(ups) != 50 || ups[0].Seq != 2501 {
			t.Fatalf("%s: ListUpdates = %d updates, %v", stats, len(ups), err)
		}
	}
	check("no statistics", false)
	if _, err := s.pool.Exec(ctx, "ANALYZE "+s.schema+".stream_values, "+s.schema+".updates, "+s.schema+".streams"); err != nil {
		t.Fatal(err)
	}
	check("analyzed", true)
}
