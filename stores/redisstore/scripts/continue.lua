-- continue ends a run's current execution as continued and begins the
-- next with a new input, under the lease (ContinueAsNew). The ended
-- execution is recorded in the executions list and its checkpoints and
-- attempts are renamed to its own keys, as restart.lua does, so the new
-- execution's keys start empty and its replay reads nothing of earlier
-- executions however many there were. Buffered events, parent, deadline,
-- a requested cancellation (cq) and progress (unless one is given) stay
-- with the run; wait, suspend state, output, error, active step and
-- recoveries go. The lease is released and the run is queued, ready now,
-- or paused when a pause was requested. When given a child error, the
-- run's descendants meet their parent policy as in complete.lua
-- (terminate_children).
-- KEYS[1]: the run hash, KEYS[2]: its checkpoints, KEYS[3]: its attempts,
-- KEYS[4]: its executions list.
-- ARGV[1]: prefix, ARGV[2]: clock; ARGV[3]: token, ARGV[4]: run id,
-- ARGV[5]: the new execution's marked input, ARGV[6]: marked progress to
-- publish ("" keeps the run's), ARGV[7]: the descendants' error JSON (""
-- to leave them alone), ARGV[8]: the marked reason of the cancellations
-- it requests.
-- Reply: {OK} | {LEASELOST, status, token, lease until, now} as in
-- heartbeat.lua.
local function main()
  local r, c, a, x, id = KEYS[1], KEYS[2], KEYS[3], KEYS[4], ARGV[4]
  local st, tok, wf, lu, preq, ex, sa, ca, xf, xk, qu, ln, pt, pr, qf = unpack(redis.call('HMGET', r,
    'st', 'tok', 'wf', 'lu', 'preq', 'ex', 'sa', 'ca', 'xf', 'xk', 'qu', 'ln', 'pt', 'pr', 'qf'))
  if st ~= 'running' or tok ~= ARGV[3] then
    return {'LEASELOST', st or '', tok or '', lu or '', NOWS}
  end
  ex = tonumber(ex or '1')
  -- the ended execution, as restart.lua records it: number, started,
  -- ended, status, forked from, error JSON (none) and fork key
  redis.call('RPUSH', x, f(ex) .. '\n' .. (sa or ca) .. '\n' .. NOWS .. '\ncontinued\n' ..
    (xf or '0') .. '\n\n' .. (xk or ''))
  if redis.call('EXISTS', c) == 1 then redis.call('RENAME', c, cxkey(ex, id)) end
  if redis.call('EXISTS', a) == 1 then redis.call('RENAME', a, axkey(ex, id)) end
  clear_wait(r, id)
  redis.call('HDEL', r, 'ss', 'out', 'err', 'preq', 'act', 'ea', 'pend', 'xf', 'xk')
  local ru = run_of(id, wf, qu, ln, pt, pr, qf)
  release(r, ru)
  redis.call('HSET', r, 'in', ARGV[5], 'rec', '0', 'ready', NOWS, 'ex', f(ex + 1), 'sa', NOWS, 'ua', NOWS)
  if ARGV[6] ~= '' then redis.call('HSET', r, 'pg', ARGV[6]) end
  if ARGV[7] ~= '' then terminate_children(id, ARGV[7], ARGV[8], {}) end
  if preq then
    set_status(r, ru, st, 'paused')
    return {'OK'}
  end
  ready_add(ru, NOWS)
  set_status(r, ru, st, 'queued', NOWS)
  WOKE = true
  return {'OK'}
end
