-- Executions, parent policies, the step running now, durable retry times
-- and the catalog of what workers serve (issue 10).

-- A run's current execution (1 from creation, one more per restart), what
-- terminating its parent does to it, and the step attempt a worker last
-- reported running (Heartbeat), cleared by the run's next write of a step.
ALTER TABLE runs ADD COLUMN parent_policy TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN execution INTEGER NOT NULL DEFAULT 1;
ALTER TABLE runs ADD COLUMN active_key TEXT;
ALTER TABLE runs ADD COLUMN active_attempt INTEGER;
ALTER TABLE runs ADD COLUMN active_started INTEGER;

-- ListRuns filtered by parent, and the descendants a cascading Terminate
-- walks.
CREATE INDEX runs_parent ON runs (parent_id, id);

-- Executions: one row per execution of a run, written with the run's
-- creation, finish and restarts. status and the error are the run's when
-- the execution ended (NULL while it is the current, unfinished one: the
-- run's own are read then). forked_from and from_key say where a restart
-- from a step began (0 and '' for a start or a restart from the top).
CREATE TABLE executions (
    run_ref       INTEGER NOT NULL REFERENCES runs (ref),
    number        INTEGER NOT NULL,
    started_at    INTEGER NOT NULL,
    ended_at      INTEGER,
    status        TEXT,
    error_message TEXT,
    error_code    TEXT,
    forked_from   INTEGER NOT NULL DEFAULT 0,
    from_key      TEXT    NOT NULL DEFAULT '',
    PRIMARY KEY (run_ref, number)
) STRICT, WITHOUT ROWID;

-- Every existing run is in its first execution, started at its creation; a
-- finished one ended at its last update.
INSERT INTO executions (run_ref, number, started_at, ended_at, status, error_message, error_code)
SELECT r.ref, 1, r.created_at,
    CASE WHEN r.status IN ('complete', 'errored', 'terminated') THEN r.updated_at END,
    CASE WHEN r.status IN ('complete', 'errored', 'terminated') THEN r.status END,
    d.error_message, d.error_code
FROM runs r JOIN run_data d ON d.ref = r.ref;

-- Checkpoints belong to an execution: write-once per (run, execution, key).
-- forked_from is the execution a restart from a later step copied the
-- checkpoint from (0 when written in its own). SQLite cannot change a
-- table's constraints, so the table is rebuilt; seq keeps its values.
CREATE TABLE checkpoints_v2 (
    seq           INTEGER NOT NULL PRIMARY KEY,
    run_ref       INTEGER NOT NULL REFERENCES runs (ref),
    execution     INTEGER NOT NULL,
    key           TEXT    NOT NULL,
    kind          TEXT    NOT NULL,
    output        BLOB,
    error_message TEXT,
    error_code    TEXT,
    attempts      BLOB,
    forked_from   INTEGER NOT NULL DEFAULT 0,
    created_at    INTEGER NOT NULL,
    UNIQUE (run_ref, execution, key)
) STRICT;
INSERT INTO checkpoints_v2 (seq, run_ref, execution, key, kind, output, error_message, error_code, attempts, created_at)
SELECT seq, run_ref, 1, key, kind, output, error_message, error_code, attempts, created_at FROM checkpoints;
DROP TABLE checkpoints;
ALTER TABLE checkpoints_v2 RENAME TO checkpoints;

-- Attempts belong to an execution too; retry_at is when a failed attempt's
-- retry is due.
ALTER TABLE attempts ADD COLUMN execution INTEGER NOT NULL DEFAULT 1;
ALTER TABLE attempts ADD COLUMN retry_at INTEGER;
DROP INDEX attempts_run;
CREATE INDEX attempts_run ON attempts (run_ref, execution, key);

-- The catalog: the workflows and event types engines serve, by name and by
-- topic. Schemas are JSON, stored byte for byte.
CREATE TABLE workflow_types (
    name          TEXT    NOT NULL PRIMARY KEY,
    version       INTEGER NOT NULL,
    input_schema  BLOB,
    output_schema BLOB,
    worker        TEXT    NOT NULL,
    updated_at    INTEGER
) STRICT;

CREATE TABLE event_types (
    topic          TEXT NOT NULL PRIMARY KEY,
    payload_schema BLOB,
    worker         TEXT NOT NULL,
    updated_at     INTEGER
) STRICT;
