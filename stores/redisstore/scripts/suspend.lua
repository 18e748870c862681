-- suspend parks a running run under its lease (Suspend), first taking back
-- a refused event when asked.
-- KEYS[1]: the run hash, KEYS[2]: its checkpoints, KEYS[3]: its attempts
-- (the current execution's).
-- ARGV[1]: prefix, ARGV[2]: clock; ARGV[3]: token, ARGV[4]: lease length
-- (µs, 0 for none), ARGV[5]: run id, ARGV[6]: "1" when a checkpoint is
-- given, ARGV[7..10]: its key, kind, error JSON and marked output,
-- ARGV[11]: "1" when a wait is given, ARGV[12..15]: its key, topic, kind
-- as given ("" for an event wait) and deadline (µs, "" for none),
-- ARGV[16]: ready time (µs, "" for none), ARGV[17]: marked suspend state,
-- ARGV[18]: "1" when a refusal is given, ARGV[19..20]: the key of the
-- event checkpoint it takes back and the encoded attempt that records why,
-- ARGV[21]: marked progress to publish ("" leaves the run's), ARGV[22]:
-- the wait's further cases as encodeAlso writes them ("" for none).
-- Reply: {PARKED} | {PAUSED} | {DELIVERED, encoding of the checkpoint, its
-- key} | {LEASELOST} | {INVALID} when the refused key has no event
-- checkpoint.
local function main()
  local bad, st, ru, wk, preq, ex = fence(ARGV[5])
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
  redis.call('HDEL', r, 'act')
  if ARGV[21] ~= '' then redis.call('HSET', r, 'pg', ARGV[21]) end
  if ARGV[6] == '1' then write_cp(r, c, ARGV[7], ARGV[8], ARGV[9], ARGV[10], ex) end
  if ARGV[11] == '1' then
    -- the cases in order, each {key, topic, kind as given}
    local cases = {{ARGV[12], ARGV[13], ARGV[14]}}
    if ARGV[22] ~= '' then
      for _, cs in ipairs(wait_also(ARGV[22])) do cases[#cases + 1] = cs end
    end
    local have, hkey
    for _, cs in ipairs(cases) do
      have = redis.call('HGET', c, cs[1])
      if have then
        hkey = cs[1]
        break
      end
    end
    if not have then
      -- the oldest event buffered on any case's topic: the head of that
      -- topic's list with the lowest sequence number
      local pick = 1
      if #cases > 1 then
        pick = nil
        local low
        for i, cs in ipairs(cases) do
          local head = redis.call('LINDEX', evkey(id, cs[2]), 0)
          if head then
            local seq = ev_split(head)
            if not low or seq < low then pick, low = i, seq end
          end
        end
      end
      if pick then
        local cs = cases[pick]
        local ev = redis.call('LPOP', evkey(id, cs[2]))
        if ev then
          local _, payload = ev_split(ev)
          hkey = cs[1]
          have = write_cp(r, c, hkey, delivery_kind(cs[3]), '', payload, ex)
        end
      end
    end
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
  local ready = ARGV[16]
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
