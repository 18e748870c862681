// Package schedule starts workflow runs on a calendar: durable cron
// schedules, kept in the engine's store, whose every tick starts exactly
// one run however many workers serve them.
//
// A schedule is created once (Create, or `stem schedule create`) and lives
// in the store until deleted. Engines fire it when they run this package's
// Service:
//
//	eng, _ := runtime.New(runtime.Config{Store: st, Services: []runtime.Service{schedule.Service{}}})
//
// Each tick's run has an ID derived from the schedule and the tick's time
// (RunID), and a tick is taken by a compare-and-set on the schedule's
// revision, in the same atomic change that creates the run: any number of
// engines may serve the schedules, and each tick starts one run.
//
// What a tick does while the schedule's previous run has not finished is
// its Overlap policy; what becomes of the ticks missed while no engine
// served the schedule is its CatchUp policy.
package schedule

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"
	_ "time/tzdata" // time zones on machines without a zoneinfo database

	"github.com/robfig/cron/v3"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/storage"
)

// The overlap policies: what a tick does while the run the schedule last
// started has not finished.
const (
	// Skip (the default) starts nothing for the tick.
	Skip = storage.OverlapSkip
	// BufferOne holds the tick and starts it once the run ends; while one
	// is held, later ticks are skipped.
	BufferOne = storage.OverlapBufferOne
	// Allow starts the tick's run anyway.
	Allow = storage.OverlapAllow
)

// The catch-up policies: what becomes of the ticks missed while no engine
// served the schedule (a tick is missed once it is more than Grace late).
const (
	// SkipMissed (the default) starts none of them.
	SkipMissed = storage.CatchUpSkip
	// Latest starts the latest of them only.
	Latest = storage.CatchUpLatest
	// All starts each of them within the schedule's CatchUpWindow of now,
	// oldest first (the overlap policy still applies between them).
	All = storage.CatchUpAll
)

// Grace is how late a tick may be and still count as on time: an engine
// that was busy or restarting for less fires it as usual, whatever the
// catch-up policy.
const Grace = time.Minute

// maxTicks bounds how many ticks one firing walks over, so an expression
// that fires every second after a year of downtime costs a bounded
// computation; older ticks are then skipped.
const maxTicks = 1000

// Spec is a schedule to create.
type Spec struct {
	// ID names the schedule: 1 to 128 ASCII letters, digits, '.', '_' and
	// '-'. Its runs' IDs are derived from it (RunID).
	ID string
	// Workflow is the durable name of the workflow each tick starts.
	Workflow string
	// Cron is a standard five-field cron expression (minute hour
	// day-of-month month day-of-week, e.g. "30 2 * * 1-5") or a descriptor:
	// @yearly, @monthly, @weekly, @daily, @hourly, or @every DURATION.
	Cron string
	// TimeZone is the IANA zone the expression is read in ("Europe/Paris");
	// "" is UTC.
	TimeZone string
	// Input is the input every tick's run gets; it must encode to what the
	// workflow takes (checked at Create).
	Input any
	// Queue, Partition and Priority place every tick's run as
	// runtime.OnQueue, WithPartition and WithPriority do.
	Queue     string
	Partition string
	Priority  int
	// Overlap and CatchUp are the policies (Skip and SkipMissed by
	// default); CatchUpWindow bounds All (required with it).
	Overlap       storage.OverlapPolicy
	CatchUp       storage.CatchUpPolicy
	CatchUpWindow time.Duration
	// Paused creates the schedule paused.
	Paused bool
}

// Info is a schedule as stored, with its next fire times.
type Info struct {
	storage.Schedule
	// Next are the next few fire times (the first is NextFireAt), in the
	// schedule's time zone; none while paused.
	Next []time.Time
}

// ErrInvalidSchedule: a cron expression, time zone or policy that cannot
// be used; nothing was written.
var ErrInvalidSchedule = errors.New("stem: invalid schedule")

// Errors the store returns, re-exported for errors.Is.
var (
	ErrNotFound = storage.ErrScheduleNotFound
	ErrConflict = storage.ErrConflict
)

var parser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// clock is a parsed expression in its zone.
type clock struct {
	sched cron.Schedule
	loc   *time.Location
}

func parse(id, expr, zone string) (clock, error) {
	loc := time.UTC
	if zone != "" {
		l, err := time.LoadLocation(zone)
		if err != nil || zone == "Local" {
			return clock{}, fmt.Errorf("%w: schedule %s: unknown time zone %q: give an IANA name such as \"Europe/Paris\" or \"America/New_York\"", ErrInvalidSchedule, id, zone)
		}
		loc = l
	}
	if expr == "" {
		return clock{}, fmt.Errorf("%w: schedule %s: no cron expression", ErrInvalidSchedule, id)
	}
	s, err := parser.Parse(expr)
	if err != nil {
		return clock{}, fmt.Errorf("%w: schedule %s: cron expression %q: %v (want five fields, minute hour day-of-month month day-of-week, or @hourly, @daily, @every 15m...)", ErrInvalidSchedule, id, expr, err)
	}
	return clock{sched: s, loc: loc}, nil
}

// next is the first tick after t, in UTC.
func (c clock) next(t time.Time) time.Time {
	n := c.sched.Next(t.In(c.loc))
	if n.IsZero() {
		return n
	}
	return n.UTC()
}

// RunID is the ID of the run a schedule's tick starts.
func RunID(scheduleID string, tick time.Time) string {
	return scheduleID + "@" + tick.UTC().Format(time.RFC3339)
}

// Create stores a new schedule. The workflow must be known to e or to an
// engine sharing its store, the input must match it, and the expression,
// zone, policies, queue and partition must be usable: else an error saying
// which, with nothing written. An ID that exists is ErrConflict.
func Create(ctx context.Context, e *runtime.Engine, s Spec) (Info, error) {
	raw, err := json.Marshal(s.Input)
	if err != nil {
		return Info{}, fmt.Errorf("%w: schedule %s: input: %v", runtime.ErrInvalidArgument, s.ID, err)
	}
	return CreateJSON(ctx, e, s, raw)
}

// CreateJSON is Create with the input as JSON (s.Input is ignored).
func CreateJSON(ctx context.Context, e *runtime.Engine, s Spec, input json.RawMessage) (Info, error) {
	if err := storage.CheckScheduleID(s.ID); err != nil {
		return Info{}, err
	}
	c, err := parse(s.ID, s.Cron, s.TimeZone)
	if err != nil {
		return Info{}, err
	}
	switch {
	case !s.Overlap.Valid():
		return Info{}, fmt.Errorf("%w: schedule %s: unknown overlap policy %q (want skip, buffer_one or allow)", ErrInvalidSchedule, s.ID, s.Overlap)
	case !s.CatchUp.Valid():
		return Info{}, fmt.Errorf("%w: schedule %s: unknown catch-up policy %q (want skip, latest or all)", ErrInvalidSchedule, s.ID, s.CatchUp)
	case s.CatchUpWindow < 0:
		return Info{}, fmt.Errorf("%w: schedule %s: negative catch-up window %v", ErrInvalidSchedule, s.ID, s.CatchUpWindow)
	case s.CatchUp == All && s.CatchUpWindow == 0:
		return Info{}, fmt.Errorf("%w: schedule %s: catch-up policy all needs a catch-up window (how far back to start missed ticks)", ErrInvalidSchedule, s.ID)
	case s.CatchUp != All && s.CatchUpWindow != 0:
		return Info{}, fmt.Errorf("%w: schedule %s: a catch-up window applies only to catch-up policy all", ErrInvalidSchedule, s.ID)
	}
	opts := []runtime.StartOption{runtime.WithPriority(s.Priority)}
	if s.Queue != "" {
		opts = append(opts, runtime.OnQueue(s.Queue))
	}
	if s.Partition != "" {
		opts = append(opts, runtime.WithPartition(s.Partition))
	}
	run, err := e.PrepareStartJSON(ctx, s.Workflow, "", input, opts...)
	if err != nil {
		return Info{}, fmt.Errorf("schedule %s: %w", s.ID, err)
	}
	now := e.Now()
	next := c.next(now)
	if next.IsZero() {
		return Info{}, fmt.Errorf("%w: schedule %s: cron expression %q never fires", ErrInvalidSchedule, s.ID, s.Cron)
	}
	rec := storage.Schedule{
		ID: s.ID, Workflow: s.Workflow, Cron: s.Cron, TimeZone: s.TimeZone, Input: run.Input,
		Queue: run.Queue, Partition: run.Partition, Priority: run.Priority,
		Overlap: s.Overlap, CatchUp: s.CatchUp, CatchUpWindow: s.CatchUpWindow, Paused: s.Paused,
		NextFireAt: next, CheckAt: next,
	}
	res, err := e.Store().WriteSchedule(ctx, storage.ScheduleWrite{Schedule: rec})
	if err != nil {
		return Info{}, err
	}
	return info(res.Schedule), nil
}

// info adds a schedule's next fire times.
func info(s storage.Schedule) Info {
	out := Info{Schedule: s}
	if s.Paused {
		return out
	}
	c, err := parse(s.ID, s.Cron, s.TimeZone)
	if err != nil {
		return out
	}
	t := s.NextFireAt
	for range 3 {
		if t.IsZero() {
			break
		}
		out.Next = append(out.Next, t.In(c.loc))
		t = c.next(t)
	}
	return out
}

// Get returns a schedule, or ErrNotFound.
func Get(ctx context.Context, e *runtime.Engine, id string) (Info, error) {
	s, err := e.Store().GetSchedule(ctx, id)
	if err != nil {
		return Info{}, err
	}
	return info(s), nil
}

// List returns a page of schedules in ID order, after the cursor, with
// the cursor of the next page ("" at the end).
func List(ctx context.Context, e *runtime.Engine, after string, limit int) ([]Info, string, error) {
	p, err := e.Store().ListSchedules(ctx, storage.ScheduleQuery{After: after, Limit: limit})
	if err != nil {
		return nil, "", err
	}
	out := make([]Info, len(p.Schedules))
	for i, s := range p.Schedules {
		out[i] = info(s)
	}
	return out, p.Next, nil
}

// Delete deletes a schedule; the runs it started stay.
func Delete(ctx context.Context, e *runtime.Engine, id string) error {
	return e.Store().DeleteSchedule(ctx, id)
}

// Pause stops a schedule's ticks until Resume. Pausing a paused schedule
// does nothing.
func Pause(ctx context.Context, e *runtime.Engine, id string) error {
	return update(ctx, e, id, func(s *storage.Schedule, _ clock, _ time.Time) []storage.NewRun {
		s.Paused = true
		return nil
	})
}

// Resume lets a paused schedule tick again from now on: the ticks it
// missed while paused are not started.
func Resume(ctx context.Context, e *runtime.Engine, id string) error {
	return update(ctx, e, id, func(s *storage.Schedule, c clock, now time.Time) []storage.NewRun {
		if !s.Paused {
			return nil
		}
		s.Paused = false
		s.NextFireAt = c.next(now)
		s.CheckAt = s.NextFireAt
		return nil
	})
}

// Trigger starts a run of the schedule now, outside its calendar (paused
// or not), and returns its ID. It does not move the schedule's next tick,
// and it ignores the overlap policy: it is an operator's explicit start.
func Trigger(ctx context.Context, e *runtime.Engine, id string) (string, error) {
	var runID string
	err := update(ctx, e, id, func(s *storage.Schedule, _ clock, now time.Time) []storage.NewRun {
		runID = s.ID + "@manual-" + now.UTC().Format("20060102T150405.000000000Z")
		t := now
		s.LastFireAt, s.LastRunID = &t, runID
		return []storage.NewRun{newRun(*s, runID)}
	})
	return runID, err
}

// newRun is the run a tick of s starts.
func newRun(s storage.Schedule, id string) storage.NewRun {
	return storage.NewRun{ID: id, Workflow: s.Workflow, Input: s.Input, Queue: s.Queue, Partition: s.Partition, Priority: s.Priority}
}

// update reads a schedule, changes it and writes it back at the revision
// read, again while another process wins the race.
func update(ctx context.Context, e *runtime.Engine, id string, change func(*storage.Schedule, clock, time.Time) []storage.NewRun) error {
	for {
		s, err := e.Store().GetSchedule(ctx, id)
		if err != nil {
			return err
		}
		c, err := parse(s.ID, s.Cron, s.TimeZone)
		if err != nil {
			return err
		}
		before := s
		runs := change(&s, c, e.Now())
		if len(runs) == 0 && sameSchedule(before, s) {
			return nil
		}
		if err := write(ctx, e, s, before.Revision, runs); !errors.Is(err, storage.ErrConflict) {
			return err
		}
	}
}

// write stores s at revision rev with the runs of its tick, each given
// what a start on e gives it (its workflow's timeout= and version, from
// e's registration or else the store's catalog: StartDefaultsFromCatalog),
// in one atomic change, and wakes e's workers when a run was created.
func write(ctx context.Context, e *runtime.Engine, s storage.Schedule, rev int64, runs []storage.NewRun) error {
	if err := e.StartDefaultsFromCatalog(ctx, runs); err != nil {
		return err
	}
	// The tick's runs are started inside the engine's start hooks (a
	// trace of the tick, say), as any start is.
	created, err := e.Starting(ctx, runs, func(ctx context.Context, runs []storage.NewRun) ([]storage.CreateResult, error) {
		res, err := e.Store().WriteSchedule(ctx, storage.ScheduleWrite{Schedule: s, Revision: rev, Runs: runs})
		return res.Runs, err
	})
	if err != nil {
		return err
	}
	if slices.ContainsFunc(created, func(r storage.CreateResult) bool { return r.Created }) {
		e.Ready() // the local workers claim at once
	}
	return nil
}

func sameSchedule(a, b storage.Schedule) bool {
	return a.Paused == b.Paused && a.NextFireAt.Equal(b.NextFireAt) && a.CheckAt.Equal(b.CheckAt)
}

// plan is what one look at a due schedule decides: the runs to start and
// the schedule's new state.
func plan(s storage.Schedule, c clock, now time.Time, lastRunning bool) (storage.Schedule, []storage.NewRun) {
	var due []time.Time
	next := walkFrom(s, c, now)
	for n := 0; !next.IsZero() && !next.After(now); n++ {
		if n < maxTicks {
			due = append(due, next)
		} else {
			due = append(due[1:], next) // keep the latest maxTicks
		}
		next = c.next(next)
	}
	// The ticks more than Grace late were missed; the catch-up policy
	// says which of them still start.
	var ticks, missed []time.Time
	for _, t := range due {
		if now.Sub(t) > Grace {
			missed = append(missed, t)
		} else {
			ticks = append(ticks, t)
		}
	}
	switch s.CatchUp {
	case Latest:
		if len(missed) > 0 && len(ticks) == 0 {
			ticks = missed[len(missed)-1:]
		}
	case All:
		var keep []time.Time
		for _, t := range missed {
			if now.Sub(t) <= s.CatchUpWindow {
				keep = append(keep, t)
			}
		}
		ticks = append(keep, ticks...)
	}
	var runs []storage.NewRun
	start := func(t time.Time) {
		id := RunID(s.ID, t)
		runs = append(runs, newRun(s, id))
		tick := t
		s.LastFireAt, s.LastRunID = &tick, id
		lastRunning = true
	}
	if s.Held != nil && !lastRunning {
		held := *s.Held
		s.Held = nil
		start(held)
	}
	for _, t := range ticks {
		switch {
		case !lastRunning || s.Overlap == Allow:
			start(t)
		case s.Overlap == BufferOne && s.Held == nil:
			tick := t
			s.Held = &tick
		}
	}
	if !next.IsZero() {
		s.NextFireAt = next
	}
	s.CheckAt = s.NextFireAt
	if s.Held != nil {
		// Look again soon: the held tick starts once the run ends.
		s.CheckAt = earliest(s.NextFireAt, now.Add(heldRecheck))
	}
	return s, runs
}

// walkFrom is the first tick plan looks at: the schedule's next one, or,
// after a long downtime, a later one, so that a schedule that ticks every
// second costs no walk over a year of ticks: only those the catch-up
// policy could start (within Grace, the window, or the latest) are walked.
func walkFrom(s storage.Schedule, c clock, now time.Time) time.Time {
	back := max(s.CatchUpWindow, Grace)
	if now.Sub(s.NextFireAt) <= back {
		return s.NextFireAt
	}
	steps := []time.Duration{back}
	if s.CatchUp == Latest {
		// The latest tick may be far back: look a little further each time.
		steps = append(steps, time.Hour, 24*time.Hour, 32*24*time.Hour, 367*24*time.Hour, 5*367*24*time.Hour)
	}
	for _, b := range steps {
		if now.Sub(s.NextFireAt) <= b {
			break
		}
		if t := c.next(now.Add(-b)); !t.IsZero() && !t.After(now) {
			return t
		}
	}
	if t := c.next(now.Add(-back)); !t.IsZero() && t.After(s.NextFireAt) {
		return t
	}
	return s.NextFireAt
}

// heldRecheck is how often a schedule holding a tick looks at whether the
// run it waits on has ended.
const heldRecheck = time.Second

func earliest(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// fire handles one due schedule: decides, then writes at the revision it
// read. Another engine's write first is ErrConflict, which is not an error
// here: that engine handled the tick.
func fire(ctx context.Context, e *runtime.Engine, s storage.Schedule, now time.Time) error {
	c, err := parse(s.ID, s.Cron, s.TimeZone)
	if err != nil {
		return err
	}
	lastRunning := false
	if s.LastRunID != "" && (s.Overlap != Allow || s.Held != nil) {
		r, err := e.Store().GetRun(ctx, s.LastRunID)
		switch {
		case err == nil:
			lastRunning = !r.Status.Finished()
		case !errors.Is(err, storage.ErrRunNotFound):
			return err
		}
	}
	updated, runs := plan(s, c, now, lastRunning)
	err = write(ctx, e, updated, s.Revision, runs)
	if errors.Is(err, storage.ErrConflict) || errors.Is(err, storage.ErrScheduleNotFound) {
		return nil
	}
	return err
}

// Service fires the store's due schedules while the engine runs (put it in
// runtime.Config.Services). Every engine may run it: each tick is taken by
// one of them.
type Service struct {
	// Poll is how often it looks for due schedules when none is due
	// sooner: the longest a schedule created or resumed by another process
	// waits for its first look. Default 1s.
	Poll time.Duration
}

// Serve fires due schedules until ctx is done.
func (sv Service) Serve(ctx context.Context, e *runtime.Engine) {
	poll := sv.Poll
	if poll <= 0 {
		poll = time.Second
	}
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		wait := poll
		if err := serveOnce(ctx, e); err != nil {
			if ctx.Err() == nil {
				e.Logger().Error("stem: firing schedules", "err", err)
			}
			t.Reset(poll) // not at once again: the store may be down
			continue
		}
		far := e.Now().Add(poll)
		if p, err := e.Store().ListSchedules(ctx, storage.ScheduleQuery{DueBy: &far, Limit: 1}); err == nil && len(p.Schedules) > 0 {
			wait = max(min(p.Schedules[0].CheckAt.Sub(e.Now()), poll), time.Millisecond)
		}
		t.Reset(wait)
	}
}

// serveOnce fires the schedules due now, up to a page of them; Serve
// comes back at once for more.
func serveOnce(ctx context.Context, e *runtime.Engine) error {
	now := e.Now()
	p, err := e.Store().ListSchedules(ctx, storage.ScheduleQuery{DueBy: &now, Limit: 100})
	if err != nil {
		return err
	}
	var errs []error
	for _, s := range p.Schedules {
		if err := fire(ctx, e, s, now); err != nil {
			errs = append(errs, fmt.Errorf("schedule %s: %w", s.ID, err))
		}
	}
	return errors.Join(errs...)
}

// policies lists the names the operator command accepts.
var (
	overlapNames = []string{"skip", string(BufferOne), string(Allow)}
	catchUpNames = []string{"skip", string(Latest), string(All)}
)

// ParseOverlap reads an overlap policy by name (skip, buffer_one, allow).
func ParseOverlap(s string) (storage.OverlapPolicy, error) {
	if s == "skip" || s == "" {
		return Skip, nil
	}
	if p := storage.OverlapPolicy(s); p.Valid() {
		return p, nil
	}
	return "", fmt.Errorf("%w: unknown overlap policy %q%s (want skip, buffer_one or allow)", ErrInvalidSchedule, s, hint(s, overlapNames))
}

// ParseCatchUp reads a catch-up policy by name (skip, latest, all).
func ParseCatchUp(s string) (storage.CatchUpPolicy, error) {
	if s == "skip" || s == "" {
		return SkipMissed, nil
	}
	if p := storage.CatchUpPolicy(s); p.Valid() {
		return p, nil
	}
	return "", fmt.Errorf("%w: unknown catch-up policy %q%s (want skip, latest or all)", ErrInvalidSchedule, s, hint(s, catchUpNames))
}

func hint(s string, names []string) string {
	if n := storage.Nearest(s, slices.Clone(names)); n != "" {
		return fmt.Sprintf("; did you mean %q?", n)
	}
	return ""
}

// PolicyName is a policy's name as the operator command prints it.
func PolicyName[P ~string](p P) string {
	if p == "" {
		return "skip"
	}
	return string(p)
}
