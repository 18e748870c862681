-- resume undoes a pause (Resume).
-- KEYS[1]: the run hash.
-- ARGV[1]: prefix, ARGV[2]: clock; ARGV[3]: run id.
-- Reply: {OK} | {NOTFOUND} | {INVALID}.
local function main()
  local r, id = KEYS[1], ARGV[3]
  local st, wf, ready, preq = unpack(redis.call('HMGET', r, 'st', 'wf', 'ready', 'preq'))
  if not st then return {'NOTFOUND'} end
  if st == 'running' and preq then
    redis.call('HDEL', r, 'preq')
    redis.call('HSET', r, 'ua', NOWS)
    return {'OK'}
  end
  if st ~= 'paused' then return {'INVALID'} end
  if ready and tonumber(ready) <= NOW then
    set_status(r, id, wf, st, 'queued')
    WOKE = true
  else
    set_status(r, id, wf, st, 'waiting')
  end
  if ready then redis.call('ZADD', readyq(wf), ready, id) end
  return {'OK'}
end
