package schedule

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stemflow/stem/storage"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// hourly is a schedule firing at the top of every hour, next at t0.
func hourly(overlap storage.OverlapPolicy, catchUp storage.CatchUpPolicy, window time.Duration) storage.Schedule {
	return storage.Schedule{ID: "h", Workflow: "wf", Cron: "0 * * * *", Overlap: overlap, CatchUp: catchUp, CatchUpWindow: window, NextFireAt: t0, CheckAt: t0, Revision: 1}
}

func runIDs(runs []storage.NewRun) []string {
	out := make([]string, len(runs))
	for i, r := range runs {
		out[i] = r.ID
	}
	return out
}

func mustParse(t *testing.T, s storage.Schedule) clock {
	t.Helper()
	c, err := parse(s.ID, s.Cron, s.TimeZone)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestPlanOnTime(t *testing.T) {
	s := hourly(Skip, SkipMissed, 0)
	got, runs := plan(s, mustParse(t, s), t0.Add(10*time.Second), false)
	if want := []string{"h@2026-03-01T12:00:00Z"}; !slices.Equal(runIDs(runs), want) {
		t.Fatalf("runs = %v, want %v", runIDs(runs), want)
	}
	if !got.NextFireAt.Equal(t0.Add(time.Hour)) || !got.CheckAt.Equal(got.NextFireAt) || got.LastRunID != runs[0].ID {
		t.Fatalf("schedule after = %+v", got)
	}
	// Not due yet: nothing.
	if _, runs := plan(got, mustParse(t, s), t0.Add(59*time.Minute), false); len(runs) != 0 {
		t.Fatalf("runs before the next tick = %v", runIDs(runs))
	}
}

// After five hours down, the missed ticks are skipped, the latest started,
// or all within the window started, by policy; the next tick is the next
// one after now in every case.
func TestPlanCatchUp(t *testing.T) {
	now := t0.Add(5*time.Hour + 30*time.Minute)
	for _, c := range []struct {
		policy storage.CatchUpPolicy
		window time.Duration
		want   []string
	}{
		{SkipMissed, 0, nil},
		{Latest, 0, []string{"h@2026-03-01T17:00:00Z"}},
		{All, 3 * time.Hour, []string{"h@2026-03-01T15:00:00Z", "h@2026-03-01T16:00:00Z", "h@2026-03-01T17:00:00Z"}},
	} {
		s := hourly(Allow, c.policy, c.window)
		got, runs := plan(s, mustParse(t, s), now, false)
		if !slices.Equal(runIDs(runs), c.want) {
			t.Errorf("%s: runs = %v, want %v", PolicyName(c.policy), runIDs(runs), c.want)
		}
		if want := t0.Add(6 * time.Hour); !got.NextFireAt.Equal(want) {
			t.Errorf("%s: next = %v, want %v", PolicyName(c.policy), got.NextFireAt, want)
		}
	}
}

// A tick less than Grace late is on time, whatever the catch-up policy.
func TestPlanGrace(t *testing.T) {
	s := hourly(Skip, SkipMissed, 0)
	if _, runs := plan(s, mustParse(t, s), t0.Add(Grace-time.Second), false); len(runs) != 1 {
		t.Fatalf("a tick %v late started %d runs, want 1", Grace-time.Second, len(runs))
	}
	if _, runs := plan(s, mustParse(t, s), t0.Add(Grace+time.Second), false); len(runs) != 0 {
		t.Fatalf("a tick %v late (missed, skip) started %v", Grace+time.Second, runIDs(runs))
	}
}

func TestPlanOverlap(t *testing.T) {
	now := t0.Add(time.Second)
	// Skip: the previous run still going, nothing starts.
	s := hourly(Skip, SkipMissed, 0)
	if got, runs := plan(s, mustParse(t, s), now, true); len(runs) != 0 || got.Held != nil || !got.NextFireAt.Equal(t0.Add(time.Hour)) {
		t.Fatalf("skip: runs %v, held %v, next %v", runIDs(runs), got.Held, got.NextFireAt)
	}
	// Allow: it starts anyway.
	s = hourly(Allow, SkipMissed, 0)
	if _, runs := plan(s, mustParse(t, s), now, true); len(runs) != 1 {
		t.Fatalf("allow: runs %v", runIDs(runs))
	}
	// Buffer one: held, looked at again soon, started once the run ended.
	s = hourly(BufferOne, SkipMissed, 0)
	held, runs := plan(s, mustParse(t, s), now, true)
	if len(runs) != 0 || held.Held == nil || !held.Held.Equal(t0) || !held.CheckAt.Equal(now.Add(heldRecheck)) {
		t.Fatalf("buffer one: runs %v, held %v, check at %v", runIDs(runs), held.Held, held.CheckAt)
	}
	// A second tick while one is held is skipped.
	later := t0.Add(time.Hour + time.Second)
	held2, runs := plan(held, mustParse(t, s), later, true)
	if len(runs) != 0 || held2.Held == nil || !held2.Held.Equal(t0) {
		t.Fatalf("buffer one, second tick: runs %v, held %v", runIDs(runs), held2.Held)
	}
	// The run ends: the held tick starts (and the next one is not due).
	done, runs := plan(held2, mustParse(t, s), later.Add(10*time.Second), false)
	if want := []string{"h@2026-03-01T12:00:00Z"}; !slices.Equal(runIDs(runs), want) || done.Held != nil {
		t.Fatalf("buffer one, after the run: runs %v (want %v), held %v", runIDs(runs), want, done.Held)
	}
	if !done.CheckAt.Equal(done.NextFireAt) {
		t.Fatalf("check at %v, want the next fire time %v", done.CheckAt, done.NextFireAt)
	}
}

// Catch-up all with overlap skip starts the first missed tick only: the
// others would overlap it.
func TestPlanCatchUpAllWithSkip(t *testing.T) {
	s := hourly(Skip, All, 24*time.Hour)
	_, runs := plan(s, mustParse(t, s), t0.Add(3*time.Hour+30*time.Minute), false)
	if want := []string{"h@2026-03-01T12:00:00Z"}; !slices.Equal(runIDs(runs), want) {
		t.Fatalf("runs = %v, want %v", runIDs(runs), want)
	}
}

// A zone's daylight saving change moves the tick in UTC, not in local
// time: 02:30 every day in New York.
func TestPlanTimeZone(t *testing.T) {
	s := storage.Schedule{ID: "ny", Cron: "30 2 * * *", TimeZone: "America/New_York"}
	c := mustParse(t, s)
	// 2026-03-08 is the spring-forward day: 02:30 does not exist; the
	// parser moves to the next day. Before and after the change:
	before := c.next(time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC))
	if want := time.Date(2026, 3, 1, 7, 30, 0, 0, time.UTC); !before.Equal(want) {
		t.Fatalf("next in winter = %v, want %v (02:30 EST)", before, want)
	}
	after := c.next(time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC))
	if want := time.Date(2026, 4, 1, 6, 30, 0, 0, time.UTC); !after.Equal(want) {
		t.Fatalf("next in summer = %v, want %v (02:30 EDT)", after, want)
	}
}

func TestParseErrors(t *testing.T) {
	for _, c := range []struct{ expr, zone, says string }{
		{"61 * * * *", "", `cron expression "61 * * * *"`},
		{"* * * *", "", "want five fields"},
		{"@evry 5m", "", `cron expression "@evry 5m"`},
		{"0 * * * *", "Europe/Pariss", `unknown time zone "Europe/Pariss"`},
		{"0 * * * *", "Local", `unknown time zone "Local"`},
		{"", "", "no cron expression"},
	} {
		_, err := parse("s", c.expr, c.zone)
		if !errors.Is(err, ErrInvalidSchedule) || !strings.Contains(err.Error(), c.says) || !strings.Contains(err.Error(), "schedule s") {
			t.Errorf("parse(%q, %q) = %v, want ErrInvalidSchedule naming the schedule and saying %s", c.expr, c.zone, err, c.says)
		}
	}
	if _, err := ParseOverlap("bufer_one"); err == nil || !strings.Contains(err.Error(), `did you mean "buffer_one"`) {
		t.Errorf("ParseOverlap(bufer_one) = %v", err)
	}
	if _, err := ParseCatchUp("lates"); err == nil || !strings.Contains(err.Error(), `did you mean "latest"`) {
		t.Errorf("ParseCatchUp(lates) = %v", err)
	}
}

// A tick every minute after a year down walks at most maxTicks of them.
func TestPlanBounded(t *testing.T) {
	s := storage.Schedule{ID: "m", Cron: "* * * * *", CatchUp: All, CatchUpWindow: 365 * 24 * time.Hour, Overlap: Allow, NextFireAt: t0, CheckAt: t0}
	now := t0.Add(365 * 24 * time.Hour)
	got, runs := plan(s, mustParse(t, s), now, false)
	if len(runs) != maxTicks {
		t.Fatalf("%d runs, want the latest %d", len(runs), maxTicks)
	}
	if !got.NextFireAt.After(now) || runs[len(runs)-1].ID != RunID("m", now) {
		t.Fatalf("next %v, last run %s", got.NextFireAt, runs[len(runs)-1].ID)
	}
}

// A tick every second after a year down costs a walk over the window only,
// and the latest tick is found however far back it is.
func TestPlanLongDowntime(t *testing.T) {
	now := t0.Add(365 * 24 * time.Hour)
	s := storage.Schedule{ID: "s", Cron: "@every 1s", CatchUp: Latest, NextFireAt: t0, CheckAt: t0}
	start := time.Now()
	got, runs := plan(s, mustParse(t, s), now.Add(2*time.Minute), false)
	if len(runs) != 1 || !got.NextFireAt.After(now) {
		t.Fatalf("runs %v, next %v", runIDs(runs), got.NextFireAt)
	}
	y := storage.Schedule{ID: "y", Cron: "0 0 1 1 *", CatchUp: Latest, NextFireAt: time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)}
	y.CheckAt = y.NextFireAt
	_, runs = plan(y, mustParse(t, y), now, false)
	if want := []string{"y@2027-01-01T00:00:00Z"}; !slices.Equal(runIDs(runs), want) {
		t.Fatalf("yearly, latest: %v, want %v", runIDs(runs), want)
	}
	t.Logf("took %v", time.Since(start))
}
