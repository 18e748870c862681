#!lua flags=no-writes
-- executions reads a run's executions in one consistent read
-- (ListExecutions): the ended ones from its executions list, the current
-- one from the run hash.
-- KEYS[1]: the run hash, KEYS[2]: its executions list.
-- ARGV[1]: prefix, ARGV[2]: clock (unused).
-- Reply: {NOTFOUND} | {OK, the executions list, HMGET of the run's ex, sa,
-- ca, ea, st, err, xf, xk}.
local function main()
  local cur = redis.call('HMGET', KEYS[1], 'ex', 'sa', 'ca', 'ea', 'st', 'err', 'xf', 'xk')
  if not cur[5] then return {'NOTFOUND'} end
  return {'OK', redis.call('LRANGE', KEYS[2], 0, -1), cur}
end
