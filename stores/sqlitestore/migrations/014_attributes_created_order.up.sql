-- Search attributes, listing by creation time, checkpoints' inputs and
-- the attributes a workflow declares (issue 35).

-- A run's creation time to the microsecond, the precision of a listing in
-- creation order (storage.OrderCreated: by CreatedAt's microsecond, then
-- ID) and of its cursor. Virtual: computed from created_at, stored only in
-- the indexes below. ListRuns in creation order reads runs_created, or
-- runs_workflow_created for one workflow, newest or oldest first,
-- stopping at the page's end; every other filter is judged on the rows it
-- passes over (a parent's children, and the runs of a status that few
-- runs have, are read by runs_parent and runs_status and sorted instead).
-- A run's entries are written once, at its creation, at the right edge of
-- the index or of its workflow's range; none follows a change of status,
-- which every step of a run would pay.
ALTER TABLE runs ADD COLUMN created_us INTEGER GENERATED ALWAYS AS (created_at / 1000) VIRTUAL;
CREATE INDEX runs_created ON runs (created_us, id);
CREATE INDEX runs_workflow_created ON runs (workflow, created_us, id);

-- Search attributes (storage.Attr), one row per run and name. The value
-- is in the column of its type, the others NULL: the column that is not
-- NULL is the type. A number is a REAL, a time Unix microseconds (a year
-- from 1 to 9999 fits), a bool 0 or 1. created_us and run_id are the run's
-- (runs.created_us, runs.id), copied when the row is written, so that
-- each type's index reads the runs of one name and value in creation
-- order, then ID, as a listing in creation order pages them: an equality
-- filter newest first is one range of the index, stopping at the page's
-- end, with no sort; a range or prefix reads the range of its values and
-- sorts what it holds. A row enters only its own type's index (the
-- indexes are partial). Without rowid, the table is its primary key's
-- tree: a run's attributes are one range of it, by run_ref, which is also
-- what deleting a run with everything it owns (deleteRuns) seeks.
CREATE TABLE run_attrs (
    run_ref    INTEGER NOT NULL REFERENCES runs (ref),
    name       TEXT    NOT NULL,
    str_value  TEXT,
    num_value  REAL,
    time_value INTEGER,
    bool_value INTEGER,
    created_us INTEGER NOT NULL,
    run_id     TEXT    NOT NULL,
    PRIMARY KEY (run_ref, name)
) STRICT, WITHOUT ROWID;
CREATE INDEX run_attrs_str  ON run_attrs (name, str_value,  created_us, run_id) WHERE str_value  IS NOT NULL;
CREATE INDEX run_attrs_num  ON run_attrs (name, num_value,  created_us, run_id) WHERE num_value  IS NOT NULL;
CREATE INDEX run_attrs_time ON run_attrs (name, time_value, created_us, run_id) WHERE time_value IS NOT NULL;
CREATE INDEX run_attrs_bool ON run_attrs (name, bool_value, created_us, run_id) WHERE bool_value IS NOT NULL;

-- What a durable call was given (storage.Checkpoint.Input), opaque bytes
-- kept with its checkpoint for operators; NULL when none, as for every
-- checkpoint stored before. LoadReplay and the claim's replay do not read
-- it.
ALTER TABLE checkpoints ADD COLUMN input BLOB;

-- The search attributes a workflow declares (storage.WorkflowType.
-- Attributes), a JSON array of storage.AttrDecl in the order declared;
-- NULL when none, as for every workflow recorded before.
ALTER TABLE workflow_types ADD COLUMN attributes TEXT;
