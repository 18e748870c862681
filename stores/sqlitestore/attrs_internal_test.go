package sqlitestore

import (
	"cmp"
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
		}
	}
}

// attrsEqual reports whether a and b hold the same attributes in the same
// order.
func attrsEqual(a, b []storage.Attr) bool {
	return slices.EqualFunc(a, b, storage.Attr.Equal)
}
