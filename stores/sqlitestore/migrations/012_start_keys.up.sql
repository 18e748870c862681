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
