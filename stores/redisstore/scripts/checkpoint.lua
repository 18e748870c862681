-- checkpoint writes a step's checkpoint under the lease (Checkpoint),
-- publishing the run's progress when given, also when the checkpoint
-- existed.
-- KEYS[1]: the run hash, KEYS[2]: its checkpoints, KEYS[3]: its attempts
-- (the current execution's).
-- ARGV[1]: prefix, ARGV[2]: clock; ARGV[3]: token, ARGV[4]: lease length
-- (µs), ARGV[5]: run id, ARGV[6]: checkpoint key, ARGV[7]: kind, ARGV[8]:
-- error JSON, ARGV[9]: marked output, ARGV[10]: "1" when an attempt is of
-- another key than the checkpoint's, ARGV[11]: marked progress ("" leaves
-- the run's as it is), ARGV[12]: "1" when the worker is busy with other
-- steps (a requested pause then waits), ARGV[13...]: encoded attempts.
-- Reply: {OK, cr} | {PAUSED, cr} | {PAUSEREQ, cr} | {EXISTS, cr,
-- encoding of the stored checkpoint} | {LEASELOST}, cr "1" when the
-- run's cancellation is requested, else "".
--
-- Every step of every run calls it, so it makes as few calls as it can:
-- the fence's HMGET also reads the sequence counter, the active step
-- (cleared only when set) and the cancellation request, the checkpoint
-- goes in with HSETNX (which finds an existing one), and the run hash's
-- fields are written in one HSET.
local function main()
  local bad, st, ru, wk, preq, ex, seq, act, cq = fence(ARGV[5], 'seq', 'act', 'cq')
  if bad then return bad end
  local cr = cq and '1' or ''
  local r, c, a, id, lf, key = KEYS[1], KEYS[2], KEYS[3], ARGV[5], tonumber(ARGV[4]), ARGV[6]
  local lu = f(NOW + lf)
  seq = f(tonumber(seq or '0') + 1)
  -- the encoding put_cp writes (see cp_split)
  local b = seq .. '\n' .. NOWS .. '\n' .. ARGV[7] .. '\n' .. ARGV[8] .. '\n' .. ex .. '\n0\n' .. ARGV[9]
  local fresh = redis.call('HSETNX', c, key, b) == 1
  redis.call('ZADD', leaseq(ru.wf, ru.ln), lu, id)
  if act then redis.call('HDEL', r, 'act') end
  if not fresh then
    if ARGV[11] ~= '' then
      redis.call('HSET', r, 'lu', lu, 'ua', NOWS, 'pg', ARGV[11])
    else
      redis.call('HSET', r, 'lu', lu, 'ua', NOWS)
    end
    return {'EXISTS', cr, redis.call('HGET', c, key)}
  end
  if ARGV[11] ~= '' then
    redis.call('HSET', r, 'lu', lu, 'ua', NOWS, 'rec', '0', 'seq', seq, 'pg', ARGV[11])
  else
    redis.call('HSET', r, 'lu', lu, 'ua', NOWS, 'rec', '0', 'seq', seq)
  end
  if #ARGV >= 13 then
    redis.call('RPUSH', a, unpack(ARGV, 13))
    if ARGV[10] == '1' then redis.call('HSET', r, 'pend', '1') end
  end
  -- a checkpoint of any case's key (a wait's timeout) ends the wait
  if wk and wait_has_key(r, wk, key) then clear_wait(r, id) end
  if preq and ARGV[12] == '1' then return {'PAUSEREQ', cr} end
  if preq then
    redis.call('HDEL', r, 'preq')
    redis.call('HSET', r, 'ready', NOWS)
    release(r, ru)
    set_status(r, ru, st, 'paused')
    return {'PAUSED', cr}
  end
  return {'OK', cr}
end
