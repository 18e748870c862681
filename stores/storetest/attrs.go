package storetest

import (
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/stemflow/stem/storage"
)

// attrCases are the runs' search attributes (runs.go and checkpoint.go in
// stores), the listings that filter by them, by creation time and by
// parentage (runs.go), the conditional restart a bulk action makes
// (control.go), and what a checkpoint keeps of its call's input
// (checkpoint.go).
var attrCases = []testCase{
	{"attributes/a create stores them normalized and every read returns them", testAttrsCreate},
	{"attributes/a checkpoint merges them when written, not when it existed", testAttrsCheckpoint},
	{"attributes/a merge over the limit is refused with nothing written", testAttrsOverLimit},
	{"attributes/malformed ones are refused with nothing written", testAttrsBadInput},
	{"attributes/filters compare by type: equality, ranges and prefix", testAttrsFilters},
	{"attributes/filters page in both orders and combine with the others", testAttrsFilterPages},
	{"attributes/restart and continue-as-new keep them", testAttrsKept},
	{"attributes/purge and a replacing create drop the old run's", testAttrsDropped},
	{"attributes/a debounce join takes the last start's", testAttrsDebounce},
	{"attributes/the catalog records a workflow's declarations", testAttrsCatalog},
	{"listing/by creation time, both ways, past a cursor", testListByCreated},
	{"listing/top-level runs leave children out", testListTopLevel},
	{"listing/bad attribute filters and cursors are refused", testListAttrBadInput},
	{"restart/a conditional restart acts once, also when resumed from a stale page", testRestartIfExecution},
	{"checkpoint/the input of the call is kept for operators", testCheckpointInput},
}

// at is a time attribute's value in the cases: a fixed instant off UTC
// and below the microsecond, which stores keep in UTC to the microsecond.
var at = time.Date(2026, 11, 28, 10, 0, 0, 123456789, time.FixedZone("CET", 3600))

func (f *fixture) wantAttrs(what string, got []storage.Attr, want ...storage.Attr) {
	f.t.Helper()
	want = storage.NormalizeAttrs(want)
	if len(got) != len(want) {
		f.t.Fatalf("%s: attributes %v, want %v", what, got, want)
	}
	for i := range got {
		if !got[i].Equal(want[i]) || got[i].Time.Location() != time.UTC && !got[i].Time.IsZero() {
			f.t.Fatalf("%s: attributes %v, want %v (sorted by name, times in UTC)", what, got, want)
		}
	}
}

// ids lists the IDs of every run q matches, page by page.
func (f *fixture) ids(q storage.ListRunsQuery) string {
	f.t.Helper()
	return fmt.Sprint(f.pagesOf(q))
}

func testAttrsCreate(f *fixture) {
	attrs := []storage.Attr{
		storage.StringAttr("order", "8812"),
		storage.NumberAttr("total", 99.5),
		{Name: "placed", Type: storage.AttrTime, Time: at},
		storage.BoolAttr("express", true),
		storage.StringAttr("customer", "C-7"),
	}
	want := []storage.Attr{
		storage.BoolAttr("express", true), storage.StringAttr("customer", "C-7"), storage.StringAttr("order", "8812"),
		storage.TimeAttr("placed", at), storage.NumberAttr("total", 99.5),
	}
	res, err := f.store.CreateRuns(f.ctx, []storage.NewRun{
		{ID: "run-1", Workflow: wf, Input: []byte("1"), Attributes: attrs},
		{ID: "run-2", Workflow: wf, Input: []byte("2")},
	})
	if err != nil {
		f.t.Fatalf("CreateRuns: %v", err)
	}
	f.wantAttrs("CreateRuns' record", res[0].Run.Attributes, want...)
	f.wantAttrs("GetRun", f.get("run-1").Attributes, want...)
	if got := f.get("run-2").Attributes; got != nil {
		f.t.Fatalf("a run created without attributes has %v, want nil", got)
	}
	if got := f.get("run-1").Attributes[3].Time; !got.Equal(at.Truncate(time.Microsecond)) {
		f.t.Fatalf("time attribute = %v, want %v to the microsecond", got, at)
	}
	page, err := f.store.ListRuns(f.ctx, storage.ListRunsQuery{})
	if err != nil {
		f.t.Fatalf("ListRuns: %v", err)
	}
	f.wantAttrs("ListRuns", page.Runs[0].Attributes, want...)
	// A create that finds the run returns it with its attributes, and
	// changes nothing.
	res, err = f.store.CreateRuns(f.ctx, []storage.NewRun{{ID: "run-1", Workflow: wf, Input: []byte("x"), Attributes: []storage.Attr{storage.StringAttr("order", "other")}}})
	if err != nil || res[0].Created {
		f.t.Fatalf("CreateRuns of an existing ID = %+v, %v", res, err)
	}
	f.wantAttrs("the existing run's record", res[0].Run.Attributes, want...)
	f.wantAttrs("GetRun after a create of its ID", f.get("run-1").Attributes, want...)
}

// attrStep is a checkpoint of key that sets attrs.
func attrStep(l storage.Lease, key string, attrs ...storage.Attr) storage.CheckpointRequest {
	return storage.CheckpointRequest{Lease: l, LeaseFor: lease,
		Checkpoint: storage.Checkpoint{Key: key, Kind: storage.KindAttr}, Attributes: attrs}
}

func testAttrsCheckpoint(f *fixture) {
	c := f.startAs(storage.NewRun{ID: "run-1", Workflow: wf, Attributes: []storage.Attr{storage.StringAttr("stage", "new"), storage.NumberAttr("total", 5)}})
	f.written(attrStep(c.Lease, "attr:stage", storage.StringAttr("stage", "packed"), storage.StringAttr("carrier", "dhl")))
	f.wantAttrs("after a checkpoint set two", f.get("run-1").Attributes,
		storage.StringAttr("carrier", "dhl"), storage.StringAttr("stage", "packed"), storage.NumberAttr("total", 5))
	// A write of a key that exists writes no attribute either.
	res, err := f.store.Checkpoint(f.ctx, attrStep(c.Lease, "attr:stage", storage.StringAttr("stage", "replayed")))
	if err != nil || res.Existing == nil {
		f.t.Fatalf("Checkpoint of an existing key = %+v, %v; want Existing", res, err)
	}
	f.wantAttrs("after a checkpoint that existed", f.get("run-1").Attributes,
		storage.StringAttr("carrier", "dhl"), storage.StringAttr("stage", "packed"), storage.NumberAttr("total", 5))
	// A name set again may change its type; a step's checkpoint can carry
	// attributes too.
	req := stepReq(c.Lease, "s@v1", "out")
	req.Attributes = []storage.Attr{storage.BoolAttr("stage", false)}
	f.written(req)
	f.wantAttrs("after a step set one again", f.get("run-1").Attributes,
		storage.StringAttr("carrier", "dhl"), storage.BoolAttr("stage", false), storage.NumberAttr("total", 5))
	page, err := f.store.ListRuns(f.ctx, storage.ListRunsQuery{Where: []storage.AttrFilter{{Op: storage.OpEq, Value: storage.StringAttr("stage", "packed")}}})
	if err != nil || len(page.Runs) != 0 {
		f.t.Fatalf("a filter on the value replaced = %v, %v; want none", recordIDs(page.Runs), err)
	}
	f.wantPage(storage.ListRunsQuery{Where: []storage.AttrFilter{{Op: storage.OpEq, Value: storage.BoolAttr("stage", false)}}}, "run-1")
	// The last checkpoint may complete the run and set attributes in one
	// write.
	done := attrStep(c.Lease, "attr:outcome", storage.StringAttr("outcome", "shipped"))
	done.Complete = &storage.CompleteRequest{Status: storage.StatusComplete, Output: []byte("ok")}
	if res := f.written(done); !res.Completed {
		f.t.Fatalf("checkpoint with a completion = %+v, want completed", res)
	}
	f.wantPage(where(eq(storage.StringAttr("outcome", "shipped"))), "run-1")
	c = f.startAs(storage.NewRun{ID: "run-2", Workflow: "wf-2"})
	// The lease still fences: a lost lease writes no attribute.
	f.terminate(storage.TerminateRequest{RunID: "run-2", Error: storage.ErrorInfo{Message: "terminated"}})
	_, err = f.store.Checkpoint(f.ctx, attrStep(c.Lease, "attr:late", storage.StringAttr("late", "x")))
	f.wantErr(err, storage.ErrLeaseLost, "a checkpoint with attributes under a lost lease")
	if got := f.get("run-2").Attributes; got != nil {
		f.t.Fatalf("after a fenced write was refused: attributes %v, want none", got)
	}
}

// wantPage fails unless the first page of q holds exactly ids, in order.
func (f *fixture) wantPage(q storage.ListRunsQuery, ids ...string) {
	f.t.Helper()
	page, err := f.store.ListRuns(f.ctx, q)
	if err != nil {
		f.t.Fatalf("ListRuns(%+v): %v", q, err)
	}
	if got := recordIDs(page.Runs); !reflect.DeepEqual(got, ids) && !(len(got) == 0 && len(ids) == 0) {
		f.t.Fatalf("ListRuns(%s) = %v, want %v", describeQuery(q), got, ids)
	}
}

func describeQuery(q storage.ListRunsQuery) string {
	var parts []string
	for _, w := range q.Where {
		parts = append(parts, w.String())
	}
	return fmt.Sprintf("where %s, order %q desc %v, top-level %v, %+v", strings.Join(parts, " and "), q.Order, q.Descending, q.TopLevel, q)
}

func testAttrsOverLimit(f *fixture) {
	var attrs []storage.Attr
	for i := range storage.MaxAttributes - 1 {
		attrs = append(attrs, storage.NumberAttr(fmt.Sprintf("a%02d", i), float64(i)))
	}
	c := f.startAs(storage.NewRun{ID: "run-1", Workflow: wf, Attributes: attrs})
	before := f.snapshot()
	_, err := f.store.Checkpoint(f.ctx, attrStep(c.Lease, "attr:x", storage.StringAttr("x", "1"), storage.StringAttr("y", "2")))
	f.wantErr(err, storage.ErrInvalidArgument, "a checkpoint whose attributes would make 33")
	f.wantUnchanged(before, "a refused merge")
	// Replacing values of names the run has is no growth.
	f.written(attrStep(c.Lease, "attr:a00", storage.NumberAttr("a00", -1), storage.StringAttr("x", "1")))
	got := f.get("run-1").Attributes
	if len(got) != storage.MaxAttributes || got[0].Num != -1 {
		f.t.Fatalf("after filling to the limit: %d attributes, first %v", len(got), got[0])
	}
}

func testAttrsBadInput(f *fixture) {
	f.create("keep", "other", "x")
	c := f.startAs(storage.NewRun{ID: "run-1", Workflow: wf})
	before := f.snapshot()
	var tooMany []storage.Attr
	for i := range storage.MaxAttributes + 1 {
		tooMany = append(tooMany, storage.BoolAttr(fmt.Sprintf("b%02d", i), true))
	}
	for what, attrs := range map[string][]storage.Attr{
		"an empty name":          {storage.StringAttr("", "x")},
		"a name with a space":    {storage.StringAttr("my attr", "x")},
		"a name over 64 bytes":   {storage.StringAttr(strings.Repeat("n", storage.MaxAttrName+1), "x")},
		"a string over 256":      {storage.StringAttr("s", strings.Repeat("v", storage.MaxAttrString+1))},
		"a string with NUL":      {storage.StringAttr("s", "a\x00b")},
		"a string not UTF-8":     {storage.StringAttr("s", "a\xffb")},
		"NaN":                    {{Name: "n", Type: storage.AttrNumber, Num: nan()}},
		"a zero time":            {{Name: "t", Type: storage.AttrTime}},
		"an unknown type":        {{Name: "u", Type: "uuid", Str: "x"}},
		"a name twice":           {storage.StringAttr("s", "1"), storage.NumberAttr("s", 2)},
		"more than the run cap":  tooMany,
		"a time in year 10000":   {{Name: "t", Type: storage.AttrTime, Time: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}},
		"an untyped empty value": {{Name: "e"}},
	} {
		_, err := f.store.CreateRuns(f.ctx, []storage.NewRun{{ID: "new", Workflow: wf, Attributes: attrs}})
		f.wantErr(err, storage.ErrInvalidArgument, "a create with "+what)
		_, err = f.store.Checkpoint(f.ctx, attrStep(c.Lease, "attr:bad", attrs...))
		f.wantErr(err, storage.ErrInvalidArgument, "a checkpoint with "+what)
	}
	f.wantUnchanged(before, "malformed attributes")
}

func nan() float64 {
	var zero float64
	return zero / zero
}

// attrRuns creates the runs the filter cases list: run-1 to run-6 with
// customer, total, placed and express set in a pattern, run-7 with none,
// and run-8 whose "total" is a string.
func (f *fixture) attrRuns() {
	f.t.Helper()
	base := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	for i := 1; i <= 6; i++ {
		cust := []string{"C-7", "C-70", "C-8"}[(i-1)%3]
		f.createRun(storage.NewRun{ID: fmt.Sprintf("run-%d", i), Workflow: wf, Attributes: []storage.Attr{
			storage.StringAttr("customer", cust),
			storage.NumberAttr("total", float64(i*10)-0.5),
			storage.TimeAttr("placed", base.Add(time.Duration(i)*24*time.Hour)),
			storage.BoolAttr("express", i%2 == 0),
		}})
	}
	f.createRun(storage.NewRun{ID: "run-7", Workflow: wf})
	f.createRun(storage.NewRun{ID: "run-8", Workflow: "other", Attributes: []storage.Attr{storage.StringAttr("total", "30"), storage.StringAttr("customer", "C-7")}})
}

func where(filters ...storage.AttrFilter) storage.ListRunsQuery {
	return storage.ListRunsQuery{Where: filters}
}

func eq(a storage.Attr) storage.AttrFilter { return storage.AttrFilter{Op: storage.OpEq, Value: a} }

func cmp(op storage.AttrOp, a storage.Attr) storage.AttrFilter {
	return storage.AttrFilter{Op: op, Value: a}
}

func testAttrsFilters(f *fixture) {
	f.attrRuns()
	day := func(d int) time.Time { return time.Date(2026, 11, 1+d, 0, 0, 0, 0, time.UTC) }
	for _, tc := range []struct {
		q    storage.ListRunsQuery
		want []string
	}{
		{where(eq(storage.StringAttr("customer", "C-7"))), []string{"run-1", "run-4", "run-8"}},
		{where(eq(storage.StringAttr("customer", "C-"))), nil},
		{where(cmp(storage.OpPrefix, storage.StringAttr("customer", "C-7"))), []string{"run-1", "run-2", "run-4", "run-5", "run-8"}},
		{where(cmp(storage.OpPrefix, storage.StringAttr("customer", "C-70"))), []string{"run-2", "run-5"}},
		{where(cmp(storage.OpPrefix, storage.StringAttr("customer", "c-"))), nil},
		{where(eq(storage.NumberAttr("total", 29.5))), []string{"run-3"}},
		{where(cmp(storage.OpLt, storage.NumberAttr("total", 29.5))), []string{"run-1", "run-2"}},
		{where(cmp(storage.OpLe, storage.NumberAttr("total", 29.5))), []string{"run-1", "run-2", "run-3"}},
		{where(cmp(storage.OpGt, storage.NumberAttr("total", 39.5))), []string{"run-5", "run-6"}},
		{where(cmp(storage.OpGe, storage.NumberAttr("total", 39.5))), []string{"run-4", "run-5", "run-6"}},
		{where(cmp(storage.OpGe, storage.NumberAttr("total", -1e300)), cmp(storage.OpLt, storage.NumberAttr("total", 20))), []string{"run-1", "run-2"}},
		// The string "30" of run-8 is no number.
		{where(eq(storage.NumberAttr("total", 30))), nil},
		{where(eq(storage.StringAttr("total", "30"))), []string{"run-8"}},
		{where(cmp(storage.OpGe, storage.TimeAttr("placed", day(3))), cmp(storage.OpLt, storage.TimeAttr("placed", day(5)))), []string{"run-3", "run-4"}},
		{where(cmp(storage.OpGt, storage.TimeAttr("placed", day(3)))), []string{"run-4", "run-5", "run-6"}},
		{where(eq(storage.TimeAttr("placed", day(2)))), []string{"run-2"}},
		{where(eq(storage.BoolAttr("express", true))), []string{"run-2", "run-4", "run-6"}},
		{where(eq(storage.BoolAttr("express", false)), eq(storage.StringAttr("customer", "C-7"))), []string{"run-1"}},
		{where(eq(storage.StringAttr("missing", "x"))), nil},
		{storage.ListRunsQuery{Workflow: "other", Where: []storage.AttrFilter{eq(storage.StringAttr("customer", "C-7"))}}, []string{"run-8"}},
	} {
		f.wantPage(tc.q, tc.want...)
	}
}

func testAttrsFilterPages(f *fixture) {
	f.attrRuns()
	f.pause("run-4")
	f.pause("run-5")
	c7 := eq(storage.StringAttr("customer", "C-7"))
	cheap := cmp(storage.OpLt, storage.NumberAttr("total", 50))
	for _, tc := range []struct {
		q    storage.ListRunsQuery
		want string
	}{
		{storage.ListRunsQuery{Where: []storage.AttrFilter{c7}, Limit: 2}, "[[run-1 run-4] [run-8]]"},
		{storage.ListRunsQuery{Where: []storage.AttrFilter{c7}, Limit: 2, Descending: true}, "[[run-8 run-4] [run-1]]"},
		{storage.ListRunsQuery{Where: []storage.AttrFilter{cheap}, Limit: 2}, "[[run-1 run-2] [run-3 run-4] [run-5]]"},
		{storage.ListRunsQuery{Where: []storage.AttrFilter{cheap}, Limit: 2, Descending: true}, "[[run-5 run-4] [run-3 run-2] [run-1]]"},
		{storage.ListRunsQuery{Where: []storage.AttrFilter{cheap}, Status: storage.StatusPaused}, "[[run-4 run-5]]"},
		{storage.ListRunsQuery{Where: []storage.AttrFilter{cheap}, Workflow: wf, Status: storage.StatusQueued, Limit: 1}, "[[run-1] [run-2] [run-3]]"},
		{storage.ListRunsQuery{Where: []storage.AttrFilter{cheap}, IDPrefix: "run-2"}, "[[run-2]]"},
		{storage.ListRunsQuery{Where: []storage.AttrFilter{cmp(storage.OpPrefix, storage.StringAttr("customer", "C-7"))}, Limit: 3, Order: storage.OrderCreated, Descending: true}, "[[run-8 run-5 run-4] [run-2 run-1]]"},
	} {
		if got := f.ids(tc.q); got != tc.want {
			f.t.Fatalf("pages of %s = %s, want %s", describeQuery(tc.q), got, tc.want)
		}
	}
}

func testAttrsKept(f *fixture) {
	c := f.startAs(storage.NewRun{ID: "run-1", Workflow: wf, Attributes: []storage.Attr{storage.StringAttr("customer", "C-7")}})
	f.written(attrStep(c.Lease, "attr:stage", storage.StringAttr("stage", "charged")))
	want := []storage.Attr{storage.StringAttr("customer", "C-7"), storage.StringAttr("stage", "charged")}
	if err := f.store.Restart(f.ctx, storage.RestartRequest{RunID: "run-1"}); err != nil {
		f.t.Fatalf("Restart: %v", err)
	}
	f.wantAttrs("after a restart", f.get("run-1").Attributes, want...)
	f.wantPage(where(eq(storage.StringAttr("stage", "charged"))), "run-1")
	f.letGo(c.Lease)
	c = f.claimOne("worker-b", wf)
	f.continueAsNew(c.Lease, "next")
	f.wantAttrs("after continue-as-new", f.get("run-1").Attributes, want...)
	f.wantPage(where(eq(storage.StringAttr("customer", "C-7"))), "run-1")
}

func testAttrsDropped(f *fixture) {
	c := f.startAs(storage.NewRun{ID: "run-1", Workflow: wf, Attributes: []storage.Attr{storage.StringAttr("customer", "C-7")}})
	f.complete(c.Lease, "done")
	f.createRun(storage.NewRun{ID: "run-2", Workflow: wf, Attributes: []storage.Attr{storage.StringAttr("customer", "C-7")}})
	// A replacing create gives the run under the ID the new attributes.
	res := f.createRes(storage.NewRun{ID: "run-2", Workflow: wf, Input: []byte("second"), OnExisting: storage.ExistingReplace, Replace: replaceTerms,
		Attributes: []storage.Attr{storage.StringAttr("customer", "C-9")}})
	if !res.Created || !res.Replaced {
		f.t.Fatalf("replacing create = %+v", res)
	}
	f.wantAttrs("the replacement's attributes", f.get("run-2").Attributes, storage.StringAttr("customer", "C-9"))
	f.wantPage(where(eq(storage.StringAttr("customer", "C-7"))), "run-1")
	f.wantPage(where(eq(storage.StringAttr("customer", "C-9"))), "run-2")
	f.clock.Advance(time.Hour)
	if got := f.purge(storage.PurgeRequest{FinishedBefore: f.now(), Limit: 10}); got.Runs != 1 {
		f.t.Fatalf("purge = %+v, want 1 run", got)
	}
	f.wantPage(where(eq(storage.StringAttr("customer", "C-7"))))
	f.wantPage(where(cmp(storage.OpPrefix, storage.StringAttr("customer", "C"))), "run-2")
	// The ID may be used again: the new run has only its own.
	f.createRun(storage.NewRun{ID: "run-1", Workflow: wf})
	if got := f.get("run-1").Attributes; got != nil {
		f.t.Fatalf("a run created under a purged run's ID has %v, want none", got)
	}
	f.wantPage(where(eq(storage.StringAttr("customer", "C-7"))))
}

func testAttrsDebounce(f *fixture) {
	for _, keepFirst := range []bool{false, true} {
		key := fmt.Sprintf("k-%v", keepFirst)
		debounced := func(id, cust string) storage.NewRun {
			return storage.NewRun{ID: id, Workflow: wf, Input: []byte(cust), Attributes: []storage.Attr{storage.StringAttr("customer", cust)},
				Key: &storage.StartKey{Key: key, Debounce: 10 * time.Second, KeepFirst: keepFirst}}
		}
		first := "a-" + key
		f.createRes(debounced(first, "C-1"))
		res := f.createRes(debounced("b-"+key, "C-2"))
		if !res.Joined {
			f.t.Fatalf("debounced create = %+v, want joined", res)
		}
		want := "C-2"
		if keepFirst {
			want = "C-1"
		}
		f.wantAttrs(fmt.Sprintf("the window's run after a join (keep first %v)", keepFirst), f.get(first).Attributes, storage.StringAttr("customer", want))
		f.wantPage(storage.ListRunsQuery{IDPrefix: first, Where: []storage.AttrFilter{eq(storage.StringAttr("customer", want))}}, first)
	}
}

func testAttrsCatalog(f *fixture) {
	decls := []storage.AttrDecl{
		{Name: "order", Type: storage.AttrString, From: "id"},
		{Name: "total", Type: storage.AttrNumber, From: "amount.value"},
		{Name: "stage", Type: storage.AttrString},
		{Name: "placed", Type: storage.AttrTime, From: "placed"},
		{Name: "express", Type: storage.AttrBool},
	}
	f.putCatalog(storage.Catalog{Workflows: []storage.WorkflowType{{Name: "orders", Version: 1, Attributes: decls, Worker: "w"}, {Name: "plain", Version: 1, Worker: "w"}}})
	c := f.catalog()
	if len(c.Workflows) != 2 || !reflect.DeepEqual(c.Workflows[0].Attributes, decls) || c.Workflows[1].Attributes != nil {
		f.t.Fatalf("catalog workflows = %+v, want orders with %v (in the order declared) and plain with none", c.Workflows, decls)
	}
	// A later record replaces the declarations.
	f.putCatalog(storage.Catalog{Workflows: []storage.WorkflowType{{Name: "orders", Version: 2, Attributes: decls[:1], Worker: "w"}}})
	if got := f.catalog().Workflows[0].Attributes; !reflect.DeepEqual(got, decls[:1]) {
		f.t.Fatalf("declarations after a new record = %v, want %v", got, decls[:1])
	}
	before := f.snapshot()
	for what, bad := range map[string][]storage.AttrDecl{
		"a bad name":      {{Name: "a b", Type: storage.AttrString}},
		"an unknown type": {{Name: "a", Type: "int"}},
		"a name twice":    {{Name: "a", Type: storage.AttrString}, {Name: "a", Type: storage.AttrNumber}},
	} {
		err := f.store.PutCatalog(f.ctx, storage.Catalog{Workflows: []storage.WorkflowType{{Name: "orders", Version: 3, Attributes: bad}}})
		f.wantErr(err, storage.ErrInvalidArgument, "a catalog with "+what)
	}
	f.wantUnchanged(before, "refused declarations")
}

func testListByCreated(f *fixture) {
	// IDs whose order is not the creation order; two created at one
	// instant, which list by ID.
	for _, id := range []string{"m", "c", "x", "a", "b"} {
		f.create(id, wf, id)
		if id != "a" {
			f.clock.Advance(time.Second)
		}
	}
	f.createRun(storage.NewRun{ID: "m/child", Workflow: "other", ParentID: "m"})
	f.pause("x")
	for _, tc := range []struct {
		q    storage.ListRunsQuery
		want string
	}{
		{storage.ListRunsQuery{Order: storage.OrderCreated}, "[[m c x a b m/child]]"},
		{storage.ListRunsQuery{Order: storage.OrderCreated, Limit: 2}, "[[m c] [x a] [b m/child]]"},
		{storage.ListRunsQuery{Order: storage.OrderCreated, Limit: 2, Descending: true}, "[[m/child b] [a x] [c m]]"},
		{storage.ListRunsQuery{Order: storage.OrderCreated, Limit: 3, Descending: true, Workflow: wf}, "[[b a x] [c m]]"},
		{storage.ListRunsQuery{Order: storage.OrderCreated, Limit: 1, Status: storage.StatusPaused}, "[[x]]"},
		{storage.ListRunsQuery{Order: storage.OrderCreated, Limit: 4, TopLevel: true, Descending: true}, "[[b a x c] [m]]"},
		{storage.ListRunsQuery{Order: storage.OrderCreated, ParentID: "m"}, "[[m/child]]"},
		{storage.ListRunsQuery{Order: storage.OrderCreated, CreatedFrom: Start.Add(time.Second), CreatedTo: Start.Add(4 * time.Second), Descending: true}, "[[b a x c]]"},
		{storage.ListRunsQuery{Order: storage.OrderCreated, IDPrefix: "m"}, "[[m m/child]]"},
	} {
		if got := f.ids(tc.q); got != tc.want {
			f.t.Fatalf("pages of %s = %s, want %s", describeQuery(tc.q), got, tc.want)
		}
	}
	// A cursor is the last run's creation time and ID: a run created
	// later than a page is read shows on the newest side, not in the
	// middle.
	page, err := f.store.ListRuns(f.ctx, storage.ListRunsQuery{Order: storage.OrderCreated, Limit: 2, Descending: true})
	if err != nil {
		f.t.Fatalf("ListRuns: %v", err)
	}
	if want := storage.CreatedCursor(Start.Add(3*time.Second), "b"); page.Next != want {
		f.t.Fatalf("Next = %q, want %q", page.Next, want)
	}
	f.clock.Advance(time.Second)
	f.create("0-new", wf, "x")
	f.wantPage(storage.ListRunsQuery{Order: storage.OrderCreated, Descending: true, After: page.Next}, "a", "x", "c", "m")
	f.wantPage(storage.ListRunsQuery{Order: storage.OrderCreated, Descending: true, Limit: 1}, "0-new")
}

func testListTopLevel(f *fixture) {
	for _, id := range []string{"p-1", "p-2"} {
		f.create(id, wf, id)
	}
	for _, id := range []string{"p-1/a", "p-1/b", "p-2/a"} {
		f.createRun(storage.NewRun{ID: id, Workflow: "child", ParentID: id[:3]})
	}
	f.createRun(storage.NewRun{ID: "p-1/a/x", Workflow: "child", ParentID: "p-1/a"})
	f.create("p-3", wf, "p-3")
	for _, tc := range []struct {
		q    storage.ListRunsQuery
		want string
	}{
		{storage.ListRunsQuery{TopLevel: true, Limit: 2}, "[[p-1 p-2] [p-3]]"},
		{storage.ListRunsQuery{TopLevel: true, Descending: true}, "[[p-3 p-2 p-1]]"},
		{storage.ListRunsQuery{TopLevel: true, Workflow: "child"}, "[[]]"},
		{storage.ListRunsQuery{Workflow: "child"}, "[[p-1/a p-1/a/x p-1/b p-2/a]]"},
		{storage.ListRunsQuery{TopLevel: true, IDPrefix: "p-1"}, "[[p-1]]"},
	} {
		if got := f.ids(tc.q); got != tc.want {
			f.t.Fatalf("pages of %s = %s, want %s", describeQuery(tc.q), got, tc.want)
		}
	}
}

func testListAttrBadInput(f *fixture) {
	f.create("r-1", wf, "x")
	before := f.snapshot()
	tooMany := make([]storage.AttrFilter, storage.MaxAttrFilters+1)
	for i := range tooMany {
		tooMany[i] = eq(storage.StringAttr(fmt.Sprintf("a%d", i), "x"))
	}
	for what, q := range map[string]storage.ListRunsQuery{
		"a prefix of a number":        where(cmp(storage.OpPrefix, storage.NumberAttr("total", 1))),
		"a range of strings":          where(cmp(storage.OpLt, storage.StringAttr("customer", "C"))),
		"a range of bools":            where(cmp(storage.OpGe, storage.BoolAttr("express", true))),
		"an empty prefix":             where(cmp(storage.OpPrefix, storage.StringAttr("customer", ""))),
		"an unknown comparison":       where(cmp("~", storage.StringAttr("customer", "C"))),
		"a bad name":                  where(eq(storage.StringAttr("bad name", "C"))),
		"a value over 256 bytes":      where(eq(storage.StringAttr("customer", strings.Repeat("c", 257)))),
		"a NaN":                       where(eq(storage.Attr{Name: "n", Type: storage.AttrNumber, Num: nan()})),
		"too many filters":            where(tooMany...),
		"an unknown order":            {Order: "newest"},
		"an ID cursor by created":     {Order: storage.OrderCreated, After: "r-1"},
		"a cursor with a bad instant": {Order: storage.OrderCreated, After: "soon/r-1"},
	} {
		_, err := f.store.ListRuns(f.ctx, q)
		f.wantErr(err, storage.ErrInvalidArgument, "ListRuns with "+what)
	}
	f.wantUnchanged(before, "bad listings")
}

// testRestartIfExecution is what a bulk restart relies on to act on each
// run once: it restarts runs from a page it listed, is interrupted, and
// is resumed from the same (now stale) page, as a worker that died before
// it recorded its progress would be.
func testRestartIfExecution(f *fixture) {
	const n = 7
	for i := range n {
		c := f.startAs(storage.NewRun{ID: runID(i), Workflow: wf, Attributes: []storage.Attr{storage.StringAttr("batch", "b-1")}})
		f.checkpoint(c.Lease, "s@v1", "ok")
		if err := f.store.Complete(f.ctx, storage.CompleteRequest{Lease: c.Lease, Status: storage.StatusErrored, Error: &storage.ErrorInfo{Message: "boom"}}); err != nil {
			f.t.Fatalf("Complete: %v", err)
		}
	}
	q := storage.ListRunsQuery{Status: storage.StatusErrored, Where: []storage.AttrFilter{eq(storage.StringAttr("batch", "b-1"))}, Limit: 4}
	page, err := f.store.ListRuns(f.ctx, q)
	if err != nil || len(page.Runs) != 4 {
		f.t.Fatalf("first page = %v, %v", recordIDs(page.Runs), err)
	}
	restart := func(r storage.RunRecord) error {
		return f.store.Restart(f.ctx, storage.RestartRequest{RunID: r.ID, IfExecution: r.Execution})
	}
	// Interrupted after two of the page's four.
	for _, r := range page.Runs[:2] {
		if err := restart(r); err != nil {
			f.t.Fatalf("Restart(%s, if execution %d): %v", r.ID, r.Execution, err)
		}
	}
	// Resumed from the same page: the two restarted already conflict and
	// are left as they are.
	before := f.snapshot()
	for _, r := range page.Runs[:2] {
		f.wantErr(restart(r), storage.ErrConflict, "a second restart of "+r.ID+" from a stale page")
	}
	f.wantUnchanged(before, "conflicting restarts")
	for _, r := range page.Runs[2:] {
		if err := restart(r); err != nil {
			f.t.Fatalf("Restart(%s): %v", r.ID, err)
		}
	}
	for q.After = page.Next; q.After != ""; q.After = page.Next {
		if page, err = f.store.ListRuns(f.ctx, q); err != nil {
			f.t.Fatalf("ListRuns: %v", err)
		}
		for _, r := range page.Runs {
			if err := restart(r); err != nil {
				f.t.Fatalf("Restart(%s): %v", r.ID, err)
			}
		}
	}
	for i := range n {
		rec := f.get(runID(i))
		if rec.Execution != 2 || rec.Status != storage.StatusQueued {
			f.t.Fatalf("%s after the bulk restart: execution %d, %s; want execution 2, queued", rec.ID, rec.Execution, rec.Status)
		}
	}
	f.wantPage(storage.ListRunsQuery{Status: storage.StatusErrored})
	// A restart of an unknown run is still ErrRunNotFound, and a
	// negative expectation is malformed.
	f.wantErr(f.store.Restart(f.ctx, storage.RestartRequest{RunID: "nope", IfExecution: 1}), storage.ErrRunNotFound, "a conditional restart of an unknown run")
	f.wantErr(f.store.Restart(f.ctx, storage.RestartRequest{RunID: runID(0), IfExecution: -1}), storage.ErrInvalidArgument, "a restart expecting execution -1")
}

func testCheckpointInput(f *fixture) {
	c := f.start("run-1", "in")
	req := stepReq(c.Lease, "charge@v1", "receipt")
	req.Checkpoint.Input = []byte(`{"amount":42}`)
	f.written(req)
	f.checkpoint(c.Lease, "plain@v1", "x")
	again := stepReq(c.Lease, "charge@v1", "other")
	again.Checkpoint.Input = []byte(`{"amount":1}`)
	if res, err := f.store.Checkpoint(f.ctx, again); err != nil || res.Existing == nil {
		f.t.Fatalf("second write of charge@v1 = %+v, %v; want Existing", res, err)
	}
	h := f.history("run-1", 0)
	if len(h.Steps) != 2 {
		f.t.Fatalf("steps = %+v, want 2", h.Steps)
	}
	if got := string(h.Steps[0].Input); got != `{"amount":42}` {
		f.t.Fatalf("charge@v1's input = %q, want the first write's", got)
	}
	if got := h.Steps[1].Input; len(got) != 0 {
		f.t.Fatalf("plain@v1's input = %q, want none", got)
	}
}
