-- The codec key IDs each worker holds (storage.Worker.KeyIDs) and those of
-- payloads it met and could not open (MissingKeyIDs): an operator's
-- command refuses to seal with a key no live worker holds, and a worker
-- lacking a key says so in its record.
-- {schema} is replaced by the store's quoted schema name.

-- Nullable columns without a default (no table rewrite): NULL when the
-- worker lists none, as for every record stored before.
ALTER TABLE {schema}.workers
    ADD COLUMN key_ids text[],
    ADD COLUMN missing_key_ids text[];
