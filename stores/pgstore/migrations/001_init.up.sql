-- Runs, their checkpoints, attempts and buffered events.
-- {schema} is replaced by the store's quoted schema name.

CREATE TABLE {schema}.runs (
    id              text        NOT NULL PRIMARY KEY,
    workflow        text        NOT NULL,
    parent_id       text        NOT NULL DEFAULT '',
    status          text        NOT NULL CHECK (status IN ('queued', 'running', 'paused', 'waiting', 'complete', 'errored', 'terminated')),
    input           bytea,
    output          bytea,
    error           jsonb,
    pause_requested boolean     NOT NULL DEFAULT false,
    -- When a queued or waiting run may be claimed; NULL while it waits for
    -- an event without a deadline.
    ready_at        timestamptz,
    wait_key        text,
    wait_topic      text,
    wait_kind       text,
    wait_deadline   timestamptz,
    owner           text        NOT NULL DEFAULT '',
    lease_until     timestamptz,
    token           bigint      NOT NULL DEFAULT 0,
    recoveries      integer     NOT NULL DEFAULT 0,
    suspend_state   bytea,
    created_at      timestamptz NOT NULL,
    updated_at      timestamptz NOT NULL
) WITH (fillfactor = 80);
-- fillfactor leaves room on each page so that lease extensions, which touch
-- no indexed column, stay heap-only updates.

-- Claim: ready runs, oldest first.
CREATE INDEX runs_ready_idx ON {schema}.runs (ready_at)
    WHERE status IN ('queued', 'waiting');
-- Claim: running runs whose lease may have expired. lease_until is left out
-- of the index on purpose so that extending a lease never updates an index.
CREATE INDEX runs_running_idx ON {schema}.runs (workflow)
    WHERE status = 'running';
-- Emit: runs waiting on a topic.
CREATE INDEX runs_wait_topic_idx ON {schema}.runs (wait_topic)
    WHERE wait_topic IS NOT NULL;
-- ListRuns filtered by workflow or by status, in ID order.
CREATE INDEX runs_workflow_id_idx ON {schema}.runs (workflow, id);
CREATE INDEX runs_status_id_idx ON {schema}.runs (status, id);

-- The tables below have no foreign keys to runs on purpose: every write to
-- them locks the run row first, and a foreign key check per inserted row
-- would cost the checkpoint path a good part of its time. A run is deleted
-- only by Purge (migration 005), once finished, under its row lock and
-- together with its rows here; a write that then locks it finds no run.
-- (Comment corrected after the fact; the schema is unchanged.)

-- One sequence orders a run's checkpoints and attempts together, in write
-- order: writes to one run hold its row lock, so they draw in turn. It must
-- not cache values per session, or a later write could draw a smaller one.
CREATE SEQUENCE {schema}.seq CACHE 1;

CREATE TABLE {schema}.checkpoints (
    run_id     text        NOT NULL,
    key        text        NOT NULL,
    kind       text        NOT NULL,
    seq        bigint      NOT NULL DEFAULT nextval('{schema}.seq'),
    output     bytea,
    error      jsonb,
    -- The attempts recorded with the checkpoint (usually the one that
    -- succeeded), kept in its row so that a step costs one row.
    attempts   jsonb,
    created_at timestamptz NOT NULL,
    PRIMARY KEY (run_id, key)
);

-- Attempts recorded apart from a checkpoint: the failed ones before a retry.
CREATE TABLE {schema}.attempts (
    run_id  text        NOT NULL,
    seq     bigint      NOT NULL DEFAULT nextval('{schema}.seq'),
    key     text        NOT NULL,
    number  integer     NOT NULL,
    started timestamptz NOT NULL,
    ended   timestamptz NOT NULL,
    error   text        NOT NULL DEFAULT '',
    PRIMARY KEY (run_id, seq)
);

-- Events sent to a run that was not waiting on their topic, consumed in
-- order by the run's next wait on the topic.
CREATE TABLE {schema}.events (
    run_id     text        NOT NULL,
    topic      text        NOT NULL,
    seq        bigint      GENERATED ALWAYS AS IDENTITY,
    payload    bytea,
    created_at timestamptz NOT NULL,
    PRIMARY KEY (run_id, topic, seq)
);
