package pgstore

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stemflow/stem/storage"
	"github.com/stemflow/stem/stores/storetest"
)

// seedAttrListing creates n runs r-000 on, in batches of batch runs
// created at one instant each (so that many runs share a creation time),
// the batches in shuffled ID order (so that creation order is not ID
// order), with attributes of every type, some of them missing, customer a
// number on some, every tenth run a child, of two workflows, every third
// one complete. It returns the time base of the placed attribute.
func seedAttrListing(t *testing.T, s *Store, clock *storetest.Clock, n, batch int) time.Time {
	t.Helper()
	ctx := context.Background()
	base := time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)
	order := rand.New(rand.NewPCG(7, 35)).Perm(n)
	for start := 0; start < n; start += batch {
		var runs []storage.NewRun
		for _, i := range order[start:min(start+batch, n)] {
			r := storage.NewRun{ID: fmt.Sprintf("r-%03d", i), Workflow: fmt.Sprintf("wf-%d", i%2)}
			if i%10 == 9 {
				r.ParentID = "r-000"
			}
			if i%11 == 5 {
				r.Attributes = append(r.Attributes, storage.NumberAttr("customer", float64(i%3)))
			} else {
				r.Attributes = append(r.Attributes, storage.StringAttr("customer", fmt.Sprintf("c-%d", i%7)))
			}
			if i%4 != 0 {
				r.Attributes = append(r.Attributes, storage.NumberAttr("total", float64(i%13)-3.5))
			}
			if i%3 != 0 {
				r.Attributes = append(r.Attributes, storage.TimeAttr("placed", base.Add(time.Duration(i%5)*time.Hour+time.Duration(i%2)*time.Microsecond)))
			}
			if i%5 != 0 {
				r.Attributes = append(r.Attributes, storage.BoolAttr("vip", i%2 == 0))
			}
			r.Attributes = append(r.Attributes, storage.StringAttr("note", fmt.Sprintf("ord-%d", i)))
			runs = append(runs, r)
		}
		if _, err := s.CreateRuns(ctx, runs); err != nil {
			t.Fatal(err)
		}
		clock.Advance(1500 * time.Nanosecond)
	}
	if _, err := s.pool.Exec(ctx, `UPDATE `+s.schema+`.runs SET status = 'complete', ready_at = NULL, ended_at = created_at
		WHERE right(id, 3)::int % 3 = 0`); err != nil {
		t.Fatal(err)
	}
	return base
}

// listAll reads every page of q, and the IDs in order.
func listAll(t *testing.T, s *Store, q storage.ListRunsQuery) ([]string, int) {
	t.Helper()
	var (
		ids   []string
		pages int
	)
	for {
		page, err := s.ListRuns(context.Background(), q)
		if err != nil {
			t.Fatalf("ListRuns(%+v): %v", q, err)
		}
		pages++
		for _, r := range page.Runs {
			ids = append(ids, r.ID)
			if !q.Listed(&r) {
				t.Fatalf("ListRuns(%+v) listed %s, which the query does not keep: %+v", q, r.ID, r.Attributes)
			}
		}
		if page.Next == "" || pages > 1000 {
			return ids, pages
		}
		q.After = page.Next
	}
}

// wantListed is the reference listing of q over every run: the runs
// q.Listed keeps, in q's order.
func wantListed(all []storage.RunRecord, q storage.ListRunsQuery) []string {
	var kept []storage.RunRecord
	for _, r := range all {
		if q.Listed(&r) {
			kept = append(kept, r)
		}
	}
	slices.SortFunc(kept, func(a, b storage.RunRecord) int {
		c := 0
		if q.Order == storage.OrderCreated {
			c = a.CreatedAt.Compare(b.CreatedAt)
		}
		c = cmp.Or(c, strings.Compare(a.ID, b.ID))
		if q.Descending {
			return -c
		}
		return c
	})
	ids := make([]string, len(kept))
	for i, r := range kept {
		ids[i] = r.ID
	}
	return ids
}

// TestListRunsByAttributes: every combination of attribute filters (each
// type, each comparison, several at once, a type a run's attribute does
// not have, a name no run has), of the orders, ascending and descending,
// and of the runs' own filters lists, page by page past each cursor, the
// runs ListRunsQuery.Listed keeps over every run, in the query's order:
// creation time then ID, among runs many of which share a creation time.
func TestListRunsByAttributes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := storetest.NewClock(storetest.Start)
	s := newTestStore(t, Options{Clock: clock})
	base := seedAttrListing(t, s, clock, 240, 30)
	if _, err := s.pool.Exec(ctx, "ANALYZE "+s.schema+".runs, "+s.schema+".run_attrs"); err != nil {
		t.Fatal(err)
	}
	var all []storage.RunRecord
	for i := range 240 {
		rec, err := s.GetRun(ctx, fmt.Sprintf("r-%03d", i))
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, rec)
	}
	f := func(op storage.AttrOp, a storage.Attr) storage.AttrFilter {
		return storage.AttrFilter{Op: op, Value: a}
	}
	wheres := [][]storage.AttrFilter{
		nil,
		{f(storage.OpEq, storage.StringAttr("customer", "c-3"))},
		{f(storage.OpPrefix, storage.StringAttr("customer", "c-"))},
		{f(storage.OpPrefix, storage.StringAttr("note", "ord-1"))},
		{f(storage.OpGe, storage.NumberAttr("total", 2))},
		{f(storage.OpLt, storage.NumberAttr("total", 0))},
		{f(storage.OpEq, storage.NumberAttr("total", 5.5))},
		{f(storage.OpGe, storage.TimeAttr("placed", base.Add(2*time.Hour)))},
		{f(storage.OpLt, storage.TimeAttr("placed", base.Add(time.Hour)))},
		{f(storage.OpEq, storage.TimeAttr("placed", base.Add(3*time.Hour)))},
		{f(storage.OpLe, storage.Attr{Name: "placed", Type: storage.AttrTime, Time: base.Add(3*time.Hour + 500*time.Nanosecond)})},
		{f(storage.OpGt, storage.Attr{Name: "placed", Type: storage.AttrTime, Time: base.Add(3*time.Hour + 500*time.Nanosecond)})},
		{f(storage.OpEq, storage.Attr{Name: "placed", Type: storage.AttrTime, Time: base.Add(3*time.Hour + 500*time.Nanosecond)})},
		{f(storage.OpEq, storage.BoolAttr("vip", true))},
		{f(storage.OpEq, storage.BoolAttr("vip", false))},
		{f(storage.OpEq, storage.NumberAttr("customer", 1))},
		{f(storage.OpEq, storage.StringAttr("missing", "x"))},
		{f(storage.OpEq, storage.StringAttr("customer", "c-3")), f(storage.OpGe, storage.NumberAttr("total", 0))},
		{f(storage.OpGt, storage.NumberAttr("total", -2)), f(storage.OpLe, storage.NumberAttr("total", 6)), f(storage.OpEq, storage.BoolAttr("vip", true))},
		{f(storage.OpEq, storage.BoolAttr("vip", false)), f(storage.OpPrefix, storage.StringAttr("customer", "c-1"))},
	}
	extras := []storage.ListRunsQuery{
		{},
		{TopLevel: true},
		{Workflow: "wf-1"},
		{Status: storage.StatusComplete},
		{CreatedFrom: storetest.Start.Add(4 * time.Microsecond), IDPrefix: "r-1"},
	}
	queries := 0
	for _, where := range wheres {
		for _, order := range []storage.RunOrder{storage.OrderID, storage.OrderCreated} {
			for _, desc := range []bool{false, true} {
				for _, extra := range extras {
					q := extra
					q.Where, q.Order, q.Descending, q.Limit = where, order, desc, 9
					got, _ := listAll(t, s, q)
					q.Limit = 0
					if want := wantListed(all, q); !slices.Equal(got, want) {
						t.Errorf("ListRuns(where %v, order %q, descending %v, %+v):\n got %v\nwant %v", where, order, desc, extra, got, want)
					}
					queries++
				}
			}
		}
	}
	t.Logf("%d listings checked", queries)
}
