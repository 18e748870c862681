-- A workflow's timeout= in the catalog (storage.WorkflowType.Timeout), so
-- starts that know the workflow by name only (the operator command, a
-- schedule's tick, an engine that does not register it) give its runs the
-- deadline a registering engine would. Nanoseconds; NULL is no timeout, as
-- every workflow recorded before reads.
ALTER TABLE workflow_types ADD COLUMN timeout INTEGER;
