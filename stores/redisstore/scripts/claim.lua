-- claim leases ready runs and runs whose lease expired (Claim), from the
-- named queues, enforcing their limits, of the workflow versions named.
-- KEYS: the ready set and the lease set of each workflow in the first
-- named queue at priority 0 and version 0 (so that a cluster routes the
-- script; the script builds every key itself).
-- ARGV[1]: prefix, ARGV[2]: clock; ARGV[3]: owner, ARGV[4]: limit,
-- ARGV[5]: lease length (µs), ARGV[6]: the number n of workflows, then
-- per workflow its name, the number k of its versions to take (-1 for
-- any) and those k versions; then per queue its name, concurrency,
-- partition concurrency, rate and rate period (µs), 0 for no limit.
-- Reply: per claimed run {id, token, its claim fields as the claim leaves
-- them, as HMGET replies them: wf, pa, in, rec, ss, wk, wt, wn, wd, wa,
-- dl, lu, vr, hd, cq}.
--
-- The runs are taken level by level, highest priority first (level 0, the
-- lanes of the keys of layout 1, and the levels sets' others); within a
-- level, the expired leases of every named queue, workflow and version
-- first, then the ready runs, each oldest first. Each version of a
-- workflow has lanes of its own, so a claim reads only the lanes of the
-- versions it takes (for a workflow taken at any version, version 0's and
-- those of its versions set): runs of other versions cost it nothing. A
-- queue's limits are judged only for ready runs: a recovery holds the
-- place it had. A queue without limits costs nothing per run beyond the
-- claim itself.
local function main()
  local owner, limit, lf = ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5])
  local wfs, i = read_workflows(ARGV, 7, tonumber(ARGV[6]))
  local queues = {}
  for qi = i, #ARGV, 5 do
    local q = {name = ARGV[qi], conc = tonumber(ARGV[qi + 1]), pconc = tonumber(ARGV[qi + 2]),
      rate = tonumber(ARGV[qi + 3]), period = tonumber(ARGV[qi + 4])}
    q.free = q.conc == 0 and q.pconc == 0 and q.rate == 0
    if q.conc > 0 then q.running = queue_count(q.name, 'running') end
    if q.pconc > 0 then q.parts = {} end
    if q.rate > 0 then
      redis.call('ZREMRANGEBYSCORE', startsq(q.name), '-inf', f(NOW - q.period))
      q.started = redis.call('ZCARD', startsq(q.name))
      -- a window without starts leaves the queue no set of starts: the
      -- rated queues set then tells a create that leases a run of the
      -- queue to record its start (create_run); adding a member the set
      -- holds writes nothing
      if q.started == 0 then redis.call('SADD', rated_queues(), q.name) end
    end
    queues[#queues + 1] = q
  end
  -- every version the workflow's runs in the queue have lanes at: 0 and
  -- its versions set
  local function all_versions(qu, wf)
    local vs = {'0'}
    for _, v in ipairs(redis.call('SMEMBERS', versionset(qu, wf))) do vs[#vs + 1] = v end
    return vs
  end
  -- the levels: priority -> the groups {queue, workflow, versions to
  -- read, all versions (when known)} that have it
  local groups0 = {}
  local byprio, prios = {[0] = groups0}, {0}
  for _, q in ipairs(queues) do
    for _, w in ipairs(wfs) do
      local g = {q = q, wf = w.name, vers = w.vers}
      if not w.vers then
        g.vers = all_versions(q.name, w.name)
        g.all = g.vers
      end
      groups0[#groups0 + 1] = g
      for _, p in ipairs(redis.call('ZRANGE', levelset(q.name, w.name), 0, -1)) do
        local n = tonumber(p)
        if not byprio[n] then
          byprio[n] = {}
          prios[#prios + 1] = n
        end
        local l = byprio[n]
        l[#l + 1] = g
      end
    end
  end
  if #prios > 1 then table.sort(prios, function(a, b) return a > b end) end

  local lu = f(NOW + lf)
  local out = {}
  -- a claim looks at no more than this many runs that it passes over
  -- (a full partition's backlog), so that it stays short
  local budget = 1000

  -- the fields of the run hash a claimed run's reply holds, in order
  -- (decodeClaim), and those with the fields try decides by before them
  local reply = {'wf', 'pa', 'in', 'rec', 'ss', 'wk', 'wt', 'wn', 'wd', 'wa', 'dl', 'lu', 'vr', 'hd', 'cq'}
  local whole = {'st', 'pt', 'qf', 'tok', unpack(reply)}

  -- try leases run id from set s (recovery: its lease set): 'taken',
  -- 'gone' (not claimable after all: an index entry out of step with the
  -- run, dropped) or 'passed' (its queue, partition or rate window full).
  local function try(id, s, recovery)
    local r = rkey(id)
    local q = s.q
    -- the started flag matters only to a rate, so that no other claim
    -- reads it; the priority is the level's (s.pr); the token is read
    -- here and written with the status, not incremented by a call of its
    -- own. A run that cannot be passed over (a recovery, or a ready run
    -- of a queue without limits) is taken unless its entry is out of
    -- step, so its reply's fields are read with the others in one call.
    local st, rec, pt, qf, tok, sd, got
    if recovery or q.free then
      got = redis.call('HMGET', r, unpack(whole))
      st, pt, qf, tok, rec = got[1], got[2], got[3], got[4], got[8]
    elseif q.rate > 0 then
      st, rec, pt, qf, tok, sd = unpack(redis.call('HMGET', r, 'st', 'rec', 'pt', 'qf', 'tok', 'sd'))
    else
      st, rec, pt, qf, tok = unpack(redis.call('HMGET', r, 'st', 'rec', 'pt', 'qf', 'tok'))
    end
    if recovery then
      if st ~= 'running' then
        redis.call('ZREM', s.key, id)
        return 'gone'
      end
    else
      if st ~= 'queued' and st ~= 'waiting' then
        redis.call('ZREM', s.key, id)
        if st ~= 'running' then redis.call('ZREM', leaseq(s.wf, s.ln), id) end
        return 'gone'
      end
      if q.conc > 0 and q.running >= q.conc then
        q.full = true
        return 'passed'
      end
      if q.pconc > 0 and pt then
        local n = q.parts[pt]
        if not n then
          n = redis.call('SCARD', partset(q.name, pt))
          q.parts[pt] = n
        end
        if n >= q.pconc then return 'passed' end
      end
      if q.rate > 0 and not sd and q.started >= q.rate then return 'passed' end
    end
    rec = tonumber(rec or '0')
    if recovery then rec = rec + 1 end
    tok = tonumber(tok or '0') + 1
    redis.call('HSET', r, 'st', 'running', 'tok', f(tok), 'own', owner, 'lu', lu, 'rec', f(rec), 'ua', NOWS, 'sd', '1')
    -- the claim ends the run's hold, if any, in the call that clears
    -- its ready time and active step
    if recovery then
      redis.call('HDEL', r, 'ready', 'act', 'hl')
    else
      redis.call('HDEL', r, 'ready', 'act', 'qf', 'hl')
      redis.call('ZREM', s.key, id)
      if qf then redis.call('ZREM', queuedq(q.name), id) end
      index_status(run_of(id, s.wf, q.name, s.ln, pt, s.pr), st, 'running')
      if q.conc > 0 then q.running = q.running + 1 end
      if q.pconc > 0 and pt then q.parts[pt] = q.parts[pt] + 1 end
      if q.rate > 0 and not sd then
        record_start(q.name, id, f(tok))
        q.started = q.started + 1
      end
    end
    redis.call('ZADD', leaseq(s.wf, s.ln), lu, id)
    local fields
    if got then
      -- read before the claim's writes, which change only rec and lu
      -- of these
      fields = {}
      for j = 1, #reply do fields[j] = got[j + 4] end
      fields[4], fields[12] = f(rec), lu
    else
      fields = redis.call('HMGET', r, unpack(reply))
    end
    out[#out + 1] = {id, tok, fields}
    return 'taken'
  end

  -- take leases from the sets, due entries oldest first across them, in
  -- rounds: a round reads as many of each set as the claim still needs
  -- (more after the first, when runs were passed over) and goes on past
  -- those it passed over or dropped.
  local function take(sets, recovery)
    local offs, live = {}, {}
    for i = 1, #sets do offs[i], live[i] = 0, true end
    local first = true
    while #out < limit and budget > 0 do
      local need = limit - #out
      if not first then need = math.max(need, 100) end
      first = false
      local cands = {}
      for i, s in ipairs(sets) do
        if live[i] and (recovery or not s.q.full) then
          local got = redis.call('ZRANGEBYSCORE', s.key, '-inf', NOWS, 'WITHSCORES', 'LIMIT', offs[i], need)
          local n = #got / 2
          if n > 0 then s.seen = true end
          if n < need then live[i] = false end
          offs[i] = offs[i] + n
          for j = 1, #got, 2 do cands[#cands + 1] = {got[j], tonumber(got[j + 1]), i} end
        else
          live[i] = false
        end
      end
      if #cands == 0 then return end
      if #cands > 1 then
        table.sort(cands, function(a, b)
          if a[2] ~= b[2] then return a[2] < b[2] end
          return a[1] < b[1]
        end)
      end
      for _, c in ipairs(cands) do
        if #out >= limit then return end
        local i = c[3]
        local s = sets[i]
        if recovery or not s.q.full then
          if try(c[1], s, recovery) == 'passed' then
            budget = budget - 1
          else
            offs[i] = offs[i] - 1
          end
        end
      end
    end
  end

  for _, p in ipairs(prios) do
    if #out >= limit then break end
    local leases, ready = {}, {}
    local pr = nil
    if p ~= 0 then pr = f(p) end
    -- beside other groups, a group of several lanes (versions) is read
    -- only when one of its sets exists: one call for an idle workflow
    -- instead of two per version (empty[gi] when none does). A group
    -- alone at its level is read at once: the call would save reads only
    -- when the claim finds nothing there at all.
    local empty = {}
    local several = #byprio[p] > 1
    for gi, g in ipairs(byprio[p]) do
      local q, wf = g.q, g.wf
      local lns = {}
      for _, v in ipairs(g.vers) do lns[#lns + 1] = lane(q.name, pr, v) end
      if several and #lns > 1 then
        local keys = {}
        for _, ln in ipairs(lns) do
          keys[#keys + 1] = leaseq(wf, ln)
          keys[#keys + 1] = readyq(wf, ln)
        end
        empty[gi] = redis.call('EXISTS', unpack(keys)) == 0
      end
      if not empty[gi] then
        for _, ln in ipairs(lns) do
          leases[#leases + 1] = {key = leaseq(wf, ln), q = q, wf = wf, ln = ln, pr = pr, g = gi}
          ready[#ready + 1] = {key = readyq(wf, ln), q = q, wf = wf, ln = ln, pr = pr, g = gi}
        end
      end
    end
    take(leases, true)
    take(ready, false)
    if p ~= 0 then
      -- a level none of whose lanes, at any version, holds a run any
      -- more is forgotten
      local seen = {}
      for si, s in ipairs(leases) do
        if s.seen or ready[si].seen then seen[s.g] = true end
      end
      for gi, g in ipairs(byprio[p]) do
        if not seen[gi] then
          local gone = empty[gi] and g.all == g.vers
          if not gone then
            if not g.all then g.all = all_versions(g.q.name, g.wf) end
            local keys = {}
            for _, v in ipairs(g.all) do
              local ln = lane(g.q.name, pr, v)
              keys[#keys + 1] = leaseq(g.wf, ln)
              keys[#keys + 1] = readyq(g.wf, ln)
            end
            gone = redis.call('EXISTS', unpack(keys)) == 0
          end
          if gone then redis.call('ZREM', levelset(g.q.name, g.wf), pr) end
        end
      end
    end
  end
  return out
end
