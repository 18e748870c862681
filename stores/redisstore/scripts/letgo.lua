-- letgo lets go of a run that a Restart took from its lease holder while
-- the lease was live (Suspend releasing under that lease, after
-- suspend.lua found the lease lost): the new execution becomes ready now
-- (queued, or paused if paused since) and the old lease ends.
-- KEYS[1]: the run hash.
-- ARGV[1]: prefix, ARGV[2]: clock; ARGV[3]: token, ARGV[4]: run id,
-- ARGV[5]: the release's ready time (µs).
-- Reply: {OK} | {LEASELOST, status, token, lease until, now} as in
-- heartbeat.lua, when the lease is not one a live restart revoked or the
-- release is not ready by now.
local function main()
  local r, id = KEYS[1], ARGV[4]
  local st, tok, wf, lu, qu, ln, pt, pr, qf = unpack(redis.call('HMGET', r, 'st', 'tok', 'wf', 'lu', 'qu', 'ln', 'pt', 'pr', 'qf'))
  local fenced = (st == 'queued' or st == 'waiting' or st == 'paused') and tok == ARGV[3] and lu and tonumber(lu) > NOW
  if not fenced or tonumber(ARGV[5]) > NOW then
    return {'LEASELOST', st or '', tok or '', lu or '', NOWS}
  end
  redis.call('HSET', r, 'lu', NOWS, 'ready', NOWS, 'ua', NOWS)
  if st == 'paused' then return {'OK'} end
  local ru = run_of(id, wf, qu, ln, pt, pr, qf)
  ready_add(ru, NOWS)
  set_status(r, ru, st, 'queued', NOWS)
  WOKE = true
  return {'OK'}
end
