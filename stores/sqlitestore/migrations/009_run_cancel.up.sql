-- Cancellation (RunRecord.CancelRequested, CancelReason): a request the
-- run's workflow sees and handles, recorded on the run until a Restart.

-- The first request's reason, NULL when no cancellation was requested, as
-- for every run stored before: the column is the flag too, so a run pays
-- one NULL in its row and no index. It lives in runs, not run_data,
-- because the claim, the heartbeat, the checkpoint and the park read it
-- with the row they read or update already, at no statement more.
ALTER TABLE runs ADD COLUMN cancel_reason TEXT;
