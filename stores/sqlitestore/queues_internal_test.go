package sqlitestore

import (
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stemflow/stem/storage"
)

// A database written by schema version 3 is upgraded in place: its runs
// are on the default queue at priority 0, a finished one is found by Purge
// by the end of its execution, a run that was claimed is no start for a
// rate, and the catalog's workflows have no queue or retention.
func TestMigrateFromVersion3(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := openAtVersion(t, filepath.Join(t.TempDir(), "stem.db"), 3)
	defer s.Close()
	now := time.Now()
	n, ended := now.UnixNano(), now.Add(-time.Hour).UnixNano()
	migrateSeeded(t, ctx, s, []seedRow{
		{`INSERT INTO runs (ref, id, workflow, status, ready_at, created_at, updated_at) VALUES (1, 'queued', 'wf', 'queued', ?1, ?1, ?1)`, []any{n}},
		{`INSERT INTO runs (ref, id, workflow, status, owner, token, lease_until, created_at, updated_at)
			VALUES (2, 'running', 'wf', 'running', 'w', 1, ?1, ?1, ?1)`, []any{n + int64(time.Hour)}},
		{`INSERT INTO runs (ref, id, workflow, status, token, created_at, updated_at) VALUES (3, 'done', 'wf', 'complete', 1, ?1, ?1)`, []any{ended}},
		{`INSERT INTO runs (ref, id, workflow, status, token, ready_at, created_at, updated_at)
			VALUES (4, 'asleep', 'wf', 'waiting', 1, ?1, ?2, ?2)`, []any{n - 1, ended}},
		{`INSERT INTO run_data (ref) VALUES (1), (2), (3), (4)`, nil},
		{`INSERT INTO executions (run_ref, number, started_at, ended_at, status) VALUES (1, 1, ?1, NULL, NULL), (2, 1, ?1, NULL, NULL),
			(3, 1, ?2, ?2, 'complete'), (4, 1, ?2, NULL, NULL)`, []any{n, ended}},
		{`INSERT INTO workflow_types (name, version, worker) VALUES ('wf', 1, 'w')`, nil},
	})

	rec, err := s.GetRun(ctx, "queued")
	if err != nil || rec.Queue != storage.DefaultQueue || rec.Priority != 0 || rec.Partition != "" {
		t.Fatalf("GetRun(queued) = %+v, %v", rec, err)
	}
	// The queued run has been ready since the test's now, on the
	// system clock the store reads too.
	stats, err := s.QueueStats(ctx, []string{storage.DefaultQueue})
	if err != nil || len(stats) != 1 || stats[0].OldestReady < 0 || stats[0].OldestReady > time.Since(now) {
		t.Fatalf("QueueStats = %+v, %v; want the queued run ready since %v", stats, err, now)
	}
	stats[0].OldestReady = 0
	if !slices.Equal(stats, []storage.QueueStats{{Queue: storage.DefaultQueue, Ready: 1, Running: 1, Waiting: 1}}) {
		t.Fatalf("QueueStats = %+v", stats)
	}
	// One start left in the window: the sleeper resuming is none.
	q := storage.Queue{Name: storage.DefaultQueue, Rate: 1, RatePeriod: time.Hour}
	got, err := s.Claim(ctx, storage.ClaimRequest{Owner: "w", Workflows: []string{"wf"}, Limit: 10, LeaseFor: time.Minute, Queues: []storage.Queue{q}})
	if err != nil || len(got) != 2 {
		t.Fatalf("Claim = %+v, %v; want the queued run and the sleeper", got, err)
	}
	res, err := s.Purge(ctx, storage.PurgeRequest{FinishedBefore: now, Limit: 10})
	if err != nil || res.Runs != 1 {
		t.Fatalf("Purge = %+v, %v; want the finished run", res, err)
	}
	c, err := s.GetCatalog(ctx)
	if err != nil || len(c.Workflows) != 1 || c.Workflows[0].Queue != "" || c.Workflows[0].Retention != nil || len(c.Queues) != 0 {
		t.Fatalf("GetCatalog = %+v, %v", c, err)
	}
}

// Every statement of a claim, NextWake, QueueStats, Purge and the
// schedules' listing reads by an index. A claim's reads of runs_claim are
// ranges bounded above by now and read in index order, never sorted, so
// they stop at the claim's limit whatever the backlog: the priority is
// sought, not scanned, and no statement scans a table. A limited queue's
// places are counted from the recoveries' range of each priority, which
// holds its running runs alone, never its ready or sleeping ones.
func TestQueuePlans(t *testing.T) {
	t.Parallel()
	s := openTemp(t)
	few, many := newClaimStmts([]string{"a", "b"}, nil), newClaimStmts(manyWorkflows, nil)
	// With a versions filter: a CASE over a few workflows, JSON lists for
	// many.
	fewV, manyV := newClaimStmts([]string{"a", "b"}, fewVersions), newClaimStmts(manyWorkflows, manyVersions())
	// The default queue's index, then the other queues', whose ranges
	// start with the queue.
	const (
		defRange   = "SEARCH runs USING INDEX runs_claim (priority=? AND claim_rank=? AND "
		otherRange = "SEARCH runs USING INDEX runs_claim_queue (queue=? AND priority=? AND claim_rank=? AND "
	)
	for _, c := range []struct {
		name, query string
		want        []string
	}{
		{"claim: next priority", few.def.top, []string{"runs_claim (priority<?)"}},
		{"claim: next priority, a queue", few.other.top, []string{"runs_claim_queue (queue=? AND priority<?)"}},
		{"claim: unlimited", few.def.all, []string{defRange + "claim_at<?)"}},
		{"claim: unlimited, a queue", few.other.all, []string{otherRange + "claim_at<?)"}},
		{"claim: unlimited, many workflows", many.def.all, []string{defRange + "claim_at<?)"}},
		{"claim: one unlimited queue", few.def.one, []string{defRange + "claim_at<?)", "runs_claim (priority<?)"}},
		{"claim: one unlimited queue, not the default", few.other.one,
			[]string{otherRange + "claim_at<?)", "runs_claim_queue (queue=? AND priority<?)"}},
		{"claim: one unlimited queue, many workflows", many.def.one, []string{defRange + "claim_at<?)", "runs_claim (priority<?)"}},
		{"claim: limited", few.other.page, []string{otherRange + "(claim_at,workflow,version)>(?,?,?) AND claim_at<?)"}},
		{"claim: limited, the default queue", few.def.page, []string{defRange + "(claim_at,workflow,version)>(?,?,?) AND claim_at<?)"}},
		{"claim: limited, many workflows", many.other.page, []string{otherRange + "(claim_at,workflow,version)>(?,?,?) AND claim_at<?)"}},
		{"claim: versions, unlimited", fewV.def.all, []string{defRange + "claim_at<?)"}},
		{"claim: versions, one unlimited queue", fewV.def.one, []string{defRange + "claim_at<?)", "runs_claim (priority<?)"}},
		{"claim: versions, one unlimited queue, not the default", fewV.other.one,
			[]string{otherRange + "claim_at<?)", "runs_claim_queue (queue=? AND priority<?)"}},
		{"claim: versions, one unlimited queue, many workflows", manyV.def.one, []string{defRange + "claim_at<?)", "runs_claim (priority<?)"}},
		{"claim: versions, limited", fewV.other.page, []string{otherRange + "(claim_at,workflow,version)>(?,?,?) AND claim_at<?)"}},
		{"claim: versions, limited, many workflows", manyV.other.page, []string{otherRange + "(claim_at,workflow,version)>(?,?,?) AND claim_at<?)"}},
		{"next wake: versions", fewV.def.first, []string{"runs_claim (priority=? AND claim_rank=? AND claim_at>?)"}},
		{"next wake: versions, many workflows", manyV.other.first,
			[]string{"runs_claim_queue (queue=? AND priority=? AND claim_rank=? AND claim_at>?)"}},
		{"next wake", few.def.first, []string{"runs_claim (priority=? AND claim_rank=? AND claim_at>?)"}},
		{"next wake, a queue", few.other.first, []string{"runs_claim_queue (queue=? AND priority=? AND claim_rank=? AND claim_at>?)"}},
		{"claim: running", few.def.running, []string{"runs_claim (priority=? AND claim_rank=? AND claim_at>?)"}},
		{"claim: running, a queue", few.other.running, []string{"runs_claim_queue (queue=? AND priority=? AND claim_rank=? AND claim_at>?)"}},
		{"claim: partitions", few.def.partitions, []string{"runs_claim (priority=? AND claim_rank=? AND claim_at>?)"}},
		{"claim: partitions, a queue", few.other.partitions, []string{"runs_claim_queue (queue=? AND priority=? AND claim_rank=? AND claim_at>?)"}},
		{"claim: starts", countStartsQuery, []string{"COVERING INDEX queue_starts_queue (queue=?)"}},
		{"create: an eager start", logEagerStartQuery, []string{"COVERING INDEX queue_starts_queue (queue=? AND at=?)"}},
		{"queue stats", queueStatsQuery, []string{"USING INDEX runs_status (status=?)"}},
		{"purge", purgeQuery, []string{"SEARCH runs USING INDEX runs_ended (ended_at<?)"}},
		{"purge: checkpoints", `DELETE FROM checkpoints WHERE run_ref IN (SELECT value FROM json_each(?1))`, []string{"(run_ref=?)"}},
		{"purge: events", `DELETE FROM events WHERE run_ref IN (SELECT value FROM json_each(?1))`, []string{"(run_ref=?)"}},
		{"due schedules", `SELECT ` + scheduleCols + ` FROM schedules INDEXED BY schedules_due
			WHERE paused = 0 AND check_at <= ?1 ORDER BY check_at, id LIMIT ?2`, []string{"USING INDEX schedules_due (check_at<?)"}},
		{"runs of some versions", `SELECT ` + runCols + ` FROM ` + runFrom + ` WHERE r.id > ?1 AND r.version IN (SELECT value FROM json_each(?7))
			ORDER BY r.id LIMIT ?2`, []string{"SEARCH r USING INDEX sqlite_autoindex_runs_1 (id>?)"}},
		{"runs of a queue", `SELECT ` + runCols + ` FROM ` + runFrom + ` WHERE r.id > ?1 AND r.queue = ?6 AND r.queue <> 'default' ORDER BY r.id LIMIT ?2`,
			[]string{"runs_queue (queue=? AND id>?)"}},
	} {
		plan := queryPlan(t, s, c.query, nullParams(c.query)...)
		all := strings.Join(plan, "\n")
		for _, line := range plan {
			// A scan of json_each, of the one-row level or of a
			// subquery's rows (bounded by its LIMIT) reads no table.
			ownRows := strings.Contains(line, "json_each") || line == "SCAN level" || strings.HasPrefix(line, "SCAN (subquery-")
			if strings.HasPrefix(line, "SCAN ") && !strings.Contains(line, "INDEX") && !ownRows {
				t.Errorf("%s scans a table:\n%s", c.name, all)
			}
			if strings.HasPrefix(c.name, "claim") && strings.Contains(line, "TEMP B-TREE") {
				t.Errorf("%s sorts instead of reading in index order:\n%s", c.name, all)
			}
		}
		for _, w := range c.want {
			if !strings.Contains(all, w) {
				t.Errorf("%s plan does not use %q:\n%s", c.name, w, all)
			}
		}
	}
}

// The workflows and versions filters the plan tests use: a few workflows,
// and more than a CASE holds.
var (
	manyWorkflows = strings.Split("a b c d e f g h i j", " ")
	fewVersions   = map[string][]int{"a": {0, 1}, "b": {2}}
)

func manyVersions() map[string][]int {
	vs := make(map[string][]int)
	for i, wf := range manyWorkflows {
		vs[wf] = []int{0, i + 1}
	}
	return vs
}

// A claim's versions filter is judged on the entries of the claim index:
// the claim of one unlimited queue and NextWake read no run's row, with
// the filter as without it, to pass over a run of another version.
// EXPLAIN QUERY PLAN cannot say so (it names no covering index, as the
// queue's term names a column the index lacks, a term the partial index
// implies and SQLite leaves out), so the test reads the program: SQLite
// reads every column the index holds from the index entry, and seeks the
// row, deferred until then, only to read a column through a cursor on the
// table; the program has no such read.
func TestClaimFilterReadsNoRow(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := openTemp(t)
	var root int64
	if err := s.rdb.QueryRowContext(ctx, `SELECT rootpage FROM sqlite_schema WHERE type = 'table' AND name = 'runs'`).Scan(&root); err != nil {
		t.Fatal(err)
	}
	// The storage number of each column of runs (the P2 of an OP_Column
	// on the table): stored columns in order, then the virtual ones.
	type column struct {
		name    string
		virtual bool
	}
	var cols []column
	rows, err := s.rdb.QueryContext(ctx, `SELECT name, hidden FROM pragma_table_xinfo('runs') ORDER BY cid`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var c column
		var hidden int
		if err := rows.Scan(&c.name, &hidden); err != nil {
			t.Fatal(err)
		}
		c.virtual = hidden == 2
		cols = append(cols, c)
	}
	rows.Close()
	stored := map[int]string{}
	n := 0
	for _, c := range cols {
		if !c.virtual {
			stored[n] = c.name
			n++
		}
	}
	for _, c := range cols {
		if c.virtual {
			stored[n] = c.name
			n++
		}
	}
	// reads returns the columns of runs the statement reads from the
	// rows, through a cursor on the table.
	reads := func(query string) []string {
		var args []any
		for _, m := range regexp.MustCompile(`\?([0-9]+)`).FindAllStringSubmatch(query, -1) {
			if i, _ := strconv.Atoi(m[1]); i > len(args) {
				args = append(args, make([]any, i-len(args))...)
			}
		}
		rows, err := s.rdb.QueryContext(ctx, `EXPLAIN `+query, args...)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		table := map[int64]bool{}
		var out []string
		for rows.Next() {
			var addr, p1, p2, p3, p5 int64
			var op string
			var p4, comment any
			if err := rows.Scan(&addr, &op, &p1, &p2, &p3, &p4, &p5, &comment); err != nil {
				t.Fatal(err)
			}
			switch {
			case op == "OpenRead" && p2 == root:
				table[p1] = true
			case op == "Column" && table[p1]:
				out = append(out, stored[int(p2)])
			case (op == "SeekRowid" || op == "NotExists") && table[p1]:
				out = append(out, "the row by its ref")
			}
		}
		return out
	}
	for _, index := range []string{"runs_claim", "runs_claim_queue"} {
		var in []string
		rows, err := s.rdb.QueryContext(ctx, `SELECT name FROM pragma_index_info(?1)`, index)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var name string
			if err := rows.Scan(&name); err != nil {
				t.Fatal(err)
			}
			in = append(in, name)
		}
		rows.Close()
		if !slices.Contains(in, "version") {
			t.Errorf("%s holds %v, not the version", index, in)
		}
	}
	few, fewV, manyV := newClaimStmts([]string{"a", "b"}, nil), newClaimStmts([]string{"a", "b"}, fewVersions), newClaimStmts(manyWorkflows, manyVersions())
	// The claim that reads rows: the check sees them.
	if got := reads(fewV.def.all); !slices.Contains(got, "partition_key") {
		t.Errorf("the claim of several queues reads %v of runs' rows: the check does not see them", got)
	}
	for _, c := range []struct {
		name, query string
	}{
		{"claim: one unlimited queue", few.def.one},
		{"claim: versions, one unlimited queue", fewV.def.one},
		{"claim: versions, one unlimited queue, not the default", fewV.other.one},
		{"claim: versions, one unlimited queue, many workflows", manyV.def.one},
		{"next wake: versions", fewV.def.first},
		{"next wake: versions, many workflows", manyV.other.first},
	} {
		if got := reads(c.query); len(got) > 0 {
			t.Errorf("%s reads %v of runs' rows", c.name, got)
		}
	}
}
