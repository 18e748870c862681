-- Run headers and worker records.
-- {schema} is replaced by the store's quoted schema name.

-- A run's headers (storage.NewRun.Headers: the trace context it was
-- started in) as the JSON text of a flat object, its names sorted, NULL
-- when it has none, which runs stored before read as. Text, not jsonb: the
-- store never looks inside, and text hands back the bytes it was given.
-- Written by the run's creation and by nothing after (Restart and
-- ContinueAsNew keep it), and in no index, so lease extensions stay
-- heap-only; a claim returns it, a NULL for a run without headers (a
-- nullable column without a default: no table rewrite).
ALTER TABLE {schema}.runs
    ADD COLUMN headers text;

-- The records engines keep of themselves (storage.Worker), one per worker
-- ID, which sorts in byte order as the other stores list them. heartbeat
-- and expires_at are on the store's clock. PutWorker and ListWorkers delete
-- the expired records as they go, so the table holds about as many rows as
-- there are live engines and is read whole: it has no index but its key,
-- and a heartbeat updates no other.
CREATE TABLE {schema}.workers (
    id         text COLLATE "C" NOT NULL PRIMARY KEY,
    host       text        NOT NULL,
    pid        bigint      NOT NULL,
    started_at timestamptz NOT NULL,
    queues     text[]      NOT NULL,
    workflows  text[]      NOT NULL,
    in_flight  bigint      NOT NULL,
    heartbeat  timestamptz NOT NULL,
    expires_at timestamptz NOT NULL
);
