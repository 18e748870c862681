package storetest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/stemflow/stem/storage"
)

var runCases = []testCase{
	{"create/new run is queued, ready now, fields round-trip", testCreateNewRun},
	{"create/existing ID returns the stored run untouched", testCreateExisting},
	{"create/concurrent creates of one ID create it once", testCreateConcurrent},
	{"create/a start time ahead keeps the run queued until then", testCreateDelayed},
	{"list runs/filter by workflow and status", testListFilter},
	{"list runs/pages by ID ascending with the Next cursor", testListPaging},
	{"list runs/filter by parent, with paging", testListByParent},
	{"create/parent policy round-trips", testParentPolicy},
}

func testCreateNewRun(f *fixture) {
	input := []byte(`{"order":1}`)
	res, err := f.store.CreateRuns(f.ctx, []storage.NewRun{
		{ID: "run-1", Workflow: wf, Input: input, ParentID: "parent-0"},
		{ID: "run-2", Workflow: "other"},
	})
	if err != nil {
		f.t.Fatalf("CreateRuns: %v", err)
	}
	if len(res) != 2 || !res[0].Created || !res[1].Created {
		f.t.Fatalf("CreateRuns = %+v, want two created runs", res)
	}
	copy(input, "XXXX") // the caller reuses its buffer
	check := func(rec storage.RunRecord) {
		f.t.Helper()
		if rec.ID != "run-1" || rec.Workflow != wf || rec.ParentID != "parent-0" || rec.Status != storage.StatusQueued {
			f.t.Fatalf("record = %+v, want run-1 of %s, parent parent-0, queued", rec, wf)
		}
		f.wantBytes("Input", rec.Input, `{"order":1}`)
		if len(rec.Output) != 0 || rec.Error != nil || rec.PauseRequested || rec.Wait != nil || rec.Owner != "" || rec.Recoveries != 0 {
			f.t.Fatalf("new record carries state: %+v", rec)
		}
		f.wantTimePtr("ReadyAt", rec.ReadyAt, Start)
		f.wantTime("CreatedAt", rec.CreatedAt, Start)
		f.wantTime("UpdatedAt", rec.UpdatedAt, Start)
	}
	check(res[0].Run)
	check(f.get("run-1"))
	if r := res[1].Run; r.ID != "run-2" || r.Workflow != "other" || r.ParentID != "" || len(r.Input) != 0 {
		f.t.Fatalf("second result = %+v, want run-2 of other, empty input", r)
	}

	c := f.claimOne("worker-a")
	if c.Lease.RunID != "run-1" || c.Lease.Owner != "worker-a" || c.Workflow != wf || c.ParentID != "parent-0" {
		f.t.Fatalf("claimed %+v, want run-1 for worker-a", c)
	}
	f.wantBytes("claimed Input", c.Input, `{"order":1}`)
	if c.Recoveries != 0 || len(c.SuspendState) != 0 || c.Wait != nil {
		f.t.Fatalf("first claim of a new run = %+v, want no recoveries, state or wait", c)
	}
	f.wantTime("claimed LeaseUntil", c.LeaseUntil, Start.Add(lease))
}

func testCreateExisting(f *fixture) {
	f.create("run-1", wf, "first")
	f.clock.Advance(time.Second)
	res, err := f.store.CreateRuns(f.ctx, []storage.NewRun{
		{ID: "run-1", Workflow: "other", Input: []byte("second")},
		{ID: "run-2", Workflow: "beta", Input: []byte("new")},
		{ID: "run-2", Workflow: "beta", Input: []byte("duplicate in batch")},
	})
	if err != nil {
		f.t.Fatalf("CreateRuns: %v", err)
	}
	if len(res) != 3 || res[0].Created || !res[1].Created || res[2].Created {
		f.t.Fatalf("Created flags = %+v, want false, true, false in request order", res)
	}
	if r := res[0].Run; r.ID != "run-1" || r.Workflow != wf || string(r.Input) != "first" {
		f.t.Fatalf("existing result = %+v, want the stored run-1 (wf, input first)", r)
	}
	f.wantTime("existing CreatedAt", res[0].Run.CreatedAt, Start)
	if r := res[2].Run; r.ID != "run-2" || string(r.Input) != "new" {
		f.t.Fatalf("duplicate in batch = %+v, want run-2 with input new", r)
	}
	if r := f.get("run-1"); string(r.Input) != "first" || r.Workflow != wf {
		f.t.Fatalf("run-1 = %+v, want input first and workflow wf", r)
	}

	// A run with progress is left as it is.
	c := f.claimOne("worker-a", wf)
	f.checkpoint(c.Lease, "step@v1", "done")
	before := f.snapshot()
	res, err = f.store.CreateRuns(f.ctx, []storage.NewRun{{ID: c.Lease.RunID, Workflow: wf, Input: []byte("again")}})
	if err != nil {
		f.t.Fatalf("CreateRuns again: %v", err)
	}
	if res[0].Created || res[0].Run.Status != storage.StatusRunning || res[0].Run.Token != c.Lease.Token {
		f.t.Fatalf("create of a running run = %+v, want Created false and the running record", res[0])
	}
	f.wantUnchanged(before, "CreateRuns of an existing ID")
}

func testCreateConcurrent(f *fixture) {
	const goroutines, ids = 16, 100
	var (
		mu      sync.Mutex
		winners = map[string]string{} // ID -> input of the creating call
		created = map[string]int{}
		results []storage.CreateResult
		wg      sync.WaitGroup
	)
	for g := range goroutines {
		wg.Go(func() {
			input := fmt.Sprintf("from-%02d", g)
			for i := range ids {
				id := runID((i + 7*g) % ids)
				res, err := f.store.CreateRuns(f.ctx, []storage.NewRun{{ID: id, Workflow: wf, Input: []byte(input)}})
				if err != nil || len(res) != 1 {
					f.t.Errorf("CreateRuns(%s) = %v, %v", id, res, err)
					return
				}
				mu.Lock()
				results = append(results, res[0])
				if res[0].Created {
					created[id]++
					winners[id] = input
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if f.t.Failed() {
		return
	}
	for i := range ids {
		if n := created[runID(i)]; n != 1 {
			f.t.Errorf("run %s created %d times, want 1", runID(i), n)
		}
	}
	for _, res := range results {
		if string(res.Run.Input) != winners[res.Run.ID] {
			f.t.Fatalf("result for %s has input %q, want the creator's %q", res.Run.ID, res.Run.Input, winners[res.Run.ID])
		}
	}
	all := f.listAll(storage.ListRunsQuery{Limit: 30})
	got := recordIDs(all)
	want := make([]string, ids)
	for i := range want {
		want[i] = runID(i)
	}
	if !slices.Equal(got, want) {
		f.t.Fatalf("ListRuns IDs = %v, want run-000..run-099 once each", got)
	}
	for _, r := range all {
		if string(r.Input) != winners[r.ID] {
			f.t.Fatalf("stored input of %s = %q, want %q", r.ID, r.Input, winners[r.ID])
		}
	}
}

func testListFilter(f *fixture) {
	for _, r := range []struct{ id, wf string }{
		{"a-1", "alpha"}, {"b-2", "beta"}, {"a-3", "alpha"}, {"b-1", "beta"}, {"a-2", "alpha"},
	} {
		f.create(r.id, r.wf, "")
	}
	if err := f.store.Pause(f.ctx, "a-2"); err != nil {
		f.t.Fatalf("Pause: %v", err)
	}
	if got := f.claim("worker-a", 10, "beta"); len(got) != 2 {
		f.t.Fatalf("claimed %v, want b-1 and b-2", claimedIDs(got))
	}
	for _, tc := range []struct {
		q    storage.ListRunsQuery
		want []string
	}{
		{storage.ListRunsQuery{}, []string{"a-1", "a-2", "a-3", "b-1", "b-2"}},
		{storage.ListRunsQuery{Workflow: "alpha"}, []string{"a-1", "a-2", "a-3"}},
		{storage.ListRunsQuery{Status: storage.StatusPaused}, []string{"a-2"}},
		{storage.ListRunsQuery{Status: storage.StatusRunning}, []string{"b-1", "b-2"}},
		{storage.ListRunsQuery{Workflow: "alpha", Status: storage.StatusQueued}, []string{"a-1", "a-3"}},
		{storage.ListRunsQuery{Workflow: "beta", Status: storage.StatusQueued}, nil},
		{storage.ListRunsQuery{Workflow: "gamma"}, nil},
	} {
		page, err := f.store.ListRuns(f.ctx, tc.q)
		if err != nil {
			f.t.Fatalf("ListRuns(%+v): %v", tc.q, err)
		}
		if got := recordIDs(page.Runs); !slices.Equal(got, tc.want) || page.Next != "" {
			f.t.Fatalf("ListRuns(%+v) = %v next %q, want %v and no next page", tc.q, got, page.Next, tc.want)
		}
		for _, r := range page.Runs {
			if (tc.q.Workflow != "" && r.Workflow != tc.q.Workflow) || (tc.q.Status != "" && r.Status != tc.q.Status) {
				f.t.Fatalf("ListRuns(%+v) returned %+v", tc.q, r)
			}
		}
	}
}

func testListPaging(f *fixture) {
	for _, batch := range [][]string{{"run-07", "run-03", "run-11"}, {"run-01", "run-05", "run-09", "run-02"}} {
		var runs []storage.NewRun
		for _, id := range batch {
			w := wf
			if id == "run-05" || id == "run-11" {
				w = "other"
			}
			runs = append(runs, storage.NewRun{ID: id, Workflow: w, Input: []byte(id)})
		}
		if _, err := f.store.CreateRuns(f.ctx, runs); err != nil {
			f.t.Fatalf("CreateRuns: %v", err)
		}
	}
	pages := func(q storage.ListRunsQuery) [][]string {
		f.t.Helper()
		var out [][]string
		for range 20 {
			page, err := f.store.ListRuns(f.ctx, q)
			if err != nil {
				f.t.Fatalf("ListRuns(%+v): %v", q, err)
			}
			out = append(out, recordIDs(page.Runs))
			for _, r := range page.Runs {
				f.wantBytes("Input of "+r.ID, r.Input, r.ID)
			}
			if page.Next == "" {
				return out
			}
			q.After = page.Next
		}
		f.t.Fatalf("ListRuns(%+v) never ended", q)
		return nil
	}
	for _, tc := range []struct {
		q    storage.ListRunsQuery
		want string
	}{
		{storage.ListRunsQuery{Limit: 3}, "[[run-01 run-02 run-03] [run-05 run-07 run-09] [run-11]]"},
		{storage.ListRunsQuery{Limit: 7}, "[[run-01 run-02 run-03 run-05 run-07 run-09 run-11]]"},
		{storage.ListRunsQuery{}, "[[run-01 run-02 run-03 run-05 run-07 run-09 run-11]]"},
		{storage.ListRunsQuery{Limit: 2, After: "run-04"}, "[[run-05 run-07] [run-09 run-11]]"},
		{storage.ListRunsQuery{Limit: 2, After: "run-05"}, "[[run-07 run-09] [run-11]]"},
		{storage.ListRunsQuery{Limit: 2, Workflow: wf}, "[[run-01 run-02] [run-03 run-07] [run-09]]"},
		{storage.ListRunsQuery{Limit: 2, After: "run-11"}, "[[]]"},
	} {
		if got := fmt.Sprint(pages(tc.q)); got != tc.want {
			f.t.Fatalf("pages of %+v = %s, want %s", tc.q, got, tc.want)
		}
	}
}

func testListByParent(f *fixture) {
	var runs []storage.NewRun
	for _, r := range []struct{ id, parent, wf string }{
		{"p-1", "", wf}, {"p-2", "", wf},
		{"c-5", "p-1", "child"}, {"c-1", "p-1", "child"}, {"c-3", "p-1", "other"}, {"c-4", "p-1", "child"}, {"c-2", "p-1", "child"},
		{"d-1", "p-2", "child"}, {"g-1", "c-1", "child"}, {"a-0", "", "child"},
	} {
		runs = append(runs, storage.NewRun{ID: r.id, Workflow: r.wf, ParentID: r.parent})
	}
	if _, err := f.store.CreateRuns(f.ctx, runs); err != nil {
		f.t.Fatalf("CreateRuns: %v", err)
	}
	f.pause("c-4")
	for _, tc := range []struct {
		q    storage.ListRunsQuery
		want []string
	}{
		{storage.ListRunsQuery{ParentID: "p-1", Limit: 2}, []string{"c-1", "c-2", "c-3", "c-4", "c-5"}},
		{storage.ListRunsQuery{ParentID: "p-1"}, []string{"c-1", "c-2", "c-3", "c-4", "c-5"}},
		{storage.ListRunsQuery{ParentID: "p-1", After: "c-2", Limit: 1}, []string{"c-3", "c-4", "c-5"}},
		{storage.ListRunsQuery{ParentID: "p-1", Workflow: "child", Limit: 2}, []string{"c-1", "c-2", "c-4", "c-5"}},
		{storage.ListRunsQuery{ParentID: "p-1", Status: storage.StatusPaused}, []string{"c-4"}},
		{storage.ListRunsQuery{ParentID: "p-2", Limit: 1}, []string{"d-1"}},
		{storage.ListRunsQuery{ParentID: "c-1"}, []string{"g-1"}},
		{storage.ListRunsQuery{ParentID: "c-2"}, nil},
		{storage.ListRunsQuery{ParentID: "no-such-run"}, nil},
	} {
		got := recordIDs(f.listAll(tc.q))
		if !slices.Equal(got, tc.want) {
			f.t.Fatalf("ListRuns(%+v) = %v, want %v", tc.q, got, tc.want)
		}
	}
	// A full page is followed by a page that ends the listing.
	page, err := f.store.ListRuns(f.ctx, storage.ListRunsQuery{ParentID: "p-1", Limit: 3})
	if err != nil {
		f.t.Fatalf("ListRuns: %v", err)
	}
	if got := recordIDs(page.Runs); !slices.Equal(got, []string{"c-1", "c-2", "c-3"}) || page.Next == "" {
		f.t.Fatalf("first page = %v next %q, want c-1 c-2 c-3 and a next page", got, page.Next)
	}
	for _, r := range page.Runs {
		if r.ParentID != "p-1" {
			f.t.Fatalf("ListRuns(parent p-1) returned %+v", r)
		}
	}
}

func testParentPolicy(f *fixture) {
	res, err := f.store.CreateRuns(f.ctx, []storage.NewRun{
		{ID: "child-1", Workflow: wf, ParentID: "parent", ParentPolicy: storage.ParentAbandon},
		{ID: "child-2", Workflow: wf, ParentID: "parent", ParentPolicy: storage.ParentTerminate},
		{ID: "child-3", Workflow: wf, ParentID: "parent"},
	})
	if err != nil {
		f.t.Fatalf("CreateRuns: %v", err)
	}
	want := []storage.ParentPolicy{storage.ParentAbandon, storage.ParentTerminate, storage.ParentTerminate}
	for i, r := range res {
		if r.Run.ParentPolicy != want[i] || r.Run.ParentID != "parent" {
			f.t.Fatalf("created %s with parent %q policy %q, want parent policy %q", r.Run.ID, r.Run.ParentID, r.Run.ParentPolicy, want[i])
		}
		if got := f.get(r.Run.ID).ParentPolicy; got != want[i] {
			f.t.Fatalf("GetRun(%s).ParentPolicy = %q, want %q", r.Run.ID, got, want[i])
		}
	}
	// The stored policy is kept through a claim, a restart and a repeated
	// create that asks for another.
	if got := f.claim("worker-a", 10); len(got) != 3 {
		f.t.Fatalf("claimed %v, want the three children", claimedIDs(got))
	}
	f.restart("child-1", "")
	res, err = f.store.CreateRuns(f.ctx, []storage.NewRun{{ID: "child-1", Workflow: wf, ParentID: "parent"}})
	if err != nil || res[0].Created || res[0].Run.ParentPolicy != storage.ParentAbandon {
		f.t.Fatalf("create of an existing child = %+v, %v; want the stored abandon policy", res, err)
	}
	page, err := f.store.ListRuns(f.ctx, storage.ListRunsQuery{ParentID: "parent"})
	if err != nil {
		f.t.Fatalf("ListRuns: %v", err)
	}
	for i, r := range page.Runs {
		if r.ParentPolicy != want[i] {
			f.t.Fatalf("listed %s with policy %q, want %q", r.ID, r.ParentPolicy, want[i])
		}
	}
}

func testCreateDelayed(f *fixture) {
	later, past := f.now().Add(time.Hour), f.now().Add(-time.Hour)
	res, err := f.store.CreateRuns(f.ctx, []storage.NewRun{
		{ID: "later", Workflow: wf, Input: []byte("1"), StartAt: &later},
		{ID: "past", Workflow: wf, Input: []byte("2"), StartAt: &past},
	})
	if err != nil || len(res) != 2 || !res[0].Created || !res[1].Created {
		f.t.Fatalf("CreateRuns = %+v, %v; want both created", res, err)
	}
	f.wantTimePtr("ReadyAt of the delayed run as created", res[0].Run.ReadyAt, later)
	rec := f.wantStatus("later", storage.StatusQueued)
	f.wantTimePtr("ReadyAt of the delayed run", rec.ReadyAt, later)
	// A start time already past starts the run at once, as of now.
	f.wantTimePtr("ReadyAt of the run whose start time had passed", f.get("past").ReadyAt, f.now())
	got := f.claim("worker-a", 10)
	if ids := claimedIDs(got); !slices.Equal(ids, []string{"past"}) {
		f.t.Fatalf("claim before the start time took %v, want only past", ids)
	}
	f.complete(got[0].Lease, `"done"`)
	f.wantWake(time.Hour)
	f.clock.Advance(time.Hour - time.Millisecond)
	f.claimNone()
	f.clock.Advance(time.Millisecond)
	if c := f.claimOne("worker-b"); c.Lease.RunID != "later" || c.Recoveries != 0 {
		f.t.Fatalf("claim at the start time = %+v, want later", c)
	}
	zero := time.Time{}
	_, err = f.store.CreateRuns(f.ctx, []storage.NewRun{{ID: "zero", Workflow: wf, StartAt: &zero}})
	f.wantErr(err, storage.ErrInvalidArgument, "CreateRuns with a zero start time")
	if _, err := f.store.GetRun(f.ctx, "zero"); !errors.Is(err, storage.ErrRunNotFound) {
		f.t.Fatalf("a refused create stored its run: %v", err)
	}
}
