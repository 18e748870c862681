-- purge deletes up to a limit of finished runs that ended before a time,
-- oldest end first, each with every key it owns, its entries in every
-- index and the record of the start key it holds (drop_run in
-- lib/family.lua), or counts them (a dry run). It reads the finished
-- indexes (by status, or by status and workflow when workflows are
-- named), and passes over at most a bounded number of runs of excepted
-- workflows, so that one call stays short.
-- KEYS[1]: the all-runs index (it routes the script in a cluster; the
-- script builds every key from the prefix).
-- ARGV[1]: prefix, ARGV[2]: clock (unused); ARGV[3]: the time (µs) runs
-- must have ended before, ARGV[4]: limit, ARGV[5]: "1" for a dry run,
-- ARGV[6]: the number s of statuses, then the statuses, the number w of
-- workflows to keep (0: all), the workflows, and the workflows to leave
-- out.
-- Reply: {runs, events}: how many runs and buffered events were deleted
-- (or would be).
local function main()
  local before, limit, dry = '(' .. ARGV[3], tonumber(ARGV[4]), ARGV[5] == '1'
  local i = 6
  local sts, wfs, except = {}, {}, {}
  for j = i + 1, i + tonumber(ARGV[i]) do sts[#sts + 1] = ARGV[j] end
  i = i + 1 + #sts
  for j = i + 1, i + tonumber(ARGV[i]) do wfs[#wfs + 1] = ARGV[j] end
  i = i + 1 + #wfs
  for j = i, #ARGV do except[ARGV[j]] = true end
  local sources = {}
  for _, st in ipairs(sts) do
    if #wfs == 0 then
      sources[#sources + 1] = {key = fin_st(st), st = st}
    else
      for _, wf in ipairs(wfs) do sources[#sources + 1] = {key = fin_wf_st(st, wf), st = st} end
    end
  end
  local runs, events, budget = 0, 0, 1000

  -- gone deletes run id with its keys and index entries (drop_run), or
  -- on a dry run counts its buffered events
  local function gone(id, st, wf, ex, pa, qu, sk)
    if not dry then
      events = events + drop_run(id, st, wf, ex, pa, qu, sk)
      return
    end
    for _, t in ipairs(redis.call('SMEMBERS', evtopics(id))) do
      events = events + redis.call('LLEN', evkey(id, t))
    end
  end

  local offs, live = {}, {}
  for j = 1, #sources do offs[j], live[j] = 0, true end
  local first = true
  while runs < limit and budget > 0 do
    local need = limit - runs
    if not first then need = math.max(need, 100) end
    first = false
    local cands = {}
    for j, s in ipairs(sources) do
      if live[j] then
        local got = redis.call('ZRANGEBYSCORE', s.key, '-inf', before, 'WITHSCORES', 'LIMIT', offs[j], need)
        local n = #got / 2
        if n < need then live[j] = false end
        offs[j] = offs[j] + n
        for k = 1, #got, 2 do cands[#cands + 1] = {got[k], tonumber(got[k + 1]), j} end
      end
    end
    if #cands == 0 then break end
    table.sort(cands, function(a, b)
      if a[2] ~= b[2] then return a[2] < b[2] end
      return a[1] < b[1]
    end)
    for _, c in ipairs(cands) do
      if runs >= limit then break end
      local id, s = c[1], sources[c[3]]
      local st, wf, ex, pa, qu, sk = unpack(redis.call('HMGET', rkey(id), 'st', 'wf', 'ex', 'pa', 'qu', 'sk'))
      if st ~= s.st then
        -- an entry out of step with its run (restarted since): dropped
        if not dry then
          redis.call('ZREM', s.key, id)
          offs[c[3]] = offs[c[3]] - 1
        end
      elseif except[wf] then
        budget = budget - 1
      else
        gone(id, st, wf, ex, pa, qu, sk)
        runs = runs + 1
        if not dry then offs[c[3]] = offs[c[3]] - 1 end
      end
    end
  end
  return {runs, events}
end
