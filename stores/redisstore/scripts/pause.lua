-- pause pauses a run (Pause).
-- KEYS[1]: the run hash.
-- ARGV[1]: prefix, ARGV[2]: clock; ARGV[3]: run id.
-- Reply: {OK} | {NOTFOUND} | {INVALID}.
local function main()
  local r, id = KEYS[1], ARGV[3]
  local st, wf, qu, ln, pt, pr, qf = unpack(redis.call('HMGET', r, 'st', 'wf', 'qu', 'ln', 'pt', 'pr', 'qf'))
  if not st then return {'NOTFOUND'} end
  if finished(st) then return {'INVALID'} end
  if st == 'paused' then return {'OK'} end
  if st == 'running' then
    if redis.call('HEXISTS', r, 'preq') == 1 then return {'OK'} end
    redis.call('HSET', r, 'preq', '1', 'ua', NOWS)
    return {'OK'}
  end
  local ru = run_of(id, wf, qu, ln, pt, pr, qf)
  redis.call('ZREM', readyq(wf, ru.ln), id)
  set_status(r, ru, st, 'paused')
  return {'OK'}
end
