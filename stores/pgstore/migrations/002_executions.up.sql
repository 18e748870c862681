-- Executions, parent policies, the active step, durable retry times and the
-- catalog of what workers serve.
-- {schema} is replaced by the store's quoted schema name.

-- A run's current execution (1 at creation, one more per Restart), when it
-- started and ended, what terminating its parent does to it, and the step
-- attempt a worker last reported running. None of these is indexed, so a
-- heartbeat that sets the active step stays a heap-only update.
ALTER TABLE {schema}.runs
    ADD COLUMN parent_policy  text        NOT NULL DEFAULT '',
    ADD COLUMN execution      integer     NOT NULL DEFAULT 1,
    ADD COLUMN started_at     timestamptz,
    ADD COLUMN ended_at       timestamptz,
    ADD COLUMN active_key     text,
    ADD COLUMN active_attempt integer,
    ADD COLUMN active_started timestamptz;

UPDATE {schema}.runs SET
    started_at = created_at,
    ended_at = CASE WHEN status IN ('complete', 'errored', 'terminated') THEN updated_at END;

ALTER TABLE {schema}.runs ALTER COLUMN started_at SET NOT NULL;

-- ListRuns by parent and Terminate's cascade through the children. Partial:
-- most runs have no parent, and statements that use it say parent_id <> ''.
CREATE INDEX runs_parent_idx ON {schema}.runs (parent_id, id) WHERE parent_id <> '';

-- Every execution of a run. The current one's status and error are the
-- run's (status stays NULL here until it ends); an ended one keeps the
-- status and error it ended with. forked_from and from_key say where a
-- restart from a step began.
CREATE TABLE {schema}.executions (
    run_id      text        NOT NULL,
    number      integer     NOT NULL,
    started_at  timestamptz NOT NULL,
    ended_at    timestamptz,
    status      text,
    error       jsonb,
    forked_from integer     NOT NULL DEFAULT 0,
    from_key    text        NOT NULL DEFAULT '',
    PRIMARY KEY (run_id, number)
);

INSERT INTO {schema}.executions (run_id, number, started_at, ended_at, status, error)
SELECT id, 1, started_at, ended_at,
    CASE WHEN ended_at IS NOT NULL THEN status END,
    CASE WHEN ended_at IS NOT NULL THEN error END
FROM {schema}.runs;

-- Checkpoints and attempts belong to an execution; a key is written once per
-- execution. The columns have no default after the backfill, so a write
-- that forgets the execution fails instead of landing in the first one.
ALTER TABLE {schema}.checkpoints
    ADD COLUMN execution   integer NOT NULL DEFAULT 1,
    ADD COLUMN forked_from integer NOT NULL DEFAULT 0;
ALTER TABLE {schema}.checkpoints ALTER COLUMN execution DROP DEFAULT;
ALTER TABLE {schema}.checkpoints DROP CONSTRAINT checkpoints_pkey;
ALTER TABLE {schema}.checkpoints ADD PRIMARY KEY (run_id, execution, key);

ALTER TABLE {schema}.attempts
    ADD COLUMN execution integer NOT NULL DEFAULT 1,
    ADD COLUMN retry_at  timestamptz;
ALTER TABLE {schema}.attempts ALTER COLUMN execution DROP DEFAULT;

-- The catalog: the workflows and event topics engines registered, with the
-- JSON Schemas of their inputs, outputs and payloads stored byte for byte.
CREATE TABLE {schema}.workflow_types (
    name          text        NOT NULL PRIMARY KEY,
    version       integer     NOT NULL,
    input_schema  bytea,
    output_schema bytea,
    worker        text        NOT NULL,
    updated_at    timestamptz NOT NULL
);

CREATE TABLE {schema}.event_types (
    topic          text        NOT NULL PRIMARY KEY,
    payload_schema bytea,
    worker         text        NOT NULL,
    updated_at     timestamptz NOT NULL
);
