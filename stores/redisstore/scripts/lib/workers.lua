-- Shared helpers: the records engines keep of themselves (PutWorker,
-- ListWorkers).
-- KEYS and ARGV: none read; the callers pass the keys.

-- expire_workers deletes the worker records of hash wr whose expiry, their
-- score in sorted set wx, is not after now: those of workers that stopped
-- recording themselves. It only deletes.
local function expire_workers(wr, wx)
  local gone = redis.call('ZRANGEBYSCORE', wx, '-inf', NOWS)
  if #gone == 0 then return end
  -- in batches, for unpack takes a bounded number of values
  for i = 1, #gone, 1000 do
    redis.call('HDEL', wr, unpack(gone, i, math.min(i + 999, #gone)))
  end
  redis.call('ZREMRANGEBYSCORE', wx, '-inf', NOWS)
end
