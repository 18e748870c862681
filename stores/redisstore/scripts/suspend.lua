-- suspend parks a running run under its lease (Suspend).
-- KEYS[1]: the run hash, KEYS[2]: its checkpoints.
-- ARGV[1]: prefix, ARGV[2]: clock; ARGV[3]: token, ARGV[4]: lease length
-- (µs, 0 for none), ARGV[5]: run id, ARGV[6]: "1" when a checkpoint is
-- given, ARGV[7..10]: its key, kind, error JSON and marked output,
-- ARGV[11]: "1" when a wait is given, ARGV[12..15]: its key, topic,
-- delivery kind and deadline (µs, "" for none), ARGV[16]: ready time (µs,
-- "" for none), ARGV[17]: marked suspend state.
-- Reply: {PARKED} | {PAUSED} | {DELIVERED, encoding of the checkpoint} |
-- {LEASELOST}.
local function main()
  local bad, st, wf, wk, preq = fence()
  if bad then return bad end
  local r, c, lf, id = KEYS[1], KEYS[2], tonumber(ARGV[4]), ARGV[5]
  redis.call('HSET', r, 'ua', NOWS)
  if ARGV[6] == '1' then write_cp(r, c, ARGV[7], ARGV[8], ARGV[9], ARGV[10]) end
  if ARGV[11] == '1' then
    local key, topic, kind, deadline = ARGV[12], ARGV[13], ARGV[14], ARGV[15]
    local have = redis.call('HGET', c, key)
    if not have then
      local ev = redis.call('LPOP', evkey(id, topic))
      if ev then have = write_cp(r, c, key, kind, '', ev) end
    end
    if have then
      if lf > 0 then extend(r, id, wf, lf) end
      return {'DELIVERED', have}
    end
    clear_wait(r, id)
    redis.call('HSET', r, 'wk', key, 'wt', topic, 'wn', kind)
    if deadline ~= '' then redis.call('HSET', r, 'wd', deadline) end
    redis.call('SADD', waitset(topic), id)
  end
  release(r, id, wf)
  if ARGV[17] == '' then redis.call('HDEL', r, 'ss') else redis.call('HSET', r, 'ss', ARGV[17]) end
  local ready = ARGV[16]
  if ready == '' then redis.call('HDEL', r, 'ready') else redis.call('HSET', r, 'ready', ready) end
  if preq then
    redis.call('HDEL', r, 'preq')
    set_status(r, id, wf, st, 'paused')
    return {'PAUSED'}
  end
  if ready ~= '' and tonumber(ready) <= NOW then
    set_status(r, id, wf, st, 'queued')
    WOKE = true
  else
    set_status(r, id, wf, st, 'waiting')
  end
  if ready ~= '' then redis.call('ZADD', readyq(wf), ready, id) end
  return {'PARKED'}
end
