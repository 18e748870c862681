-- Cancellation (storage.RunRecord.CancelRequested, CancelReason): a
-- request the run's workflow sees and handles, recorded on the run until a
-- Restart.
-- {schema} is replaced by the store's quoted schema name.

-- The first request's reason, NULL when no cancellation was requested,
-- which runs stored before read as (a nullable column without a default:
-- no table rewrite). The column is the flag too, so a run pays one NULL
-- and no index: the claim, the heartbeat and the checkpoint return it from
-- the row they update already, at no statement more, and only Cancel and
-- Restart write it, so lease extensions stay heap-only.
ALTER TABLE {schema}.runs
    ADD COLUMN cancel_reason text;
