-- Workflow versions stored with runs (evolution safety).

-- The version of the workflow a run started under (NewRun.Version), kept
-- through restarts and continue-as-new. Runs stored before read 0: their
-- version is unknown.
ALTER TABLE runs ADD COLUMN version INTEGER NOT NULL DEFAULT 0;

-- A claim takes a run of a workflow only at the versions its worker
-- registers, so the claim indexes end with the version, beside the
-- workflow: a claim judges each entry of a range by the entry alone and
-- reads no run's row to pass over one of another version. A small version
-- costs an entry a byte or two (0 and 1 cost one).
DROP INDEX runs_claim;
DROP INDEX runs_claim_queue;
CREATE INDEX runs_claim ON runs (priority DESC, claim_rank, claim_at, workflow, version)
WHERE claim_at IS NOT NULL AND queue = 'default';
CREATE INDEX runs_claim_queue ON runs (queue, priority DESC, claim_rank, claim_at, workflow, version)
WHERE claim_at IS NOT NULL AND queue <> 'default';
