-- Shared helpers: creating runs, for CreateRuns and WriteSchedule.
-- KEYS and ARGV: none read; the callers pass each run's fields.

-- create_run creates run hash r from the twelve entries of a after a[b]
-- unless it exists, and replies as create.lua does for it. The entries:
-- id, workflow, parent id, parent policy, marked input, start time (µs,
-- '' for now: a run whose start time is ahead waits queued until then),
-- deadline (µs, '' for none), queue ('' for the default queue),
-- partition ('' for none), priority ('' for 0), workflow version (''
-- for 0) and headers (JSON, '' for none). A version other than 0 gives
-- the run lanes of its own and goes in the versions set of its queue and
-- workflow.
local function create_run(r, a, b)
  local id, wf, parent, policy, input = a[b + 1], a[b + 2], a[b + 3], a[b + 4], a[b + 5]
  if redis.call('EXISTS', r) == 1 then return {0, redis.call('HGETALL', r)} end
  local ready = NOWS
  if a[b + 6] ~= '' and tonumber(a[b + 6]) > NOW then ready = a[b + 6] end
  local qu, pt, pr, vr = a[b + 8], a[b + 9], a[b + 10], a[b + 11]
  if qu == '' or qu == 'default' then qu = nil end
  if pt == '' then pt = nil end
  if pr == '' or pr == '0' then pr = nil end
  if vr == '' or vr == '0' then vr = nil end
  local ln = lane(qu, pr, vr)
  -- the run hash's fields, written with the status in one HSET
  local h = {'id', id, 'wf', wf, 'pa', parent, 'in', input,
    'ready', ready, 'tok', '0', 'rec', '0', 'seq', '0', 'ca', NOWS,
    'ex', '1', 'sa', NOWS}
  local function put(k, v) h[#h + 1] = k; h[#h + 1] = v end
  if policy ~= '' then put('pp', policy) end
  if a[b + 7] ~= '' then put('dl', a[b + 7]) end
  if a[b + 12] ~= '' then put('hd', a[b + 12]) end
  if qu then put('qu', qu) end
  if ln ~= '' then put('ln', ln) end
  if pt then put('pt', pt) end
  if pr then put('pr', pr) end
  if vr then
    put('vr', vr)
    redis.call('SADD', versionset(qu or 'default', wf), vr)
  end
  if parent ~= '' then redis.call('ZADD', chkey(parent), 0, id) end
  local ru = run_of(id, wf, qu, ln, pt, pr)
  redis.call('ZADD', idx_all(), 0, id)
  redis.call('ZADD', idx_wf(wf), 0, id)
  if qu then
    redis.call('ZADD', idx_q(qu), 0, id)
    redis.call('SADD', queue_names(), qu)
  end
  set_status(r, ru, nil, 'queued', ready, unpack(h))
  ready_add(ru, ready)
  WOKE = true -- a delayed run too: engines learn of its wake time
  return {1, redis.call('HGETALL', r)}
end
