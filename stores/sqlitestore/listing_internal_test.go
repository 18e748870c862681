package sqlitestore

import (
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stemflow/stem/storage"
)

// Every statement ListRuns makes reads runs through an index in the order
// of the page, ascending or descending, whatever the filters: none sorts
// ("USE TEMP B-TREE FOR ORDER BY") or scans the table, a descending one
// walks its index backwards (the program steps with Prev), an ID prefix
// and a cursor bound the index's range of IDs (so the index is sought at
// the nearer bound, not scanned up to it), and a filtered one reads the
// filter's index: the workflow's, the status's, the queue's or the
// parent's. CountRuns reads run_counts, by its key for one workflow.
func TestListingPlans(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := openTemp(t)
	// explain returns the plan of query and the opcodes of its program,
	// every parameter bound (to NULL), as the store binds them.
	explain := func(query string) (plan, ops []string) {
		t.Helper()
		args := nullParams(query)
		plan = queryPlan(t, s, query, args...)
		rows, err := s.rdb.QueryContext(ctx, `EXPLAIN `+query, args...)
		if err != nil {
			t.Fatalf("%s: %v", query, err)
		}
		for rows.Next() {
			var addr, p1, p2, p3, p5 int64
			var op string
			var p4, comment any
			if err := rows.Scan(&addr, &op, &p1, &p2, &p3, &p4, &p5, &comment); err != nil {
				t.Fatal(err)
			}
			ops = append(ops, op)
		}
		rows.Close()
		return plan, ops
	}
	const byID = "sqlite_autoindex_runs_1"
	now := time.Now()
	for _, f := range []struct {
		name  string
		q     storage.ListRunsQuery
		index string
	}{
		{"all", storage.ListRunsQuery{}, byID},
		{"workflow", storage.ListRunsQuery{Workflow: "w"}, "runs_workflow (workflow=?"},
		{"status", storage.ListRunsQuery{Status: storage.StatusPaused}, "runs_status (status=?"},
		{"workflow and status", storage.ListRunsQuery{Workflow: "w", Status: storage.StatusPaused}, "runs_status (status=?"},
		{"queue", storage.ListRunsQuery{Queue: "q"}, "runs_queue (queue=?"},
		{"default queue", storage.ListRunsQuery{Queue: storage.DefaultQueue}, byID},
		{"parent", storage.ListRunsQuery{ParentID: "p"}, "runs_parent (parent_id=?"},
		{"versions", storage.ListRunsQuery{Versions: []int{1}}, byID},
		{"created range", storage.ListRunsQuery{CreatedFrom: now, CreatedTo: now.Add(time.Hour)}, byID},
		{"workflow, created range", storage.ListRunsQuery{Workflow: "w", CreatedFrom: now}, "runs_workflow (workflow=?"},
	} {
		for _, descending := range []bool{false, true} {
			for _, prefix := range []string{"", "ab"} {
				for _, after := range []string{"", "aa", "ab5", "b"} {
					q := f.q
					q.Descending, q.IDPrefix, q.After = descending, prefix, after
					name := f.name + ", by ID"
					if descending {
						name += " descending"
					}
					name += ", prefix " + strconv.Quote(prefix) + ", after " + strconv.Quote(after)
					query, _, _ := listRunsQuery(q)
					plan, ops := explain(query)
					all := strings.Join(plan, "\n")
					if !strings.Contains(all, "USING INDEX "+f.index) && !strings.Contains(all, "USING COVERING INDEX "+f.index) {
						t.Errorf("%s does not read %s:\n%s", name, f.index, all)
					}
					for _, line := range plan {
						if strings.Contains(line, "TEMP B-TREE") {
							t.Errorf("%s sorts instead of reading in index order:\n%s", name, all)
						}
						ownRows := strings.Contains(line, "json_each")
						if strings.HasPrefix(line, "SCAN ") && !strings.Contains(line, "INDEX") && !ownRows {
							t.Errorf("%s scans a table:\n%s", name, all)
						}
					}
					// The range of IDs the index is read over: both
					// ends with a prefix, the cursor's end without.
					var idRange string
					switch {
					case prefix != "":
						idRange = "id>? AND id<?"
					case descending && after != "":
						idRange = "id<?"
					case !descending:
						idRange = "id>?"
					}
					if idRange != "" && !strings.Contains(all, idRange+")") {
						t.Errorf("%s does not bound the index by %s:\n%s", name, idRange, all)
					}
					if descending != slices.Contains(ops, "Prev") {
						t.Errorf("%s steps by %v, want Prev only when descending", name, ops)
					}
				}
			}
		}
	}
	for _, c := range []struct {
		name, query, want string
	}{
		{"count all", countAllQuery, "SCAN run_counts"},
		{"count a workflow", countWorkflowQuery, "SEARCH run_counts USING PRIMARY KEY (workflow=?)"},
	} {
		plan, _ := explain(c.query)
		if all := strings.Join(plan, "\n"); !strings.Contains(all, c.want) || strings.Contains(all, " runs ") {
			t.Errorf("%s plan is not %q alone:\n%s", c.name, c.want, all)
		}
	}
}

// listRunsQuery folds the cursor and the ID prefix into one bound on each
// side of the range of IDs: the nearer of the two.
func TestListRunsBounds(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		q      storage.ListRunsQuery
		lo, hi any
		where  string
	}{
		{storage.ListRunsQuery{}, "", nil, "r.id > ?1 ORDER"},
		{storage.ListRunsQuery{After: "x"}, "x", nil, "r.id > ?1 ORDER"},
		{storage.ListRunsQuery{IDPrefix: "ab"}, "ab", "ac", "r.id >= ?1 AND r.id < ?8 ORDER"},
		{storage.ListRunsQuery{IDPrefix: "ab", After: "aa"}, "ab", "ac", "r.id >= ?1 AND r.id < ?8 ORDER"},
		{storage.ListRunsQuery{IDPrefix: "ab", After: "ab"}, "ab", "ac", "r.id > ?1 AND r.id < ?8 ORDER"},
		{storage.ListRunsQuery{IDPrefix: "ab", After: "ab1"}, "ab1", "ac", "r.id > ?1 AND r.id < ?8 ORDER"},
		{storage.ListRunsQuery{Descending: true}, nil, nil, "e.number = r.execution ORDER BY r.id DESC"},
		{storage.ListRunsQuery{Descending: true, After: "x"}, nil, "x", "r.execution WHERE r.id < ?8 ORDER"},
		{storage.ListRunsQuery{Descending: true, IDPrefix: "ab"}, "ab", "ac", "r.id >= ?1 AND r.id < ?8 ORDER"},
		{storage.ListRunsQuery{Descending: true, IDPrefix: "ab", After: "ab5"}, "ab", "ab5", "r.id >= ?1 AND r.id < ?8 ORDER"},
		{storage.ListRunsQuery{Descending: true, IDPrefix: "ab", After: "b"}, "ab", "ac", "r.id >= ?1 AND r.id < ?8 ORDER"},
		{storage.ListRunsQuery{Descending: true, IDPrefix: "a\u00ff"}, "a\u00ff", "a\xc3\xc0", "r.id >= ?1 AND r.id < ?8 ORDER"},
	} {
		query, lo, hi := listRunsQuery(c.q)
		if lo != c.lo || hi != c.hi || !strings.Contains(query, c.where) {
			t.Errorf("listRunsQuery(%+v) = %v, %q, %q; want %q, %q, %q", c.q, query, lo, hi, c.where, c.lo, c.hi)
		}
	}
}

// An ID prefix whose range ends in a string that is not UTF-8 (the prefix
// ends in ÿ, C3 BF, so the range ends before C3 C0) is compared byte for
// byte: the runs after it in the ID order, whose IDs are UTF-8, are outside
// it, and those that begin with it inside, in both orders and page by page.
func TestListIDPrefixEndsOutsideUTF8(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := openTemp(t)
	ids := []string{"a", "a\u00fe", "a\u00ff", "a\u00ff0", "a\u00ff\u00ff", "a\u00ff\U0010ffff", "a\u0100", "a\u0800", "a\U0010ffff", "b"}
	var runs []storage.NewRun
	for _, id := range ids {
		runs = append(runs, storage.NewRun{ID: id, Workflow: "wf"})
	}
	if _, err := s.CreateRuns(ctx, runs); err != nil {
		t.Fatal(err)
	}
	for _, prefix := range []string{"a\u00ff", "a\u00ff\u00ff", "a\U0010ffff", "a\u00ff\U0010ffff", "a"} {
		var want []string
		for _, id := range ids {
			if strings.HasPrefix(id, prefix) {
				want = append(want, id)
			}
		}
		for _, descending := range []bool{false, true} {
			q := storage.ListRunsQuery{IDPrefix: prefix, Descending: descending, Limit: 1}
			var got []string
			for {
				page, err := s.ListRuns(ctx, q)
				if err != nil {
					t.Fatal(err)
				}
				for _, r := range page.Runs {
					got = append(got, r.ID)
				}
				if page.Next == "" {
					break
				}
				q.After = page.Next
			}
			w := slices.Clone(want)
			if descending {
				slices.Reverse(w)
			}
			if !slices.Equal(got, w) {
				t.Errorf("ListRuns(prefix %q, descending %v) = %q, want %q", prefix, descending, got, w)
			}
		}
	}
}

// A database written by schema version 6 is upgraded in place: the counts
// CountRuns reads are those of the runs it holds, and follow them from
// then on.
func TestMigrateFromVersion6(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := openAtVersion(t, filepath.Join(t.TempDir(), "stem.db"), 6)
	defer s.Close()
	n := time.Now().UnixNano()
	migrateSeeded(t, ctx, s, []seedRow{
		{`INSERT INTO runs (ref, id, workflow, status, ready_at, created_at, updated_at) VALUES
			(1, 'a', 'wf', 'queued', ?1, ?1, ?1), (2, 'b', 'wf', 'queued', ?1, ?1, ?1),
			(3, 'c', 'wf', 'paused', ?1, ?1, ?1), (4, 'd', 'other', 'queued', ?1, ?1, ?1)`, []any{n}},
		{`INSERT INTO run_data (ref) VALUES (1), (2), (3), (4)`, nil},
		{`INSERT INTO executions (run_ref, number, started_at) VALUES (1, 1, ?1), (2, 1, ?1), (3, 1, ?1), (4, 1, ?1)`, []any{n}},
	})
	count := func(workflow string) storage.RunCounts {
		t.Helper()
		c, err := s.CountRuns(ctx, storage.CountRunsQuery{Workflow: workflow})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	want := func(what string, got storage.RunCounts, want storage.RunCounts) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("%s = %v, want %v", what, got, want)
		}
		for st, n := range want {
			if got[st] != n {
				t.Fatalf("%s = %v, want %v", what, got, want)
			}
		}
	}
	want("counts of all runs", count(""), storage.RunCounts{storage.StatusQueued: 3, storage.StatusPaused: 1})
	want("counts of wf", count("wf"), storage.RunCounts{storage.StatusQueued: 2, storage.StatusPaused: 1})
	if err := s.Pause(ctx, "d"); err != nil {
		t.Fatal(err)
	}
	if err := s.Resume(ctx, "c"); err != nil {
		t.Fatal(err)
	}
	want("counts of all runs after a pause and a resume", count(""), storage.RunCounts{storage.StatusQueued: 3, storage.StatusPaused: 1})
	want("counts of other after its pause", count("other"), storage.RunCounts{storage.StatusPaused: 1})
	want("counts of wf after a resume", count("wf"), storage.RunCounts{storage.StatusQueued: 3})
}
