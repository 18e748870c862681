-- Updates and streams (storage.Interactor).
-- {schema} is replaced by the store's quoted schema name.

-- No foreign key to runs, as for the other tables of a run (migration
-- 001): every write here holds the run's row lock (SendUpdate locks it,
-- a checkpoint's fence locks it), and the writes that delete runs (Purge,
-- a replacing create) delete the rows here in the same statement. IDs
-- and stream names compare and sort byte for byte, as the other stores
-- compare and list them.

-- A run's updates, one row per caller-chosen ID. seq numbers them from 1
-- per run in the order SendUpdate recorded them, under the run's lock:
-- the next is one more than the run's greatest (a probe of updates_seq_idx,
-- which ListUpdates walks too). headers is JSON text, as runs.headers.
CREATE TABLE {schema}.updates (
    run_id     text             NOT NULL,
    id         text COLLATE "C" NOT NULL,
    seq        bigint           NOT NULL,
    name       text             NOT NULL,
    payload    bytea,
    headers    text,
    state      text             NOT NULL CHECK (state IN ('pending', 'replied')),
    reply      bytea,
    error      jsonb,
    created_at timestamptz      NOT NULL,
    replied_at timestamptz,
    PRIMARY KEY (run_id, id)
);
CREATE UNIQUE INDEX updates_seq_idx ON {schema}.updates (run_id, seq);

-- A run's streams: each one's length (the offset its next value takes),
-- whether it is closed, and when it was last written. A checkpoint's
-- writes to a stream update its row once and take their offsets from it.
CREATE TABLE {schema}.streams (
    run_id     text             NOT NULL,
    stream     text COLLATE "C" NOT NULL,
    length     bigint           NOT NULL,
    closed     boolean          NOT NULL,
    updated_at timestamptz      NOT NULL,
    PRIMARY KEY (run_id, stream)
);

-- The values of a run's streams, by offset from 0: ReadStream is a range
-- of the primary key.
CREATE TABLE {schema}.stream_values (
    run_id     text             NOT NULL,
    stream     text COLLATE "C" NOT NULL,
    "offset"   bigint           NOT NULL,
    value      bytea,
    written_at timestamptz      NOT NULL,
    PRIMARY KEY (run_id, stream, "offset")
);
