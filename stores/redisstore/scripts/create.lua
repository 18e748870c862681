-- create inserts runs (CreateRuns), each in its execution 1, started now,
-- and a child in its parent's children index.
-- KEYS: the run hashes, one per run.
-- ARGV[1]: prefix, ARGV[2]: clock; ARGV[3...]: per run its id, workflow,
-- parent id, parent policy, marked input, start time (micros, '' for
-- now: a run whose start time is ahead waits queued until then) and
-- deadline (micros, '' for none).
-- Reply: per run {created (1 or 0), HGETALL of the run hash}.
local function main()
  local out = {}
  for i = 1, #KEYS do
    local r = KEYS[i]
    local b = 2 + (i - 1) * 7
    local id, wf, parent, policy, input = ARGV[b + 1], ARGV[b + 2], ARGV[b + 3], ARGV[b + 4], ARGV[b + 5]
    local ready = NOWS
    if ARGV[b + 6] ~= '' and tonumber(ARGV[b + 6]) > NOW then ready = ARGV[b + 6] end
    if redis.call('EXISTS', r) == 1 then
      out[i] = {0, redis.call('HGETALL', r)}
    else
      redis.call('HSET', r, 'id', id, 'wf', wf, 'pa', parent, 'in', input,
        'ready', ready, 'tok', '0', 'rec', '0', 'seq', '0', 'ca', NOWS,
        'ex', '1', 'sa', NOWS)
      if policy ~= '' then redis.call('HSET', r, 'pp', policy) end
      if ARGV[b + 7] ~= '' then redis.call('HSET', r, 'dl', ARGV[b + 7]) end
      if parent ~= '' then redis.call('ZADD', chkey(parent), 0, id) end
      redis.call('ZADD', idx_all(), 0, id)
      redis.call('ZADD', idx_wf(wf), 0, id)
      set_status(r, id, wf, nil, 'queued')
      redis.call('ZADD', readyq(wf), ready, id)
      WOKE = true -- a delayed run too: engines learn of its wake time
      out[i] = {1, redis.call('HGETALL', r)}
    end
  end
  return out
end
