-- restart runs a run again from the top (Restart).
-- KEYS[1]: the run hash, KEYS[2]: its checkpoints, KEYS[3]: its attempts.
-- ARGV[1]: prefix, ARGV[2]: clock; ARGV[3]: run id.
-- Reply: {OK} | {NOTFOUND}.
local function main()
  local r, id = KEYS[1], ARGV[3]
  local st, wf = unpack(redis.call('HMGET', r, 'st', 'wf'))
  if not st then return {'NOTFOUND'} end
  redis.call('DEL', KEYS[2], KEYS[3])
  clear_wait(r, id)
  redis.call('HDEL', r, 'ss', 'out', 'err', 'preq')
  redis.call('HSET', r, 'rec', '0', 'ready', NOWS)
  release(r, id, wf)
  redis.call('ZADD', readyq(wf), NOWS, id)
  set_status(r, id, wf, st, 'queued')
  redis.call('HSET', r, 'ua', NOWS)
  WOKE = true
  return {'OK'}
end
