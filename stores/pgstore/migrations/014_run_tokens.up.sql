-- The fencing tokens of runs a replacement deleted (storage.NewRun with
-- OnExisting replace, OnEnded reuse): the replaced run's descendants,
-- those ever claimed, by ID. The replaced run keeps its row and its token
-- (see resetRun); a deleted descendant's ID is free, and the next run
-- created under it (typically a child of the new run that takes the same
-- ID) goes on from the token kept here, which its creation statement
-- reads and then deletes, so that a holder of the deleted run's lease,
-- which may not have heard yet that it lost it, never matches a lease of
-- the new run (fencing compares the ID and the token). The statement that
-- deletes the family (dropFamily) writes the rows. A row stays until a
-- run takes its ID again.
-- {schema} is replaced by the store's quoted schema name.
--
-- The table is empty but for the IDs of deleted descendants not yet
-- taken again: every creation reads it by the primary key. The ID has the
-- collation of runs.id, so that the two compare without a COLLATE clause.
CREATE TABLE {schema}.run_tokens (
    id    text   NOT NULL PRIMARY KEY,
    token bigint NOT NULL
);
