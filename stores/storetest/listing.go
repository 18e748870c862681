package storetest

import (
	"fmt"
	"slices"
	"time"

	"github.com/stemflow/stem/storage"
)

// listingCases are the filters and orders a dashboard lists runs by:
// newest first, an ID prefix, a creation range, and counts per status.
var listingCases = []testCase{
	{"listing/descending pages run backwards from the cursor", testListDescending},
	{"listing/an ID prefix is a range of the ID order", testListIDPrefix},
	{"listing/a creation range keeps runs created in it", testListCreatedRange},
	{"listing/filters combine in both orders", testListCombined},
	{"listing/counts per status, of all runs or one workflow", testCountRuns},
	{"listing/bad filters are refused and change nothing", testListingBadInput},
}

// pagesOf pages through ListRuns and returns each page's IDs.
func (f *fixture) pagesOf(q storage.ListRunsQuery) [][]string {
	f.t.Helper()
	var out [][]string
	for range 100 {
		page, err := f.store.ListRuns(f.ctx, q)
		if err != nil {
			f.t.Fatalf("ListRuns(%+v): %v", q, err)
		}
		out = append(out, recordIDs(page.Runs))
		if page.Next == "" {
			return out
		}
		q.After = page.Next
	}
	f.t.Fatalf("ListRuns(%+v) never ended", q)
	return nil
}

func testListDescending(f *fixture) {
	for _, id := range []string{"run-07", "run-03", "run-11", "run-01", "run-05", "run-09", "run-02"} {
		w := wf
		if id == "run-05" || id == "run-11" {
			w = "other"
		}
		f.create(id, w, id)
	}
	f.pause("run-03")
	f.pause("run-09")
	for _, tc := range []struct {
		q    storage.ListRunsQuery
		want string
	}{
		{storage.ListRunsQuery{Descending: true, Limit: 3}, "[[run-11 run-09 run-07] [run-05 run-03 run-02] [run-01]]"},
		{storage.ListRunsQuery{Descending: true}, "[[run-11 run-09 run-07 run-05 run-03 run-02 run-01]]"},
		{storage.ListRunsQuery{Descending: true, Limit: 2, After: "run-08"}, "[[run-07 run-05] [run-03 run-02] [run-01]]"},
		{storage.ListRunsQuery{Descending: true, Limit: 2, After: "run-07"}, "[[run-05 run-03] [run-02 run-01]]"},
		{storage.ListRunsQuery{Descending: true, Limit: 2, After: "run-01"}, "[[]]"},
		{storage.ListRunsQuery{Descending: true, Limit: 2, Workflow: wf}, "[[run-09 run-07] [run-03 run-02] [run-01]]"},
		{storage.ListRunsQuery{Descending: true, Limit: 1, Status: storage.StatusPaused}, "[[run-09] [run-03]]"},
		{storage.ListRunsQuery{Descending: true, Workflow: wf, Status: storage.StatusPaused}, "[[run-09 run-03]]"},
	} {
		if got := fmt.Sprint(f.pagesOf(tc.q)); got != tc.want {
			f.t.Fatalf("pages of %+v = %s, want %s", tc.q, got, tc.want)
		}
	}
	// Children list backwards too.
	for _, id := range []string{"run-01/b", "run-01/a", "run-01/c"} {
		f.createRun(storage.NewRun{ID: id, Workflow: "child", ParentID: "run-01"})
	}
	got := f.pagesOf(storage.ListRunsQuery{ParentID: "run-01", Descending: true, Limit: 2})
	if fmt.Sprint(got) != "[[run-01/c run-01/b] [run-01/a]]" {
		f.t.Fatalf("children of run-01, descending = %v", got)
	}
}

func testListIDPrefix(f *fixture) {
	ids := []string{"order-1", "order-10", "order-11", "order-19", "order-1~", "order-2", "order-", "order", "orders-1", "ord", "p-1", "order-1\u00e9", "order-1\u00ff"}
	for _, id := range ids {
		f.create(id, wf, id)
	}
	f.pause("order-11")
	for _, tc := range []struct {
		q    storage.ListRunsQuery
		want []string
	}{
		{storage.ListRunsQuery{IDPrefix: "order-1"}, []string{"order-1", "order-10", "order-11", "order-19", "order-1~", "order-1\u00e9", "order-1\u00ff"}},
		{storage.ListRunsQuery{IDPrefix: "order-1", Limit: 2}, []string{"order-1", "order-10", "order-11", "order-19", "order-1~", "order-1\u00e9", "order-1\u00ff"}},
		{storage.ListRunsQuery{IDPrefix: "order-1", Descending: true, Limit: 3}, []string{"order-1\u00ff", "order-1\u00e9", "order-1~", "order-19", "order-11", "order-10", "order-1"}},
		{storage.ListRunsQuery{IDPrefix: "order-1", After: "order-10"}, []string{"order-11", "order-19", "order-1~", "order-1\u00e9", "order-1\u00ff"}},
		{storage.ListRunsQuery{IDPrefix: "order-1", After: "order-11", Descending: true}, []string{"order-10", "order-1"}},
		{storage.ListRunsQuery{IDPrefix: "order-1", After: "a"}, []string{"order-1", "order-10", "order-11", "order-19", "order-1~", "order-1\u00e9", "order-1\u00ff"}},
		{storage.ListRunsQuery{IDPrefix: "order-1", After: "z", Descending: true}, []string{"order-1\u00ff", "order-1\u00e9", "order-1~", "order-19", "order-11", "order-10", "order-1"}},
		{storage.ListRunsQuery{IDPrefix: "order-1", After: "z"}, nil},
		{storage.ListRunsQuery{IDPrefix: "order-1\u00e9"}, []string{"order-1\u00e9"}},
		{storage.ListRunsQuery{IDPrefix: "order"}, []string{"order", "order-", "order-1", "order-10", "order-11", "order-19", "order-1~", "order-1\u00e9", "order-1\u00ff", "order-2", "orders-1"}},
		{storage.ListRunsQuery{IDPrefix: "order-1", Status: storage.StatusPaused}, []string{"order-11"}},
		{storage.ListRunsQuery{IDPrefix: "order-1", Status: storage.StatusQueued, Descending: true, Limit: 1}, []string{"order-1\u00ff", "order-1\u00e9", "order-1~", "order-19", "order-10", "order-1"}},
		{storage.ListRunsQuery{IDPrefix: "order-1", Workflow: "other"}, nil},
		{storage.ListRunsQuery{IDPrefix: "q"}, nil},
		{storage.ListRunsQuery{IDPrefix: "p-1"}, []string{"p-1"}},
	} {
		got := recordIDs(f.listAll(tc.q))
		if !slices.Equal(got, tc.want) {
			f.t.Fatalf("ListRuns(%+v) = %q, want %q", tc.q, got, tc.want)
		}
	}
}

func testListCreatedRange(f *fixture) {
	t0 := f.now()
	// r-0 at t0, r-1 at t0+1m, ... r-5 at t0+5m; IDs in creation order
	// but for r-9, created first.
	f.create("r-9", wf, "r-9")
	for i := range 6 {
		f.clock.Advance(time.Minute)
		f.create(fmt.Sprintf("r-%d", i), wf, "x")
	}
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	for _, tc := range []struct {
		q    storage.ListRunsQuery
		want []string
	}{
		{storage.ListRunsQuery{CreatedFrom: at(2)}, []string{"r-1", "r-2", "r-3", "r-4", "r-5"}},
		{storage.ListRunsQuery{CreatedTo: at(2)}, []string{"r-0", "r-9"}},
		{storage.ListRunsQuery{CreatedFrom: at(2), CreatedTo: at(4)}, []string{"r-1", "r-2"}},
		{storage.ListRunsQuery{CreatedFrom: at(2), CreatedTo: at(4), Descending: true}, []string{"r-2", "r-1"}},
		{storage.ListRunsQuery{CreatedFrom: at(2).Add(-time.Nanosecond), CreatedTo: at(2).Add(time.Microsecond)}, []string{"r-1"}},
		{storage.ListRunsQuery{CreatedFrom: at(2).Add(time.Microsecond), CreatedTo: at(3)}, nil},
		{storage.ListRunsQuery{CreatedTo: at(1), Limit: 1}, []string{"r-9"}},
		{storage.ListRunsQuery{CreatedFrom: at(0), Limit: 1, Descending: true}, []string{"r-9", "r-5", "r-4", "r-3", "r-2", "r-1", "r-0"}},
		{storage.ListRunsQuery{CreatedFrom: at(10)}, nil},
		{storage.ListRunsQuery{CreatedFrom: at(3), IDPrefix: "r-", Workflow: wf, Limit: 2, Descending: true}, []string{"r-5", "r-4", "r-3", "r-2"}},
	} {
		got := recordIDs(f.listAll(tc.q))
		if !slices.Equal(got, tc.want) {
			f.t.Fatalf("ListRuns(created %s to %s, %+v) = %q, want %q", tc.q.CreatedFrom.Sub(t0), tc.q.CreatedTo.Sub(t0), tc.q, got, tc.want)
		}
	}
}

func testListCombined(f *fixture) {
	// 40 runs over 2 workflows and 2 queues, some paused, so every filter
	// passes over runs on both sides of every page.
	var all []storage.RunRecord
	for i := range 40 {
		r := storage.NewRun{ID: fmt.Sprintf("x-%02d", i), Workflow: wf, Input: []byte("{}")}
		if i%3 == 0 {
			r.Workflow = "other"
		}
		if i%4 == 0 {
			r.Queue = "slow"
		}
		f.createRun(r)
		if i%5 == 0 {
			f.pause(r.ID)
		}
		f.clock.Advance(time.Second)
	}
	all = f.listAll(storage.ListRunsQuery{})
	if len(all) != 40 {
		f.t.Fatalf("listed %d runs, want 40", len(all))
	}
	from, to := all[0].CreatedAt.Add(7*time.Second), all[0].CreatedAt.Add(33*time.Second)
	for _, q := range []storage.ListRunsQuery{
		{Workflow: wf, Status: storage.StatusQueued, Limit: 3},
		{Queue: "slow", Limit: 2, IDPrefix: "x-1"},
		{Queue: storage.DefaultQueue, Workflow: "other", Limit: 2},
		{Status: storage.StatusPaused, CreatedFrom: from, CreatedTo: to, Limit: 1},
		{Workflow: wf, IDPrefix: "x-2", CreatedFrom: from, Limit: 2},
		{Queue: "slow", Status: storage.StatusQueued, CreatedTo: to, Limit: 2},
	} {
		var want []string
		for _, r := range all {
			if q.Listed(&r) {
				want = append(want, r.ID)
			}
		}
		if got := recordIDs(f.listAll(q)); !slices.Equal(got, want) {
			f.t.Fatalf("ListRuns(%+v) = %q, want %q", q, got, want)
		}
		q.Descending = true
		slices.Reverse(want)
		if got := recordIDs(f.listAll(q)); !slices.Equal(got, want) {
			f.t.Fatalf("ListRuns(%+v) = %q, want %q", q, got, want)
		}
	}
}

func testCountRuns(f *fixture) {
	count := func(workflow string) storage.RunCounts {
		f.t.Helper()
		c, err := f.store.CountRuns(f.ctx, storage.CountRunsQuery{Workflow: workflow})
		if err != nil {
			f.t.Fatalf("CountRuns(%q): %v", workflow, err)
		}
		return c
	}
	want := func(what string, got storage.RunCounts, want map[storage.RunStatus]int64) {
		f.t.Helper()
		for _, st := range storage.Statuses {
			if got[st] != want[st] {
				f.t.Fatalf("%s: %s = %d, want %d (counts %v)", what, st, got[st], want[st], got)
			}
		}
		for st := range got {
			if !st.Valid() {
				f.t.Fatalf("%s: counts hold status %q", what, st)
			}
		}
	}
	want("empty store", count(""), nil)
	// Runs in every status, of two workflows, so the filter matters. The
	// started ones first: each start claims the one ready run of wf.
	f.start("a-run", "x")
	done := f.start("a-done", "x")
	f.complete(done.Lease, `"ok"`)
	errd := f.start("a-err", "x")
	if err := f.store.Complete(f.ctx, storage.CompleteRequest{Lease: errd.Lease, Status: storage.StatusErrored, Error: &storage.ErrorInfo{Message: "boom"}}); err != nil {
		f.t.Fatalf("Complete with error: %v", err)
	}
	waiting := f.start("a-wait", "x")
	f.park(waiting.Lease, "k", "topic", storage.KindEvent)
	for i := range 3 {
		f.create(fmt.Sprintf("q-%d", i), wf, "x")
	}
	f.create("o-1", "other", "x")
	f.create("p-1", wf, "x")
	f.pause("p-1")
	f.create("t-1", wf, "x")
	f.terminate(storage.TerminateRequest{RunID: "t-1", Error: storage.ErrorInfo{Message: "stop"}})
	want("all runs", count(""), map[storage.RunStatus]int64{
		storage.StatusQueued: 4, storage.StatusPaused: 1, storage.StatusRunning: 1, storage.StatusComplete: 1,
		storage.StatusErrored: 1, storage.StatusWaiting: 1, storage.StatusTerminated: 1,
	})
	if got := count("").Total(); got != 10 {
		f.t.Fatalf("Total of all runs = %d, want 10", got)
	}
	want("runs of other", count("other"), map[storage.RunStatus]int64{storage.StatusQueued: 1})
	want("runs of no such workflow", count("nope"), nil)
	// A status change moves a run from one count to another.
	if err := f.store.Resume(f.ctx, "p-1"); err != nil {
		f.t.Fatalf("Resume: %v", err)
	}
	f.send("a-wait", "topic", `{}`)
	want("after a resume and a delivery", count(wf), map[storage.RunStatus]int64{
		storage.StatusQueued: 5, storage.StatusRunning: 1, storage.StatusComplete: 1,
		storage.StatusErrored: 1, storage.StatusTerminated: 1,
	})
}

func testListingBadInput(f *fixture) {
	f.create("r-1", wf, "x")
	before := f.snapshot()
	now := f.now()
	for _, q := range []storage.ListRunsQuery{
		{IDPrefix: "bad\x00prefix"},
		{IDPrefix: "bad\xffutf8"},
		{CreatedFrom: now, CreatedTo: now},
		{CreatedFrom: now, CreatedTo: now.Add(-time.Hour)},
	} {
		_, err := f.store.ListRuns(f.ctx, q)
		f.wantErr(err, storage.ErrInvalidArgument, fmt.Sprintf("ListRuns(%+v)", q))
	}
	_, err := f.store.CountRuns(f.ctx, storage.CountRunsQuery{Workflow: "bad\x00name"})
	f.wantErr(err, storage.ErrInvalidArgument, "CountRuns with a NUL in the workflow")
	f.wantUnchanged(before, "bad listings")
}
