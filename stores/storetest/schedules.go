package storetest

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/stemflow/stem/storage"
)

// A schedule is a record every worker may try to advance at once: the
// revision decides which one write takes a tick, and that write starts the
// tick's run, so a tick starts one run however many processes serve it. A
// store whose compare-and-set leaks starts a tick twice or loses one.
var scheduleCases = []testCase{
	{"schedule/create is revision 1 and reads back byte for byte; a write replaces it whole", testScheduleRoundTrip},
	{"schedule/creating an existing ID is a conflict and writes nothing", testScheduleCreateTaken},
	{"schedule/a write at a stale revision writes nothing, nor its runs; an unknown ID is not found", testScheduleStale},
	{"schedule/concurrent writers of one tick: exactly one takes it, its run exists once", testScheduleConcurrent},
	{"schedule/a write's run whose ID exists is left as it is", testScheduleRunExists},
	{"schedule/list by ID pages with the cursor", testScheduleListPaging},
	{"schedule/due lists unpaused schedules by check time, then ID", testScheduleDue},
	{"schedule/delete removes it and keeps its runs", testScheduleDelete},
	{"schedule/malformed writes and queries are invalid and write nothing", testScheduleMalformed},
}

// schedule returns a valid schedule of wf firing every five minutes from
// now.
func (f *fixture) schedule(id string) storage.Schedule {
	next := f.now().Add(5 * time.Minute)
	return storage.Schedule{ID: id, Workflow: wf, Cron: "*/5 * * * *", NextFireAt: next, CheckAt: next}
}

func (f *fixture) writeSchedule(w storage.ScheduleWrite) storage.ScheduleWriteResult {
	f.t.Helper()
	res, err := f.store.WriteSchedule(f.ctx, w)
	if err != nil {
		f.t.Fatalf("WriteSchedule(%s at revision %d): %v", w.Schedule.ID, w.Revision, err)
	}
	if res.Schedule.Revision != w.Revision+1 {
		f.t.Fatalf("WriteSchedule(%s at revision %d) stored revision %d, want %d", w.Schedule.ID, w.Revision, res.Schedule.Revision, w.Revision+1)
	}
	if len(res.Runs) != len(w.Runs) {
		f.t.Fatalf("WriteSchedule(%s) reported %d runs, want %d", w.Schedule.ID, len(res.Runs), len(w.Runs))
	}
	return res
}

func (f *fixture) getSchedule(id string) storage.Schedule {
	f.t.Helper()
	s, err := f.store.GetSchedule(f.ctx, id)
	if err != nil {
		f.t.Fatalf("GetSchedule(%s): %v", id, err)
	}
	return s
}

func (f *fixture) listSchedules(q storage.ScheduleQuery) storage.SchedulePage {
	f.t.Helper()
	page, err := f.store.ListSchedules(f.ctx, q)
	if err != nil {
		f.t.Fatalf("ListSchedules(%+v): %v", q, err)
	}
	return page
}

// allSchedules pages through ListSchedules by ID.
func (f *fixture) allSchedules() []storage.Schedule {
	f.t.Helper()
	var all []storage.Schedule
	q := storage.ScheduleQuery{Limit: 50}
	for range 10000 {
		page := f.listSchedules(q)
		all = append(all, page.Schedules...)
		if page.Next == "" {
			return all
		}
		q.After = page.Next
	}
	f.t.Fatal("ListSchedules never reached the end")
	return nil
}

// wantSchedule compares schedules field by field, times to the
// millisecond and empty input as nil.
func (f *fixture) wantSchedule(what string, got, want storage.Schedule) {
	f.t.Helper()
	if g, w := normSchedule(got), normSchedule(want); !reflect.DeepEqual(g, w) {
		f.t.Fatalf("%s =\n%+v\nwant\n%+v", what, fmtSchedule(g), fmtSchedule(w))
	}
}

func fmtSchedule(s storage.Schedule) string {
	return fmt.Sprintf("%+v (input %q, held %v, last fire %v)", s, s.Input, s.Held, s.LastFireAt)
}

func normSchedule(s storage.Schedule) storage.Schedule {
	s.Input = normBytes(s.Input)
	s.NextFireAt, s.CheckAt, s.CreatedAt, s.UpdatedAt = ms(s.NextFireAt), ms(s.CheckAt), ms(s.CreatedAt), ms(s.UpdatedAt)
	s.Held, s.LastFireAt = msPtr(s.Held), msPtr(s.LastFireAt)
	return s
}

func scheduleIDs(ss []storage.Schedule) []string {
	ids := make([]string, len(ss))
	for i, s := range ss {
		ids[i] = s.ID
	}
	return ids
}

func testScheduleRoundTrip(f *fixture) {
	held := Start.Add(-5 * time.Minute).Add(250 * time.Millisecond)
	last := Start.Add(-10 * time.Minute)
	in := storage.Schedule{
		ID: "nightly.report", Workflow: "reports.build", Cron: "0 3 * * *", TimeZone: "Europe/Paris",
		Input: []byte("{\"day\":\n \"yesterday\"}"), Queue: "reports", Partition: "tenant-9", Priority: -7,
		Overlap: storage.OverlapBufferOne, CatchUp: storage.CatchUpAll, CatchUpWindow: 6 * time.Hour,
		NextFireAt: Start.Add(23 * time.Hour).Add(5 * time.Millisecond), CheckAt: Start.Add(time.Minute),
		Held: &held, LastFireAt: &last, LastRunID: "nightly.report@2030-01-01T03:00",
		// Ignored: the store sets these.
		Revision: 42, CreatedAt: Start.Add(-time.Hour), UpdatedAt: Start.Add(-time.Hour),
	}
	res := f.writeSchedule(storage.ScheduleWrite{Schedule: in})
	copy(in.Input, "XXXX") // the caller reuses its buffer
	*in.Held = time.Time{}
	want := in
	want.Input = []byte("{\"day\":\n \"yesterday\"}")
	want.Held = &held
	want.Held = timePtr(Start.Add(-5 * time.Minute).Add(250 * time.Millisecond))
	want.Revision, want.CreatedAt, want.UpdatedAt = 1, Start, Start
	f.wantSchedule("the written schedule", res.Schedule, want)
	got := f.getSchedule("nightly.report")
	f.wantSchedule("GetSchedule", got, want)
	copy(got.Input, "XXXX") // a returned schedule is the caller's to change
	*got.LastFireAt = time.Time{}
	page := f.listSchedules(storage.ScheduleQuery{})
	if len(page.Schedules) != 1 || page.Next != "" {
		f.t.Fatalf("ListSchedules = %+v, want the one schedule", page)
	}
	f.wantSchedule("ListSchedules", page.Schedules[0], want)
	due := f.listSchedules(storage.ScheduleQuery{DueBy: f.after(time.Minute)})
	if len(due.Schedules) != 1 {
		f.t.Fatalf("ListSchedules due = %+v, want the one schedule", due)
	}
	f.wantSchedule("ListSchedules due", due.Schedules[0], want)

	// A write replaces the schedule whole: what it leaves out is gone.
	f.clock.Advance(time.Minute)
	next := f.schedule("nightly.report")
	res = f.writeSchedule(storage.ScheduleWrite{Schedule: next, Revision: 1})
	wantNext := next
	wantNext.Revision, wantNext.CreatedAt, wantNext.UpdatedAt = 2, Start, f.now()
	f.wantSchedule("the rewritten schedule", res.Schedule, wantNext)
	f.wantSchedule("GetSchedule after a rewrite", f.getSchedule("nightly.report"), wantNext)
}

func testScheduleCreateTaken(f *fixture) {
	f.writeSchedule(storage.ScheduleWrite{Schedule: f.schedule("every.five")})
	f.clock.Advance(time.Second)
	before := f.snapshot()
	again := f.schedule("every.five")
	again.Cron = "* * * * *"
	_, err := f.store.WriteSchedule(f.ctx, storage.ScheduleWrite{Schedule: again, Runs: []storage.NewRun{{ID: "tick-1", Workflow: wf}}})
	f.wantErr(err, storage.ErrConflict, "WriteSchedule creating an existing ID")
	f.wantUnchanged(before, "WriteSchedule creating an existing ID")
}

func testScheduleStale(f *fixture) {
	s := f.schedule("every.five")
	f.writeSchedule(storage.ScheduleWrite{Schedule: s})
	tick := s
	tick.LastFireAt = timePtr(s.NextFireAt)
	tick.LastRunID = "tick-1"
	tick.NextFireAt = s.NextFireAt.Add(5 * time.Minute)
	tick.CheckAt = tick.NextFireAt
	res := f.writeSchedule(storage.ScheduleWrite{Schedule: tick, Revision: 1, Runs: []storage.NewRun{{ID: "tick-1", Workflow: wf, Input: []byte("1")}}})
	if len(res.Runs) != 1 || !res.Runs[0].Created || res.Runs[0].Run.ID != "tick-1" {
		f.t.Fatalf("WriteSchedule reported runs %+v, want tick-1 created", res.Runs)
	}
	f.wantBytes("input of tick-1", f.get("tick-1").Input, "1")

	// Another worker read revision 1 and fires the same tick, or a later
	// one; one that read ahead of the store is as wrong.
	f.clock.Advance(time.Second)
	before := f.snapshot()
	for _, rev := range []int64{1, 3} {
		late := tick
		late.LastRunID = "tick-2"
		_, err := f.store.WriteSchedule(f.ctx, storage.ScheduleWrite{Schedule: late, Revision: rev, Runs: []storage.NewRun{{ID: "tick-2", Workflow: wf}}})
		f.wantErr(err, storage.ErrConflict, fmt.Sprintf("WriteSchedule at revision %d of a schedule at 2", rev))
	}
	_, err := f.store.WriteSchedule(f.ctx, storage.ScheduleWrite{Schedule: f.schedule("unknown"), Revision: 1, Runs: []storage.NewRun{{ID: "tick-3", Workflow: wf}}})
	f.wantErr(err, storage.ErrScheduleNotFound, "WriteSchedule at a revision of an unknown ID")
	f.wantUnchanged(before, "refused schedule writes")
	_, err = f.store.GetSchedule(f.ctx, "unknown")
	f.wantErr(err, storage.ErrScheduleNotFound, "GetSchedule of an unknown ID")
	if got := f.getSchedule("every.five"); got.Revision != 2 || got.LastRunID != "tick-1" {
		f.t.Fatalf("schedule after refused writes = %+v, want revision 2 with tick-1", got)
	}
}

func testScheduleConcurrent(f *fixture) {
	const writers = 8
	s := f.schedule("every.five")
	f.writeSchedule(storage.ScheduleWrite{Schedule: s})
	tick := s
	tick.LastFireAt = timePtr(s.NextFireAt)
	tick.NextFireAt = s.NextFireAt.Add(5 * time.Minute)
	tick.CheckAt = tick.NextFireAt
	var (
		mu      sync.Mutex
		won     []int
		created int
		wg      sync.WaitGroup
	)
	for g := range writers {
		wg.Go(func() {
			w := tick
			w.LastRunID = "tick-1"
			w.Input = fmt.Appendf(nil, "from-%d", g)
			res, err := f.store.WriteSchedule(f.ctx, storage.ScheduleWrite{Schedule: w, Revision: 1, Runs: []storage.NewRun{{ID: "tick-1", Workflow: wf, Input: w.Input}}})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				won = append(won, g)
				if len(res.Runs) == 1 && res.Runs[0].Created {
					created++
				}
			case !errors.Is(err, storage.ErrConflict):
				f.t.Errorf("WriteSchedule: %v, want success or ErrConflict", err)
			}
		})
	}
	wg.Wait()
	if f.t.Failed() {
		return
	}
	if len(won) != 1 || created != 1 {
		f.t.Fatalf("writers %v took the tick and %d created its run, want exactly one of each", won, created)
	}
	got := f.getSchedule("every.five")
	winner := fmt.Sprintf("from-%d", won[0])
	if got.Revision != 2 || string(got.Input) != winner {
		f.t.Fatalf("schedule = %s, want revision 2 written by %s", fmtSchedule(got), winner)
	}
	if runs := f.listAll(storage.ListRunsQuery{}); len(runs) != 1 || string(runs[0].Input) != winner {
		f.t.Fatalf("runs %+v, want tick-1 once, with the winner's input %s", runs, winner)
	}
}

func testScheduleRunExists(f *fixture) {
	f.create("tick-1", wf, "old")
	c := f.claimOne("worker-a")
	f.checkpoint(c.Lease, "s@v1", "1")
	before := f.get("tick-1")
	res := f.writeSchedule(storage.ScheduleWrite{Schedule: f.schedule("every.five"), Runs: []storage.NewRun{
		{ID: "tick-1", Workflow: "other", Input: []byte("new"), Queue: "elsewhere"},
		{ID: "tick-2", Workflow: wf, Input: []byte("two"), Queue: "ticks", Partition: "p", Priority: 4},
	}})
	if r := res.Runs[0]; r.Created || !reflect.DeepEqual(normRecord(r.Run), normRecord(before)) {
		f.t.Fatalf("the write's existing run = %+v, want Created false and the stored record %+v", r, before)
	}
	if r := res.Runs[1]; !r.Created || r.Run.ID != "tick-2" || string(r.Run.Input) != "two" || r.Run.Queue != "ticks" || r.Run.Partition != "p" || r.Run.Priority != 4 {
		f.t.Fatalf("the write's new run = %+v, want tick-2 created on ticks", r)
	}
	if after := f.get("tick-1"); !reflect.DeepEqual(normRecord(after), normRecord(before)) {
		f.t.Fatalf("tick-1 after the write = %+v, want untouched %+v", after, before)
	}
	f.wantCheckpoints("tick-1", "s@v1=1")
}

func testScheduleListPaging(f *fixture) {
	for _, id := range []string{"s.07", "s.03", "s.11", "s.01", "s.05", "s.09", "s.02"} {
		f.writeSchedule(storage.ScheduleWrite{Schedule: f.schedule(id)})
	}
	pages := func(q storage.ScheduleQuery) string {
		f.t.Helper()
		var out [][]string
		for range 20 {
			page := f.listSchedules(q)
			out = append(out, scheduleIDs(page.Schedules))
			if page.Next == "" {
				return fmt.Sprint(out)
			}
			q.After = page.Next
		}
		f.t.Fatalf("ListSchedules(%+v) never ended", q)
		return ""
	}
	for _, tc := range []struct {
		q    storage.ScheduleQuery
		want string
	}{
		{storage.ScheduleQuery{Limit: 3}, "[[s.01 s.02 s.03] [s.05 s.07 s.09] [s.11]]"},
		{storage.ScheduleQuery{}, "[[s.01 s.02 s.03 s.05 s.07 s.09 s.11]]"},
		{storage.ScheduleQuery{Limit: 2, After: "s.04"}, "[[s.05 s.07] [s.09 s.11]]"},
		{storage.ScheduleQuery{Limit: 2, After: "s.05"}, "[[s.07 s.09] [s.11]]"},
		{storage.ScheduleQuery{Limit: 2, After: "s.11"}, "[[]]"},
	} {
		if got := pages(tc.q); got != tc.want {
			f.t.Fatalf("pages of %+v = %s, want %s", tc.q, got, tc.want)
		}
	}
}

func testScheduleDue(f *fixture) {
	for _, s := range []struct {
		id     string
		check  time.Duration
		paused bool
	}{
		{"e.late", 10 * time.Minute, false},
		{"d.overdue", -time.Hour, false},
		{"c.now", 0, false},
		{"b.paused", -time.Hour, true},
		{"a.tie", 0, false},
		{"f.soon", time.Minute, false},
	} {
		sc := f.schedule(s.id)
		sc.CheckAt = f.now().Add(s.check)
		sc.NextFireAt = f.now().Add(time.Hour) // CheckAt, not NextFireAt, decides
		sc.Paused = s.paused
		f.writeSchedule(storage.ScheduleWrite{Schedule: sc})
	}
	for _, tc := range []struct {
		q    storage.ScheduleQuery
		want []string
	}{
		{storage.ScheduleQuery{DueBy: f.after(0)}, []string{"d.overdue", "a.tie", "c.now"}},
		{storage.ScheduleQuery{DueBy: f.after(time.Minute)}, []string{"d.overdue", "a.tie", "c.now", "f.soon"}},
		{storage.ScheduleQuery{DueBy: f.after(time.Minute), Limit: 2}, []string{"d.overdue", "a.tie"}},
		// After orders by ID and is ignored here.
		{storage.ScheduleQuery{DueBy: f.after(time.Minute), After: "c.now"}, []string{"d.overdue", "a.tie", "c.now", "f.soon"}},
		{storage.ScheduleQuery{DueBy: f.after(-2 * time.Hour)}, nil},
		{storage.ScheduleQuery{DueBy: f.after(24 * time.Hour)}, []string{"d.overdue", "a.tie", "c.now", "f.soon", "e.late"}},
	} {
		if got := scheduleIDs(f.listSchedules(tc.q).Schedules); !slices.Equal(got, tc.want) && !(len(got) == 0 && len(tc.want) == 0) {
			f.t.Fatalf("ListSchedules due by %v (limit %d, after %q) = %v, want %v", tc.q.DueBy, tc.q.Limit, tc.q.After, got, tc.want)
		}
	}
}

func testScheduleDelete(f *fixture) {
	f.writeSchedule(storage.ScheduleWrite{Schedule: f.schedule("every.five"), Runs: []storage.NewRun{{ID: "tick-1", Workflow: wf}}})
	f.writeSchedule(storage.ScheduleWrite{Schedule: f.schedule("hourly")})
	if err := f.store.DeleteSchedule(f.ctx, "every.five"); err != nil {
		f.t.Fatalf("DeleteSchedule: %v", err)
	}
	_, err := f.store.GetSchedule(f.ctx, "every.five")
	f.wantErr(err, storage.ErrScheduleNotFound, "GetSchedule of a deleted schedule")
	if ids := scheduleIDs(f.allSchedules()); !slices.Equal(ids, []string{"hourly"}) {
		f.t.Fatalf("schedules after a delete = %v, want hourly", ids)
	}
	if ids := scheduleIDs(f.listSchedules(storage.ScheduleQuery{DueBy: f.after(24 * time.Hour)}).Schedules); !slices.Equal(ids, []string{"hourly"}) {
		f.t.Fatalf("due schedules after a delete = %v, want hourly", ids)
	}
	f.wantStatus("tick-1", storage.StatusQueued)

	before := f.snapshot()
	f.wantErr(f.store.DeleteSchedule(f.ctx, "every.five"), storage.ErrScheduleNotFound, "DeleteSchedule of a deleted schedule")
	f.wantErr(f.store.DeleteSchedule(f.ctx, "never"), storage.ErrScheduleNotFound, "DeleteSchedule of an unknown schedule")
	f.wantUnchanged(before, "refused deletes")

	// The ID is free again, from revision 1.
	f.clock.Advance(time.Second)
	res := f.writeSchedule(storage.ScheduleWrite{Schedule: f.schedule("every.five")})
	f.wantTime("CreatedAt of the schedule made again", res.Schedule.CreatedAt, f.now())
}

func testScheduleMalformed(f *fixture) {
	f.writeSchedule(storage.ScheduleWrite{Schedule: f.schedule("every.five")})
	ctx, s := f.ctx, f.store
	var calls []badCall
	bad := func(name string, change func(w *storage.ScheduleWrite)) {
		w := storage.ScheduleWrite{Schedule: f.schedule("every.five"), Revision: 1, Runs: []storage.NewRun{{ID: "tick-1", Workflow: wf}}}
		change(&w)
		calls = append(calls, badCall{"WriteSchedule with " + name, w.Validate(), func() error {
			_, err := s.WriteSchedule(ctx, w)
			return err
		}})
	}
	bad("a bad ID", func(w *storage.ScheduleWrite) { w.Schedule.ID = "every five" })
	bad("no ID", func(w *storage.ScheduleWrite) { w.Schedule.ID = "" })
	bad("no workflow", func(w *storage.ScheduleWrite) { w.Schedule.Workflow = "" })
	bad("no cron expression", func(w *storage.ScheduleWrite) { w.Schedule.Cron = "" })
	bad("a bad queue name", func(w *storage.ScheduleWrite) { w.Schedule.Queue = "bad queue" })
	bad("an unknown overlap policy", func(w *storage.ScheduleWrite) { w.Schedule.Overlap = "queue_all" })
	bad("an unknown catch-up policy", func(w *storage.ScheduleWrite) { w.Schedule.CatchUp = "some" })
	bad("a negative catch-up window", func(w *storage.ScheduleWrite) { w.Schedule.CatchUpWindow = -time.Minute })
	bad("a zero next fire time", func(w *storage.ScheduleWrite) { w.Schedule.NextFireAt = time.Time{} })
	bad("a zero check time", func(w *storage.ScheduleWrite) { w.Schedule.CheckAt = time.Time{} })
	bad("a zero held tick", func(w *storage.ScheduleWrite) { w.Schedule.Held = &time.Time{} })
	bad("a priority out of range", func(w *storage.ScheduleWrite) { w.Schedule.Priority = storage.MaxPriority + 1 })
	bad("a negative revision", func(w *storage.ScheduleWrite) { w.Revision = -1 })
	bad("a malformed run", func(w *storage.ScheduleWrite) { w.Runs = append(w.Runs, storage.NewRun{ID: "tick-2"}) })
	for _, q := range []storage.ScheduleQuery{{DueBy: &time.Time{}}, {After: "bad\x00cursor"}} {
		calls = append(calls, badCall{fmt.Sprintf("ListSchedules %+v", q), q.Validate(), func() error {
			_, err := s.ListSchedules(ctx, q)
			return err
		}})
	}
	f.wantRefused(calls)
}
