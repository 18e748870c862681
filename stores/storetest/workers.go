package storetest

import (
	"fmt"
	"maps"
	"reflect"
	"strings"
	"time"

	"github.com/stemflow/stem/storage"
)

// Operators see the engines at work through the records they keep of
// themselves: a store that loses a field, lists a worker past its expiry
// (a dead machine shown as alive) or keeps a removed one misleads the
// person deciding whether work is being done. A run carries the trace
// context it was started in to every claim: a store that drops or alters
// it breaks the trace of the run's later work, on another machine, days
// later.
var workerCases = []testCase{
	{"workers/put records a worker with the store's heartbeat and expiry; list returns the live ones by ID; a put replaces", testWorkerPut},
	{"workers/a record expires after its TTL unless put again, and is never listed once expired", testWorkerExpiry},
	{"workers/remove deletes a record; removing an unknown worker is no error", testWorkerRemove},
	{"workers/malformed worker records are invalid and change nothing", testWorkerMalformed},
	{"headers/a run's headers are kept byte for byte and handed to every claim, through restart, continue-as-new and a fork", testHeadersKept},
	{"headers/malformed headers are invalid and create nothing of the batch", testHeadersMalformed},
	{"queues/stats say how long the oldest ready run has been ready, on the store's clock", testQueueOldestReady},
}

// worker is a well-formed record to put.
func worker(id string) storage.Worker {
	return storage.Worker{
		ID:        id,
		Host:      "host-1.example",
		PID:       4242,
		StartedAt: Start.Add(-time.Hour),
		Queues:    []string{storage.DefaultQueue, "emails"},
		Workflows: []string{"orders.fulfil", wf},
		InFlight:  3,
	}
}

func (f *fixture) putWorker(w storage.Worker, ttl time.Duration) {
	f.t.Helper()
	if err := f.store.PutWorker(f.ctx, storage.PutWorkerRequest{Worker: w, TTL: ttl}); err != nil {
		f.t.Fatalf("PutWorker(%s): %v", w.ID, err)
	}
}

func (f *fixture) workers() []storage.Worker {
	f.t.Helper()
	ws, err := f.store.ListWorkers(f.ctx)
	if err != nil {
		f.t.Fatalf("ListWorkers: %v", err)
	}
	for i := range ws {
		ws[i].StartedAt, ws[i].Heartbeat, ws[i].ExpiresAt = ms(ws[i].StartedAt), ms(ws[i].Heartbeat), ms(ws[i].ExpiresAt)
	}
	return ws
}

// wantWorkers checks the live workers, each as put with the heartbeat
// and expiry the store stamps.
func (f *fixture) wantWorkers(what string, want ...storage.Worker) {
	f.t.Helper()
	got := f.workers()
	if len(want) == 0 && len(got) == 0 {
		return
	}
	if !reflect.DeepEqual(got, want) {
		f.t.Fatalf("ListWorkers %s =\n%+v\nwant\n%+v", what, got, want)
	}
}

// stamped is w as the store records it when put now for ttl.
func (f *fixture) stamped(w storage.Worker, ttl time.Duration) storage.Worker {
	w.Heartbeat, w.ExpiresAt = f.now(), f.now().Add(ttl)
	return w
}

func testWorkerPut(f *fixture) {
	f.wantWorkers("of an empty store")
	b, a := worker("host-1/4242/b"), worker("host-1/4242/a")
	a.Host, a.PID = "", 0 // a worker that could not tell where it runs
	a.Queues, a.Workflows = nil, nil
	f.putWorker(b, time.Minute)
	f.clock.Advance(time.Second)
	f.putWorker(a, 30*time.Second)
	wantA, wantB := f.stamped(a, 30*time.Second), storage.Worker{}
	wantB = b
	wantB.Heartbeat, wantB.ExpiresAt = Start, Start.Add(time.Minute)
	f.wantWorkers("after two puts", wantA, wantB)

	// A put replaces the record, fields and times.
	f.clock.Advance(10 * time.Second)
	b.InFlight, b.Queues, b.Workflows = 0, []string{"emails"}, []string{wf}
	f.putWorker(b, 2*time.Minute)
	f.wantWorkers("after b is put again", wantA, f.stamped(b, 2*time.Minute))
}

func testWorkerExpiry(f *fixture) {
	old, fresh := worker("w-old"), worker("w-fresh")
	f.putWorker(old, 10*time.Second)
	f.putWorker(fresh, 10*time.Second)
	f.clock.Advance(9 * time.Second)
	f.putWorker(fresh, 10*time.Second) // its heartbeat
	wantFresh := f.stamped(fresh, 10*time.Second)
	f.clock.Advance(time.Second) // old's ExpiresAt is now: not after now
	f.wantWorkers("at old's expiry", wantFresh)
	f.clock.Advance(time.Hour)
	f.wantWorkers("an hour on")
	// An expired worker that records itself again is live again, with
	// nothing of its old record.
	old.InFlight = 0
	f.putWorker(old, time.Minute)
	f.wantWorkers("after old is put again", f.stamped(old, time.Minute))
}

func testWorkerRemove(f *fixture) {
	a, b := worker("w-a"), worker("w-b")
	f.putWorker(a, time.Minute)
	f.putWorker(b, time.Minute)
	if err := f.store.RemoveWorker(f.ctx, "w-a"); err != nil {
		f.t.Fatalf("RemoveWorker(w-a): %v", err)
	}
	f.wantWorkers("after w-a is removed", f.stamped(b, time.Minute))
	for _, id := range []string{"w-a", "never-was"} {
		if err := f.store.RemoveWorker(f.ctx, id); err != nil {
			f.t.Fatalf("RemoveWorker(%s) of an unknown worker: %v, want no error", id, err)
		}
	}
	if err := f.store.RemoveWorker(f.ctx, ""); err == nil {
		f.t.Fatalf("RemoveWorker of an empty ID: no error, want %v", storage.ErrInvalidArgument)
	} else {
		f.wantErr(err, storage.ErrInvalidArgument, "RemoveWorker of an empty ID")
	}
	f.wantWorkers("after the removals of unknown workers", f.stamped(b, time.Minute))
}

func testWorkerMalformed(f *fixture) {
	good := worker("w-good")
	f.putWorker(good, time.Minute)
	f.create("run-1", wf, "in")
	before := f.workers()
	var calls []badCall
	bad := func(what string, edit func(r *storage.PutWorkerRequest)) {
		r := storage.PutWorkerRequest{Worker: worker("w-good"), TTL: time.Minute}
		r.Worker.InFlight = 99 // a put that went through would show
		edit(&r)
		calls = append(calls, badCall{"PutWorker with " + what, r.Validate(), func() error {
			return f.store.PutWorker(f.ctx, r)
		}})
	}
	bad("an empty ID", func(r *storage.PutWorkerRequest) { r.Worker.ID = "" })
	bad("an ID with NUL", func(r *storage.PutWorkerRequest) { r.Worker.ID = "w\x00good" })
	bad("an ID of invalid UTF-8", func(r *storage.PutWorkerRequest) { r.Worker.ID = "w-\xff" })
	bad("an ID too long", func(r *storage.PutWorkerRequest) { r.Worker.ID = strings.Repeat("w", storage.MaxDerivedLen+1) })
	bad("a host with a newline", func(r *storage.PutWorkerRequest) { r.Worker.Host = "host\nevil" })
	bad("a host too long", func(r *storage.PutWorkerRequest) { r.Worker.Host = strings.Repeat("h", storage.MaxHostLen+1) })
	bad("a negative PID", func(r *storage.PutWorkerRequest) { r.Worker.PID = -1 })
	bad("negative runs in flight", func(r *storage.PutWorkerRequest) { r.Worker.InFlight = -1 })
	bad("no start time", func(r *storage.PutWorkerRequest) { r.Worker.StartedAt = time.Time{} })
	bad("a malformed queue", func(r *storage.PutWorkerRequest) { r.Worker.Queues = []string{"ok", "bad queue"} })
	bad("a malformed workflow", func(r *storage.PutWorkerRequest) { r.Worker.Workflows = []string{"bad workflow"} })
	bad("too many workflows", func(r *storage.PutWorkerRequest) {
		r.Worker.Workflows = make([]string, storage.MaxWorkerNames+1)
		for i := range r.Worker.Workflows {
			r.Worker.Workflows[i] = fmt.Sprintf("wf-%d", i)
		}
	})
	bad("no TTL", func(r *storage.PutWorkerRequest) { r.TTL = 0 })
	bad("a TTL under a second", func(r *storage.PutWorkerRequest) { r.TTL = time.Millisecond })
	bad("a TTL over a day", func(r *storage.PutWorkerRequest) { r.TTL = storage.MaxWorkerTTL + time.Second })
	f.wantRefused(calls)
	if after := f.workers(); !reflect.DeepEqual(after, before) {
		f.t.Fatalf("malformed puts changed the workers:\nbefore %+v\nafter  %+v", before, after)
	}
}

// traceHeaders are what a start hook stores: the W3C trace context and a
// value of each kind of byte a header may hold.
var traceHeaders = map[string]string{
	"traceparent":    "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
	"tracestate":     "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE",
	"baggage":        "user=ünïcödé ✓;q=\"quoted\", spaced  value",
	"x-empty":        "",
	"X-Mixed_Case.1": strings.Repeat("v", 1024),
}

// wantHeaders checks the headers a record or claim shows.
func (f *fixture) wantHeaders(what string, got, want map[string]string) {
	f.t.Helper()
	if len(got) == 0 && len(want) == 0 {
		return
	}
	if !maps.Equal(got, want) {
		f.t.Fatalf("%s: headers %q, want %q", what, got, want)
	}
}

func testHeadersKept(f *fixture) {
	res, err := f.store.CreateRuns(f.ctx, []storage.NewRun{
		{ID: "traced", Workflow: wf, Input: []byte("in"), Headers: traceHeaders},
		{ID: "plain", Workflow: "other"},
		{ID: "empty", Workflow: "other", Headers: map[string]string{}},
		// A repeated start keeps the first run's headers.
		{ID: "traced", Workflow: wf, Headers: map[string]string{"traceparent": "00-other"}},
	})
	if err != nil {
		f.t.Fatalf("CreateRuns: %v", err)
	}
	for i, want := range []map[string]string{traceHeaders, nil, nil, traceHeaders} {
		f.wantHeaders(fmt.Sprintf("CreateRuns result %d (%s)", i, res[i].Run.ID), res[i].Run.Headers, want)
	}
	f.wantHeaders("GetRun", f.get("traced").Headers, traceHeaders)
	f.wantHeaders("GetRun of a run without headers", f.get("plain").Headers, nil)
	f.wantHeaders("GetRun of a run with empty headers", f.get("empty").Headers, nil)
	for _, r := range f.listAll(storage.ListRunsQuery{}) {
		want := map[string]string(nil)
		if r.ID == "traced" {
			want = traceHeaders
		}
		f.wantHeaders("ListRuns of "+r.ID, r.Headers, want)
	}
	others := f.claim("worker-a", 10, "other")
	f.wantClaimed("a claim of the runs without headers", others, "plain", "empty")
	for _, c := range others {
		f.wantHeaders("the claim of "+c.Lease.RunID, c.Headers, nil)
	}

	claim := func(what string) storage.ClaimedRun {
		f.t.Helper()
		c := f.claimOne("worker-a")
		f.wantHeaders(what, c.Headers, traceHeaders)
		return c
	}
	a := claim("the first claim")
	f.checkpoint(a.Lease, "a@v1", "A")
	f.checkpoint(a.Lease, "b@v1", "B")
	// A recovery from a dead worker.
	f.clock.Advance(lease + time.Second)
	a = claim("the claim of a recovery")
	f.continueAsNew(a.Lease, "next")
	f.wantHeaders("GetRun after ContinueAsNew", f.get("traced").Headers, traceHeaders)
	b := claim("a claim after ContinueAsNew")
	f.checkpoint(b.Lease, "a@v1", "A")
	f.checkpoint(b.Lease, "b@v1", "B")
	f.complete(b.Lease, "done")
	f.wantHeaders("GetRun of the finished run", f.get("traced").Headers, traceHeaders)

	f.restart("traced", "")
	c := claim("a claim after Restart")
	f.checkpoint(c.Lease, "a@v1", "A")
	f.checkpoint(c.Lease, "b@v1", "B")
	f.complete(c.Lease, "done")
	f.restart("traced", "b@v1")
	d := claim("a claim after a fork")
	f.complete(d.Lease, "done")
	f.wantHeaders("GetRun after the fork", f.get("traced").Headers, traceHeaders)

	// A child has its own, whatever its parent's.
	kid := map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-b7ad6b7169203331-01"}
	f.createRun(storage.NewRun{ID: "traced/kid", Workflow: "kid", ParentID: "traced", Headers: kid})
	f.wantHeaders("GetRun of a child", f.get("traced/kid").Headers, kid)
	f.wantHeaders("the claim of a child", f.claimOne("worker-a", "kid").Headers, kid)
}

func testHeadersMalformed(f *fixture) {
	f.createRun(storage.NewRun{ID: "run-1", Workflow: wf, Headers: map[string]string{"traceparent": "x"}})
	var calls []badCall
	for _, bad := range []struct {
		what string
		h    map[string]string
	}{
		{"an empty name", map[string]string{"": "v"}},
		{"a name with a space", map[string]string{"trace parent": "v"}},
		{"a name with a colon", map[string]string{"traceparent:": "v"}},
		{"a name too long", map[string]string{strings.Repeat("n", storage.MaxHeaderNameLen+1): "v"}},
		{"a value with a newline", map[string]string{"traceparent": "00-a\r\nX-Injected: 1"}},
		{"a value with NUL", map[string]string{"traceparent": "a\x00b"}},
		{"a value of invalid UTF-8", map[string]string{"baggage": "\xff\xfe"}},
		{"too many headers", func() map[string]string {
			h := map[string]string{}
			for i := range storage.MaxHeaders + 1 {
				h[fmt.Sprintf("h%d", i)] = "v"
			}
			return h
		}()},
		{"headers too large together", map[string]string{"a": strings.Repeat("v", storage.MaxHeadersBytes/2), "b": strings.Repeat("v", storage.MaxHeadersBytes/2)}},
	} {
		runs := []storage.NewRun{{ID: "fine", Workflow: wf}, {ID: "bad", Workflow: wf, Headers: bad.h}}
		calls = append(calls, badCall{"CreateRuns with " + bad.what, storage.ValidateNewRuns(runs), func() error {
			_, err := f.store.CreateRuns(f.ctx, runs)
			return err
		}})
	}
	f.wantRefused(calls)
}

func testQueueOldestReady(f *fixture) {
	oldest := func(queue string) time.Duration {
		f.t.Helper()
		return f.queueStats(queue)[0].OldestReady
	}
	want := func(what, queue string, d time.Duration) {
		f.t.Helper()
		if got := oldest(queue); got != d {
			f.t.Fatalf("QueueStats(%s).OldestReady %s = %v, want %v", queue, what, got, d)
		}
	}
	want("of an empty queue", "q", 0)
	f.createOn("first", wf, "q", "", 0)
	want("at its creation", "q", 0)
	f.clock.Advance(10 * time.Second)
	f.createOn("high", wf, "q", "", 9) // priority does not make it older
	f.createRun(storage.NewRun{ID: "delayed", Workflow: wf, Queue: "q", StartAt: f.after(5 * time.Second)})
	f.createOn("elsewhere", wf, "other", "", 0)
	want("10s on", "q", 10*time.Second)
	want("of another queue", "other", 0)
	f.clock.Advance(20 * time.Second)
	want("30s on", "q", 30*time.Second)
	// Claimed, the oldest no longer counts; the next oldest is the delayed
	// start, ready since its StartAt, 15s ago.
	got := f.claimFrom("worker-a", 2, []storage.Queue{{Name: "q"}}, wf)
	f.wantClaimed("a claim of two", got, "first", "high")
	want("once the two are claimed", "q", 15*time.Second)
	if st := f.queueStats("q")[0]; st.Ready != 1 || st.Running != 2 {
		f.t.Fatalf("QueueStats(q) = %+v, want 1 ready and 2 running", st)
	}
	f.pause("delayed")
	want("once the last ready run is paused", "q", 0)
}
