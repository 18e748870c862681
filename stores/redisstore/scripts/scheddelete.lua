-- scheddelete deletes a schedule and its index entries (DeleteSchedule).
-- KEYS[1]: the schedule's hash.
-- ARGV[1]: prefix, ARGV[2]: clock (unused); ARGV[3]: schedule ID.
-- Reply: {OK} | {NOTFOUND}.
local function main()
  if redis.call('DEL', KEYS[1]) == 0 then return {'NOTFOUND'} end
  redis.call('ZREM', sched_due(), ARGV[3])
  redis.call('ZREM', sched_ids(), ARGV[3])
  return {'OK'}
end
