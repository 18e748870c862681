-- schedwrite creates or replaces a schedule compared by revision, and
-- creates the write's runs as create.lua does, in one atomic change
-- (WriteSchedule).
-- KEYS[1]: the schedule's hash, KEYS[2...]: the hashes of the runs.
-- ARGV[1]: prefix, ARGV[2]: clock; ARGV[3]: schedule ID, ARGV[4]: the
-- revision the stored schedule must have (0: none may exist), ARGV[5]:
-- the encoded schedule, ARGV[6]: its CheckAt (µs), ARGV[7]: "1" when
-- paused, ARGV[8...]: per run the 13 fields create_run reads
-- (lib/runs.lua), then per run created leased its place among them,
-- owner and lease length (µs) (create_runs).
-- Reply: {OK, revision, created at, updated at, per run {created,
-- HGETALL of the run hash}} | {NOTFOUND} | {CONFLICT, stored revision}.
local function main()
  local s, id, want = KEYS[1], ARGV[3], tonumber(ARGV[4])
  local cur, ca = unpack(redis.call('HMGET', s, 'rev', 'ca'))
  if want == 0 then
    if cur then return {'CONFLICT', cur} end
  elseif not cur then
    return {'NOTFOUND'}
  elseif tonumber(cur) ~= want then
    return {'CONFLICT', cur}
  end
  local rev = f(want + 1)
  ca = ca or NOWS
  redis.call('HSET', s, 'rev', rev, 'ca', ca, 'ua', NOWS, 'j', ARGV[5])
  redis.call('ZADD', sched_ids(), 0, id)
  if ARGV[7] == '1' then
    redis.call('ZREM', sched_due(), id)
  else
    redis.call('ZADD', sched_due(), ARGV[6], id)
  end
  return {'OK', rev, ca, NOWS, create_runs(KEYS, 2, #KEYS - 1, ARGV, 7)}
end
