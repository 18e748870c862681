-- Queues (limits, partitions, priority, rate), schedules and purge
-- (issue 14).

-- A run's queue, partition key and priority, fixed at creation.
-- first_claimed_at is when the run was first claimed since its creation or
-- last Restart (NULL: not yet, its next claim is a start).
-- ended_at is when a finished run ended (its current execution's end,
-- NULL while unfinished), so that Purge finds the oldest finished runs by
-- an index on runs alone.
ALTER TABLE runs ADD COLUMN queue TEXT NOT NULL DEFAULT 'default';
ALTER TABLE runs ADD COLUMN partition_key TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN priority INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN first_claimed_at INTEGER;
ALTER TABLE runs ADD COLUMN ended_at INTEGER;
-- claim_rank orders a priority's claimable runs: 0 for a running run
-- (claimable once its lease expired: a recovery), 1 for a queued or
-- waiting one, so recoveries come first.
ALTER TABLE runs ADD COLUMN claim_rank INTEGER GENERATED ALWAYS AS (status <> 'running') VIRTUAL;

UPDATE runs SET ended_at = (SELECT e.ended_at FROM executions e WHERE e.run_ref = runs.ref AND e.number = runs.execution)
WHERE status IN ('complete', 'errored', 'terminated');
-- Runs already claimed once count as started, long ago.
UPDATE runs SET first_claimed_at = created_at WHERE token > 0;

-- Claim: per queue and priority (highest first), recoveries then ready
-- runs, each a range of claim_at that a claim scans from the oldest and
-- stops at its limit (or at now) however many runs wait. The default
-- queue's runs, most runs of most stores, have an index of their own that
-- does not repeat the queue's name: every step of a run moves its entry
-- (its lease's expiry is its claim_at), and with the name first every seek
-- would compare it at each level of the tree. The other queues' runs are
-- in runs_claim_queue, by queue first.
DROP INDEX runs_claim;
CREATE INDEX runs_claim ON runs (priority DESC, claim_rank, claim_at, workflow)
WHERE claim_at IS NOT NULL AND queue = 'default';
CREATE INDEX runs_claim_queue ON runs (queue, priority DESC, claim_rank, claim_at, workflow)
WHERE claim_at IS NOT NULL AND queue <> 'default';

-- The places a queue's runs hold, its running runs, are counted through
-- runs_claim and runs_claim_queue, where running runs are the recoveries'
-- ranges (claim_rank 0) of each priority: no index of their own, which
-- every claim and every end would pay to keep.

-- A rate-limited queue's starts, one row per start, kept while within the
-- queue's rate period (a claim deletes older ones before it counts). The
-- runs cannot count them: a run restarted and started again within one
-- period is two starts.
CREATE TABLE queue_starts (
    id    INTEGER NOT NULL PRIMARY KEY,
    queue TEXT    NOT NULL,
    at    INTEGER NOT NULL
) STRICT;
CREATE INDEX queue_starts_queue ON queue_starts (queue, at);

-- ListRuns filtered by a queue other than the default, ordered by ID. The
-- default queue's runs, most runs of most stores, are left out, so that
-- creating them costs nothing more; ListRuns of the default queue walks
-- the runs in ID order instead, passing over the few of other queues.
CREATE INDEX runs_queue ON runs (queue, id) WHERE queue <> 'default';

-- Purge: finished runs, oldest end first. Every run's end enters it, at
-- its right edge, so its entries are kept small: the end alone, a purge
-- reading the row of each run it considers for its status and workflow.
CREATE INDEX runs_ended ON runs (ended_at) WHERE ended_at IS NOT NULL;

-- The catalog: a workflow's default queue ('' for the default) and
-- retention in nanoseconds (NULL: the engines' default), and the queues
-- engines register, with their limits (rate_period in nanoseconds).
ALTER TABLE workflow_types ADD COLUMN queue TEXT NOT NULL DEFAULT '';
ALTER TABLE workflow_types ADD COLUMN retention INTEGER;

CREATE TABLE queue_types (
    name                  TEXT    NOT NULL PRIMARY KEY,
    concurrency           INTEGER NOT NULL,
    partition_concurrency INTEGER NOT NULL,
    rate                  INTEGER NOT NULL,
    rate_period           INTEGER NOT NULL,
    worker                TEXT    NOT NULL,
    updated_at            INTEGER
) STRICT;

-- Schedules, written whole by revision (WriteSchedule). Times are Unix
-- nanoseconds; held and last_fire_at are NULL when none.
CREATE TABLE schedules (
    id              TEXT    NOT NULL PRIMARY KEY,
    workflow        TEXT    NOT NULL,
    cron            TEXT    NOT NULL,
    time_zone       TEXT    NOT NULL,
    input           BLOB,
    queue           TEXT    NOT NULL,
    partition_key   TEXT    NOT NULL,
    priority        INTEGER NOT NULL,
    overlap         TEXT    NOT NULL,
    catch_up        TEXT    NOT NULL,
    catch_up_window INTEGER NOT NULL,
    paused          INTEGER NOT NULL,
    next_fire_at    INTEGER NOT NULL,
    check_at        INTEGER NOT NULL,
    held            INTEGER,
    last_fire_at    INTEGER,
    last_run_id     TEXT    NOT NULL,
    revision        INTEGER NOT NULL,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL
) STRICT, WITHOUT ROWID;

-- ListSchedules by DueBy: the unpaused schedules in CheckAt order.
CREATE INDEX schedules_due ON schedules (check_at, id) WHERE paused = 0;
