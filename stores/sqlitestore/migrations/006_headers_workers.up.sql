-- Run headers and worker records.

-- The headers a run carries from its start to every claim (NewRun.Headers:
-- its starter's trace context), kept through restarts and continue-as-new,
-- as a JSON object of strings; NULL when it has none. They live with the
-- run's payloads, which a claim reads already, so that the row of runs
-- every step updates stays as small as before, and the claim of a run
-- without headers reads one NULL more and nothing else. Runs stored before
-- have none.
ALTER TABLE run_data ADD COLUMN headers TEXT;

-- The records engines keep of themselves (PutWorker), by worker ID. Times
-- are Unix nanoseconds on the store's clock; queues and workflows are JSON
-- arrays of names, NULL for none. A record whose expires_at has come is
-- never read and is deleted by the next PutWorker. The table holds a row
-- per live engine, a handful, so no index but the key is kept: the
-- deletion reads them all, which costs less than an index every put would
-- rewrite.
CREATE TABLE workers (
    id         TEXT    NOT NULL PRIMARY KEY,
    host       TEXT    NOT NULL,
    pid        INTEGER NOT NULL,
    started_at INTEGER NOT NULL,
    queues     TEXT,
    workflows  TEXT,
    in_flight  INTEGER NOT NULL,
    heartbeat  INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
