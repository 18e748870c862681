-- The end of a script that may make a run ready now (one that sets WOKE):
-- it runs main, then publishes a wake-up on the prefix's wake channel, so
-- that subscribed workers claim at once instead of at their next poll.
-- A script that never sets WOKE ends with "return main()" instead.
-- KEYS and ARGV: none read.
local res = main()
if WOKE then redis.call('PUBLISH', wake_channel(), '1') end
return res
