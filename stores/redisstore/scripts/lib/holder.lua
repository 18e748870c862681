-- Shared helpers: the writes of a lease's holder that more than one
-- script makes, a step's checkpoint (checkpoint.lua, ride.lua) and a
-- run's completion (complete.lua, ride.lua).
-- KEYS: write_step reads KEYS[1..3], the run hash, its checkpoints and
-- its attempts; complete_run reads none.
-- ARGV: write_step reads ARGV[3..12] as checkpoint.lua describes them,
-- and the attempts from the index its caller gives; complete_run reads
-- the table and index its caller gives.

-- write_step writes a step's checkpoint under the lease (see
-- checkpoint.lua for its arguments and replies), with the encoded
-- attempts from ARGV[at] on. It returns the reply, and after an OK reply
-- (the checkpoint written, no pause taking effect with it) the run's
-- status and the run (run_of) too, for a caller that completes it.
-- Such a caller says so with ending: the lease is then not put back in
-- the lease set only for finish to take it out.
--
-- Every step of every run calls it, so it makes as few calls as it can:
-- the fence's HMGET also reads the sequence counter, the active step
-- (cleared only when set) and the cancellation request, the checkpoint
-- goes in with HSETNX (which finds an existing one), and the run hash's
-- fields are written in one HSET.
local function write_step(at, ending)
  local bad, st, ru, wk, preq, ex, seq, act, cq = fence(ARGV[5], 'seq', 'act', 'cq')
  if bad then return bad end
  local cr = cq and '1' or ''
  local r, c, a, id, lf, key = KEYS[1], KEYS[2], KEYS[3], ARGV[5], tonumber(ARGV[4]), ARGV[6]
  local lu = f(NOW + lf)
  seq = f(tonumber(seq or '0') + 1)
  -- the encoding put_cp writes (see cp_split)
  local b = seq .. '\n' .. NOWS .. '\n' .. ARGV[7] .. '\n' .. ARGV[8] .. '\n' .. ex .. '\n0\n' .. ARGV[9]
  local fresh = redis.call('HSETNX', c, key, b) == 1
  if not (fresh and ending and not preq) then redis.call('ZADD', leaseq(ru.wf, ru.ln), lu, id) end
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
  if #ARGV >= at then
    redis.call('RPUSH', a, unpack(ARGV, at))
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
  return {'OK', cr}, st, ru
end

-- complete_run finishes run ru (hash r, status st), whose lease the
-- caller checked, as Complete does, from the nine entries of a from
-- a[i] on: final status, marked output, error JSON, the notify's run id
-- ('' for none), topic and marked payload, marked progress ('' leaves
-- the run's as it is), the descendants' error JSON ('' leaves them
-- alone) and the marked reason of the cancellations it requests. It
-- ends the run's execution (finish), terminates with that error every
-- unfinished descendant that terminates with its parent and requests
-- the cancellation of those cancelled with it, as terminate.lua does,
-- and sends the notify last; it returns what send_notify returns.
local function complete_run(r, ru, st, a, i)
  if a[i + 6] ~= '' then
    finish(r, ru, st, a[i], 'out', a[i + 1], 'err', a[i + 2], 'pg', a[i + 6])
  else
    finish(r, ru, st, a[i], 'out', a[i + 1], 'err', a[i + 2])
  end
  if a[i + 7] ~= '' then terminate_children(ru.id, a[i + 7], a[i + 8], {}) end
  return send_notify(a[i + 3], a[i + 4], a[i + 5])
end
