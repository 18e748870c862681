-- Claims and NextWake find ready runs per workflow, oldest first.
-- {schema} is replaced by the store's quoted schema name.

-- runs_ready_idx ordered ready runs by ready_at alone, so a claim for some
-- workflows either walked runs of others or, when the planner combined it
-- with the workflow index, read and sorted every ready run: 14 ms a claim
-- on a table with stale statistics and many dead entries. With the workflow
-- first, a claim walks each of its workflows' entries in ready order and
-- stops at its limit, whatever the statistics say.
CREATE INDEX runs_claim_idx ON {schema}.runs (workflow, ready_at)
    WHERE status IN ('queued', 'waiting');
DROP INDEX {schema}.runs_ready_idx;
