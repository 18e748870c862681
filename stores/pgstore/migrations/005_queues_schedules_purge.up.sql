-- Queues (limits, partitions, priority, rate), schedules, purge, and the
-- queues and retention of the catalog.
-- {schema} is replaced by the store's quoted schema name.

-- A run's queue, partition key and priority never change after its
-- creation, so these columns cost an update nothing: lease extensions stay
-- heap-only. Existing runs are on the default queue, without partition, at
-- priority 0 (constant defaults: no table rewrite). first_claimed_at is set
-- by a run's first claim since its creation or last Restart: a claim of a
-- run without one is a start, which a queue's rate counts.
ALTER TABLE {schema}.runs
    ADD COLUMN queue            text        NOT NULL DEFAULT 'default',
    ADD COLUMN partition        text        NOT NULL DEFAULT '',
    ADD COLUMN priority         integer     NOT NULL DEFAULT 0,
    ADD COLUMN first_claimed_at timestamptz;

-- Claims and NextWake: each (workflow, queue) pair's ready runs, oldest
-- ready_at first, in two indexes. Runs at the default priority, nearly
-- all, are in runs_queue_ready_idx, which a claim walks as it walked
-- runs_claim_idx before queues: one bounded scan per pair, the clock in
-- its index condition, stopped at its limit, so neither the backlog nor
-- the runs sleeping into the future cost it anything. Runs at any other
-- priority are in runs_queue_priority_idx, by priority, highest first: a
-- claim walks the distinct priorities of a pair there (one probe each,
-- and one finding nothing, all a claim pays while it is empty) and,
-- within each, the runs ready by now, bounded likewise. Runs waiting for
-- an event without a deadline (ready_at NULL) are in neither: nothing
-- looks for them by time.
CREATE INDEX runs_queue_ready_idx ON {schema}.runs (workflow, queue, ready_at)
    WHERE status IN ('queued', 'waiting') AND ready_at IS NOT NULL AND priority = 0;
CREATE INDEX runs_queue_priority_idx ON {schema}.runs (workflow, queue, priority DESC, ready_at)
    WHERE status IN ('queued', 'waiting') AND ready_at IS NOT NULL AND priority <> 0;
DROP INDEX {schema}.runs_claim_idx;

-- Running runs by queue and partition: a limited claim counts the places
-- held in a queue and its partitions, the claim and NextWake find expired
-- leases, and the writes of running runs (checkpoints, completions, a
-- claim's replays), which find their runs by ID and status 'running',
-- take it over the table's larger indexes, as they took runs_running_idx,
-- which it replaces: it holds about as many live entries as there are
-- workers, and the claims' scans of it mark the entries of runs that
-- stopped running dead, so it stays small whatever the history.
CREATE INDEX runs_queue_running_idx ON {schema}.runs (queue, partition)
    WHERE status = 'running';
DROP INDEX {schema}.runs_running_idx;

-- Every unfinished run by queue and status: QueueStats counts a queue's
-- runs by state without reading finished runs. Its predicate says
-- unfinished by ended_at (NULL exactly while a run is unfinished), not by
-- status, and only QueueStats says ended_at IS NULL, so no other
-- statement can be planned on it: without statistics (a new store,
-- autovacuum off) the planner rated an index on status as cheap as the
-- claim's and read every ready run of the queue, then sorted them.
CREATE INDEX runs_queue_idx ON {schema}.runs (queue, status, partition) INCLUDE (ready_at)
    WHERE ended_at IS NULL;

-- Purge: finished runs, oldest end first.
CREATE INDEX runs_ended_idx ON {schema}.runs (ended_at)
    WHERE status IN ('complete', 'errored', 'terminated');

-- The starts of the runs of rate-limited queues (a claim of a run without
-- first_claimed_at), written and counted only by claims that name the
-- queue with a rate, under the queue's lock, and pruned by them once older
-- than the queue's rate period: a queue keeps about Rate rows.
CREATE TABLE {schema}.queue_starts (
    queue text        NOT NULL,
    at    timestamptz NOT NULL
);
CREATE INDEX queue_starts_idx ON {schema}.queue_starts (queue, at);

-- Durable cron schedules, written whole and compared by revision. IDs
-- sort in byte order, as the other stores list them. Durations are
-- nanoseconds.
CREATE TABLE {schema}.schedules (
    id              text COLLATE "C" NOT NULL PRIMARY KEY,
    workflow        text        NOT NULL,
    cron            text        NOT NULL,
    time_zone       text        NOT NULL,
    input           bytea,
    queue           text        NOT NULL,
    partition       text        NOT NULL,
    priority        integer     NOT NULL,
    overlap         text        NOT NULL,
    catch_up        text        NOT NULL,
    catch_up_window bigint      NOT NULL,
    paused          boolean     NOT NULL,
    next_fire_at    timestamptz NOT NULL,
    check_at        timestamptz NOT NULL,
    held            timestamptz,
    last_fire_at    timestamptz,
    last_run_id     text        NOT NULL,
    revision        bigint      NOT NULL,
    created_at      timestamptz NOT NULL,
    updated_at      timestamptz NOT NULL
);
-- ListSchedules by DueBy: the schedules a service must look at, by CheckAt.
CREATE INDEX schedules_due_idx ON {schema}.schedules (check_at, id) WHERE NOT paused;

-- The catalog: a workflow's default queue ('' is the default queue) and
-- retention (nanoseconds; NULL: the engines' default), and the queues
-- engines registered with their limits.
ALTER TABLE {schema}.workflow_types
    ADD COLUMN queue     text   NOT NULL DEFAULT '',
    ADD COLUMN retention bigint;

CREATE TABLE {schema}.queue_types (
    name                  text        NOT NULL PRIMARY KEY,
    concurrency           integer     NOT NULL,
    partition_concurrency integer     NOT NULL,
    rate                  integer     NOT NULL,
    rate_period           bigint      NOT NULL,
    worker                text        NOT NULL,
    updated_at            timestamptz NOT NULL
);
