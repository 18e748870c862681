-- The start of every script, after the "#!lua" shebang that scripts.go
-- writes first.
-- ARGV[1]: the key prefix, P, that every key starts with.
-- ARGV[2]: the clock override in microseconds since the epoch, or "" for
-- the server's TIME (read by clock.lua).
-- WOKE: set by a script that made a run ready now; the epilogue then
-- publishes a wake-up.
local P = ARGV[1]
local WOKE = false
