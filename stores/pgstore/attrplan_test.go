package pgstore

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stemflow/stem/storage"
)

// seedAttrPlans creates n runs r-000000 on, of four workflows, with the
// statuses of seedListing's, every tenth a child, each created a
// millisecond after the one before (the creation times rewritten, with
// their attributes' copies), with attributes: customer c-0 to c-99 in
// turn (about n/100 runs each), total the ID's number modulo 1000,
// placed a time of one of 100 hours, vip every other run, and note a
// string unique to the run. It returns the first creation time.
func seedAttrPlans(t *testing.T, s *Store, n int) time.Time {
	t.Helper()
	ctx := context.Background()
	base := time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)
	var runs []storage.NewRun
	flush := func() {
		if _, err := s.CreateRuns(ctx, runs); err != nil {
			t.Fatal(err)
		}
		runs = runs[:0]
	}
	for i := range n {
		r := storage.NewRun{ID: fmt.Sprintf("r-%06d", i), Workflow: fmt.Sprintf("wf-%d", i%4), Attributes: []storage.Attr{
			storage.StringAttr("customer", fmt.Sprintf("c-%d", i%100)),
			storage.NumberAttr("total", float64(i%1000)),
			storage.TimeAttr("placed", base.Add(time.Duration(i%100)*time.Hour)),
			storage.BoolAttr("vip", i%2 == 0),
			storage.StringAttr("note", fmt.Sprintf("ord-%06d", i)),
		}}
		if i%10 == 9 {
			r.ParentID = fmt.Sprintf("r-%06d", i-9)
		}
		runs = append(runs, r)
		if len(runs) == 1000 {
			flush()
		}
	}
	if len(runs) > 0 {
		flush()
	}
	for _, sql := range []string{
		`UPDATE ` + s.schema + `.runs SET created_at = $1::timestamptz + right(id, 6)::int * interval '1 millisecond'`,
		`UPDATE ` + s.schema + `.run_attrs a SET created_at = r.created_at FROM ` + s.schema + `.runs r WHERE r.id = a.run_id`,
		`UPDATE ` + s.schema + `.runs r SET status = v.status,
	ready_at = CASE WHEN v.status = 'queued' THEN r.ready_at END,
	ended_at = CASE WHEN v.status IN ` + finished + ` THEN r.created_at END
FROM (SELECT id, CASE
		WHEN k < 80 THEN 'complete' WHEN k < 85 THEN 'errored' WHEN k < 88 THEN 'running'
		WHEN k < 89 THEN 'paused' WHEN k < 90 THEN 'waiting' ELSE 'queued' END AS status
	FROM (SELECT id, right(id, 2)::int AS k FROM ` + s.schema + `.runs) n) v
WHERE r.id = v.id AND v.status <> 'queued'`,
		`VACUUM ANALYZE ` + s.schema + `.runs`,
		`VACUUM ANALYZE ` + s.schema + `.run_attrs`,
	} {
		if _, err := s.pool.Exec(ctx, sql, base); err != nil {
			if _, err := s.pool.Exec(ctx, sql); err != nil {
				t.Fatalf("%s: %v", sql, err)
			}
		}
	}
	return base
}

// indexCond is the index condition of the scan of index in plan, "" when
// the plan has no such scan or it has no condition.
func indexCond(plan, index string) string {
	in := false
	for line := range strings.Lines(plan) {
		switch {
		case strings.Contains(line, " using "+index+" "):
			in = true
		case in && strings.Contains(line, "Index Cond:"):
			return strings.TrimSpace(line)
		case in && strings.Contains(line, "->"):
			return ""
		}
	}
	return ""
}

// TestListRunsByAttributeWalksIndexes: on 20 000 runs with five attributes
// each, analyzed, a listing by an attribute's equality in creation order,
// newest first or not, is a walk of its type's index in run_attrs, the
// name, the value, and the cursor or creation range in its index
// condition, joined to the runs by their primary key, stopped at the
// page's end: no sort, and no more rows read than the page holds (divided
// by the share of runs a run filter passes). A range of numbers and a
// prefix of strings read the filter's range in the index (its bounds in
// the index condition) and sort its matches, and so does an equality in
// ID order. A listing in creation order without attributes walks
// runs_created_idx, or runs_workflow_created_idx or
// runs_status_created_idx when filtered so, the cursor in its index
// condition. The checkpoint's merge finds the run by runs_pkey.
func TestListRunsByAttributeWalksIndexes(t *testing.T) {
	t.Parallel()
	s := newTestStore(t, Options{})
	base := seedAttrPlans(t, s, 20000)
	eq := func(a storage.Attr) []storage.AttrFilter { return []storage.AttrFilter{{Op: storage.OpEq, Value: a}} }
	customer := eq(storage.StringAttr("customer", "c-7"))
	newest, oldest := storage.CreatedCursor(base.Add(15*time.Second), "r-015000"), storage.CreatedCursor(base.Add(5*time.Second), "r-005000")
	const (
		str, num, at, flag      = "run_attrs_str_idx", "run_attrs_num_idx", "run_attrs_at_idx", "run_attrs_flag_idx"
		created, byWF, byStatus = "runs_created_idx", "runs_workflow_created_idx", "runs_status_created_idx"
	)
	for _, c := range []struct {
		name string
		q    storage.ListRunsQuery
		// index is the index the listing walks; or, when it is a list
		// separated by spaces, any of them (the first the one whose
		// index condition is checked).
		index string
		// sorts says the plan may sort (the matches of a range, or of
		// an equality in ID order).
		sorts bool
		// cond are what the index condition holds.
		cond []string
		// read is the most rows of the index's table the page may read.
		read float64
	}{
		{"a customer's newest", storage.ListRunsQuery{Where: customer, Order: storage.OrderCreated, Descending: true}, str, false,
			[]string{"name = 'customer'", "str = 'c-7'"}, 51},
		{"a customer's newest past a cursor", storage.ListRunsQuery{Where: customer, Order: storage.OrderCreated, Descending: true, After: newest}, str, false,
			[]string{"str = 'c-7'", "ROW(created_at, run_id) < ROW("}, 51},
		{"a customer's oldest past a cursor", storage.ListRunsQuery{Where: customer, Order: storage.OrderCreated, After: oldest}, str, false,
			[]string{"str = 'c-7'", "ROW(created_at, run_id) > ROW("}, 51},
		{"a customer's newest created lately", storage.ListRunsQuery{Where: customer, Order: storage.OrderCreated, Descending: true,
			CreatedFrom: base.Add(10 * time.Second)}, str, false, []string{"str = 'c-7'", "created_at >="}, 51},
		{"a customer's newest complete", storage.ListRunsQuery{Where: customer, Order: storage.OrderCreated, Descending: true, Status: storage.StatusComplete}, str, false,
			[]string{"str = 'c-7'"}, 2 * 51},
		{"a total's oldest", storage.ListRunsQuery{Where: eq(storage.NumberAttr("total", 7)), Order: storage.OrderCreated}, num, false,
			[]string{"name = 'total'", "num = '7'"}, 51},
		{"a time's newest", storage.ListRunsQuery{Where: eq(storage.TimeAttr("placed", base.Add(7*time.Hour))), Order: storage.OrderCreated, Descending: true}, at, false,
			[]string{"name = 'placed'", "at = '"}, 51},
		{"the newest vip", storage.ListRunsQuery{Where: eq(storage.BoolAttr("vip", true)), Order: storage.OrderCreated, Descending: true}, flag, false,
			[]string{"name = 'vip'", "flag = true"}, 51},
		{"a range of totals", storage.ListRunsQuery{Where: []storage.AttrFilter{{Op: storage.OpGe, Value: storage.NumberAttr("total", 990)}},
			Order: storage.OrderCreated, Descending: true}, num, true, []string{"num >= '990'"}, 250},
		{"a prefix", storage.ListRunsQuery{Where: []storage.AttrFilter{{Op: storage.OpPrefix, Value: storage.StringAttr("note", "ord-01234")}},
			Order: storage.OrderCreated, Descending: true}, str, true, []string{"str >= 'ord-01234'", "str < 'ord-01235'"}, 11},
		{"a customer's by ID", storage.ListRunsQuery{Where: customer}, str, true, []string{"str = 'c-7'"}, 201},
		{"the newest", storage.ListRunsQuery{Order: storage.OrderCreated, Descending: true}, created, false, nil, 51},
		{"the newest past a cursor", storage.ListRunsQuery{Order: storage.OrderCreated, Descending: true, After: newest}, created, false,
			[]string{"ROW(created_at, id) < ROW("}, 51},
		{"the oldest past a cursor", storage.ListRunsQuery{Order: storage.OrderCreated, After: oldest}, created, false,
			[]string{"ROW(created_at, id) > ROW("}, 51},
		{"the newest top-level", storage.ListRunsQuery{Order: storage.OrderCreated, Descending: true, TopLevel: true}, created, false, nil, 2 * 51},
		{"the newest of a workflow", storage.ListRunsQuery{Order: storage.OrderCreated, Descending: true, Workflow: "wf-1"}, byWF, false,
			[]string{"workflow = 'wf-1'"}, 51},
		// One run in four: a walk of either index stops soon.
		{"the newest of a workflow past a cursor", storage.ListRunsQuery{Order: storage.OrderCreated, Descending: true, Workflow: "wf-1", After: newest},
			byWF + " " + created, false, []string{"ROW(created_at, id) < ROW("}, 4 * 51},
		{"the newest errored", storage.ListRunsQuery{Order: storage.OrderCreated, Descending: true, Status: storage.StatusErrored}, byStatus, false,
			[]string{"status = 'errored'"}, 51},
	} {
		c.q.Limit = 50
		sql, args := s.listRunsSQL(c.q)
		plan := explain(t, s, nil, sql, args...)
		walk := "Index Scan using "
		if c.q.Descending {
			walk = "Index Scan Backward using "
		}
		if c.sorts {
			walk = "Scan using " // a range is read in its order, then sorted
		}
		index := ""
		for _, i := range strings.Fields(c.index) {
			if strings.Contains(plan, walk+i+" ") || strings.Contains(plan, strings.Replace(walk, "Index Scan", "Index Only Scan", 1)+i+" ") {
				index = i
				break
			}
		}
		if index == "" {
			t.Errorf("%s: the listing walks none of %s (%s):\n%s", c.name, c.index, strings.TrimSpace(walk), plan)
		}
		if !c.sorts && strings.Contains(plan, "Sort") || strings.Contains(plan, "Seq Scan") || strings.Contains(plan, "Bitmap") {
			t.Errorf("%s: the listing sorts or scans a table:\n%s", c.name, plan)
		}
		cond := indexCond(plan, index)
		for _, want := range c.cond {
			if !strings.Contains(cond, want) {
				t.Errorf("%s: %q is not in the index condition of %s:\n%s", c.name, want, index, plan)
			}
		}
		nodes := analyze(t, s, sql, args...)
		for _, table := range []string{"runs", "run_attrs"} {
			if read, _ := rowsRead(nodes, table); read > c.read {
				t.Errorf("%s: the listing read %v rows of %s, want %v at most:\n%s", c.name, read, table, c.read, plan)
			}
		}
	}

	// The checkpoint's merge, for a run whose checkpoint the caller
	// knows was written.
	call := stepCall(storage.Lease{RunID: "r-000042"}, "k@v1", "")
	call.req.Attributes = []storage.Attr{storage.StringAttr("stage", "paid")}
	plan := explain(t, s, nil, s.q.setAttrs, setAttrsArgs([]*ckptCall{call}, true)...)
	if !strings.Contains(plan, "runs_pkey") || strings.Contains(plan, "Seq Scan") {
		t.Errorf("the merge of attributes does not find its run by runs_pkey:\n%s", plan)
	}
}
