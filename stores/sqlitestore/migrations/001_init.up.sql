-- Runs: one row per workflow run, with the state that changes as it runs:
-- small, so that the update every step makes (the lease extension) stays
-- cheap whatever the size of the run's payloads, which live in run_data.
-- Times are Unix nanoseconds on the store's clock; NULL means "none".
-- ref is the run's row number, assigned in creation order: tables keyed by
-- run use it, so the rows of runs created (and claimed) together sit on the
-- same pages.
CREATE TABLE runs (
    ref             INTEGER NOT NULL PRIMARY KEY,
    id              TEXT    NOT NULL UNIQUE,
    workflow        TEXT    NOT NULL,
    parent_id       TEXT    NOT NULL DEFAULT '',
    status          TEXT    NOT NULL,
    pause_requested INTEGER NOT NULL DEFAULT 0,
    ready_at        INTEGER,
    wait_key        TEXT,
    wait_topic      TEXT,
    wait_kind       TEXT,
    wait_deadline   INTEGER,
    owner           TEXT    NOT NULL DEFAULT '',
    lease_until     INTEGER,
    token           INTEGER NOT NULL DEFAULT 0,
    recoveries      INTEGER NOT NULL DEFAULT 0,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL,
    -- claim_at is when the run may be claimed: a queued or waiting run at
    -- ready_at, a running run when its lease expires (a crashed worker's
    -- run). NULL for paused and finished runs and for a wait without
    -- deadline: those are never claimed.
    claim_at        INTEGER GENERATED ALWAYS AS (
        CASE status
            WHEN 'queued'  THEN ready_at
            WHEN 'waiting' THEN ready_at
            WHEN 'running' THEN lease_until
        END) VIRTUAL
) STRICT;

-- Claim: ready runs and expired leases in one range scan, in claim_at order
-- (ties: workflow, then creation order), stopping at the limit.
CREATE INDEX runs_claim ON runs (claim_at, workflow) WHERE claim_at IS NOT NULL;
-- Emit: the runs waiting on a topic.
CREATE INDEX runs_wait_topic ON runs (wait_topic) WHERE wait_topic IS NOT NULL;
-- ListRuns filtered by workflow or status, ordered by ID.
CREATE INDEX runs_workflow ON runs (workflow, id);
CREATE INDEX runs_status ON runs (status, id);

-- A run's payloads and result, written at creation, suspension and finish.
CREATE TABLE run_data (
    ref           INTEGER NOT NULL PRIMARY KEY REFERENCES runs (ref),
    input         BLOB,
    output        BLOB,
    error_message TEXT,
    error_code    TEXT,
    suspend_state BLOB
) STRICT;

-- Checkpoints: the durable result of each step, sleep, event or child call.
-- seq (the rowid) orders them by write. Rows are appended at the end of the
-- table, so a batch of many runs' checkpoints touches few pages; only the
-- (run_ref, key) index, which enforces write-once, is touched per run.
-- attempts holds the attempts written with the checkpoint, encoded (see
-- attempts.go), so a step costs one row, not one more per attempt.
CREATE TABLE checkpoints (
    seq           INTEGER NOT NULL PRIMARY KEY,
    run_ref       INTEGER NOT NULL REFERENCES runs (ref),
    key           TEXT    NOT NULL,
    kind          TEXT    NOT NULL,
    output        BLOB,
    error_message TEXT,
    error_code    TEXT,
    attempts      BLOB,
    created_at    INTEGER NOT NULL,
    UNIQUE (run_ref, key)
) STRICT;

-- Attempts recorded on their own (RecordAttempts: failed attempts before a
-- retry), in the order recorded. after_checkpoint is 1 when the step's
-- checkpoint already existed, so that listing keeps the order of recording.
CREATE TABLE attempts (
    id               INTEGER NOT NULL PRIMARY KEY,
    run_ref          INTEGER NOT NULL REFERENCES runs (ref),
    key              TEXT    NOT NULL,
    number           INTEGER NOT NULL,
    started_at       INTEGER,
    ended_at         INTEGER,
    error            TEXT    NOT NULL,
    after_checkpoint INTEGER NOT NULL
) STRICT;
CREATE INDEX attempts_run ON attempts (run_ref, key);

-- Events sent to a run that was not waiting on their topic, consumed in
-- order by the run's next wait on the topic.
CREATE TABLE events (
    id         INTEGER NOT NULL PRIMARY KEY,
    run_ref    INTEGER NOT NULL REFERENCES runs (ref),
    topic      TEXT    NOT NULL,
    payload    BLOB,
    created_at INTEGER NOT NULL
) STRICT;
CREATE INDEX events_run_topic ON events (run_ref, topic, id);
