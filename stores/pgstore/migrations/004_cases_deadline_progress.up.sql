-- Waits with several cases, run deadlines, published progress, and
-- attempts read by execution (continue-as-new makes many executions).
-- {schema} is replaced by the store's quoted schema name.

-- A wait's first case stays in wait_key, wait_topic and wait_kind; its
-- further cases (storage.Wait.Also) are three parallel arrays, NULL when it
-- has none, so a run with a plain wait costs nothing more. deadline is
-- NewRun.Deadline; progress the value the run last published. None of
-- these is in a B-tree index, so a checkpoint or heartbeat that publishes
-- progress stays a heap-only update.
ALTER TABLE {schema}.runs
    ADD COLUMN wait_also_keys   text[],
    ADD COLUMN wait_also_topics text[],
    ADD COLUMN wait_also_kinds  text[],
    ADD COLUMN deadline         timestamptz,
    ADD COLUMN progress         bytea;

-- Emit: runs waiting on a topic in a further case. With runs_wait_topic_idx
-- (the first case) an emit's lookup is a BitmapOr of two index scans.
-- Partial: only runs waiting on several cases have an entry.
CREATE INDEX runs_wait_also_idx ON {schema}.runs USING gin (wait_also_topics)
    WHERE wait_also_topics IS NOT NULL;

-- A replay reads the attempts of the current execution: with the execution
-- in the key it reads those and no others, however many executions the run
-- had before (Restart, ContinueAsNew). Same number of indexes as before.
ALTER TABLE {schema}.attempts DROP CONSTRAINT attempts_pkey;
ALTER TABLE {schema}.attempts ADD PRIMARY KEY (run_id, execution, seq);
