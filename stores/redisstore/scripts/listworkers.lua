#!lua flags=allow-oom
-- listworkers deletes the expired worker records and returns the others
-- (ListWorkers). It writes nothing but deletions, which free memory, so
-- it is allowed to run on a server out of memory: the live workers are
-- still listed then.
-- KEYS[1]: the workers hash, KEYS[2]: the workers' expiry set.
-- ARGV[1]: prefix, ARGV[2]: clock.
-- Reply: HGETALL of the workers hash: per worker its ID and its record,
-- heartbeat \n expiry \n JSON.
local function main()
  expire_workers(KEYS[1], KEYS[2])
  return redis.call('HGETALL', KEYS[1])
end
