package storage

import (
	"errors"
	"time"
)

// ErrScheduleNotFound: no schedule has the ID.
var ErrScheduleNotFound = errors.New("stem: schedule not found")

// ErrConflict: a write expected a record at a revision it no longer has
// (another process changed it first), or expected to create one that
// exists. Nothing was written; read it again and decide again.
var ErrConflict = errors.New("stem: conflicting write")

// OverlapPolicy says what a schedule's tick does while the run its last
// tick started has not finished.
type OverlapPolicy string

// The overlap policies.
const (
	// OverlapSkip (the zero value) starts nothing for the tick.
	OverlapSkip OverlapPolicy = ""
	// OverlapBufferOne holds the tick back and starts it once the run
	// ends; a later tick while one is held is skipped.
	OverlapBufferOne OverlapPolicy = "buffer_one"
	// OverlapAllow starts the tick's run anyway.
	OverlapAllow OverlapPolicy = "allow"
)

// Valid reports whether p is one of the overlap policies.
func (p OverlapPolicy) Valid() bool {
	return p == OverlapSkip || p == OverlapBufferOne || p == OverlapAllow
}

// CatchUpPolicy says what becomes of the ticks a schedule missed while no
// process served it (every worker down).
type CatchUpPolicy string

// The catch-up policies.
const (
	// CatchUpSkip (the zero value) starts none of the missed ticks.
	CatchUpSkip CatchUpPolicy = ""
	// CatchUpLatest starts the latest missed tick only.
	CatchUpLatest CatchUpPolicy = "latest"
	// CatchUpAll starts every missed tick within Schedule.CatchUpWindow of
	// now, oldest first.
	CatchUpAll CatchUpPolicy = "all"
)

// Valid reports whether p is one of the catch-up policies.
func (p CatchUpPolicy) Valid() bool {
	return p == CatchUpSkip || p == CatchUpLatest || p == CatchUpAll
}

// Schedule is a durable cron schedule: its ticks start runs of Workflow.
// The store keeps it and writes it only as a whole, by WriteSchedule; what
// a tick does (the cron expression, the policies) is decided by the
// schedule service, which the store does not need to understand.
type Schedule struct {
	// ID names the schedule (CheckScheduleID); a tick's run ID is derived
	// from it and the tick's time.
	ID       string
	Workflow string
	// Cron is the cron expression, TimeZone the IANA zone it is read in
	// ("" is UTC).
	Cron     string
	TimeZone string
	// Input is every tick's run input, encoded.
	Input []byte
	// Queue, Partition and Priority are given to every tick's run.
	Queue     string
	Partition string
	Priority  int
	Overlap   OverlapPolicy
	CatchUp   CatchUpPolicy
	// CatchUpWindow bounds CatchUpAll: only ticks this recent start.
	CatchUpWindow time.Duration
	// Paused schedules start nothing and are never due.
	Paused bool
	// NextFireAt is the next tick not yet handled.
	NextFireAt time.Time
	// CheckAt is when a schedule service must next look at the schedule:
	// NextFireAt, or sooner while a tick is held (Held).
	CheckAt time.Time
	// Held is the tick OverlapBufferOne holds back, nil when none.
	Held *time.Time
	// LastFireAt and LastRunID are the last tick that started a run and
	// that run.
	LastFireAt *time.Time
	LastRunID  string
	// Revision counts the schedule's writes: the store sets it to 1 at
	// creation and adds one with every write.
	Revision  int64
	CreatedAt time.Time
	UpdatedAt time.Time
}

// ScheduleWrite creates or replaces a schedule, and may start runs in the
// same atomic change (a tick's).
type ScheduleWrite struct {
	// Schedule is the schedule's new state. Its Revision, CreatedAt and
	// UpdatedAt are ignored (the store sets them).
	Schedule Schedule
	// Revision is the revision the stored schedule must have: 0 creates it
	// (ErrConflict when the ID is taken). A mismatch is ErrConflict and an
	// unknown ID with a Revision is ErrScheduleNotFound, both with nothing
	// written.
	Revision int64
	// Runs are created with the write, as CreateRuns creates them: a run
	// whose ID exists is left as it is.
	Runs []NewRun
}

// ScheduleWriteResult reports a WriteSchedule.
type ScheduleWriteResult struct {
	// Schedule is the schedule as stored now, with its new Revision.
	Schedule Schedule
	// Runs report the runs created with the write, in request order.
	Runs []CreateResult
}

// ScheduleQuery filters ListSchedules.
type ScheduleQuery struct {
	// DueBy, when set, lists only the schedules a service must look at by
	// then: not paused, with CheckAt at or before DueBy, ordered by CheckAt
	// (then ID). After is then ignored.
	DueBy *time.Time
	// After is the cursor of a listing in ID order: only IDs after it.
	After string
	// Limit caps the page; zero means DefaultPageSize.
	Limit int
}

// PageSize is how many schedules one page of the query holds at most.
func (q ScheduleQuery) PageSize() int { return pageSize(q.Limit) }

// SchedulePage is one page of ListSchedules.
type SchedulePage struct {
	Schedules []Schedule
	// Next is the cursor for the following page (ID order), or "".
	Next string
}

// CheckScheduleID checks a schedule's ID: as a workflow's name.
func CheckScheduleID(id string) error {
	return checkASCII("schedule ID", id, nameChars, nameHint)
}

// Validate checks the schedule's names, policies and times and the runs.
func (w ScheduleWrite) Validate() error {
	s := w.Schedule
	if err := CheckScheduleID(s.ID); err != nil {
		return invalid("write schedule", "%s", reason(err))
	}
	if err := CheckWorkflowName(s.Workflow); err != nil {
		return invalid("write schedule", "schedule %q: %s", s.ID, reason(err))
	}
	if s.Queue != "" {
		if err := CheckQueueName(s.Queue); err != nil {
			return invalid("write schedule", "schedule %q: %s", s.ID, reason(err))
		}
	}
	for _, f := range []struct{ field, v string }{{"cron expression", s.Cron}, {"time zone", s.TimeZone}, {"partition key", s.Partition}, {"last run ID", s.LastRunID}} {
		if f.v == "" {
			continue
		}
		if err := checkVisible(f.field, f.v, MaxNameLen); err != nil {
			return invalid("write schedule", "schedule %q: %s", s.ID, reason(err))
		}
	}
	switch {
	case s.Cron == "":
		return invalid("write schedule", "schedule %q has no cron expression", s.ID)
	case !s.Overlap.Valid():
		return invalid("write schedule", "schedule %q has unknown overlap policy %q", s.ID, s.Overlap)
	case !s.CatchUp.Valid():
		return invalid("write schedule", "schedule %q has unknown catch-up policy %q", s.ID, s.CatchUp)
	case s.CatchUpWindow < 0:
		return invalid("write schedule", "schedule %q has a negative catch-up window", s.ID)
	case s.NextFireAt.IsZero() || s.CheckAt.IsZero():
		return invalid("write schedule", "schedule %q has no next fire time", s.ID)
	case s.Held != nil && s.Held.IsZero():
		return invalid("write schedule", "schedule %q holds a zero tick", s.ID)
	case s.Priority < MinPriority || s.Priority > MaxPriority:
		return invalid("write schedule", "schedule %q has priority %d, outside %d to %d", s.ID, s.Priority, MinPriority, MaxPriority)
	case w.Revision < 0:
		return invalid("write schedule", "schedule %q: negative revision %d", s.ID, w.Revision)
	}
	return ValidateNewRuns(w.Runs)
}

// Validate checks the cursor.
func (q ScheduleQuery) Validate() error {
	if err := checkStorable("cursor", q.After); err != nil {
		return invalid("list schedules", "%s", reason(err))
	}
	if q.DueBy != nil && q.DueBy.IsZero() {
		return invalid("list schedules", "zero due time")
	}
	return nil
}

// PurgeRequest deletes finished runs; see Store.Purge.
type PurgeRequest struct {
	// FinishedBefore: only runs whose execution ended (EndedAt) before it.
	// Required.
	FinishedBefore time.Time
	// Statuses keeps only runs of these finished statuses; none: complete,
	// errored and terminated.
	Statuses []RunStatus
	// Workflows keeps only runs of these workflows; Except leaves out runs
	// of those. Neither: every workflow.
	Workflows []string
	Except    []string
	// Limit caps how many runs one call deletes (a bounded batch). Required.
	Limit int
	// DryRun counts what would be deleted (up to Limit) and deletes
	// nothing.
	DryRun bool
}

// PurgeResult reports a Purge.
type PurgeResult struct {
	// Runs is how many runs were deleted (or, on a dry run, would be).
	Runs int
	// Events is how many buffered events went with them (or, on a dry
	// run, would).
	Events int
}

// MaxPurgeBatch caps PurgeRequest.Limit, so one call stays short.
const MaxPurgeBatch = 10000

// Validate checks the time, statuses, workflow names and limit.
func (r PurgeRequest) Validate() error {
	if r.FinishedBefore.IsZero() {
		return invalid("purge", "no time: runs finished before when?")
	}
	if r.Limit <= 0 || r.Limit > MaxPurgeBatch {
		return invalid("purge", "limit %d, want 1 to %d", r.Limit, MaxPurgeBatch)
	}
	for _, st := range r.Statuses {
		if !st.Finished() {
			return invalid("purge", "status %q is not a finished status (complete, errored, terminated)", st)
		}
	}
	for _, ws := range [][]string{r.Workflows, r.Except} {
		for _, w := range ws {
			if err := CheckWorkflowName(w); err != nil {
				return invalid("purge", "%s", reason(err))
			}
		}
	}
	return nil
}

// PurgeStatuses returns the statuses a purge deletes.
func (r PurgeRequest) PurgeStatuses() []RunStatus {
	if len(r.Statuses) == 0 {
		return []RunStatus{StatusComplete, StatusErrored, StatusTerminated}
	}
	return r.Statuses
}
