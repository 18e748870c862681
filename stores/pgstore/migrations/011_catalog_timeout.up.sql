-- A workflow's timeout= in the catalog (storage.WorkflowType.Timeout), so
-- starts that know the workflow by name only (the operator command, a
-- schedule's tick, an engine that does not register it) give its runs the
-- deadline a registering engine would.
-- {schema} is replaced by the store's quoted schema name.

-- Nanoseconds; NULL is no timeout, as every workflow recorded before reads
-- (a nullable column without a default: no table rewrite).
ALTER TABLE {schema}.workflow_types
    ADD COLUMN timeout bigint;
