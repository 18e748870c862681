-- resume undoes a pause (Resume).
-- KEYS[1]: the run hash.
-- ARGV[1]: prefix, ARGV[2]: clock; ARGV[3]: run id.
-- Reply: {OK} | {NOTFOUND} | {INVALID}.
local function main()
  local r, id = KEYS[1], ARGV[3]
  local st, wf, ready, preq, qu, ln, pt, pr, qf = unpack(redis.call('HMGET', r, 'st', 'wf', 'ready', 'preq', 'qu', 'ln', 'pt', 'pr', 'qf'))
  if not st then return {'NOTFOUND'} end
  if st == 'running' and preq then
    redis.call('HDEL', r, 'preq')
    redis.call('HSET', r, 'ua', NOWS)
    return {'OK'}
  end
  if st ~= 'paused' then return {'INVALID'} end
  local ru = run_of(id, wf, qu, ln, pt, pr, qf)
  if ready and tonumber(ready) <= NOW then
    set_status(r, ru, st, 'queued', ready)
    WOKE = true
  else
    set_status(r, ru, st, 'waiting')
  end
  if ready then ready_add(ru, ready) end
  return {'OK'}
end
