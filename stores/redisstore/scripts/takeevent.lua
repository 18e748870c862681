-- takeevent resolves a running run's wait at once without parking it
-- (TakeEvent): an existing checkpoint of a case, or a buffered event
-- consumed as its case's checkpoint, as suspend delivers it; the lease is
-- then extended. The active step stays.
-- KEYS[1]: the run hash, KEYS[2]: its checkpoints.
-- ARGV[1]: prefix, ARGV[2]: clock; ARGV[3]: token, ARGV[4]: lease length
-- (µs, 0 for none), ARGV[5]: run id, ARGV[6..8]: the wait's key, topic
-- and kind as given ("" for an event wait), ARGV[9]: its further cases as
-- encodeAlso writes them ("" for none).
-- Reply: {NONE} | {DELIVERED, encoding of the checkpoint, its key} |
-- {LEASELOST}.
local function main()
  local bad, st, ru, wk, preq, ex = fence(ARGV[5])
  if bad then return bad end
  local r, lf = KEYS[1], tonumber(ARGV[4])
  local have, hkey = take_case(r, KEYS[2], ARGV[5], wait_cases(ARGV[6], ARGV[7], ARGV[8], ARGV[9]), ex)
  if not have then return {'NONE'} end
  redis.call('HSET', r, 'ua', NOWS)
  if lf > 0 then extend(r, ru, lf) end
  return {'DELIVERED', have, hkey}
end
