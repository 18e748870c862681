-- The clock, included in a script that reads NOW (or NOWS).
-- ARGV[2]: the clock override in microseconds since the epoch; "" means the
-- server's TIME, one clock for every worker however skewed their machines.
-- NOW is a number of microseconds, NOWS the same formatted as an integer.
local NOW
if ARGV[2] ~= '' then
  NOW = tonumber(ARGV[2])
else
  local t = redis.call('TIME')
  NOW = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local NOWS = string.format('%.0f', NOW)
