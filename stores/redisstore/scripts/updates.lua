#!lua flags=no-writes
-- updates reads a run's updates (GetUpdate, ListUpdates): one by its ID,
-- or those of a range of the run's update order.
-- KEYS[1]: the run's updates, KEYS[2]: its replies, KEYS[3]: its update
-- order.
-- ARGV[1]: prefix, ARGV[2]: clock (unused); ARGV[3]: the update ID, or
-- "" to read the order's range, ARGV[4] and ARGV[5]: the range's first
-- and last index (Seq - 1).
-- Reply: {update ID, encoded request, encoded reply ("" while pending),
-- ...} for each update found, in order.
local function main()
  local ids
  if ARGV[3] ~= '' then
    ids = {ARGV[3]}
  else
    ids = redis.call('LRANGE', KEYS[3], ARGV[4], ARGV[5])
  end
  local out = {}
  for _, u in ipairs(ids) do
    local b = redis.call('HGET', KEYS[1], u)
    if b then
      out[#out + 1] = u
      out[#out + 1] = b
      out[#out + 1] = redis.call('HGET', KEYS[2], u) or ''
    end
  end
  return out
end
