package storetest

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/stemflow/stem/storage"
)

// Queues are what operators bound work with: a queue's limits hold across
// every process sharing the store, so a claim, wherever it runs, takes only
// what the queue has room for, highest priority first. A store that counts
// wrong overloads what the limit protects (a partner's API, a customer's
// share) or starves a queue that has room.
var queueCases = []testCase{
	{"queue/a run is stored on its queue, default when none, with partition and priority", testQueueStored},
	{"queue/a claim takes only the queues it names, none the default queue", testQueueClaimNamed},
	{"queue/priority: higher first, oldest ready first within one, across workflows", testQueuePriority},
	{"queue/a recovery goes first within its priority, not before a higher priority", testQueueRecoveryFirst},
	{"queue/concurrency: a full queue claims nothing until a place frees, by any way out of running", testQueueConcurrency},
	{"queue/concurrency: an expired lease holds its place, and its recovery is not held back", testQueueExpiredHolds},
	{"queue/concurrency: concurrent claimers never exceed the limit", testQueueConcurrentClaims},
	{"queue/a claim passes over a full queue to another it names", testQueuePassOver},
	{"queue/partition: one run per key at once, other keys and no key run", testQueuePartition},
	{"queue/rate: starts within a window; recoveries and resumptions are not starts, a restart is", testQueueRate},
	{"queue/stats count runs by state per named queue", testQueueStats},
	{"queue/next wake considers only the named queues", testQueueNextWake},
	{"queue/malformed queues, priorities and queue names are invalid and change nothing", testQueueMalformed},
}

// createOn creates a run of workflow on queue with a partition and priority.
func (f *fixture) createOn(id, workflow, queue, partition string, priority int) storage.RunRecord {
	f.t.Helper()
	return f.createRun(storage.NewRun{ID: id, Workflow: workflow, Queue: queue, Partition: partition, Priority: priority})
}

// startOn creates a run of its own workflow (named after the run when r
// names none) and claims it from its queue as worker-a.
func (f *fixture) startOn(r storage.NewRun) storage.ClaimedRun {
	f.t.Helper()
	if r.Workflow == "" {
		r.Workflow = "wf-" + r.ID
	}
	f.createRun(r)
	got := f.claimFrom("worker-a", 10, unlimited(r.QueueOf()), r.Workflow)
	if len(got) != 1 || got[0].Lease.RunID != r.ID {
		f.t.Fatalf("claimed %v, want %s", claimedIDs(got), r.ID)
	}
	return got[0]
}

// unlimited returns the named queues without limits.
func unlimited(names ...string) []storage.Queue {
	qs := make([]storage.Queue, len(names))
	for i, n := range names {
		qs[i] = storage.Queue{Name: n}
	}
	return qs
}

// wantClaimed checks the IDs a claim leased, in any order.
func (f *fixture) wantClaimed(what string, got []storage.ClaimedRun, want ...string) {
	f.t.Helper()
	ids := claimedIDs(got)
	slices.Sort(ids)
	want = slices.Clone(want)
	slices.Sort(want)
	if !slices.Equal(ids, want) {
		f.t.Fatalf("%s leased %v, want %v", what, ids, want)
	}
}

func (f *fixture) queueStats(names ...string) []storage.QueueStats {
	f.t.Helper()
	st, err := f.store.QueueStats(f.ctx, names)
	if err != nil {
		f.t.Fatalf("QueueStats(%v): %v", names, err)
	}
	return st
}

func testQueueStored(f *fixture) {
	res, err := f.store.CreateRuns(f.ctx, []storage.NewRun{
		{ID: "plain", Workflow: wf},
		{ID: "mail", Workflow: wf, Queue: "emails", Partition: "customer-7", Priority: 5},
		{ID: "low", Workflow: "other", Queue: "emails", Priority: -2},
	})
	if err != nil {
		f.t.Fatalf("CreateRuns: %v", err)
	}
	want := map[string]struct {
		queue, partition string
		priority         int
	}{"plain": {storage.DefaultQueue, "", 0}, "mail": {"emails", "customer-7", 5}, "low": {"emails", "", -2}}
	check := func(what string, rec storage.RunRecord) {
		f.t.Helper()
		w := want[rec.ID]
		if rec.Queue != w.queue || rec.Partition != w.partition || rec.Priority != w.priority {
			f.t.Fatalf("%s: run %s on queue %q partition %q priority %d, want %q %q %d", what, rec.ID, rec.Queue, rec.Partition, rec.Priority, w.queue, w.partition, w.priority)
		}
	}
	for _, r := range res {
		check("CreateRuns", r.Run)
		check("GetRun", f.get(r.Run.ID))
	}
	for _, r := range f.listAll(storage.ListRunsQuery{}) {
		check("ListRuns", r)
	}
	for _, tc := range []struct {
		q    storage.ListRunsQuery
		want []string
	}{
		{storage.ListRunsQuery{Queue: "emails"}, []string{"low", "mail"}},
		{storage.ListRunsQuery{Queue: storage.DefaultQueue}, []string{"plain"}},
		{storage.ListRunsQuery{Queue: "emails", Workflow: wf}, []string{"mail"}},
		{storage.ListRunsQuery{Queue: "emails", Limit: 1}, []string{"low", "mail"}},
		{storage.ListRunsQuery{Queue: "nowhere"}, nil},
	} {
		if got := recordIDs(f.listAll(tc.q)); !slices.Equal(got, tc.want) {
			f.t.Fatalf("ListRuns(%+v) = %v, want %v", tc.q, got, tc.want)
		}
	}

	// A create of an existing ID moves nothing to another queue.
	res, err = f.store.CreateRuns(f.ctx, []storage.NewRun{{ID: "plain", Workflow: wf, Queue: "emails", Priority: 9}})
	if err != nil || res[0].Created {
		f.t.Fatalf("CreateRuns of an existing ID = %+v, %v; want Created false", res, err)
	}
	check("CreateRuns of an existing ID", res[0].Run)
	check("GetRun after a create of an existing ID", f.get("plain"))

	// Claims find each run on its queue.
	f.wantClaimed("a claim of the default queue", f.claim("worker-a", 10, wf, "other"), "plain")
	got := f.claimFrom("worker-a", 10, unlimited("emails"), wf, "other")
	f.wantClaimed("a claim of emails", got, "mail", "low")

	// The queue, partition and priority stay with the run through
	// continue-as-new and restart.
	for _, c := range got {
		if c.Lease.RunID == "mail" {
			f.continueAsNew(c.Lease, "next")
		}
	}
	check("GetRun after ContinueAsNew", f.get("mail"))
	f.restart("mail", "")
	check("GetRun after Restart", f.get("mail"))
	f.wantClaimed("a claim of emails after Restart", f.claimFrom("worker-b", 10, unlimited("emails"), wf), "mail")
}

func testQueueClaimNamed(f *fixture) {
	f.create("d-1", wf, "")
	f.createOn("a-1", wf, "alpha", "", 0)
	f.createOn("b-1", wf, "beta", "", 0)
	f.createOn("a-2", "other", "alpha", "", 0)
	f.create("d-2", "other", "")
	f.wantClaimed("a claim naming no queue", f.claim("worker-a", 10, wf), "d-1")
	f.wantClaimed("a claim of alpha", f.claimFrom("worker-a", 10, unlimited("alpha"), wf), "a-1")
	f.wantClaimed("a claim of beta and the default queue", f.claimFrom("worker-a", 10, unlimited("beta", storage.DefaultQueue), wf, "other"), "b-1", "d-2")
	f.wantClaimed("a claim of gamma", f.claimFrom("worker-a", 10, unlimited("gamma"), wf, "other"), []string{}...)
	f.wantClaimed("a claim of alpha", f.claimFrom("worker-a", 10, unlimited("alpha"), wf, "other"), "a-2")
}

func testQueuePriority(f *fixture) {
	const wfA, wfB = "wf-a", "wf-b"
	for _, r := range []struct {
		id, workflow string
		priority     int
	}{
		{"p0-old", wfA, 0}, {"p5-first", wfB, 5}, {"p0-new", wfA, 0}, {"p5-second", wfA, 5}, {"neg", wfB, -3}, {"p10", wfB, 10},
	} {
		f.createOn(r.id, r.workflow, "jobs", "", r.priority)
		f.clock.Advance(time.Second)
	}
	// A delayed run of the highest priority waits for its time.
	f.createRun(storage.NewRun{ID: "later", Workflow: wfA, Queue: "jobs", Priority: storage.MaxPriority, StartAt: f.after(time.Hour)})
	jobs := unlimited("jobs")
	f.wantClaimed("a claim of 2", f.claimFrom("worker-a", 2, jobs, wfA, wfB), "p10", "p5-first")
	for _, want := range []string{"p5-second", "p0-old", "p0-new", "neg"} {
		f.wantClaimed("a claim of 1", f.claimFrom("worker-a", 1, jobs, wfA, wfB), want)
	}
	f.wantClaimed("a claim with only a delayed run left", f.claimFrom("worker-a", 1, jobs, wfA, wfB), []string{}...)

	// The default queue orders by priority too, and a sleeper that wakes
	// takes its priority with it.
	s := f.startOn(storage.NewRun{ID: "sleeper", Workflow: wf, Priority: 2})
	f.sleep(s.Lease, time.Second)
	f.create("d-0", wf, "")
	f.createRun(storage.NewRun{ID: "d-1", Workflow: wf, Priority: 1})
	f.clock.Advance(time.Second)
	for _, want := range []string{"sleeper", "d-1", "d-0"} {
		f.wantClaimed("a claim of 1 from the default queue", f.claim("worker-a", 1), want)
	}
}

func testQueueRecoveryFirst(f *fixture) {
	for _, queue := range []string{"", "jobs"} {
		name := storage.NewRun{Queue: queue}.QueueOf()
		qs := unlimited(name)
		p := name + "-"
		stalled := p + "stalled"
		f.createOn(stalled, "wf-a", queue, "", 0)
		f.wantClaimed("the first claim", f.claimFrom("worker-a", 10, qs, "wf-a"), stalled)
		f.clock.Advance(time.Second)
		// Ready before the stalled run's lease expires.
		fresh := p + "fresh"
		f.createOn(fresh, "wf-b", queue, "", 0)
		f.clock.Advance(lease)
		got := f.claimFrom("worker-b", 1, qs, "wf-a", "wf-b")
		f.wantClaimed("a claim of 1 with a recovery and an older ready run", got, stalled)
		if got[0].Recoveries != 1 {
			f.t.Fatalf("recovered %s with Recoveries %d, want 1", stalled, got[0].Recoveries)
		}
		second := f.claimFrom("worker-b", 1, qs, "wf-a", "wf-b")
		f.wantClaimed("the next claim of 1", second, fresh)
		f.complete(got[0].Lease, "")
		f.complete(second[0].Lease, "")

		// A ready run of a higher priority goes before a recovery.
		low := p + "low"
		f.createOn(low, "wf-a", queue, "", 0)
		f.wantClaimed("a claim", f.claimFrom("worker-a", 10, qs, "wf-a"), low)
		urgent := p + "urgent"
		f.createOn(urgent, "wf-b", queue, "", 1)
		f.clock.Advance(lease + time.Second)
		first := f.claimFrom("worker-b", 1, qs, "wf-a", "wf-b")
		f.wantClaimed("a claim of 1 with a recovery and a ready run of a higher priority", first, urgent)
		second = f.claimFrom("worker-b", 1, qs, "wf-a", "wf-b")
		f.wantClaimed("the next claim of 1", second, low)
		if second[0].Recoveries != 1 {
			f.t.Fatalf("recovered %s with Recoveries %d, want 1", low, second[0].Recoveries)
		}
		f.complete(first[0].Lease, "")
		f.complete(second[0].Lease, "")
	}
}

func testQueueConcurrency(f *fixture) {
	jobs := []storage.Queue{{Name: "jobs", Concurrency: 3}}
	var batch []storage.NewRun
	for i := range 10 {
		batch = append(batch, storage.NewRun{ID: runID(i), Workflow: wf, Queue: "jobs"})
	}
	if _, err := f.store.CreateRuns(f.ctx, batch); err != nil {
		f.t.Fatalf("CreateRuns: %v", err)
	}
	held := map[string]storage.Lease{}
	take := func(what string, owner string, want int) {
		f.t.Helper()
		got := f.claimFrom(owner, 10, jobs, wf)
		if len(got) != want {
			f.t.Fatalf("%s: %s leased %v with %d places held, want %d runs", what, owner, claimedIDs(got), len(held), want)
		}
		for _, c := range got {
			held[c.Lease.RunID] = c.Lease
		}
	}
	take("the first claim", "worker-a", 3)
	take("a claim of a full queue", "worker-a", 0)
	take("another owner's claim of a full queue", "worker-b", 0)
	for _, way := range []struct {
		name string
		out  func(l storage.Lease)
	}{
		{"Complete", func(l storage.Lease) { f.complete(l, "") }},
		{"a sleep", func(l storage.Lease) { f.sleep(l, time.Hour) }},
		{"an event wait", func(l storage.Lease) { f.park(l, "ev@v1", "topic", storage.KindEvent) }},
		{"ContinueAsNew", func(l storage.Lease) { f.continueAsNew(l, "next") }},
		{"a pause at a checkpoint", func(l storage.Lease) {
			f.pause(l.RunID)
			if res := f.checkpoint(l, "s@v1", ""); !res.Paused {
				f.t.Fatalf("Checkpoint with a pause requested = %+v, want Paused", res)
			}
		}},
		{"Terminate", func(l storage.Lease) {
			f.terminate(storage.TerminateRequest{RunID: l.RunID, Error: storage.ErrorInfo{Message: "stop", Code: storage.CodeTerminated}})
		}},
		{"a release", func(l storage.Lease) { f.suspend(storage.SuspendRequest{Lease: l, ReadyAt: f.after(0)}) }},
	} {
		ids := slices.Sorted(func(yield func(string) bool) {
			for id := range held {
				if !yield(id) {
					return
				}
			}
		})
		l := held[ids[0]]
		delete(held, l.RunID)
		way.out(l)
		take("a claim after "+way.name, "worker-c", 1)
		take("a second claim after "+way.name, "worker-b", 0)
		f.clock.Advance(time.Second)
	}
}

func testQueueExpiredHolds(f *fixture) {
	jobs := []storage.Queue{{Name: "jobs", Concurrency: 2}}
	f.createOn("a", "wf-a", "jobs", "", 0)
	f.createOn("b", "wf-a", "jobs", "", 0)
	f.wantClaimed("the first claim", f.claimFrom("worker-a", 10, jobs, "wf-a"), "a", "b")
	f.createOn("fresh", "wf-b", "jobs", "", 0)
	f.clock.Advance(lease + time.Second)
	// Their worker may only have stalled: the places stay taken.
	f.wantClaimed("a claim of the fresh run while the expired runs hold the queue", f.claimFrom("worker-b", 10, jobs, "wf-b"), []string{}...)
	got := f.claimFrom("worker-b", 10, jobs, "wf-a", "wf-b")
	f.wantClaimed("a claim with two recoveries in a full queue", got, "a", "b")
	for _, c := range got {
		if c.Recoveries != 1 {
			f.t.Fatalf("recovered %s with Recoveries %d, want 1", c.Lease.RunID, c.Recoveries)
		}
	}
	f.wantClaimed("a claim after the recoveries", f.claimFrom("worker-c", 10, jobs, "wf-a", "wf-b"), []string{}...)
	f.complete(got[0].Lease, "")
	f.wantClaimed("a claim after a complete", f.claimFrom("worker-c", 10, jobs, "wf-a", "wf-b"), "fresh")
}

func testQueueConcurrentClaims(f *fixture) {
	const runs, workers, limit = 30, 8, 3
	jobs := []storage.Queue{{Name: "jobs", Concurrency: limit}}
	var batch []storage.NewRun
	for i := range runs {
		batch = append(batch, storage.NewRun{ID: runID(i), Workflow: wf, Queue: "jobs"})
	}
	if _, err := f.store.CreateRuns(f.ctx, batch); err != nil {
		f.t.Fatalf("CreateRuns: %v", err)
	}
	seen := map[string]bool{}
	for round := 0; len(seen) < runs; round++ {
		if round == runs {
			f.t.Fatalf("after %d rounds %d runs were claimed, want %d", round, len(seen), runs)
		}
		var (
			mu  sync.Mutex
			got []storage.ClaimedRun
			wg  sync.WaitGroup
		)
		for g := range workers {
			wg.Go(func() {
				c, err := f.store.Claim(f.ctx, storage.ClaimRequest{Owner: fmt.Sprintf("worker-%d", g), Workflows: []string{wf}, Limit: 2, LeaseFor: lease, Queues: jobs})
				if err != nil {
					f.t.Errorf("Claim: %v", err)
				}
				mu.Lock()
				got = append(got, c...)
				mu.Unlock()
			})
		}
		wg.Wait()
		if f.t.Failed() {
			return
		}
		if len(got) > limit {
			f.t.Fatalf("round %d: concurrent claims leased %v, more than the queue's %d", round, claimedIDs(got), limit)
		}
		// A claim alone tops the queue up: contention may leave places
		// free, never take more.
		got = append(got, f.claimFrom("worker-top", 10, jobs, wf)...)
		if want := min(limit, runs-len(seen)); len(got) != want {
			f.t.Fatalf("round %d: %v running, want %d", round, claimedIDs(got), want)
		}
		if n := len(f.listAll(storage.ListRunsQuery{Queue: "jobs", Status: storage.StatusRunning})); n != len(got) {
			f.t.Fatalf("round %d: %d runs running, want the %d claimed", round, n, len(got))
		}
		for _, c := range got {
			if seen[c.Lease.RunID] {
				f.t.Fatalf("run %s claimed again after it completed", c.Lease.RunID)
			}
			seen[c.Lease.RunID] = true
			f.complete(c.Lease, "")
		}
	}
}

func testQueuePassOver(f *fixture) {
	qs := []storage.Queue{{Name: "busy", Concurrency: 1}, {Name: "idle"}}
	for _, r := range []struct {
		id, queue string
		priority  int
	}{{"busy-1", "busy", 5}, {"busy-2", "busy", 5}, {"idle-1", "idle", 0}, {"idle-2", "idle", 0}, {"idle-3", "idle", 0}} {
		f.createOn(r.id, wf, r.queue, "", r.priority)
		f.clock.Advance(time.Second)
	}
	f.wantClaimed("a claim of 3 over a queue with one place", f.claimFrom("worker-a", 3, qs, wf), "busy-1", "idle-1", "idle-2")
	f.wantClaimed("the next claim", f.claimFrom("worker-b", 10, qs, wf), "idle-3")
	f.wantClaimed("a claim with only the full queue's runs left", f.claimFrom("worker-b", 10, qs, wf), []string{}...)
}

func testQueuePartition(f *fixture) {
	tenants := []storage.Queue{{Name: "tenants", PartitionConcurrency: 1}}
	for _, r := range []struct{ id, partition string }{{"a-1", "acme"}, {"a-2", "acme"}, {"b-1", "globex"}, {"n-1", ""}, {"n-2", ""}} {
		f.createOn(r.id, wf, "tenants", r.partition, 0)
		f.clock.Advance(time.Second)
	}
	got := f.claimFrom("worker-a", 10, tenants, wf)
	f.wantClaimed("the first claim", got, "a-1", "b-1", "n-1", "n-2")
	f.wantClaimed("a claim with acme's place taken", f.claimFrom("worker-b", 10, tenants, wf), []string{}...)
	for _, c := range got {
		if c.Lease.RunID == "a-1" {
			f.complete(c.Lease, "")
		}
	}
	f.wantClaimed("a claim after acme's run completed", f.claimFrom("worker-b", 10, tenants, wf), "a-2")

	// An expired lease holds its partition's place too.
	f.createOn("b-2", "wf-late", "tenants", "globex", 0)
	f.clock.Advance(lease + time.Second)
	f.wantClaimed("a claim of globex's second run while its first stalls", f.claimFrom("worker-c", 10, tenants, "wf-late"), []string{}...)
	got = f.claimFrom("worker-c", 10, tenants, wf)
	f.wantClaimed("a claim of the stalled runs", got, "a-2", "b-1", "n-1", "n-2")
	for _, c := range got {
		if c.Lease.RunID == "b-1" {
			f.complete(c.Lease, "")
		}
	}
	f.wantClaimed("a claim after globex's run completed", f.claimFrom("worker-c", 10, tenants, "wf-late"), "b-2")
}

func testQueueRate(f *fixture) {
	api := []storage.Queue{{Name: "api", Rate: 2, RatePeriod: 10 * time.Minute}}
	all := []string{"wf-r1", "wf-r2", "wf-r3", "wf-r4"}
	for _, w := range all {
		f.createOn(strings.TrimPrefix(w, "wf-"), w, "api", "", 0)
		f.clock.Advance(time.Second)
	}
	t0 := f.now()
	got := f.claimFrom("worker-a", 10, api, all...)
	f.wantClaimed("the first claim", got, "r1", "r2")
	f.wantClaimed("a claim with the window full", f.claimFrom("worker-a", 10, api, all...), []string{}...)

	// A run that slept resumes: not a start.
	f.sleep(got[0].Lease, 10*time.Second)
	f.clock.Advance(10 * time.Second)
	f.wantClaimed("a claim of a woken sleeper with the window full", f.claimFrom("worker-a", 10, api, all...), got[0].Lease.RunID)

	// Recoveries are not starts either; the window still holds r1 and r2.
	f.clock.Set(t0.Add(9 * time.Minute))
	got = f.claimFrom("worker-b", 10, api, all...)
	f.wantClaimed("a claim of two expired runs with the window full", got, "r1", "r2")
	for _, c := range got {
		if c.Recoveries != 1 {
			f.t.Fatalf("recovered %s with Recoveries %d, want 1", c.Lease.RunID, c.Recoveries)
		}
		f.complete(c.Lease, "")
	}

	// A restarted run's next claim is a start.
	f.restart("r2", "")
	f.wantClaimed("a claim of a restarted run with the window full", f.claimFrom("worker-b", 10, api, all...), []string{}...)
	f.clock.Set(t0.Add(10*time.Minute + time.Second))
	f.wantClaimed("a claim of the restarted run in a new window", f.claimFrom("worker-b", 10, api, "wf-r2"), "r2")
	f.wantClaimed("a claim with one start left in the window", f.claimFrom("worker-b", 10, api, all...), "r3")
	f.wantClaimed("a claim with the new window full", f.claimFrom("worker-b", 10, api, all...), []string{}...)
}

func testQueueStats(f *fixture) {
	on := func(id string) storage.NewRun { return storage.NewRun{ID: id, Queue: "stats"} }
	f.startOn(on("running"))
	f.sleep(f.startOn(on("sleeper")).Lease, time.Hour)
	f.park(f.startOn(on("awaiter")).Lease, "ev@v1", "topic", storage.KindEvent)
	f.complete(f.startOn(on("done")).Lease, "")
	f.createOn("paused", "wf-paused", "stats", "", 0)
	f.pause("paused")
	f.createOn("ready-1", "wf-ready", "stats", "", 0)
	f.createOn("ready-2", "wf-ready", "stats", "p", 3)
	f.createRun(storage.NewRun{ID: "later", Workflow: "wf-ready", Queue: "stats", StartAt: f.after(time.Hour)})
	f.create("plain", wf, "")
	want := func(what string, want ...storage.QueueStats) {
		f.t.Helper()
		names := make([]string, len(want))
		for i, w := range want {
			names[i] = w.Queue
		}
		if got := f.queueStats(names...); !reflect.DeepEqual(got, want) {
			f.t.Fatalf("QueueStats(%v) %s = %+v, want %+v", names, what, got, want)
		}
	}
	want("",
		storage.QueueStats{Queue: "stats", Ready: 2, Scheduled: 1, Running: 1, Waiting: 2, Paused: 1},
		storage.QueueStats{Queue: storage.DefaultQueue, Ready: 1},
		storage.QueueStats{Queue: "nowhere"})
	want("in another order", storage.QueueStats{Queue: storage.DefaultQueue, Ready: 1}, storage.QueueStats{Queue: "stats", Ready: 2, Scheduled: 1, Running: 1, Waiting: 2, Paused: 1})
	if got := f.queueStats(); len(got) != 0 {
		f.t.Fatalf("QueueStats of no queues = %+v, want none", got)
	}
	// An hour on: the delayed start is due, the sleeper is still counted
	// waiting until claimed, and the expired lease still holds its place.
	// The oldest ready run has waited since the start.
	f.clock.Advance(time.Hour + time.Second)
	want("an hour on", storage.QueueStats{Queue: "stats", Ready: 3, Running: 1, Waiting: 2, Paused: 1, OldestReady: time.Hour + time.Second})
}

func testQueueNextWake(f *fixture) {
	f.sleep(f.startOn(storage.NewRun{ID: "alpha-1", Queue: "alpha"}).Lease, 5*time.Second)
	f.sleep(f.startOn(storage.NewRun{ID: "plain"}).Lease, 10*time.Second)
	workflows := []string{"wf-alpha-1", "wf-plain"}
	for _, tc := range []struct {
		queues []string
		after  time.Duration
	}{
		{nil, 10 * time.Second},
		{[]string{storage.DefaultQueue}, 10 * time.Second},
		{[]string{"alpha"}, 5 * time.Second},
		{[]string{"alpha", storage.DefaultQueue}, 5 * time.Second},
		{[]string{"beta"}, -1},
	} {
		got, err := f.store.NextWake(f.ctx, storage.NextWakeRequest{Workflows: workflows, Queues: tc.queues})
		if err != nil {
			f.t.Fatalf("NextWake(queues %v): %v", tc.queues, err)
		}
		if tc.after < 0 && got.Found || tc.after >= 0 && (!got.Found || got.After != tc.after) {
			f.t.Fatalf("NextWake(queues %v) = %+v, want %v (negative: none)", tc.queues, got, tc.after)
		}
	}
}

// badCall is a request its type's Validate rejects: the store must report
// ErrInvalidArgument saying what rule says, and write nothing.
type badCall struct {
	name string
	rule error
	do   func() error
}

// wantRefused makes each call and checks its error, then that the store
// holds what it held before.
func (f *fixture) wantRefused(calls []badCall) {
	f.t.Helper()
	before := f.snapshot()
	for _, c := range calls {
		if c.rule == nil {
			f.t.Fatalf("%s: the request is valid by its own Validate; the case is wrong", c.name)
		}
		err := c.do()
		f.wantErr(err, storage.ErrInvalidArgument, c.name)
		if !strings.Contains(err.Error(), c.rule.Error()) {
			f.t.Errorf("%s: error %q does not say what the contract says: %q", c.name, err, c.rule)
		}
	}
	f.wantUnchanged(before, "malformed requests")
}

func testQueueMalformed(f *fixture) {
	f.create("run-1", wf, "")
	f.createOn("run-2", wf, "jobs", "k", 1)
	ctx, s := f.ctx, f.store
	var calls []badCall
	for _, qs := range [][]storage.Queue{
		{{Name: "jobs", Concurrency: -1}},
		{{Name: "jobs", PartitionConcurrency: -1}},
		{{Name: "jobs", Rate: -1, RatePeriod: time.Minute}},
		{{Name: "jobs", Rate: 2}},
		{{Name: "jobs", RatePeriod: time.Minute}},
		{{Name: "jobs", Rate: 2, RatePeriod: -time.Minute}},
		{{Name: "jobs"}, {Name: storage.DefaultQueue}, {Name: "jobs", Concurrency: 1}},
		{{Name: "bad queue"}},
		{{Name: ""}},
	} {
		req := storage.ClaimRequest{Owner: "worker-a", Workflows: []string{wf}, Limit: 10, LeaseFor: lease, Queues: qs}
		calls = append(calls, badCall{fmt.Sprintf("Claim from %+v", qs), req.Validate(), func() error {
			_, err := s.Claim(ctx, req)
			return err
		}})
	}
	for _, r := range []storage.NewRun{
		{ID: "run-3", Workflow: wf, Queue: "bad queue"},
		{ID: "run-3", Workflow: wf, Queue: "jobs", Priority: storage.MaxPriority + 1},
		{ID: "run-3", Workflow: wf, Priority: storage.MinPriority - 1},
		{ID: "run-3", Workflow: wf, Queue: "jobs", Partition: "bad\nkey"},
	} {
		runs := []storage.NewRun{{ID: "run-4", Workflow: wf}, r}
		calls = append(calls, badCall{fmt.Sprintf("CreateRuns %+v", r), storage.ValidateNewRuns(runs), func() error {
			_, err := s.CreateRuns(ctx, runs)
			return err
		}})
	}
	nw := storage.NextWakeRequest{Workflows: []string{wf}, Queues: []string{"jobs", "bad queue"}}
	calls = append(calls, badCall{"NextWake of a malformed queue name", nw.Validate(), func() error {
		_, err := s.NextWake(ctx, nw)
		return err
	}})
	f.wantRefused(calls)
	// Nothing was claimed either; the bounds of priority are allowed.
	f.createRun(storage.NewRun{ID: "run-5", Workflow: wf, Queue: "jobs", Priority: storage.MaxPriority})
	f.createRun(storage.NewRun{ID: "run-6", Workflow: wf, Queue: "jobs", Priority: storage.MinPriority})
	f.wantClaimed("a claim after the refusals", f.claimFrom("worker-a", 10, unlimited("jobs", storage.DefaultQueue)), "run-1", "run-2", "run-5", "run-6")
}
