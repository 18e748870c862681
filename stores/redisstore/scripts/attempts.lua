-- attempts appends attempts and extends the lease under it
-- (RecordAttempts), or extends the lease and records the step running
-- (Heartbeat).
-- KEYS[1]: the run hash, KEYS[2]: its attempts (the current execution's).
-- ARGV[1]: prefix, ARGV[2]: clock; ARGV[3]: token, ARGV[4]: lease length
-- (µs), ARGV[5]: run id, ARGV[6]: "a" for RecordAttempts, which clears the
-- active step, "h" for Heartbeat, ARGV[7]: the encoded active step a
-- heartbeat records ("" for none), ARGV[8...]: encoded attempts.
-- Reply: {OK} | {LEASELOST}.
local function main()
  local bad, st, ru = fence(ARGV[5])
  if bad then return bad end
  local r = KEYS[1]
  if ARGV[6] == 'a' then
    redis.call('HDEL', r, 'act')
    if #ARGV >= 8 then
      redis.call('RPUSH', KEYS[2], unpack(ARGV, 8))
      -- attempts without their checkpoint: LoadReplay reads the list
      redis.call('HSET', r, 'pend', '1')
    end
  elseif ARGV[7] ~= '' then
    redis.call('HSET', r, 'act', ARGV[7])
  end
  extend(r, ru, tonumber(ARGV[4]))
  return {'OK'}
end
