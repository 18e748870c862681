-- interact writes a step's checkpoint under the lease, as checkpoint.lua
-- does, with the run's reply to one of its updates, its appends to its
-- streams and the search attributes it sets (Checkpoint with Reply,
-- Streams or Attributes), and with the run's completion when given, as
-- ride.lua does: all when the checkpoint is written, nothing of them
-- when it existed. The attributes are merged into the run's
-- (attrs_merge): a merge that would hold more than the most a run may
-- have refuses the checkpoint, before any write, unless it existed. The reply makes the update
-- replied unless it was already (the first reply stands); each stream
-- write appends its values at the stream's next offsets, each stamped
-- with the time, reopening a closed stream, and then closes it when
-- asked. Each reply written and each stream written is announced on the
-- ended channel (storage.UpdateAnnouncement, StreamAnnouncement), before
-- the run's end when the completion ends it. A reply to an update the
-- run does not have writes nothing.
-- KEYS[1]: the run hash, KEYS[2]: its checkpoints, KEYS[3]: its attempts
-- (the current execution's), KEYS[4]: its updates, KEYS[5]: its
-- replies, KEYS[6]: its stream metadata.
-- ARGV[1]: prefix, ARGV[2]: clock; ARGV[3..12]: as checkpoint.lua's;
-- ARGV[13]: "1" when a completion follows, in ARGV[14..22] as ride.lua's
-- ARGV[13..21]; then, from i (14, or 23 after a completion): the update
-- ID replied to ("" for none), the reply's marked output and error JSON;
-- at i+3 the number of stream writes, each its stream name, "1" to close
-- it, the number n of its values and the n marked values; then the
-- attributes to set, as an at field (lib/attrs.lua; "" for none), and the
-- most attributes a run may hold (storage.MaxAttributes); then the
-- encoded attempts.
-- Reply: checkpoint.lua's, and with a completion ride.lua's | {BADARG,
-- update ID} when the run has no update of the ID | {BADATTR, how many
-- the run would hold} when the merge would hold too many.
local function main()
  local id, ending = ARGV[5], ARGV[13] == '1'
  local i = 14
  if ending then i = 23 end
  local uid = ARGV[i]
  if uid ~= '' and redis.call('HEXISTS', KEYS[4], uid) == 0 then
    -- a holder that lost its lease hears that first
    local bad = fence(id)
    if bad then return bad end
    return {'BADARG', uid}
  end
  local writes, j = {}, i + 4
  for _ = 1, tonumber(ARGV[i + 3]) do
    local n = tonumber(ARGV[j + 2])
    writes[#writes + 1] = {ARGV[j], ARGV[j + 1] == '1', j + 3, n}
    j = j + 3 + n
  end
  local have, changes
  if ARGV[j] ~= '' then
    have, changes = attrs_merge(redis.call('HGET', KEYS[1], 'at'), ARGV[j], tonumber(ARGV[j + 1]))
    if not have and redis.call('HEXISTS', KEYS[2], ARGV[6]) == 0 then
      -- a holder that lost its lease hears that first
      local bad = fence(id)
      if bad then return bad end
      return {'BADATTR', changes}
    end
  end
  local res, st, ru = write_step(j + 2, ending)
  if res[1] == 'EXISTS' or res[1] == 'LEASELOST' then return res end
  if have then attrs_apply(KEYS[1], id, have, changes) end
  -- the reply: replied at \n error JSON \n marked output
  if uid ~= '' and redis.call('HSETNX', KEYS[5], uid, NOWS .. '\n' .. ARGV[i + 2] .. '\n' .. ARGV[i + 1]) == 1 then
    redis.call('PUBLISH', ended_channel(), '\31update\31' .. id .. '\31' .. uid)
  end
  local told = {}
  for _, w in ipairs(writes) do
    local name, at, n = w[1], w[3], w[4]
    local k = svkey(id, name)
    -- each value: written at \n marked value, pushed in bounded batches
    for from = at, at + n - 1, 1000 do
      local vals = {}
      for m = from, math.min(from + 999, at + n - 1) do vals[#vals + 1] = NOWS .. '\n' .. ARGV[m] end
      redis.call('RPUSH', k, unpack(vals))
    end
    -- the stream's state: closed (1 or 0) \n last written
    redis.call('HSET', KEYS[6], name, (w[2] and '1' or '0') .. '\n' .. NOWS)
    if not told[name] then
      told[name] = true
      redis.call('PUBLISH', ended_channel(), '\31stream\31' .. id .. '\31' .. name)
    end
  end
  if ending and res[1] == 'OK' then
    complete_run(KEYS[1], ru, st, ARGV, 14)
    return {'DONE', res[2]}
  end
  return res
end
