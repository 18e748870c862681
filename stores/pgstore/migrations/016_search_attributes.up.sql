-- Search attributes (storage.Attr), runs listed by creation time, the
-- inputs of checkpoints and the attributes workflows declare.
-- {schema} is replaced by the store's quoted schema name.

-- A run's search attributes, as the JSON object the store reads them from
-- (see encodeAttrs in attrs.go), NULL when it has none, as every run stored
-- before reads: a column of the run's row, so that every statement that
-- returns runs returns their attributes at no read more. jsonb, so that a
-- checkpoint's merge is one ||. Written in the same change as the rows of
-- run_attrs below; in no index, so a merge is a heap-only update.
ALTER TABLE {schema}.runs
    ADD COLUMN attrs jsonb;

-- A run's search attributes again, one row per (run, name), for the
-- listings that filter by them. The value is in the column of its type,
-- and that column alone is not NULL, so the column is the type: str a
-- string (compared byte for byte, as the contract compares it), num a
-- number, at a time, flag a bool. created_at is the
-- run's, copied from its row when the attribute is written (a run's
-- creation time never changes but by a replacement, which writes its
-- attributes again), so that the indexes below hold the runs of one
-- value in creation order.
--
-- No foreign key to runs, as for the other tables of a run (migration
-- 001): every write here holds the run's row lock (its creation, the
-- fenced checkpoint statement, a replacement, Purge), and the writes that
-- delete runs delete the rows here in the same statement. run_id has the
-- collation of runs.id, so that the two compare, and order ties of
-- creation time alike, without a COLLATE clause.
CREATE TABLE {schema}.run_attrs (
    run_id     text             NOT NULL,
    name       text COLLATE "C" NOT NULL,
    str        text COLLATE "C",
    num        double precision,
    at         timestamptz,
    flag       boolean,
    created_at timestamptz      NOT NULL,
    PRIMARY KEY (run_id, name),
    CONSTRAINT run_attrs_one_value CHECK (num_nonnulls(str, num, at, flag) = 1)
);

-- ListRuns filtered by an attribute: one index per type, each holding the
-- attributes of its type only, by name, value, then creation time and run.
-- An equality is one range of it, already in creation order (a page
-- newest first is a backward walk of the range, stopped at the page's
-- end, the cursor in its index condition); a range of numbers or times
-- and a prefix of strings are a range of (name, value), whose runs are
-- sorted by creation time or ID.
CREATE INDEX run_attrs_str_idx ON {schema}.run_attrs (name, str, created_at, run_id) WHERE str IS NOT NULL;
CREATE INDEX run_attrs_num_idx ON {schema}.run_attrs (name, num, created_at, run_id) WHERE num IS NOT NULL;
CREATE INDEX run_attrs_at_idx ON {schema}.run_attrs (name, at, created_at, run_id) WHERE at IS NOT NULL;
CREATE INDEX run_attrs_flag_idx ON {schema}.run_attrs (name, flag, created_at, run_id) WHERE flag IS NOT NULL;

-- A checkpoint's merge of attributes (storage.CheckpointRequest.Attributes)
-- that would leave its run more than limit attributes fails its statement
-- with this error, so the transaction that wrote the checkpoint writes
-- nothing; the store reads the constraint's name and reports
-- storage.ErrInvalidArgument.
CREATE FUNCTION {schema}.refuse_attributes(run_id text, n bigint, lim integer) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'run "%" would hold % search attributes, over the limit of %', run_id, n, lim
        USING ERRCODE = 'check_violation', CONSTRAINT = 'run_attrs_limit';
END
$$;

-- ListRuns by creation time (storage.OrderCreated), of every run, of a
-- workflow and of a status: each is a walk of one of these, forwards or
-- backwards, from the cursor in its index condition, stopped at the page's
-- end. A creation time changes only by a replacement, and a workflow
-- never, so the first two cost a run's updates nothing they did not cost
-- already: an update that changes an indexed column (its status) writes
-- an entry in every index, and one that does not stays heap-only. The
-- third, like runs_status_id_idx, grows with the status changes between
-- vacuums (see migration 008).
CREATE INDEX runs_created_idx ON {schema}.runs (created_at, id);
CREATE INDEX runs_workflow_created_idx ON {schema}.runs (workflow, created_at, id);
CREATE INDEX runs_status_created_idx ON {schema}.runs (status, created_at, id);

-- What a checkpoint's durable call was given (storage.Checkpoint.Input),
-- stored byte for byte and returned by ListSteps; NULL when it had none,
-- as every checkpoint stored before reads (a nullable column without a
-- default: no table rewrite).
ALTER TABLE {schema}.checkpoints
    ADD COLUMN input bytea;

-- The search attributes a workflow declares (storage.WorkflowType.
-- Attributes) as the JSON text of the list, in the order declared; NULL
-- when it declares none, as every workflow recorded before reads.
ALTER TABLE {schema}.workflow_types
    ADD COLUMN attributes text;
