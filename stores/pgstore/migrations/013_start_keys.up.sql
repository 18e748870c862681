-- Start keys (storage.StartKey): the run that holds each key of a
-- workflow, a singleton until it ends or a debounce window until it is
-- claimed. A create with a key reads its record under a transaction-level
-- advisory lock of the key, so concurrent creates of one key take turns,
-- and writes it when it creates a run, which then holds the key.
-- {schema} is replaced by the store's quoted schema name.

-- No foreign key to runs, as for the other tables of a run (migration
-- 001): a record whose run is gone counts as no holder, and the writes
-- that delete runs (Purge, a replacing create) delete the records naming
-- them in the same statement. The key is compared byte for byte, as the
-- other stores compare it.
CREATE TABLE {schema}.start_keys (
    workflow text COLLATE "C" NOT NULL,
    key      text COLLATE "C" NOT NULL,
    run_id   text             NOT NULL,
    PRIMARY KEY (workflow, key)
);
-- The records naming a run, which Purge and a replacement delete.
CREATE INDEX start_keys_run_idx ON {schema}.start_keys (run_id);
