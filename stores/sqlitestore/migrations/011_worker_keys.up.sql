-- The codec key IDs each worker holds (storage.Worker.KeyIDs) and those of
-- payloads it met and could not open (MissingKeyIDs): an operator's
-- command refuses to seal with a key no live worker holds, and a worker
-- lacking a key says so in its record.

-- JSON arrays of text, NULL when the worker lists none, as for every
-- record stored before.
ALTER TABLE workers ADD COLUMN key_ids TEXT;
ALTER TABLE workers ADD COLUMN missing_key_ids TEXT;
