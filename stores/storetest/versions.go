package storetest

import (
	"fmt"
	"reflect"
	"slices"
	"time"

	"github.com/stemflow/stem/storage"
)

// A run records the version of its workflow it started under, and a
// worker claims only the versions it can replay: a store that loses the
// version, or leases a run the worker cannot run, strands the run or
// breaks it with a replay of another shape. A store that lets the runs it
// passes over use up a claim's limit, or hold a queue's places, starves the
// versions a worker can run behind the ones it cannot.
var versionCases = []testCase{
	{"versions/a run's version is kept and handed to claims; none is 0; a repeated start keeps the first", testVersionStored},
	{"versions/create refuses a version outside 0 to MaxVersion and stores nothing of the batch", testVersionCreateRefused},
	{"versions/a claim leases only the versions listed for a workflow, any version of one not listed", testVersionClaim},
	{"versions/a recovery is claimed only where its version is allowed", testVersionRecovery},
	{"versions/runs passed over use up none of the claim's limit and are left untouched", testVersionPassOver},
	{"versions/a run of a version not allowed holds no place in its queue until a claim allows it", testVersionQueue},
	{"versions/next wake considers only the versions allowed", testVersionNextWake},
	{"versions/list runs filters by version, with workflow and status, and pages the filtered runs", testVersionList},
	{"versions/restart, continue-as-new and a fork keep the version; a child has its own", testVersionKept},
	{"versions/malformed versions filters are invalid and change nothing", testVersionMalformed},
}

// wantVersion checks the version a record or claim shows for a run.
func (f *fixture) wantVersion(what, id string, got, want int) {
	f.t.Helper()
	if got != want {
		f.t.Fatalf("%s: run %s has version %d, want %d", what, id, got, want)
	}
}

// wantClaimedVersions checks that each run a claim leased carries the
// version want gives its ID.
func (f *fixture) wantClaimedVersions(what string, got []storage.ClaimedRun, want map[string]int) {
	f.t.Helper()
	for _, c := range got {
		v, ok := want[c.Lease.RunID]
		if !ok {
			f.t.Fatalf("%s leased %s, which the case does not expect", what, c.Lease.RunID)
		}
		f.wantVersion(what, c.Lease.RunID, c.Version, v)
	}
}

// nextWakeOf asks NextWake about workflows, restricted by versions.
func (f *fixture) nextWakeOf(versions map[string][]int, workflows ...string) storage.NextWake {
	f.t.Helper()
	w, err := f.store.NextWake(f.ctx, storage.NextWakeRequest{Workflows: workflows, Versions: versions})
	if err != nil {
		f.t.Fatalf("NextWake(%v, versions %v): %v", workflows, versions, err)
	}
	return w
}

func testVersionStored(f *fixture) {
	want := map[string]int{"v-3": 3, "v-max": storage.MaxVersion, "none": 0, "zero": 0}
	res, err := f.store.CreateRuns(f.ctx, []storage.NewRun{
		{ID: "v-3", Workflow: wf, Version: 3},
		{ID: "v-max", Workflow: wf, Version: storage.MaxVersion},
		{ID: "none", Workflow: wf},
		{ID: "zero", Workflow: wf, Version: 0},
		// A repeated ID in the batch is the first one.
		{ID: "v-3", Workflow: wf, Version: 4},
	})
	if err != nil {
		f.t.Fatalf("CreateRuns: %v", err)
	}
	for i, r := range res {
		f.wantVersion(fmt.Sprintf("CreateRuns result %d", i), r.Run.ID, r.Run.Version, want[r.Run.ID])
	}
	for id, v := range want {
		f.wantVersion("GetRun", id, f.get(id).Version, v)
	}
	for _, r := range f.listAll(storage.ListRunsQuery{}) {
		f.wantVersion("ListRuns", r.ID, r.Version, want[r.ID])
	}

	// A start of an existing ID at another version changes nothing.
	before := f.snapshot()
	res, err = f.store.CreateRuns(f.ctx, []storage.NewRun{{ID: "none", Workflow: wf, Version: 7}, {ID: "v-max", Workflow: wf, Version: 1}})
	if err != nil || len(res) != 2 || res[0].Created || res[1].Created {
		f.t.Fatalf("CreateRuns of existing IDs = %+v, %v; want both Created false", res, err)
	}
	f.wantVersion("CreateRuns of an existing ID", "none", res[0].Run.Version, 0)
	f.wantVersion("CreateRuns of an existing ID", "v-max", res[1].Run.Version, storage.MaxVersion)
	f.wantUnchanged(before, "CreateRuns of existing IDs at other versions")

	// Claims hand the version over, recoveries too.
	got := f.claim("worker-a", 10)
	f.wantClaimed("the first claim", got, "v-3", "v-max", "none", "zero")
	f.wantClaimedVersions("the first claim", got, want)
	f.clock.Advance(lease + time.Second)
	got = f.claim("worker-b", 10)
	f.wantClaimed("a claim of the expired leases", got, "v-3", "v-max", "none", "zero")
	f.wantClaimedVersions("a claim of the expired leases", got, want)
	for _, c := range got {
		if c.Recoveries != 1 {
			f.t.Fatalf("recovered %s with Recoveries %d, want 1", c.Lease.RunID, c.Recoveries)
		}
		f.wantVersion("GetRun of a recovered run", c.Lease.RunID, f.get(c.Lease.RunID).Version, want[c.Lease.RunID])
	}
}

func testVersionCreateRefused(f *fixture) {
	f.createRun(storage.NewRun{ID: "kept", Workflow: wf, Version: 2})
	ctx, s := f.ctx, f.store
	var calls []badCall
	for _, v := range []int{-1, storage.MaxVersion + 1, -storage.MaxVersion} {
		// The good run first: the refusal stores nothing of the batch.
		runs := []storage.NewRun{{ID: "good", Workflow: wf, Version: 1}, {ID: "bad", Workflow: wf, Version: v}}
		calls = append(calls, badCall{fmt.Sprintf("CreateRuns with version %d", v), storage.ValidateNewRuns(runs), func() error {
			_, err := s.CreateRuns(ctx, runs)
			return err
		}})
		// Nor an existing ID at a bad version.
		again := []storage.NewRun{{ID: "kept", Workflow: wf, Version: v}}
		calls = append(calls, badCall{fmt.Sprintf("CreateRuns of an existing ID with version %d", v), storage.ValidateNewRuns(again), func() error {
			_, err := s.CreateRuns(ctx, again)
			return err
		}})
	}
	f.wantRefused(calls)
	for _, id := range []string{"good", "bad"} {
		_, err := f.store.GetRun(f.ctx, id)
		f.wantErr(err, storage.ErrRunNotFound, "GetRun of "+id+" from a refused batch")
	}
	f.wantVersion("GetRun", "kept", f.get("kept").Version, 2)
}

func testVersionClaim(f *fixture) {
	const wfA, wfB, wfC = "wf-a", "wf-b", "wf-c"
	want := map[string]int{"a-0": 0, "a-1": 1, "a-2": 2, "a-3": 3, "b-5": 5, "b-9": 9, "c-1": 1}
	for _, r := range []struct {
		id, workflow string
	}{{"a-1", wfA}, {"a-2", wfA}, {"a-0", wfA}, {"a-3", wfA}, {"b-5", wfB}, {"b-9", wfB}, {"c-1", wfC}} {
		f.createRun(storage.NewRun{ID: r.id, Workflow: r.workflow, Version: want[r.id]})
		f.clock.Advance(time.Second)
	}
	claim := func(what string, versions map[string][]int, workflows []string, ids ...string) []storage.ClaimedRun {
		f.t.Helper()
		got := f.claimVersions("worker-a", 10, nil, versions, workflows...)
		f.wantClaimed(what, got, ids...)
		f.wantClaimedVersions(what, got, want)
		return got
	}
	// An entry with no versions claims none of its workflow; an entry of a
	// workflow the claim does not name claims nothing of it.
	claim("a claim allowing no version of wf-a", map[string][]int{wfA: {}, wfC: {1}}, []string{wfA}, []string{}...)
	claim("a claim of versions no run has", map[string][]int{wfA: {4, 5}, wfB: {1}}, []string{wfA, wfB}, []string{}...)
	// 0 claims the runs of unknown version; wf-b, without an entry, is
	// claimed at any version.
	passed := []string{"a-1", "a-3", "c-1"}
	before := map[string]storage.RunRecord{}
	for _, id := range passed {
		before[id] = normRecord(f.get(id))
	}
	claim("a claim of wf-a's versions 2 and 0, and wf-b", map[string][]int{wfA: {2, 0}}, []string{wfA, wfB}, "a-2", "a-0", "b-5", "b-9")
	for _, id := range passed {
		if rec := normRecord(f.get(id)); !reflect.DeepEqual(rec, before[id]) || rec.Status != storage.StatusQueued {
			f.t.Fatalf("run %s passed over =\n%+v\nwant it untouched and queued\n%+v", id, rec, before[id])
		}
	}
	claim("a claim of wf-a's version 3", map[string][]int{wfA: {3}}, []string{wfA, wfC}, "a-3", "c-1")
	claim("a claim of wf-a's version 0 with none left", map[string][]int{wfA: {0}}, []string{wfA}, []string{}...)
	claim("a claim of wf-a at any version", nil, []string{wfA}, "a-1")
}

func testVersionRecovery(f *fixture) {
	want := map[string]int{"r-1": 1, "r-2": 2, "r-0": 0}
	for _, id := range []string{"r-1", "r-2", "r-0"} {
		f.createRun(storage.NewRun{ID: id, Workflow: wf, Version: want[id]})
	}
	first := f.claim("worker-a", 10)
	f.wantClaimed("the first claim", first, "r-1", "r-2", "r-0")
	tokens := map[string]int64{}
	for _, c := range first {
		tokens[c.Lease.RunID] = c.Lease.Token
	}
	f.clock.Advance(lease + time.Second)
	got := f.claimVersions("worker-b", 10, nil, map[string][]int{wf: {2}})
	f.wantClaimed("a claim of version 2 with three expired leases", got, "r-2")
	f.wantClaimedVersions("the recovery", got, want)
	if got[0].Recoveries != 1 {
		f.t.Fatalf("recovered r-2 with Recoveries %d, want 1", got[0].Recoveries)
	}
	for _, id := range []string{"r-1", "r-0"} {
		rec := f.wantStatus(id, storage.StatusRunning)
		if rec.Owner != "worker-a" || rec.Token != tokens[id] || rec.Recoveries != 0 {
			f.t.Fatalf("run %s passed over = owner %q token %d recoveries %d, want worker-a's lease %d untouched", id, rec.Owner, rec.Token, rec.Recoveries, tokens[id])
		}
	}
	got = f.claimVersions("worker-c", 10, nil, map[string][]int{wf: {0, 1}})
	f.wantClaimed("a claim of versions 0 and 1", got, "r-0", "r-1")
	f.wantClaimedVersions("the recoveries", got, want)
}

func testVersionPassOver(f *fixture) {
	const many = 300
	// Ahead of the one claimable run: many runs of version 1, half of a
	// higher priority, half of its priority and older.
	var batch []storage.NewRun
	for i := range many {
		batch = append(batch, storage.NewRun{ID: runID(i), Workflow: wf, Version: 1, Priority: i % 2})
	}
	if _, err := f.store.CreateRuns(f.ctx, batch); err != nil {
		f.t.Fatalf("CreateRuns: %v", err)
	}
	f.clock.Advance(time.Second)
	f.createRun(storage.NewRun{ID: "target", Workflow: wf, Version: 2})
	v2 := map[string][]int{wf: {2}}
	others := func() []storage.RunRecord {
		f.t.Helper()
		var out []storage.RunRecord
		for _, r := range f.listAll(storage.ListRunsQuery{Workflow: wf, Limit: 100}) {
			if r.ID != "target" {
				out = append(out, normRecord(r))
			}
		}
		if len(out) != many {
			f.t.Fatalf("listed %d runs besides target, want %d", len(out), many)
		}
		return out
	}
	before := others()
	got := f.claimVersions("worker-a", 1, nil, v2)
	f.wantClaimed("a claim of 1 of version 2 behind 300 runs of version 1", got, "target")
	f.wantVersion("the claim", "target", got[0].Version, 2)
	if after := others(); !reflect.DeepEqual(before, after) {
		f.t.Fatalf("the claim changed the runs it passed over:\nbefore %+v\nafter  %+v", before, after)
	}
	for _, r := range before {
		if r.Status != storage.StatusQueued || r.Owner != "" {
			f.t.Fatalf("run %s passed over = %+v, want queued and never leased", r.ID, r)
		}
	}

	// So with recoveries: the target's lease expires behind many expired
	// leases of version 1, of a higher priority or expired before it.
	all := f.claim("worker-b", many)
	if len(all) != many {
		f.t.Fatalf("a claim of the version 1 runs leased %d, want %d", len(all), many)
	}
	f.clock.Advance(time.Second)
	if _, err := f.store.Heartbeat(f.ctx, storage.HeartbeatRequest{Lease: got[0].Lease, LeaseFor: lease}); err != nil {
		f.t.Fatalf("Heartbeat(target): %v", err)
	}
	f.clock.Advance(lease + time.Second)
	before = others()
	got = f.claimVersions("worker-c", 1, nil, v2)
	f.wantClaimed("a claim of 1 of version 2 behind 300 expired leases of version 1", got, "target")
	if got[0].Recoveries != 1 || got[0].Version != 2 {
		f.t.Fatalf("recovered target = %+v, want Recoveries 1 and version 2", got[0])
	}
	if after := others(); !reflect.DeepEqual(before, after) {
		f.t.Fatalf("the claim changed the expired runs it passed over:\nbefore %+v\nafter  %+v", before, after)
	}
	f.wantClaimed("a claim of version 2 with none left", f.claimVersions("worker-c", 1, nil, v2), []string{}...)
	if got := f.claimVersions("worker-c", many, nil, map[string][]int{wf: {1}}); len(got) != many {
		f.t.Fatalf("a claim of version 1 recovered %d runs, want %d", len(got), many)
	}
}

func testVersionQueue(f *fixture) {
	jobs := []storage.Queue{{Name: "jobs", Concurrency: 1}}
	f.createRun(storage.NewRun{ID: "old", Workflow: wf, Queue: "jobs", Version: 1, Priority: 5})
	f.clock.Advance(time.Second)
	f.createRun(storage.NewRun{ID: "new", Workflow: wf, Queue: "jobs", Version: 2})
	stats := func(what string, want storage.QueueStats) {
		f.t.Helper()
		if got := f.queueStats("jobs"); !reflect.DeepEqual(got, []storage.QueueStats{want}) {
			f.t.Fatalf("QueueStats %s = %+v, want %+v", what, got, want)
		}
	}
	got := f.claimVersions("worker-a", 10, jobs, map[string][]int{wf: {2}})
	f.wantClaimed("a claim of version 2 from a queue of one place", got, "new")
	f.wantStatus("old", storage.StatusQueued)
	stats("with the version 2 run leased", storage.QueueStats{Queue: "jobs", Ready: 1, OldestReady: time.Second, Running: 1})
	// The place is taken: not even the run of version 1 goes in.
	f.wantClaimed("a claim of version 1 from the full queue", f.claimVersions("worker-b", 10, jobs, map[string][]int{wf: {1}}), []string{}...)
	f.complete(got[0].Lease, "")
	stats("after the complete", storage.QueueStats{Queue: "jobs", Ready: 1, OldestReady: time.Second})
	f.wantClaimed("a claim of version 2 with none left", f.claimVersions("worker-a", 10, jobs, map[string][]int{wf: {2}}), []string{}...)
	stats("after a claim that passed over the version 1 run", storage.QueueStats{Queue: "jobs", Ready: 1, OldestReady: time.Second})
	got = f.claimVersions("worker-b", 10, jobs, map[string][]int{wf: {1, 2}})
	f.wantClaimed("a claim allowing version 1", got, "old")
	f.wantVersion("the claim", "old", got[0].Version, 1)
	stats("with the version 1 run leased", storage.QueueStats{Queue: "jobs", Running: 1})
}

func testVersionNextWake(f *fixture) {
	f.createRun(storage.NewRun{ID: "held", Workflow: wf, Version: 3})
	f.wantClaimed("the claim of held", f.claim("worker-a", 10), "held")
	f.createRun(storage.NewRun{ID: "sleeper", Workflow: wf, Version: 2})
	s := f.claim("worker-a", 10)
	f.wantClaimed("the claim of sleeper", s, "sleeper")
	f.sleep(s[0].Lease, 10*time.Second)
	f.createRun(storage.NewRun{ID: "due", Workflow: wf, Version: 1})
	for _, tc := range []struct {
		versions map[string][]int
		after    time.Duration // negative: none
	}{
		{nil, 0},
		{map[string][]int{wf: {1}}, 0},
		{map[string][]int{wf: {2}}, 10 * time.Second},
		{map[string][]int{wf: {3}}, lease},
		{map[string][]int{wf: {3, 2}}, 10 * time.Second},
		{map[string][]int{wf: {0, 4}}, -1},
		{map[string][]int{wf: {}}, -1},
		{map[string][]int{"other": {4}}, 0},
	} {
		got := f.nextWakeOf(tc.versions, wf)
		if tc.after < 0 && got.Found || tc.after >= 0 && (!got.Found || got.After != tc.after) {
			f.t.Fatalf("NextWake(versions %v) = %+v, want %v (negative: none)", tc.versions, got, tc.after)
		}
	}
}

func testVersionList(f *fixture) {
	runs := []struct {
		id, workflow string
		version      int
	}{
		{"r-01", wf, 1}, {"r-02", wf, 2}, {"r-03", "other", 1}, {"r-04", wf, 0}, {"r-05", wf, 1},
		{"r-06", wf, 3}, {"r-07", wf, 1}, {"r-08", "other", 0}, {"r-09", wf, 2}, {"r-10", wf, 1},
		{"r-11", "other", 2}, {"r-12", wf, 1}, {"r-13", wf, 3}, {"r-14", wf, 1},
	}
	version := map[string]int{}
	var batch []storage.NewRun
	for _, r := range runs {
		batch = append(batch, storage.NewRun{ID: r.id, Workflow: r.workflow, Version: r.version})
		version[r.id] = r.version
	}
	if _, err := f.store.CreateRuns(f.ctx, batch); err != nil {
		f.t.Fatalf("CreateRuns: %v", err)
	}
	// r-05 and r-10 run; wf's other runs of version 1 were claimed and let
	// go.
	got := f.claimVersions("worker-a", 10, nil, map[string][]int{wf: {1}}, wf)
	f.wantClaimed("the claim of wf's version 1", got, "r-01", "r-05", "r-07", "r-10", "r-12", "r-14")
	for _, c := range got {
		if c.Lease.RunID == "r-01" || c.Lease.RunID == "r-07" || c.Lease.RunID == "r-12" || c.Lease.RunID == "r-14" {
			f.suspend(storage.SuspendRequest{Lease: c.Lease, ReadyAt: f.after(0)})
		}
	}
	for _, tc := range []struct {
		q    storage.ListRunsQuery
		want string
	}{
		{storage.ListRunsQuery{Versions: []int{1}}, "[[r-01 r-03 r-05 r-07 r-10 r-12 r-14]]"},
		{storage.ListRunsQuery{Versions: []int{1}, Limit: 3}, "[[r-01 r-03 r-05] [r-07 r-10 r-12] [r-14]]"},
		{storage.ListRunsQuery{Versions: []int{0}}, "[[r-04 r-08]]"},
		{storage.ListRunsQuery{Versions: []int{0}, Limit: 1}, "[[r-04] [r-08]]"},
		{storage.ListRunsQuery{Versions: []int{3, 0}, Limit: 2}, "[[r-04 r-06] [r-08 r-13]]"},
		{storage.ListRunsQuery{Versions: []int{2, 3}, Limit: 2, After: "r-06"}, "[[r-09 r-11] [r-13]]"},
		{storage.ListRunsQuery{Versions: []int{1}, Workflow: wf, Limit: 2}, "[[r-01 r-05] [r-07 r-10] [r-12 r-14]]"},
		{storage.ListRunsQuery{Versions: []int{1}, Status: storage.StatusRunning}, "[[r-05 r-10]]"},
		{storage.ListRunsQuery{Versions: []int{1}, Status: storage.StatusQueued, Limit: 2}, "[[r-01 r-03] [r-07 r-12] [r-14]]"},
		{storage.ListRunsQuery{Versions: []int{1, 2}, Workflow: wf, Status: storage.StatusQueued, Limit: 2}, "[[r-01 r-02] [r-07 r-09] [r-12 r-14]]"},
		{storage.ListRunsQuery{Versions: []int{4}}, "[[]]"},
		{storage.ListRunsQuery{Versions: []int{}, Workflow: "other"}, "[[r-03 r-08 r-11]]"},
	} {
		var pages [][]string
		q := tc.q
		for range 20 {
			page, err := f.store.ListRuns(f.ctx, q)
			if err != nil {
				f.t.Fatalf("ListRuns(%+v): %v", q, err)
			}
			pages = append(pages, recordIDs(page.Runs))
			for _, r := range page.Runs {
				f.wantVersion(fmt.Sprintf("ListRuns(%+v)", tc.q), r.ID, r.Version, version[r.ID])
			}
			if page.Next == "" {
				break
			}
			q.After = page.Next
		}
		if got := fmt.Sprint(pages); got != tc.want {
			f.t.Fatalf("pages of %+v = %s, want %s", tc.q, got, tc.want)
		}
	}
	if got := recordIDs(f.listAll(storage.ListRunsQuery{Versions: []int{2, 1, 0, 3}})); len(got) != len(runs) {
		f.t.Fatalf("ListRuns of every version = %v, want all %d runs", got, len(runs))
	}
}

func testVersionKept(f *fixture) {
	f.createRun(storage.NewRun{ID: "p", Workflow: wf, Version: 4})
	v4, v5 := map[string][]int{wf: {4}}, map[string][]int{wf: {5}}
	claim := func(what string, versions map[string][]int) storage.ClaimedRun {
		f.t.Helper()
		got := f.claimVersions("worker-a", 10, nil, versions)
		f.wantClaimed(what, got, "p")
		f.wantVersion(what, "p", got[0].Version, 4)
		return got[0]
	}
	a := claim("the first claim", v4)
	f.checkpoint(a.Lease, "a@v1", "A")
	f.checkpoint(a.Lease, "b@v1", "B")
	f.continueAsNew(a.Lease, "next")
	f.wantVersion("GetRun after ContinueAsNew", "p", f.get("p").Version, 4)
	f.wantClaimed("a claim of version 5 after ContinueAsNew", f.claimVersions("worker-a", 10, nil, v5), []string{}...)
	b := claim("a claim after ContinueAsNew", v4)
	if b.Lease.RunID != "p" || string(b.Input) != "next" {
		f.t.Fatalf("claim after ContinueAsNew = %+v, want p with input next", b)
	}
	f.checkpoint(b.Lease, "a@v1", "A")
	f.checkpoint(b.Lease, "b@v1", "B")
	f.complete(b.Lease, "done")

	f.restart("p", "")
	f.wantVersion("GetRun after Restart", "p", f.get("p").Version, 4)
	f.wantClaimed("a claim of version 5 after Restart", f.claimVersions("worker-a", 10, nil, v5), []string{}...)
	c := claim("a claim after Restart", v4)
	f.checkpoint(c.Lease, "a@v1", "A")
	f.checkpoint(c.Lease, "b@v1", "B")
	f.complete(c.Lease, "done")

	f.restart("p", "b@v1")
	f.wantVersion("GetRun after a fork", "p", f.get("p").Version, 4)
	f.wantClaimed("a claim of version 5 after a fork", f.claimVersions("worker-a", 10, nil, v5), []string{}...)
	d := claim("a claim after a fork", v4)
	f.wantCheckpoints("p", "a@v1=A")
	f.complete(d.Lease, "done")

	// Children record their own versions, whatever their parent's.
	kids := map[string]int{"p/kid-2": 2, "p/kid-0": 0}
	f.createRun(storage.NewRun{ID: "p/kid-2", Workflow: "kid", ParentID: "p", Version: 2})
	f.createRun(storage.NewRun{ID: "p/kid-0", Workflow: "kid", ParentID: "p"})
	for id, v := range kids {
		f.wantVersion("GetRun of a child", id, f.get(id).Version, v)
	}
	if got := recordIDs(f.listAll(storage.ListRunsQuery{ParentID: "p", Versions: []int{2}})); !slices.Equal(got, []string{"p/kid-2"}) {
		f.t.Fatalf("ListRuns of p's children of version 2 = %v, want p/kid-2", got)
	}
	if got := recordIDs(f.listAll(storage.ListRunsQuery{ParentID: "p", Versions: []int{4}})); len(got) != 0 {
		f.t.Fatalf("ListRuns of p's children of its version 4 = %v, want none", got)
	}
	got := f.claimVersions("worker-a", 10, nil, map[string][]int{"kid": {2}}, "kid")
	f.wantClaimed("a claim of kid's version 2", got, "p/kid-2")
	f.wantClaimedVersions("a claim of kid's version 2", got, kids)
	got = f.claimVersions("worker-a", 10, nil, map[string][]int{"kid": {0, 4}}, "kid")
	f.wantClaimed("a claim of kid's version 0", got, "p/kid-0")
	f.wantClaimedVersions("a claim of kid's version 0", got, kids)
}

func testVersionMalformed(f *fixture) {
	f.createRun(storage.NewRun{ID: "run-1", Workflow: wf, Version: 1})
	ctx, s := f.ctx, f.store
	var calls []badCall
	for _, bad := range []struct {
		what string
		vs   map[string][]int
	}{
		{"a negative version", map[string][]int{wf: {1, -1}}},
		{"a version above MaxVersion", map[string][]int{wf: {storage.MaxVersion + 1}}},
		{"a malformed workflow name", map[string][]int{wf: {1}, "bad name": {1}}},
		{"an empty workflow name", map[string][]int{"": {1}}},
		{"a workflow name with NUL", map[string][]int{"a\x00b": {1}}},
	} {
		req := storage.ClaimRequest{Owner: "worker-a", Workflows: []string{wf}, Limit: 10, LeaseFor: lease, Versions: bad.vs}
		calls = append(calls, badCall{"Claim with versions of " + bad.what, req.Validate(), func() error {
			_, err := s.Claim(ctx, req)
			return err
		}})
		nw := storage.NextWakeRequest{Workflows: []string{wf}, Versions: bad.vs}
		calls = append(calls, badCall{"NextWake with versions of " + bad.what, nw.Validate(), func() error {
			_, err := s.NextWake(ctx, nw)
			return err
		}})
	}
	for _, vs := range [][]int{{-1}, {0, storage.MaxVersion + 1}} {
		q := storage.ListRunsQuery{Versions: vs}
		calls = append(calls, badCall{fmt.Sprintf("ListRuns with versions %v", vs), q.Validate(), func() error {
			_, err := s.ListRuns(ctx, q)
			return err
		}})
	}
	f.wantRefused(calls)
	// The bounds are allowed, and nothing was claimed.
	if w := f.nextWakeOf(map[string][]int{wf: {0, storage.MaxVersion}}, wf); w.Found {
		f.t.Fatalf("NextWake of versions 0 and MaxVersion = %+v, want none", w)
	}
	f.wantClaimed("a claim of versions 0 and MaxVersion", f.claimVersions("worker-a", 10, nil, map[string][]int{wf: {0, storage.MaxVersion}}), []string{}...)
	f.wantClaimed("a claim after the refusals", f.claimVersions("worker-a", 10, nil, map[string][]int{wf: {1}}), "run-1")
}
