-- cancel requests a run's cancellation (Cancel): the first request wins,
-- a later one changes nothing (request_cancel in lib/state.lua).
-- KEYS[1]: the run hash.
-- ARGV[1]: prefix, ARGV[2]: clock; ARGV[3]: run id, ARGV[4]: the marked
-- reason.
-- Reply: {OK} | {NOTFOUND} | {INVALID}.
local function main()
  local st = redis.call('HGET', KEYS[1], 'st')
  if not st then return {'NOTFOUND'} end
  if finished(st) then return {'INVALID'} end
  request_cancel(KEYS[1], ARGV[3], ARGV[4])
  return {'OK'}
end
