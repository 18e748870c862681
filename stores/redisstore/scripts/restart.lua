-- restart begins a run's next execution (Restart): the current one ends,
-- recorded in the executions list, its checkpoints and attempts renamed to
-- the ended execution's keys; the run is queued afresh, from the top or,
-- with a fork key, with copies of the checkpoints written before that
-- key's; the pending updates the copies do not deliver are buffered again
-- (rebuffer in lib/events.lua).
-- KEYS[1]: the run hash, KEYS[2]: its checkpoints, KEYS[3]: its attempts,
-- KEYS[4]: its executions list.
-- ARGV[1]: prefix, ARGV[2]: clock; ARGV[3]: run id, ARGV[4]: the fork key
-- ("" to run from the top), ARGV[5]: operation ID (a repeated call returns
-- the first reply instead of beginning yet another execution), ARGV[6]:
-- the prefix of update topics (storage.UpdateTopicPrefix), ARGV[7]: the
-- execution the run must be in ("" for any).
-- Reply: {OK} | {NOTFOUND} | {CONFLICT, current execution} when the run
-- is in another execution than ARGV[7], having written nothing |
-- {BADARG, current execution} when the current execution has no
-- checkpoint of the fork key.
-- A live lease fences the new execution (see storage.Store.Restart).
local function main()
  local prev = once_get(ARGV[5])
  if prev then return prev end
  local r, c, a, x, id, from = KEYS[1], KEYS[2], KEYS[3], KEYS[4], ARGV[3], ARGV[4]
  local st, wf, ex, sa, ca, ea, err, xf, xk, lu, qu, ln, pt, pr, qf = unpack(redis.call('HMGET', r,
    'st', 'wf', 'ex', 'sa', 'ca', 'ea', 'err', 'xf', 'xk', 'lu', 'qu', 'ln', 'pt', 'pr', 'qf'))
  if not st then return {'NOTFOUND'} end
  ex = tonumber(ex or '1')
  if ARGV[7] ~= '' and tonumber(ARGV[7]) ~= ex then return {'CONFLICT', f(ex)} end
  local keep = {}
  if from ~= '' then
    local cut = redis.call('HGET', c, from)
    if not cut then return {'BADARG', f(ex)} end
    local cutseq = tonumber((cp_split(cut)))
    local all = redis.call('HGETALL', c)
    for i = 1, #all, 2 do
      local seq, created, kind, cerr, _, _, out = cp_split(all[i + 1])
      seq = tonumber(seq)
      if seq < cutseq then keep[#keep + 1] = {seq, all[i], created, kind, cerr, out} end
    end
    table.sort(keep, function(p, q) return p[1] < q[1] end)
  end
  -- the ended execution: number, started, ended, status, forked from,
  -- error JSON and fork key
  redis.call('RPUSH', x, f(ex) .. '\n' .. (sa or ca) .. '\n' .. (ea or NOWS) .. '\n' .. st .. '\n' ..
    (xf or '0') .. '\n' .. (err or '') .. '\n' .. (xk or ''))
  if redis.call('EXISTS', c) == 1 then redis.call('RENAME', c, cxkey(ex, id)) end
  if redis.call('EXISTS', a) == 1 then redis.call('RENAME', a, axkey(ex, id)) end
  local nex = f(ex + 1)
  local taken = {}
  for _, k in ipairs(keep) do
    local seq = redis.call('HINCRBY', r, 'seq', 1)
    redis.call('HSET', c, k[2], f(seq) .. '\n' .. k[3] .. '\n' .. k[4] .. '\n' .. k[5] .. '\n' ..
      nex .. '\n' .. f(ex) .. '\n' .. k[6])
    if k[4] == 'update' then taken[string.sub(cp_out(k[6]), 2)] = true end
  end
  clear_wait(r, id)
  rebuffer(id, ARGV[6], taken)
  -- sd goes too: the new execution's first claim is a start, which a
  -- queue's rate counts; and so does a requested cancellation (cq),
  -- which ends with the execution
  redis.call('HDEL', r, 'ss', 'out', 'err', 'preq', 'act', 'ea', 'pend', 'xf', 'xk', 'pg', 'sd', 'cq')
  if finished(st) then
    redis.call('ZREM', fin_st(st), id)
    redis.call('ZREM', fin_wf_st(st, wf), id)
  end
  local ru = run_of(id, wf, qu, ln, pt, pr, qf)
  -- A lease that has not expired (a running run's, or one a restart
  -- fenced already) is kept, to be judged, and fences the new execution:
  -- ready at its expiry unless its holder lets go first (letgo.lua).
  local ready = NOWS
  if lu and tonumber(lu) > NOW then
    ready = lu
    redis.call('ZREM', leaseq(wf, ru.ln), id)
  else
    release(r, ru)
  end
  redis.call('HSET', r, 'rec', '0', 'ready', ready, 'ex', nex, 'sa', NOWS)
  if from ~= '' then redis.call('HSET', r, 'xf', f(ex), 'xk', from) end
  ready_add(ru, ready)
  set_status(r, ru, st, 'queued', ready)
  redis.call('HSET', r, 'ua', NOWS)
  if ready == NOWS then WOKE = true end
  return once_put(ARGV[5], {'OK'})
end
