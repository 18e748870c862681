-- How many runs each workflow has in each status, kept by triggers, so that
-- CountRuns (a dashboard's counts, read with every page) reads a row per
-- workflow and status instead of an entry per run: counting runs_status,
-- the index it would read otherwise, takes time in proportion to the runs
-- stored (about 150 ms for a million). The triggers follow every insert,
-- change of status or workflow, and delete of a run, in the same
-- transaction; a row whose count falls to 0 stays (CountRuns leaves it out).
-- The table is a few pages, which a write that changes statuses touches
-- once, and each trigger seeks a row or two: measured, it costs a run's
-- creation and a claim with its completion less than an index on runs by
-- (workflow, status) would, which moves an entry with every change of
-- status and is still read an entry per run.
CREATE TABLE run_counts (
    workflow TEXT    NOT NULL,
    status   TEXT    NOT NULL,
    n        INTEGER NOT NULL,
    PRIMARY KEY (workflow, status)
) STRICT, WITHOUT ROWID;

INSERT INTO run_counts (workflow, status, n)
    SELECT workflow, status, count(*) FROM runs GROUP BY workflow, status;

CREATE TRIGGER runs_count_insert AFTER INSERT ON runs
BEGIN
    INSERT INTO run_counts (workflow, status, n) VALUES (new.workflow, new.status, 1)
        ON CONFLICT (workflow, status) DO UPDATE SET n = n + 1;
END;

CREATE TRIGGER runs_count_update AFTER UPDATE OF workflow, status ON runs
WHEN old.workflow IS NOT new.workflow OR old.status IS NOT new.status
BEGIN
    UPDATE run_counts SET n = n - 1 WHERE workflow = old.workflow AND status = old.status;
    INSERT INTO run_counts (workflow, status, n) VALUES (new.workflow, new.status, 1)
        ON CONFLICT (workflow, status) DO UPDATE SET n = n + 1;
END;

CREATE TRIGGER runs_count_delete AFTER DELETE ON runs
BEGIN
    UPDATE run_counts SET n = n - 1 WHERE workflow = old.workflow AND status = old.status;
END;
