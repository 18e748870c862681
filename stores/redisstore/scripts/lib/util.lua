-- Shared helpers: plain functions of their arguments.
-- KEYS and ARGV: none read.

-- f formats a number as an integer: Lua's own number-to-string conversion
-- keeps 14 digits only, too few for microseconds since the epoch.
local function f(n) return string.format('%.0f', n) end

-- finished reports whether a run status is final.
local function finished(st)
  return st == 'complete' or st == 'errored' or st == 'terminated'
end
