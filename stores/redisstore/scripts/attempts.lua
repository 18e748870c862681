-- attempts appends attempts and extends the lease under it (RecordAttempts;
-- Heartbeat when there are none).
-- KEYS[1]: the run hash, KEYS[2]: its attempts.
-- ARGV[1]: prefix, ARGV[2]: clock; ARGV[3]: token, ARGV[4]: lease length
-- (µs), ARGV[5]: run id, ARGV[6...]: encoded attempts.
-- Reply: {OK} | {LEASELOST}.
local function main()
  local bad, st, wf = fence()
  if bad then return bad end
  if #ARGV >= 6 then redis.call('RPUSH', KEYS[2], unpack(ARGV, 6)) end
  extend(KEYS[1], ARGV[5], wf, tonumber(ARGV[4]))
  return {'OK'}
end
