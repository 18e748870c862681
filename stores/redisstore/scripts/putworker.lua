-- putworker records a worker, replacing its earlier record, stamped with
-- the store's clock: its heartbeat is now and its expiry now+TTL
-- (PutWorker). The records that expired go first.
-- KEYS[1]: the workers hash, KEYS[2]: the workers' expiry set.
-- ARGV[1]: prefix, ARGV[2]: clock; ARGV[3]: worker ID, ARGV[4]: TTL (µs),
-- ARGV[5]: the rest of the record as JSON (see workerEntry).
-- Reply: {OK}.
local function main()
  local wr, wx, id = KEYS[1], KEYS[2], ARGV[3]
  expire_workers(wr, wx)
  local ex = f(NOW + tonumber(ARGV[4]))
  redis.call('HSET', wr, id, NOWS .. '\n' .. ex .. '\n' .. ARGV[5])
  redis.call('ZADD', wx, ex, id)
  return {'OK'}
end
