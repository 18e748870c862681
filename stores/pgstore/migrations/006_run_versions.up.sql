-- Workflow versions: each run records the version of its workflow it
-- started under (storage.NewRun.Version), and claims take a run only where
-- the worker runs that version.
-- {schema} is replaced by the store's quoted schema name.

-- A run's version never changes after its creation (Restart and
-- ContinueAsNew keep it), and it is in no index, so lease extensions stay
-- heap-only. Runs stored before read 0, the version of a run whose starter
-- did not say (a constant default: no table rewrite). The claim and
-- NextWake test it on the runs their ready and running scans read, as a
-- filter inside each bounded scan, so the runs passed over never count
-- against a claim's limit.
ALTER TABLE {schema}.runs
    ADD COLUMN version integer NOT NULL DEFAULT 0;
