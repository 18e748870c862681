#!lua flags=no-writes
-- steps reads one execution's checkpoints and attempts in one consistent
-- read (LoadReplay, ListSteps): the current execution's from the run's
-- own keys, an ended one's from the keys a restart renamed them to.
-- KEYS[1]: the run hash, KEYS[2]: its checkpoints, KEYS[3]: its attempts.
-- ARGV[1]: prefix, ARGV[2]: clock (unused); ARGV[3]: run id, ARGV[4]: the
-- execution ("0" for the current one), ARGV[5]: "1" to read the attempts,
-- "" to read them only when some may lack their checkpoint (replay).
-- Reply: {NOTFOUND} | {BADARG, current execution} for an execution the run
-- never had | {OK, execution, HGETALL of the checkpoints, the attempts}.
local function main()
  local id, n = ARGV[3], tonumber(ARGV[4])
  local ok, ex, pend = unpack(redis.call('HMGET', KEYS[1], 'id', 'ex', 'pend'))
  if not ok then return {'NOTFOUND'} end
  ex = tonumber(ex or '1')
  if n == 0 then n = ex end
  if n > ex then return {'BADARG', f(ex)} end
  local c, a = KEYS[2], KEYS[3]
  if n < ex then c, a = cxkey(n, id), axkey(n, id) end
  local atts = {}
  if ARGV[5] == '1' or pend then atts = redis.call('LRANGE', a, 0, -1) end
  return {'OK', n, redis.call('HGETALL', c), atts}
end
