-- suspend parks a running run under its lease (Suspend), first taking back
-- a refused event when asked.
-- KEYS[1]: the run hash, KEYS[2]: its checkpoints, KEYS[3]: its attempts
-- (the current execution's).
-- ARGV[1]: prefix, ARGV[2]: clock; ARGV[3]: token, ARGV[4]: lease length
-- (µs, 0 for none), ARGV[5]: run id, ARGV[6]: "1" when a checkpoint is
-- given, ARGV[7..10]: its key, kind, error JSON and result (as
-- checkpoint.lua's ARGV[9]),
-- ARGV[11]: "1" when a wait is given, ARGV[12..15]: its key, topic, kind
-- as given ("" for an event wait) and deadline (µs, "" for none),
-- ARGV[16]: ready time (µs, "" for none), ARGV[17]: marked suspend state,
-- ARGV[18]: "1" when a refusal is given, ARGV[19..20]: the key of the
-- event checkpoint it takes back and the encoded attempt that records why,
-- ARGV[21]: marked progress to publish ("" leaves the run's), ARGV[22]:
-- the wait's further cases as encodeAlso writes them ("" for none),
-- ARGV[23]: the hold, JSON ("" for none), recorded when the run parks;
-- a run parked without one is left with none. ARGV[24]: "1" when the
-- worker has seen the run's requested cancellation; without it, a run
-- whose cancellation is requested (cq) and that is not held parks ready
-- now, whatever its ready time, so that a worker takes it again at once.
-- Reply: {PARKED} | {PAUSED} | {DELIVERED, encoding of the checkpoint, its
-- key} | {LEASELOST} | {INVALID} when the refused key has no event
-- checkpoint.
local function main()
  local bad, st, ru, wk, preq, ex, cq = fence(ARGV[5], 'cq')
  if bad then return bad end
  local r, c, lf, id = KEYS[1], KEYS[2], tonumber(ARGV[4]), ARGV[5]
  if ARGV[18] == '1' then
    local old = redis.call('HGET', c, ARGV[19])
    if not old or select(3, cp_split(old)) ~= 'event' then return {'INVALID'} end
    redis.call('HDEL', c, ARGV[19])
    redis.call('RPUSH', KEYS[3], ARGV[20])
    redis.call('HSET', r, 'pend', '1')
  end
  redis.call('HSET', r, 'ua', NOWS)
  redis.call('HDEL', r, 'act', 'hl')
  if ARGV[21] ~= '' then redis.call('HSET', r, 'pg', ARGV[21]) end
  if ARGV[6] == '1' then write_cp(r, c, ARGV[7], ARGV[8], ARGV[9], ARGV[10], ex) end
  if ARGV[11] == '1' then
    local cases = wait_cases(ARGV[12], ARGV[13], ARGV[14], ARGV[22])
    local have, hkey = take_case(r, c, id, cases, ex)
    if have then
      if lf > 0 then extend(r, ru, lf) end
      return {'DELIVERED', have, hkey}
    end
    clear_wait(r, id)
    redis.call('HSET', r, 'wk', ARGV[12], 'wt', ARGV[13], 'wn', ARGV[14])
    if ARGV[15] ~= '' then redis.call('HSET', r, 'wd', ARGV[15]) end
    if ARGV[22] ~= '' then redis.call('HSET', r, 'wa', ARGV[22]) end
    for _, cs in ipairs(cases) do redis.call('SADD', waitset(cs[2]), id) end
  end
  release(r, ru)
  if ARGV[17] == '' then redis.call('HDEL', r, 'ss') else redis.call('HSET', r, 'ss', ARGV[17]) end
  if ARGV[23] ~= '' then redis.call('HSET', r, 'hl', ARGV[23]) end
  local ready = ARGV[16]
  if cq and ARGV[24] ~= '1' and ARGV[23] == '' and (ready == '' or tonumber(ready) > NOW) then
    ready = NOWS -- its worker has yet to see the cancellation
  end
  if ready == '' then redis.call('HDEL', r, 'ready') else redis.call('HSET', r, 'ready', ready) end
  if preq then
    redis.call('HDEL', r, 'preq')
    set_status(r, ru, st, 'paused')
    return {'PAUSED'}
  end
  if ready ~= '' and tonumber(ready) <= NOW then
    set_status(r, ru, st, 'queued', ready)
    WOKE = true
  else
    set_status(r, ru, st, 'waiting')
  end
  if ready ~= '' then ready_add(ru, ready) end
  return {'PARKED'}
end
