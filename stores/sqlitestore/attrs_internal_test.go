package sqlitestore

import (
	"cmp"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stemflow/stem/storage"
	"github.com/stemflow/stem/stores/storetest"
)

// Every listing listQuery serves (creation order, attribute filters of
// each type and comparison, with every other filter, ascending and
// descending, page by page from each cursor) lists exactly the runs
// ListRunsQuery.Listed passes, in the query's order: checked against the
// runs' records, read one by one, over runs created in batches (sharing
// an instant), within one microsecond of each other (which the order
// tells apart by ID alone) and apart, with attributes of every type,
// missing ones and one name of two types.
func TestListingMatchesFilters(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	clock := storetest.NewClock(storetest.Start)
	s, err := Open(filepath.Join(t.TempDir(), "stem.db"), Options{Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	rnd := rand.New(rand.NewPCG(35, 1))
	placed := storetest.Start.Add(-24 * time.Hour)
	var ids []string
	want := map[string][]storage.Attr{}
	for batch := range 40 {
		var runs []storage.NewRun
		for range 1 + rnd.IntN(6) {
			id := fmt.Sprintf("r%03d", rnd.IntN(1000))
			if _, ok := want[id]; ok {
				continue
			}
			var attrs []storage.Attr
			if rnd.IntN(5) > 0 {
				attrs = append(attrs, storage.StringAttr("customer", []string{"acme", "acme-2", "ac", "beta", "b\u00ff"}[rnd.IntN(5)]))
			}
			switch rnd.IntN(4) {
			case 0:
			case 1:
				attrs = append(attrs, storage.StringAttr("total", "n/a")) // another type
			default:
				attrs = append(attrs, storage.NumberAttr("total", float64(rnd.IntN(7)-2)+[]float64{0, 0.1, 0.5}[rnd.IntN(3)]))
			}
			if rnd.IntN(3) > 0 {
				attrs = append(attrs, storage.TimeAttr("placed", placed.Add(time.Duration(rnd.IntN(5))*time.Microsecond)))
			}
			if rnd.IntN(2) > 0 {
				attrs = append(attrs, storage.BoolAttr("vip", rnd.IntN(2) == 0))
			}
			r := storage.NewRun{ID: id, Workflow: fmt.Sprintf("wf-%d", rnd.IntN(2)), Attributes: attrs}
			if len(ids) > 0 && rnd.IntN(4) == 0 {
				r.ParentID = ids[rnd.IntN(len(ids))]
			}
			runs = append(runs, r)
			want[id] = storage.NormalizeAttrs(attrs)
			ids = append(ids, id)
		}
		res, err := s.CreateRuns(ctx, runs)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range res {
			if !attrsEqual(c.Run.Attributes, want[c.Run.ID]) {
				t.Fatalf("CreateRuns(%s).Attributes = %v, want %v", c.Run.ID, c.Run.Attributes, want[c.Run.ID])
			}
		}
		if batch%5 == 0 {
			if err := s.Pause(ctx, runs[0].ID); err != nil {
				t.Fatal(err)
			}
		}
		// Batches apart, within the microsecond, or at the same instant.
		clock.Advance([]time.Duration{0, 300 * time.Nanosecond, time.Microsecond, time.Millisecond}[rnd.IntN(4)])
	}
	var all []storage.RunRecord
	for _, id := range ids {
		rec, err := s.GetRun(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if !attrsEqual(rec.Attributes, want[id]) {
			t.Fatalf("GetRun(%s).Attributes = %v, want %v", id, rec.Attributes, want[id])
		}
		all = append(all, rec)
	}

	filters := []storage.AttrFilter{
		{Op: storage.OpEq, Value: storage.StringAttr("customer", "acme")},
		{Op: storage.OpPrefix, Value: storage.StringAttr("customer", "ac")},
		{Op: storage.OpPrefix, Value: storage.StringAttr("customer", "b\u00ff")},
		{Op: storage.OpEq, Value: storage.StringAttr("total", "n/a")},
		{Op: storage.OpEq, Value: storage.NumberAttr("total", 1)},
		{Op: storage.OpLt, Value: storage.NumberAttr("total", 0.5)},
		{Op: storage.OpLe, Value: storage.NumberAttr("total", 0.5)},
		{Op: storage.OpGt, Value: storage.NumberAttr("total", -1)},
		{Op: storage.OpGe, Value: storage.NumberAttr("total", 2.1)},
		{Op: storage.OpEq, Value: storage.TimeAttr("placed", placed.Add(2*time.Microsecond))},
		{Op: storage.OpLt, Value: storage.TimeAttr("placed", placed.Add(2*time.Microsecond))},
		{Op: storage.OpGe, Value: storage.TimeAttr("placed", placed.Add(3*time.Microsecond))},
		// Times between two microseconds.
		{Op: storage.OpEq, Value: storage.Attr{Name: "placed", Type: storage.AttrTime, Time: placed.Add(2500 * time.Nanosecond)}},
		{Op: storage.OpLt, Value: storage.Attr{Name: "placed", Type: storage.AttrTime, Time: placed.Add(2500 * time.Nanosecond)}},
		{Op: storage.OpLe, Value: storage.Attr{Name: "placed", Type: storage.AttrTime, Time: placed.Add(2500 * time.Nanosecond)}},
		{Op: storage.OpGt, Value: storage.Attr{Name: "placed", Type: storage.AttrTime, Time: placed.Add(2500 * time.Nanosecond)}},
		{Op: storage.OpGe, Value: storage.Attr{Name: "placed", Type: storage.AttrTime, Time: placed.Add(2500 * time.Nanosecond)}},
		{Op: storage.OpEq, Value: storage.BoolAttr("vip", true)},
		{Op: storage.OpEq, Value: storage.BoolAttr("vip", false)},
		{Op: storage.OpEq, Value: storage.StringAttr("missing", "x")},
	}
	mid := all[len(all)/2].CreatedAt
	queries := []storage.ListRunsQuery{{Order: storage.OrderCreated}, {Order: storage.OrderCreated, TopLevel: true}}
	for range 300 {
		q := storage.ListRunsQuery{Limit: 1 + rnd.IntN(7)}
		if rnd.IntN(4) > 0 {
			q.Order = storage.OrderCreated
		}
		for range rnd.IntN(4) {
			q.Where = append(q.Where, filters[rnd.IntN(len(filters))])
		}
		switch rnd.IntN(12) {
		case 0:
			q.Workflow = "wf-1"
		case 1:
			q.Status = storage.StatusPaused
		case 2:
			q.ParentID = ids[rnd.IntN(len(ids)/2)]
		case 3:
			q.TopLevel = true
		case 4:
			q.CreatedFrom = mid
		case 5:
			q.CreatedTo = mid.Add(500 * time.Nanosecond)
		case 6:
			q.IDPrefix = "r5"
		case 7:
			q.Versions = []int{0}
		case 8:
			q.Queue = storage.DefaultQueue
		}
		queries = append(queries, q)
	}
	for _, q := range queries {
		for _, descending := range []bool{false, true} {
			q.Descending = descending
			var expect []string
			sorted := slices.Clone(all)
			slices.SortFunc(sorted, func(a, b storage.RunRecord) int {
				c := 0
				if q.Order == storage.OrderCreated {
					c = a.CreatedAt.Truncate(time.Microsecond).Compare(b.CreatedAt.Truncate(time.Microsecond))
				}
				c = cmp.Or(c, strings.Compare(a.ID, b.ID))
				if descending {
					c = -c
				}
				return c
			})
			for _, r := range sorted {
				// Listed leaves the parent to the store.
				if q.Listed(&r) && (q.ParentID == "" || r.ParentID == q.ParentID) {
					expect = append(expect, r.ID)
				}
			}
			var got []string
			page := q
			for n := 0; ; n++ {
				p, err := s.ListRuns(ctx, page)
				if err != nil {
					t.Fatalf("ListRuns(%+v): %v", page, err)
				}
				for _, r := range p.Runs {
					got = append(got, r.ID)
					if !attrsEqual(r.Attributes, want[r.ID]) {
						t.Fatalf("ListRuns(%+v) run %s has attributes %v, want %v", page, r.ID, r.Attributes, want[r.ID])
					}
				}
				if p.Next == "" || n > len(all) {
					break
				}
				if last := p.Runs[len(p.Runs)-1]; p.Next != q.NextCursor(&last) {
					t.Fatalf("ListRuns(%+v).Next = %q, want %q", page, p.Next, q.NextCursor(&last))
				}
				page.After = p.Next
			}
			if !slices.Equal(got, expect) {
				t.Fatalf("ListRuns(%+v), page by page, = %v\nwant %v", q, got, expect)
			}
			if q.Order == storage.OrderCreated && q.Status != "" && len(q.Where) == 0 && q.ParentID == "" {
				// Both statements fewOfStatus chooses between.
				for _, few := range []bool{false, true} {
					if got := listAll(t, s, q, few); !slices.Equal(got, expect) {
						t.Fatalf("listQuery(%+v, few %v), page by page, = %v\nwant %v", q, few, got, expect)
					}
				}
			}
		}
	}
}

// listAll lists every run q passes, page by page, with listQuery's
// statement for few.
func listAll(t *testing.T, s *Store, q storage.ListRunsQuery, few bool) []string {
	t.Helper()
	var ids []string
	for {
		query, args := listQuery(q, q.PageSize()+1, few)
		var page []storage.RunRecord
		if err := s.read(t.Context(), "list", false, func(c *conn) error {
			return c.query(query, func(r row) error {
				rec, err := scanRun(r)
				page = append(page, rec)
				return err
			}, args...)
		}); err != nil {
			t.Fatal(err)
		}
		for i, r := range page {
			if i < q.PageSize() {
				ids = append(ids, r.ID)
			}
		}
		if len(page) <= q.PageSize() {
			return ids
		}
		q.After = q.NextCursor(&page[q.PageSize()-1])
	}
}

// attrsEqual reports whether a and b hold the same attributes in the same
// order.
func attrsEqual(a, b []storage.Attr) bool {
	return slices.EqualFunc(a, b, storage.Attr.Equal)
}

// explainOps returns the opcodes of query's program, every parameter
// bound to NULL.
func explainOps(t *testing.T, s *Store, query string) []string {
	t.Helper()
	rows, err := s.rdb.QueryContext(t.Context(), `EXPLAIN `+query, nullParams(query)...)
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	defer rows.Close()
	var ops []string
	for rows.Next() {
		var addr, p1, p2, p3, p5 int64
		var op string
		var p4, comment any
		if err := rows.Scan(&addr, &op, &p1, &p2, &p3, &p4, &p5, &comment); err != nil {
			t.Fatal(err)
		}
		ops = append(ops, op)
	}
	return ops
}

// The statements of listings by attribute and by creation time read
// their page through an index, as the store's doc says:
//
//   - an equality on an attribute of any type, in creation order, is one
//     range of that type's index of run_attrs (name and value, then the
//     cursor's creation time and ID, then the creation range), read in
//     the page's order (backwards when descending) with no sort, whatever
//     else filters the runs read;
//   - a range or a prefix reads the range of its values and sorts its
//     runs, once, in the inner query, and so does an attribute filter in
//     ID order;
//   - a listing in creation order without attribute filters reads
//     runs_created, bounded by the cursor, with no sort; of one parent,
//     runs_parent, sorted;
//   - top-level runs in ID order are read from runs_parent, in order;
//   - the further attribute filters and every run's attributes are seeks
//     of run_attrs by its key; nothing scans a table.
func TestAttrListingPlans(t *testing.T) {
	t.Parallel()
	s := openTemp(t)
	now := storetest.Start
	cursor := storage.CreatedCursor(now, "r-1")
	eqs := []struct {
		f     storage.AttrFilter
		index string
	}{
		{storage.AttrFilter{Op: storage.OpEq, Value: storage.StringAttr("customer", "C-7")}, "run_attrs_str (name=? AND str_value=?"},
		{storage.AttrFilter{Op: storage.OpEq, Value: storage.NumberAttr("total", 5)}, "run_attrs_num (name=? AND num_value=?"},
		{storage.AttrFilter{Op: storage.OpEq, Value: storage.TimeAttr("placed", now)}, "run_attrs_time (name=? AND time_value=?"},
		{storage.AttrFilter{Op: storage.OpEq, Value: storage.BoolAttr("vip", true)}, "run_attrs_bool (name=? AND bool_value=?"},
	}
	ranges := []struct {
		f     storage.AttrFilter
		index string
	}{
		{storage.AttrFilter{Op: storage.OpPrefix, Value: storage.StringAttr("customer", "C-")}, "run_attrs_str (name=? AND str_value>? AND str_value<?)"},
		{storage.AttrFilter{Op: storage.OpGt, Value: storage.NumberAttr("total", 5)}, "run_attrs_num (name=? AND num_value>?)"},
		{storage.AttrFilter{Op: storage.OpLe, Value: storage.NumberAttr("total", 5)}, "run_attrs_num (name=? AND num_value<?)"},
		{storage.AttrFilter{Op: storage.OpLt, Value: storage.TimeAttr("placed", now)}, "run_attrs_time (name=? AND time_value<?)"},
		{storage.AttrFilter{Op: storage.OpGe, Value: storage.TimeAttr("placed", now)}, "run_attrs_time (name=? AND time_value>?)"},
	}
	second := storage.AttrFilter{Op: storage.OpGe, Value: storage.NumberAttr("weight", 100)}
	others := []storage.ListRunsQuery{
		{},
		{Workflow: "w", Status: storage.StatusPaused, Queue: "q", Versions: []int{1}, IDPrefix: "r-"},
		{TopLevel: true, CreatedFrom: now.Add(-time.Hour), CreatedTo: now},
		{ParentID: "p"},
		{Where: []storage.AttrFilter{second, second}},
	}
	type shape struct {
		name  string
		q     storage.ListRunsQuery
		index string // the inner query reads it
		sorts bool   // and sorts what it reads
		few   bool   // the status filter's runs are few (fewOfStatus)
	}
	var shapes []shape
	for _, o := range others {
		for _, descending := range []bool{false, true} {
			for _, after := range []string{"", cursor} {
				for _, e := range eqs {
					q := o
					q.Where = append([]storage.AttrFilter{e.f}, o.Where...)
					q.Order, q.Descending, q.After = storage.OrderCreated, descending, after
					shapes = append(shapes, shape{"equality in creation order", q, e.index, false, false})
					q.Order, q.After = storage.OrderID, strings.TrimPrefix(after, cursor)
					shapes = append(shapes, shape{"equality in ID order", q, e.index, true, false})
				}
				for _, r := range ranges {
					q := o
					q.Where = append([]storage.AttrFilter{r.f}, o.Where...)
					q.Order, q.Descending, q.After = storage.OrderCreated, descending, after
					shapes = append(shapes, shape{"range in creation order", q, r.index, true, false})
				}
				if len(o.Where) > 0 {
					continue
				}
				q := o
				q.Order, q.Descending, q.After = storage.OrderCreated, descending, after
				switch {
				case q.ParentID != "":
					shapes = append(shapes, shape{"a parent's children in creation order", q, "runs_parent (parent_id=?)", true, false})
				case q.Status != "":
					shapes = append(shapes,
						shape{"a status of few runs in creation order", q, "runs_status (status=?", true, true},
						shape{"a workflow's runs in creation order", q, "runs_workflow_created (workflow=?", false, false})
					q.Workflow = ""
					shapes = append(shapes, shape{"a status of many runs in creation order", q, "runs_created", false, false})
				case after != "":
					shapes = append(shapes, shape{"creation order past a cursor", q, "runs_created (", false, false})
				default:
					shapes = append(shapes, shape{"creation order", q, "runs_created", false, false})
				}
			}
		}
	}
	// Filters of the first's name and type bound the range it reads.
	between := func(f ...storage.AttrFilter) storage.ListRunsQuery {
		return storage.ListRunsQuery{Where: f, Order: storage.OrderCreated, Descending: true}
	}
	shapes = append(shapes,
		shape{"a range of numbers", between(storage.AttrFilter{Op: storage.OpGe, Value: storage.NumberAttr("total", 500)},
			storage.AttrFilter{Op: storage.OpLt, Value: storage.NumberAttr("total", 501)}, second), "run_attrs_num (name=? AND num_value>? AND num_value<?)", true, false},
		shape{"a range of times", between(storage.AttrFilter{Op: storage.OpGt, Value: storage.TimeAttr("placed", now)},
			storage.AttrFilter{Op: storage.OpLe, Value: storage.TimeAttr("placed", now.Add(time.Hour))}), "run_attrs_time (name=? AND time_value>? AND time_value<?)", true, false},
		shape{"an equality and a prefix of one name", between(storage.AttrFilter{Op: storage.OpEq, Value: storage.StringAttr("customer", "C-7")},
			storage.AttrFilter{Op: storage.OpPrefix, Value: storage.StringAttr("customer", "C-")}), "run_attrs_str (name=? AND str_value=?)", false, false},
	)
	for _, tl := range []storage.ListRunsQuery{{TopLevel: true}, {TopLevel: true, Workflow: "w", After: "r-1"}, {TopLevel: true, Descending: true}} {
		shapes = append(shapes, shape{"top-level runs in ID order", tl, "runs_parent (parent_id=?", false, false})
	}
	for _, c := range shapes {
		var query string
		if c.q.Order == storage.OrderID && len(c.q.Where) == 0 {
			query, _, _ = listRunsQuery(c.q)
		} else {
			query, _ = listQuery(c.q, 10, c.few)
		}
		plan := queryPlan(t, s, query, nullParams(query)...)
		all := strings.Join(plan, "\n")
		name := fmt.Sprintf("%s (%+v)", c.name, c.q)
		if !strings.Contains(all, "USING INDEX "+c.index) && !strings.Contains(all, "USING COVERING INDEX "+c.index) {
			t.Errorf("%s does not read %s:\n%s", name, c.index, all)
		}
		if c.q.Order == storage.OrderCreated && c.q.After != "" && !c.sorts && !strings.Contains(all, "(created_us,run_id)") && !strings.Contains(all, "(created_us,id)") {
			t.Errorf("%s does not bound the index's range by the cursor:\n%s", name, all)
		}
		if n := strings.Count(all, "TEMP B-TREE"); n != 0 && !c.sorts || n > 1 ||
			n == 1 && strings.Index(all, "TEMP B-TREE") > strings.Index(all, "SCAN p") {
			t.Errorf("%s sorts %d times (want %v, in the inner query):\n%s", name, n, c.sorts, all)
		}
		for _, line := range plan {
			if strings.HasPrefix(line, "SCAN ") && !strings.Contains(line, "INDEX") && line != "SCAN p" && !strings.Contains(line, "json_each") {
				t.Errorf("%s scans a table:\n%s", name, all)
			}
			if strings.Contains(line, " x ") && !strings.Contains(line, "x USING PRIMARY KEY (run_ref=? AND name=?)") {
				t.Errorf("%s reads a further filter otherwise than by run and name:\n%s", name, all)
			}
			if strings.Contains(line, "SEARCH run_attrs ") && !strings.Contains(line, "USING PRIMARY KEY (run_ref=?)") {
				t.Errorf("%s reads a run's attributes otherwise than by its key:\n%s", name, all)
			}
		}
		// An index read in the page's order steps backwards when
		// descending; a sorted one needs no Prev.
		if !c.sorts && c.q.Descending != slices.Contains(explainOps(t, s, query), "Prev") {
			t.Errorf("%s steps by Prev %v, want %v", name, !c.q.Descending, c.q.Descending)
		}
	}
	// The writes of attributes reach run_attrs by its key, and runs by
	// theirs.
	for _, q := range []string{insertAttrs(2), `SELECT r.id, r.created_us, a.name FROM runs r LEFT JOIN run_attrs a ON a.run_ref = r.ref WHERE r.ref = ?1`, `DELETE FROM run_attrs WHERE run_ref = ?1`,
		`DELETE FROM run_attrs WHERE run_ref IN (SELECT value FROM json_each(?1))`} {
		all := strings.Join(queryPlan(t, s, q, nullParams(q)...), "\n")
		if strings.Contains(all, "SCAN run_attrs") || strings.Contains(all, "SCAN runs") {
			t.Errorf("%s scans:\n%s", q, all)
		}
	}
}

// A run's attribute rows go with it: Purge deletes them with the run, a
// create that replaces a run deletes those of the run and of its family,
// and a ref SQLite gives again to a later run never finds any. A restart
// from a step copies the inputs of the checkpoints it copies.
func TestAttrsGoWithTheirRun(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	clock := storetest.NewClock(storetest.Start)
	s, err := Open(filepath.Join(t.TempDir(), "stem.db"), Options{Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	rows := func() int {
		t.Helper()
		var n int
		if err := s.rdb.QueryRowContext(ctx, `SELECT count(*) FROM run_attrs WHERE run_ref NOT IN (SELECT ref FROM runs)`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		var all int
		if err := s.rdb.QueryRowContext(ctx, `SELECT count(*) FROM run_attrs`).Scan(&all); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Fatalf("%d attribute rows of no run", n)
		}
		return all
	}
	attrs := []storage.Attr{storage.StringAttr("customer", "C-1"), storage.NumberAttr("total", 3)}
	if _, err := s.CreateRuns(ctx, []storage.NewRun{
		{ID: "parent", Workflow: "wf", Attributes: attrs},
		{ID: "child", Workflow: "wf", ParentID: "parent", Attributes: attrs},
		{ID: "done", Workflow: "other", Attributes: attrs},
	}); err != nil {
		t.Fatal(err)
	}
	if n := rows(); n != 6 {
		t.Fatalf("%d attribute rows, want 6", n)
	}
	// A restart from a step copies its checkpoints' inputs.
	cl, err := s.Claim(ctx, storage.ClaimRequest{Owner: "w", Workflows: []string{"other"}, Limit: 1, LeaseFor: time.Minute})
	if err != nil || len(cl) != 1 {
		t.Fatalf("Claim = %v, %v", cl, err)
	}
	for _, key := range []string{"a@v1", "b@v1"} {
		if _, err := s.Checkpoint(ctx, storage.CheckpointRequest{Lease: cl[0].Lease, LeaseFor: time.Minute,
			Checkpoint: storage.Checkpoint{Key: key, Kind: storage.KindStep, Input: []byte("in " + key)}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Complete(ctx, storage.CompleteRequest{Lease: cl[0].Lease, Status: storage.StatusComplete}); err != nil {
		t.Fatal(err)
	}
	if err := s.Restart(ctx, storage.RestartRequest{RunID: "done", FromKey: "b@v1", IfExecution: 2}); !errors.Is(err, storage.ErrConflict) {
		t.Fatalf("Restart of execution 2 of a run in its first = %v, want ErrConflict", err)
	}
	if err := s.Restart(ctx, storage.RestartRequest{RunID: "done", FromKey: "b@v1", IfExecution: 1}); err != nil {
		t.Fatal(err)
	}
	h, err := s.ListSteps(ctx, storage.StepsQuery{RunID: "done"})
	if err != nil || h.Execution != 2 || len(h.Steps) != 1 || string(h.Steps[0].Input) != "in a@v1" || h.Steps[0].ForkedFrom != 1 {
		t.Fatalf("ListSteps after a restart from b@v1 = %+v, %v; want a@v1 copied with its input", h, err)
	}
	if rec, err := s.GetRun(ctx, "done"); err != nil || !attrsEqual(rec.Attributes, storage.NormalizeAttrs(attrs)) {
		t.Fatalf("attributes after a restart = %v, %v; want them kept", rec.Attributes, err)
	}
	cl, err = s.Claim(ctx, storage.ClaimRequest{Owner: "w", Workflows: []string{"other"}, Limit: 1, LeaseFor: time.Minute})
	if err != nil || len(cl) != 1 {
		t.Fatalf("Claim = %v, %v", cl, err)
	}
	if err := s.Complete(ctx, storage.CompleteRequest{Lease: cl[0].Lease, Status: storage.StatusComplete}); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Hour)
	if res, err := s.Purge(ctx, storage.PurgeRequest{FinishedBefore: clock.Now(), Limit: 10}); err != nil || res.Runs != 1 {
		t.Fatalf("Purge = %+v, %v; want the finished run", res, err)
	}
	if n := rows(); n != 4 {
		t.Fatalf("%d attribute rows after a purge, want 4", n)
	}
	res, err := s.CreateRuns(ctx, []storage.NewRun{{ID: "parent", Workflow: "wf", OnExisting: storage.ExistingReplace,
		Replace:    &storage.ReplaceTerms{Error: storage.ErrorInfo{Message: "replaced"}, ChildError: storage.ErrorInfo{Message: "parent replaced"}},
		Attributes: []storage.Attr{storage.BoolAttr("vip", true)}}})
	if err != nil || !res[0].Replaced {
		t.Fatalf("replacing create = %+v, %v", res, err)
	}
	if n := rows(); n != 1 {
		t.Fatalf("%d attribute rows after the family was replaced, want the new run's 1", n)
	}
	// A ref given again (the deleted runs' were the last) finds none.
	if _, err := s.CreateRuns(ctx, []storage.NewRun{{ID: "x", Workflow: "wf"}, {ID: "y", Workflow: "wf"}}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"x", "y"} {
		if rec, err := s.GetRun(ctx, id); err != nil || rec.Attributes != nil {
			t.Fatalf("GetRun(%s).Attributes = %v, %v; want none", id, rec.Attributes, err)
		}
	}
}

// A database written by schema version 13 is upgraded in place: its runs
// list in creation order (to the microsecond, then by ID) with no
// attributes, take attributes from then on, its checkpoints have no
// input and its workflows declare none.
func TestMigrateFromVersion13(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := openAtVersion(t, filepath.Join(t.TempDir(), "stem.db"), 13)
	defer s.Close()
	n := time.Now().UnixNano()
	migrateSeeded(t, ctx, s, []seedRow{
		{`INSERT INTO runs (ref, id, workflow, status, ready_at, created_at, updated_at) VALUES
			(1, 'c', 'wf', 'queued', ?1, ?1, ?1), (2, 'b', 'wf', 'queued', ?2, ?2, ?2), (3, 'a', 'wf', 'queued', ?3, ?3, ?3)`, []any{n, n + 1, n + 5000}},
		{`INSERT INTO run_data (ref) VALUES (1), (2), (3)`, nil},
		{`INSERT INTO executions (run_ref, number, started_at) VALUES (1, 1, ?1), (2, 1, ?1), (3, 1, ?1)`, []any{n}},
		{`INSERT INTO checkpoints (run_ref, execution, key, kind, output, created_at) VALUES (1, 1, 'a@v1', 'step', x'01', ?1)`, []any{n}},
		{`INSERT INTO workflow_types (name, version, worker, updated_at) VALUES ('wf', 1, 'w', ?1)`, []any{n}},
	})
	page, err := s.ListRuns(ctx, storage.ListRunsQuery{Order: storage.OrderCreated})
	var got []string
	for _, r := range page.Runs {
		got = append(got, r.ID)
		if r.Attributes != nil {
			t.Fatalf("run %s has attributes %v after the upgrade", r.ID, r.Attributes)
		}
	}
	// b and c are within one microsecond, so by ID.
	if err != nil || !slices.Equal(got, []string{"b", "c", "a"}) {
		t.Fatalf("ListRuns in creation order = %v, %v; want b, c, a", got, err)
	}
	h, err := s.ListSteps(ctx, storage.StepsQuery{RunID: "c"})
	if err != nil || len(h.Steps) != 1 || h.Steps[0].Input != nil {
		t.Fatalf("ListSteps = %+v, %v; want a@v1 without input", h.Steps, err)
	}
	c, err := s.GetCatalog(ctx)
	if err != nil || len(c.Workflows) != 1 || c.Workflows[0].Attributes != nil {
		t.Fatalf("GetCatalog = %+v, %v; want wf declaring none", c.Workflows, err)
	}
	res, err := s.CreateRuns(ctx, []storage.NewRun{{ID: "d", Workflow: "wf", Attributes: []storage.Attr{storage.StringAttr("customer", "C-1")}}})
	if err != nil || len(res[0].Run.Attributes) != 1 {
		t.Fatalf("CreateRuns after the upgrade = %+v, %v", res, err)
	}
	page, err = s.ListRuns(ctx, storage.ListRunsQuery{Order: storage.OrderCreated, Descending: true,
		Where: []storage.AttrFilter{{Op: storage.OpEq, Value: storage.StringAttr("customer", "C-1")}}})
	if err != nil || len(page.Runs) != 1 || page.Runs[0].ID != "d" {
		t.Fatalf("ListRuns by attribute after the upgrade = %+v, %v; want d", page.Runs, err)
	}
}

// Attribute values come back exactly as stored (normalized), whatever
// they hold: strings with the separators of the stored text, digits,
// every kind of UTF-8 and the longest allowed; numbers at float64's
// extremes and fractions that decimal does not write exactly; times at
// the ends of the allowed years.
func TestAttrValuesRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := openTemp(t)
	attrs := []storage.Attr{
		storage.StringAttr("colon", "3:abc:"),
		storage.StringAttr("digits", "12"),
		storage.StringAttr("empty", ""),
		storage.StringAttr("long", strings.Repeat("\u00e9", storage.MaxAttrString/2)),
		storage.StringAttr("unicode", "\u65e5\u672c\U0001F600\t\n\"\\"),
		storage.NumberAttr("max", 1.7976931348623157e308),
		storage.NumberAttr("tiny", -5e-324),
		storage.NumberAttr("tenth", 0.1),
		storage.NumberAttr("big-int", 1<<53),
		storage.NumberAttr("zero", 0),
		storage.TimeAttr("first", time.Date(1, 1, 1, 0, 0, 0, 1000, time.UTC)),
		storage.TimeAttr("last", time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC)),
		storage.TimeAttr("before-1970", time.Date(1969, 12, 31, 23, 59, 59, 999999000, time.UTC)),
		storage.BoolAttr("yes", true),
		storage.BoolAttr("no", false),
	}
	res, err := s.CreateRuns(ctx, []storage.NewRun{{ID: "r", Workflow: "wf", Attributes: attrs}})
	if err != nil {
		t.Fatal(err)
	}
	want := storage.NormalizeAttrs(attrs)
	if !attrsEqual(res[0].Run.Attributes, want) {
		t.Fatalf("attributes = %v\nwant %v", res[0].Run.Attributes, want)
	}
	for _, a := range want {
		page, err := s.ListRuns(ctx, storage.ListRunsQuery{Where: []storage.AttrFilter{{Op: storage.OpEq, Value: a}}})
		if err != nil || len(page.Runs) != 1 {
			t.Errorf("ListRuns where %s = %d runs, %v; want r", a, len(page.Runs), err)
		}
	}
}

// A listing with several attribute filters, whose statement's text has as
// many shapes as their combinations, is not kept prepared on the read
// connections; one with a single filter is.
func TestMultiFilterStatementsNotKept(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := openTemp(t)
	kept := func() int {
		n := 0
		s.reads.mu.Lock()
		defer s.reads.mu.Unlock()
		for _, rc := range s.reads.all {
			if rc.c != nil {
				n += len(rc.c.stmts)
			}
		}
		return n
	}
	one := storage.AttrFilter{Op: storage.OpEq, Value: storage.StringAttr("customer", "C-1")}
	if _, err := s.ListRuns(ctx, storage.ListRunsQuery{Where: []storage.AttrFilter{one}}); err != nil {
		t.Fatal(err)
	}
	before := kept()
	if before == 0 {
		t.Fatal("a listing with one filter kept no statement")
	}
	for i := range 20 {
		where := []storage.AttrFilter{one}
		for j := range 1 + i%3 {
			where = append(where, storage.AttrFilter{Op: storage.OpGe, Value: storage.NumberAttr(fmt.Sprintf("n%d", j), float64(i))})
		}
		if _, err := s.ListRuns(ctx, storage.ListRunsQuery{Where: where, Descending: i%2 == 0, Order: storage.OrderCreated}); err != nil {
			t.Fatal(err)
		}
	}
	if after := kept(); after != before {
		t.Fatalf("%d statements kept after listings with several filters, %d before", after, before)
	}
}
