-- Waits with several cases, run deadlines and published progress (issue 13).
-- Continue-as-new needs no change of its own: it ends an execution and
-- begins the next in the executions table, whose status now may also be
-- 'continued'.

-- deadline is when the run must have ended (NULL: none), kept through
-- restarts and continue-as-new. wait_also holds the further cases of the
-- registered wait (Wait.Also) as a JSON array of {"key", "topic", "kind"},
-- NULL when the wait has none: a wait of one case, the common one, keeps
-- living in wait_key, wait_topic and wait_kind alone.
ALTER TABLE runs ADD COLUMN deadline INTEGER;
ALTER TABLE runs ADD COLUMN wait_also TEXT;

-- The value the run last published (RunRecord.Progress), NULL when none.
-- It lives with the run's payloads, so that the update a step makes to
-- runs stays as small as ever; a write publishing nothing leaves it be.
ALTER TABLE run_data ADD COLUMN progress BLOB;

-- Emit: the runs waiting on a topic in a further case of their wait. The
-- first case's topic is found through runs_wait_topic, as before; this
-- table holds only the topics of wait_also, so a wait of one case costs
-- nothing more here. The trigger keeps it in step with wait_also: every
-- statement that sets a wait, replaces it or clears it assigns wait_also
-- (NULL for none), and the rows follow whenever its value changes.
CREATE TABLE wait_topics (
    topic   TEXT    NOT NULL,
    run_ref INTEGER NOT NULL REFERENCES runs (ref),
    PRIMARY KEY (topic, run_ref)
) STRICT, WITHOUT ROWID;
CREATE INDEX wait_topics_run ON wait_topics (run_ref);

CREATE TRIGGER runs_wait_also AFTER UPDATE OF wait_also ON runs
WHEN old.wait_also IS NOT new.wait_also
BEGIN
    DELETE FROM wait_topics WHERE run_ref = old.ref AND old.wait_also IS NOT NULL;
    INSERT INTO wait_topics (topic, run_ref)
        SELECT value ->> 'topic', new.ref FROM json_each(new.wait_also) WHERE new.wait_also IS NOT NULL;
END;
