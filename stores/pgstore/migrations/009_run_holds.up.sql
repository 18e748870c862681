-- Holds (storage.RunRecord.Hold): why an engine handed a run back instead
-- of executing it, its code no longer making the calls its history
-- recorded.
-- {schema} is replaced by the store's quoted schema name.

-- The run's hold as the JSON text of storage.Hold, NULL when the run is
-- not held, which runs stored before read as (a nullable column without a
-- default: no table rewrite). Text, not jsonb, as for headers: the store
-- never looks inside, and jsonb would refuse a reason holding a NUL
-- character (\u0000), which the contract allows. Written by the Suspend
-- that holds the run and set NULL by the claim's own update, in no index,
-- so neither costs a statement or an index entry more, and lease
-- extensions stay heap-only.
ALTER TABLE {schema}.runs
    ADD COLUMN hold text;
