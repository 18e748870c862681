-- Shared helpers: creating runs, for CreateRuns and WriteSchedule.
-- KEYS and ARGV: none read; the callers pass each run's fields.

-- new_run begins the creation of run hash r from the thirteen entries of
-- a after a[b]: id, workflow, parent id, parent policy, marked input,
-- start time (µs, '' for now: a run whose start time is ahead waits
-- queued until then), deadline (µs, '' for none), queue ('' for the
-- default queue), partition ('' for none), priority ('' for 0), workflow
-- version ('' for 0), headers (JSON, '' for none) and search attributes
-- (an at field, see lib/attrs.lua; '' for none). A version other than 0
-- gives the run lanes of its own and goes in the versions set of its
-- queue and workflow. When the run exists it returns nil and the reply
-- create.lua gives for it, having written nothing. Otherwise it puts the
-- run in its parent's children index, the listing indexes of no status,
-- the indexes by creation (all runs' and its workflow's) and its
-- attributes' indexes, and returns the run hash's fields (field, value pairs, which
-- the caller writes with the status in one HSET), the run (run_of) and
-- its token. The token goes on from the greater of tok (a string, nil
-- for '0': a replaced run's last token) and the token a deleted run of
-- the ID left (tokkey, see keep_token in lib/family.lua), whose key it
-- deletes: one GETDEL per run created, none for a run that exists. It
-- is the one after that for a run created leased (leased true), as a
-- claim's would be, and that one for any other, whose first claim takes
-- the next.
local function new_run(r, a, b, tok, leased)
  local id, wf, parent, policy, input = a[b + 1], a[b + 2], a[b + 3], a[b + 4], a[b + 5]
  if redis.call('EXISTS', r) == 1 then return nil, {0, redis.call('HGETALL', r)} end
  local n, kept = tonumber(tok or '0'), redis.call('GETDEL', tokkey(id))
  if kept and tonumber(kept) > n then n = tonumber(kept) end
  if leased then n = n + 1 end
  tok = f(n)
  local qu, pt, pr, vr = a[b + 8], a[b + 9], a[b + 10], a[b + 11]
  if qu == '' or qu == 'default' then qu = nil end
  if pt == '' then pt = nil end
  if pr == '' or pr == '0' then pr = nil end
  if vr == '' or vr == '0' then vr = nil end
  local ln = lane(qu, pr, vr)
  local h = {'id', id, 'wf', wf, 'pa', parent, 'in', input,
    'tok', tok, 'rec', '0', 'seq', '0', 'ca', NOWS, 'ex', '1', 'sa', NOWS}
  local function put(k, v) h[#h + 1] = k; h[#h + 1] = v end
  if policy ~= '' then put('pp', policy) end
  if a[b + 7] ~= '' then put('dl', a[b + 7]) end
  if a[b + 12] ~= '' then put('hd', a[b + 12]) end
  if a[b + 13] ~= '' then
    put('at', a[b + 13])
    attrs_add(id, NOWS, a[b + 13])
  end
  if qu then put('qu', qu) end
  if ln ~= '' then put('ln', ln) end
  if pt then put('pt', pt) end
  if pr then put('pr', pr) end
  if vr then
    put('vr', vr)
    redis.call('SADD', versionset(qu or 'default', wf), vr)
  end
  if parent ~= '' then redis.call('ZADD', chkey(parent), 0, id) end
  redis.call('ZADD', idx_all(), 0, id)
  redis.call('ZADD', idx_wf(wf), 0, id)
  redis.call('ZADD', idx_created(), NOWS, id)
  redis.call('ZADD', idx_wf_created(wf), NOWS, id)
  if qu then
    redis.call('ZADD', idx_q(qu), 0, id)
    redis.call('SADD', queue_names(), qu)
  end
  return h, run_of(id, wf, qu, ln, pt, pr), tok
end

-- create_run creates run hash r from the thirteen entries of a after a[b]
-- (see new_run) unless it exists, queued and ready at its start time,
-- and replies as create.lua does for it: {created (1 or 0), HGETALL of
-- the run hash}. A start policy's create (lib/start.lua) may give the
-- token tok its lease tokens continue from (nil for '0', see new_run)
-- and the time ready (µs, a string) it is ready at instead of its start
-- time.
local function create_run(r, a, b, tok, ready)
  local h, ru = new_run(r, a, b, tok, false)
  if not h then return ru end
  if not ready then
    ready = NOWS
    if a[b + 6] ~= '' and tonumber(a[b + 6]) > NOW then ready = a[b + 6] end
  end
  h[#h + 1] = 'ready'
  h[#h + 1] = ready
  set_status(r, ru, nil, 'queued', ready, unpack(h))
  ready_add(ru, ready)
  WOKE = true -- a delayed run too: engines learn of its wake time
  return {1, redis.call('HGETALL', r)}
end

-- create_leased creates run hash r from the thirteen entries of a after
-- a[b] (see new_run) unless it exists, leased to owner (an eager start),
-- and replies as create_run does. The run is as a claim leaves a ready
-- run it takes (see claim.lua): running, held by owner until now+lf (lf
-- in µs) with the token after the one its tokens go on from (1 unless
-- new_run found one), started, in its lane's lease set (and its
-- priority in the levels set, so that a claim finds the lease when it
-- expires) and in no ready set, holding its place in its queue and
-- partition. Its start is recorded for its queue's rate when a claim has
-- named one (the queue has a set of starts, or is in the rated queues
-- set): only such claims prune a set of starts, so a queue without a
-- rate keeps none. The run is not ready, so WOKE is left as it is. A
-- start policy's create may give the token tok its tokens go on from
-- (nil for '0', see new_run).
local function create_leased(r, a, b, owner, lf, tok)
  local h, ru
  h, ru, tok = new_run(r, a, b, tok, true)
  if not h then return ru end
  local id, lu, n = ru.id, f(NOW + lf), #h
  h[n + 1], h[n + 2], h[n + 3], h[n + 4], h[n + 5], h[n + 6] = 'own', owner, 'lu', lu, 'sd', '1'
  set_status(r, ru, nil, 'running', nil, unpack(h))
  redis.call('ZADD', leaseq(ru.wf, ru.ln), lu, id)
  if ru.pr then redis.call('ZADD', levelset(ru.qu, ru.wf), ru.pr, ru.pr) end
  if redis.call('EXISTS', startsq(ru.qu)) == 1 or redis.call('SISMEMBER', rated_queues(), ru.qu) == 1 then
    record_start(ru.qu, id, tok)
  end
  return {1, redis.call('HGETALL', r)}
end

-- create_runs creates n runs, of the hashes keys[k] to keys[k + n - 1],
-- from the entries of a after a[b]: thirteen per run (new_run), then three
-- per run to create leased: its place among the n (1 for the first), its
-- owner and its lease length (µs). It returns the replies of
-- create_run and create_leased, in order.
local function create_runs(keys, k, n, a, b)
  local leased, out = {}, {}
  for j = b + 1 + n * 13, #a, 3 do leased[tonumber(a[j])] = j end
  for i = 1, n do
    local j = leased[i]
    if j then
      out[i] = create_leased(keys[k + i - 1], a, b + (i - 1) * 13, a[j + 1], tonumber(a[j + 2]))
    else
      out[i] = create_run(keys[k + i - 1], a, b + (i - 1) * 13)
    end
  end
  return out
end
