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
	for _, q := range []struct {
		sql  string
		args []any
	}{
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
	} {
		if _, err := s.wdb.ExecContext(ctx, q.sql, q.args...); err != nil {
			t.Fatalf("%s: %v", q.sql, err)
		}
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	var integrity string
	if err := s.wdb.QueryRowContext(ctx, `PRAGMA integrity_check`).Scan(&integrity); err != nil || integrity != "ok" {
		t.Fatalf("integrity_check = %q, %v", integrity, err)
	}

	rec, err := s.GetRun(ctx, "queued")
	if err != nil || rec.Queue != storage.DefaultQueue || rec.Priority != 0 || rec.Partition != "" {
		t.Fatalf("GetRun(queued) = %+v, %v", rec, err)
	}
	stats, err := s.QueueStats(ctx, []string{storage.DefaultQueue})
	if err != nil || !slices.Equal(stats, []storage.QueueStats{{Queue: storage.DefaultQueue, Ready: 1, Running: 1, Waiting: 1}}) {
		t.Fatalf("QueueStats = %+v, %v", stats, err)
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
	ctx := t.Context()
	s, err := Open(filepath.Join(t.TempDir(), "stem.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	few, many := newClaimStmts([]string{"a", "b"}), newClaimStmts(strings.Split("a b c d e f g h i j", " "))
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
		{"claim: limited", few.other.page, []string{otherRange + "(claim_at,workflow)>(?,?) AND claim_at<?)"}},
		{"claim: limited, the default queue", few.def.page, []string{defRange + "(claim_at,workflow)>(?,?) AND claim_at<?)"}},
		{"claim: limited, many workflows", many.other.page, []string{otherRange + "(claim_at,workflow)>(?,?) AND claim_at<?)"}},
		{"next wake", few.def.first, []string{"runs_claim (priority=? AND claim_rank=? AND claim_at>?)"}},
		{"next wake, a queue", few.other.first, []string{"runs_claim_queue (queue=? AND priority=? AND claim_rank=? AND claim_at>?)"}},
		{"claim: running", few.def.running, []string{"runs_claim (priority=? AND claim_rank=? AND claim_at>?)"}},
		{"claim: running, a queue", few.other.running, []string{"runs_claim_queue (queue=? AND priority=? AND claim_rank=? AND claim_at>?)"}},
		{"claim: partitions", few.def.partitions, []string{"runs_claim (priority=? AND claim_rank=? AND claim_at>?)"}},
		{"claim: partitions, a queue", few.other.partitions, []string{"runs_claim_queue (queue=? AND priority=? AND claim_rank=? AND claim_at>?)"}},
		{"claim: starts", `SELECT count(*) FROM queue_starts WHERE queue = ?1`, []string{"COVERING INDEX queue_starts_queue (queue=?)"}},
		{"queue stats", queueStatsQuery, []string{"USING INDEX runs_status (status=?)"}},
		{"purge", purgeQuery, []string{"SEARCH runs USING INDEX runs_ended (ended_at<?)"}},
		{"purge: checkpoints", `DELETE FROM checkpoints WHERE run_ref IN (SELECT value FROM json_each(?1))`, []string{"(run_ref=?)"}},
		{"purge: events", `DELETE FROM events WHERE run_ref IN (SELECT value FROM json_each(?1))`, []string{"(run_ref=?)"}},
		{"due schedules", `SELECT ` + scheduleCols + ` FROM schedules INDEXED BY schedules_due
			WHERE paused = 0 AND check_at <= ?1 ORDER BY check_at, id LIMIT ?2`, []string{"USING INDEX schedules_due (check_at<?)"}},
		{"runs of a queue", `SELECT ` + runCols + ` FROM ` + runFrom + ` WHERE r.id > ?1 AND r.queue = ?6 AND r.queue <> 'default' ORDER BY r.id LIMIT ?2`,
			[]string{"runs_queue (queue=? AND id>?)"}},
	} {
		// Every parameter bound (to NULL), as the store binds them.
		var args []any
		for _, m := range regexp.MustCompile(`\?([0-9]+)`).FindAllStringSubmatch(c.query, -1) {
			if i, _ := strconv.Atoi(m[1]); i > len(args) {
				args = append(args, make([]any, i-len(args))...)
			}
		}
		rows, err := s.rdb.QueryContext(ctx, `EXPLAIN QUERY PLAN `+c.query, args...)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		rows.Close()
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
