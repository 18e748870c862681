-- Start keys (storage.StartKey): the run that holds each key of a
-- workflow, a singleton's run until it ends, a debounce window's run until
-- it is claimed. A create with a key reads its row by the primary key and
-- the holder's row in runs by its ref; a create that makes a run with the
-- key writes the row over. Whether the holder still holds it (unfinished;
-- queued and not yet ready for a debounce) is judged from its run, so
-- nothing here changes when a run ends or is claimed.
--
-- Rows name the run by its ref, as every table keyed by run does. Deleting
-- a run (Purge, or a create that replaces it) deletes the rows that name
-- it, by start_keys_run, so that a ref SQLite gives again to a later run
-- never inherits a key.
CREATE TABLE start_keys (
    workflow TEXT    NOT NULL,
    key      TEXT    NOT NULL,
    run_ref  INTEGER NOT NULL REFERENCES runs (ref),
    PRIMARY KEY (workflow, key)
) STRICT, WITHOUT ROWID;

CREATE INDEX start_keys_run ON start_keys (run_ref);

-- The lease tokens of runs a create deleted to replace them (the replaced
-- run and its descendants, those ever claimed), by ID: the next run made
-- under the ID goes on from its token, which its insert reads here and
-- then deletes, so that a holder of the deleted run's lease never matches
-- a lease of the new run (fencing compares the ID and the token). A row
-- stays until a run takes its ID again.
CREATE TABLE run_tokens (
    id    TEXT    NOT NULL PRIMARY KEY,
    token INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
