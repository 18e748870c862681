-- Updates and streams (issue 34): how callers talk to a running workflow.
-- Rows name their run by its ref, as every table keyed by run does, and go
-- with it: Purge and a create that replaces a run delete them (deleteRuns),
-- so that a ref SQLite gives again to a later run never inherits them.
-- ContinueAsNew and Restart keep them: they are the run's, not an
-- execution's. Times are Unix nanoseconds on the store's clock.

-- Updates (SendUpdate), one row per update ID of a run. seq is the
-- update's place among the run's updates, from 1, taken as one more than
-- the run's highest by updates_seq; the order its event was buffered in.
-- state is 'pending' until a checkpoint carries the reply ('replied'):
-- reply, the error (message and code, as checkpoints keep one) and
-- replied_at are set then, once. headers is a JSON object of strings, NULL
-- for none. A rowid table, since payloads and replies may be large: the
-- run's updates by ID (GetUpdate, the existence check of SendUpdate and a
-- reply's write) and by seq (ListUpdates) are two indexes on it.
CREATE TABLE updates (
    run_ref       INTEGER NOT NULL REFERENCES runs (ref),
    id            TEXT    NOT NULL,
    seq           INTEGER NOT NULL,
    name          TEXT    NOT NULL,
    payload       BLOB,
    headers       TEXT,
    state         TEXT    NOT NULL,
    reply         BLOB,
    error_message TEXT,
    error_code    TEXT,
    created_at    INTEGER NOT NULL,
    replied_at    INTEGER,
    PRIMARY KEY (run_ref, id)
) STRICT;
CREATE UNIQUE INDEX updates_seq ON updates (run_ref, seq);

-- A run's streams, one row each: how many values it holds (the next
-- value's position), whether its last write closed it, and when it was
-- last written. A checkpoint's write to a stream upserts its row first and
-- takes the positions of its values from the length that returns.
CREATE TABLE streams (
    run_ref    INTEGER NOT NULL REFERENCES runs (ref),
    name       TEXT    NOT NULL,
    length     INTEGER NOT NULL,
    closed     INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (run_ref, name)
) STRICT, WITHOUT ROWID;

-- The values of the streams, by their position (storage.StreamValue's
-- Offset: from 0, dense, per run and stream). Without rowid, the table is
-- its primary key's tree: a read of a stream from an offset is one range
-- of it (no row read beside the index), and an append writes one entry, at
-- the end of its stream's range.
CREATE TABLE stream_values (
    run_ref    INTEGER NOT NULL REFERENCES runs (ref),
    stream     TEXT    NOT NULL,
    position   INTEGER NOT NULL,
    value      BLOB,
    written_at INTEGER NOT NULL,
    PRIMARY KEY (run_ref, stream, position)
) STRICT, WITHOUT ROWID;
